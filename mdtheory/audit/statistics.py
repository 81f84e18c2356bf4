"""The audit's statistics: the chi-square test of output counts against the target law, its power
and sample size, the TV estimates and bounds, and the combination of several positions.

Per position with N samples: Pearson's chi-square test of the output counts against p, tokens with
expected count below :data:`MIN_EXPECTED` pooled into cells (:func:`pool_cells`); several positions:
Bonferroni (:func:`bonferroni`). :func:`samples_for` is the N that detects every deviation of TV at
least a given value with probability :data:`POWER`; :func:`detectable_tv` states what a given N
detects. The derivations (power bound, sample-size rule, the bias of the plug-in TV, the inversion
behind the TV upper bound) are in papers/theory.md, section "The audit's statistics".
"""

from __future__ import annotations

import math

import numpy as np

from .._validate import as_distribution
from ..errors import InvalidInputError

__all__ = ["pool_cells", "law_test", "detectable_tv", "samples_for", "z_pvalues", "bonferroni",
           "DEFAULT_LEVEL", "TARGET_TV", "POWER", "MIN_EXPECTED", "MAX_SAMPLES"]

#: Default level of the output-law test (false-rejection rate of a lossless verifier).
DEFAULT_LEVEL = 0.01
#: The default sample size detects every deviation of this TV ...
TARGET_TV = 0.02
#: ... with this probability.
POWER = 0.9
#: Tokens with a smaller expected count are grouped into cells of at least this expected count.
MIN_EXPECTED = 10.0
#: Largest sample size the audit draws per position.
MAX_SAMPLES = 20_000_000


def pool_cells(p: np.ndarray, samples: int) -> tuple[np.ndarray, int, float]:
    """Cells of the chi-square test: sparse tokens grouped.

    Tokens with expected count below :data:`MIN_EXPECTED` are taken in increasing order of p and
    grouped into consecutive cells of expected count at least :data:`MIN_EXPECTED` (a short last
    group joins the one before it, or the rarest token that is not sparse).

    Returns
    -------
    cell : ndarray of int, shape (V,)
        Cell of each token; -1 where p = 0.
    k : int
        Number of cells.
    pool_mass : float
        p of the cells that hold two tokens or more: the TV that pooling can hide.

    >>> pool_cells(np.array([0.0, 0.01, 0.02, 0.03, 0.94]), 400)
    (array([-1,  0,  0,  1,  2]), 3, 0.03)
    """
    support = np.flatnonzero(p > 0)
    order = support[np.argsort(p[support], kind="stable")]
    expected = samples * p[order]
    cell = np.full(p.size, -1)
    k, acc, size = 0, 0.0, 0
    for tok, e in zip(order.tolist(), expected.tolist(), strict=True):
        if size and acc >= MIN_EXPECTED:  # close the current cell
            k, acc, size = k + 1, 0.0, 0
        cell[tok] = k
        acc, size = acc + e, size + 1
    k += 1 if order.size else 0
    if order.size and acc < MIN_EXPECTED and k > 1:  # a short last cell joins the one before
        cell[cell == k - 1] = k - 2
        k -= 1
    sizes = np.bincount(cell[support], minlength=k)
    multi = sizes[cell[support]] > 1
    return cell, k, float(p[support][multi].sum())


def _chi2(counts: np.ndarray, p: np.ndarray) -> tuple[float, int, int, float]:
    """(statistic, df, count outside supp(p), pooled mass) of one position's counts."""
    samples = int(counts.sum())
    cell, k, pool = pool_cells(p, samples)
    inside = cell >= 0
    observed = np.bincount(cell[inside], weights=counts[inside], minlength=k)
    expected = samples * np.bincount(cell[inside], weights=p[inside], minlength=k)
    stat = float(((observed - expected) ** 2 / expected).sum())
    return stat, k - 1, int(counts[~inside].sum()), pool


def law_test(counts, p) -> float:
    """p-value of Pearson's test that output ``counts`` (V,) come from p, sparse cells pooled.

    A count on a token with p = 0 gives 0; a single cell (p a point mass) gives 1 if nothing fell
    outside it.

    >>> law_test([50, 50], [0.5, 0.5])
    1.0
    >>> law_test([99, 1], [1.0, 0.0])
    0.0
    """
    from scipy import stats

    counts, p = np.asarray(counts, dtype=float), np.asarray(p, dtype=float)
    stat, df, outside, _ = _chi2(counts, p)
    if outside:
        return 0.0
    return float(stats.chi2.sf(stat, df)) if df > 0 else 1.0


def _noncentrality(df: int, alpha: float, power: float) -> float:
    """λ at which a non-central χ²_df exceeds its central upper-alpha quantile with ``power``."""
    from scipy import optimize, stats

    crit = stats.chi2.isf(alpha, df)
    hi = 1.0
    while stats.ncx2.sf(crit, df, hi) < power and hi < 1e9:
        hi *= 2.0
    return optimize.brentq(lambda lam: stats.ncx2.sf(crit, df, lam) - power, 0.0, hi, xtol=1e-10)


def detectable_tv(p, samples: int, level: float = DEFAULT_LEVEL, positions: int = 1,
                  power: float = POWER) -> float:
    """The smallest TV(r, p) that the test detects with probability ``power``, whatever r.

    .. math:: \\delta = p_{pool} + \\frac{k + \\sqrt{k^2 + N (\\lambda_{power}(k-1, A/B) + k/40)}}{2N}

    (see the module notes: Cauchy–Schwarz, and the mean shift of Pearson's statistic).

    >>> round(detectable_tv(np.full(50, 0.02), 32_623), 4)
    0.02
    """
    p = as_distribution(p, "p")
    _, k, pool = pool_cells(p, samples)
    if k <= 1:  # one cell: only mass outside supp(p) is seen (if p is a point mass)
        return float(min(1.0, pool + 1.0 - (1.0 - power) ** (1.0 / samples)))
    lam = _noncentrality(k - 1, level / positions, power) + k / (4 * MIN_EXPECTED)
    return float(min(1.0, pool + (k + math.sqrt(k * k + samples * lam)) / (2 * samples)))


def samples_for(tv: float, p, level: float = DEFAULT_LEVEL, positions: int = 1,
                power: float = POWER) -> int:
    """Smallest sample size (within 1%) at which :func:`detectable_tv` is at most ``tv``.

    Starts from :math:`(\\lambda_{power}(k-1, A/B) + k/40) / (4\\,tv^2) + k / tv` (k: support size)
    and grows by 1% while pooling costs more than that.

    >>> samples_for(0.02, np.full(50, 0.02))
    32623
    """
    p = as_distribution(p, "p")
    if not 0 < tv <= 1:
        raise InvalidInputError(f"the TV to detect must be in (0, 1], got {tv}")
    k = max(int(np.count_nonzero(p)), 2)
    lam = _noncentrality(k - 1, level / positions, power) + k / (4 * MIN_EXPECTED)
    n = math.ceil(lam / (4 * tv * tv) + k / tv)
    while detectable_tv(p, n, level, positions, power) > tv and n < MAX_SAMPLES:
        n = math.ceil(n * 1.01)
    return min(n, MAX_SAMPLES)


def _tv_upper(counts: np.ndarray, p: np.ndarray, confidence_miss: float) -> float:
    """Upper confidence bound on TV(r, p), missing with probability at most ``confidence_miss``."""
    from scipy import optimize, stats

    stat, df, outside, pool = _chi2(counts, p)
    samples = int(counts.sum())
    half = confidence_miss / 2
    lam = 0.0
    if df > 0 and stats.chi2.cdf(stat, df) > half:
        hi = max(1.0, stat)
        while stats.ncx2.cdf(stat, df, hi) > half and hi < 1e12:
            hi *= 2.0
        lam = optimize.brentq(lambda x: stats.ncx2.cdf(stat, df, x) - half, 0.0, hi, xtol=1e-9)
    z_up = float(stats.beta.ppf(1 - half, outside + 1, samples - outside)) if outside < samples \
        else 1.0
    return float(min(1.0, pool + 0.5 * math.sqrt(lam / samples) + 0.5 * z_up))


def _wilson(hits: int, total: int, z: float = 1.959963984540054) -> tuple[float, float]:
    est = hits / total
    den = 1 + z * z / total
    mid = (est + z * z / (2 * total)) / den
    half = z * math.sqrt(est * (1 - est) / total + z * z / (4 * total * total)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def z_pvalues(estimate, reference, samples: int, side: str = "two-sided") -> np.ndarray:
    """p-values of a normal test of acceptance frequencies against reference values (per position).

    ``side="greater"`` tests estimate > reference. The standard error uses the reference value.
    """
    from scipy import stats

    estimate, reference = np.asarray(estimate, float), np.asarray(reference, float)
    se = np.sqrt(np.maximum(reference * (1 - reference), 1e-12) / samples)
    z = (estimate - reference) / se
    return 2 * stats.norm.sf(np.abs(z)) if side == "two-sided" else stats.norm.sf(z)


def bonferroni(pvalues) -> float:
    """min(1, B * min p) over B positions."""
    pvalues = np.asarray(pvalues, float)
    return float(min(1.0, pvalues.size * pvalues.min()))
