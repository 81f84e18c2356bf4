"""Hu et al.'s greedy draft set: the n - 1 most likely tokens of q and one draw outside them."""

from __future__ import annotations

import numpy as np

from .. import _budget
from .base import (
    DraftModel,
    SetLaw,
    TupleLaw,
)

__all__ = ["Greedy"]


def _largest(q: np.ndarray, k: int) -> np.ndarray:
    """The first k tokens of a stable sort of q by decreasing mass (ties by index), in O(V + k log k).

    One selection finds the k-th largest mass; the tokens above it and the first tokens (by index)
    at it make the k, sorted stably among themselves.
    """
    if k == 0:
        return np.empty(0, dtype=np.intp)
    kth = np.partition(q, q.size - k)[q.size - k]
    above = np.flatnonzero(q > kth)
    chosen = np.concatenate([above, np.flatnonzero(q == kth)[: k - above.size]])
    return chosen[np.argsort(-q[chosen], kind="stable")]


class Greedy(DraftModel):
    r"""Hu et al.'s greedy draft set: the n - 1 most likely tokens of q, then one draw from q
    renormalised outside them (for n = 2 the draft set of SpecHub).

    .. math:: X = (t_1, \dots, t_{n-1}, C), \qquad P(C = c) = \tilde q(c) =
       \frac{q(c)}{1 - q(\mathrm{top})}, \; c \notin \mathrm{top},
       \qquad Q(T) = 1[\mathrm{top} \subseteq T]\, \tilde q(T).

    Parameters
    ----------
    q : array_like, shape (V,)
    n : int
        At most the number of tokens with q > 0 (the drawn token needs mass outside the top).
    normalize : bool

    Notes
    -----
    Ties in q are broken by token index (the top tokens are the first n - 1 of a stable sort).
    """

    sampling = "greedy"
    fixed_top = True
    mnp_iterations = 0.5  # measured 0.02 - 0.57 sqrt(V) (llm-like and Dirichlet pairs, V = 1000 - 100,000)

    def __init__(self, q, n: int, *, normalize: bool = False):
        self._init_from_q(q, n, normalize, distinct="greedy drafts")
        self.top = _largest(self.q, self.n - 1)
        rest = np.ones(self.V, dtype=bool)
        rest[self.top] = False
        self.tail = np.where(rest, self.q, 0.0) / self.q[rest].sum()

    def containment(self, T):
        T, single = self._masks(T)
        out = T[:, self.top].all(axis=1) * np.minimum(T @ self.tail, 1.0)
        return out[0] if single else out

    def count_tuples(self):
        return int(np.count_nonzero(self.tail))

    count_sets = count_tuples

    def prefix_pass(self, order):
        """Q of every prefix in one O(V) pass: the tail's running mass once the prefix holds every
        top token, 0 before (one containment per prefix would be O(V^2))."""
        is_top = np.zeros(self.V, dtype=bool)
        is_top[self.top] = True
        holds_top = np.cumsum(is_top[order]) == self.top.size
        return np.where(holds_top, np.minimum(np.cumsum(self.tail[order]), 1.0), 0.0)

    def prefix_pass_seconds(self):
        return 2 * _budget.PRODUCT_TOKEN_SECONDS * self.V  # two cumulative sums

    def tuple_law(self):
        self._guard("tuple")
        tail = np.flatnonzero(self.tail)
        tuples = np.column_stack([np.tile(self.top, (tail.size, 1)), tail])
        return TupleLaw(tuples.astype(np.int64), self.tail[tail])

    def set_law(self):
        law = self.tuple_law()
        members = np.zeros((len(law.probs), self.V), dtype=bool)
        members[:, self.top] = True
        members[np.arange(len(law.probs)), law.tuples[:, -1]] = True
        return SetLaw(members, law.probs)

    def _draw(self, rng, size):
        drawn = rng.choice(self.V, size=size, p=self.tail)
        return np.column_stack([np.tile(self.top, (size, 1)), drawn])

    def first_draft_law(self):
        if self.n == 1:
            return self.tail
        law = np.zeros(self.V)  # a point mass on the top token (not a row of a V x V identity)
        law[self.top[0]] = 1.0
        return law
