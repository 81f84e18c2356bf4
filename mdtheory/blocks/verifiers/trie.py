"""Block verification of K iid drafts over their prefix trie, residuals passed between siblings."""

from __future__ import annotations

import numpy as np  # noqa: F401 - the doctest's laws are numpy arrays

from .recursive import _Recursive

__all__ = ["PrefixTrie"]


class PrefixTrie(_Recursive):
    """Block verification of K iid drafts over their prefix trie, residuals passed between siblings.

    The drafts that agree on a prefix share its node; a node's children are the distinct next
    tokens of its drafts in order of first appearance (row order), so each child is drawn from q off
    the earlier children's tokens (the first appearances of an iid sequence are successive sampling
    without replacement), and a child's subtree holds every draft through it. The recursion of
    :class:`_Recursive` then runs on this trie. At K = 1 it is block verification.

    Examples
    --------
    >>> from fractions import Fraction as F
    >>> law = lambda probs: (lambda ctx: np.array(probs, dtype=object))
    >>> p, q = law([F(1, 3), F(2, 3)]), law([F(2, 3), F(1, 3)])
    >>> PrefixTrie().block_efficiency(p, q, 1, 2)
    Fraction(20, 9)
    """

    name = "trie"

    def _children(self, x, depth, rows):
        tokens = x[rows, depth]
        order = list(dict.fromkeys(int(y) for y in tokens))
        return [(y, rows[tokens == y]) for y in order], True
