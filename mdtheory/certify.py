"""Optimality certificates of the front door: a primal object checked against the dual cut.

Weak duality of the relaxed OTLP (the max-flow / min-cut pair of :mod:`mdtheory.routes.maxflow`): every
feasible primal object of objective A and every token set T satisfy

.. math:: A \\le \\alpha^* \\le 1 + p(T) - Q(T).

A route's value is **proven** when its cut T (the dual side, Q(T) recomputed by the draft model) and
a primal object (checked for feasibility here, not trusted) meet within :data:`CERT_TOL`, and the value
lies between them. Each route returns its primal object as a typed proof
(:mod:`mdtheory.routes.proofs`), and the check registered for that type (:func:`checks`) proves it:

==========================  ===================================================================
proof (routes)              primal object (``certificate``)
==========================  ===================================================================
``TransportPlan`` (otlp,    the plan π(y | x) (``"plan"``): rows are distributions, the output law
otlp-literal)               is p, acceptance :math:`\\sum_x Q(x) \\sum_{y \\in x} \\pi(y \\mid x)`.
``SetFlow`` (dual,          the flow S(U, y) (``"flow"``): non-negative, only along y ∈ U, within
maxflow)                    the capacities p(y) and w_U; its value :math:`\\sum S`.
``PrefixOrder``, iid        a base μ of B(g) (``"base"``, or ``"lex-base"`` with
                            ``certify="full"``): :math:`\\sum_y \\min(p, \\mu)`, membership by one
                            scan along the route's order (:func:`check_base_iid`).
``PrefixOrder``, without    the flow of :func:`~mdtheory.routes.dual.dual_lp` when the model's set law is
replacement (a model        enumerated through at most :data:`MAX_CERT_SETS` draft sets
declaring                   (:meth:`~mdtheory.models.base.DraftModel.set_law_size`, or
``exponential_race``)       ``certify="full"``); beyond, a base of the iid drafts' coverage
                            (``"iid-base"``: successive sampling's containment is at most q(T)^n) or
                            the face bound of majorants of the containment (``"majorant"``,
                            :func:`~mdtheory.models.majorant.face_bound`), where one meets the cut
                            (papers/theory.md, "Successive sampling: lower bounds from majorants of
                            the containment"); otherwise only
                            the cut (``"cut"``, status ``"upper-bound"``: the value is a proven upper
                            bound, equal to α* if Hu et al.'s prefix property holds for successive
                            sampling, which the tests re-check against the exhaustive route).
                            Conditional Poisson beyond :data:`MAX_CERT_SETS`: ``"prefix-theorem"``,
                            status ``"optimal"`` (its prefix property is proved, see
                            :func:`~mdtheory.routes.subsets.prefix_scan`; the cut reproduces the value and
                            the route's order is checked to be the exact p/q order,
                            :func:`check_ratio_order`).
``PrefixBuckets`` (select,  the buckets of the ratio p/q (``"bracket"``): filled again from p and
iid)                        q, the bound of every prefix inside each bucket and the exact gains of
                            the buckets whose bound reaches the best (:func:`check_buckets_iid`),
                            the route's opened buckets gathered in the same pass; where the route
                            gives no cut set (the value alone), its threshold measured from those
                            buckets; ``certify="full"``: the lexicographically optimal base
                            (``"lex-base"``).
``PriorityOrders`` (mnp)    a mixture of priority orders (``"order-mixture"``): its base μ is
                            recomputed from the model's laws, in B(g) for any orders and weights
                            (:func:`~mdtheory.models.mixture.check_mixture`).
``TopAndDraw`` (greedy)     a flow of the token/draft-set network in factored form
                            (``"greedy-flow"``, :func:`check_greedy_flow`), read against the
                            model's own law of the drawn draft; O(V).
``Exhaustive`` (subsets)    the minimum itself (``"exhaustive"``): the certifier evaluates
                            p(T) - Q(T) on all :math:`2^V` sets again from the model
                            (:func:`exhaustive_minimum`), and the route's cut must attain it.
==========================  ===================================================================

A plan or flow is read against the model's own tuple or set law (the route's support and masses must
reproduce it), and the base against the model's own coverage: only the route's order is taken on
trust, and any order is sound. Tolerances are named here and nowhere else in the certificate:
:data:`VALUE_TOL`, :data:`FEAS_TOL`, :data:`CERT_TOL`, :data:`RATIO_TOL` (and the size limit
:data:`MAX_CERT_SETS`). Nothing is clamped: a failed check raises
:class:`~mdtheory.errors.SolverError`.

References
----------
Hu et al., "Towards Optimal Multi-draft Speculative Decoding", ICLR 2025 (Theorem 1, the dual).
Thomas & Pal, "Global Resolution", ICLR 2026 (max-flow form). Khisti et al., ICLR 2025, Theorem 1
(canonical decomposition: a base μ of the coverage polytope is realised by importance sampling).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ._jit import _two_sum, njit
from .errors import InvalidInputError, SolverError
from .models.base import DraftModel
from .models.iid import IID
from .models.majorant import best_prefix, face_bound
from .models.mixture import check_mixture
from .models.polymatroid import TINY, _lex_blocks, _not_flatter, _total_excess, lex_optimal_base_iid
from .routes.proofs import (
    Exhaustive,
    PrefixBuckets,
    PrefixOrder,
    PriorityOrders,
    Proof,
    RouteOutput,
    SetFlow,
    TopAndDraw,
    TransportPlan,
)
from .routes.select import bracket
from .routes.subsets import LOG_POWER_N, _add, _iid_power, prefix_order

__all__ = ["certify", "checks", "check_plan", "check_flow", "check_base_iid", "cut_value", "cut_masses",
           "support_members", "check_ratio_order", "check_buckets_iid", "Certificate", "VALUE_TOL",
           "FEAS_TOL", "CERT_TOL", "RATIO_TOL", "MAX_CERT_SETS", "CERTIFY_MODES"]

#: A value may leave [0, 1] by at most this (rounding; an LP route's objective is accurate to ~1e-8).
VALUE_TOL = 1e-7
#: Each feasibility constraint of a plan, flow or base may be violated by at most this (HiGHS works
#: to 1e-10 per constraint; the violation is also charged to the lower bound, see check_plan etc.).
FEAS_TOL = 1e-8
#: The value, the cut value and the primal lower bound must agree within this (the literal OTLP's
#: objective has been seen 5e-9 off its cut on V <= 6, n <= 4).
CERT_TOL = 1e-7
#: Base scan: mu/q may exceed its run's least value by this (relative) without starting a new run.
#: Soundness does not depend on it (the excess is charged to the bound), only tightness at ties.
RATIO_TOL = 1e-9
#: Without-replacement prefix route: the flow proof by default up to this many draft sets.
MAX_CERT_SETS = 2_000
#: ``"fast"``: primal objects that cost O(V) beyond the route; ``"full"``: independent ones.
CERTIFY_MODES = ("fast", "full")
#: Token sets per block of the exhaustive certificate's own enumeration (:func:`exhaustive_minimum`).
EXHAUSTIVE_BLOCK = 1 << 14


class Certificate(NamedTuple):
    """What proved a route's value.

    Attributes
    ----------
    name : str
        The primal object: ``"plan"``, ``"flow"``, ``"base"``, ``"lex-base"``, ``"order-mixture"``,
        ``"greedy-flow"``, ``"exhaustive"``, ``"prefix-theorem"``, ``"iid-base"``, ``"majorant"``,
        ``"bracket"`` (the bounds of buckets of the ratio, no primal object: the prefix theorem and
        the bounds prove it) or
        ``"cut"`` (no primal object: the value is only an upper bound).
    status : str
        ``"optimal"`` (both bounds meet) or ``"upper-bound"``.
    gap : float or None
        Cut value minus the primal lower bound (objective less infeasibility); None without a primal.
    base : ndarray or None
        The base μ in token order, for the ``base``, ``lex-base`` and ``iid-base`` certificates.
    cut_p, cut_q : float
        p(T) and Q(T) of the route's cut T, recomputed from the inputs (the upper bound is
        1 + cut_p - cut_q).
    """

    name: str
    status: str
    gap: float | None = None
    base: np.ndarray | None = None
    cut_p: float = float("nan")
    cut_q: float = float("nan")


def support_members(support: np.ndarray, V: int) -> np.ndarray:
    """Indicator (M, V) of the tokens of each support entry: draft sets (bool) or tuples (int)."""
    support = np.asarray(support)
    if support.dtype == bool:
        return support
    members = np.zeros((len(support), V), dtype=bool)
    members[np.arange(len(support))[:, None], support] = True
    return members


@njit(cache=True)
def _iid_cut(p, q, cut, n):
    """(p(T), Q(T) = (1 - q(T^c))^n) of the token set ``cut``, strictly increasing indices in
    0..V-1, in one pass over it; (NaN, NaN) for any other ``cut`` (checked first: the pass then
    reads unchecked unsigned indices, which numba does not wrap around). p(T) and q(T) are summed
    in blocks of 64 tokens, four lanes of plain sums each (no chain of additions one token long), the blocks
    compensated: relative error below 17 u (u = 2^-53). Beyond
    :data:`~mdtheory.routes.subsets.LOG_POWER_N` drafts, where the power needs q(T)'s distance
    to one to its own precision, every token is added compensated, and that distance is q(T) -
    q(Ω) = -q(T^c). The power by :func:`~mdtheory.routes.subsets._iid_power`."""
    V, K = p.size, cut.size
    bad = K > 0 and (cut[0] < 0 or cut[K - 1] >= V)
    for k in range(1, K):
        bad |= cut[k] <= cut[k - 1]
    if bad:
        return np.nan, np.nan
    exact = n > LOG_POWER_N
    excess = _total_excess(q) if exact else 0.0
    s, sc, t, tc = 0.0, 0.0, 0.0, 0.0
    for start in range(0, K, 64):
        stop = min(start + 64, K)
        a0, a1, a2, a3, b0, b1, b2, b3 = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
        k = start
        if not exact and stop - start == 64 and cut[stop - 1] - cut[start] == 63:
            # 64 consecutive tokens (the common case of a cut that is most tokens): read in
            # place, each lane the same tokens as below (the same bits), without the indices
            b = np.uint64(cut[start])
            for j in range(16):
                i0 = b + np.uint64(4 * j)
                a0 += p[i0]
                a1 += p[i0 + np.uint64(1)]
                a2 += p[i0 + np.uint64(2)]
                a3 += p[i0 + np.uint64(3)]
                b0 += q[i0]
                b1 += q[i0 + np.uint64(1)]
                b2 += q[i0 + np.uint64(2)]
                b3 += q[i0 + np.uint64(3)]
            k = stop
        elif not exact:
            for _ in range((stop - start) // 4):
                i0, i1 = np.uint64(cut[k]), np.uint64(cut[k + 1])
                i2, i3 = np.uint64(cut[k + 2]), np.uint64(cut[k + 3])
                a0 += p[i0]
                a1 += p[i1]
                a2 += p[i2]
                a3 += p[i3]
                b0 += q[i0]
                b1 += q[i1]
                b2 += q[i2]
                b3 += q[i3]
                k += 4
        for j in range(k, stop):
            i0 = np.uint64(cut[j])
            if exact:
                s, sc = _add(s, sc, p[i0])
                t, tc = _add(t, tc, q[i0])
            else:
                a0 += p[i0]
                b0 += q[i0]
        s, sc = _add(s, sc, (a0 + a1) + (a2 + a3))
        t, tc = _add(t, tc, (b0 + b1) + (b2 + b3))
    return s + sc, _iid_power(t, tc, n, excess)


def cut_masses(p: np.ndarray, model: DraftModel, cut) -> tuple[float, float]:
    """(p(T), Q(T)) of the token set T, computed from the inputs: for iid drafts and a cut of
    increasing indices by one compiled pass over it (:func:`_iid_cut`, Q(T) = q(T)^n by the
    formula the certificates rest on), otherwise by the model's
    :meth:`~mdtheory.models.base.DraftModel.containment`.

    Raises
    ------
    SolverError
        ``cut`` holds an index outside 0..V-1.
    """
    cut = np.asarray(cut, dtype=np.int64)
    if model.lex_base_closed_form and cut.ndim == 1:
        p_cut, q_cut = _iid_cut(p, model.q, cut, model.n)
        if p_cut == p_cut:  # NaN: not increasing, or out of range (said below)
            return float(p_cut), float(q_cut)
    if cut.size and (cut.min() < 0 or cut.max() >= p.size):
        raise SolverError(f"the cut set holds token indices outside 0..{p.size - 1}")
    in_cut = np.zeros(p.size, dtype=bool)
    in_cut[cut] = True
    return float(p[in_cut].sum()), float(model.containment(in_cut))


def cut_value(p: np.ndarray, model: DraftModel, cut) -> float:
    """:math:`1 + p(T) - Q(T)`, an upper bound on α* for every token set T (weak duality).

    Raises
    ------
    SolverError
        ``cut`` holds an index outside 0..V-1.
    """
    p_cut, q_cut = cut_masses(p, model, cut)
    return 1.0 + p_cut - q_cut


def check_greedy_flow(p: np.ndarray, model: DraftModel, who: str = "greedy flow") -> float:
    """The lower bound proved by a feasible flow for Hu et al.'s greedy draft set, in O(V).

    The draft sets are :math:`U_c = \\mathrm{top} \\cup \\{c\\}` with masses :math:`\\tilde q(c)`
    (the model's own law). The flow :math:`S(U_c, c) = m_c = \\min(p(c), \\tilde q(c))` and
    :math:`S(U_c, t) = (\\tilde q(c) - m_c)\\, p(t) / R` for t in the top,
    :math:`R = \\sum_c (\\tilde q(c) - m_c)`, is kept factored: token c receives
    :math:`m_c \\le p(c)`, a top token t receives exactly p(t), and set :math:`U_c` sends
    :math:`m_c + (\\tilde q(c) - m_c)\\, p(\\mathrm{top}) / R \\le \\tilde q(c)` exactly when
    :math:`p(\\mathrm{top}) \\le R`; otherwise the flow to the top is scaled down by R / p(top).
    Its value :math:`\\sum_c m_c + \\min(p(\\mathrm{top}), R)` is at most α*.

    Raises
    ------
    SolverError
        The model's law is not a distribution outside the top (negative or non-finite masses, mass
        on a top token, a sum off one by more than :data:`FEAS_TOL`).
    """
    top, tail = model.top, model.tail
    if not np.isfinite(tail).all() or tail.min(initial=0.0) < 0.0:
        raise SolverError(f"{who}: the drawn draft's law has a negative or non-finite mass")
    if np.any(tail[top] != 0.0):
        raise SolverError(f"{who}: the drawn draft's law puts mass on a top token")
    if (off := abs(math.fsum(tail) - 1.0)) > FEAS_TOL:
        raise _infeasible(who, "the drawn draft's law misses summing to one", off)
    m = np.minimum(p, tail)
    rest = math.fsum(tail - m)
    return math.fsum(m) + min(math.fsum(p[top]), rest)


def _infeasible(who: str, what: str, amount: float) -> SolverError:
    return SolverError(f"{who}: {what} by {amount:.3g} (tolerance {FEAS_TOL:g})")


def check_plan(p: np.ndarray, members: np.ndarray, mass: np.ndarray, plan: np.ndarray,
               who: str = "plan") -> float:
    """Check a selection rule π(y | x) and return the lower bound on α* that it proves.

    Parameters
    ----------
    p : ndarray, shape (V,)
    members : ndarray of bool, shape (M, V)
        Tokens of each draft support entry x.
    mass : ndarray, shape (M,)
        Q(x).
    plan : ndarray, shape (M, V)
        π(y | x).
    who : str
        Names the route in error messages.

    Returns
    -------
    float
        :math:`A - \\mathrm{TV}(p, p')`, where A is the plan's acceptance and p' its output law: α* is
        1-Lipschitz in p for the total variation distance (each p(T) moves by at most TV), so a plan
        for the target p' proves :math:`\\alpha^*(p) \\ge A - \\mathrm{TV}(p, p')`.

    Raises
    ------
    SolverError
        A non-finite or negative entry, a row that does not sum to one, or an output law off p by
        more than :data:`FEAS_TOL`.
    """
    plan = np.asarray(plan, dtype=float)
    if plan.shape != members.shape:
        raise SolverError(f"{who}: plan has shape {plan.shape}, expected {members.shape}")
    if not np.isfinite(plan).all():
        raise SolverError(f"{who}: the plan has a non-finite entry")
    if (low := -float(plan.min(initial=0.0))) > FEAS_TOL:
        raise _infeasible(who, "a plan entry is negative", low)
    if (off := float(np.abs(plan.sum(axis=1) - 1.0).max(initial=0.0))) > FEAS_TOL:
        raise _infeasible(who, "a row of the plan misses summing to one", off)
    law = mass @ plan
    if (off := float(np.abs(law - p).max())) > FEAS_TOL:
        raise _infeasible(who, "the plan's output law differs from p", off)
    accepted = float((plan * members).sum(axis=1) @ mass)
    return accepted - 0.5 * float(np.abs(law - p).sum())


def check_flow(p: np.ndarray, members: np.ndarray, mass: np.ndarray, flow: np.ndarray,
               who: str = "flow") -> float:
    """Check a flow S(U, y) of the token/draft-set network and return the lower bound it proves.

    The flow enters token y from the source, goes to a set U ∋ y and on to the sink; conservation at
    every node holds by this representation, so feasibility is: S >= 0, S = 0 where y ∉ U,
    :math:`\\sum_U S(U, y) \\le p(y)` and :math:`\\sum_y S(U, y) \\le w_U`.

    Returns
    -------
    float
        The value of the feasible flow obtained by removing the excess over each capacity:
        :math:`\\sum S^+ - \\sum_y (\\mathrm{in}_y - p_y)^+ - \\sum_U (\\mathrm{out}_U - w_U)^+`,
        :math:`S^+ = \\max(S, 0)`. Every feasible flow is at most the max-flow α*.

    Raises
    ------
    SolverError
        A non-finite entry, or a negative entry, flow outside a draft set, or a capacity exceeded by
        more than :data:`FEAS_TOL`.
    """
    flow = np.asarray(flow, dtype=float)
    if flow.shape != members.shape:
        raise SolverError(f"{who}: flow has shape {flow.shape}, expected {members.shape}")
    if not np.isfinite(flow).all():
        raise SolverError(f"{who}: the flow has a non-finite entry")
    if (low := -float(flow.min(initial=0.0))) > FEAS_TOL:
        raise _infeasible(who, "a flow entry is negative", low)
    if (stray := float(np.abs(flow[~members]).max(initial=0.0))) > FEAS_TOL:
        raise _infeasible(who, "flow runs from a token to a draft set without it", stray)
    flow = np.where(members, np.maximum(flow, 0.0), 0.0)
    over_p = np.maximum(flow.sum(axis=0) - p, 0.0)
    over_w = np.maximum(flow.sum(axis=1) - mass, 0.0)
    if (over := float(over_p.max(initial=0.0))) > FEAS_TOL:
        raise _infeasible(who, "a token sends more than p(y)", over)
    if (over := float(over_w.max(initial=0.0))) > FEAS_TOL:
        raise _infeasible(who, "a draft set receives more than w_U", over)
    return float(flow.sum()) - float(over_p.sum()) - float(over_w.sum())


@njit(cache=True)
def _cover(contained, k):
    """g of the first k tokens of the reversed order: 1 - Q(the other V - k), the model's
    containment of the first V - k tokens of the order (``contained[V - k - 1]``)."""
    V = contained.size
    if k == 0:
        return 0.0
    return 1.0 if k == V else 1.0 - contained[V - k - 1]


@njit(cache=True)
def _iid_points(order, p, q, n):
    """p and q along ``order[::-1]``, and the iid containments of the prefixes of ``order``,
    :math:`Q = \\min(q(\\text{prefix}), 1)^n` (as :meth:`~mdtheory.models.iid.IID.prefix_containment`,
    fused into this pass: q is read once and the integer power is a few multiplications; beyond
    :data:`~mdtheory.routes.subsets.LOG_POWER_N` drafts :math:`(1 - q(\\text{rest}))^n`, the total's
    distance from one taken first, :func:`~mdtheory.routes.subsets._iid_power`); empty arrays if
    ``order`` is no permutation of 0..V-1."""
    V = p.size
    excess = _total_excess(q) if n > LOG_POWER_N else 0.0
    seen = np.zeros(V, np.bool_)
    ps, qs, contained = np.empty(V), np.empty(V), np.empty(V)
    s, c = 0.0, 0.0
    for k in range(V):
        y = order[k]
        if y < 0 or y >= V or seen[y]:
            return np.empty(0), np.empty(0), np.empty(0)
        seen[y] = True
        ps[V - 1 - k] = p[y]
        qs[V - 1 - k] = q[y]
        s, c = _add(s, c, q[y])  # compensated, as the route's scan
        contained[k] = _iid_power(s, c, n, excess)
    return ps, qs, contained


@njit(cache=True)
def _runs(ps, contained):
    """The path of :func:`~mdtheory.models.polymatroid._lex_blocks` along ``order[::-1]``, increments
    (p, rise of g), cut into maximal runs over which the slope rise/p does not increase, with masses
    p below TINY set to zero in ``ps`` (in place). Returns (first token of each run plus the end, run
    sums of p, of the rises), the sums compensated.

    Pooling the runs gives the blocks of pooling the tokens: where a token's slope is at least the
    next one's, the two lie in one block of the greatest convex minorant (at a break point the path
    comes in no steeper than the minorant's slope on the left and leaves no flatter than its larger
    slope on the right). The runs are a few times fewer than the tokens. The comparison is
    :func:`~mdtheory.models.polymatroid._not_flatter`'s (p = 0 < rise is slope infinity; an empty token,
    p = rise = 0, joins the run it meets and is passed over), cross-multiplied where neither product
    is below 2^-900 (no division; with p >= TINY and rises <= 1 nothing overflows). The breaks fall
    at random, so they are computed rather than branched on: each token rewrites its run's sums and
    end.
    """
    V = ps.size
    start, rp, rg = np.empty(V + 1, np.int64), np.empty(V), np.empty(V)
    start[0] = 0
    m = 0
    s, sc, t, tc = 0.0, 0.0, 0.0, 0.0
    last_p, last_g, cover = 0.0, 0.0, 0.0  # the run's last token that is not empty; g before k
    for k in range(V):
        x = ps[k] if ps[k] >= TINY else 0.0
        ps[k] = x
        after = _cover(contained, k + 1)
        rise, cover = after - cover, after
        empty = (x == 0.0) & (rise == 0.0)
        left, right = last_g * x, rise * last_p
        if min(left, right) < 2.0 ** -900:  # rare: products this small may have lost bits
            steeper = not _not_flatter(last_g, last_p, rise, x)
        else:
            steeper = left < right
        joins = empty or last_p == 0.0 or (x != 0.0 and not steeper)
        m += 1 if k == 0 or not joins else 0
        keep = 1.0 if joins else 0.0
        s, sc, t, tc = s * keep, sc * keep, t * keep, tc * keep
        s, e = _two_sum(s, x)
        sc += e
        t, e = _two_sum(t, rise)
        tc += e
        rp[m - 1], rg[m - 1], start[m] = s + sc, t + tc, k + 1
        last_p, last_g = (last_p, last_g) if empty else (x, rise)
    return start[: m + 1], rp[:m], rg[:m]


@njit(cache=True)
def _base_scan(ps, qs, contained, order, bounds, dP, dG, mu_in, ratio_tol, mu_out):
    """One pass along ``order[::-1]``: the base (``mu_in`` in token order if given, else each pooled
    block's rise dG shared by p as (dG / dP) * p, one division per block, which cannot overflow as
    dP >= TINY; or where dP = 0 by q as dG * (q / dQ), dQ possibly subnormal), written to ``mu_out`` in
    token order, and its check.

    Returns (sum of min(p, mu), eta, min mu, sum mu); eta is the bound of
    :func:`check_base_iid`: per run, the most the capped mu~ exceeds g's rise since the run's start,
    plus the run's sum of mu - mu~.
    """
    V = ps.size
    acc, m, m_c = 0.0, 0.0, 0.0
    eta, mu_min = 0.0, np.inf
    d = 0.0  # M - G of the tokens scanned so far
    start, top, m_run = d, d, 0.0  # D and M at the run's start; the run's largest D~
    mt, w, rmin = 0.0, 0.0, np.inf  # the run's sums of mu~ and of mu - mu~; its least mu/q
    j, share, slope = -1, 0.0, 0.0
    for k in range(V):
        y = order[V - 1 - k]
        if mu_in.size:
            mu = mu_in[y]
        else:
            if k == bounds[j + 1]:  # a new pooled block
                j += 1
                share = dP[j]
                slope = dG[j] / share if share > 0 else 0.0
                if share <= 0:  # p = 0 < q on the block: share by q
                    share = 0.0
                    for i in range(bounds[j], bounds[j + 1]):
                        share += qs[i]
            if dP[j] > 0:
                mu = slope * ps[k]
            else:
                mu = dG[j] * (qs[k] / share) if share > 0 else 0.0
        qy = qs[k]
        if qy > 0 or mu > 0:
            r = mu / qy if qy > 0 else np.inf
            # a new run where mu/q rises past the run's least; and at a ratio that overflowed
            if r > rmin + ratio_tol * abs(rmin) or (qy > 0 and r == np.inf):
                eta += max(top - start, 0.0) + w
                start, top, m_run = d, d, m + m_c
                mt, w, rmin = 0.0, 0.0, np.inf
            rmin = min(rmin, r)
            cap = min(mu, rmin * qy) if qy > 0 else mu
        else:  # q = 0 and mu <= 0: mu~ = 0 >= mu
            cap = 0.0
        w += max(mu - cap, 0.0)
        mt += cap
        m, m_c = _add(m, m_c, mu)
        g = _cover(contained, k + 1)
        d = (m + m_c) - g
        top = max(top, m_run + mt - g)
        acc += min(ps[k], mu)
        mu_min = min(mu_min, mu)
        mu_out[y] = mu
    eta += max(top - start, 0.0) + w
    return acc, eta, mu_min, m + m_c


def _base_bounds(p: np.ndarray, model: DraftModel, order, mu, who: str):
    """(sum of min(p, mu), eta, min mu, mu(Omega), mu in token order) of :func:`check_base_iid`,
    without its verdict."""
    if not model.lex_base_closed_form:
        raise InvalidInputError(f"the one-scan base check needs iid drafts, not {model.sampling!r}")
    order = np.asarray(order)
    if order.shape != p.shape or not np.issubdtype(order.dtype, np.integer):
        raise SolverError(f"{who}: the route's order is not a permutation of the {p.size} tokens")
    ps, qs, contained = _iid_points(order, p, model.q, model.n)  # from p and q, not the route
    if ps.size != p.size:
        raise SolverError(f"{who}: the route's order is not a permutation of the {p.size} tokens")
    if mu is None:  # pool along the order: the lower convex hull of (p, g) of its prefixes
        # p below TINY counts as zero, as in lex_optimal_base_iid (the pooling's slopes stay finite);
        # this only lowers the proven bound sum(min(p, mu)), by at most V * TINY
        starts, run_p, run_g = _runs(ps, contained)
        bounds, dP, dG = _lex_blocks(run_p, run_g)
        bounds = starts[bounds]
        mu_in = np.zeros(0)
    else:
        bounds, dP, dG = np.zeros(1, np.int64), np.zeros(0), np.zeros(0)
        mu_in = np.asarray(mu, dtype=float)
        if mu_in.shape != p.shape:
            raise SolverError(f"{who}: the base has shape {mu_in.shape}, expected {p.shape}")
    mu = np.empty(p.size)
    accepted, excess, mu_min, total = _base_scan(ps, qs, contained, order, bounds, dP, dG,
                                                 mu_in, RATIO_TOL, mu)
    return accepted, excess, mu_min, total, mu


def check_base_iid(p: np.ndarray, model: DraftModel, order: np.ndarray, mu: np.ndarray | None = None,
                   who: str = "base") -> tuple[float, np.ndarray]:
    """Check a base μ of B(g) for iid drafts by one scan and return the lower bound on α* it proves.

    For iid drafts :math:`g(S) = h(q(S))` with :math:`h(t) = 1 - (1 - t)^n` concave. If
    :math:`\\mu(S) \\le g(S) + \\eta` for every S, then :math:`\\alpha^* \\ge \\sum_y \\min(p, \\mu) - \\eta`.
    η comes from one scan along the reverse of the route's order, cut into runs where μ/q rises
    past its run's least value by more than :data:`RATIO_TOL` (relative): per run, the excess of μ
    over the running minimum of μ/q times q, plus the largest excess of that capped μ's prefix sums
    over g's increments. The bound holds for any order, runs and μ; for the lexicographically
    optimal base η is rounding. Proof: papers/theory.md, section "The iid base certificate: a lower
    bound by one scan".

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : IID
    order : ndarray of int, shape (V,)
        A permutation: the prefix route's order (q/p decreasing); the scan runs along its reverse.
    mu : ndarray, shape (V,), optional
        The base to check, in token order; default: the base pooled along ``order[::-1]``, the
        greatest convex minorant of the points (p(S_k), g(S_k)) of its prefixes S_k, each segment's
        rise of g shared by its tokens in proportion to p (by q on a vertical segment, p = 0 < q).
        Along q/p increasing this is the lexicographically optimal base
        (:func:`~mdtheory.models.polymatroid.lex_optimal_base_iid`), here from the model's own coverage
        values instead of a second sort.
    who : str
        Names the route in error messages.

    Returns
    -------
    lower : float
        :math:`\\sum_y \\min(p, \\mu) - \\eta`.
    mu : ndarray, shape (V,)
        The base, in token order.

    Raises
    ------
    SolverError
        ``order`` is not a permutation; μ has a non-finite entry, a negative entry, does not sum to
        one, or exceeds g (η) by more than :data:`FEAS_TOL`.

    Notes
    -----
    O(V) beyond the route: one compiled pass for p, q and g along the order, one that cuts it into
    runs of non-increasing slope (:func:`_runs`; pooling runs gives the blocks of pooling tokens),
    the pooling of the runs by :func:`~mdtheory.models.polymatroid._lex_blocks` and one compiled scan. p,
    q and g are computed here from the inputs (g by the iid formula the proof rests on, fused into
    the first pass: recomputing it through the model's vectorised containment cost more than the
    rest of the certificate), never taken from the route, which contributes only the order (any
    permutation is sound). Floating point: μ(Ω) is summed with compensation; the sums of min(p, μ)
    and of :math:`\\tilde\\mu` are plain, each off by at most V u (u = 2^-53; 1.4e-11 at
    V = 128,000), which :data:`FEAS_TOL` and :data:`CERT_TOL` absorb.
    """
    accepted, excess, mu_min, total, mu = _base_bounds(p, model, order, mu, who)
    if not math.isfinite(total):
        raise SolverError(f"{who}: the base has a non-finite entry")
    if -mu_min > FEAS_TOL:
        raise _infeasible(who, "a base entry is negative", -mu_min)
    if abs(total - 1.0) > FEAS_TOL:
        raise _infeasible(who, "the base misses summing to one", abs(total - 1.0))
    if excess > FEAS_TOL:
        raise _infeasible(who, "the base exceeds the coverage g(S) of a token set", excess)
    return accepted - excess, mu


def _model_law(model: DraftModel, support, support_probs, tuples: bool, who: str):
    """(members, masses) of the model's own tuple or set law, which the route's support and its
    probabilities must reproduce: a plan or flow is checked against the drafts' true law."""
    law = model.tuple_law() if tuples else model.set_law()
    own = law.tuples if tuples else law.members
    got, probs = np.asarray(support), np.asarray(support_probs, dtype=float)
    if got.shape != own.shape or not np.array_equal(got, own) or \
            probs.shape != law.probs.shape or not np.abs(probs - law.probs).max() <= FEAS_TOL:
        raise SolverError(f"{who}: its support or their probabilities differ from the draft model's "
                          f"{'tuple' if tuples else 'set'} law")
    return support_members(own, model.V), law.probs


def dual_lp(p: np.ndarray, model: DraftModel) -> RouteOutput:
    """:func:`mdtheory.routes.dual.dual_lp`, imported on first use (it loads scipy and HiGHS)."""
    from .routes.dual import dual_lp as route

    return route(p, model)


def check_ratio_order(p: np.ndarray, q: np.ndarray, order, who: str) -> None:
    """Check that ``order`` is a permutation of the tokens along which the exact ratio p/q never
    decreases (:func:`~mdtheory.routes.subsets.ratio_keys`: no mass is read as zero), the order whose best
    prefix the conditional-Poisson prefix theorem proves optimal. O(V).

    Raises
    ------
    SolverError
        ``order`` is missing, not a permutation, or not in exact ratio order.
    """
    from .routes.subsets import ratio_keys

    if order is None:
        raise SolverError(f"{who} returned no order to certify")
    order = np.asarray(order)
    if (order.shape != p.shape or not np.issubdtype(order.dtype, np.integer)
            or not np.array_equal(np.sort(order), np.arange(p.size))):
        raise SolverError(f"{who}: the route's order is not a permutation of the {p.size} tokens")
    cls, e, m = (k[order] for k in ratio_keys(p, q))
    a, b = slice(None, -1), slice(1, None)
    rising = (cls[a] < cls[b]) | ((cls[a] == cls[b]) & (
        (cls[a] != 1) | (e[a] < e[b]) | ((e[a] == e[b]) & (m[a] <= m[b]))))
    if not rising.all():
        k = int(np.flatnonzero(~rising)[0])
        raise SolverError(f"{who}: the route's order is not the exact p/q order the prefix theorem "
                          f"needs (tokens {int(order[k])} and {int(order[k + 1])} are out of order)")


#: The check of each proof type (:mod:`mdtheory.routes.proofs`), registered by :func:`checks`.
CHECKS: dict[type, Callable] = {}


def checks(proof_type: type) -> Callable:
    """Register the function that checks proofs of ``proof_type`` (a decorator).

    The function is ``check(p, model, proof, who, mode) -> (name, lower, base)``: the certificate's
    name, the lower bound on α* the proof establishes (None: the value is proven another way, or
    only bounded above when the name is ``"cut"``) and the base μ it exhibits (or None). A proof
    that describes the route's cut itself (for a route that gives no cut set) adds a fourth item,
    (p(T), Q(T)) of that cut measured from the inputs. It raises
    :class:`~mdtheory.errors.SolverError` when the proof is missing or infeasible.
    """
    def register(fn: Callable) -> Callable:
        CHECKS[proof_type] = fn
        return fn
    return register


@checks(TransportPlan)
def _check_transport_plan(p, model, proof: TransportPlan, who, mode):
    if proof.plan is None or proof.support is None or proof.support_probs is None:
        raise SolverError(f"{who} returned no plan to certify")
    members, mass = _model_law(model, proof.support, proof.support_probs, proof.tuples, who)
    return "plan", check_plan(p, members, mass, proof.plan, who), None


@checks(SetFlow)
def _check_set_flow(p, model, proof: SetFlow, who, mode):
    if proof.flow is None or proof.support is None or proof.support_probs is None:
        raise SolverError(f"{who} returned no flow to certify")
    members, mass = _model_law(model, proof.support, proof.support_probs, False, who)
    return "flow", check_flow(p, members, mass, proof.flow, who), None


@checks(PrefixOrder)
def _check_prefix_order(p, model, proof: PrefixOrder, who, mode):
    if model.lex_base_closed_form:
        if proof.order is None:
            raise SolverError(f"{who} returned no order to certify")
        if mode == "full":
            lower, mu = check_base_iid(p, model, proof.order,
                                       lex_optimal_base_iid(p, model.q, model.n).mu, who)
            return "lex-base", lower, mu
        lower, mu = check_base_iid(p, model, proof.order, who=who)
        return "base", lower, mu
    if mode == "fast" and model.set_law_size() > MAX_CERT_SETS:
        if model.exponential_race and \
                (found := _successive_bounds(p, model, proof.order, who)) is not None:
            return found
        # a proved prefix property (subsets.prefix_scan) makes the best prefix optimal; a checked
        # one leaves the cut an upper bound. The theorem is about the exact ratio order: check that
        # the route scanned along it
        check_ratio_order(p, model.q, proof.order, who)
        return ("prefix-theorem" if model.prefix_property == "proved" else "cut"), None, None
    return _check_set_flow(p, model, dual_lp(p, model).proof, who, mode)


def _successive_bounds(p: np.ndarray, model: DraftModel, order, who: str):
    """Successive sampling's certificates by majorants of its containment (papers/theory.md,
    "Successive sampling: lower bounds from majorants of the containment"): first the iid base
    (:math:`Q(T) \\le q(T)^n`, so every base of the iid coverage is a base here), then
    :func:`~mdtheory.models.majorant.face_bound` on the face of the best prefix of ``order`` (its
    cheapest majorant alone first, the others only where it falls short of the prefix's value by
    more than :data:`CERT_TOL`). The first whose lower bound meets that value within
    :data:`CERT_TOL`, as (name, lower bound, base or None); None if neither does (the flow, or
    Wolfe's method at the front door). For the models declaring
    :attr:`~mdtheory.models.base.DraftModel.exponential_race`."""
    check_ratio_order(p, model.q, order, who)
    order = np.asarray(order, dtype=np.int64)
    upper, length = best_prefix(p, model, order)
    lower, mu = check_base_iid(p, IID(model.q, model.n), order, who=who)
    if upper - lower <= CERT_TOL:
        return "iid-base", lower, mu
    # a best prefix of value one up to rounding: acceptance one, whose face is all of B(g)
    for cut in (length, 0) if length and upper >= 1.0 - CERT_TOL else (length,):
        lower = face_bound(p, model, order, cut, goal=upper - CERT_TOL)
        if lower is not None and upper - lower <= CERT_TOL:
            return "majorant", lower, None
    return None


#: Largest ratio a bucket of a :class:`~mdtheory.routes.proofs.PrefixBuckets` proof may start at:
#: a token whose masses are both below TINY (ratio NaN, in the last bucket) then breaks the bucket's
#: bound p >= (lowest ratio) q by less than 2^64 TINY = 2^-536.
MAX_BUCKET_RATIO = 2.0 ** 64


def check_buckets_iid(p: np.ndarray, model: DraftModel, scheme, who: str = "buckets") -> float:
    """The lower bound on α* that buckets of the ratio p/q prove for iid drafts, filled here
    from p and q.

    The buckets (``scheme``, as :func:`~mdtheory.routes.select.bucket_scheme` gives) are intervals
    of the ratio in order; with their sums of p and q, every prefix of the ratio's order gains at
    most its bucket's bound, and the buckets whose bound reaches the best boundary are evaluated
    token by token (:func:`~mdtheory.routes.select.bracket`). Then
    :math:`\\alpha^* \\ge 1 - \\max(\\text{best}, \\text{bounds of the others})`. Proof:
    papers/theory.md, section "α* without a sort: buckets of the ratio bracket every prefix". Any
    monotone buckets are sound; only tightness depends on them.

    Raises
    ------
    SolverError
        A model other than iid, or a scheme that is not three integers with 0 <= shift <= 63,
        lo >= 0, 0 <= nb <= 65533, the last bucket starting at a ratio of at most
        :data:`MAX_BUCKET_RATIO`.
    """
    return _bucket_bounds(p, model, PrefixBuckets(scheme), who)[0]


def _ints(x, count: int | None = None) -> tuple | None:
    """``x`` as a tuple of Python ints (of ``count`` of them, if given), or None."""
    try:
        out = tuple(int(v) for v in x)
        ok = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in x)
    except (TypeError, ValueError):
        return None
    return out if ok and (count is None or len(out) == count) else None


def _bucket_bounds(p: np.ndarray, model: DraftModel, proof: PrefixBuckets, who: str):
    """(lower bound on α*, (p(T), q(T)^n) of the proof's threshold cut T or None): the buckets of
    ``proof.scheme`` filled from p and q, the buckets of ``proof.opened`` gathered in the same pass
    (:func:`check_buckets_iid`)."""
    if not model.lex_base_closed_form:
        raise SolverError(f"{who}: bucket bounds prove alpha* for iid drafts only, not "
                          f"{model.sampling!r}")
    scheme = _ints(proof.scheme, 3)
    if scheme is None or not (0 <= scheme[0] <= 63 and scheme[1] >= 0 and 0 <= scheme[2] <= 65533
                              and (scheme[2] + scheme[1]) << scheme[0]
                              <= int(np.float64(MAX_BUCKET_RATIO).view(np.int64))):
        raise SolverError(f"{who}: its buckets {proof.scheme!r} are not a valid scheme (shift, lo, nb)")
    nb = scheme[2]
    opened = None if proof.opened is None else _ints(np.asarray(proof.opened).ravel())
    if proof.opened is not None and (opened is None or any(not 0 <= j <= nb + 1 for j in opened)):
        raise SolverError(f"{who}: its opened buckets are not bucket indices in 0..{nb + 1}")
    cut = None if proof.threshold is None else _ints(proof.threshold, 2)
    if proof.threshold is not None and (cut is None or not (
            0 <= cut[0] <= nb + 2 and cut[1] >= -1 and (cut[1] == -1 or cut[0] <= nb + 1))):
        raise SolverError(f"{who}: its cut {proof.threshold!r} is not a threshold (bucket, ratio bits)")
    found = bracket(p, model.q, model.n, scheme, claimed=np.array(opened or (), np.int64), cut=cut)
    return 1.0 - max(found.best, found.closed), None if cut is None else (found.cut_p, found.cut_q)


@checks(PrefixBuckets)
def _check_prefix_buckets(p, model, proof: PrefixBuckets, who, mode):
    if mode == "full":  # an independent object: the lexicographically optimal base, by a sort
        if not model.lex_base_closed_form:
            raise SolverError(f"{who}: bucket bounds prove alpha* for iid drafts only, not "
                              f"{model.sampling!r}")
        lower, mu = check_base_iid(p, model, prefix_order(p, model.q),
                                   lex_optimal_base_iid(p, model.q, model.n).mu, who)
        return "lex-base", lower, mu
    lower, masses = _bucket_bounds(p, model, proof, who)
    return ("bracket", lower, None) if masses is None else ("bracket", lower, None, masses)


@checks(PriorityOrders)
def _check_priority_orders(p, model, proof: PriorityOrders, who, mode):
    lower, mu = check_mixture(p, model, proof.orders, proof.weights, who)
    return "order-mixture", lower, mu


@checks(TopAndDraw)
def _check_top_and_draw(p, model, proof: TopAndDraw, who, mode):
    if not model.fixed_top:
        raise SolverError(f"{who}: a top-and-draw flow needs a model that drafts fixed tokens and "
                          f"one draw, not {model.sampling!r} drafts")
    return "greedy-flow", check_greedy_flow(p, model, who), None


def exhaustive_minimum(p: np.ndarray, model: DraftModel) -> float:
    """:math:`\\min_T [p(T) - Q(T)]` over all :math:`2^V` token sets, enumerated here in blocks of
    :data:`EXHAUSTIVE_BLOCK` sets from the model's own containments (not from any route's scan).

    >>> from mdtheory.models.iid import IID
    >>> exhaustive_minimum(np.array([0.5, 0.5]), IID([1.0, 0.0], 2))  # T = {0}: 0.5 - 1
    -0.5
    """
    V = p.size
    bits = np.arange(V, dtype=np.int64)
    best = 0.0  # the empty set
    for start in range(0, 2 ** V, EXHAUSTIVE_BLOCK):
        codes = np.arange(start, min(start + EXHAUSTIVE_BLOCK, 2 ** V), dtype=np.int64)
        masks = ((codes[:, None] >> bits) & 1).astype(bool)
        best = min(best, float((masks @ p - model.containment(masks)).min()))
    return best


@checks(Exhaustive)
def _check_exhaustive(p, model, proof: Exhaustive, who, mode):
    """The minimum recomputed over all 2^V sets is the lower bound (α* is 1 + that minimum), so a
    route whose cut is not a minimiser fails the gap check."""
    if proof.sets != 2 ** p.size:
        raise SolverError(f"{who} reports {proof.sets} token sets evaluated, not all 2^{p.size}")
    return "exhaustive", 1.0 + exhaustive_minimum(p, model), None


def _primal(p: np.ndarray, model: DraftModel, out: RouteOutput, method: str, mode: str):
    """(certificate name, lower bound or None, base or None) for one route's output, by the check
    registered for its proof's type."""
    who = f"method {method!r}"
    proof = out.proof
    check = next((CHECKS[t] for t in type(proof).__mro__ if t in CHECKS), None) \
        if isinstance(proof, Proof) else None
    if check is None:
        raise SolverError(f"no certificate is known for method {method!r}: its proof is "
                          f"{type(proof).__name__}")
    return check(p, model, proof, who, mode)


def certify(p: np.ndarray, model: DraftModel, out: RouteOutput, method: str, mode: str = "fast"
            ) -> Certificate:
    """Prove a route's output optimal, or raise.

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : DraftModel
    out : RouteOutput
        The route's output: ``value``, ``cut`` and its proof object (:mod:`mdtheory.routes.proofs`),
        checked by the function registered for its type (:func:`checks`).
    method : str
        The route's name (a key of :data:`mdtheory.solve.METHODS`), for messages.
    mode : str
        A member of :data:`CERTIFY_MODES`.

    Returns
    -------
    Certificate

    Raises
    ------
    SolverError
        The value is not finite or leaves [0, 1] by more than :data:`VALUE_TOL`; the cut does not
        reproduce the value within :data:`CERT_TOL`; the primal object is infeasible (see
        :func:`check_plan`, :func:`check_flow`, :func:`check_base_iid`) or its lower bound misses
        the cut value by more than :data:`CERT_TOL`; the exhaustive route did not evaluate all sets;
        no check is registered for the proof's type.
    """
    value = float(out.value)
    if not -VALUE_TOL <= value <= 1.0 + VALUE_TOL:
        raise SolverError(f"method {method!r} returned alpha* = {value:.12g}, outside [0, 1]")
    if out.cut is None:  # the proof describes the cut, and its check measures it
        name, lower, base, *masses = _primal(p, model, out, method, mode)
        if not masses:
            raise SolverError(f"method {method!r} returned no cut set")
        p_cut, q_cut = masses[0]
    else:
        p_cut, q_cut = cut_masses(p, model, out.cut)
    upper = 1.0 + p_cut - q_cut
    if not abs(upper - value) <= CERT_TOL:
        shown = "(its proof's threshold)"
        if out.cut is not None:
            cut = np.asarray(out.cut).tolist()
            shown = f"{cut}" if len(cut) <= 10 else f"{str(cut[:10])[:-1]}, ...] ({len(cut)} tokens)"
        raise SolverError(
            f"method {method!r} returned value {value:.12g} but its cut set {shown} gives "
            f"{upper:.12g}"
        )
    if out.cut is not None:
        name, lower, base, *_ = _primal(p, model, out, method, mode)
    if lower is None:
        return Certificate(name, "upper-bound" if name == "cut" else "optimal", None, None, p_cut, q_cut)
    gap = upper - lower
    if not abs(gap) <= CERT_TOL:
        raise SolverError(
            f"method {method!r}: its {name} proves alpha* >= {lower:.12g} but its cut set gives "
            f"alpha* <= {upper:.12g} (gap {gap:.3g}, tolerance {CERT_TOL:g})"
        )
    return Certificate(name, "optimal", gap, base, p_cut, q_cut)
