"""Draft trees: children drawn at every node from the draft's law there, laid out as a (K, L) array.

A tree with branching factors ``(b_1, ..., b_L)`` has ``b_1`` children at the root, each of which has
``b_2`` children, and so on; its K = b_1 ... b_L root-to-leaf paths are the rows of a (K, L) draft
array. At a node with context c the b children's tokens are drawn from the draft's law q(. | c) by a
draft model of the registry (:data:`mdtheory.models.registry.SAMPLINGS`) that can draw a node's
children (:attr:`~mdtheory.models.base.DraftModel.tree_node`, listed by :func:`tree_samplings`):

- ``"iid"``: b independent draws (siblings may repeat a token; SpecInfer's sampled trees);
- ``"without-replacement"``: b draws without replacement (successive sampling: each from q
  renormalised off the tokens already drawn; what ``torch.multinomial(..., replacement=False)``
  and EAGLE's top-k trees with sampling do);
- ``"top"``: the b most likely tokens of q, ties broken by the lower token index (no draw: the
  deterministic top-k trees of the serving engines; a tree of them has one draw).

The rows are in depth-first order: the subtree of the j-th child of a node at depth d is the j-th
block of ``K / (b_1 ... b_d)`` consecutive rows of the parent's block, so the tree is read back from
the array and its branching factors. K iid drafts of length L are the tree with branching
``(K, 1, ..., 1)`` and ``"iid"`` sampling. The tree's sampling rule is part of the draft model: a
verifier must be told it (:class:`DraftTree` carries it). :class:`DraftTree` is the package's one
drawing and enumeration of draft trees: the verifiers' exact laws, the exact optimum, the block
audit and the simulation all read the tree through it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np

from ..errors import InvalidDistributionError, InvalidInputError, MdtheoryError, ProblemTooLargeError
from ..models.registry import SAMPLINGS, sampling_names
from .markov import _check_length, row_tolerance

__all__ = ["DraftTree", "tree_samplings", "MAX_TREE_DRAWS", "iid_drafts", "checked_row"]

#: Largest number of tree draws :meth:`DraftTree.enumerate` lists.
MAX_TREE_DRAWS = 200_000


def tree_samplings() -> tuple[str, ...]:
    """The registered draft models a node of a draft tree draws its children by
    (:attr:`~mdtheory.models.base.DraftModel.tree_node`), by registry name.

    >>> tree_samplings()
    ('iid', 'without-replacement', 'top')
    """
    return sampling_names(lambda cls: cls.tree_node)


def _short(x) -> str:
    text = " ".join(repr(x).split())
    return text if len(text) <= 80 else text[:77] + "..."


def checked_row(law: Callable, context: tuple, name: str = "law", V: int | None = None) -> np.ndarray:
    """``law(context)`` validated: a vector (of length ``V`` when given) of finite non-negative
    entries summing to one within the package's dtype-aware rule
    (:func:`mdtheory.blocks.markov.row_tolerance`: 1e-6 for float64, ~3.5e-4 for float32).

    Returns the row as float64, or as the object array it came in (exact fractions). A law that is
    not callable or raises is one :class:`InvalidInputError` naming ``name`` and the context; a bad
    row is an :class:`InvalidDistributionError`.
    """
    ctx = tuple(context)
    if not callable(law):
        raise InvalidInputError(f"the {name} must be a callable law(context) -> (V,), got "
                                f"{type(law).__name__}")
    try:
        raw = law(ctx)
    except MdtheoryError:
        raise
    except Exception as exc:  # noqa: BLE001 -- a user's callable may raise anything
        raise InvalidInputError(f"the {name} raised {type(exc).__name__} at context {ctx}: {exc}") from None
    try:
        arr = None if np.iscomplexobj(raw) else np.asarray(raw, dtype=np.float64)
    except Exception:  # noqa: BLE001 -- a user's object may raise anything on conversion
        arr = None
    if arr is None or arr.ndim != 1 or arr.size < 1 or (V is not None and arr.size != V):
        raise InvalidDistributionError(f"the {name} at context {ctx} returned {_short(raw)}, not a "
                                       f"vector" + (f" of length {V}" if V is not None else ""))
    tol = row_tolerance(raw)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or abs(float(arr.sum()) - 1) > tol:
        raise InvalidDistributionError(
            f"the {name} at context {ctx} is not a probability vector (finite, >= 0, summing to 1 "
            f"within {tol:.2g}): {_short(raw)}")
    exact = np.asarray(raw) if not hasattr(raw, "dtype") or raw.dtype == object else None
    return exact if exact is not None and exact.dtype == object else arr


def _law_row(law: Callable, context: tuple) -> np.ndarray:
    """The draft's validated row at ``context`` rescaled to sum one: float64, or exact fractions
    summing to exactly one when the law returns those."""
    row = checked_row(law, context, "draft")
    if row.dtype == object:
        s = sum(row)
        return np.array([v / s for v in row], dtype=object)
    return row / row.sum()


class DraftTree:
    """Branching factors per depth and the children's sampling rule.

    Parameters
    ----------
    branching : sequence of int
        ``(b_1, ..., b_L)``, each at least 1; L is the draft length, K = b_1 ... b_L the number of
        root-to-leaf paths.
    sampling : str
        How a node's children are drawn from the draft's law there: a registered draft model that
        draws a node's children (:func:`tree_samplings`: ``"iid"``, ``"without-replacement"``,
        ``"top"``), by its name or an alias of the registry; :attr:`sampling` holds its name.

    Attributes
    ----------
    model : type
        The registered draft model class that draws a node's children
        (:meth:`~mdtheory.models.base.DraftModel.node_draws`,
        :meth:`~mdtheory.models.base.DraftModel.node_sample`).
    distinct : bool
        Siblings are distinct tokens (:attr:`~mdtheory.models.base.DraftModel.distinct_drafts`).

    Examples
    --------
    >>> tree = DraftTree((2, 1), "without-replacement")
    >>> tree.n, tree.length
    (2, 2)
    >>> tree.children_rows(0, 0)
    [(0, 1), (1, 2)]
    """

    def __init__(self, branching, sampling: str = "iid"):
        try:
            b = tuple(branching)
        except TypeError:
            raise InvalidInputError(f"branching must be a sequence of integers, got {branching!r}") from None
        if not b or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1 for x in b):
            raise InvalidInputError(f"branching must be integers >= 1 (one per depth), got {branching!r}")
        model = SAMPLINGS.get(sampling) if isinstance(sampling, str) else None
        if model is None or not model.tree_node:
            raise InvalidInputError(f"unknown tree sampling {sampling!r}; valid choices: "
                                    f"{', '.join(tree_samplings())}")
        self.branching = tuple(int(x) for x in b)
        self.model = model
        self.sampling = model.sampling
        self.distinct = bool(model.distinct_drafts)
        self.length = len(self.branching)
        # stride[d] = rows under one node at depth d + 1 (after d + 1 tokens): suffix products, in
        # Python integers (no overflow) and one pass (a tree of any depth)
        stride = [1] * self.length
        for d in range(self.length - 2, -1, -1):
            stride[d] = stride[d + 1] * self.branching[d + 1]
        self.stride = tuple(stride)
        self.n = stride[0] * self.branching[0]

    @classmethod
    def parse(cls, text: str, sampling: str = "iid") -> DraftTree:
        """A tree from ``"b1,b2,...,bL"`` (the command line's ``--tree``).

        >>> DraftTree.parse("2,2,1").branching
        (2, 2, 1)
        """
        try:
            parts = [int(x) for x in str(text).split(",") if x.strip()]
        except ValueError:
            raise InvalidInputError(f"a tree is comma-separated branching factors like 2,2,1; got "
                                    f"{text!r}") from None
        return cls(parts, sampling)

    def __repr__(self) -> str:
        return f"DraftTree({self.branching}, {self.sampling!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, DraftTree) and (self.branching, self.sampling) == (
            other.branching, other.sampling)

    def __hash__(self) -> int:
        return hash((self.branching, self.sampling))

    def to_dict(self) -> dict:
        """``{"branching": [b_1, ..., b_L], "sampling": name}``, as the results' JSON holds it."""
        return {"branching": list(self.branching), "sampling": self.sampling}

    @classmethod
    def chains(cls, n: int, length: int, sampling: str = "iid") -> DraftTree:
        """``n`` drafts of ``length`` tokens as a tree: branching ``(n, 1, ..., 1)``, the n first
        tokens drawn by ``sampling``, each draft then continued by itself.

        >>> DraftTree.chains(3, 2, "without-replacement")
        DraftTree((3, 1), 'without-replacement')
        """
        return cls((n,) + (1,) * (length - 1), sampling)

    @property
    def is_iid_drafts(self) -> bool:
        """Whether the tree is K iid drafts: branching ``(K, 1, ..., 1)``, iid children."""
        return self.sampling == "iid" and self.branching[1:] == (1,) * (self.length - 1)

    # ------------------------------------------------------------------ the layout
    def children_rows(self, depth: int, start: int) -> list[tuple[int, int]]:
        """Row ranges ``[(lo, hi), ...]`` of the children of the node at ``depth`` (tokens so far)
        whose row block starts at ``start``; a child's token is ``drafts[lo, depth]``."""
        width = self.stride[depth]
        return [(start + j * width, start + (j + 1) * width) for j in range(self.branching[depth])]

    def nodes(self, depth: int) -> range:
        """The first rows of the nodes at ``depth`` (tokens so far), one row block each."""
        return range(0, self.n, self.stride[depth] * self.branching[depth])

    def check_drafts(self, drafts) -> np.ndarray:
        """``drafts`` as an int array of shape (K, L) laid out as this tree (siblings distinct when
        the sampling draws distinct tokens, rows of one node agreeing on its prefix); else
        :class:`InvalidInputError`."""
        x = np.asarray(drafts)
        if x.dtype.kind not in "iu" or x.shape != (self.n, self.length):
            raise InvalidInputError(f"drafts must be integer tokens of shape ({self.n}, {self.length}) for "
                                    f"{self!r}, got {x.dtype} {x.shape}")
        for d in range(self.length):
            width = self.stride[d]
            blocks = x[:, d].reshape(-1, width)
            if np.any(blocks != blocks[:, :1]):
                raise InvalidInputError(f"drafts are not laid out as {self!r}: the rows under one node "
                                        f"disagree at depth {d + 1}")
            if self.distinct and self.branching[d] > 1:
                sib = blocks[:, 0].reshape(-1, self.branching[d])
                if any(len(set(row.tolist())) < row.size for row in sib):
                    raise InvalidInputError(f"drafts repeat a token among siblings at depth {d + 1}, "
                                            f"which {self.sampling} children cannot be")
        return x

    # ------------------------------------------------------------------ sampling and enumeration
    def sample(self, draft: Callable, rng: np.random.Generator, context: tuple = (), *,
               rows: Callable | None = None) -> np.ndarray:
        """One tree drawn from ``draft`` after ``context``: the (K, L) array.

        The nodes are drawn depth by depth, each node's children by :meth:`draw_children` from the
        draft's law at the node. ``rows(contexts) -> [q, ...]``, if given, supplies the laws of a
        depth's nodes (absolute contexts) in one call, as float64 rows summing to one (a language
        model's batch); by default each is ``draft(context)``, validated and rescaled.
        """
        if rows is None:
            def rows(contexts):
                return [np.asarray(_law_row(draft, c), dtype=np.float64) for c in contexts]
        out = np.zeros((self.n, self.length), dtype=np.int64)
        context = tuple(context)
        for d in range(self.length):
            starts = self.nodes(d)
            contexts = [context + tuple(out[s, :d].tolist()) for s in starts]
            for s, ctx, q in zip(starts, contexts, rows(contexts), strict=True):
                tokens = self.draw_children(q, self.branching[d], rng, ctx)
                for (lo, hi), y in zip(self.children_rows(d, s), tokens, strict=True):
                    out[lo:hi, d] = y
        return out

    def draw_children(self, q: np.ndarray, b: int, rng: np.random.Generator, ctx: tuple = ()) -> list[int]:
        """``b`` children drawn from the node's draft law ``q`` by the tree's sampling
        (:meth:`~mdtheory.models.base.DraftModel.node_sample`; ``ctx`` names the node in a refusal)."""
        return self.model.node_sample(q, b, rng, f" at context {ctx}")

    def sample_batch(self, draft: Callable, rng: np.random.Generator, size: int,
                     context: tuple = ()) -> np.ndarray:
        """``size`` trees drawn independently from ``draft`` after ``context``: (size, K, L).

        Each tree has :meth:`sample`'s law; the nodes of all trees that share a context draw their
        children in one call (:meth:`draw_children_batch`), so a batch costs about one law read and
        one vectorised draw per distinct context, not one per node.
        """
        out = np.zeros((size, self.n, self.length), dtype=np.int64)
        root = tuple(context)
        for depth, b in enumerate(self.branching):
            width = self.n if depth == 0 else self.stride[depth - 1]  # rows under one node at this depth
            nodes = self.n // width
            ctx = out[:, ::width, :depth].reshape(size * nodes, depth)
            keys, which = np.unique(ctx, axis=0, return_inverse=True)
            order = np.argsort(which.ravel(), kind="stable")
            bounds = np.cumsum(np.bincount(which.ravel(), minlength=len(keys)))
            kids = np.empty((size * nodes, b), dtype=np.int64)
            for key, at in zip(keys, np.split(order, bounds[:-1]), strict=True):
                c = root + tuple(int(t) for t in key)
                q = np.asarray(_law_row(draft, c), dtype=np.float64)
                kids[at] = self.draw_children_batch(q, b, at.size, rng, c)
            out[:, :, depth] = np.repeat(kids.reshape(size, nodes * b), width // b, axis=1)
        return out

    def draw_children_batch(self, q: np.ndarray, b: int, m: int, rng: np.random.Generator,
                            ctx: tuple = ()) -> np.ndarray:
        """The children of ``m`` nodes with the same draft law ``q``, each drawn independently by the
        tree's sampling: (m, b) tokens (:meth:`~mdtheory.models.base.DraftModel.node_sample_batch`)."""
        return self.model.node_sample_batch(q, b, m, rng, f" at context {ctx}")

    def count_draws(self, V: int) -> int:
        """An upper bound on the number of tree draws :meth:`enumerate` lists: the product over the
        nodes of each node's children tuples (:meth:`~mdtheory.models.base.DraftModel.node_count`;
        V^nodes for iid children)."""
        total = 1
        for d in range(self.length):
            total *= self.model.node_count(V, self.branching[d]) ** math.prod(self.branching[:d])
        return total

    def enumerate(self, draft: Callable, V: int | None = None) -> Iterator[tuple[np.ndarray, object]]:
        """Every tree draw of positive probability with its probability: ``(drafts (K, L), prob)``.

        Probabilities are exact fractions when ``draft`` returns :class:`fractions.Fraction` entries
        (an object array), floats otherwise. Refused over :data:`MAX_TREE_DRAWS` draws.
        """
        V = _law_row(draft, ()).size if V is None else int(V)
        count = self.count_draws(V)
        if count > MAX_TREE_DRAWS:
            raise ProblemTooLargeError(f"{self!r} over V = {V} has up to {count:.3g} draws, over "
                                       f"{MAX_TREE_DRAWS:g}; use sampling")
        out = np.zeros((self.n, self.length), dtype=np.int64)

        def grow(items: list, prob):
            # items: pending nodes (depth, start, ctx) whose children are still to be drawn
            if not items:
                yield out.copy(), prob
                return
            (depth, start, ctx), rest = items[0], items[1:]
            q = _law_row(draft, ctx)
            for tokens, w in self.model.node_draws(q, self.branching[depth]):
                rows = self.children_rows(depth, start)
                for (lo, hi), y in zip(rows, tokens, strict=True):
                    out[lo:hi, depth] = y
                later = [(depth + 1, lo, ctx + (y,)) for (lo, _), y in zip(rows, tokens, strict=True)
                         if depth + 1 < self.length]
                yield from grow(rest + later, prob * w)

        yield from grow([(0, 0, ())], 1)

    def children_sets(self, q: np.ndarray, b: int, ctx: tuple = ()) -> dict:
        """``{frozenset of tokens: probability}``: the law of the set of a node's ``b`` children
        drawn from ``q`` (:meth:`~mdtheory.models.base.DraftModel.node_draws` grouped by set)."""
        out: dict = {}
        for tokens, w in self.model.node_draws(q, b, f" at context {ctx}"):
            key = frozenset(tokens)
            out[key] = out.get(key, 0) + w
        return out

    def inclusion(self, q: np.ndarray, b: int) -> tuple[np.ndarray, bool]:
        """P(token y is among a node's ``b`` children drawn from ``q``), or an upper bound:
        ``(values, exact)`` (:meth:`~mdtheory.models.base.DraftModel.node_inclusion`)."""
        return self.model.node_inclusion(q, b)


def draft_shape(n, length, tree: DraftTree | None) -> tuple:
    """The number of drafts and their length as given (``n``, ``length``) or read off ``tree``;
    with a tree, a given ``n`` or ``length`` must be the tree's.

    Raises
    ------
    InvalidInputError
        ``tree`` is not a DraftTree, disagrees with ``n`` or ``length``, or neither is given.
    """
    if tree is not None:
        if not isinstance(tree, DraftTree):
            raise InvalidInputError(f"tree must be a DraftTree, got {tree!r}")
        for value, name, own in ((n, "n", tree.n), (length, "length", tree.length)):
            if value is not None and _check_length(value, name) != own:
                raise InvalidInputError(f"{name} = {value} does not match {tree!r} ({name} = {own})")
        n, length = tree.n, tree.length
    if n is None or length is None:
        raise InvalidInputError("give n and length (K iid drafts of L tokens), or a tree")
    return n, length


def iid_drafts(n: int, length: int) -> DraftTree:
    """K = ``n`` iid drafts of ``length`` tokens as a tree: branching ``(n, 1, ..., 1)``, iid.

    >>> iid_drafts(3, 2)
    DraftTree((3, 1), 'iid')
    """
    return DraftTree.chains(n, length)
