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

A law that returns exact fractions (an object array of :class:`fractions.Fraction`) is read in them
everywhere a node's children are chosen: the top tokens are ordered exactly (a tie closer than
float resolution is broken as the fractions are), random children are drawn from its float64
values, and :meth:`DraftTree.enumerate` gives exact probabilities. Every row is checked to be a
probability vector of the root's length V.

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

from .._validate import MAX_DRAFTS, as_generator, as_size
from ..errors import InvalidDistributionError, InvalidInputError, MdtheoryError, ProblemTooLargeError
from ..models.base import _capped
from ..models.registry import SAMPLINGS, sampling_names
from .markov import _check_length, row_tolerance

__all__ = ["DraftTree", "tree_samplings", "MAX_TREE_DRAWS", "MAX_TREE_PATHS", "iid_drafts", "checked_row"]

#: Largest number of tree draws :meth:`DraftTree.enumerate` lists.
MAX_TREE_DRAWS = 200_000
#: Largest number of root-to-leaf paths K of a tree: the package's largest number of drafts (2^53,
#: :data:`mdtheory._validate.MAX_DRAFTS`; the bound takes K up to it, every other path refuses far
#: smaller trees by its own estimate).
MAX_TREE_PATHS = MAX_DRAFTS


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


def _law_row(law: Callable, context: tuple, V: int | None = None) -> np.ndarray:
    """The draft's validated row at ``context`` (of length ``V`` when given) rescaled to sum one:
    float64, or exact fractions summing to exactly one when the law returns those."""
    row = checked_row(law, context, "draft", V)
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
    deterministic : bool
        The children are a function of the node's law, so the tree is drawn with probability one
        (:attr:`~mdtheory.models.base.DraftModel.deterministic`: top children).

    Raises
    ------
    InvalidInputError
        A branching that is not integers >= 1, more than :data:`MAX_TREE_PATHS` root-to-leaf paths
        (checked before anything is allocated), or a sampling that draws no tree's children.

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
            raise InvalidInputError(f"branching must be a sequence of integers, got {_short(branching)}"
                                    ) from None
        if not b or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1 for x in b):
            raise InvalidInputError(f"branching must be integers >= 1 (one per depth), got "
                                    f"{_short(branching)}")
        model = SAMPLINGS.get(sampling) if isinstance(sampling, str) else None
        if model is None or not model.tree_node:
            raise InvalidInputError(f"unknown tree sampling {sampling!r}; valid choices: "
                                    f"{', '.join(tree_samplings())}")
        branching = tuple(int(x) for x in b)
        # stride[d] = rows under one node at depth d + 1 (after d + 1 tokens): suffix products, in
        # Python integers (no overflow) and one pass (a tree of any depth); each product is at most
        # the number of paths, checked as it grows (no huge integer is ever formed)
        stride = [1] * len(branching)
        for d in range(len(branching) - 1, -1, -1):
            below = stride[d] * branching[d]
            if below > MAX_TREE_PATHS:
                shown = ", ".join(str(x) if x < 10**12 else f"~10^{math.log10(x):.0f}" for x in branching[:8])
                raise InvalidInputError(
                    f"the tree ({shown}{', ...' if len(branching) > 8 else ''}) has over "
                    f"{MAX_TREE_PATHS:.3g} = 2^53 root-to-leaf paths (the product of its branching "
                    "factors), more than any estimate of the package handles")
            if d:
                stride[d - 1] = below
        self.branching = branching
        self.model = model
        self.sampling = model.sampling
        self.distinct = bool(model.distinct_drafts)
        self.deterministic = bool(model.deterministic)
        self.length = len(self.branching)
        self.stride = tuple(stride)
        self.n = stride[0] * self.branching[0]

    @classmethod
    def parse(cls, text: str, sampling: str = "iid") -> DraftTree:
        """A tree from ``"b1,b2,...,bL"`` (the command line's ``--tree``).

        >>> DraftTree.parse("2,2,1").branching
        (2, 2, 1)

        Raises
        ------
        InvalidInputError
            An empty field (``"2,,1"``), a field that is not an integer, or a tree
            :class:`DraftTree` refuses.
        """
        fields = str(text).split(",")
        try:
            if any(not x.strip() for x in fields):
                raise ValueError
            parts = [int(x) for x in fields]
        except ValueError:
            raise InvalidInputError(f"a tree is comma-separated branching factors like 2,2,1 (each an "
                                    f"integer >= 1, none empty); got {_short(str(text))}") from None
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
        """Whether the tree is K iid drafts: branching ``(K, 1, ..., 1)``, children drawn iid from q
        (the model's coverage is the iid one,
        :attr:`~mdtheory.models.base.DraftModel.lex_base_closed_form`)."""
        return bool(self.model.lex_base_closed_form) and self.branching[1:] == (1,) * (self.length - 1)

    def prefix_draws(self, depth: int) -> int | None:
        """A number n of draws from the law of m-token paths, m = ``depth``, whose coverage bounds the
        tree's: P(every depth-m node's prefix lies in T) >= q_m(T)^n for every set T of m-token
        prefixes (the prefix-set bound, papers/blocks.md §7), or None where no such power bound holds.

        b_1 ... b_m for children drawn iid from q (the model's declared iid coverage, Jensen's
        inequality); 1 for a depth with one node whose every ancestor has one child, a draw from q
        at each of them (a model that is not deterministic draws a single child from q); None for
        distinct siblings at a depth of several nodes, and for deterministic children (the tree is
        one fixed set of paths, on which the nested bound is exact, §10).
        """
        if self.deterministic:
            return None
        width = math.prod(self.branching[:depth])
        if self.model.lex_base_closed_form:
            return width
        return 1 if width == 1 else None

    # ------------------------------------------------------------------ the layout
    def children_rows(self, depth: int, start: int) -> list[tuple[int, int]]:
        """Row ranges ``[(lo, hi), ...]`` of the children of the node at ``depth`` (tokens so far)
        whose row block starts at ``start``; a child's token is ``drafts[lo, depth]``."""
        width = self.stride[depth]
        return [(start + j * width, start + (j + 1) * width) for j in range(self.branching[depth])]

    def nodes(self, depth: int) -> range:
        """The first rows of the nodes at ``depth`` (tokens so far), one row block each."""
        return range(0, self.n, self.stride[depth] * self.branching[depth])

    def check_drafts(self, drafts, draft: Callable | None = None) -> np.ndarray:
        """``drafts`` as an int array of shape (K, L) laid out as this tree (siblings distinct when
        the sampling draws distinct tokens, rows of one node agreeing on its prefix); else
        :class:`InvalidInputError`.

        With ``draft`` (the draft's law relative to the tree's root, ``draft(context)`` a row
        summing to one, float64 or exact fractions) and deterministic children, every node's
        children must also be the ones the law gives there (its top tokens): no other array is a
        draw of the tree.
        """
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
        if draft is not None and self.deterministic:
            for d in range(self.length):
                for s in self.nodes(d):
                    ctx = tuple(x[s, :d].tolist())
                    q = np.asarray(draft(ctx))
                    if q.ndim != 1 or q.size < self.branching[d]:
                        raise InvalidInputError(f"the draft law at context {ctx} has no "
                                                f"{self.branching[d]} tokens to choose")
                    want = self.model.node_draws(q, self.branching[d], f" at context {ctx}")[0][0]
                    got = tuple(int(x[lo, d]) for lo, _ in self.children_rows(d, s))
                    if got != tuple(want):
                        raise InvalidInputError(
                            f"drafts are not a draw of {self!r}: the children at context {ctx} are "
                            f"{list(got)}, the draft law's {self.sampling} tokens there are {list(want)}")
        return x

    # ------------------------------------------------------------------ sampling and enumeration
    def sample(self, draft: Callable, rng=None, context: tuple = (), *,
               rows: Callable | None = None) -> np.ndarray:
        """One tree drawn from ``draft`` after ``context``: the (K, L) array.

        The nodes are drawn depth by depth, each node's children by :meth:`draw_children` from the
        draft's law at the node. ``rows(contexts) -> [q, ...]``, if given, supplies the laws of a
        depth's nodes (absolute contexts) in one call, as rows summing to one (a language model's
        batch); by default each is ``draft(context)``, validated and rescaled (exact fractions kept).
        Every row must have the root's length V. ``rng``: a :class:`numpy.random.Generator`, a seed
        or None (fresh entropy), as :func:`numpy.random.default_rng` takes.

        Raises
        ------
        InvalidInputError, InvalidDistributionError
            A bad ``rng``, a law that raises or is not a probability vector, a row of another
            length than the root's, or a node whose law cannot give its children.
        """
        rng = as_generator(rng)
        out = np.zeros((self.n, self.length), dtype=np.int64)
        context = tuple(context)
        V = None
        for d in range(self.length):
            starts = self.nodes(d)
            contexts = [context + tuple(out[s, :d].tolist()) for s in starts]
            laws = [_law_row(draft, c, V) for c in contexts] if rows is None else rows(contexts)
            for s, ctx, q in zip(starts, contexts, laws, strict=True):
                V = _same_length(q, V, ctx)
                tokens = self.draw_children(q, self.branching[d], rng, ctx)
                for (lo, hi), y in zip(self.children_rows(d, s), tokens, strict=True):
                    out[lo:hi, d] = y
        return out

    def draw_children(self, q: np.ndarray, b: int, rng: np.random.Generator, ctx: tuple = ()) -> list[int]:
        """``b`` children drawn from the node's draft law ``q`` by the tree's sampling
        (:meth:`~mdtheory.models.base.DraftModel.node_sample`; ``ctx`` names the node in a refusal)."""
        return self.model.node_sample(q, b, rng, f" at context {ctx}")

    def sample_batch(self, draft: Callable, rng, size: int, context: tuple = ()) -> np.ndarray:
        """``size`` trees drawn independently from ``draft`` after ``context``: (size, K, L).

        Each tree has :meth:`sample`'s law; the nodes of all trees that share a context draw their
        children in one call (:meth:`draw_children_batch`), so a batch costs about one law read and
        one vectorised draw per distinct context, not one per node. ``size`` = 0 gives an empty
        batch of shape (0, K, L) (no law is read); ``rng`` as :meth:`sample` takes it.

        Raises
        ------
        InvalidInputError, InvalidDistributionError
            ``size`` not an integer >= 0, a bad ``rng``, or what :meth:`sample` refuses.
        """
        size = as_size(size)
        rng = as_generator(rng)
        out = np.zeros((size, self.n, self.length), dtype=np.int64)
        if size == 0:
            return out
        root = tuple(context)
        V = None
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
                q = _law_row(draft, c, V)
                V = q.size
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
        V^nodes for iid children, one for deterministic children), saturated at
        :data:`mdtheory.models.base.COUNT_CAP` (judged by V^nodes first: no huge integer is formed)."""
        if self.deterministic:
            return 1
        nodes = sum(math.prod(self.branching[:d + 1]) for d in range(self.length))
        return _capped(nodes * math.log10(max(V, 2)),  # a node's tuples are at most V^b
                       lambda: math.prod(self.model.node_count(V, self.branching[d])
                                         ** math.prod(self.branching[:d]) for d in range(self.length)))

    def check_draws(self, V: int) -> int:
        """:meth:`count_draws` over V tokens, refused over :data:`MAX_TREE_DRAWS`.

        Raises
        ------
        ProblemTooLargeError
            Naming the tree, V and the count.
        """
        count = self.count_draws(V)
        if count > MAX_TREE_DRAWS:
            raise ProblemTooLargeError(f"{self!r} over V = {V} has up to {count:.3g} draws, over "
                                       f"{MAX_TREE_DRAWS:g}; use sampling")
        return count

    def enumerate(self, draft: Callable, V: int | None = None) -> Iterator[tuple[np.ndarray, object]]:
        """Every tree draw of positive probability with its probability: ``(drafts (K, L), prob)``.

        Probabilities are exact fractions when ``draft`` returns :class:`fractions.Fraction` entries
        (an object array), floats otherwise; a draw whose float probability underflows to zero is
        left out (its probability is below the float range, and no draw listed has probability 0).
        Every row must have length ``V`` (default: the root's). Refused over
        :data:`MAX_TREE_DRAWS` draws.
        """
        V = _law_row(draft, ()).size if V is None else int(V)
        self.check_draws(V)
        out = np.zeros((self.n, self.length), dtype=np.int64)

        def grow(items: list, prob):
            # items: pending nodes (depth, start, ctx) whose children are still to be drawn
            if not items:
                yield out.copy(), prob
                return
            (depth, start, ctx), rest = items[0], items[1:]
            q = _law_row(draft, ctx, V)
            for tokens, w in self.model.node_draws(q, self.branching[depth], f" at context {ctx}"):
                if prob * w == 0:  # underflow of float probabilities
                    continue
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
        ``(values, exact)`` (:meth:`~mdtheory.models.base.DraftModel.node_inclusion`); ``q`` as the
        law gives it (exact fractions choose top children exactly)."""
        return self.model.node_inclusion(q, b)


def _same_length(q, V: int | None, ctx: tuple) -> int:
    """The length of the row ``q``, which must be ``V`` once that is known (the root's)."""
    size = len(q)
    if V is not None and size != V:
        raise InvalidDistributionError(f"the draft at context {ctx} returned a row of length {size}, "
                                       f"not the root's V = {V}")
    return size


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
