"""The iid draft model: n independent draws from one law q (sampling with replacement)."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import product

import numpy as np

from .. import _budget
from .._validate import as_fractions
from .base import (
    FEW_SETS,
    _count_up_to,
    _MarkovDraftModel,
    _power,
)

__all__ = ["IID"]


class IID(_MarkovDraftModel):
    """n independent drafts from q (sampling with replacement).

    .. math:: Q(x) = \\prod_{i=1}^n q(x_i), \\qquad Q(T) = q(T)^n.

    Parameters
    ----------
    q : array_like, shape (V,)
        Draft distribution.
    n : int
        Number of drafts, at least 1.
    normalize : bool
        Rescale q to sum one instead of refusing a sum off one.

    Examples
    --------
    >>> float(IID([0.5, 0.5], 2).containment([True, False]))
    0.25
    """

    sampling = "iid"
    prefix_property = "proved"
    lex_base_closed_form = True
    torch_replacement = True
    tree_node = True

    @classmethod
    def exact_set_law(cls, q, n):
        """By enumeration of the ordered tuples."""
        q = as_fractions(q)
        law: dict = {}
        for x in product(range(len(q)), repeat=n):
            w = math.prod((q[i] for i in x), start=Fraction(1))
            if w:
                law[frozenset(x)] = law.get(frozenset(x), 0) + w
        return law

    def prefix_pass_seconds(self):
        return _budget.PRODUCT_TOKEN_SECONDS * self.V * self.n

    def subset_row_seconds(self):
        return 1e-8 * self.V

    def __init__(self, q, n: int, *, normalize: bool = False):
        self._init_from_q(q, n, normalize)

    @classmethod
    def node_draws(cls, q, n, where=""):
        """Every n-tuple of the tokens of positive mass, of probability :math:`\\prod_i q(x_i)`."""
        support = [int(y) for y in np.flatnonzero(q > 0)]
        out = []
        for x in product(support, repeat=n):
            w = 1
            for y in x:
                w = w * q[y]
            out.append((x, w))
        return out

    @classmethod
    def node_sample(cls, q, n, rng, where=""):
        q = np.asarray(q, dtype=np.float64)
        return [int(y) for y in rng.choice(q.size, size=n, p=q / q.sum())]

    @classmethod
    def node_sample_batch(cls, q, n, m, rng, where=""):
        q = np.asarray(q, dtype=np.float64)
        return rng.choice(q.size, size=(m, n), p=q / q.sum())

    def containment(self, T):
        """q(T)^n, as (1 - q(T^c))^n where the power amplifies rounding (below). A few sets (the
        certificate's cut): q(T) by numpy's pairwise sum, relative error at most about log2(V) u
        (u = 2^-53), or, where the power would amplify that past 1e-13
        (n log2(V) u > 1e-13, e.g. V = 10^6 with n = 10^6), from exactly rounded sums
        (:func:`math.fsum`, about 40 ns a token); a BLAS dot product errs by ~1e-13 at V = 10^6,
        which n = 10^6 makes 3e-7. Many sets: one matrix product. Where the power amplifies, a
        mass of at least 1/2 enters as its distance from 1, the mass off the set (:meth:`_powers`)."""
        T, single = self._masks(T)
        amplifies = self._amplifies()
        if T.shape[0] <= FEW_SETS:
            sums = np.array([math.fsum(self.q[row]) if amplifies else np.sum(self.q[row]) for row in T])
            gaps = np.array([-math.fsum(self.q[~row]) for row in T]) if amplifies else None
        else:
            sums = T @ self.q
            gaps = -((~T) @ self.q) if amplifies else None
        out = self._powers(sums, gaps)
        return out[0] if single else out

    def _amplifies(self) -> bool:
        """Whether the power n amplifies a mass's rounding past 1e-13 (n log2(V) 2^-53 > 1e-13)."""
        return self.n * math.log2(max(self.V, 2)) * 2.0 ** -53 > 1e-13

    def _powers(self, sums, gaps=None):
        """min(sums, 1)^n; with ``gaps`` (minus the mass off each set, to its own relative
        precision), a mass of at least 1/2 as (1 - mass off)^n = exp(n log1p(gap)): rounding a mass
        within 2^-54 of 1 to 1 would move its power by up to n 2^-54 (0.054 at n = 10^15), and
        the input's own sum, off one by a few 2^-53, by n times that, while the gap keeps its
        bits (papers/theory.md, "iid containments near one")."""
        out = np.minimum(sums, 1.0) ** self.n
        if gaps is not None:
            near = sums >= 0.5
            with np.errstate(under="ignore"):
                out[near] = np.exp(self.n * np.log1p(np.minimum(gaps[near], 0.0)))
        return out

    def next_law(self, step, drafted):
        return np.broadcast_to(self.q, drafted.shape)

    def count_tuples(self):
        return _power(int(np.count_nonzero(self.q)), self.n)

    def _draw(self, rng, size):
        return rng.choice(self.V, size=(size, self.n), p=self.q)

    def prefix_pass(self, order):
        qo = self.q[order]
        sums = np.cumsum(qo)
        if not self._amplifies():
            return self._powers(sums)
        rest = np.cumsum(qo[::-1])[::-1]  # the mass from each token on; off prefix k: rest[k + 1]
        return self._powers(sums, -np.append(rest[1:], 0.0))

    def count_sets(self):
        return _count_up_to(int(np.count_nonzero(self.q)), self.n)

    def first_draft_law(self):
        return self.q
