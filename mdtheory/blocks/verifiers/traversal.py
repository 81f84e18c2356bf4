"""Traversal verification (Weng et al., NeurIPS 2025) of a draft tree, leaf to root."""

from __future__ import annotations

import numpy as np

from ..trees import DraftTree, iid_drafts
from .base import _tree_tag
from .recursive import _Recursive

__all__ = ["Traversal"]


class Traversal(_Recursive):
    """Traversal verification (Weng et al., NeurIPS 2025) of a draft tree, leaf to root.

    Parameters
    ----------
    tree : DraftTree, optional
        The tree the drafts were drawn as (branching factors and iid or without-replacement
        children). Default: K iid drafts, the tree ``(K, 1, ..., 1)`` read off the drafts' shape.

    The depth-first order visits the first leaf first: it is accepted with its sequence-level
    weight, else removed and its parent's residual passed to the next sibling, drawn from q off the
    earlier siblings for trees without replacement; a node whose children are all removed becomes a
    leaf. The children must be draws from q (iid or without replacement), not fixed tokens.
    On K iid drafts it shares no prefix (drafts with one first token are different subtrees), unlike
    :class:`PrefixTrie`.
    """

    name = "traversal"
    tree_samplings = ("iid", "without-replacement")

    def __init__(self, tree: DraftTree | None = None):
        self.tree = self._check_tree(tree)

    @property
    def label(self) -> str:
        return "traversal" + _tree_tag(self.tree)

    def _prepare(self, laws, drafts):
        x = super()._prepare(laws, drafts)
        self._layout = self.tree if self.tree is not None else iid_drafts(*x.shape)
        return x

    def _children(self, x, depth, rows):
        tree = self._layout
        kids = tree.children_rows(depth, int(rows[0]))
        return [(int(x[lo, depth]), np.arange(lo, hi)) for lo, hi in kids], tree.distinct
