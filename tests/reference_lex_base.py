"""Second solvers for the lexicographically optimal base, kept as test references.

The lexicographically optimal base of the coverage polytope B(g) (the marginal of an optimal rule,
:mod:`mdtheory.models.polymatroid`) is computed by the package in closed form for iid drafts
(:func:`~mdtheory.models.polymatroid.lex_optimal_base_iid`) and through the minimum-norm point for the
others (:mod:`mdtheory.routes.mnp`). The two functions here compute it by independent means, for small
alphabets, so that the tests can check those results:

* :func:`lex_optimal_base_mnp`: Wolfe's minimum-norm point in its textbook form (dense least squares
  on the corral, no factor updates, no race of norms), on any draft model, as an exact mixture of
  priority orders;
* :func:`lex_optimal_base_cvxpy`: the convex program :math:`\\min \\sum_y \\mu(y)^2 / p(y)` over
  B(g) written with all :math:`2^V` set constraints, solved by cvxpy (Clarabel).

Both need p > 0 on every token; the cvxpy program refuses V over
:data:`~mdtheory.models.polymatroid.MAX_EXHAUSTIVE_V`.
"""

from __future__ import annotations

import numpy as np

from mdtheory.errors import InvalidInputError
from mdtheory.models.base import DraftModel
from mdtheory.models.polymatroid import _all_sets, priority_marginal

__all__ = ["lex_optimal_base_mnp", "lex_optimal_base_cvxpy", "PriorityMixture"]


class PriorityMixture:
    """A point of B(g) as a mixture of priority orders: draw order k with probability ``weights[k]``,
    output the highest-ranked drafted token. Its marginal ``mu`` is exactly the mixture of the
    orders' marginals (:func:`priority_marginal`).

    Attributes
    ----------
    mu : ndarray, shape (V,)
    orders : list of ndarray of int
    weights : ndarray
        Positive, summing to one.
    gap : float
        Wolfe's duality gap at the end: :math:`\\sum_y \\mu(y)^2/p(y) - \\min_{v} \\sum_y \\mu(y) v(y)/p(y)`
        over the vertices v of B(g); zero at the lexicographically optimal base.
    """

    def __init__(self, mu, orders, weights, gap):
        self.mu, self.orders, self.weights, self.gap = mu, orders, weights, gap


def lex_optimal_base_mnp(p: np.ndarray, model: DraftModel, *, tol: float = 1e-12,
                         max_iter: int = 1000) -> PriorityMixture:
    """Lexicographically optimal base of any draft model's coverage, by Wolfe's minimum-norm point.

    .. math:: \\min_{\\mu \\in B(g)} \\sum_y \\mu(y)^2 / p(y)

    in the coordinates :math:`\\mu / \\sqrt{p}`, over the convex hull of the priority-order vertices,
    which a linear objective reaches greedily (order the tokens by μ/p increasing). The corral of
    vertices and their weights are kept exactly, so the result is a :class:`PriorityMixture`: a
    sampling rule whose marginal is known exactly, whatever the stopping point.

    Parameters
    ----------
    p : ndarray, shape (V,)
        Target distribution, p > 0 on every token (the weights of the norm).
    model : DraftModel
        Any draft model: only its prefix containments are used (V of them per vertex).
    tol : float
        Stop when Wolfe's gap falls to ``tol``.
    max_iter : int
        Major iterations at most.

    Returns
    -------
    PriorityMixture

    Notes
    -----
    Each iteration costs one vertex (V prefix containments) and one small linear solve on the corral
    (at most V + 1 vertices), so this is for small V; for iid drafts
    :func:`lex_optimal_base_iid` gives the same base in closed form.

    References
    ----------
    P. Wolfe, "Finding the nearest point in a polytope", Math. Programming 11 (1976);
    S. Fujishige, "Lexicographically optimal base of a polymatroid with respect to a weight vector",
    Math. Oper. Res. 5 (1980).
    """
    p = np.asarray(p, dtype=float)
    if p.shape != (model.V,) or np.any(p <= 0):
        raise InvalidInputError("the minimum-norm-point base needs p > 0 on every token of the model")
    scale = 1.0 / np.sqrt(p)

    def vertex(c):
        order = np.argsort(c, kind="stable")
        return order, priority_marginal(model, order) * scale

    order, v = vertex(-p)
    orders, S, lam = [order], [v], np.array([1.0])
    x, gap = v, np.inf
    for _ in range(max_iter):
        order, v = vertex(x * scale)
        gap = float(x @ x - x @ v)
        if gap <= tol or any(np.array_equal(v, s) for s in S):
            break
        orders.append(order)
        S.append(v)
        lam = np.append(lam, 0.0)
        while True:  # minor cycle: nearest point of the affine hull of the corral, kept inside it
            A = np.array(S)
            k = len(S)
            M = np.block([[A @ A.T, np.ones((k, 1))], [np.ones((1, k)), np.zeros((1, 1))]])
            alpha = np.linalg.lstsq(M, np.append(np.zeros(k), 1.0), rcond=None)[0][:k]
            if np.all(alpha > 1e-15):
                lam = alpha
                break
            neg = alpha <= 1e-15
            theta = min(1.0, np.min(lam[neg] / (lam[neg] - alpha[neg])))
            lam = (1 - theta) * lam + theta * alpha
            keep = lam > 1e-15
            orders = [o for o, kept in zip(orders, keep, strict=True) if kept]
            S = [s for s, kept in zip(S, keep, strict=True) if kept]
            lam = lam[keep]
        lam = lam / lam.sum()
        x = lam @ np.array(S)
    mu = lam @ (np.array(S) / scale)
    return PriorityMixture(mu, orders, lam, gap)


def lex_optimal_base_cvxpy(p: np.ndarray, model: DraftModel) -> np.ndarray:
    """min sum mu^2 / p over B(g), with cvxpy (2^V constraints; a cross-check for small V, p > 0)."""
    import cvxpy as cp

    if np.any(p <= 0):
        raise InvalidInputError("the cvxpy lexicographic program needs p > 0 on every token")
    S = _all_sets(model.V)[1:]
    g = model.coverage(S)
    mu = cp.Variable(model.V)
    problem = cp.Problem(cp.Minimize(cp.sum(cp.multiply(1.0 / p, cp.square(mu)))),
                         [mu >= 0, cp.sum(mu) == 1, S.astype(float) @ mu <= g])
    problem.solve(solver=cp.CLARABEL)
    return np.asarray(mu.value)
