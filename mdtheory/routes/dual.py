"""The dual LP of the relaxed OTLP: a minimum cut written as a linear program (Hu et al. 2025, §3).

.. math::

    \\min_{a, b \\ge 0} \\; \\sum_y p(y)\\, a_y + \\sum_U w_U\\, b_U
    \\quad \\text{s.t.} \\quad a_y + b_U \\ge 1 \\quad \\forall U, \\; y \\in U,

with token potentials a, draft-set potentials b and :math:`w_U = P(\\mathrm{set}(X) = U)`. The
constraint matrix is the incidence matrix of a bipartite graph, hence totally unimodular, so the
simplex method stops at a 0/1 vertex: :math:`T = \\{y : a_y = 1\\}` and :math:`b_U = 1` exactly for
:math:`U \\not\\subseteq T`, and the optimum is :math:`p(T) + 1 - Q(T)`, giving
:math:`\\alpha^* = 1 + \\min_T [p(T) - Q(T)]`.
"""

from __future__ import annotations

import time

import numpy as np

from .._highs import solve_lp
from ..errors import SolverError
from ..models.base import DraftModel
from .proofs import RouteOutput, SetFlow, cut_from_flow

__all__ = ["dual_lp", "INTEGRALITY_TOL"]

#: A simplex vertex of the totally unimodular dual must be 0/1 within this.
INTEGRALITY_TOL = 1e-9


def dual_lp(p: np.ndarray, model: DraftModel) -> RouteOutput:
    """Optimal acceptance and an optimal 0/1 cut set from the dual LP, solved by HiGHS simplex.

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : DraftModel

    Returns
    -------
    RouteOutput
        ``value`` (dual optimum), ``cut`` (the inclusion-minimal optimal cut, read off the primal
        flows; the simplex vertex's own cut, :math:`\\{y : a_y = 1\\}`, is optimal too but may be
        larger where minimisers tie), ``duals`` (``a``, ``b``),
        ``proof`` (a :class:`~mdtheory.routes.proofs.SetFlow`: the primal flows S(U, y) from HiGHS's row
        duals over the draft sets; :attr:`AcceptanceResult.flow` on the result),
        ``duality_gap`` (dual objective minus the primal objective of those flows), ``timings``.

    Raises
    ------
    SolverError
        HiGHS fails, or its vertex is not 0/1 (which total unimodularity rules out).

    Notes
    -----
    V + M variables and :math:`\\sum_U |U|` rows, M the number of draft sets.
    """
    t0 = time.perf_counter()
    law = model.set_law()
    members, w = law.members, law.probs
    M, V = members.shape
    set_idx, tok_idx = np.nonzero(members)
    R = len(set_idx)
    # columns: a_0..a_{V-1}, then b_0..b_{M-1}; row r is a_{tok} + b_{set} >= 1
    from scipy import sparse  # imported by the route that runs it

    A = sparse.csc_matrix(
        (np.ones(2 * R), (np.tile(np.arange(R), 2), np.concatenate([tok_idx, V + set_idx]))),
        shape=(R, V + M),
    )
    t1 = time.perf_counter()
    sol = solve_lp(np.concatenate([p, w]), A, np.ones(R), np.full(R, np.inf), maximize=False,
                   simplex=True)
    t2 = time.perf_counter()
    a, b = sol.x[:V], sol.x[V:]
    if np.abs(sol.x - np.round(sol.x)).max(initial=0.0) > INTEGRALITY_TOL:
        raise SolverError("the dual LP vertex is not 0/1, against total unimodularity")
    flows = np.zeros((M, V))
    flows[set_idx, tok_idx] = np.clip(sol.row_dual, 0.0, None)
    return RouteOutput(value=sol.objective, cut=cut_from_flow(p, members, w, flows),
                       proof=SetFlow(flows, members, w), duals={"a": np.round(a), "b": np.round(b)},
                       duality_gap=sol.objective - float(flows.sum()),
                       timings={"build": t1 - t0, "solve": t2 - t1})
