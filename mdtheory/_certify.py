"""Optimality certificates of the front door: a primal object checked against the dual cut.

Weak duality of the relaxed OTLP (the max-flow / min-cut pair of :mod:`mdtheory.maxflow`): every
feasible primal object of objective A and every token set T satisfy

.. math:: A \\le \\alpha^* \\le 1 + p(T) - Q(T).

A route's value is **proven** when its cut T (the dual side, Q(T) recomputed by the draft model) and
a primal object (checked for feasibility here, not trusted) meet within :data:`CERT_TOL`, and the value
lies between them. The primal object per route:

==========================  ===================================================================
route                       primal object (``certificate``)
==========================  ===================================================================
``otlp``, ``otlp-literal``  the plan π(y | x) (``"plan"``): rows are distributions, the output law
                            is p, acceptance :math:`\\sum_x Q(x) \\sum_{y \\in x} \\pi(y \\mid x)`.
``dual``, ``maxflow``       the flow S(U, y) (``"flow"``): non-negative, only along y ∈ U, within
                            the capacities p(y) and w_U; its value :math:`\\sum S`.
``prefix``, iid             a base μ of B(g) (``"base"``, or ``"lex-base"`` with
                            ``certify="full"``): :math:`\\sum_y \\min(p, \\mu)`, membership by one
                            scan along the route's order (:func:`check_base_iid`).
``prefix``, without         the flow of :func:`~mdtheory.dual.dual_lp` when the model has at most
replacement                 :data:`MAX_CERT_SETS` draft sets (or ``certify="full"``); otherwise only
                            the cut (``"cut"``, status ``"upper-bound"``: the value is a proven upper
                            bound, equal to α* if Hu et al.'s prefix property holds for successive
                            sampling, which the tests re-check against the exhaustive route).
``subsets``                 none (``"exhaustive"``): the route evaluates p(T) - Q(T) on all
                            :math:`2^V` sets, which is the definition of the minimum; the check is
                            that it reports :math:`2^V` sets and that its cut reproduces its value.
==========================  ===================================================================

Tolerances are named here and nowhere else in the certificate: :data:`VALUE_TOL`, :data:`FEAS_TOL`,
:data:`CERT_TOL`. Nothing is clamped: a failed check raises :class:`~mdtheory.errors.SolverError`.

References
----------
Hu et al., "Towards Optimal Multi-draft Speculative Decoding", ICLR 2025 (Theorem 1, the dual).
Thomas & Pal, "Global Resolution", ICLR 2026 (max-flow form). Khisti et al., ICLR 2025, Theorem 1
(canonical decomposition: a base μ of the coverage polytope is realised by importance sampling).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .drafts import DraftModel
from .dual import dual_lp
from .errors import SolverError
from .polymatroid import _lex_blocks, lex_optimal_base_iid

__all__ = ["certify", "check_plan", "check_flow", "check_base_iid", "base_along_order", "cut_value",
           "support_members", "Certificate", "VALUE_TOL", "FEAS_TOL", "CERT_TOL", "RATIO_TOL",
           "MAX_CERT_SETS", "CERTIFY_MODES"]

#: A value may leave [0, 1] by at most this (floating-point and LP-solver rounding).
VALUE_TOL = 1e-9
#: Each feasibility constraint of a plan, flow or base may be violated by at most this.
FEAS_TOL = 1e-9
#: The value, the cut value and the primal objective less its infeasibility must agree within this.
CERT_TOL = 1e-8
#: Base scan: mu/q may exceed its run's least value by this (relative) without starting a new run.
#: Soundness does not depend on it (the excess is charged to the bound), only tightness at ties.
RATIO_TOL = 1e-9
#: Without-replacement prefix route: the flow proof by default up to this many draft sets.
MAX_CERT_SETS = 2_000
#: ``"fast"``: primal objects that cost O(V) beyond the route; ``"full"``: independent ones.
CERTIFY_MODES = ("fast", "full")


class Certificate(NamedTuple):
    """What proved a route's value.

    Attributes
    ----------
    name : str
        The primal object: ``"plan"``, ``"flow"``, ``"base"``, ``"lex-base"``, ``"exhaustive"`` or
        ``"cut"`` (no primal object: the value is only an upper bound).
    status : str
        ``"optimal"`` (both bounds meet) or ``"upper-bound"``.
    gap : float or None
        Cut value minus the primal lower bound (objective less infeasibility); None without a primal.
    base : ndarray or None
        The base μ in token order, for the ``base`` and ``lex-base`` certificates.
    """

    name: str
    status: str
    gap: float | None = None
    base: np.ndarray | None = None


def support_members(support: np.ndarray, V: int) -> np.ndarray:
    """Indicator (M, V) of the tokens of each support entry: draft sets (bool) or tuples (int)."""
    support = np.asarray(support)
    if support.dtype == bool:
        return support
    members = np.zeros((len(support), V), dtype=bool)
    members[np.arange(len(support))[:, None], support] = True
    return members


def cut_value(p: np.ndarray, model: DraftModel, cut) -> float:
    """:math:`1 + p(T) - Q(T)`, an upper bound on α* for every token set T (weak duality).

    Raises
    ------
    SolverError
        ``cut`` holds an index outside 0..V-1.
    """
    cut = np.asarray(cut, dtype=np.int64)
    if cut.size and (cut.min() < 0 or cut.max() >= p.size):
        raise SolverError(f"the cut set holds token indices outside 0..{p.size - 1}")
    in_cut = np.zeros(p.size, dtype=bool)
    in_cut[cut] = True
    return 1.0 + float(p[in_cut].sum()) - float(model.containment(in_cut))


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
def _add(s, c, x):
    """Neumaier's compensated step: (s, c) + x, the sum being s + c."""
    t = s + x
    c += (s - t) + x if abs(s) >= abs(x) else (x - t) + s
    return t, c


@njit(cache=True)
def _base_scan(ps, qs, mus, cover, ratio_tol):
    """One pass along an order; ``cover[k]`` = g(first k tokens), k = 0..V.

    Returns (sum of min(p, mu), eta, min mu, sum mu), sums compensated. eta is the bound of
    :func:`check_base_iid`: per run, the most the capped mu~ of the run exceeds g's rise since the
    run's start, plus the run's mu - mu~.
    """
    acc, acc_c, m, m_c = 0.0, 0.0, 0.0, 0.0
    eta, mu_min = 0.0, np.inf
    d = -cover[0]  # D of the tokens scanned so far
    start, top, m_run = d, d, 0.0  # D and M at the run's start; the run's largest D~
    mt, mt_c, w, rmin = 0.0, 0.0, 0.0, np.inf  # the run's sum of mu~, of mu - mu~; least mu/q
    for k in range(ps.size):
        mu, q = mus[k], qs[k]
        if q > 0 or mu > 0:
            r = mu / q if q > 0 else np.inf
            # a new run where mu/q rises past the run's least; and at a ratio that overflowed
            if r > rmin + ratio_tol * abs(rmin) or (q > 0 and r == np.inf):
                eta += max(top - start, 0.0) + w
                start, top, m_run = d, d, m + m_c
                mt, mt_c, w, rmin = 0.0, 0.0, 0.0, np.inf
            rmin = min(rmin, r)
            cap = min(mu, rmin * q) if q > 0 else mu
        else:  # q = 0 and mu <= 0: mu~ = 0 >= mu
            cap = 0.0
        w += max(mu - cap, 0.0)
        mt, mt_c = _add(mt, mt_c, cap)
        m, m_c = _add(m, m_c, mu)
        d = (m + m_c) - cover[k + 1]
        top = max(top, m_run + (mt + mt_c) - cover[k + 1])
        acc, acc_c = _add(acc, acc_c, min(ps[k], mu))
        mu_min = min(mu_min, mu)
    eta += max(top - start, 0.0) + w
    return acc + acc_c, eta, mu_min, m + m_c


def _coverage_along(model: DraftModel, order: np.ndarray) -> np.ndarray:
    """g of the prefixes of ``order[::-1]``, k = 0..V, from the model's containments of the
    prefixes of ``order`` (their complements): :math:`g(S) = 1 - Q(\\Omega \\setminus S)`."""
    contained = model.prefix_containment(order)
    cover = np.empty(order.size + 1)
    cover[0], cover[-1] = 0.0, 1.0
    cover[1:-1] = 1.0 - contained[-2::-1]
    return cover


def base_along_order(ps: np.ndarray, qs: np.ndarray, cover: np.ndarray) -> np.ndarray:
    """The base μ pooled along a given token order: the greatest convex minorant of the points
    :math:`(p(S_k), g(S_k))` of its prefixes S_k; each segment's rise of g is shared by its tokens in
    proportion to p (a vertical segment, p = 0 < q, in proportion to q). Along the order of q/p
    increasing this is the lexicographically optimal base
    (:func:`~mdtheory.polymatroid.lex_optimal_base_iid`), here from the rises of the model's own
    coverage values instead of a second sort.

    Parameters
    ----------
    ps, qs : ndarray, shape (V,)
        p and q in the order.
    cover : ndarray, shape (V + 1,)
        g of the prefixes, :func:`_coverage_along`.

    Returns
    -------
    ndarray, shape (V,)
        μ in the order.
    """
    bounds, dP, dG = _lex_blocks(ps, np.diff(cover))
    sizes = np.diff(bounds)
    rise = np.repeat(dG, sizes)
    # the block's rise shared in proportion to p, as rise * (p / block p): a share is at most one,
    # so a subnormal block mass cannot overflow a slope
    with np.errstate(divide="ignore", invalid="ignore"):
        mus = rise * (ps / np.repeat(dP, sizes))
        vertical = dP <= 0
        if vertical.any():  # p = 0 < q: the block's rise goes to its tokens in proportion to q
            dQ = np.repeat(np.add.reduceat(qs, bounds[:-1]), sizes)
            by_q = np.where(dQ > 0, rise * (qs / dQ), 0.0)
            mus = np.where(np.repeat(vertical, sizes), by_q, mus)
    return mus


def check_base_iid(p: np.ndarray, model: DraftModel, order: np.ndarray, mu: np.ndarray | None = None,
                   who: str = "base") -> tuple[float, np.ndarray]:
    """Check a base μ of B(g) for iid drafts by one scan and return the lower bound on α* it proves.

    For iid drafts :math:`g(S) = h(q(S))` with :math:`h(t) = 1 - (1 - t)^n` concave.

    **Lower bound.** If :math:`\\mu(S) \\le g(S) + \\eta` for every S, then for every T,
    :math:`\\sum_y \\min(p, \\mu) \\le p(T) + \\mu(\\Omega \\setminus T) \\le p(T) + 1 - Q(T) + \\eta`,
    so :math:`\\alpha^* \\ge \\sum_y \\min(p, \\mu) - \\eta` (polymatroid max-flow/min-cut; this needs
    neither μ >= 0 nor μ(Ω) = 1, which are checked so that μ is also a rule's marginal).

    **η by one scan.** Let σ be any order (here the reverse of the route's: q/p increasing), G_k the
    value of g on its first k tokens, and cut σ into consecutive runs B_1, B_2, ... Within run B_j
    let :math:`\\tilde r` be the running minimum of μ/q and :math:`\\tilde\\mu = \\min(\\mu, \\tilde r q)`
    (a token with q = 0 < μ has μ/q = +∞ and starts a run; one with q = 0, μ <= 0 gets
    :math:`\\tilde\\mu = 0`), :math:`w_j = \\sum_{B_j} (\\mu - \\tilde\\mu)^+`, F_j the tokens before B_j
    and :math:`e_j = \\max_{k \\in B_j} [\\tilde\\mu(B_j \\cap \\sigma_{\\le k}) - (G_k - g(F_j))]^+`. Then
    :math:`\\eta = \\sum_j (e_j + w_j)`. Proof: take S and S_j = S ∩ B_j. (i)
    :math:`\\mu(S_j) \\le \\tilde\\mu(S_j) + w_j`, and :math:`\\tilde\\mu / q` does not increase along B_j,
    so the most :math:`\\tilde\\mu` a subset of B_j of q-mass t can hold is the piecewise-linear
    interpolation of the run's prefix points (fractional knapsack); at those points it is at most
    :math:`H_j(t) + e_j`, :math:`H_j(t) = h(q(F_j) + t) - h(q(F_j))`, and H_j is concave, so it lies
    above its chords: :math:`\\mu(S_j) \\le H_j(q(S_j)) + e_j + w_j`. (ii) h is concave and
    :math:`S \\cap F_j \\subseteq F_j`, so
    :math:`H_j(q(S_j)) \\le g((S \\cap F_j) \\cup S_j) - g(S \\cap F_j)`.
    (iii) Summing over j, the right sides telescope to g(S): :math:`\\mu(S) \\le g(S) + \\eta`. This
    holds for any order, any runs and any μ; runs start where μ/q rises past its run's least value by
    more than :data:`RATIO_TOL` (relative), which only affects how tight η is. For the
    lexicographically optimal base along q/p increasing, μ/q = slope · p/q falls within each of its
    blocks, μ meets g at block ends and stays below inside, so η is rounding.

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : IID
    order : ndarray of int, shape (V,)
        A permutation: the prefix route's order (q/p decreasing); the scan runs along its reverse.
    mu : ndarray, shape (V,), optional
        The base to check, in token order; default: :func:`base_along_order` along ``order[::-1]``.
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
    O(V) beyond the route: one containment pass of the model, a few gathers, the pooling pass of
    :func:`~mdtheory.polymatroid._lex_blocks` and one compiled scan. g is the model's, so a wrong
    coverage in the route cannot pass.
    """
    order = np.asarray(order)
    seen = np.zeros(p.size, dtype=bool)
    if order.shape != p.shape or not np.issubdtype(order.dtype, np.integer) or \
            (order.size and (order.min() < 0 or order.max() >= p.size)):
        raise SolverError(f"{who}: the route's order is not a permutation of the {p.size} tokens")
    seen[order] = True
    if not seen.all():
        raise SolverError(f"{who}: the route's order is not a permutation of the {p.size} tokens")
    sigma = order[::-1]
    ps, qs = p[sigma], model.q[sigma]
    cover = _coverage_along(model, order)
    mus = base_along_order(ps, qs, cover) if mu is None else np.asarray(mu, dtype=float)[sigma]
    accepted, excess, mu_min, total = _base_scan(ps, qs, mus, cover, RATIO_TOL)
    if not math.isfinite(total):
        raise SolverError(f"{who}: the base has a non-finite entry")
    if -mu_min > FEAS_TOL:
        raise _infeasible(who, "a base entry is negative", -mu_min)
    if abs(total - 1.0) > FEAS_TOL:
        raise _infeasible(who, "the base misses summing to one", abs(total - 1.0))
    if excess > FEAS_TOL:
        raise _infeasible(who, "the base exceeds the coverage g(S) of a token set", excess)
    if mu is None:
        mu = np.empty_like(mus)
        mu[sigma] = mus
    return accepted - excess, mu


def _primal(p: np.ndarray, model: DraftModel, out: dict, method: str, mode: str):
    """(certificate name, lower bound or None, base or None) for one route's output."""
    who = f"method {method!r}"
    if method in ("otlp", "otlp-literal", "dual", "maxflow"):
        if out.get("plan") is None or out.get("support") is None or out.get("support_probs") is None:
            raise SolverError(f"{who} returned no {'plan' if 'otlp' in method else 'flow'} to certify")
        members = support_members(out["support"], p.size)
        if method.startswith("otlp"):
            return "plan", check_plan(p, members, out["support_probs"], out["plan"], who), None
        return "flow", check_flow(p, members, out["support_probs"], out["plan"], who), None
    if method == "prefix" and model.sampling == "iid":
        order = out.get("order")
        if order is None:
            raise SolverError(f"{who} returned no order to certify")
        if mode == "full":
            lower, mu = check_base_iid(p, model, order, lex_optimal_base_iid(p, model.q, model.n).mu,
                                       who)
            return "lex-base", lower, mu
        lower, mu = check_base_iid(p, model, order, who=who)
        return "base", lower, mu
    if method == "prefix":
        if mode == "fast" and model.count_sets() > MAX_CERT_SETS:
            return "cut", None, None
        flows = dual_lp(p, model)
        return "flow", check_flow(p, flows["support"], flows["support_probs"], flows["plan"], who), None
    if method == "subsets":
        if out.get("sets") != 2 ** p.size:
            raise SolverError(f"{who} reports {out.get('sets')} token sets evaluated, not all "
                              f"2^{p.size}")
        return "exhaustive", None, None
    raise SolverError(f"no certificate is known for method {method!r}")


def certify(p: np.ndarray, model: DraftModel, out: dict, method: str, mode: str = "fast"
            ) -> Certificate:
    """Prove a route's output optimal, or raise.

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : DraftModel
    out : dict
        The route's output: ``value``, ``cut`` and its primal object (``plan``, ``support``,
        ``support_probs``; ``order`` for the prefix route; ``sets`` for the exhaustive one).
    method : str
        The route's name (a key of :data:`mdtheory.solve.METHODS`).
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
        the cut value by more than :data:`CERT_TOL`; the exhaustive route did not evaluate all sets.
    """
    value = float(out["value"])
    if not -VALUE_TOL <= value <= 1.0 + VALUE_TOL:
        raise SolverError(f"method {method!r} returned alpha* = {value:.12g}, outside [0, 1]")
    upper = cut_value(p, model, out["cut"])
    if abs(upper - value) > CERT_TOL:
        raise SolverError(
            f"method {method!r} returned value {value:.12g} but its cut set "
            f"{np.asarray(out['cut']).tolist()} gives {upper:.12g}"
        )
    name, lower, base = _primal(p, model, out, method, mode)
    if lower is None:
        return Certificate(name, "upper-bound" if name == "cut" else "optimal", None, None)
    gap = upper - lower
    if not abs(gap) <= CERT_TOL:
        raise SolverError(
            f"method {method!r}: its {name} proves alpha* >= {lower:.12g} but its cut set gives "
            f"alpha* <= {upper:.12g} (gap {gap:.3g}, tolerance {CERT_TOL:g})"
        )
    return Certificate(name, "optimal", gap, base)
