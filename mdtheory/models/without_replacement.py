"""Successive sampling without replacement: each draft from q renormalised on the tokens not yet drafted."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import permutations

import numpy as np

from .. import _budget
from .._validate import as_fractions
from ..errors import InvalidInputError
from .base import (
    _capped,
    _count_exactly,
    _MarkovDraftModel,
)

__all__ = ["WithoutReplacement"]


class WithoutReplacement(_MarkovDraftModel):
    """Successive sampling without replacement from q.

    Each draft is drawn from q restricted to the tokens not yet drafted and renormalised, so

    .. math:: Q(x) = \\prod_{k=1}^n \\frac{q(x_k)}{1 - \\sum_{j<k} q(x_j)}

    for distinct tokens. The containment has no product form. With independent exponential clocks of
    rates q_i the drafts are the first n arrivals, so all n lie in T iff the n-th arrival inside T
    precedes the first arrival outside it:

    .. math:: Q(T) = \\int_0^\\infty c\\, e^{-ct}\\, P(N_T(t) \\ge n)\\, dt, \\qquad c = 1 - q(T),

    with :math:`N_T(t)` Poisson-binomial with success probabilities :math:`1 - e^{-q_i t}`, i in T.

    Parameters
    ----------
    q : array_like, shape (V,)
    n : int
        At most the number of tokens with q > 0.
    normalize : bool

    Notes
    -----
    :meth:`containment` and :meth:`prefix_containment` evaluate the integral by one trapezoidal rule
    in log-time with a proven error bound (:mod:`mdtheory.models.containment`); n = 2 uses the closed form
    :math:`\\sum_{i \\in T} q_i (q(T) - q_i)/(1 - q_i)`. The set law is exact (a forward pass over
    partial draft sets) and independent of the integral; the tests compare the two, and compare the
    integral with exact rationals and with an independent Gauss-Legendre quadrature.

    Examples
    --------
    >>> m = WithoutReplacement([0.5, 0.3, 0.2], 2)
    >>> round(float(m.containment([True, True, False])), 4)
    0.5143
    """

    sampling = "without-replacement"
    prefix_property = "checked"
    torch_replacement = False
    tree_node = True
    distinct_drafts = True
    exponential_race = True
    mnp_iterations = 10.0  # measured 0.8 - 79 sqrt(V) (Dirichlet and llm-like pairs, V = 100 - 10,000)

    @classmethod
    def exact_set_law(cls, q, n):
        """By enumeration of the ordered tuples, each draft from q renormalised on the rest."""
        q = as_fractions(q)
        law: dict = {}
        for x in permutations(range(len(q)), n):
            w, used = Fraction(1), Fraction(0)
            for i in x:
                if used == 1:
                    w = Fraction(0)
                    break
                w *= q[i] / (1 - used)
                used += q[i]
            if w:
                law[frozenset(x)] = law.get(frozenset(x), 0) + w
        return law

    @classmethod
    def node_draws(cls, q, n, where=""):
        """Every ordered n-tuple of distinct tokens of positive mass, of probability
        :math:`\\prod_k q(x_k) / q(\\Omega \\setminus \\{x_1..x_{k-1}\\})`: the mass left is summed over
        the tokens not drawn (exact for fractions), not taken as 1 minus the mass drawn, which
        cancels when the drawn tokens hold nearly all of it."""
        support = [int(y) for y in np.flatnonzero(q > 0)]
        cls._check_support(len(support), n, where)
        out = []
        for x in permutations(support, n):
            w = 1
            for k, y in enumerate(x):
                left = sum(q[z] for z in support if z not in x[:k])
                w = w * q[y] / left
            out.append((x, w))
        return out

    @classmethod
    def node_sample(cls, q, n, rng, where=""):
        q = np.asarray(q, dtype=np.float64)
        cls._check_support(int(np.count_nonzero(q)), n, where)
        return [int(y) for y in rng.choice(q.size, size=n, replace=False, p=q / q.sum())]

    @classmethod
    def node_sample_batch(cls, q, n, m, rng, where=""):
        """m nodes' children at once: successive sampling, each of the n draws one inverse-CDF
        draw per node from q with the node's earlier children removed."""
        q = np.asarray(q, dtype=np.float64)
        cls._check_support(int(np.count_nonzero(q)), n, where)
        left = np.tile(q / q.sum(), (m, 1))
        out = np.empty((m, n), dtype=np.int64)
        rows = np.arange(m)
        for j in range(n):
            cdf = np.cumsum(left, axis=1)
            t = np.minimum((cdf <= (rng.random(m) * cdf[:, -1])[:, None]).sum(axis=1), q.size - 1)
            last = q.size - 1 - np.argmax(left[:, ::-1] > 0, axis=1)  # a uniform rounded up to the total
            t = np.where(left[rows, t] > 0, t, last)
            out[:, j] = t
            left[rows, t] = 0.0
        return out

    @staticmethod
    def _check_support(support: int, n: int, where: str) -> None:
        if support < n:
            raise InvalidInputError(f"{n} children without replacement{where}, but the draft law "
                                    f"{'there ' if where else ''}has only {support} tokens of positive mass")

    @classmethod
    def node_inclusion(cls, q, n, *, max_orders: int = 20_000):
        """P(token y is among ``n`` draws without replacement from ``q``), for every y, or an upper
        bound: ``(values, exact)``.

        Exact for n = 1 (q), n = 2 (the closed form :math:`q_y (1 + \\sum_{x \\ne y} q_x / (1 - q_x))`)
        and where the ordered draws number at most ``max_orders`` (enumerated); otherwise the upper
        bound :math:`1 - \\prod_{j=1}^{n} (1 - q_y / (1 - M_{j-1}(y)))`, :math:`M_j(y)` the j largest
        masses other than y: at the j-th draw, given y not drawn yet, y is drawn with probability
        :math:`q_y / (1 - \\text{mass drawn}) \\le q_y / (1 - M_{j-1}(y))` (papers/blocks.md, "Draft
        trees in the bound").
        """
        q = np.asarray(q, dtype=np.float64)
        V = q.size
        support = np.flatnonzero(q > 0)
        if n >= support.size:
            return (q > 0).astype(np.float64), True
        if n == 1:
            return q.copy(), True
        # tail[k]: the mass of all but the k largest tokens, summed from the smallest (no cancellation)
        desc = np.sort(q)[::-1]
        tail = np.concatenate([np.cumsum(desc[::-1])[::-1], [0.0]])
        if n == 2:
            # 1 - q_x as the sum of the other masses: the largest token's is tail[1], any other's is
            # tail[1] + desc[0] - q_x, i.e. the total minus q_x with the largest kept out of the difference
            others = np.where(q >= desc[0], tail[1], tail[1] - q + desc[0])
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(others > 0, q / others, 0.0)
            return np.minimum(1.0, q * (1 + ratio.sum() - ratio)), True
        if math.perm(support.size, n) <= max_orders:
            return super().node_inclusion(q, n)
        miss = np.ones(V)
        for j in range(1, n + 1):
            # 1 - M_{j-1}(y), the mass outside the j - 1 largest tokens other than y: outside the top
            # j - 1, or (y among them) outside the top j, plus y
            room = np.where(q >= desc[j - 2], tail[j] + q, tail[j - 1]) if j > 1 else np.full(V, tail[0])
            with np.errstate(divide="ignore", invalid="ignore"):
                miss *= np.clip(1.0 - np.where(room > 0, q / room, 1.0), 0.0, 1.0)
        return np.where(q > 0, 1.0 - miss, 0.0), False

    def prefix_pass_seconds(self):
        # per (token, degree) of the one-pass containment, at least 9 degrees (the kernels compiled
        # for n <= 8 cost the same)
        return _budget.WOR_PREFIX_TOKEN_SECONDS * self.V * max(self.n + 1, 9)

    def __init__(self, q, n: int, *, normalize: bool = False):
        self._init_from_q(q, n, normalize, distinct="without replacement")

    @property
    def closed_form_containment(self) -> bool:
        return self.n <= 2  # n >= 3: an exponential-race quadrature per set

    def next_law(self, step, drafted):
        free = np.where(drafted, 0.0, self.q)
        return free / free.sum(axis=1, keepdims=True)

    def count_tuples(self):
        s = int(np.count_nonzero(self.q))
        return _capped(self.n * math.log10(max(s, 2)), lambda: math.perm(s, self.n))

    def _draw(self, rng, size):
        """Gumbel-top-k: the n largest of log q_i + Gumbel noise, in decreasing order.

        O(V) per tuple: a partition finds the n largest keys, a sort of those n orders them.
        """
        with np.errstate(divide="ignore"):
            keys = np.log(self.q)[None, :] + rng.gumbel(size=(size, self.V))
        top = np.argpartition(-keys, self.n - 1, axis=1)[:, : self.n]
        order = np.argsort(-np.take_along_axis(keys, top, axis=1), axis=1)
        return np.take_along_axis(top, order, axis=1)

    def count_sets(self):
        return _count_exactly(int(np.count_nonzero(self.q)), self.n)

    def set_law_size(self):
        """The forward pass holds the C(s, k) sets of k tokens after k drafts: at most
        C(s, min(n, s // 2))."""
        s = int(np.count_nonzero(self.q))
        return _count_exactly(s, min(self.n, s // 2))

    def first_draft_law(self):
        return self.q

    def containment(self, T):
        T, single = self._masks(T)
        out = np.array([self._containment_one(row) for row in T])
        return out[0] if single else out

    def prefix_pass(self, order):
        """Q of every prefix of ``order`` in one pass: the exponential-race integral by one
        trapezoidal rule in log-time shared by all prefixes, with a proven error bound
        (:func:`mdtheory.models.containment.successive_prefix_containment`), O(V n K)."""
        from .containment import _successive_prefix

        return _successive_prefix(self.q, order, self.n)

    def _containment_one(self, mask: np.ndarray) -> float:
        qT = self.q[mask & (self.q > 0)]
        if qT.size < self.n:
            return 0.0
        c = float(self.q[~mask].sum())
        if c == 0.0:
            return 1.0
        if self.n == 1:
            return min(float(qT.sum()), 1.0)
        if self.n == 2:
            # q(T) - q_i and 1 - q_i as sums of positive terms: subtracting cancels when q_i ~ 1
            # (exclusive running sums: cumsum(qT) - qT loses the smaller terms beside a q_i ~ 1)
            before = np.concatenate(([0.0], np.cumsum(qT)[:-1]))
            after = np.concatenate((np.cumsum(qT[::-1])[:-1][::-1], [0.0]))
            rest = before + after
            return min(float(np.sum(qT * rest / (rest + c))), 1.0)  # 1 + ε beside c ~ 1e-300
        from .containment import _successive_prefix

        return float(_successive_prefix(self.q, np.flatnonzero(mask), self.n)[-1])
