"""An explicit joint law Q(x_1, ..., x_n) of the draft tuple."""

from __future__ import annotations

import numpy as np

from .._validate import as_distribution
from ..errors import InvalidDistributionError, ProblemTooLargeError
from .base import (
    MAX_TUPLES,
    DraftModel,
    TupleLaw,
)

__all__ = ["Joint"]


class Joint(DraftModel):
    """An explicit joint table :math:`Q(x_1, \\dots, x_n)` of shape (V,) * n.

    Parameters
    ----------
    table : array_like, shape (V, ..., V)
        n axes of equal length V; non-negative, summing to one.
    normalize : bool
    """

    sampling = "joint"
    single_q = False
    order_vertices = False

    def __init__(self, table, *, normalize: bool = False):
        arr = np.asarray(table)
        if arr.ndim < 1 or len(set(arr.shape)) != 1:
            raise InvalidDistributionError(
                f"the joint draft table has shape {arr.shape}; expected n equal axes (V, ..., V)"
            )
        flat = as_distribution(arr.reshape(-1), "joint draft table", normalize=normalize)
        self.table = flat.reshape(arr.shape)
        self.n = arr.ndim
        self.V = arr.shape[0]
        if self.table.size > MAX_TUPLES:
            raise ProblemTooLargeError(f"the joint table has {self.table.size:g} entries")

    def containment(self, T):
        T, single = self._masks(T)
        out = np.minimum([self.table[np.ix_(*([row] * self.n))].sum() for row in T], 1.0)
        return out[0] if single else out

    def count_tuples(self):
        return int(np.count_nonzero(self.table))

    count_sets = count_tuples

    def tuple_law(self):
        idx = np.argwhere(self.table > 0)
        return TupleLaw(idx.astype(np.int64), self.table[tuple(idx.T)])

    def set_law(self):
        return self.tuple_law().sets(self.V)

    def first_draft_law(self):
        return self.table.reshape(self.V, -1).sum(axis=1)
