"""The top set: the n most likely tokens of q, drafted as fixed tokens (no draw)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .. import _budget
from .._validate import as_fractions
from ..errors import InvalidInputError
from .base import DraftModel, SetLaw, TupleLaw
from .greedy import _largest

__all__ = ["Top", "top_tokens"]


def top_tokens(q, n: int) -> list[int]:
    """The ``n`` most likely tokens of ``q``, most likely first, ties broken by the lower token index,
    in q's own arithmetic: float64 (or any float array) by its float64 values, exact fractions (an
    object array or a list of them) exactly, so that a tie closer than float resolution is ordered
    as the fractions are.

    >>> top_tokens(np.array([0.2, 0.4, 0.4]), 2)
    [1, 2]
    >>> from fractions import Fraction as F
    >>> top_tokens([F(1, 3) - F(1, 10**30), F(1, 3) + F(1, 10**30), F(1, 3)], 1)
    [1]
    """
    if isinstance(q, np.ndarray) and q.dtype != object:
        return [int(y) for y in _largest(np.asarray(q, dtype=np.float64), n)]
    return sorted(range(len(q)), key=lambda y: -q[y])[:n]


class Top(DraftModel):
    r"""The top set: the drafts are the n most likely tokens of q, fixed (a deterministic draft
    tuple, the children of a node of a top-k draft tree).

    .. math:: X = (t_1, \dots, t_n), \qquad Q(T) = 1[\{t_1, \dots, t_n\} \subseteq T],
       \qquad \alpha^* = p(\{t_1, \dots, t_n\}),

    the tokens sorted by decreasing q, ties broken by the lower token index. In
    :math:`\alpha^* = 1 + \min_T [p(T) - Q(T)]` (papers/theory.md §1) a set T holding the top set
    gives :math:`p(T) - 1 \ge p(\mathrm{top}) - 1` and any other :math:`p(T) \ge 0`, so the
    minimum is at T = top: the one draft set is accepted exactly when the target's token is in it.

    Parameters
    ----------
    q : array_like, shape (V,)
        Exact fractions (an object array) choose the top tokens exactly (:func:`top_tokens`); q is
        stored as float64.
    n : int
        At most V (a token of mass 0 is drafted once the tokens of positive mass run out).
    normalize : bool

    Examples
    --------
    >>> m = Top([0.5, 0.2, 0.3], 2)
    >>> m.top.tolist(), float(m.containment([True, False, True]))
    ([0, 2], 1.0)
    """

    sampling = "top"
    tree_node = True
    distinct_drafts = True
    deterministic = True
    mnp_iterations = 0.2  # measured 0.01 - 0.13 sqrt(V) (llm-like and Dirichlet pairs, V = 1000 - 100,000)

    def __init__(self, q, n: int, *, normalize: bool = False):
        exact = q if type(q) is np.ndarray and q.dtype == object else None
        self._init_from_q(q, n, normalize)
        if self.n > self.V:
            raise InvalidInputError(f"the top set needs n <= V = {self.V}, got n = {self.n}")
        self.top = np.array(top_tokens(self.q if exact is None else exact, self.n), dtype=np.int64)

    def containment(self, T):
        T, single = self._masks(T)
        out = T[:, self.top].all(axis=1).astype(np.float64)
        return out[0] if single else out

    def prefix_pass(self, order):
        """Q of every prefix in one O(V) pass: 1 once the prefix holds every top token, else 0."""
        is_top = np.zeros(self.V, dtype=bool)
        is_top[self.top] = True
        return (np.cumsum(is_top[order]) == self.n).astype(np.float64)

    def prefix_pass_seconds(self):
        return 2 * _budget.PRODUCT_TOKEN_SECONDS * self.V  # two cumulative sums

    def count_tuples(self):
        return 1

    count_sets = count_tuples

    def tuple_law(self):
        return TupleLaw(self.top[None, :].copy(), np.ones(1))

    def set_law(self):
        members = np.zeros((1, self.V), dtype=bool)
        members[0, self.top] = True
        return SetLaw(members, np.ones(1))

    def _draw(self, rng, size):
        return np.tile(self.top, (size, 1))

    def first_draft_law(self):
        law = np.zeros(self.V)
        law[self.top[0]] = 1.0
        return law

    @classmethod
    def exact_set_law(cls, q, n):
        """One set, of probability one."""
        return {frozenset(top_tokens(as_fractions(q), n)): Fraction(1)}

    @classmethod
    def node_draws(cls, q, n, where=""):
        """One tuple, the top tokens, of probability one."""
        if n > len(q):
            raise InvalidInputError(f"{n} top tokens{where}, but the draft law has only {len(q)} tokens")
        return [(tuple(top_tokens(q, n)), 1)]

    @classmethod
    def node_sample(cls, q, n, rng, where=""):
        """The top tokens (``rng`` is not used)."""
        return list(cls.node_draws(q, n, where)[0][0])

    @classmethod
    def node_sample_batch(cls, q, n, m, rng, where=""):
        return np.tile(np.array(cls.node_sample(q, n, rng, where), dtype=np.int64), (m, 1))

    @classmethod
    def node_count(cls, V, n):
        return 1

    @classmethod
    def node_inclusion(cls, q, n):
        """1 on the top tokens of q (chosen in q's arithmetic, :func:`top_tokens`), 0 elsewhere; exact."""
        out = np.zeros(len(q))
        out[top_tokens(q, n)] = 1.0
        return out, True
