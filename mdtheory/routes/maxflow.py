"""Max-flow / min-cut form of the relaxed OTLP (Global Resolution, Thomas & Pal 2026, §3).

Network: source → token y with capacity p(y); token y → draft set U when y ∈ U, capacity ∞;
U → sink with capacity :math:`w_U = P(\\mathrm{set}(X) = U)`. The relaxed OTLP

.. math:: \\max_{S \\ge 0} \\sum_{U, y \\in U} S(U, y) \\quad \\text{s.t.} \\quad
   \\sum_U S(U, y) \\le p(y), \\quad \\sum_{y \\in U} S(U, y) \\le w_U

is this max-flow, and its value equals :math:`\\alpha^*`. A finite cut keeps every ∞ edge uncut, so
it is fixed by the set T of tokens on the sink side: it cuts source → y for y ∈ T and U → sink for
every U ⊄ T, with capacity :math:`p(T) + 1 - Q(T)`. Hence
:math:`\\alpha^* = 1 + \\min_T [p(T) - Q(T)]` (Hu et al. 2025, Theorem 1's dual) and the sink-side
tokens of a minimum cut form an optimal cut set.
"""

from __future__ import annotations

import time

import numpy as np

from ..models.base import DraftModel
from .proofs import RouteOutput, SetFlow, cut_from_flow

__all__ = ["maxflow", "SCALE"]

#: Capacities are rounded to integer multiples of 1 / SCALE for the exact integer max-flow.
SCALE = 2**48
def maxflow(p: np.ndarray, model: DraftModel) -> RouteOutput:
    """Optimal acceptance as a maximum flow, with networkx's preflow-push in integer arithmetic.

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : DraftModel

    Returns
    -------
    RouteOutput
        ``value`` (flow value), ``cut`` (sink-side tokens of the minimum cut, read off the residual
        network; its capacity 1 + p(T) - Q(T) is certified by the front door), ``proof`` (a
        :class:`~mdtheory.routes.proofs.SetFlow`: the flow S(U, y) over the draft sets;
        :attr:`AcceptanceResult.flow` on the result), ``timings``.

    Notes
    -----
    Graph of V + M + 2 nodes and :math:`\\sum_U |U|` infinite edges, M the number of draft sets.
    networkx's preflow-push fails on some float capacities (rounding breaks its relabelling), so the
    capacities are rounded to integer multiples of :math:`2^{-48}` (:data:`SCALE`) and the flow is
    computed exactly on that rational instance; its value differs from the float instance's by at
    most :math:`(V + M)\\, 2^{-49}`.
    """
    t0 = time.perf_counter()
    law = model.set_law()
    members, w = law.members, law.probs
    p_int = [int(x) for x in np.rint(p * SCALE)]
    w_int = [int(x) for x in np.rint(w * SCALE)]
    import networkx as nx  # imported by the route that runs it

    G = nx.DiGraph()
    for y in range(model.V):
        G.add_edge("source", ("token", y), capacity=p_int[y])
    for k in range(len(w)):
        G.add_edge(("set", k), "sink", capacity=w_int[k])
        for y in np.flatnonzero(members[k]):
            G.add_edge(("token", int(y)), ("set", k))
    t1 = time.perf_counter()
    R = nx.algorithms.flow.preflow_push(G, "source", "sink")
    flow = np.zeros(members.shape)
    for k, y in zip(*np.nonzero(members), strict=True):
        flow[k, y] = R[("token", int(y))][("set", int(k))]["flow"]
    # integers below 2^53 are exact in float64; each capacity was rounded by at most half a unit,
    # so residuals of up to V + M units are rounding, not capacity
    cut = cut_from_flow(np.array(p_int, float), members, np.array(w_int, float), flow,
                        tol=float(model.V + len(w)))
    t2 = time.perf_counter()
    return RouteOutput(value=R.graph["flow_value"] / SCALE, cut=cut,
                       proof=SetFlow(flow / SCALE, members, w),
                       timings={"build": t1 - t0, "solve": t2 - t1})
