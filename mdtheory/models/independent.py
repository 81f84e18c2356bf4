"""Independent drafts with different laws q_1, ..., q_n."""

from __future__ import annotations

import math

import numpy as np

from .. import _budget
from .._validate import as_distribution
from .base import (
    COUNT_CAP,
    _count_up_to,
    _MarkovDraftModel,
)

__all__ = ["Independent"]


class Independent(_MarkovDraftModel):
    """Independent drafts with different laws: :math:`Q(x) = \\prod_i q_i(x_i)`,
    :math:`Q(T) = \\prod_i q_i(T)`.

    Parameters
    ----------
    qs : array_like, shape (n, V)
        Row i is the law of draft i.
    normalize : bool
    """

    sampling = "independent"
    single_q = False
    rows_per_draft = True
    mnp_iterations = 10.0

    def __init__(self, qs, *, normalize: bool = False):
        self.qs = as_distribution(qs, "q", normalize=normalize, ndim=2)
        self.n, self.V = self.qs.shape

    def containment(self, T):
        T, single = self._masks(T)
        out = np.prod(np.minimum(T.astype(float) @ self.qs.T, 1.0), axis=1)  # q_i(T) <= 1, not 1 + ε
        return out[0] if single else out

    def next_law(self, step, drafted):
        return np.broadcast_to(self.qs[step], drafted.shape)

    def count_tuples(self):
        return min(math.prod(int(np.count_nonzero(row)) for row in self.qs), COUNT_CAP)

    def _draw(self, rng, size):
        return np.column_stack([rng.choice(self.V, size=size, p=row) for row in self.qs])

    def prefix_pass(self, order):
        return np.prod(np.minimum(np.cumsum(self.qs[:, order], axis=1), 1.0), axis=0)

    def prefix_pass_seconds(self):
        return _budget.PRODUCT_TOKEN_SECONDS * self.V * self.n

    def count_sets(self):
        return _count_up_to(int(np.count_nonzero(self.qs.sum(axis=0))), self.n)

    def first_draft_law(self):
        return self.qs[0]
