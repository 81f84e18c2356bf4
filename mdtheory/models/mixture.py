"""The order-mixture rule: priority orders drawn with fixed weights, the highest-ranked drafted token
proposed; its exact marginal is a base of the coverage polytope (:mod:`mdtheory.models.vertices`), which
also makes a mixture a certificate of a lower bound on α* (:func:`check_mixture`).
"""

from __future__ import annotations

import numpy as np

from ..errors import SolverError
from .base import DraftModel
from .vertices import model_vertex

__all__ = ["OrderMixture", "check_mixture"]


class OrderMixture:
    """The rule "draw priority order k with probability λ_k, output the highest-ranked drafted token".

    Its candidate law given the drafts is :meth:`candidate_law`, and its marginal

    .. math:: \\mu = \\sum_k \\lambda_k v_{\\sigma_k}

    is exact: given order σ the candidate is σ's best drafted token, whose law is the vertex
    :math:`v_\\sigma` (:func:`~mdtheory.models.vertices.model_vertex`), and the order is drawn
    independently of the drafts.

    Parameters
    ----------
    model : DraftModel
        The drafts (see :func:`~mdtheory.routes.mnp.min_norm_base` for the models whose vertices are exact).
    orders : ndarray of int, shape (K, V)
        Priority orders, highest first.
    weights : ndarray, shape (K,)
        Non-negative; rescaled to sum one.
    vertices : ndarray, shape (K, V), optional
        The orders' vertices as :func:`~mdtheory.models.vertices.model_vertex` gives them
        (:attr:`mdtheory.routes.mnp.MinNormBase.vertices`); default: computed here. (:func:`check_mixture`
        always computes them.)

    Attributes
    ----------
    marginal : ndarray, shape (V,)
        μ, the weights' mixture of the vertices (not the solver's point).
    ranks : ndarray of int, shape (K, V)
        ``ranks[k, y]`` is y's position in order k.
    """

    def __init__(self, model: DraftModel, orders: np.ndarray, weights: np.ndarray, vertices=None):
        weights = np.asarray(weights, dtype=float)
        if weights.ndim != 1 or weights.size != len(orders) or not np.all(weights >= 0) \
                or not weights.sum() > 0:
            raise SolverError("an order mixture needs one non-negative weight per order, not all zero")
        self.weights = weights / weights.sum()
        self._cdf = np.cumsum(self.weights)
        self.orders = np.asarray(orders, dtype=np.int64)
        V = model.V
        self.ranks = np.empty_like(self.orders)
        rows = np.arange(len(self.orders))[:, None]
        self.ranks[rows, self.orders] = np.arange(V)
        if not np.array_equal(np.sort(self.orders, axis=1), np.broadcast_to(np.arange(V),
                                                                            self.orders.shape)):
            raise SolverError("an order of the mixture is not a permutation of the tokens")
        if vertices is None:
            vertices = np.array([model_vertex(model, o) for o in self.orders])
        elif np.shape(vertices) != self.orders.shape:
            raise SolverError("an order mixture needs one vertex per order")
        self.marginal = self.weights @ vertices

    def _best(self, drafts: np.ndarray) -> np.ndarray:
        """The best drafted token under every order, shape (K,)."""
        return drafts[np.argmin(self.ranks[:, drafts], axis=1)]

    def candidate_law(self, drafts) -> np.ndarray:
        """Exact law of the candidate given the draft tuple, shape (V,)."""
        drafts = np.asarray(drafts, dtype=np.int64)
        return np.bincount(self._best(drafts), weights=self.weights, minlength=self.ranks.shape[1])

    def candidate(self, drafts, rng: np.random.Generator) -> int:
        """Draw the order, return its best drafted token."""
        drafts = np.asarray(drafts, dtype=np.int64)
        k = min(int(np.searchsorted(self._cdf, rng.random() * self._cdf[-1], side="right")),
                self.weights.size - 1)
        return int(drafts[np.argmin(self.ranks[k, drafts])])


def check_mixture(p: np.ndarray, model: DraftModel, orders, weights, who: str) -> tuple[float,
                                                                                         np.ndarray]:
    """Lower bound :math:`\\sum_y \\min(p, \\mu)` of a mixture of priority orders, μ recomputed from the
    model's own laws (every such μ lies in B(g), so the bound is sound for any orders and weights).

    Raises
    ------
    SolverError
        The orders or weights are missing or malformed.
    """
    if orders is None or weights is None:
        raise SolverError(f"{who} returned no order mixture to certify")
    mix = OrderMixture(model, orders, weights)
    return float(np.minimum(p, mix.marginal).sum()), mix.marginal
