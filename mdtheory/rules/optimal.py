"""The optimal verifier: importance sampling from a maximum flow over draft sets (THEORY §2, §5)."""

from __future__ import annotations

from ..dual import dual_lp
from .base import SetPlanRule

__all__ = ["Optimal"]


class Optimal(SetPlanRule):
    """Optimal selection: acceptance α* of the draft model, output law exactly p.

    A maximum flow S(U, y) of the token/draft-set network (HiGHS, from the dual LP's row duals,
    :func:`mdtheory.dual.dual_lp`) is an optimal relaxed OTLP plan. Given the draft set U, propose
    y ∈ U with probability :math:`S(U, y)/w_U` (or no candidate), then take the speculative step of
    :class:`~mdtheory.rules.base.SetPlanRule` against the plan's exact marginal A. Since A <= p up to
    the solver tolerance, the acceptance :math:`\\sum_y \\min(p, A)` equals α* within about 1e-9; the
    output law is p exactly by construction.

    Parameters
    ----------
    sampling : str
        Draft model (default ``"iid"``); any model of :data:`mdtheory.drafts.SAMPLINGS` built from
        (q, n) works, for instance ``"without-replacement"``.

    Notes
    -----
    Preparation enumerates the draft sets and solves one LP with :math:`\\sum_U |U|` rows: fine for
    (top-k, n) = (10, 5) or (100, 2); sizes whose set law exceeds the enumeration limits raise
    :class:`~mdtheory.errors.ProblemTooLargeError`. The closed-form lexicographically optimal base of
    :mod:`mdtheory.polymatroid` gives the optimal marginal in O(V log V) for iid drafts, but realising
    it without the set enumeration is open (see the issue notes).

    References
    ----------
    Khisti et al., ICLR 2025, Thm 1; Thomas & Pal, ICLR 2026 (max-flow form).
    """

    name = "optimal"

    def __init__(self, p, q, n, *, sampling: str = "iid", normalize: bool = False, **params):
        self.sampling = sampling
        super().__init__(p, q, n, normalize=normalize, **params)

    def _prepare(self):
        flow = dual_lp(self.p, self.model)
        w = flow["support_probs"]
        self._use_plan(flow["support"], w, flow["plan"] / w[:, None])
