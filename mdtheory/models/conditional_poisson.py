"""Conditional Poisson sampling: P(set(X) = A) proportional to prod_{i in A} q_i over |A| = n."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations, permutations

import numpy as np

from .. import _budget
from .._validate import as_fractions
from .base import (
    FEW_SETS,
    DraftModel,
    SetLaw,
    TupleLaw,
    _capped,
    _count_exactly,
)

__all__ = ["ConditionalPoisson"]


class ConditionalPoisson(DraftModel):
    """Conditional Poisson sampling: a set A of n distinct tokens with P(A) proportional to prod q_i.

    .. math:: P(\\mathrm{set}(X) = A) = \\frac{\\prod_{i \\in A} q_i}{e_n(q)}, \\quad |A| = n,
       \\qquad Q(T) = \\frac{e_n(q|_T)}{e_n(q)},

    with :math:`e_n` the elementary symmetric polynomial; the drafts are A in uniformly random order.
    This is the model for which Hu et al.'s elementary-symmetric ratio is exact; it is *not* the law of
    successive sampling (:class:`WithoutReplacement`), see papers/theory.md §3.

    Parameters
    ----------
    q : array_like, shape (V,)
        Weights (a distribution); they are not the inclusion probabilities.
    n : int
        At most the number of tokens with q > 0.
    normalize : bool
    """

    sampling = "conditional-poisson"
    prefix_property = "proved"

    @classmethod
    def exact_set_law(cls, q, n):
        """By enumeration of the n-sets: each weighs its product of q, normalised by their sum
        :math:`e_n(q)`."""
        q = as_fractions(q)
        weights = {frozenset(A): math.prod((q[i] for i in A), start=Fraction(1))
                   for A in combinations(range(len(q)), n)}
        total = sum(weights.values(), Fraction(0))
        return {A: w / total for A, w in weights.items() if w}

    def prefix_pass_seconds(self):
        return _budget.CP_PREFIX_TOKEN_SECONDS * self.V * (self.n + 5)

    def law_seconds(self, count):
        return count * (self.V * _budget.LAW_CELL_SECONDS + _budget.CP_SET_SECONDS)

    def __init__(self, q, n: int, *, normalize: bool = False):
        self._init_from_q(q, n, normalize, distinct="conditional Poisson sampling")

    def _log_scale(self) -> float:
        """log c, c = 1 / (geometric mean of the n largest q), by logs (c itself can overflow): the
        set weights :math:`\\prod_{i \\in A} c q_i` are c^n times the true ones, so every ratio of the
        law is unchanged, and the heaviest set weighs 1, so e_n(c q) lies in [1, C(V, n)] and does
        not underflow when e_n(q) would (one dominant token, the rest of q ~ 1e-200)."""
        return -float(np.mean(np.log(np.sort(self.q)[-self.n:])))

    def _esp(self, weights: np.ndarray) -> np.ndarray:
        """e_n of each row of ``weights`` (M, V) by the recurrence over tokens."""
        e = np.zeros((weights.shape[0], self.n + 1))
        e[:, 0] = 1.0
        for j in range(weights.shape[1]):
            e[:, 1:] = e[:, 1:] + weights[:, j : j + 1] * e[:, :-1]
        return e[:, self.n]

    def containment(self, T):
        """Q(T) = e_n(q|_T) / e_n(q). A few sets: each by one compiled O(V n) pass that takes T's
        tokens first (:func:`mdtheory.models.containment.conditional_poisson_prefix_containment`, no
        underflow); many sets (the exhaustive route): the recurrence vectorised over the sets."""
        T, single = self._masks(T)
        # every e_j of c q normal, no overflow, where n max |log2(c q_i)| + V < 1000; the span from
        # logarithms, as c itself overflows when the n largest masses' geometric mean is below
        # 1e-308 (q = (1, 5e-324, ..., 5e-324), n = V >= 22: an OverflowError, even for one set)
        log_c = self._log_scale()
        span = np.abs(np.log(self.q[self.q > 0]) + log_c).max() / math.log(2.0)
        if T.shape[0] > FEW_SETS and self.n * span + self.V < 1000:
            cq = self.q * math.exp(log_c)
            out = self._esp(np.where(T, cq, 0.0)) / self._esp(cq[None, :])[0]
        else:  # a few sets, or set weights whose partial products could leave the normal range
            from .containment import _conditional_poisson_prefix

            out = np.array([_conditional_poisson_prefix(self.q, np.flatnonzero(row), self.n)[-1]
                            if row.any() else 0.0 for row in T])
        return out[0] if single else out

    def prefix_pass(self, order):
        """Q of every prefix of ``order`` in one O(V n) pass of the e_j recurrence
        (:func:`mdtheory.models.containment.conditional_poisson_prefix_containment`)."""
        from .containment import _conditional_poisson_prefix

        return _conditional_poisson_prefix(self.q, order, self.n)

    def count_tuples(self):
        s = int(np.count_nonzero(self.q))
        return _capped(self.n * math.log10(max(s, 2)), lambda: self.count_sets() * math.factorial(self.n))

    def count_sets(self):
        return _count_exactly(int(np.count_nonzero(self.q)), self.n)

    def set_law(self):
        self._guard("set")
        sets = list(combinations(np.flatnonzero(self.q).tolist(), self.n))
        members = np.zeros((len(sets), self.V), dtype=bool)
        for k, s in enumerate(sets):
            members[k, list(s)] = True
        # prod q over each set as (product of mantissas in [1/2, 1)) * 2^(sum of exponents): no
        # intermediate under- or overflows (the rescaled q's products passed through subnormals,
        # 8% off, or overflowed), each weight within n ε, the heaviest set scaled to about 1
        mant, expo = np.frexp(self.q)
        mant, extra = np.frexp(np.prod(np.where(members, mant, 1.0), axis=1))
        expo = members @ expo + extra
        weights = np.ldexp(mant, expo - expo.max())
        return SetLaw(members, weights / weights.sum())

    def tuple_law(self):
        self._guard("tuple")
        law = self.set_law()
        nfact = math.factorial(self.n)
        tuples, probs = [], []
        for row, w in zip(law.members, law.probs, strict=True):
            for perm in permutations(np.flatnonzero(row).tolist()):
                tuples.append(perm)
                probs.append(w / nfact)
        return TupleLaw(np.array(tuples, dtype=np.int64), np.array(probs))

    def first_draft_law(self):
        """Inclusion probabilities over n: :math:`q_i\\, e_{n-1}(q_{-i}) / (n\\, e_n(q))`, in O(V n).

        :math:`e_{n-1}(q_{-i}) = \\sum_j e_j(q_{<i})\\, e_{n-1-j}(q_{>i})` from prefix and suffix
        tables of elementary symmetric polynomials (sums of non-negative terms, no cancellation);
        no draft set is enumerated. In plain doubles every table entry is at most 1 (q sums to one)
        and every rounding that underflows errs by at most :math:`2^{-1075}`, so a weight errs by
        at most about :math:`6 V n\\, 2^{-1075}` absolute besides its few ε relative: where every
        weight of a token with q > 0 is at least :math:`V n\\, 2^{-1022}` that is under 3ε relative.
        Otherwise (subnormal masses, or a dominant token and the rest of q ~ 1e-200: weights that
        passed through subnormals, up to 2e-3 off, or underflowed to 0) the same sums with every
        table entry a mantissa times its own power of two
        (:func:`mdtheory.models.containment.scaled_inclusion_weights`), which cannot under- or overflow.
        """
        law = self._inclusion_weights()
        if not (law[self.q > 0] >= self.V * self.n * np.finfo(float).tiny).all():
            from .containment import scaled_inclusion_weights

            law = scaled_inclusion_weights(self.q, self.n)
        return law / law.sum()

    def _inclusion_weights(self) -> np.ndarray:
        """:math:`q_i\\, e_{n-1}(q_{-i})`, the inclusion probabilities times n e_n(q), in plain
        doubles (:func:`mdtheory.models.containment.esp_table`, compiled)."""
        from .containment import esp_table

        pre = esp_table(self.q, self.n)  # pre[i, j] = e_j(q_0..q_{i-1})
        suf = esp_table(np.ascontiguousarray(self.q[::-1]), self.n)[::-1]  # e_j(q_i..q_{V-1})
        return self.q * np.einsum("ij,ij->i", pre[:-1, : self.n], suf[1:, : self.n][:, ::-1])
