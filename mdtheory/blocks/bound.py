"""A proven upper bound on the optimal block efficiency at any vocabulary size, from a partial prefix tree.

K iid drafts of L tokens; G_m(y) = P(k >= m, b_{1:m} = y) for a valid verifier, y in V^m. Three facts
(proved in papers/blocks.md, "Upper bounds"):

1. *Nesting*: validity forces P(k >= m - 1, b_{1:m} = uv) = p(v | u) G_{m-1}(u), so
   G_m(uv) <= p(v | u) G_{m-1}(u).
2. *Coverage*: b_{1:m} is the m-prefix of a draft, so sum_{y in S} G_m(y) <= 1 - (1 - q_m(S))^K for
   every S in V^m; for S = V^m minus T this is P(k >= m) <= 1 + p_m(T) - q_m(T)^K (the sequence-level
   alpha*_m bound once minimised over T).
3. P(k >= m) is non-increasing in m, and E|B| = 1 + sum_m P(k >= m).

The *nested bound* runs the recursion Ĝ_0 = 1, Ĝ_m(uv) = min(p(v | u) Ĝ_{m-1}(u), 1 - (1 - q_m(uv))^K)
(so G_m <= Ĝ_m pointwise, by 1 and 2 with singletons) down a prefix tree grown best-first from the
root (largest Ĝ (L - depth) first, the laws of each batch of nodes fetched in one call per model). An
unexpanded node z of depth j bounds all its descendants at every depth m > j by Ĝ_j(z). The
*prefix-set bound* beta_m minimises 1 + p_m(T) - q_m(T)^K over unions T of the tree's cells at depth m
(explored m-prefixes, and the m-prefixes under each unexpanded shallower node, with that node's p and
q), exactly, by one sort by q/p. The result is 1 + sum_m min_{j <= m} min(g_j, beta_j), g_m the nested
bound's mass at depth m. Every value is a valid bound whatever the tree; a complete tree gives the
alpha*_m bound exactly and, at K = 1, the optimum itself (block verification attains it; proof in
papers/blocks.md).

A draft tree (branching factors per depth; iid, without-replacement or top children) replaces the
cap 1 - (1 - q_m(y))^K by P(some path of the tree starts with y) (:mod:`mdtheory.blocks.prefixsets`)
and K by the draws whose coverage bounds the tree's in the prefix-set bound
(:meth:`~mdtheory.blocks.trees.DraftTree.prefix_draws`: b_1 ... b_m for iid trees, one for a single
path drawn from q; left out otherwise). A tree of top children is one fixed set of paths: its caps are
0 or 1, so the nested bound of the complete tree is 1 + the sum of p over its nodes, the optimum
(papers/blocks.md §10).
"""

from __future__ import annotations

import heapq
import math
import operator
import time
from dataclasses import dataclass, field

import numpy as np

from .. import _budget
from .._validate import as_drafts
from ..audit.watchdog import CALLS
from ..errors import InvalidDistributionError, InvalidInputError, MdtheoryError
from ..result import Result
from .markov import Law, _check_length, batched, is_complex, real_array, row_tolerance
from .prefixsets import prefix_presence
from .trees import DraftTree, draft_shape

__all__ = ["BlockBoundResult", "block_efficiency_bound", "coarse_alpha_bound", "estimate", "internal_nodes"]



@dataclass
class BlockBoundResult(Result):
    """A proven upper bound on the optimal block efficiency of K iid drafts of L tokens (or of a tree).

    Attributes
    ----------
    value : float
        The bound on E|B|: ``1 + acceptance.sum()``.
    acceptance : ndarray, (L,)
        Proven bounds on P(k >= m), m = 1..L: running minima of ``min(nested, prefix_set)``.
    nested : ndarray, (L,)
        g_m: the nested recursion's mass at depth m (module docstring).
    prefix_set : ndarray, (L,)
        beta_m: the best min(1, 1 + p_m(T) - q_m(T)^K) over unions T of the tree's cells at depth m.
    cells : ndarray of int, (L,)
        Cells of the partition of V^m, m = 1..L.
    expansions : int
        Nodes whose next-token laws were fetched (target and draft).
    complete : bool
        Whether every node of depth < L was expanded: then ``prefix_set`` holds the sequence-level
        alpha*_m themselves.
    drafts, length, V : int
    tree : DraftTree or None
        The draft tree, or None for K iid drafts.
    presence_exact : bool
        Whether the caps P(some path starts with y) were exact; False where, without replacement,
        an inclusion probability was replaced by its upper bound
        (:func:`~mdtheory.blocks.prefixsets.wor_inclusion`; the bound stays valid).
    status : str
        ``"upper-bound"``.
    timings : dict
        Seconds: ``laws`` (the models' calls), ``total``.
    """

    value: float
    acceptance: np.ndarray
    nested: np.ndarray
    prefix_set: np.ndarray
    cells: np.ndarray
    expansions: int
    complete: bool
    drafts: int
    length: int
    V: int
    tree: DraftTree | None = None
    presence_exact: bool = True
    status: str = "upper-bound"
    timings: dict = field(default_factory=dict)

    @property
    def success(self) -> bool:
        """True: the value is always a proven upper bound."""
        return True

    @property
    def message(self) -> str:
        how = "the complete prefix tree" if self.complete else (
            f"a prefix tree of {self.expansions} expanded nodes")
        return f"upper-bound: E|B| <= {self.value:.12g} from {how}"

    def _items(self) -> dict:
        out = super()._items()
        out["tree"] = None if self.tree is None else self.tree.to_dict()
        return out

    def __float__(self) -> float:
        return float(self.value)


def coarse_alpha_bound(p: np.ndarray, q: np.ndarray, n: int) -> tuple[float, int]:
    """min(1, min_T [1 + p(T) - q(T)^n]) over unions T of cells with masses ``p``, ``q``, and the
    number of cells of a minimising T: the cells sorted by q/p decreasing (p = 0 first), one cumulative
    sum (an optimal T of iid drafts is such a prefix, see papers/theory.md).

    Examples
    --------
    >>> value, cells = coarse_alpha_bound(np.array([0.7, 0.3]), np.array([0.4, 0.6]), 1)
    >>> round(value, 12), cells
    (0.7, 1)
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(p > 0, q / p, np.where(q > 0, np.inf, 0.0))
    order = np.argsort(-ratio, kind="stable")
    # the cells partition the sequences, so q(T) = 1 - q(T^c): the complement's mass keeps the
    # distance from one that cumsum(q) would lose (cumsum(q)^n drifts by n ulps and overflows for
    # huge n), and the whole set has gain 0 exactly
    qc = np.minimum(np.cumsum(q[order][::-1])[::-1][1:], 1.0)
    pc = np.cumsum(p[order][::-1])[::-1][1:]
    with np.errstate(divide="ignore"):  # q(T) = 0: log1p(-1) = -inf, and (1 - 1)^n = 0
        gain = np.append(pc + np.expm1(n * np.log1p(-qc)), 0.0)
    j = int(np.argmax(gain))
    if gain[j] <= 0:
        return 1.0, 0
    return float(1.0 - gain[j]), j + 1


def _rows(fn, contexts: list[tuple], V: int | None, name: str, keep: bool = False):
    """The rows ``fn(contexts)`` checked, float64 rescaled to sum one; with ``keep``, also the rows
    as the law returned them (exact fractions stay exact). The call is watched
    (:meth:`~mdtheory.audit.watchdog.Watchdog.call_law`)."""
    where = f"{contexts[0]}" + (f" and {len(contexts) - 1} more" if len(contexts) > 1 else "")
    try:
        raw = CALLS.call_law(name, where, fn, contexts)
    except MdtheoryError:
        raise
    except Exception as exc:  # noqa: BLE001 -- a user's callable may raise anything
        raise InvalidInputError(f"the {name} law raised {type(exc).__name__} at one of the contexts "
                                f"{contexts[:3]}{' ...' if len(contexts) > 3 else ''}: {exc}") from None
    tol = row_tolerance(raw)
    rows = real_array(raw)
    if rows is None:
        what = "complex values" if is_complex(raw) else f"{type(raw).__name__}, not real numbers"
        raise InvalidDistributionError(f"the {name} law returned {what} at one of the contexts "
                                       f"{contexts[:3]}{' ...' if len(contexts) > 3 else ''}")
    if rows.ndim != 2 or rows.shape[0] != len(contexts) or (V is not None and rows.shape[1] != V):
        raise InvalidInputError(f"the {name} law returned shape {rows.shape} for {len(contexts)} contexts")
    if not np.all(np.isfinite(rows)) or np.any(rows < 0) or np.any(np.abs(rows.sum(axis=1) - 1) > tol):
        raise InvalidDistributionError(f"the {name} law returned a row that is not a probability vector")
    out = rows / rows.sum(axis=1, keepdims=True)
    return (out, raw if np.asarray(raw).dtype == object else out) if keep else out


#: Per-unit costs of the bound besides the models' own calls, CPU seconds measured on a 2-core x86
#: machine over V in {2 .. 32,000}, L in {1 .. 10^6}, 16 to 1024 expansions, K iid drafts and trees
#: (``python benchmarks/bench_blocks.py bound-estimate``; papers/blocks.md, "The bound's cost"): per
#: expansion (a heap pop, the prefix walk, the node's row), per child node (its entries in the
#: lists), per child pushed on the heap (children of depth < L), per (depth, step) of a tree's
#: presence products, per depth of the per-depth sums and per (depth, node) pass of them, and per
#: depth of the (L,) arrays.
_EXPANSION_SECONDS = 2e-5
_NODE_SECONDS = 4e-7
_PUSH_SECONDS = 6e-7
_TREE_STEP_SECONDS = 1e-8
_DEPTH_SECONDS = 2e-5
_CELL_SECONDS = 1e-8
_LENGTH_SECONDS = 2.5e-8
#: bytes per tree node (eight Python lists and their numpy copies), per depth (the (L,) arrays), and
#: a fixed working set (the laws' rows and caches)
_NODE_BYTES = 400.0
_LENGTH_BYTES = 48.0
_BASE_BYTES = 1e6


def internal_nodes(V: int, length: int) -> float:
    """1 + V + ... + V^(L - 1): the prefixes of fewer than L tokens, the nodes the bound may expand
    (a float; infinite past 1e300)."""
    if V <= 1:
        return float(length)
    log = length * math.log(V)
    return math.inf if log > 690 else math.expm1(log) / (V - 1)


def estimate(V: int, length: int, expansions: int, tree: DraftTree | None = None,
             batch: int = 64) -> _budget.Estimate:
    """Seconds and bytes of :func:`block_efficiency_bound` besides the models' calls.

    At most E = min(``expansions``, :func:`internal_nodes`) nodes are expanded (only prefixes of
    fewer than L tokens are), each adding V children, so the tree has at most 1 + E V nodes; the
    children of depth under L are pushed on the heap. The nodes are expanded in batches of
    ``batch``, and a node's children are expanded in a later batch than the node, so the tree is at
    most ceil(E / batch) deep: the per-depth sums pass over it once per depth up to its deepest
    node plus one (every depth of a given ``tree``)."""
    internal = internal_nodes(V, length)
    E = min(float(expansions), internal)
    nodes = 1.0 + E * V
    pushed = min(E * V, internal - 1.0)
    depths = float(length) if tree is not None else min(float(length), math.ceil(E / batch) + 1.0)
    steps = E * min(depths, E) * V if tree is not None else 0.0
    seconds = (E * _EXPANSION_SECONDS + nodes * _NODE_SECONDS + pushed * _PUSH_SECONDS
               + steps * _TREE_STEP_SECONDS + depths * (_DEPTH_SECONDS + _CELL_SECONDS * nodes)
               + _LENGTH_SECONDS * float(length))
    return _budget.Estimate(
        f"the block-efficiency bound (V = {V}, L = {length}, {E:.3g} expansions: up to "
        f"{nodes:.3g} tree nodes, {depths:.3g} depths summed)", seconds,
        _BASE_BYTES + _NODE_BYTES * nodes + _LENGTH_BYTES * float(length),
        "fewer expansions or a shorter length")


def block_efficiency_bound(target: Law, draft: Law, n: int | None = None, length: int | None = None, *,
                           tree: DraftTree | None = None, context: tuple = (),
                           expansions: int = 256, batch: int = 64,
                           max_seconds: float = _budget.MAX_SECONDS,
                           max_bytes: float = _budget.MAX_BYTES) -> BlockBoundResult:
    """A proven upper bound on the optimal E|B| of ``n`` iid drafts of ``length`` tokens (or of a draft
    tree) after ``context``.

    Parameters
    ----------
    target, draft : callable
        Next-token laws ``law(context) -> (V,)``, or the package's batched LM laws
        (:class:`mdtheory.language.drafters.LSTMLaw`,
        :class:`~mdtheory.language.drafters.NGramLaw`), or any object with
        a ``batch(contexts) -> (B, V)`` method.
    n, length : int
        K and L (optional with ``tree``; if given they must be the tree's).
    tree : DraftTree, optional
        Draw the drafts as this tree (iid, without-replacement or top children, branching factors
        per depth; :class:`~mdtheory.blocks.trees.DraftTree`). The nested recursion's cap
        1 - (1 - q_m(y))^K becomes P(some path of the tree starts with y)
        (:func:`~mdtheory.blocks.prefixsets.prefix_presence`); the prefix-set bound uses
        b_1 ... b_m iid nodes at depth m for iid trees and is left out (1) for trees without
        replacement at depths with more than one node and for top children (papers/blocks.md,
        "Draft trees in the bound").
        Default: K iid drafts, the tree (K, 1, ..., 1).
    context : tuple of int
        The text before the block (the root of the prefix tree).
    expansions : int
        At most this many tree nodes get their laws fetched (each costs one target and one draft
        row); the bound is valid for any number, tighter with more.
    batch : int
        Nodes fetched per model call.
    max_seconds, max_bytes : float or None
        Refuse, after the root's laws give V and before the tree is grown, a bound whose estimate
        (:func:`estimate`) exceeds these (None or infinity: no limit); a call of a law that does
        not return within ``max_seconds`` is interrupted (:mod:`mdtheory.audit.watchdog`).

    Returns
    -------
    BlockBoundResult

    Raises
    ------
    ProblemTooLargeError
        The estimate is over a limit.
    VerifierTimeoutError
        A law's call did not return within ``max_seconds``.
    InvalidInputError, InvalidDistributionError
        A bad size, limit or context, a law that is not callable or raises, or a row that is not a
        probability vector of real numbers (the sum judged by the precision of the law's dtype).

    Examples
    --------
    Sun et al.'s toy with one draft of two tokens: the optimum 20/9 exactly (the alpha*_m bound alone
    gives 21/9).

    >>> from mdtheory.blocks.markov import sun_toy
    >>> res = block_efficiency_bound(*sun_toy(), n=1, length=2)
    >>> round(res.value * 9, 9), round(float(1 + res.prefix_set.sum()) * 9, 9), res.complete
    (20.0, 21.0, True)
    """
    t0 = time.perf_counter()
    n, length = draft_shape(n, length, tree)
    n, length = as_drafts(n), _check_length(length)
    expansions = _check_length(expansions, "expansions")
    batch = _check_length(batch, "batch")
    max_seconds, max_bytes = _budget.limits(max_seconds, max_bytes)
    try:
        context = tuple(operator.index(c) for c in context)
    except TypeError:
        raise InvalidInputError(f"context must be a sequence of integer tokens, got {context!r}") from None
    for name, law in (("target", target), ("draft", draft)):
        if not callable(law) and not hasattr(law, "batch"):
            raise InvalidInputError(
                f"{name} must be a callable law(context) -> (V,), got {type(law).__name__}")
    with CALLS.armed(max_seconds, "the block-efficiency bound"):
        return _grow(batched(target), batched(draft), n, length, tree, context, expansions, batch,
                     max_seconds, max_bytes, t0)


def _grow(pt, qd, n: int, length: int, tree: DraftTree | None, context: tuple, expansions: int,
          batch: int, max_seconds: float, max_bytes: float, t0: float) -> BlockBoundResult:
    """The bound's prefix tree grown best-first and its per-depth sums (module docstring)."""
    spent = 0.0

    # the tree: parent, token, depth, p_m, q_m, the step into the node (q(v | u) for iid trees, v's
    # inclusion among its siblings without replacement) and the nested bound G of every node; node 0
    # the root
    parent, token, depth = [-1], [-1], [0]
    pm, qm, G, step = [1.0], [1.0], [1.0], [1.0]
    exact = True
    expanded = [False]
    heap = [(-float(length), 0)]
    done, V = 0, None

    def prefix(i: int) -> tuple:
        out = []
        while i > 0:
            out.append(token[i])
            i = parent[i]
        return tuple(reversed(out))

    while heap and done < expansions:
        take = []
        while heap and len(take) < min(batch, expansions - done):
            take.append(heapq.heappop(heap)[1])
        ctx = [context + prefix(i) for i in take]
        s = time.perf_counter()
        P = _rows(pt, ctx, V, "target")
        if V is None:
            V = P.shape[1]
            _budget.require(estimate(V, length, expansions, tree, batch), max_seconds, max_bytes=max_bytes)
        Q, raw = _rows(qd, ctx, V, "draft", keep=True)
        # deterministic children are chosen in the law's own arithmetic (exact fractions exactly)
        Qraw = raw if tree is not None and tree.deterministic else Q
        spent += time.perf_counter() - s
        for i, prow, qrow, qnode in zip(take, P, Q, Qraw, strict=True):
            expanded[i] = True
            v = np.nonzero((prow > 0) | (qrow > 0))[0]
            cp, cq = pm[i] * prow[v], qm[i] * qrow[v]
            d = depth[i] + 1
            if tree is None:    # K iid drafts: 1 - (1 - q_m)^K
                cs = qrow[v]
                with np.errstate(divide="ignore"):
                    cover = -np.expm1(n * np.log1p(-np.minimum(cq, 1.0)))
            else:
                if tree.distinct:
                    incl, is_exact = tree.inclusion(qnode, tree.branching[d - 1])
                    exact = exact and is_exact
                    cs = incl[v]
                else:
                    cs = qrow[v]
                chain, j = [], i
                while j > 0:
                    chain.append(step[j])
                    j = parent[j]
                cover = prefix_presence(tree, chain[::-1] + [cs])
            cg = np.minimum(G[i] * prow[v], cover)
            first = len(parent)
            parent.extend([i] * v.size)
            token.extend(v.tolist())
            depth.extend([d] * v.size)
            pm.extend(cp.tolist())
            qm.extend(cq.tolist())
            G.extend(cg.tolist())
            step.extend(np.asarray(cs, dtype=np.float64).tolist())
            expanded.extend([False] * v.size)
            if d < length:
                for j, g in enumerate(cg.tolist()):
                    if g > 0 or cp[j] + cq[j] > 0:
                        heapq.heappush(heap, (-(g * (length - d)) - 1e-3 * (cp[j] + cq[j]), first + j))
        done += len(take)

    depth_a, G_a = np.array(depth), np.array(G)
    pm_a, qm_a, exp_a = np.array(pm), np.array(qm), np.array(expanded)
    nested, beta = np.ones(length), np.ones(length)
    cells = np.zeros(length, dtype=np.int64)
    # past the tree's deepest node D every depth m > D has the same cells (the unexpanded nodes) and,
    # for K iid drafts, the same number of drafts: depths D + 2 .. L repeat depth D + 1
    top = length if tree is not None else min(length, int(depth_a.max()) + 1)
    for m in range(1, top + 1):
        cell = (depth_a == m) | ((depth_a < m) & ~exp_a)
        nested[m - 1] = min(1.0, float(G_a[cell].sum()))
        # the draws whose coverage bounds the tree's at depth m (K iid drafts: K), or none
        draws = n if tree is None else tree.prefix_draws(m)
        if draws is not None:
            beta[m - 1] = coarse_alpha_bound(pm_a[cell], qm_a[cell], draws)[0]
        cells[m - 1] = int(cell.sum())
    nested[top:], beta[top:], cells[top:] = nested[top - 1], beta[top - 1], cells[top - 1]
    acceptance = np.minimum.accumulate(np.minimum(nested, beta))
    return BlockBoundResult(
        value=float(1.0 + acceptance.sum()), acceptance=acceptance, nested=nested, prefix_set=beta,
        cells=cells, expansions=done, complete=not heap, drafts=n, length=length, V=int(V or 0),
        tree=tree, presence_exact=exact,
        timings={"laws": spent, "total": time.perf_counter() - t0})
