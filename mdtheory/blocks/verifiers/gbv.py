"""Greedy multi-path block verification (GBV; Thomas & Pal, 2026): the draft of highest p/q ranks,
block-verified against its own law (papers/blocks_verifiers.md, Proposition 2)."""

from __future__ import annotations

import numpy as np

from .base import BlockVerifier
from .block import _bv_law, _bv_sample

__all__ = ["GreedyMultiPath"]


class GreedyMultiPath(BlockVerifier):
    r"""Greedy multi-path block verification (GBV; Thomas & Pal, 2026): block verification of the
    lexicographically greatest draft against that draft's own law.

    Tokens at a node with context c are ranked by the ratio :math:`p(y \mid c) / q(y \mid c)`
    (ties: the larger token index ranks higher), paths lexicographically by these ranks. The
    selected path is the greatest of the K iid drafts (the walk that steps from the root to the
    child of highest ratio); its next token given its prefix c has the law

    .. math:: \mu_c(v) = \frac{(R + G(v) + q(v))^K - (R + G(v))^K}{(R + 1)^K - R^K}
              = q(v)\, \frac{S(R + G(v) + q(v),\, R + G(v))}{S(R + 1,\, R)},

    :math:`G(v)` the q-mass of the tokens ranked below v at c, :math:`S(a, b) = \sum_{i<K} a^i
    b^{K-1-i}`, and :math:`R = A / Q(c)`, the probability that one draft deviates below c before
    reaching its end over the probability that it starts with c (:math:`R = 0` at the root,
    :math:`R_{c v} = (R_c + G_c(v)) / q(v \mid c)`). Block verification of the selected path with
    :math:`\mu` in place of q is lossless (Proposition 2 of ``papers/blocks_verifiers.md``; the
    path's law is :math:`\prod \mu`). At K = 1, :math:`\mu = q` and GBV is block verification.

    The selection and the skewed law are the authors' (their reference implementation's
    ``gbv_verify`` and ``compute_skew``); this form computes :math:`\mu` by the positive
    expansion S (no cancellation), keeps R instead of the two underflowing joint masses, and breaks
    ties by one rule in both the walk and :math:`\mu`.

    Examples
    --------
    >>> from fractions import Fraction as F
    >>> law = lambda probs: (lambda ctx: np.array(probs, dtype=object))
    >>> p, q = law([F(1, 3), F(2, 3)]), law([F(2, 3), F(1, 3)])
    >>> GreedyMultiPath().block_efficiency(p, q, 1, 2)
    Fraction(20, 9)
    """

    name = "gbv"

    @staticmethod
    def _ranks(laws, ctx):
        """Each token's rank at ctx (0 the lowest) and the q-mass below each token."""
        p, q = laws.p(ctx), laws.q(ctx)
        inf = float("inf")
        key = [(p[y] / q[y] if q[y] > 0 else inf, y) for y in range(q.size)]
        order = sorted(range(q.size), key=key.__getitem__)
        rank = np.empty(q.size, dtype=np.int64)
        below = 0 * q
        acc = 0 * q[0]
        for i, y in enumerate(order):
            rank[y] = i
            below[y] = acc
            acc = acc + q[y]
        return rank, below

    def _path(self, laws, x):
        """The selected path and the skewed laws mu along it."""
        K, L = x.shape
        rows, path, mus = np.arange(K), [], []
        R = 0 * laws.q(())[0]
        for depth in range(L):
            ctx = tuple(path)
            q = laws.q(ctx)
            rank, below = self._ranks(laws, ctx)
            if R == float("inf"):  # R past the float range (or a prefix of draft probability 0):
                mu = q                # mu is q to within 1 / R
            else:
                scale = R + 1  # S is homogeneous of degree K - 1: divide every argument by R + 1
                hi, lo, r0 = (R + below + q) / scale, (R + below) / scale, R / scale
                mu = q * _power_sums(hi, lo, K) / _power_sums(1 + 0 * r0, r0, K)
            tokens = x[rows, depth]
            y = int(tokens[np.argmax(rank[tokens])])
            rows = rows[tokens == y]
            path.append(y)
            mus.append(mu)
            with np.errstate(over="ignore"):
                R = (R + below[y]) / q[y] if q[y] > 0 else float("inf")
        return path, mus

    def _law(self, laws, x, out):
        path, mus = self._path(laws, x)
        _bv_law(laws, mus, path, 1, out)

    def _sample(self, laws, x, rng):
        path, mus = self._path(laws, x)
        return _bv_sample(laws, mus, path, rng)


def _power_sums(a, b, K: int):
    """:math:`\\sum_{i=0}^{K-1} a^i b^{K-1-i}` (elementwise), a sum of non-negative terms."""
    total, ai = 0 * a, 1 + 0 * a
    for i in range(K):
        total = total + ai * b ** (K - 1 - i)
        ai = ai * a
    return total
