"""What every route to :math:`\\alpha^*` returns, and the cut reader the LP and flow routes share.

A route is a function ``route(p, model) -> RouteOutput`` (:data:`mdtheory.solve.METHODS`): p a
validated target of length V, ``model`` a :class:`~mdtheory.drafts.DraftModel`. The front door
(:func:`mdtheory.solve.optimal_acceptance`) certifies the output (:func:`mdtheory._certify.certify`)
and copies it into an :class:`~mdtheory.result.AcceptanceResult`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import SolverError

__all__ = ["RouteOutput", "cut_from_flow", "FLOW_TOL"]

#: Residual capacities below this count as saturated when a cut is read off a float flow.
FLOW_TOL = 1e-9


@dataclass(frozen=True)
class RouteOutput:
    """One route's answer: the value, an optimal cut set and the route's own primal object.

    Attributes
    ----------
    value : float
        :math:`\\alpha^*` as the route computed it (not clamped).
    cut : ndarray of int
        An optimal token set T, :math:`\\alpha^* = 1 + p(T) - Q(T)` (the dual side; every route).
    plan : ndarray, shape (M, V), or None
        ``otlp``, ``otlp-literal``: the selection rule π(y | x), rows summing to one. ``dual``,
        ``maxflow``: the flow S(U, y) of the token/draft-set network.
    support : ndarray or None
        The rows of ``plan``: draft tuples (M, n) of int or draft-set indicators (M, V) of bool.
    support_probs : ndarray, shape (M,), or None
        Their probabilities Q(x) or :math:`w_U`.
    order : ndarray of int, shape (V,), or None
        ``prefix``: the scanned token order (q/p decreasing), which the base certificate pools along.
    sets : int or None
        ``subsets``: the number of token sets evaluated (:math:`2^V` for a complete scan).
    orders, weights : list of ndarray, ndarray, or None
        ``mnp``: the priority orders of the minimum-norm base and their mixture weights.
    iterations : int or None
        ``mnp``: Wolfe iterations used.
    duals : dict or None
        ``dual``: the 0/1 potentials ``a`` (tokens) and ``b`` (draft sets).
    duality_gap : float or None
        LP routes: primal objective minus dual objective as the solver left them.
    timings : dict
        Seconds per stage of the route (``enumerate``, ``build``, ``solve``, ``scan``).
    """

    value: float
    cut: np.ndarray
    plan: np.ndarray | None = None
    support: np.ndarray | None = None
    support_probs: np.ndarray | None = None
    order: np.ndarray | None = None
    sets: int | None = None
    orders: list | None = None
    weights: np.ndarray | None = None
    iterations: int | None = None
    duals: dict | None = None
    duality_gap: float | None = None
    timings: dict = field(default_factory=dict)


def cut_from_flow(p: np.ndarray, members: np.ndarray, mass: np.ndarray, flow: np.ndarray,
                  tol: float | None = None) -> np.ndarray:
    """Read the inclusion-minimal minimum cut off a maximum flow of the token/draft network.

    Parameters
    ----------
    p : ndarray, shape (V,)
    members : ndarray of bool, shape (M, V)
        Draft supports (sets or tuples) and the tokens they contain.
    mass : ndarray, shape (M,)
        Their probabilities (the capacities into the sink).
    flow : ndarray, shape (M, V)
        A maximum flow: ``flow[k, y]`` is sent along token y → support k (zero where y ∉ support k).
    tol : float, optional
        Residual capacities up to ``tol`` count as saturated (default :data:`FLOW_TOL`).

    Returns
    -------
    ndarray of int
        The tokens that can reach the sink in the residual network. Over all minimum cuts this is
        the smallest sink side, so it is the inclusion-minimal optimal cut set (empty when the flow
        saturates every draft support, i.e. acceptance is one).

    Raises
    ------
    SolverError
        The source reaches the sink in the residual network (the flow was not maximum).
    """
    tol = FLOW_TOL if tol is None else tol
    flow = np.where(members, flow, 0.0)
    # residual arcs: U -> sink if U has spare mass; token -> U (infinite) if the token is in U;
    # U -> token if U sends it flow (the reverse of a used arc). Each pass adds a token or a set
    # or stops, so there are at most V + M + 1 passes.
    sets = mass - flow.sum(axis=1) > tol
    tokens = np.zeros(members.shape[1], dtype=bool)
    for _ in range(members.shape[0] + members.shape[1] + 1):
        new_tokens = members[sets].any(axis=0) & ~tokens
        tokens |= new_tokens
        new_sets = (flow[:, tokens] > tol).any(axis=1) & ~sets
        sets |= new_sets
        if not new_sets.any() and not new_tokens.any():
            break
    if (p[tokens] - flow[:, tokens].sum(axis=0) > tol).any():
        raise SolverError("the flow is not maximum: the residual network has an augmenting path")
    return np.flatnonzero(tokens)
