"""The result object every route to the optimal acceptance returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._validate import ONE_TOL

__all__ = ["AcceptanceResult"]


@dataclass
class AcceptanceResult:
    """Optimal acceptance :math:`\\alpha^*` of one (p, draft model) pair, with its certificates.

    Attributes
    ----------
    value : float
        :math:`\\alpha^* = 1 + \\min_T [p(T) - Q(T)]`.
    cut : ndarray of int
        An optimal cut set :math:`T^*` (sorted token indices, read-only) attaining the minimum. The minimisers
        of the submodular p(T) - Q(T) form a lattice; every route but ``prefix`` reports its
        inclusion-minimal element (empty when acceptance is one), ``prefix`` the shortest optimal
        prefix. Tokens of :math:`T^*` are over-drafted: they receive exactly their target
        mass, and only draft sets inside :math:`T^*` can be rejected.
    method : str
        The route that produced the result.
    sampling : str
        The draft model's registry name.
    drafts : int
        Number of drafts n.
    status : str
        ``"optimal"``: the value is proven, its cut and a feasible primal object (``certificate``)
        meet within :data:`~mdtheory._certify.CERT_TOL`, or the route evaluated every cut, or (conditional
        Poisson beyond :data:`~mdtheory._certify.MAX_CERT_SETS` sets) the prefix property is proved
        for the model and the best prefix's value is checked against its cut.
        ``"upper-bound"``: only the cut is checked, so the value is a proven upper bound on
        :math:`\\alpha^*` (the without-replacement prefix route beyond
        :data:`~mdtheory._certify.MAX_CERT_SETS` draft sets). A route that cannot be proven raises
        :class:`~mdtheory.errors.SolverError` instead.
    certificate : str
        The primal object that proved the value (:mod:`mdtheory._certify`): ``"plan"`` (OTLP
        routes), ``"flow"`` (``dual``, ``maxflow``, and ``prefix`` for without-replacement drafts
        up to :data:`~mdtheory._certify.MAX_CERT_SETS` sets), ``"base"`` / ``"lex-base"``
        (``prefix``, iid: a base μ of the coverage polytope, see ``base``), ``"exhaustive"``
        (``subsets``: all :math:`2^V` cuts evaluated), ``"prefix-theorem"`` (``prefix``, conditional
        Poisson: the proved prefix property; no primal object) or ``"cut"`` (none; status
        ``"upper-bound"``).
    certificate_gap : float or None
        Cut value :math:`1 + p(T) - Q(T)` minus the primal object's lower bound on
        :math:`\\alpha^*` (its objective less its infeasibility): the width of the proven interval,
        at most :data:`~mdtheory._certify.CERT_TOL` in absolute value. None for ``"exhaustive"`` and
        ``"cut"``.
    base : ndarray or None
        For ``prefix`` with iid drafts, the base μ of the coverage polytope B(g) that proved the
        value, :math:`\\sum_y \\min(p(y), \\mu(y)) = \\alpha^*`: the marginal of an optimal rule
        (Khisti et al., Theorem 1).
    plan : ndarray or None
        For the OTLP routes, the optimal selection rule :math:`\\pi(y \\mid x)`, one row per entry of
        ``support``; for ``maxflow`` and ``dual``, the relaxed plan S(x, y) (flows) per entry of
        ``support``.
    support : ndarray or None
        The draft tuples (int, shape (M, n)) or draft sets (bool, shape (M, V)) the plan is indexed by.
    support_probs : ndarray or None
        Their probabilities Q(x) or w_U.
    duals : dict or None
        For ``dual``: ``{"a": token potentials, "b": set potentials}`` of the min-cut LP.
    duality_gap : float or None
        Primal objective minus dual objective of the solve that produced the value, where the route
        has both.
    timings : dict
        Seconds spent, by phase (``"total"`` always).
    """

    value: float
    cut: np.ndarray
    method: str
    sampling: str
    drafts: int
    status: str = "optimal"
    certificate: str = ""
    certificate_gap: float | None = None
    base: np.ndarray | None = None
    plan: np.ndarray | None = None
    support: np.ndarray | None = None
    support_probs: np.ndarray | None = None
    duals: dict | None = None
    duality_gap: float | None = None
    timings: dict = field(default_factory=dict)

    @property
    def acceptance_one(self) -> bool:
        """Whether :math:`\\alpha^* = 1` (Hall's condition), within ``ONE_TOL``."""
        return self.value >= 1.0 - ONE_TOL

    @property
    def witness(self) -> np.ndarray | None:
        """A set T with p(T) < Q(T) when acceptance is below one (the optimal cut), else None."""
        return None if self.acceptance_one else self.cut

    def __float__(self) -> float:
        return float(self.value)

    def __repr__(self) -> str:
        return (f"AcceptanceResult(value={self.value:.12g}, cut={self.cut.tolist()}, method={self.method!r}, "
                f"sampling={self.sampling!r}, drafts={self.drafts}, status={self.status!r}, "
                f"certificate={self.certificate!r})")
