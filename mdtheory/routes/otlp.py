"""The optimal-transport LP (OTLP) over draft tuples, literal and symmetry-reduced.

.. math::

    \\alpha^* = \\max_{C \\ge 0} \\sum_x \\sum_{y \\in \\mathrm{set}(x)} C(x, y)
    \\quad \\text{s.t.} \\quad \\sum_y C(x, y) = Q(x) \\;\\forall x, \\qquad
    \\sum_x C(x, y) = p(y) \\;\\forall y,

over draft tuples :math:`x \\in \\Omega^n` and output tokens :math:`y \\in \\Omega`; the selection rule
is :math:`\\pi(y \\mid x) = C(x, y) / Q(x)` (Sun et al. 2023, Khisti et al. 2025 §2).

**Symmetry reduction.** The objective depends on x only through set(x). Averaging any optimal plan
over the tuples that share a set, weighted by Q(x), keeps both marginals and the objective, so an
optimal plan exists that depends on set(x) alone, and the LP over draft sets U with masses
:math:`w_U = P(\\mathrm{set}(X) = U)` has the same optimum. For (V, n) = (10, 5) this is 638 sets
against 10^5 tuples.
"""

from __future__ import annotations

import time

import numpy as np

from .._highs import solve_lp
from ..errors import ProblemTooLargeError
from ..models.base import DraftModel
from .proofs import RouteOutput, TransportPlan, cut_from_flow

__all__ = ["otlp", "transport_lp", "MAX_LP_COLUMNS"]

#: Largest number of LP variables C(x, y) the OTLP routes will build.
MAX_LP_COLUMNS = 30_000_000


def transport_lp(p: np.ndarray, members: np.ndarray, mass: np.ndarray):
    """Solve the transport LP between draft supports and tokens.

    Parameters
    ----------
    p : ndarray, shape (V,)
        Target distribution.
    members : ndarray of bool, shape (M, V)
        ``members[k, y]`` is True when token y is among the drafts of support entry k.
    mass : ndarray, shape (M,)
        Probability of each support entry (tuples or sets).

    Returns
    -------
    value : float
        The optimum :math:`\\alpha^*`.
    plan : ndarray, shape (M, V)
        :math:`\\pi(y \\mid k) = C(k, y) / \\sum_{y'} C(k, y')` (equal to C(k, y) / mass_k up to the
        solver tolerance, but an exact conditional law row by row).
    gap : float
        HiGHS's primal objective minus the objective of its row duals (the LP dual value).
    """
    M, V = members.shape
    # column k * V + y has a 1 in row k (draft mass) and a 1 in row M + y (target mass)
    rows = np.empty(2 * M * V, dtype=np.int64)
    rows[0::2] = np.repeat(np.arange(M), V)
    rows[1::2] = M + np.tile(np.arange(V), M)
    from scipy import sparse  # imported by the route that runs it

    A = sparse.csc_matrix((np.ones(2 * M * V), rows, np.arange(0, 2 * M * V + 1, 2)),
                          shape=(M + V, M * V))
    rhs = np.concatenate([mass, p])
    sol = solve_lp(members.reshape(-1).astype(float), A, rhs, rhs, maximize=True)
    C = sol.x.reshape(M, V).clip(min=0.0)
    # pi(. | k) = C(k, .) / sum_y C(k, y): exactly a conditional law even where mass_k is below the
    # solver's absolute tolerance; a row the solver left empty (mass below tolerance) resamples p
    rows = C.sum(axis=1, keepdims=True)
    plan = np.where(rows > 0, C / np.where(rows > 0, rows, 1.0), p[None, :])
    gap = sol.objective - float(rhs @ sol.row_dual)
    return sol.objective, plan, gap


def otlp(p: np.ndarray, model: DraftModel, *, literal: bool = False) -> RouteOutput:
    """Optimal acceptance by the OTLP over sets (default) or over ordered tuples (``literal``).

    Parameters
    ----------
    p : ndarray, shape (V,)
        Validated target distribution.
    model : DraftModel
    literal : bool
        Solve the literal :math:`V^n \\times V` form (tuples of positive probability) instead of the
        symmetry-reduced form over draft sets.

    Returns
    -------
    RouteOutput
        ``value``, ``cut`` (read off the accepted part of the plan, a maximum flow, by
        :func:`~mdtheory.routes.proofs.cut_from_flow`), ``proof`` (a
        :class:`~mdtheory.routes.proofs.TransportPlan`: π(y | x), shape (M, V), over tuples (M, n) or set
        indicators (M, V), and their probabilities), ``duality_gap``, ``timings``.

    Raises
    ------
    ProblemTooLargeError
        More than :data:`MAX_LP_COLUMNS` variables, or a support too large to enumerate.

    Notes
    -----
    Literal: :math:`V^{n+1}` variables for iid. Sets: :math:`V \\sum_{k \\le n} \\binom{V}{k}`.
    """
    t0 = time.perf_counter()
    count = model.count_tuples() if literal else model.count_sets()
    if count * model.V > MAX_LP_COLUMNS:
        raise ProblemTooLargeError(
            f"the OTLP would have up to {count * model.V:.3g} variables ({count:.3g} draft "
            f"{'tuples' if literal else 'sets'} x {model.V} tokens), over the limit "
            f"{MAX_LP_COLUMNS:g}; use the method " + ("otlp (over draft sets), " if literal else "")
            + "dual, maxflow or prefix"
        )
    if literal:
        law = model.tuple_law()
        support = law.tuples
        members = np.zeros((len(law.probs), model.V), dtype=bool)
        for j in range(model.n):
            members[np.arange(len(law.probs)), support[:, j]] = True
    else:
        law = model.set_law()
        support = members = law.members
    t1 = time.perf_counter()
    value, plan, gap = transport_lp(p, members, law.probs)
    t2 = time.perf_counter()
    cut = cut_from_flow(p, members, law.probs, plan * law.probs[:, None])
    return RouteOutput(value=value, cut=cut,
                       proof=TransportPlan(plan, support, law.probs, tuples=literal),
                       duality_gap=gap, timings={"enumerate": t1 - t0, "solve": t2 - t1})
