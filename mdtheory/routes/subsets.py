"""The subset formula: :math:`\\alpha^* = 1 + \\min_{T \\subseteq \\Omega} [p(T) - Q(T)]`.

Hu et al. 2025 (dual of the OTLP, Theorem 1). Two routes:

* :func:`subsets_exhaustive` — all :math:`2^V` subsets, for any draft model;
* :func:`prefix_scan` — only the V + 1 prefixes of the tokens sorted by q/p decreasing (tokens with
  p = 0 < q first). For iid drafts an optimal T is such a prefix: exchanging a token into T in
  decreasing q/p order can only help because :math:`t \\mapsto t^n` is convex (Hu et al.
  2025, Global Resolution Lemma on H*). One sort and one cumulative sum: O(V log V), and O(V)
  from :data:`RADIX_MIN_V` tokens on, where the sort is a radix sort.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .._jit import _two_sum, njit
from ..errors import InvalidInputError, ProblemTooLargeError
from ..models.base import MAX_SUBSET_V, MAX_SUBSET_V_SLOW, DraftModel
from ..models.polymatroid import LOG_POWER_N, TINY, _total_excess
from ..models.registry import PREFIX_PROVED, PREFIX_SAMPLINGS
from .proofs import Exhaustive, PrefixOrder, RouteOutput

__all__ = ["subsets_exhaustive", "prefix_scan", "prefix_order", "exact_ratio_order", "ratio_keys",
           "PREFIX_SAMPLINGS", "PREFIX_PROVED",
           "MAX_SUBSET_V", "MAX_SUBSET_V_SLOW", "TIE_TOL"]

#: Sets whose p(T) - Q(T) is within this of the minimum count as minimisers.
TIE_TOL = 1e-12
#: :func:`prefix_order` sorts its keys by radix from this many tokens on (``np.sort`` below, where
#: the radix sort's fixed cost of 2^RADIX_BITS buckets per digit would not pay; above the
#: interpreted-kernel budget of :mod:`mdtheory._jit`, so the radix sort always runs compiled).
RADIX_MIN_V = 16_384
#: Bits per digit of the radix sort: 2048 buckets, whose counts stay in the L2 cache.
RADIX_BITS = 11
# MAX_SUBSET_V, MAX_SUBSET_V_SLOW, PREFIX_SAMPLINGS and PREFIX_PROVED are declared by the draft
# models (mdtheory.models: enumeration_limit, prefix_property) and re-exported here.


def subsets_exhaustive(p: np.ndarray, model: DraftModel) -> RouteOutput:
    """Minimise p(T) - Q(T) over all :math:`2^V` token sets.

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : DraftModel

    Returns
    -------
    RouteOutput
        ``value`` = 1 + the minimum, ``cut`` (the inclusion-minimal minimiser), ``proof`` (an
        :class:`~mdtheory.routes.proofs.Exhaustive`: the number of token sets evaluated, :math:`2^V`,
        which the certifier checks), ``timings``.

    Raises
    ------
    ProblemTooLargeError
        V over the model's :attr:`~mdtheory.models.base.DraftModel.enumeration_limit`
        (:data:`MAX_SUBSET_V`, or :data:`MAX_SUBSET_V_SLOW` without a closed-form containment).
    """
    limit = model.enumeration_limit
    if model.V > limit:
        raise ProblemTooLargeError(
            f"the exhaustive subset route enumerates 2^{model.V} = {2.0 ** model.V:.3g} sets, over "
            f"the limit 2^{limit} for {model.sampling} drafts; use the prefix method "
            f"({'/'.join(PREFIX_SAMPLINGS)} drafts) or the dual method"
        )
    t0 = time.perf_counter()
    codes = np.arange(2 ** model.V, dtype=np.int64)
    masks = ((codes[:, None] >> np.arange(model.V)) & 1).astype(bool)
    excess = masks @ p - model.containment(masks)
    best = float(excess.min())  # the empty set (code 0) gives 0, so the minimum is <= 0
    # p(T) - Q(T) is submodular (Q(T) is supermodular), so its minimisers are closed under
    # intersection: report the inclusion-minimal one
    minimal = masks[excess <= best + TIE_TOL].all(axis=0)
    return RouteOutput(value=1.0 + best, cut=np.flatnonzero(minimal), proof=Exhaustive(len(codes)),
                       timings={"scan": time.perf_counter() - t0})


def prefix_order(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Tokens sorted by q/p decreasing, i.e. by p/q increasing: p = 0 < q first (p/q = 0), q = 0 < p
    (p/q = inf) and p = q = 0 (NaN) at the end, where they change nothing. Equal ratios keep the
    token order.

    The order inside a tie class is irrelevant: along it the gain Q - p is convex, so both ends of
    the class are prefixes.

    Masses below :data:`~mdtheory.models.polymatroid.TINY` count as zero here, as in the lexicographically
    optimal base, so that this order is the one that base is pooled along (the front door's
    certificate pools along it) and no ratio overflows or loses its bits to subnormal division. For
    iid drafts this can leave the best prefix short of the optimum by at most (n + 1) V TINY (below
    1e-170); the value itself is always evaluated with the unrounded masses. Not so for laws that
    renormalise (without replacement, conditional Poisson: a token of tiny q can be drafted with
    probability of order 1), whose prefix route sorts by :func:`exact_ratio_order` instead.

    Notes
    -----
    One sort of packed 64-bit keys instead of an ``np.argsort``: a non-negative double's bits read
    as an unsigned integer increase with it (NaN's bits lie above infinity's), so each key is the
    ratio's bits with its last b = bit_length(V - 1) bits replaced by the token's index; sorting them
    sorts the ratios to 52 - b bits, and unpacking (:func:`_unpack_order`) re-sorts by the exact
    ratio the rare runs of keys whose ratios agree in those bits. The result is the order of a
    stable sort of the exact ratios. From :data:`RADIX_MIN_V` tokens on, the keys are sorted by
    :func:`_radix_sort` (linear time; at V = 128,000 about a fifth of ``np.sort``), below by
    ``np.sort``: the same order.
    """
    shift = max(int(p.size - 1).bit_length(), 1)
    keys = _packed_keys(p, q, shift)
    if p.size >= RADIX_MIN_V:
        _radix_sort(keys, shift)
    else:
        keys.sort()
    order = np.empty(p.size, dtype=np.int64)
    _unpack_order(keys, shift, p, q, order)
    return order


def ratio_keys(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keys (class, exponent, mantissa) whose lexicographic order is the order of the exact ratios
    p/q, no mass rounded to zero and nothing overflowing: class 0 for p = 0 < q, 1 for p, q > 0,
    2 for q = 0 < p, 3 for p = q = 0; for class 1, p/q = m 2^e with m the correctly rounded quotient
    of the mantissas, normalised to [1, 2) (so subnormal masses and ratios beyond the double range
    keep their order).

    Returns
    -------
    (cls, e, m) : ndarrays of shape (V,)
    """
    mp, ep = np.frexp(p)
    mq, eq = np.frexp(q)
    both = (p > 0) & (q > 0)
    m = np.divide(mp, mq, out=np.zeros(p.size), where=both)  # in (1/2, 2)
    e = (ep - eq).astype(np.int64)
    low = m < 1.0
    m[low] *= 2.0
    e[low] -= 1
    high = m >= 2.0  # the quotient rounded up to 2
    m[high] /= 2.0
    e[high] += 1
    cls = np.where(both, 1, np.where(p > 0, 2, np.where(q > 0, 0, 3)))
    e[~both] = 0
    return cls, e, m


def exact_ratio_order(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Tokens sorted by the exact ratio p/q increasing (:func:`ratio_keys`), stably: the order of
    :func:`prefix_order` with no mass below :data:`~mdtheory.models.polymatroid.TINY` read as zero. For draft
    models whose law renormalises (without replacement, conditional Poisson), where a token of tiny
    q can be drafted with probability of order 1 and the TINY rule would put it in the wrong place.
    O(V log V)."""
    cls, e, m = ratio_keys(p, q)
    return np.lexsort((m, e, cls)).astype(np.int64)


@njit(cache=True)
def _ratio(a, b):
    """p / q with masses below TINY read as zero: 0 for p = 0 < q, inf for q = 0 < p, NaN for
    p = q = 0 (what numpy's division gives, without dividing by zero)."""
    a = a if a >= TINY else 0.0
    b = b if b >= TINY else 0.0
    if b > 0.0:
        return a / b
    return np.inf if a > 0.0 else np.nan


@njit(cache=True)
def _packed_keys(p, q, shift):
    """The sort keys of :func:`prefix_order`: the bits of :func:`_ratio` with the last ``shift``
    bits replaced by the token's index, as uint64."""
    out = np.empty(p.size)
    keys = out.view(np.uint64)
    low = np.uint64((1 << shift) - 1)
    high = ~low
    for i in range(p.size):
        out[i] = _ratio(p[i], q[i])
        keys[i] = (keys[i] & high) | np.uint64(i)
    return keys


@njit(cache=True)
def _radix_sort(keys, shift):
    """Sort uint64 ``keys`` in place by their bits from ``shift`` up, stably: a least-significant-
    digit radix sort, digits of :data:`RADIX_BITS` bits, all digit counts in one first pass, and a
    digit that all keys share skipped. On the keys of :func:`_packed_keys` (the bits below
    ``shift`` hold the token index, increasing in the input) this is the same as sorting them whole.
    At most ceil((64 - shift) / RADIX_BITS) + 1 passes over the keys, whatever their values."""
    V = keys.size
    digits = (64 - shift + RADIX_BITS - 1) // RADIX_BITS
    buckets = 1 << RADIX_BITS
    mask = np.uint64(buckets - 1)
    counts = np.zeros((digits, buckets), np.int64)
    for i in range(V):
        for d in range(digits):
            counts[d, (keys[i] >> np.uint64(shift + d * RADIX_BITS)) & mask] += 1
    src, dst = keys, np.empty_like(keys)
    swapped = False
    start = np.empty(buckets, np.int64)
    for d in range(digits):
        if counts[d].max() == V:  # one bucket holds every key: the pass would change nothing
            continue
        total = 0
        for b in range(buckets):
            start[b] = total
            total += counts[d, b]
        at = np.uint64(shift + d * RADIX_BITS)
        for i in range(V):
            b = (src[i] >> at) & mask
            dst[start[b]] = src[i]
            start[b] += 1
        src, dst = dst, src
        swapped = not swapped
    if swapped:
        keys[:] = src


@njit(cache=True)
def _unpack_order(keys, shift, p, q, order):
    """Write the tokens of the sorted packed ``keys`` to ``order``; each run of keys with equal
    truncated ratios that is not in exact-ratio order is re-sorted by the exact ratio (stable, so
    equal ratios stay in token order). A run costs O(m log m) for its m tokens."""
    V = keys.size
    low = np.uint64((1 << shift) - 1)
    runs = 0
    for k in range(V):
        order[k] = np.int64(keys[k] & low)
        runs += k > 0 and (keys[k] ^ keys[k - 1]) <= low  # same truncated ratio as the last key
    if runs == 0:
        return
    k = 0
    while k < V:  # bounded: k grows by the run length, at least 1
        j = k + 1
        while j < V and (keys[j] ^ keys[k]) <= low:
            j += 1
        if j - k > 1:
            ratios = np.empty(j - k)
            for i in range(j - k):
                ratios[i] = _ratio(p[order[k + i]], q[order[k + i]])
            if (ratios[1:] < ratios[:-1]).any():
                run = order[k:j][np.argsort(ratios, kind="mergesort")]
                order[k:j] = run
        k = j


@njit(cache=True)
def _add(s, c, x):
    """Compensated step: (s, c) + x, the sum being s + c (error O(eps) for any length, against
    O(k eps) for a plain running sum of k terms). The rounding error of s + x by Knuth's two-sum
    (:func:`~mdtheory.models.polymatroid._two_sum`), exact for any order of magnitude (Neumaier's branch
    gives the same bits; this has no branch)."""
    t, e = _two_sum(s, x)
    return t, c + e


@njit(cache=True)
def _ipow(x, n):
    """x ** n for an integer n >= 0 by repeated squaring, as numba compiles ``x ** n``: the same
    bits interpreted and compiled (CPython's ``**`` and numpy's ``power`` call libm ``pow``, several
    times slower)."""
    if n > 0x10000:
        return math.pow(x, float(n))
    r = 1.0
    while n != 0:  # bounded: n halves each time
        if n & 1:
            r *= x
        n >>= 1
        x *= x
    return r


@njit(cache=True)
def _iid_power(t, tc, n, excess):
    """The containment :math:`Q(H) = (1 - q(H^c))^n` of a set H of mass t + tc, held as a
    compensated pair (tc the rounding error of t), without rounding the mass first; ``excess`` is
    :math:`q(\\Omega) - 1` (:func:`~mdtheory.models.polymatroid._total_excess`; read only beyond
    :data:`LOG_POWER_N` drafts).
    Up to :data:`LOG_POWER_N` drafts, :func:`_ipow` of the rounded mass, capped at one (its
    rounding, and the total's distance from one, each at most a few 2^-53, move the power by at
    most n times that, below 1e-11). Beyond, a mass in [1/2, 1] is taken as
    :math:`\\exp(n \\log1p(x))` with :math:`x = q(H) - q(\\Omega) = ((t - 1) + t_c) -
    \\mathrm{excess} = -q(H^c)` (t - 1 is exact there, Sterbenz): the distance from one is the mass
    off the set, to its own relative precision. Neither rounding the mass to the nearest double
    (to 1 if within 2^-54 of it) nor the input's own sum, off one by a few 2^-53 after
    normalisation, is raised to the power n, which would move it by up to n 2^-53 (e^(±1) at
    n = 2^53; papers/theory.md, "iid containments near one"). A mass below 1/2 gives a power
    below 2^-65536, zero."""
    if n <= LOG_POWER_N:
        return _ipow(min(t + tc, 1.0), n)
    if t < 0.5:
        return 0.0
    x = ((t - 1.0) + tc) - excess
    return 1.0 if x >= 0.0 else math.exp(n * math.log1p(x))


@njit(cache=True)
def _best_prefix(p, order, contained, q, n, tie_tol):
    """(best gain, length of the shortest prefix within ``tie_tol`` of it, 0 if the best is at most
    ``tie_tol``), gain_k = contained[k] - p(first k + 1 tokens), the empty prefix gaining 0: one pass
    along the order storing the gains, then a pass over them.

    With an empty ``contained`` the containments are the iid ones, :math:`(1 - q(\\text{rest}))^n`,
    computed along the way (the power by :func:`_iid_power`). Both running sums are compensated
    (:func:`_add`), so a gain is off by about n eps, not V n eps (1e-10 at V = 128,000, n = 128 with
    plain sums)."""
    iid = contained.size == 0
    excess = _total_excess(q) if iid and n > LOG_POWER_N else 0.0
    gains = np.empty(order.size)
    best, s, sc, t, tc = 0.0, 0.0, 0.0, 0.0, 0.0
    for k in range(order.size):
        y = order[k]
        s, sc = _add(s, sc, p[y])
        if iid:
            t, tc = _add(t, tc, q[y])
        gain = (_iid_power(t, tc, n, excess) if iid else contained[k]) - (s + sc)
        gains[k] = gain
        best = max(best, gain)
    if best <= tie_tol:
        return best, 0
    for k in range(order.size):
        if gains[k] >= best - tie_tol:
            return best, k + 1
    return best, order.size  # not reached: the first pass found a prefix at best


def prefix_scan(p: np.ndarray, model: DraftModel) -> RouteOutput:
    """Minimise p(T) - Q(T) over the prefixes of :func:`prefix_order`.

    .. math:: \\alpha^* = 1 - \\max_{0 \\le j \\le V} \\Big[ Q(\\{\\sigma_1..\\sigma_j\\})
       - \\sum_{i \\le j} p_{\\sigma_i} \\Big]

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : DraftModel
        One with a prefix property (:attr:`~mdtheory.models.base.DraftModel.prefix_property`): iid,
        without-replacement or conditional Poisson.

    Returns
    -------
    RouteOutput
        ``value``, ``cut`` (the shortest prefix within :data:`TIE_TOL` of the best; empty when no
        prefix gains more than that), ``proof`` (a :class:`~mdtheory.routes.proofs.PrefixOrder`: the
        sorted tokens, which the base certificate pools along), ``timings``.

    Raises
    ------
    InvalidInputError
        A draft model without a prefix property (outside :data:`PREFIX_SAMPLINGS`).

    Notes
    -----
    iid: one sort of packed keys (:func:`prefix_order`) and one compiled pass, O(V log V) (O(V) with
    the radix sort). Without replacement and conditional Poisson: the same sort and one pass
    carrying the containment along the prefixes
    (:mod:`mdtheory.models.containment`), O(V n K) with K quadrature nodes, and O(V n) respectively.

    Conditional Poisson (proof). :math:`Q(T \\cup i) - Q(T) = q_i e_{n-1}(q|_T) / e_n(q)`. At an
    inclusion-maximal minimiser T, with :math:`h = e_{n-1}(q|_T)/e_n(q)`, a token i outside T has
    :math:`p_i > q_i h` (adding it would not tie), and one inside has
    :math:`p_i \\le Q(T) - Q(T \\setminus i) = q_i e_{n-1}(q|_{T \\setminus i})/e_n(q) \\le q_i h`. So T is
    the set of tokens with p/q at most h: a prefix of the order, whatever the order inside ties.
    """
    if model.prefix_property is None:
        raise InvalidInputError(
            f"method 'prefix' is exact only for {', '.join(PREFIX_SAMPLINGS)} drafts, not "
            f"{model.sampling!r}; use 'subsets', 'dual', 'maxflow' or 'otlp'"
        )
    t0 = time.perf_counter()
    # the TINY rule of prefix_order moves alpha* by < (n + 1) V TINY for a coverage of the iid form
    # only (lex_base_closed_form: Q(T) = q(T)^n); it is the order the base certificate pools along
    iid = model.lex_base_closed_form
    order = prefix_order(p, model.q) if iid else exact_ratio_order(p, model.q)
    # iid: the containment q(prefix)^n inside the scan, without temporaries
    contained = np.zeros(0) if iid else model.prefix_pass(order)
    best, length = _best_prefix(p, order, contained, model.q, model.n, TIE_TOL)
    in_cut = np.zeros(model.V, dtype=bool)
    in_cut[order[:length]] = True
    return RouteOutput(value=1.0 - best, cut=np.flatnonzero(in_cut), proof=PrefixOrder(order),
                       timings={"scan": time.perf_counter() - t0})
