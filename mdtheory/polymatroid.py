"""The polymatroid view of multi-draft selection (THEORY §5).

The coverage function :math:`g(S) = P(\\mathrm{set}(X) \\cap S \\neq \\emptyset) = 1 - Q(S^c)` is
submodular, and the marginals :math:`\\mu(y) = \\sum_x Q(x) \\beta(y \\mid x)` of all importance-sampling
rules that pick one drafted token form its base polytope

.. math:: B(g) = \\{\\mu \\ge 0 : \\mu(S) \\le g(S)\\ \\forall S,\\ \\mu(\\Omega) = g(\\Omega) = 1\\}.

By Khisti et al.'s canonical decomposition (Thm 1), importance sampling with marginal μ followed by one
speculative step against μ accepts with probability :math:`\\sum_y \\min(p(y), \\mu(y))`, so

.. math:: \\alpha^* = \\max_{\\mu \\in B(g)} \\sum_y \\min(p(y), \\mu(y)).

Extreme points of B(g) are priority orders ("output the highest-ranked drafted token") with
:math:`\\mu_\\sigma(y) = g(S_{\\le y}) - g(S_{< y})`. The lexicographically optimal base with respect to
p (Fujishige), the minimiser of :math:`\\sum_y \\mu(y)^2 / p(y)` over B(g), attains α*; for iid drafts
it has a closed form (:func:`lex_optimal_base_iid`).
"""

from __future__ import annotations

from itertools import product

import numpy as np

from .drafts import DraftModel
from .errors import InvalidInputError, ProblemTooLargeError

__all__ = ["priority_marginal", "lex_optimal_base_iid", "lex_optimal_base_cvxpy",
           "base_polytope_violation", "LexBase"]

#: Largest alphabet for the exhaustive base-polytope checks and the cvxpy program (2^V constraints).
MAX_EXHAUSTIVE_V = 14


def priority_marginal(model: DraftModel, order) -> np.ndarray:
    """Marginal of the rule "output the highest-ranked drafted token" for the priority ``order``.

    .. math:: \\mu_\\sigma(\\sigma_k) = g(\\{\\sigma_1..\\sigma_k\\}) - g(\\{\\sigma_1..\\sigma_{k-1}\\}),
       \\qquad g(S) = 1 - Q(S^c).

    Parameters
    ----------
    model : DraftModel
    order : array_like of int, shape (V,)
        A permutation of the tokens, highest priority first.

    Returns
    -------
    ndarray, shape (V,)
        An extreme point of B(g).

    Examples
    --------
    >>> from mdtheory import IID
    >>> priority_marginal(IID([0.5, 0.5], 2), [0, 1]).tolist()  # token 0 wins unless both drafts are 1
    [0.75, 0.25]
    """
    order = np.asarray(order)
    if sorted(order.tolist()) != list(range(model.V)):
        raise InvalidInputError(f"order must be a permutation of the {model.V} tokens")
    # g of the prefixes of order = 1 - Q of the complementary suffixes
    suffix_q = model.prefix_containment(order[::-1])[::-1]  # Q({order[k:]}) for k = 0..V-1
    g = 1.0 - np.concatenate([suffix_q[1:], [0.0]])
    mu = np.empty(model.V)
    mu[order] = np.diff(np.concatenate([[0.0], g]))
    return mu


class LexBase:
    """The lexicographically optimal base of an iid coverage function, with its block structure.

    Attributes
    ----------
    mu : ndarray, shape (V,)
        The base; :math:`\\sum_y \\min(p, \\mu) = \\alpha^*`.
    order : ndarray of int
        Tokens by q/p increasing (p = 0 < q last).
    blocks : list of ndarray of int
        Consecutive runs of ``order`` on one segment of the lower convex hull.
    slopes : ndarray
        μ/p on each block (increasing); blocks of slope > 1 form the optimal cut set.
    """

    def __init__(self, mu, order, blocks, slopes):
        self.mu, self.order, self.blocks, self.slopes = mu, order, blocks, slopes

    @property
    def cut(self) -> np.ndarray:
        """Tokens of the blocks with slope > 1 (over-drafted), sorted."""
        over = [b for b, s in zip(self.blocks, self.slopes, strict=True) if s > 1.0]
        return np.sort(np.concatenate(over)) if over else np.zeros(0, dtype=np.int64)


def lex_optimal_base_iid(p: np.ndarray, q: np.ndarray, n: int) -> LexBase:
    """Lexicographically optimal base of :math:`g(S) = 1 - (1 - q(S))^n` with respect to p.

    Sort tokens by q/p increasing, form the points
    :math:`(P_k, G_k) = (\\sum_{i \\le k} p_{(i)}, 1 - (1 - \\sum_{i \\le k} q_{(i)})^n)`, take their lower
    convex hull; on each hull segment (a block of consecutive tokens) :math:`\\mu(y) = s \\, p(y)` with s
    the segment's slope (a vertical final segment, tokens with p = 0 < q, gets its mass in proportion
    to q).

    Parameters
    ----------
    p, q : ndarray, shape (V,)
        Validated distributions.
    n : int

    Returns
    -------
    LexBase

    Notes
    -----
    One sort and one monotone-chain hull: O(V log V). Membership in B(g) and optimality are checked
    against the exhaustive route and cvxpy in the tests (THEORY §5 marks this [D]: derived here).

    Examples
    --------
    >>> lex_optimal_base_iid(np.array([0.5, 0.5]), np.array([0.5, 0.5]), 2).mu.tolist()
    [0.5, 0.5]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        order = np.argsort(q / p, kind="stable")  # NaN (p = q = 0) and inf (p = 0 < q) last
    P = np.concatenate([[0.0], np.cumsum(p[order])])
    # 1 - q(prefix) as a suffix sum of positive terms: subtracting from 1 cancels near the end
    rest = np.concatenate([np.cumsum(q[order][::-1])[::-1], [0.0]])
    G = 1.0 - rest**n
    hull = [0]
    for k in range(1, len(P)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            if (G[b] - G[a]) * (P[k] - P[a]) >= (G[k] - G[a]) * (P[b] - P[a]):
                hull.pop()  # b lies on or above the chord from a to k
            else:
                break
        hull.append(k)
    mu = np.zeros_like(p)
    blocks, slopes = [], []
    for a, b in zip(hull[:-1], hull[1:], strict=True):
        idx = order[a:b]
        dP, dG = p[idx].sum(), rest[a] ** n - rest[b] ** n  # no differences of sums near 1
        if dP > 0:
            slope = dG / dP
            mu[idx] = slope * p[idx]
        else:
            slope = np.inf
            mass = q[idx].sum()
            mu[idx] = dG * q[idx] / mass if mass > 0 else 0.0
        blocks.append(idx)
        slopes.append(slope)
    return LexBase(mu, order, blocks, np.array(slopes))


def _all_sets(V: int) -> np.ndarray:
    if V > MAX_EXHAUSTIVE_V:
        raise ProblemTooLargeError(
            f"exhaustive base-polytope work needs 2^{V} sets, over 2^{MAX_EXHAUSTIVE_V}"
        )
    return np.array(list(product([False, True], repeat=V)), dtype=bool)


def base_polytope_violation(mu: np.ndarray, model: DraftModel) -> float:
    """max(max_S [mu(S) - g(S)], |mu(Omega) - 1|, -min mu): 0 iff mu is in B(g) (exhaustive)."""
    S = _all_sets(model.V)
    g = model.coverage(S)
    return float(max((S @ mu - g).max(), abs(mu.sum() - 1.0), -mu.min()))


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
