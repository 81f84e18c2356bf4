"""Vertices of the coverage polytope B(g), :math:`g(S) = 1 - Q(\\Omega \\setminus S)`: for a priority
order, the marginal of "output the highest-ranked drafted token", from the draft model's prefix
containments (a product of cumulative sums for a model that declares its independent laws ``qs``,
else :meth:`~mdtheory.models.base.DraftModel.prefix_pass`). The minimum-norm-point route
(:mod:`mdtheory.routes.mnp`) and the order-mixture rule (:mod:`mdtheory.models.mixture`) are built on them.
"""

from __future__ import annotations

import numpy as np

from .._jit import njit
from .base import DraftModel
from .independent import Independent  # noqa: F401 (Independent: the doctests)

__all__ = ["model_vertex", "suffix_containments"]


def _suffix_products(qs_sorted: np.ndarray) -> np.ndarray:
    """:math:`H_k = \\prod_i q_i(\\{\\sigma_k, \\dots, \\sigma_{V-1}\\})` for k = 0..V (H_V = 0)."""
    tails = np.cumsum(qs_sorted[:, ::-1], axis=1)[:, ::-1]  # q_i of each suffix, summed from the end
    H = np.empty(qs_sorted.shape[1] + 1)
    H[:-1] = np.prod(np.minimum(tails, 1.0), axis=0)
    H[-1] = 0.0
    return H


def suffix_containments(model: DraftModel, order: np.ndarray) -> np.ndarray:
    """:math:`H_k = Q(\\{\\sigma_k, \\dots, \\sigma_{V-1}\\})` for k = 0..V (H_V = 0): the product form
    for independent drafts (a model that declares its laws ``qs``), else the model's one-pass prefix
    containments (:meth:`~mdtheory.models.base.DraftModel.prefix_pass`) along the reversed order.
    ``order`` must be a permutation of the tokens (int64, not checked: the solver's fast path;
    :func:`mdtheory.models.polymatroid.priority_marginal` checks it)."""
    if model.qs is not None:
        return _suffix_products(model.qs[:, order])
    H = np.zeros(order.size + 1)
    H[:-1] = model.prefix_pass(order[::-1])[::-1]
    return H


@njit(cache=True)
def _product_scan(qs, p, order):
    """:func:`_suffix_products` and the cut values :math:`1 + p(T_k) - H_k` of the suffixes
    :math:`T_k` in one pass (the same sums in the same order, so the same numbers)."""
    n, V = qs.shape
    H, values, tails = np.empty(V + 1), np.empty(V + 1), np.zeros(n)
    H[V], values[V], ptail = 0.0, 1.0, 0.0
    for k in range(V - 1, -1, -1):
        y = order[k]
        prod = 1.0
        for i in range(n):
            tails[i] += qs[i, y]
            prod *= min(tails[i], 1.0)
        ptail += p[y]
        H[k], values[k] = prod, 1.0 + ptail - prod
    return H, values


def _scan(model: DraftModel, p: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(H, values): :func:`suffix_containments` along ``order`` and the values
    :math:`1 + p(T_k) - H_k` of its V + 1 suffixes :math:`T_k` as cuts."""
    if model.qs is not None:
        return _product_scan(model.qs, p, order)
    H = suffix_containments(model, order)
    return H, 1.0 + np.concatenate([np.cumsum(p[order][::-1])[::-1], [0.0]]) - H


def model_vertex(model: DraftModel, order: np.ndarray) -> np.ndarray:
    """The marginal of "output the highest-ranked drafted token" for the priority ``order``.

    .. math:: v(\\sigma_k) = g(S_k) - g(S_{k-1}) = Q(\\{\\sigma_k..\\sigma_{V-1}\\})
              - Q(\\{\\sigma_{k+1}..\\sigma_{V-1}\\})

    with :math:`S_k = \\{\\sigma_0..\\sigma_k\\}`: token σ_k is the candidate when it is drafted and
    no higher-ranked token is. From :func:`suffix_containments` (O(nV) for independent drafts).
    :func:`mdtheory.models.polymatroid.priority_marginal` is the same vertex with the order validated; this
    is the solver's unchecked fast path.

    Parameters
    ----------
    model : DraftModel
    order : ndarray of int, shape (V,)
        A permutation of the tokens, highest priority first.

    Returns
    -------
    ndarray, shape (V,)
        A vertex of B(g), non-negative.

    Examples
    --------
    >>> model_vertex(Independent([[0.5, 0.5], [0.5, 0.5]]), np.array([0, 1])).tolist()
    [0.75, 0.25]
    """
    H = suffix_containments(model, order)
    v = np.empty(order.size)
    v[order] = np.maximum(H[:-1] - H[1:], 0.0)
    return v
