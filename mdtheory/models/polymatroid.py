"""The polymatroid view of multi-draft selection (papers/theory.md §5).

The coverage function :math:`g(S) = P(\\mathrm{set}(X) \\cap S \\neq \\emptyset) = 1 - Q(S^c)` is
submodular, and the marginals :math:`\\mu(y) = \\sum_x Q(x) \\beta(y \\mid x)` of all importance-sampling
rules that pick one drafted token form its base polytope

.. math:: B(g) = \\{\\mu \\ge 0 : \\mu(S) \\le g(S)\\ \\forall S,\\ \\mu(\\Omega) = g(\\Omega) = 1\\}.

By Khisti et al.'s canonical decomposition (Thm 1), importance sampling with marginal μ followed by one
speculative step against μ accepts with probability :math:`\\sum_y \\min(p(y), \\mu(y))`, so

.. math:: \\alpha^* = \\max_{\\mu \\in B(g)} \\sum_y \\min(p(y), \\mu(y)).

Extreme points of B(g) are priority orders ("output the highest-ranked drafted token") with
:math:`\\mu_\\sigma(y) = g(S_{\\le y}) - g(S_{< y})`. The lexicographically optimal base with respect to
p (Fujishige), the minimiser of :math:`\\sum_y \\mu(y)^2 / p(y)` over B(g), attains α*; for iid drafts
it has a closed form (:func:`lex_optimal_base_iid`, realised as a rule by :mod:`mdtheory.rules.schedule`);
for the other draft models the minimum-norm-point route gives a base that attains α* as an exact
mixture of priority orders (:mod:`mdtheory.routes.mnp`); the tests compute the lexicographically
optimal base by two independent solvers, for small V (``tests/reference_lex_base.py``).
"""

from __future__ import annotations

from itertools import product

import numpy as np

from .._jit import _two_sum, njit
from ..errors import InvalidInputError, ProblemTooLargeError
from .base import DraftModel

__all__ = ["priority_marginal", "lex_optimal_base_iid", "base_polytope_violation", "LexBase",
           "stable_ties"]

#: Largest alphabet for the exhaustive base-polytope checks (2^V sets; also the tests' second
#: solvers of the lexicographically optimal base).
MAX_EXHAUSTIVE_V = 14
#: :func:`lex_optimal_base_iid` treats masses below this (2^-600, about 2.4e-181) as zero.
TINY = 2.0 ** -600
#: Up to this n, :func:`lex_optimal_base_iid` takes the rises of G by :func:`_power_diff`
#: (compiled, relative error below n 2^-53); above, by the vectorised transcendental form
#: :func:`_power_gap` (a few 2^-53 whatever n).
DIFF_N = 64
#: Beyond this many iid drafts a containment (1 - q(T^c))^n is taken as exp(n log1p(-q(T^c))) from
#: the unrounded masses (:func:`~mdtheory.routes.subsets._iid_power`), and the rises of G from one
#: less the total's distance from one; up to it, by repeated squaring of the rounded mass.
LOG_POWER_N = 0x10000


def priority_marginal(model: DraftModel, order) -> np.ndarray:
    """Marginal of the rule "output the highest-ranked drafted token" for the priority ``order``.

    .. math:: \\mu_\\sigma(\\sigma_k) = g(\\{\\sigma_1..\\sigma_k\\}) - g(\\{\\sigma_1..\\sigma_{k-1}\\}),
       \\qquad g(S) = 1 - Q(S^c).

    Parameters
    ----------
    model : DraftModel
    order : array_like of int, shape (V,)
        A permutation of the tokens, highest priority first.

    Returns
    -------
    ndarray, shape (V,)
        An extreme point of B(g).

    Examples
    --------
    >>> from mdtheory import IID
    >>> priority_marginal(IID([0.5, 0.5], 2), [0, 1]).tolist()  # token 0 wins unless both drafts are 1
    [0.75, 0.25]
    """
    order = np.asarray(order)
    if sorted(order.tolist()) != list(range(model.V)):
        raise InvalidInputError(f"order must be a permutation of the {model.V} tokens")
    # g of the prefixes of order = 1 - Q of the complementary suffixes
    suffix_q = model.prefix_containment(order[::-1])[::-1]  # Q({order[k:]}) for k = 0..V-1
    g = 1.0 - np.concatenate([suffix_q[1:], [0.0]])
    mu = np.empty(model.V)
    mu[order] = np.diff(np.concatenate([[0.0], g]))
    return mu


class LexBase:
    """The lexicographically optimal base of an iid coverage function, with its block structure.

    Attributes
    ----------
    mu : ndarray, shape (V,)
        The base; :math:`\\sum_y \\min(p, \\mu) = \\alpha^*`.
    order : ndarray of int
        Tokens by q/p increasing (p = 0 < q last).
    bounds : ndarray of int
        Hull vertices: block k is ``order[bounds[k]:bounds[k + 1]]``.
    slopes : ndarray
        μ/p on each block (increasing); blocks of slope > 1 form the optimal cut set.
    cut : ndarray of int
        The tokens of those blocks, sorted.
    """

    def __init__(self, mu, order, bounds, slopes):
        self.mu, self.order, self.bounds, self.slopes = mu, order, bounds, slopes

    @property
    def blocks(self) -> list[np.ndarray]:
        """Consecutive runs of ``order`` on one segment of the lower convex hull."""
        return np.split(self.order, self.bounds[1:-1])

    @property
    def cut(self) -> np.ndarray:
        """Tokens of the blocks with slope > 1 (over-drafted), sorted."""
        first = np.searchsorted(self.slopes, 1.0, side="right")  # slopes increase
        return np.sort(self.order[self.bounds[first]:])


def stable_ties(order: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Turn a sort into the stable one: each run of equal keys put in increasing token order.

    Parameters
    ----------
    order : ndarray of int
        Distinct tokens sorted by their keys (NaN last), in any order inside a run of equal keys
        (numpy's default argsort, or a stable sort of a list that was not in token order).
    keys : ndarray
        The keys of ``order``, in that order (NaNs count as equal to each other).

    Returns
    -------
    ndarray of int
        ``order``, reordered in place: for ``order`` = argsort(k) over all tokens, exactly
        ``np.argsort(k, kind="stable")``. O(size) when no two keys are equal; the tied entries are
        sorted once more, as packed integer keys (run, token).
    """
    same = keys[1:] == keys[:-1]
    if keys.size and np.isnan(keys[-1]):
        same |= np.isnan(keys[1:]) & np.isnan(keys[:-1])
    if not same.any():
        return order
    tied = np.zeros(order.size, bool)
    tied[1:] = same
    tied[:-1] |= same
    at = np.flatnonzero(tied)
    run = np.concatenate([[0], np.cumsum(~same)])[at]  # runs of equal keys, numbered in order
    span = np.int64(order.max()) + 1
    packed = np.sort(run * span + order[at])  # below V^2: no overflow for V < 3e9
    order[at] = packed % span
    return order


@njit(cache=True, error_model="numpy", inline="always")
def _power_diff(x, d, n):
    """:math:`x^n - (x - d)^n` for 0 <= d <= x, to full relative precision, with no difference of
    powers: along the binary digits of n from the top, with y = x - d and
    :math:`P = x^m, Q = y^m, D = x^m - y^m` from m = 1 (D = d), doubling m takes D to D (P + Q)
    and adding one takes it to x D + Q d. Every step adds or multiplies positive numbers, so the
    relative error is that of the powers, about n 2^-53 at most (as for ``x ** n`` itself, which
    squares), with no cancellation however small d is; log2(n) steps, no transcendental function,
    and only products and sums, so interpreted and compiled it gives the same bits."""
    if d <= 0.0 or x <= 0.0 or n == 0:
        return 0.0
    d = min(d, x)  # d = x: x^n, by the same steps (y = 0)
    y = x - d
    top = 1
    for _ in range(62):  # the highest binary digit of n
        if top > n >> 1:
            break
        top <<= 1
    p, q, diff = x, y, d
    top >>= 1
    for _ in range(62):
        if top == 0:
            break
        diff *= p + q
        p *= p
        q *= q
        if n & top:
            diff = x * diff + q * d
            p *= x
            q *= y
        top >>= 1
    return diff


@njit(cache=True)
def _tied(order, keys):
    """Whether two neighbours of keys[order] are equal or both NaN (what :func:`stable_ties`
    reorders), in one pass without temporaries."""
    for k in range(1, order.size):
        a, b = keys[order[k - 1]], keys[order[k]]
        if a == b or (a != a and b != b):
            return True
    return False


def _power_gap(x: np.ndarray, d: np.ndarray, n: int, x_err=0.0) -> np.ndarray:
    """:math:`(x^n - y^n) / (x - y)` for y = x - d, 0 <= d <= x, elementwise: the rise of
    :math:`1 - (1 - Q)^n` per unit of q, to full relative precision (no difference of powers).
    ``x_err`` is the rounding error of x (x + x_err is the value meant): the power then carries
    :math:`(1 + x_{err}/x)^{n-1}`, so n does not multiply the rounding of x (a meant value of at
    most 0 gives 0)."""
    with np.errstate(divide="ignore", invalid="ignore", under="ignore", over="ignore"):
        r = np.clip(d / x, 0.0, 1.0)
        shift = (n - 1) * np.log1p(np.maximum(x_err / x, -1.0))
        # a factor past e (x_err, the total's distance from one, times n - 1 at least x) is taken
        # in logs with the power, where alone it could overflow
        power = np.where(shift > 1.0, np.exp((n - 1) * np.log(x) + shift), x ** (n - 1) * np.exp(shift))
        out = power * -np.expm1(n * np.log1p(-r)) / r
        out = np.where(r > 0, out, n * power)
    return np.where(x > 0, out, 0.0)


@njit(cache=True)
def _suffix_sums(v):
    """Suffix sums of v with an appended 0, compensated (Neumaier): (rounded sums, their errors)."""
    out, err = np.zeros(v.size + 1), np.zeros(v.size + 1)
    s, c = 0.0, 0.0
    for k in range(v.size - 1, -1, -1):
        t = s + v[k]
        c += (s - t) + v[k] if abs(s) >= abs(v[k]) else (v[k] - t) + s
        s = t
        out[k] = s + c
        err[k] = c - (out[k] - s)
    return out, err


@njit(cache=True)
def _total_excess(q):
    """q(Ω) - 1 to its own relative precision (a compensated sum; the sum lies in [1/2, 2], so
    subtracting one is exact)."""
    s, c = 0.0, 0.0
    for x in q:
        s, e = _two_sum(s, x)
        c += e
    return (s - 1.0) + c


@njit(cache=True, error_model="numpy")
def _rises(order, p, q, n):
    """p and q in ``order``, and each token's rise of :math:`G = 1 - (1 - Q)^n` along it to full
    relative precision: with :math:`R_k` the mass from token k on (:func:`_suffix_sums`, rounding
    error :math:`e_k`), :math:`R_k^n - (R_k - q_k)^n` by :func:`_power_diff`, times
    :math:`1 + (n - 1) e_k / R_k` (the first-order effect of the rounding, so that n does not
    multiply it)."""
    po, qo, dg = np.empty(order.size), np.empty(order.size), np.empty(order.size)
    for k in range(order.size):
        po[k], qo[k] = p[order[k]], q[order[k]]
    rest, err = _suffix_sums(qo)
    for k in range(order.size):
        g = _power_diff(rest[k], qo[k], n)
        dg[k] = g + g * ((n - 1) * (err[k] / rest[k])) if rest[k] > 0.0 else 0.0
    return po, qo, dg


@njit(cache=True)
def _not_flatter(ga, pa, gb, pb):
    """Whether block a's slope ga/pa is at least block b's: p = 0 < g is slope infinity, and an
    empty block (p = g = 0) counts as both, so it joins its neighbour. With p >= TINY or p = 0 the
    quotients neither overflow nor divide by zero."""
    if pb == 0.0:
        return gb == 0.0 or pa == 0.0
    if pa == 0.0:
        return True
    return ga / pa >= gb / pb


@njit(cache=True)
def _lex_blocks(dp, dg):
    """Greatest convex minorant of the path with increments (dp, dg), by pooling adjacent blocks.

    Blocks merge while the earlier one's slope dg/dp is at least the later one's
    (:func:`_not_flatter`). Each block keeps its own sums of positive terms, compensated (the
    rounding of every merge is carried along): no difference of prefix sums, so a token of mass
    1e-40 next to one of mass 1 is placed right, and a block of 10^5 tokens sums to its rise G
    within a few roundings instead of 10^5 of them. Returns (first token of each block plus the
    end, block sums of dp, of dg).

    Bound: each token is pushed once and every merge pops one block, so the inner loop runs at most
    V times in all.
    """
    start = np.empty(dp.size + 1, np.int64)
    sp, sg = np.empty(dp.size), np.empty(dp.size)
    ep, eg = np.zeros(dp.size), np.zeros(dp.size)  # rounding errors of the sums
    m = 0
    for k in range(dp.size):
        start[m], sp[m], sg[m], ep[m], eg[m] = k, dp[k], dg[k], 0.0, 0.0
        m += 1
        while m >= 2 and _not_flatter(sg[m - 2] + eg[m - 2], sp[m - 2] + ep[m - 2],
                                      sg[m - 1] + eg[m - 1], sp[m - 1] + ep[m - 1]):
            sp[m - 2], e = _two_sum(sp[m - 2], sp[m - 1])
            ep[m - 2] += ep[m - 1] + e
            sg[m - 2], e = _two_sum(sg[m - 2], sg[m - 1])
            eg[m - 2] += eg[m - 1] + e
            m -= 1
    start[m] = dp.size
    return start[: m + 1], sp[:m] + ep[:m], sg[:m] + eg[:m]


@njit(cache=True, error_model="numpy")
def _tiny_to_zero(p, q):
    """p and q with entries below :data:`TINY` set to zero, and the ratios q/p: inf for p = 0 < q,
    NaN for p = q = 0 (what numpy's division gives, without dividing by zero)."""
    p2, q2, ratio = np.empty(p.size), np.empty(p.size), np.empty(p.size)
    for i in range(p.size):
        a = p[i] if p[i] >= TINY else 0.0
        b = q[i] if q[i] >= TINY else 0.0
        p2[i], q2[i] = a, b
        if a > 0.0:
            ratio[i] = b / a
        else:
            ratio[i] = np.inf if b > 0.0 else np.nan
    return p2, q2, ratio


@njit(cache=True, error_model="numpy")
def _spread(order, po, qo, bounds, dP, dG, dQ, mu, slopes):
    """Each block's rise dG shared among its tokens: :math:`\\mu = dG \\cdot p / dP` (the share is at
    most one), or :math:`dG \\cdot q / dQ` on a vertical block (dP = 0), 0 where the whole is 0;
    ``mu`` in token order. ``slopes`` = dG / dP, inf on a vertical block."""
    for k in range(dP.size):
        vertical = dP[k] <= 0.0
        slopes[k] = np.inf if vertical else dG[k] / dP[k]
        whole = dQ[k] if vertical else dP[k]
        for t in range(bounds[k], bounds[k + 1]):
            share = qo[t] if vertical else po[t]
            mu[order[t]] = dG[k] * (share / whole if whole > 0.0 else 0.0)


def lex_optimal_base_iid(p: np.ndarray, q: np.ndarray, n: int) -> LexBase:
    """Lexicographically optimal base of :math:`g(S) = 1 - (1 - q(S))^n` with respect to p.

    Sort tokens by q/p increasing, form the points
    :math:`(P_k, G_k) = (\\sum_{i \\le k} p_{(i)}, 1 - (1 - \\sum_{i \\le k} q_{(i)})^n)`, take their lower
    convex hull; on each hull segment (a block of consecutive tokens) :math:`\\mu(y) = s \\, p(y)` with s
    the segment's slope (a vertical final segment, tokens with p = 0 < q, gets its mass in proportion
    to q).

    Parameters
    ----------
    p, q : ndarray, shape (V,)
        Validated distributions.
    n : int

    Returns
    -------
    LexBase

    Notes
    -----
    One sort and one pass of block pooling (the hull as a greatest convex minorant, on block sums so
    that masses far below the rounding of a prefix still count): O(V log V).

    **Tiny masses.** Entries of p or q below :data:`TINY` are set to zero first: a token with
    p < TINY joins the draft-only tokens (last, sharing their block by q), one with q < TINY comes
    first with μ = 0. Every ratio q/p and every slope then lies in [TINY, 1/TINY] (or is 0 or
    infinite by design), so nothing overflows and no division by zero occurs. The base is then one
    of :math:`g'(S) = 1 - (1 - q'(S))^n \\le g(S)` with :math:`\\mu(\\Omega) = g'(\\Omega)`, and
    :math:`\\sum_y \\min(p, \\mu) \\ge \\min_T [p'(T) + g'(T^c)] \\ge \\alpha^* - \\sum_{p < TINY} p
    - n \\sum_{q < TINY} q \\ge \\alpha^* - (n + 1) V \\cdot TINY` (below 1e-170 for V, n < 10^5).

    Membership in B(g) and optimality are checked against the exhaustive route, cvxpy and Wolfe's
    minimum-norm point in the tests (the closed form is derived here, not taken from a paper).

    Examples
    --------
    >>> lex_optimal_base_iid(np.array([0.5, 0.5]), np.array([0.5, 0.5]), 2).mu.tolist()
    [0.5, 0.5]
    """
    q_in = q
    p, q, ratio = _tiny_to_zero(p, q)
    order = np.argsort(ratio)  # NaN (p = q = 0) and inf (p = 0 < q) last; SIMD, not stable
    if _tied(order, ratio):
        stable_ties(order, ratio[order])  # ties by token, as a stable sort
    # each token's rise of G = 1 - (1 - Q)^n, to full relative precision
    if n <= DIFF_N:
        po, qo, dg = _rises(order, p, q, int(n))
    else:
        po, qo = p[order], q[order]
        # 1 - Q before each token: compensated, with its rounding error; beyond LOG_POWER_N drafts
        # less the total's distance from one (1 - q(S) = q(S^c) - (q(Omega) - 1)), which n would
        # otherwise multiply (papers/theory.md, "iid containments near one")
        rest, rest_err = _suffix_sums(qo)
        off = _total_excess(q_in) if n > LOG_POWER_N else 0.0
        dg = qo * _power_gap(rest[:-1], qo, int(n), rest_err[:-1] - off)
    bounds, dP, dG = _lex_blocks(po, dg)
    vertical = dP <= 0  # at most one such block, the last: the tokens with p = 0
    # numpy's (pairwise) sums of q over the vertical blocks, where mu follows q; unused elsewhere
    dQ = np.add.reduceat(qo, bounds[:-1]) if vertical.any() else dP
    mu, slopes = np.empty(p.size), np.empty(dP.size)
    _spread(order, po, qo, bounds, dP, dG, dQ, mu, slopes)
    return LexBase(mu, order, bounds, slopes)


def _all_sets(V: int) -> np.ndarray:
    if V > MAX_EXHAUSTIVE_V:
        raise ProblemTooLargeError(
            f"exhaustive base-polytope work needs 2^{V} sets, over 2^{MAX_EXHAUSTIVE_V}"
        )
    return np.array(list(product([False, True], repeat=V)), dtype=bool)


def base_polytope_violation(mu: np.ndarray, model: DraftModel) -> float:
    """max(max_S [mu(S) - g(S)], |mu(Omega) - 1|, -min mu): 0 iff mu is in B(g) (exhaustive)."""
    S = _all_sets(model.V)
    g = model.coverage(S)
    return float(max((S @ mu - g).max(), abs(mu.sum() - 1.0), -mu.min()))
