"""Containment of every sorted prefix for drafts drawn without replacement, in one pass.

:func:`successive_prefix_containment` and :func:`conditional_poisson_prefix_containment` return
:math:`Q(T_k)` for all prefixes :math:`T_k = \\{\\sigma_1, \\dots, \\sigma_k\\}` of a token order
:math:`\\sigma`, the quantity that the sorted-prefix scan of :mod:`mdtheory.routes.subsets` maximises
:math:`Q(T_k) - p(T_k)` over. Both carry a small state along the prefix, so all V prefixes cost what
one containment costs.

Successive sampling (:class:`~mdtheory.models.without_replacement.WithoutReplacement`)
------------------------------------------------------------------
With independent exponential clocks of rates :math:`q_i`, the drafts are the first n arrivals, so

.. math:: Q(T) = \\int_0^\\infty c\\, e^{-ct}\\, F_T(t)\\, dt
        = \\int_{-\\infty}^{\\infty} g_T(u)\\, du, \\qquad
   g_T(u) = c e^u e^{-c e^u} F_T(e^u),

with :math:`c = q(T^c)` and :math:`F_T(t) = P(N_T(t) \\ge n)`, :math:`N_T(t)` Poisson-binomial with
success probabilities :math:`h_i = 1 - e^{-q_i t}`, :math:`i \\in T`. The integral in log-time u is
taken by the trapezoidal rule on one grid shared by all prefixes, :math:`u_j = (b_0 + j/m) \\ln 2`,
step :math:`\\delta = \\ln 2 / m`. At every node the truncated generating polynomial of :math:`N_T`
(coefficients of :math:`z^0..z^{n-1}` and the absorbed tail :math:`P(N_T \\ge n)`) is updated once per
added token, :math:`a_k \\leftarrow e^{-q_i t} a_k + h_i a_{k-1}`, additions of non-negative numbers
only, so all prefixes cost O(V n K) for K nodes.

**Error bound (proven).** Each :math:`Q(T_k)` is within :math:`10^{-15} Q(T_k) + 2 \\cdot 10^{-18}`
of the exact value before rounding: the trapezoidal rule's strip bound fixes the nodes per octave
(:func:`_nodes_per_octave`, :data:`REL_TOL`), the grid's lower end bounds the nodes left out
(:data:`ABS_TOL`), and :data:`ETA`, :data:`LOG_TOP` and :data:`FREEZE` bound the nodes a prefix
skips. Rounding adds only non-negative numbers; the exponentials come from one vectorised
evaluation (:func:`_exp_class`) within :math:`3\\epsilon` relative. The proof and the rounding
analysis are in papers/theory.md, section "Prefix containment without replacement: the error bound".
Observed: at most 3e-16 against exact rationals (``tests/test_containment.py``) and 5e-15 against the
per-set Gauss-Legendre quadrature at V = 2000.

**Cost.** Per token, the node values and one fused pass over the n + 1 rows at the active nodes
(above the lowest window, below the frozen ones), then the prefix's weights and sum over its window
from the bisected lower node up: every loop runs over contiguous nodes with unsigned indices and no
branch, compiled for literal series lengths (:data:`DEGREES`) and n = 2..8, so it vectorises.

Conditional Poisson (:class:`~mdtheory.models.conditional_poisson.ConditionalPoisson`)
------------------------------------------------------------------
:math:`Q(T_k) = e_n(q|_{T_k}) / e_n(q)`: the elementary symmetric polynomials
:math:`e_0..e_n` of the prefix are carried along it, :math:`e_j \\leftarrow e_j + q_i e_{j-1}`, in
double-double arithmetic with a separate power-of-two exponent per degree (no underflow or overflow
for any float64 input, subnormal masses included). Every operation adds non-negative numbers, so the
relative error of each ratio is a few ε.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from .._jit import _two_sum as _two_sum_kernel
from .._validate import as_drafts, as_order
from ..errors import InvalidInputError

__all__ = ["successive_prefix_containment", "successive_outside_containment",
           "conditional_poisson_prefix_containment", "esp_table", "scaled_esp_table",
           "scaled_inclusion_weights", "REL_TOL", "ABS_TOL"]

#: Knuth's two-sum of :mod:`mdtheory.models.polymatroid`, compiled (this module's kernels are numba's own).
_two_sum = _two_sum_kernel.compiled

#: Bound on the relative discretisation error of the trapezoidal rule (part 1 of the bound).
REL_TOL = 1e-15
#: Bound on the nodes left out below the grid (part 2).
ABS_TOL = 1e-18
#: A prefix with complement mass c skips the nodes with c t < ETA (part 3).
ETA = 1e-19
#: ... and those with c t >= 2^LOG_TOP (part 3: (1 + delta 64) e^{-64} < 1e-26).
LOG_TOP = 6
#: A node is frozen (no later token updates it) once its P(N_T < n) is at most FREEZE (part 3).
FREEZE = 1e-19
#: Node values by the binary exponent e of v = q t (v in [2^(e-1), 2^(e+1))): at e >= SAT_E,
#: v >= 256, 1 - e^{-v} rounds to 1 and e^{-v} < 1e-111 is set to 0; below, :func:`_exp_class`.
SAT_E = 9


@functools.lru_cache(maxsize=64)
def _nodes_per_octave(n: int) -> int:
    """Smallest m whose step ln2/m makes the trapezoidal bound min_a 2 sec^(n+1)(a) / (e^(2 pi a m /
    ln 2) - 1) at most :data:`REL_TOL` (part 1)."""
    a = np.linspace(0.01, 1.56, 400)
    for m in range(2, 10_000):
        log_bound = math.log(2.0) - (n + 1) * np.log(np.cos(a)) - 2 * np.pi * a * m / math.log(2.0)
        if float(log_bound.min()) <= math.log(REL_TOL) - 1e-3:  # expm1(z) >= e^z (1 - 1e-3) here
            return m
    raise AssertionError("unreachable: the bound decreases to 0 in m")


def _grid_start(n: int, m: int, total: float) -> int:
    """Largest b0 with delta c s^n 2^(b0 (n + 1)) / (n! (2^((n + 1)/m) - 1)) <= ABS_TOL (part 2),
    c s^n <= n^n total^(n + 1) / (n + 1)^(n + 1) as c + s = total."""
    delta = math.log(2.0) / m
    log2_cs = (n + 1) * math.log2(total if total > 0 else 1.0) + n * math.log2(n) \
        - (n + 1) * math.log2(n + 1)
    log2_room = (math.log2(ABS_TOL) + math.lgamma(n + 1) / math.log(2.0)
                 + math.log2(2.0 ** ((n + 1) / m) - 1.0) - math.log2(delta) - log2_cs)
    return math.floor(log2_room / (n + 1))


#: Cody-Waite split of ln 2 (fdlibm's): k * LN2_HI is exact for integers |k| < 2^20.
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
LOG2E = 1.4426950408889634
#: |r| <= R_MAX after the reduction v = k ln 2 + r (v < 2^SAT_E: k <= 740, k ln 2 exact).
R_MAX = 0.5 * math.log(2.0) + 1e-12
#: Octave exponents e (v in [2^(e-1), 2^(e+1))) covered by the degree tables; below, degree 0.
E_MIN = -64


def _series_terms(R: float, relative_to: float) -> int:
    """Smallest L with the tail of U(r) = sum_{i >= 0} (-r)^i / (i + 1)! after the terms 0..L,
    at most R^(L+1) / (L+2)! / (1 - R/(L+3)) for |r| <= R, below 2^-60 relative_to."""
    for L in range(40):
        log_tail = ((L + 1) * math.log(R) - math.lgamma(L + 3) - math.log1p(-R / (L + 3))) \
            if R > 0 else -math.inf
        if log_tail <= math.log(relative_to) - 60 * math.log(2.0):
            return L
    raise AssertionError("unreachable: R <= R_MAX < 1")


def _degree_table(for_h: bool) -> np.ndarray:
    """Series terms by octave exponent e in [E_MIN, SAT_E]: |r| <= R = min(2^(e+1), R_MAX); for h
    the tail is relative to U >= 1 - R/2 (h = r U at k = 0, so U sets h's relative error), for g
    alone relative to e^{-R} / R (g = 1 - r U at k = 0 errs by r times U's error)."""
    out = np.zeros(SAT_E - E_MIN + 1, dtype=np.int64)
    for i, e in enumerate(range(E_MIN, SAT_E + 1)):
        R = min(2.0 ** (e + 1), R_MAX)
        out[i] = _series_terms(R, (1 - R / 2) if for_h else math.exp(-R) / R)
    return out


#: Series degrees of :func:`_exp_class`'s classes, decreasing (literals, so each compiles unrolled).
DEGREES = (13, 10, 7, 4, 2, 0)


def _class_limits(deg: np.ndarray) -> np.ndarray:
    """lim[c]: the largest octave exponent e whose degree deg[e - E_MIN] is at most DEGREES[c]
    (lim[0] = SAT_E); exponents below E_MIN need none."""
    lim = np.array([max(e for e in range(E_MIN, SAT_E + 1) if deg[e - E_MIN] <= L) for L in DEGREES])
    if not (lim[0] == SAT_E and lim[1] <= -4):  # only class 0 meets v >= 2^-3 (and so k > 0)
        raise AssertionError(f"unreachable: series classes {lim.tolist()} (SAT_E = {SAT_E})")
    return lim


#: Class limits for the node values (h and g to a relative 2^-60) and the weights (g alone).
_LIM_H = _class_limits(_degree_table(True))
_LIM_G = _class_limits(_degree_table(False))


def successive_prefix_containment(q: np.ndarray, order, n: int) -> np.ndarray:
    """Q(T_k) for successive sampling, for every prefix T_k of the tokens in the given order.

    .. math:: Q(T_k) = \\int_0^\\infty c_k e^{-c_k t} P(N_{T_k}(t) \\ge n)\\, dt,
       \\qquad c_k = \\sum_{i > k} q_{\\sigma_i}

    Parameters
    ----------
    q : ndarray of float, shape (V,)
        Non-negative masses; they need not sum to one exactly (the drafts are drawn from q / sum(q),
        as in :meth:`~mdtheory.models.without_replacement.WithoutReplacement.containment`).
    order : array_like of int, shape (M,)
        Distinct tokens, M <= V; tokens left out count as outside every prefix.
    n : int
        Number of drafts, at least 1.

    Returns
    -------
    ndarray of float, shape (M,)
        Entry k is Q({order[0], ..., order[k]}): 0 while fewer than n of them have q > 0, 1 once
        the rest has no mass.

    Notes
    -----
    The module docstring proves the error bound :math:`10^{-15} Q + 2 \\cdot 10^{-18}` of the
    quadrature. Cost O(V n K): K = m (log2(1/c_min) + 8) nodes, m = 4 to 6 nodes per octave for
    n <= 10, c_min the smallest positive complement mass; nodes where P(N < n) <= :data:`FREEZE`
    and nodes below every later prefix's window are dropped as the scan goes, and each prefix sums
    only the nodes of its window above its negligible tail. About 0.4 ms at V = 1000 and 12 ms at
    V = 32,000 (n = 4 or 8) on this project's 2-core test machine
    (``benchmarks/bench_containment.py --mnp``).

    Examples
    --------
    >>> successive_prefix_containment(np.array([0.5, 0.3, 0.2]), [0, 1, 2], 2).round(4).tolist()
    [0.0, 0.5143, 1.0]
    """
    q, order, n = _checked(q, order, n)
    return _successive_prefix(q, order, n)


def _successive_prefix(q: np.ndarray, order: np.ndarray, n: int) -> np.ndarray:
    """:func:`successive_prefix_containment` on checked arguments (the draft model's own)."""
    qs, size = _in_order(q, order)
    top = float(qs.max(initial=0.0))
    with np.errstate(over="ignore"):
        big = not float(qs.sum()) < np.inf
    if big:  # masses near the float limit: scaled by a power of two (exact)
        qs = np.ldexp(qs, -math.frexp(top)[1] - qs.size.bit_length())
    if n == 1:
        total = float(qs.sum())
        return np.minimum(np.cumsum(qs) / total, 1.0)[:size] if total > 0 else np.zeros(size)
    comp = _suffix_kernel(qs)
    m = _nodes_per_octave(n)
    b0 = _grid_start(n, m, float(qs.sum()))
    positive = comp[comp > 0]
    if positive.size == 0:
        c_min = 1.0
    else:
        c_min = float(positive.min())
    octaves = max(1, (LOG_TOP + 2) - (math.frexp(c_min)[1] - 1) - b0)
    shift = max(0, octaves - 1000)  # t_j = 2^(b0 + shift) tb[j]: tb stays finite
    tb = np.ldexp(np.exp2(np.arange(m) / m)[None, :], np.arange(octaves)[:, None] - shift).ravel()
    delta = math.log(2.0) / m
    below = delta / (2.0 ** (1.0 / m) - 1.0)
    out = _successive_kernel(qs, comp, n, m, b0, shift, tb, delta, below, _LIM_H, _LIM_G)
    return out[:size]


def _checked(q, order, n) -> tuple[np.ndarray, np.ndarray, int]:
    """The prefix functions' arguments checked: q a 1-D array of finite non-negative masses, order
    distinct tokens of q, n an integer >= 1; or :class:`~mdtheory.errors.InvalidInputError`."""
    try:
        q = np.asarray(q, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"q is not an array of real numbers ({exc})") from None
    if q.ndim != 1:
        raise InvalidInputError(f"q has shape {q.shape}; expected (V,)")
    if not (np.isfinite(q).all() and q.min(initial=0.0) >= 0.0):
        i = int(np.flatnonzero(~(np.isfinite(q) & (q >= 0.0)))[0])
        raise InvalidInputError(f"q[{i}] = {q[i]} is not a finite non-negative mass")
    return q, as_order(order, q.size), as_drafts(n)


def _in_order(q, order) -> tuple[np.ndarray, int]:
    """q in the given order, followed by the tokens the order leaves out; and the order's length."""
    order = np.asarray(order, dtype=np.int64)
    size = order.size
    if size < q.size:
        order = np.concatenate([order, np.setdiff1d(np.arange(q.size), order)])
    return np.ascontiguousarray(q[order], dtype=np.float64), size


#: (-1)^i / (i + 1)!, the coefficients of (1 - e^{-r}) / r (each rounded once)
_COEF = np.array([(-1.0) ** i / math.factorial(i + 1) for i in range(24)])


@njit(cache=True)
def _suffix_kernel(qs):
    """c_k = sum of qs[k + 1:], each a double-double sum rounded once."""
    V = qs.size
    out = np.empty(V)
    hi, lo = 0.0, 0.0
    for k in range(V - 1, -1, -1):
        out[k] = hi + lo
        s, e = _two_sum(hi, qs[k])
        lo += e
        hi, lo = _two_sum(s, lo)
    return out


@intrinsic
def _as_float(typingctx, bits):
    """The float64 with the given int64 bit pattern (a bit cast: 2^-k below, with no table
    gather, which would stop the loop's vectorisation)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return types.float64(types.int64), codegen


@intrinsic
def _as_bits(typingctx, x):
    """The int64 bit pattern of a float64 (the inverse bit cast of :func:`_as_float`)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))

    return types.int64(types.float64), codegen


@njit(cache=True)
def _pow2(k):
    """2^k for integers -1022 <= k <= 1023, built from its bits (a product by it is ldexp's
    result, correctly rounded, without ldexp's call)."""
    return _as_float((1023 + k) << 52)


@njit(cache=True, fastmath={"contract"})
def _exp_class(scale, tb, j0, j1, L, reduce, G, H):
    """G = e^{-v}, H = 1 - e^{-v} for v = scale tb[j], j0 <= j < j1: v = k ln 2 + r (Cody-Waite,
    if ``reduce``; else k = 0, r = v), e^{-v} = 2^-k (1 - r U), 1 - e^{-v} = (1 - 2^-k) + 2^-k r U,
    U the terms 0..L of (1 - e^{-r}) / r = sum_i (-r)^i / (i + 1)! by Horner's rule. Called with
    literal L and ``reduce``, so the series unrolls and the loop over nodes vectorises; products
    and sums may fuse (one rounding instead of two), never reassociate."""
    for jj in range(j0, j1):
        j = np.uint64(jj)  # unsigned indices: no wrap-around test, so the loop vectorises
        v = scale * tb[j]
        if reduce:
            k = np.floor(v * LOG2E + 0.5)
            r = (v - k * LN2_HI) - k * LN2_LO
            s = _as_float((1023 - np.int64(k)) << 52)  # 2^-k, 0 <= k < 1022
        else:
            r, s = v, 1.0
        u = _COEF[L]
        for i in range(L - 1, -1, -1):
            u = _COEF[i] + r * u
        ru = r * u
        G[j] = s * (1.0 - ru)
        H[j] = (1.0 - s) + s * ru


@njit(cache=True)
def _exp_nodes(scale, tb, j0, j1, e0, m, lim, G, H):
    """:func:`_exp_class` on nodes j0 <= j < j1 with octave exponents e = e0 + j // m, each
    class of :data:`DEGREES` on the octaves e with lim[c + 1] < e <= lim[c] (the class's degree
    covers the degree table there); only the first class has e >= -3 and needs the reduction."""
    b1 = min(max((lim[1] + 1 - e0) * m, j0), j1)
    _exp_class(scale, tb, b1, j1, 13, True, G, H)
    b2 = min(max((lim[2] + 1 - e0) * m, j0), b1)
    _exp_class(scale, tb, b2, b1, 10, False, G, H)
    b3 = min(max((lim[3] + 1 - e0) * m, j0), b2)
    _exp_class(scale, tb, b3, b2, 7, False, G, H)
    b4 = min(max((lim[4] + 1 - e0) * m, j0), b3)
    _exp_class(scale, tb, b4, b3, 4, False, G, H)
    b5 = min(max((lim[5] + 1 - e0) * m, j0), b4)
    _exp_class(scale, tb, b5, b4, 2, False, G, H)
    _exp_class(scale, tb, j0, b5, 0, False, G, H)


@njit(cache=True)
def _update(a, G, H, j0, j1, n):
    """One token at nodes j0 <= j < j1: a_n += h a_{n-1}; a_k = g a_k + h a_{k-1}; a_0 = g a_0,
    all rows in one pass over the nodes (with a literal n the rows unroll and the nodes vectorise)."""
    for jj in range(j0, j1):
        j = np.uint64(jj)  # unsigned indices: no wrap-around test, so the loop vectorises
        g = G[j]
        h = H[j]
        a[n, j] += h * a[n - 1, j]
        for k in range(n - 1, 0, -1):
            a[k, j] = g * a[k, j] + h * a[k - 1, j]
        a[0, j] *= g


@njit(cache=True)
def _update_rows(a, G, H, j0, j1, n):
    """:func:`_update` row by row (each row's loop vectorises; for n without a literal version)."""
    an, an1 = a[n], a[n - 1]
    for jj in range(j0, j1):
        j = np.uint64(jj)
        an[j] += H[j] * an1[j]
    for k in range(n - 1, 0, -1):
        ak, ak1 = a[k], a[k - 1]
        for jj in range(j0, j1):
            j = np.uint64(jj)
            ak[j] = G[j] * ak[j] + H[j] * ak1[j]
    a0 = a[0]
    for jj in range(j0, j1):
        j = np.uint64(jj)
        a0[j] *= G[j]


@njit(cache=True)
def _update_token(a, G, H, j0, j1, n):
    """:func:`_update` compiled for each n in 2..8 (the same operations in the same order)."""
    if n == 2:
        _update(a, G, H, j0, j1, 2)
    elif n == 3:
        _update(a, G, H, j0, j1, 3)
    elif n == 4:
        _update(a, G, H, j0, j1, 4)
    elif n == 5:
        _update(a, G, H, j0, j1, 5)
    elif n == 6:
        _update(a, G, H, j0, j1, 6)
    elif n == 7:
        _update(a, G, H, j0, j1, 7)
    elif n == 8:
        _update(a, G, H, j0, j1, 8)
    else:
        _update_rows(a, G, H, j0, j1, n)


@njit(cache=True)
def _successive_kernel(qs, comp, n, m, b0, shift, tb, delta, below, lim_h, lim_g):
    V = qs.size
    K = tb.size
    out = np.zeros(V)
    a = np.zeros((n + 1, K))
    a[0, :] = 1.0
    H = np.empty(K)
    G = np.empty(K)
    E = np.empty(K)
    octaves = K // m
    k_act = K  # nodes >= k_act are frozen: P(N < n) <= FREEZE there, no token updates them
    j_low = 0  # nodes < j_low lie below the window of every later prefix
    count = 0
    prev = 0.0
    for idx in range(V):
        x = qs[idx]
        if x <= 0.0:
            out[idx] = prev
            continue
        count += 1
        mq, eq = math.frexp(x)
        e_base = eq + b0  # node j: x t_j = xs tb[j] in [2^(e - 1), 2^(e + 1)), e = e_base + j // m
        xs = math.ldexp(mq, e_base + shift)
        j_sat = min(max((SAT_E - e_base) * m, j_low), k_act)  # x t >= 2^(SAT_E - 1): saturated
        _exp_nodes(xs, tb, j_low, j_sat, e_base, m, lim_h, G, H)
        for jj in range(j_sat, k_act):
            j = np.uint64(jj)  # unsigned indices: no wrap-around test, so the loops vectorise
            G[j] = 0.0
            H[j] = 1.0
        # one token: a_n += h a_{n-1}; a_k = g a_k + h a_{k-1}; a_0 = g a_0 (a literal n unrolls)
        _update_token(a, G, H, j_low, k_act, n)
        while k_act > j_low:  # freeze the top node once P(N < n) <= FREEZE there (part 3)
            rest = 0.0
            for k in range(n):
                rest += a[k, k_act - 1]
            if rest > FREEZE:
                break
            k_act -= 1
        # the prefix's value: delta * sum_j y_j e^{-y_j} a_n[j], y_j = c t_j, over its window
        c = comp[idx]
        if count < n:
            prev = 0.0
        elif c <= 0.0:
            prev = 1.0
        else:
            mc, ec = math.frexp(c)
            e_c = ec + b0
            cs = math.ldexp(mc, e_c + shift)  # y_j = cs tb[j], octave exponent e_c + j // m
            o_w_lo = max(0, int(math.floor(math.log2(ETA))) - e_c)
            o_w_hi = min(octaves - 1, LOG_TOP - e_c)
            if o_w_lo > j_low // m:
                j_low = o_w_lo * m  # c only decreases along the prefix: windows only move up
            # the highest octave o whose first node has F y below <= ETA / 2 (F, y increase with
            # t): the nodes below it are left out; bisection keeps the test true at lo
            lo, hi = max(o_w_lo, j_low // m), o_w_hi + 1
            if lo < hi and a[n, lo * m] * cs * tb[lo * m] * below <= 0.5 * ETA:
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if a[n, mid * m] * cs * tb[mid * m] * below <= 0.5 * ETA:
                        lo = mid
                    else:
                        hi = mid
            j0, j1 = lo * m, (o_w_hi + 1) * m
            _exp_nodes(cs, tb, j0, j1, e_c, m, lim_g, E, H)
            prev = min(delta * _weighted_sum(cs, tb, E, a[n], j0, j1), 1.0)
        out[idx] = prev
    return out


def successive_outside_containment(q: np.ndarray, n: int, outside) -> np.ndarray:
    """Q(T) for T all the tokens of q, in the successive sampling from T and one more token of mass
    c, for each c in ``outside``:

    .. math:: E[e^{-c\\, \\tau_n}] = \\int_0^\\infty c\\, e^{-ct}\\, P(N_T(t) \\ge n)\\, dt,

    :math:`\\tau_n` the n-th ring of T's exponential clocks (rates q). The same quadrature as
    :func:`successive_prefix_containment` (T's tokens added once, then one window per c), with the
    same proven error bound, :math:`10^{-15} Q + 2 \\cdot 10^{-18}` before rounding: the grid
    starts low enough for the largest total q(T) + c (part 2). The majorant Ψ of
    :func:`~mdtheory.models.majorant.race_excess` (papers/theory.md, "Successive sampling: lower
    bounds from majorants of the containment").

    Parameters
    ----------
    q : ndarray of float, shape (V,)
        Non-negative masses of T's tokens.
    n : int
        Number of drafts, at least 1.
    outside : array_like of float, shape (M,)
        Non-negative masses c.

    Returns
    -------
    ndarray of float, shape (M,)
        0 for every c where fewer than n tokens of q are positive; 1 where c = 0.

    Examples
    --------
    With tokens 0.5 and 0.3 and an outside token of 0.2, two drafts avoid it with probability
    0.5143 (:func:`successive_prefix_containment`'s example).

    >>> successive_outside_containment(np.array([0.5, 0.3]), 2, [0.2, 0.0]).round(4).tolist()
    [0.5143, 1.0]
    """
    q, _, n = _checked(q, np.arange(0), n)
    try:
        c = np.asarray(outside, dtype=np.float64).ravel()
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"outside is not an array of real numbers ({exc})") from None
    if not (np.isfinite(c).all() and c.min(initial=0.0) >= 0.0):
        raise InvalidInputError("outside holds a mass that is not finite and non-negative")
    qs = np.ascontiguousarray(q[q > 0])
    out = np.where(c > 0, 0.0, 1.0)
    if qs.size < n or not (c > 0).any():
        return out if qs.size >= n else np.zeros(c.size)
    with np.errstate(over="ignore"):
        big = not float(qs.sum() + c.max()) < np.inf
    if big:  # masses near the float limit: both scaled by one power of two (exact)
        k = -math.frexp(max(float(qs.max()), float(c.max())))[1] - qs.size.bit_length() - 1
        qs, c = np.ldexp(qs, k), np.ldexp(c, k)
    positive = c > 0
    if n == 1:
        total = float(qs.sum())
        out[positive] = total / (total + c[positive])
        return out
    m = _nodes_per_octave(n)
    b0 = _grid_start(n, m, float(qs.sum()) + float(c.max()))
    octaves = max(1, (LOG_TOP + 2) - (math.frexp(float(c[positive].min()))[1] - 1) - b0)
    shift = max(0, octaves - 1000)
    tb = np.ldexp(np.exp2(np.arange(m) / m)[None, :], np.arange(octaves)[:, None] - shift).ravel()
    delta = math.log(2.0) / m
    below = delta / (2.0 ** (1.0 / m) - 1.0)
    out[positive] = _outside_kernel(qs, np.ascontiguousarray(c[positive]), n, m, b0, shift, tb,
                                    delta, below, _LIM_H, _LIM_G)
    return out


@njit(cache=True)
def _add_token(a, x, n, m, b0, shift, tb, j_low, k_act, lim_h, G, H):
    """One token of mass x > 0 into the truncated polynomials ``a`` at the nodes j_low <= j < k_act,
    then the top nodes frozen (P(N < n) <= FREEZE there, part 3): the new ``k_act``. The steps of
    :func:`_successive_kernel`'s loop, which keeps them inline (as calls it ran 13-35% slower)."""
    mq, eq = math.frexp(x)
    e_base = eq + b0
    xs = math.ldexp(mq, e_base + shift)
    j_sat = min(max((SAT_E - e_base) * m, j_low), k_act)
    _exp_nodes(xs, tb, j_low, j_sat, e_base, m, lim_h, G, H)
    for jj in range(j_sat, k_act):
        j = np.uint64(jj)
        G[j] = 0.0
        H[j] = 1.0
    _update_token(a, G, H, j_low, k_act, n)
    while k_act > j_low:
        rest = 0.0
        for k in range(n):
            rest += a[k, k_act - 1]
        if rest > FREEZE:
            break
        k_act -= 1
    return k_act


@njit(cache=True)
def _window_low(c, b0):
    """The first octave of the window of a complement of mass c > 0 (part 3: c t >= ETA)."""
    return max(0, int(math.floor(math.log2(ETA))) - (math.frexp(c)[1] + b0))


@njit(cache=True)
def _outside_kernel(qs, cs_all, n, m, b0, shift, tb, delta, below, lim_h, lim_g):
    """The values of :func:`successive_outside_containment`: every token of ``qs`` (all positive)
    added at the nodes from the lowest window of all c on (the largest c's), then per c the value
    over its window, as :func:`_successive_kernel` takes a prefix's."""
    K = tb.size
    a = np.zeros((n + 1, K))
    a[0, :] = 1.0
    H = np.empty(K)
    G = np.empty(K)
    E = np.empty(K)
    octaves = K // m
    j_low = _window_low(cs_all.max(), b0) * m
    k_act = K
    for idx in range(qs.size):
        k_act = _add_token(a, qs[idx], n, m, b0, shift, tb, j_low, k_act, lim_h, G, H)
    F = a[n]
    out = np.empty(cs_all.size)
    for i in range(cs_all.size):
        mc, ec = math.frexp(cs_all[i])
        e_c = ec + b0
        cs = math.ldexp(mc, e_c + shift)
        o_w_lo = max(_window_low(cs_all[i], b0), j_low // m)
        o_w_hi = min(octaves - 1, LOG_TOP - e_c)
        lo, hi = o_w_lo, o_w_hi + 1
        if lo < hi and F[lo * m] * cs * tb[lo * m] * below <= 0.5 * ETA:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if F[mid * m] * cs * tb[mid * m] * below <= 0.5 * ETA:
                    lo = mid
                else:
                    hi = mid
        j0, j1 = lo * m, (o_w_hi + 1) * m
        _exp_nodes(cs, tb, j0, j1, e_c, m, lim_g, E, H)
        out[i] = min(delta * _weighted_sum(cs, tb, E, F, j0, j1), 1.0)
    return out


@njit(cache=True, fastmath={"reassoc"})
def _weighted_sum(cs, tb, E, F, j0, j1):
    """sum_j y_j E_j F_j, y_j = cs tb[j]: non-negative terms, summed in any order."""
    total = 0.0
    for jj in range(j0, j1):
        j = np.uint64(jj)
        total += cs * tb[j] * E[j] * F[j]
    return total


def conditional_poisson_prefix_containment(q: np.ndarray, order, n: int) -> np.ndarray:
    """Q(T_k) = e_n(q restricted to T_k) / e_n(q) for every prefix T_k of the given order.

    Parameters
    ----------
    q : ndarray of float, shape (V,)
        Non-negative weights, at least n of them positive.
    order : array_like of int, shape (M,)
        Distinct tokens, M <= V.
    n : int
        Number of drafts, at least 1.

    Returns
    -------
    ndarray of float, shape (M,)
        Entry k is Q({order[0], ..., order[k]}).

    Notes
    -----
    One pass, O(V n): :math:`e_j \\leftarrow e_j + q_i e_{j-1}` for j = n..1, each :math:`e_j` held
    as a double-double mantissa times its own power of two, so neither underflow nor overflow can
    occur and every operation adds non-negative numbers; relative error a few ε per entry.

    Examples
    --------
    >>> conditional_poisson_prefix_containment(np.array([0.5, 0.3, 0.2]), [0, 1, 2], 2).round(4).tolist()
    [0.0, 0.4839, 1.0]
    """
    q, order, n = _checked(q, order, n)
    return _conditional_poisson_prefix(q, order, n)


def _conditional_poisson_prefix(q: np.ndarray, order: np.ndarray, n: int) -> np.ndarray:
    """:func:`conditional_poisson_prefix_containment` on checked arguments."""
    qs, size = _in_order(q, order)
    hi, lo, ex = _esp_kernel(qs, n)
    if hi[-1] <= 0.0:
        raise InvalidInputError(f"conditional Poisson sampling needs n = {n} tokens with q > 0")
    ratio = (hi + lo) / (hi[-1] + lo[-1])
    return np.minimum(np.ldexp(ratio, ex - ex[-1]), 1.0)[:size]


@njit(cache=True)
def _two_prod(a, b):
    """a * b = p + e exactly (Dekker, Veltkamp splitting; no FMA needed)."""
    p = a * b
    split = 134217729.0  # 2^27 + 1
    t = split * a
    ah = t - (t - a)
    al = a - ah
    t = split * b
    bh = t - (t - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@njit(cache=True)
def _esp_kernel(qs, n):
    """e_n of every prefix as (hi, lo, exponent): e_n = (hi + lo) 2^exponent, hi in [1, 2) or 0."""
    V = qs.size
    hi = np.zeros(n + 1)
    lo = np.zeros(n + 1)
    ex = np.zeros(n + 1, dtype=np.int64)
    hi[0] = 1.0
    out_hi = np.zeros(V)
    out_lo = np.zeros(V)
    out_ex = np.zeros(V, dtype=np.int64)
    count = 0
    for idx in range(V):
        x = qs[idx]
        if x > 0.0:
            count += 1
            mx, exq = math.frexp(x)  # x = mx 2^exq, mx in [0.5, 1)
            for j in range(min(count, n), 0, -1):
                # term = x e_{j-1} = (mx hi + mx lo) 2^(ex[j-1] + exq): a double-double
                if hi[j - 1] == 0.0:
                    continue
                th, tl = _two_prod(mx, hi[j - 1])
                tl += mx * lo[j - 1]
                th, tl = _two_sum(th, tl)
                te = ex[j - 1] + exq
                if hi[j] == 0.0:
                    sh, sl, se = th, tl, te
                else:
                    d = te - ex[j]
                    if d > 200:  # e_j below 2^-199 of the term: it is the term, to 2^-150
                        sh, sl, se = th, tl, te
                    elif d < -200:
                        sh, sl, se = hi[j], lo[j], ex[j]
                    else:
                        se = max(te, ex[j])
                        sa, sb = _pow2(ex[j] - se), _pow2(te - se)  # exact scalings by 2^-200..1
                        ah, al = hi[j] * sa, lo[j] * sa
                        bh, bl = th * sb, tl * sb
                        sh, err = _two_sum(ah, bh)
                        sl = err + al + bl
                        sh, sl = _two_sum(sh, sl)
                # renormalise: hi in [1, 2) (sh >= 1/2 is normal: its biased exponent bits)
                shift = ((_as_bits(sh) >> 52) & 0x7FF) - 1023
                scale = _pow2(-shift)
                hi[j] = sh * scale
                lo[j] = sl * scale
                ex[j] = se + shift
        out_hi[idx] = hi[n]
        out_lo[idx] = lo[n]
        out_ex[idx] = ex[n]
    return out_hi, out_lo, out_ex


@njit(cache=True)
def esp_table(w, n):
    """Elementary symmetric polynomials of every prefix: row i holds e_0..e_n of w[:i].

    Parameters
    ----------
    w : ndarray of float, shape (V,)
        Non-negative weights.
    n : int

    Returns
    -------
    ndarray of float, shape (V + 1, n + 1)
        By the recurrence :math:`e_j \\leftarrow e_j + w_i e_{j-1}` in plain doubles (sums of
        non-negative terms).
    """
    table = np.zeros((w.size + 1, n + 1))
    table[0, 0] = 1.0
    for i in range(w.size):
        table[i + 1, 0] = table[i, 0]
        for j in range(1, n + 1):
            table[i + 1, j] = table[i, j] + w[i] * table[i, j - 1]
    return table


@njit(cache=True)
def scaled_esp_table(w, n):
    """:func:`esp_table` with every entry as a mantissa times its own power of two, for weights
    whose elementary symmetric polynomials leave the float range.

    Parameters
    ----------
    w : ndarray of float, shape (V,)
        Non-negative weights (any float64, subnormal included).
    n : int

    Returns
    -------
    mant : ndarray of float, shape (V + 1, n + 1)
        In [1/2, 1), or 0 where e_j = 0.
    expo : ndarray of int, shape (V + 1, n + 1)
        Row i holds :math:`e_j(w_0..w_{i-1}) = \\mathrm{mant}_{ij}\\, 2^{\\mathrm{expo}_{ij}}`.

    Notes
    -----
    The recurrence of :func:`esp_table` on (mantissa, exponent) pairs: a product of mantissas, a
    sum aligned to the larger exponent (a term under :math:`2^{-1074}` of the other is dropped),
    then renormalised; each step rounds twice, as the plain recurrence does, but nothing under- or
    overflows.
    """
    V = w.size
    mant = np.zeros((V + 1, n + 1))
    expo = np.zeros((V + 1, n + 1), dtype=np.int64)
    mant[0, 0] = 0.5
    expo[0, 0] = 1
    for i in range(V):
        mant[i + 1] = mant[i]
        expo[i + 1] = expo[i]
        mw, ew = math.frexp(w[i])
        if mw == 0.0:
            continue
        for j in range(1, n + 1):
            if mant[i, j - 1] == 0.0:
                continue
            tm, te = mw * mant[i, j - 1], ew + expo[i, j - 1]  # w_i e_{j-1}, tm in [1/4, 1)
            if mant[i, j] == 0.0:
                sm, se = tm, te
            else:
                se = max(te, expo[i, j])
                sm = math.ldexp(mant[i, j], expo[i, j] - se) + math.ldexp(tm, te - se)
            fm, fe = math.frexp(sm)
            mant[i + 1, j] = fm
            expo[i + 1, j] = se + fe
    return mant, expo


def scaled_inclusion_weights(w: np.ndarray, n: int) -> np.ndarray:
    """:math:`w_i\\, e_{n-1}(w_{-i})` for every i, scaled by one power of two, for any float64 weights.

    Parameters
    ----------
    w : ndarray of float, shape (V,)
        Non-negative weights, at least n of them positive.
    n : int
        At least 1.

    Returns
    -------
    ndarray of float, shape (V,)
        Proportional to the conditional Poisson inclusion probabilities
        :math:`\\pi_i = w_i e_{n-1}(w_{-i}) / e_n(w)`; the largest lies in [1/2, 1).

    Notes
    -----
    :math:`e_{n-1}(w_{-i}) = \\sum_j e_j(w_{<i})\\, e_{n-1-j}(w_{>i})` from prefix and suffix tables
    of :func:`scaled_esp_table`, the terms aligned to the largest exponent: sums and products of
    non-negative numbers, none under- or overflowing, so each weight is within a few ε (relative)
    of its exact value at moderate V (the a-priori bound grows like V n ε, as the plain recurrence's).
    O(V n).
    """
    w = np.ascontiguousarray(w, dtype=np.float64)
    pre_m, pre_e = scaled_esp_table(w, n)
    suf_m, suf_e = scaled_esp_table(np.ascontiguousarray(w[::-1]), n)
    return _inclusion_kernel(w, n, pre_m, pre_e, suf_m, suf_e)


@njit(cache=True)
def _inclusion_kernel(w, n, pre_m, pre_e, suf_m, suf_e):
    """The weights of :func:`scaled_inclusion_weights` from the prefix tables and the suffix
    tables (the prefix tables of the reversed weights: e_j(w_{>i}) is row V - 1 - i)."""
    V = w.size
    mant = np.zeros(V)
    expo = np.zeros(V, dtype=np.int64)
    top_all = np.iinfo(np.int64).min
    for i in range(V):
        mw, ew = math.frexp(w[i])
        r = V - 1 - i
        top = np.iinfo(np.int64).min
        for j in range(n):
            if pre_m[i, j] != 0.0 and suf_m[r, n - 1 - j] != 0.0:
                top = max(top, pre_e[i, j] + suf_e[r, n - 1 - j])
        if mw == 0.0 or top == np.iinfo(np.int64).min:
            continue
        total = 0.0
        for j in range(n):
            if pre_m[i, j] != 0.0 and suf_m[r, n - 1 - j] != 0.0:
                total += math.ldexp(pre_m[i, j] * suf_m[r, n - 1 - j],
                                    pre_e[i, j] + suf_e[r, n - 1 - j] - top)
        fm, fe = math.frexp(mw * total)
        mant[i] = fm
        expo[i] = ew + top + fe
        top_all = max(top_all, expo[i])
    out = np.zeros(V)
    for i in range(V):
        if mant[i] != 0.0:
            out[i] = math.ldexp(mant[i], expo[i] - top_all)
    return out
