"""The prefix set of a draft tree: its law (for the exact optimum) and the chance that it holds a prefix
(for the upper bound).

A draft tree (:class:`~mdtheory.blocks.trees.DraftTree`) drawn from the draft model gives K root-to-leaf
paths; a verifier may accept a block b_1..b_k only when b_{1:k} is a prefix of one of them. So what a
tree draw X offers a verifier is its *prefix set*: the set of distinct root-to-leaf paths, which is
the set of its nodes' prefixes (every leaf is at depth L). Two draws with the same prefix set allow
the same blocks, so the block-efficiency LP over tree draws has the same value as the LP over prefix
sets with their probabilities (papers/blocks.md, "Draft trees"). This is the tree's symmetry taken to
its end: exchangeable sibling subtrees, repeated iid siblings and the order of the drafts all
disappear.

The law is computed bottom-up: at a node with context c the subtree's prefix set is the union over
its children y of {y} x (the child's subtree's prefix set); iid children are b independent draws of
(token, subtree), merged by union; distinct children (without replacement, or the top b tokens) are
a set of b tokens (:meth:`~mdtheory.blocks.trees.DraftTree.children_sets`), each with an independent
subtree.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..models.without_replacement import WithoutReplacement
from .trees import DraftTree, _law_row

__all__ = ["prefix_set_law", "count_prefix_sets", "prefix_presence", "wor_inclusion", "estimate_law"]

#: P(token y is among b draws without replacement from q), or an upper bound: ``(values, exact)``
#: (:meth:`mdtheory.models.without_replacement.WithoutReplacement.node_inclusion`).
wor_inclusion = WithoutReplacement.node_inclusion

#: seconds per (state, state) merge of two prefix-set laws (a frozenset union and a dict update),
#: measured on a 2-core x86 machine
_MERGE_SECONDS = 1.5e-6


def _log_comb(n: float, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def _log_sets_of_paths(paths_log: float, most: int) -> float:
    """log of the number of non-empty sets of at most ``most`` paths out of exp(paths_log)."""
    if paths_log > 700:
        return math.inf
    paths = math.exp(paths_log)
    most = int(min(most, paths))
    if most <= 0:
        return 0.0
    terms = [_log_comb(paths, j) for j in range(1, most + 1)] if most < 10_000 else [paths * math.log(2)]
    return _log_sum(terms)


def _log_sum(terms: list[float]) -> float:
    top = max(terms)
    if not math.isfinite(top):
        return top
    return top + math.log(sum(math.exp(t - top) for t in terms))


def count_prefix_sets(V: int, tree: DraftTree) -> list[float]:
    """Upper bounds N_d on the number of distinct prefix sets of the subtree below a node of each
    depth d = 0..L, as natural logarithms (``out[0]`` the whole tree's; ``out[L]`` = 0: one empty
    path).

    A subtree below depth d has at most K_d = b_{d+1} ... b_L leaves, so N_d is at most the number
    of non-empty sets of at most K_d paths of V^(L-d). Its b = b_{d+1} children carry j distinct
    tokens: distinct children j = b, each token with its own subtree (C(V, b) N_{d+1}^b); iid,
    1 <= j <= min(b, V), each token's set the union of at most b - j + 1 subtrees' sets (at most
    (b - j + 1) K_{d+1} paths of V^(L-d-1); N_{d+1} when j = b). Deterministic children
    (:attr:`~mdtheory.blocks.trees.DraftTree.deterministic`): one prefix set below every node."""
    L = tree.length
    out = [0.0] * (L + 1)
    if tree.deterministic:  # none where a node needs more children than V tokens
        return [-math.inf if max(tree.branching[d:]) > V else 0.0 for d in range(L)] + [0.0]
    for d in range(L - 1, -1, -1):
        b = tree.branching[d]
        below = tree.stride[d]            # leaves under one child
        bound = _log_sets_of_paths((L - d) * math.log(V), below * b)
        if tree.distinct:
            bound = min(bound, _log_comb(V, b) + b * out[d + 1] if b <= V else -math.inf)
        else:
            terms = []
            for j in range(1, min(b, V) + 1):
                each = out[d + 1] if j == b else min(
                    _log_sets_of_paths((L - d - 1) * math.log(V), (b - j + 1) * below), b * out[d + 1])
                terms.append(_log_comb(V, j) + j * each)
            bound = min(bound, _log_sum(terms))
        out[d] = bound
    return out


def estimate_law(V: int, tree: DraftTree) -> tuple[float, float]:
    """(seconds, log number of prefix sets) of :func:`prefix_set_law` from sizes alone: per depth d,
    V^d contexts; iid, each merges its b - 1 further children into a law of at most
    min(N_d, (V N_{d+1})^i) states after i children, one state of V N_{d+1} at a time; distinct
    children, one product of b laws per token set, at most C(V, b) N_{d+1}^b states. Deterministic
    children reach only the tree's own b_1 ... b_d contexts at depth d."""
    logs = count_prefix_sets(V, tree)
    seconds = 0.0
    for d in range(tree.length):
        b = tree.branching[d]
        ctx = d * math.log(V)
        if tree.deterministic:
            ctx = min(ctx, math.log(math.prod(tree.branching[:d])))
        one = math.log(V) + logs[d + 1]
        if not tree.distinct:
            if b == 1:
                work = ctx + one
            else:
                work = ctx + _log_sum([min(logs[d], i * one) + one for i in range(1, b)])
        else:
            work = ctx + logs[d] + math.log(max(b, 1))
        seconds += _MERGE_SECONDS * math.exp(min(work, 700.0))
    return seconds, logs[0]


def prefix_set_law(draft: Callable, tree: DraftTree, V: int, context: tuple = ()) -> dict:
    """The law of the draft tree's prefix set: ``{frozenset of root-to-leaf paths (L-tuples): prob}``.

    Parameters
    ----------
    draft : callable
        The draft's next-token law ``law(context) -> (V,)``; exact fractions choose a node's top
        children exactly (the tree's one rule, :mod:`mdtheory.blocks.trees`), the probabilities are
        floats.
    tree : DraftTree
        Branching factors and the children's sampling rule.
    V : int
    context : tuple
        The text before the tree's root.

    Examples
    --------
    Two iid children of one token each, from q = (3/4, 1/4): {0} w.p. 9/16, {1} 1/16, {0, 1} 6/16.

    >>> from mdtheory.blocks.markov import ConstantLaw
    >>> law = prefix_set_law(ConstantLaw([0.75, 0.25]), DraftTree((2,), "iid"), 2)
    >>> sorted((sorted(s), round(p * 16, 9)) for s, p in law.items())
    [([(0,)], 9.0), ([(0,), (1,)], 6.0), ([(1,)], 1.0)]
    """
    L = tree.length
    memo: dict = {}

    def law_at(ctx: tuple) -> dict:
        d = len(ctx)
        if d == L:
            return {frozenset({()}): 1.0}
        hit = memo.get(ctx)
        if hit is not None:
            return hit
        full = tuple(context) + ctx
        q = _law_row(draft, full, V)
        b = tree.branching[d]

        def child(y: int) -> dict:
            return {frozenset((y,) + s for s in S): w for S, w in law_at(ctx + (y,)).items()}

        if not tree.distinct:
            one: dict = {}
            for y in np.flatnonzero(q > 0).tolist():
                for S, w in child(y).items():
                    one[S] = one.get(S, 0.0) + float(q[y]) * w
            out = one
            for _ in range(b - 1):
                nxt: dict = {}
                for A, wa in out.items():
                    for B, wb in one.items():
                        key = A | B
                        nxt[key] = nxt.get(key, 0.0) + wa * wb
                out = nxt
        else:
            out = {}
            for tokens, w in tree.children_sets(q, b, full).items():
                part = {frozenset(): w}
                for y in sorted(tokens):
                    part = {A | B: wa * wb for A, wa in part.items() for B, wb in child(y).items()}
                for S, ws in part.items():
                    out[S] = out.get(S, 0.0) + ws
        out = {S: w for S, w in out.items() if w > 0}
        memo[ctx] = out
        return out

    return law_at(())


def prefix_presence(tree: DraftTree, steps: list) -> np.ndarray:
    """P(some root-to-leaf path of the tree starts with y_1..y_m), for the children y_m of one node.

    ``steps[d]``, d = 0..m-1, describes the step from y_{1:d} to y_{d+1} (scalars, the last one may
    be a vector over the node's children):

    - ``"iid"``: ``steps[d]`` = q(y_{d+1} | y_{1:d}). With g_m = 1 and
      g_d = 1 - (1 - q(y_{d+1} | y_{1:d}) g_{d+1})^{b_{d+1}}, g_d is the chance that the subtree
      below the node y_{1:d} has a path continuing with y_{d+1:m} (each of its b_{d+1} iid children
      is y_{d+1} and then has such a path independently), and g_0 the answer; for K iid drafts,
      branching (K, 1, ..., 1), it is 1 - (1 - q_m(y))^K;
    - distinct children (``"without-replacement"``, ``"top"``): ``steps[d]`` = P(y_{d+1} among the
      b_{d+1} children of y_{1:d}) (:meth:`~mdtheory.blocks.trees.DraftTree.inclusion`, or an upper
      bound on it); children are distinct tokens, each with an independent subtree, so the node
      y_{1:m} is present with probability prod_d steps[d] (an upper bound if a step is).

    Examples
    --------
    >>> round(float(prefix_presence(DraftTree((3, 1), "iid"), [0.5, 0.4])), 12)  # 1 - (1 - 0.2)^3
    0.488
    """
    m = len(steps)
    if tree.distinct:
        out = np.ones_like(np.asarray(steps[-1], dtype=np.float64))
        for d in range(m):
            out = out * np.asarray(steps[d], dtype=np.float64)
        return np.minimum(out, 1.0)
    g = np.ones_like(np.asarray(steps[-1], dtype=np.float64))
    for d in range(m - 1, -1, -1):
        x = np.minimum(np.asarray(steps[d], dtype=np.float64) * g, 1.0)
        with np.errstate(divide="ignore"):
            g = -np.expm1(tree.branching[d] * np.log1p(-x))
    return np.clip(g, 0.0, 1.0)
