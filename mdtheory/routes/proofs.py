"""What a route to :math:`\\alpha^*` is and returns: a value, a cut and a typed proof object.

A route is registered as a :class:`Route` in :data:`mdtheory.solve.METHODS`: a function
``route(p, model) -> RouteOutput`` (p a validated target of length V, ``model`` a
:class:`~mdtheory.models.base.DraftModel`), the route's size estimate
(:meth:`Route.estimate`, checked before work starts) and whether ``method="auto"`` picks it
(:meth:`Route.picks`, read off the model's declared capabilities). The route returns its primal
object as one of the proof types below; the certifier (:func:`mdtheory.certify.certify`) checks it
by its type (:func:`mdtheory.certify.checks`), and the front door
(:func:`mdtheory.solve.optimal_acceptance`) copies the proof's own result fields
(:meth:`Proof.result_fields`) into the :class:`~mdtheory.result.AcceptanceResult`. A new route is
its module and one registry entry; a new kind of proof, its dataclass and one registered check.

========================  ==========================================  ==========================
proof type                primal object                               routes
========================  ==========================================  ==========================
:class:`TransportPlan`    the plan π(y | x) of draft sets or tuples ``otlp``, ``otlp-literal``
:class:`SetFlow`          a flow S(U, y) of the token/draft-set       ``dual``, ``maxflow``
                          network
:class:`PrefixOrder`      the scanned token order (a base pooled      ``prefix``
                          along it, a flow, or the prefix theorem)
:class:`PrefixBuckets`    the buckets of the ratio p/q (filled again  ``select``
                          from p and q, their bounds bracket α*)
:class:`PriorityOrders`   priority orders and their weights           ``mnp``
:class:`TopAndDraw`       nothing to carry: a factored flow from the  ``closed-form``
                          model's own top tokens and tail law
:class:`Exhaustive`       the number of token sets evaluated          ``subsets``
========================  ==========================================  ==========================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import SolverError

if TYPE_CHECKING:  # pragma: no cover
    from .._budget import Estimate
    from ..models.base import DraftModel

__all__ = ["Route", "RouteOutput", "Proof", "TransportPlan", "SetFlow", "PrefixOrder",
           "PrefixBuckets", "PriorityOrders", "TopAndDraw", "Exhaustive", "cut_from_flow", "FLOW_TOL"]

#: Residual capacities below this count as saturated when a cut is read off a float flow.
FLOW_TOL = 1e-9


@dataclass(frozen=True)
class Proof:
    """A route's primal object: what proves its value from below (checked, not trusted)."""

    def result_fields(self) -> dict:
        """The :class:`~mdtheory.result.AcceptanceResult` fields this proof fills (default none)."""
        return {}


@dataclass(frozen=True)
class TransportPlan(Proof):
    """A selection rule π(y | x) of the optimal-transport LP.

    Attributes
    ----------
    plan : ndarray, shape (M, V)
        Rows are conditional laws of the output given the drafts ``support[k]``.
    support : ndarray
        Draft sets (bool, shape (M, V)) or, with ``tuples``, ordered draft tuples (int, (M, n)).
    support_probs : ndarray, shape (M,)
        Their probabilities :math:`w_U` or Q(x): the certifier requires the model's own law.
    tuples : bool
        Whether the support is the tuple law (:meth:`~mdtheory.models.base.DraftModel.tuple_law`)
        rather than the set law.
    """

    plan: np.ndarray | None
    support: np.ndarray | None
    support_probs: np.ndarray | None
    tuples: bool = False

    def result_fields(self) -> dict:
        return {"plan": self.plan, "support": self.support, "support_probs": self.support_probs}


@dataclass(frozen=True)
class SetFlow(Proof):
    """A flow S(U, y) of the network source → token y → draft set U ∋ y → sink.

    Attributes
    ----------
    flow : ndarray, shape (M, V)
    support : ndarray of bool, shape (M, V)
        The draft sets (the model's set law).
    support_probs : ndarray, shape (M,)
        :math:`w_U`, the sets' capacities into the sink.
    """

    flow: np.ndarray | None
    support: np.ndarray | None
    support_probs: np.ndarray | None

    def result_fields(self) -> dict:
        return {"flow": self.flow, "support": self.support, "support_probs": self.support_probs}


@dataclass(frozen=True)
class PrefixOrder(Proof):
    """The token order whose best prefix is the route's cut (q/p decreasing).

    The certifier proves the value by a base pooled along it where the model's coverage has the iid
    closed form, by a flow, or (beyond a size) by the model's prefix theorem, which it checks is
    about this order.
    """

    order: np.ndarray | None


@dataclass(frozen=True)
class PrefixBuckets(Proof):
    """The buckets of the ratio p/q whose sums bracket every prefix (iid drafts,
    :mod:`mdtheory.routes.select`). The certifier fills them again from p and q and proves α* by
    their bounds (any monotone buckets are sound).

    Attributes
    ----------
    scheme : tuple of int
        (shift, lo, nb) of :func:`~mdtheory.routes.select.bucket_scheme`.
    opened : ndarray of int or None
        The buckets the route opened: the certifier gathers their tokens while it fills the
        buckets (it opens the buckets its own bounds require whatever this says).
    threshold : tuple of int or None
        The route's cut as (bucket j, ratio bits k) of :func:`~mdtheory.routes.select._threshold`:
        the tokens of the buckets before j and those of bucket j whose ratio bits are at most k.
        The certifier measures it where the route gives no cut set (``RouteOutput.cut`` None).
    """

    scheme: tuple | None
    opened: np.ndarray | None = None
    threshold: tuple | None = None


@dataclass(frozen=True)
class PriorityOrders(Proof):
    """A mixture of priority orders: its base μ (recomputed by the certifier from the model) lies
    in the coverage polytope whatever the orders and weights.

    Attributes
    ----------
    orders : ndarray of int, shape (K, V)
    weights : ndarray, shape (K,)
    """

    orders: np.ndarray | None
    weights: np.ndarray | None


@dataclass(frozen=True)
class TopAndDraw(Proof):
    """For a model that drafts fixed tokens and one draw (:attr:`~mdtheory.models.base.DraftModel.
    fixed_top`): the factored flow is built from the model's own ``top`` and ``tail``, so the route
    has nothing to hand over."""


@dataclass(frozen=True)
class Exhaustive(Proof):
    """The route evaluated p(T) - Q(T) on ``sets`` token sets (all :math:`2^V` of them); the
    certifier evaluates them again (:func:`mdtheory.certify.exhaustive_minimum`)."""

    sets: int | None


@dataclass(frozen=True)
class RouteOutput:
    """One route's answer: the value, an optimal cut set and the route's proof object.

    Attributes
    ----------
    value : float
        :math:`\\alpha^*` as the route computed it (not clamped).
    cut : ndarray of int or None
        An optimal token set T, :math:`\\alpha^* = 1 + p(T) - Q(T)` (the dual side; every route).
        None where the route's proof describes it instead (the ``select`` route asked for the
        value alone: a threshold of the ratio), which the certifier then measures.
    proof : Proof or None
        The primal object (:class:`Proof` subclasses); None proves nothing and is refused.
    duals : dict or None
        ``dual``: the 0/1 potentials ``a`` (tokens) and ``b`` (draft sets).
    duality_gap : float or None
        LP routes: primal objective minus dual objective as the solver left them.
    iterations : int or None
        Iterative routes (``mnp``): iterations used.
    timings : dict
        Seconds per stage of the route (``enumerate``, ``build``, ``solve``, ``scan``).
    """

    value: float
    cut: np.ndarray | None
    proof: Proof | None = None
    duals: dict | None = None
    duality_gap: float | None = None
    iterations: int | None = None
    timings: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Route:
    """A registered route: the function, its size estimate and when ``method="auto"`` picks it.

    Attributes
    ----------
    name : str
        The ``method`` name.
    run : callable
        ``run(p, model) -> RouteOutput``; the route itself refuses models it does not serve.
    estimator : callable
        ``estimator(model) -> Estimate``: seconds and bytes the route would take on the model,
        from sizes alone (:mod:`mdtheory._budget`). Required: no route estimates nothing.
    auto : callable or None
        ``auto(model) -> bool``: whether ``method="auto"`` may pick the route for the model, from
        its declared capabilities; None: never picked.
    rank : int
        Among the routes ``auto`` admits, the lowest rank is picked.
    serves : callable or None
        ``serves(model) -> bool``: whether the route serves the model at all, from its declared
        capabilities (:meth:`admits`); the route refuses any other with
        :class:`~mdtheory.errors.InvalidInputError`. None: every model.
    cutless : callable or None
        ``cutless(p, model) -> RouteOutput`` with ``cut`` None: the route without writing its cut
        set, which its proof describes and the certifier measures (for callers that want the value
        alone, :func:`mdtheory.solve.alpha_star`). None: the route always writes it.
    """

    name: str
    run: Callable[[np.ndarray, DraftModel], RouteOutput]
    estimator: Callable[[DraftModel], Estimate]
    auto: Callable[[DraftModel], bool] | None = None
    rank: int = 0
    serves: Callable[[DraftModel], bool] | None = None
    cutless: Callable[[np.ndarray, DraftModel], RouteOutput] | None = None

    def admits(self, model: DraftModel) -> bool:
        """Whether the route serves ``model`` (else it refuses it by name)."""
        return self.serves is None or bool(self.serves(model))

    def __call__(self, p: np.ndarray, model: DraftModel) -> RouteOutput:
        return self.run(p, model)

    def estimate(self, model: DraftModel) -> Estimate:
        """The route's estimated seconds and bytes on ``model`` (nothing is run)."""
        return self.estimator(model)

    def picks(self, model: DraftModel) -> bool:
        """Whether ``method="auto"`` may pick this route for ``model``."""
        return self.auto is not None and bool(self.auto(model))


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
