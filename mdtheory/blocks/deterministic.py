"""Deterministic draft trees: children that are fixed tokens given the context, and the most any
lossless verifier keeps on them.

A deterministic tree (the serving engines' top-k and best-first trees, EAGLE's dynamic trees) is a
set of token paths closed under prefixes, drawn with probability one given the context. On it every
lossless verifier keeps at most

.. math:: E|B| \\le 1 + \\sum_{\\text{distinct paths } x} p(x), \\qquad p(x) = \\prod_i p(x_i \\mid x_{<i}),

and target-only verification (at each node one coin over the children's target masses, the final
token from the target off them; :class:`mdtheory.engines.tree.TargetOnlyTree`) attains it
(papers/blocks.md §10). The best tree of N nodes and depth at most L under a law is found best-first
on its path probabilities (:func:`best_first_tree`): the draft's (what engines build) and the
target's (the best any deterministic tree of N nodes can do), whose values :func:`deterministic_trees`
compares.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import InvalidInputError
from ..result import Result
from .markov import _check_length
from .trees import checked_row

__all__ = ["DeterministicTree", "best_first_tree", "deterministic_trees", "DeterministicTreesResult",
           "target_only_law", "target_only_block", "simulate_best_first"]


def _row(law: Callable, context: tuple, name: str):
    """The law at ``context`` as floats, or as exact fractions when it returns them."""
    row = checked_row(law, context, name)
    return row if row.dtype == object else row / row.sum()


class DeterministicTree:
    """A deterministic draft tree: token paths closed under prefixes (their order kept).

    Parameters
    ----------
    paths : iterable of tuples of int
        The nodes below the root, each by its path; every prefix of a path must be a path.

    Examples
    --------
    >>> t = DeterministicTree([(1,), (0,), (1, 1)])
    >>> t.nodes, t.length, t.children(())
    (3, 2, [1, 0])
    """

    def __init__(self, paths):
        out: list[tuple[int, ...]] = []
        seen = set()
        for path in paths:
            try:
                path = tuple(int(y) for y in path)
            except (TypeError, ValueError):
                raise InvalidInputError(f"a tree's path must be a sequence of token ids, got "
                                        f"{path!r}") from None
            if not path or min(path) < 0:
                raise InvalidInputError(f"a tree's path must be non-empty token ids >= 0, got {path}")
            if path in seen:
                continue
            seen.add(path)
            out.append(path)
        missing = [x for x in out if len(x) > 1 and x[:-1] not in seen]
        if missing:
            raise InvalidInputError(f"the path {missing[0]} has no node for its prefix {missing[0][:-1]}")
        self.paths = tuple(out)

    @property
    def nodes(self) -> int:
        return len(self.paths)

    @property
    def length(self) -> int:
        return max((len(x) for x in self.paths), default=0)

    def children(self, path: tuple) -> list[int]:
        """The tokens of ``path``'s children, in the tree's order."""
        d = len(path)
        return [x[-1] for x in self.paths if len(x) == d + 1 and x[:d] == tuple(path)]

    @classmethod
    def from_drafts(cls, drafts) -> DeterministicTree:
        """The tree of the rows of a draft array (K, L) (a draw of a draft tree; equal prefixes merge)."""
        x = np.asarray(drafts)
        if x.ndim != 2 or x.dtype.kind not in "iu":
            raise InvalidInputError(f"drafts must be an integer array (K, L), got {x.dtype} {x.shape}")
        return cls(tuple(row[:d]) for row in x.tolist() for d in range(1, x.shape[1] + 1))

    def value(self, target: Callable, context=()):
        """:math:`1 + \\sum_x p(x)` over the tree's paths: the largest E|B| of any lossless verifier
        of this tree, target-only verification's (exact fractions when ``target`` returns them)."""
        ctx = tuple(context)
        prob = {(): 1}
        rows: dict = {}
        total = 1
        for x in sorted(self.paths, key=len):
            head = x[:-1]
            if head not in rows:
                rows[head] = _row(target, ctx + head, "target")
            prob[x] = prob[head] * rows[head][x[-1]]
            total = total + prob[x]
        return total if isinstance(total, Fraction) else float(total)

    def __repr__(self) -> str:
        return f"DeterministicTree({list(self.paths)!r})"


def best_first_tree(law: Callable, nodes: int, length: int, context=()) -> DeterministicTree:
    """The tree of ``nodes`` paths of at most ``length`` tokens with the largest path probabilities
    under ``law``, grown best-first (a heap of the frontier; ties to the lexicographically smaller
    path): the paths chosen are the ``nodes`` most probable ones, since a path is never more probable
    than its prefix. ``law(context + path)`` is read at each chosen path shorter than ``length``.

    Examples
    --------
    >>> from mdtheory.blocks import sun_toy
    >>> target, draft = sun_toy()
    >>> best_first_tree(draft, 3, 2).paths
    ((0,), (0, 0), (1,))
    """
    N, L = _check_length(nodes, "nodes"), _check_length(length, "length")
    ctx = tuple(context)
    heap: list = []

    def expand(path: tuple, prob) -> None:
        row = _row(law, ctx + path, "law")
        values = np.array([float(v) for v in row])
        k = min(N, values.size)
        top = np.argsort(-values, kind="stable")[:k]  # no more children than nodes are ever chosen
        for y in top:
            heapq.heappush(heap, (-(prob * row[y]), path + (int(y),)))

    expand((), 1)
    chosen = []
    while heap and len(chosen) < N:
        neg, path = heapq.heappop(heap)
        chosen.append(path)
        if len(path) < L:
            expand(path, -neg)
    return DeterministicTree(chosen)


@dataclass
class DeterministicTreesResult(Result):
    """The deterministic trees of ``nodes`` nodes (depth at most ``length``) under the draft and the
    target, and what a lossless verifier keeps on each (:class:`mdtheory.result.Result`: status
    ``"exact"``).

    Attributes
    ----------
    draft_tree, best_tree : DeterministicTree
        Best-first on the draft's and on the target's path probabilities.
    draft_value : float
        E|B| of target-only verification of the draft's tree, the most any lossless verifier keeps
        on it.
    best_value : float
        The same for the target's tree: the most any deterministic tree of ``nodes`` nodes keeps.
    """

    nodes: int
    length: int
    draft_tree: DeterministicTree
    best_tree: DeterministicTree
    draft_value: float
    best_value: float
    status: str = "exact"

    @property
    def success(self) -> bool:
        return True

    @property
    def message(self) -> str:
        return (f"exact: with {self.nodes} nodes the draft's best-first tree keeps "
                f"{float(self.draft_value):.6g} tokens per call, the target's {float(self.best_value):.6g}")

    def _items(self) -> dict:
        out = super()._items()
        for key in ("draft_tree", "best_tree"):
            out[key] = [list(x) for x in out[key].paths]
        for key in ("draft_value", "best_value"):
            out[key] = float(out[key])
        return out


def deterministic_trees(target: Callable, draft: Callable, nodes: int, length: int,
                        context=()) -> DeterministicTreesResult:
    """The draft's best-first tree of ``nodes`` nodes (what engines build) and the target's, with
    their values :math:`1 + \\sum p(\\text{path})` (:meth:`DeterministicTree.value`; exact fractions
    when the laws return them).

    Examples
    --------
    >>> from mdtheory.blocks import sun_toy
    >>> r = deterministic_trees(*sun_toy(), nodes=2, length=2)
    >>> round(r.draft_value, 6), round(r.best_value, 6)
    (1.444444, 2.111111)
    """
    draft_tree = best_first_tree(draft, nodes, length, context)
    best = best_first_tree(target, nodes, length, context)
    return DeterministicTreesResult(int(nodes), int(length), draft_tree, best,
                                    draft_tree.value(target, context), best.value(target, context))


def target_only_law(target: Callable, tree: DeterministicTree, context=()) -> dict[tuple, float]:
    """The exact law of target-only verification's block on ``tree`` after ``context``:
    ``{block: probability}`` (exact fractions when ``target`` returns them). A child is accepted
    with its target mass (first occurrences among its siblings), else the token comes from the
    target off the children."""
    ctx = tuple(context)
    out: dict[tuple, float] = {}
    stack = [((), 1)]
    while stack:
        path, w = stack.pop()
        p = _row(target, ctx + path, "target")
        kids = list(dict.fromkeys(tree.children(path)))
        for y in kids:
            stack.append((path + (y,), w * p[y]))
        for y in range(p.size):
            if y not in kids and p[y] != 0:
                out[path + (y,)] = out.get(path + (y,), 0) + w * p[y]
    return out


def target_only_block(target: Callable, tree: DeterministicTree, rng: np.random.Generator,
                      context=()) -> list[int]:
    """One block of target-only verification of ``tree`` after ``context``: at each node a child is
    accepted with its target mass (first occurrences), else the token comes from the target off the
    children; a leaf emits a target token."""
    ctx, path = tuple(context), ()
    while True:
        p = np.asarray([float(v) for v in _row(target, ctx + path, "target")])
        kids = list(dict.fromkeys(tree.children(path)))
        u = rng.random()
        for y in kids:
            if u < p[y]:
                path = path + (y,)
                break
            u -= p[y]
        else:
            rest = p.copy()
            rest[kids] = 0.0
            rest = rest if rest.sum() > 0 else p
            return list(path) + [int(rng.choice(p.size, p=rest / rest.sum()))]


def simulate_best_first(target: Callable, drafter: Callable, nodes: int, length: int, steps: int,
                        rng: np.random.Generator, *, under: str = "draft", replicates: int = 1,
                        start=()) -> tuple[np.ndarray, np.ndarray]:
    """``steps`` target calls of target-only verification of the best-first tree of ``nodes`` nodes
    (depth at most ``length``) under the drafter (``under="draft"``, what engines build) or under
    the target (``"target"``, the best deterministic tree), in ``replicates`` independent texts from
    ``start``. Returns (tokens emitted per call, the exact E|B| at each call's context)."""
    if under not in ("draft", "target"):
        raise InvalidInputError(f"under must be 'draft' or 'target', got {under!r}")
    steps, replicates = _check_length(steps, "steps"), _check_length(replicates, "replicates")
    if replicates > steps:
        raise InvalidInputError(f"replicates must be at most steps = {steps}, got {replicates}")
    per = steps // replicates
    counts, exact = np.zeros(per * replicates, dtype=np.int64), np.zeros(per * replicates)
    law = drafter if under == "draft" else target
    text = tuple(start)
    for j in range(per * replicates):
        if j % per == 0:
            text = tuple(start)
        tree = best_first_tree(law, nodes, length, text)
        exact[j] = float(tree.value(target, text))
        out = target_only_block(target, tree, rng, text)
        counts[j] = len(out)
        text = text + tuple(out)
    return counts, exact
