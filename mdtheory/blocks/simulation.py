"""Block efficiency of multi-draft speculative decoding with a real target and a drafter.

One *step* (one call of the target):

1. the drafter writes K drafts of L tokens from the current text: iid drafts, or K first tokens
   drawn by another tree sampling (``sampling="without-replacement"``: K distinct first tokens by
   successive sampling) and then each draft continued on its own, or any draft tree
   (:class:`mdtheory.blocks.DraftTree`, :func:`draft_tree`);
2. the target scores, in one batch, every node of the draft tree (K (L + 1) contexts at most);
3. a verifier emits the block. :func:`speculative_step` verifies token by token: at depth d the drafts
   consistent with the accepted prefix offer their d-th tokens to the selection rule, prepared for
   (p, q) at that prefix and the number of those drafts (as SpecTr and Khisti et al. do); the rule's
   output is emitted; a rejection ends the step; after L accepted tokens the target's law at the end
   of the block gives one bonus token. :func:`verifier_step` runs any sequence-level verifier of
   :mod:`mdtheory.blocks.verifiers` (block, multi-path, trie, traversal, or token by token).

Every verifier there is lossless (papers/blocks_verifiers.md), so the text follows the target whatever
the verifier. Block efficiency is the mean number of tokens emitted per target call; :func:`simulate`
measures it over independent texts and :func:`block_interval` gives an interval that does not assume
the calls of one text independent.

References
----------
Sun et al., SpecTr, NeurIPS 2023 (draft trees verified along consistent drafts); Khisti et al., ICLR
2025, §5 and Table 1 (block efficiency on Dolly with K iid drafts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _budget
from .._progress import progress
from ..audit.verifier import EXACT_TOL
from ..errors import InvalidInputError
from ..language.drafters import draw
from ..language.langmodel import as_model
from ..result import Result
from .markov import block_law_tv, random_instance, sun_toy
from .trees import DraftTree, checked_row, iid_drafts, tree_samplings
from .verifiers.base import exact_block_law, rule_runs_on
from .verifiers.token_by_token import PREPARED_RULES, TokenByToken, rule_estimate

__all__ = ["BlockResult", "speculative_step", "block_efficiency", "estimate", "block_interval",
           "draft_tree", "verifier_step", "model_estimate", "with_models", "mean_context", "simulate",
           "BATCHES", "ceiling", "drafter_equals_target", "parse_instance", "exact_rows", "exact_estimate",
           "EXACT_DRAW_SECONDS", "LAW_BLOCK_BYTES", "PREPARED_BYTES", "INSTANCE_HELP"]


@dataclass
class BlockResult(Result):
    """Tokens emitted per target call by one rule or verifier (a :class:`~mdtheory.result.Result`:
    ``status`` ``"estimate"``).

    ``counts`` holds ``replicates`` independent texts of equal length, one after the other. The calls
    along one text are correlated (neighbouring contexts are alike), so the 95% interval comes from
    the replicates' means (Student t, R - 1 degrees of freedom) when there are at least two, else from
    :data:`BATCHES` batch means of consecutive calls; ``ci95_iid``, the interval that treats every call
    as independent, is kept for comparison only. :meth:`to_dict` gives the row the command line
    prints: the block efficiency and its intervals in place of ``counts``.
    """

    rule: str
    drafts: int
    length: int
    counts: np.ndarray
    replicates: int = 1
    #: The mean over the calls' contexts of a proven bound on (or the exact) optimal E|B|, if computed.
    ceiling: float | None = None
    ceiling_kind: str | None = None

    def interval(self) -> tuple[float, float, str]:
        """(low, high, method) of the 95% interval of the block efficiency."""
        return block_interval(self.counts, self.replicates)

    status = "estimate"

    @property
    def success(self) -> bool:
        """True: the mean of the counted calls, with its interval."""
        return True

    @property
    def message(self) -> str:
        lo, hi, method = self.interval()
        return (f"estimate: E|B| = {float(self.counts.mean()):.4f} tokens per target call over "
                f"{self.counts.size} calls, 95% [{lo:.4f}, {hi:.4f}] ({method})")

    def _items(self) -> dict:
        m = self.counts.size
        mean = float(self.counts.mean())
        lo, hi, method = self.interval()
        naive = 1.96 * float(self.counts.std(ddof=1)) / np.sqrt(m) if m > 1 else float("inf")
        out = {"rule": self.rule, "drafts": self.drafts, "length": self.length,
               "block_efficiency": mean, "ci95": [lo, hi], "interval": method,
               "replicates": int(self.replicates), "ci95_iid": [mean - naive, mean + naive],
               "target_calls": int(m), "tokens": int(self.counts.sum())}
        if self.ceiling is not None:
            out[self.ceiling_kind] = float(self.ceiling)
        out.update((name, getattr(self, name)) for name in self.derived)
        return out

    def row(self) -> dict:
        """The row the command line prints (:meth:`to_dict`)."""
        return self.to_dict()


#: Batch means of one text: its calls in this many consecutive batches.
BATCHES = 10


def block_interval(counts, replicates: int = 1) -> tuple[float, float, str]:
    """95% interval of the mean of ``counts`` (``replicates`` independent texts of equal length,
    concatenated): Student t over the replicates' means, or over :data:`BATCHES` batch means of
    consecutive calls for one text; infinite where there are too few calls (under 2 replicates of one
    call each, or a single text of under 2 * BATCHES calls). Returns (low, high, method)."""
    from scipy import stats

    counts = np.asarray(counts, dtype=np.float64)
    mean = float(counts.mean())
    if replicates >= 2 and counts.size % replicates == 0:
        groups, method = counts.reshape(replicates, -1).mean(axis=1), "replicates"
    elif counts.size >= 2 * BATCHES:
        usable = counts.size - counts.size % BATCHES
        groups, method = counts[:usable].reshape(BATCHES, -1).mean(axis=1), "batch-means"
    else:
        return -float("inf"), float("inf"), "none"
    half = float(stats.t.ppf(0.975, groups.size - 1) * groups.std(ddof=1) / np.sqrt(groups.size))
    return mean - half, mean + half, method


def _laws(law, contexts: list[tuple]) -> dict:
    """law at each distinct context, in one batch."""
    unique = list(dict.fromkeys(contexts))
    rows = as_model(law).laws(unique)
    return dict(zip(unique, rows, strict=True))


def speculative_step(target, drafter, context: tuple, rule: str, K: int, L: int, rng,
                     sampling: str = "iid", rule_params: dict | None = None,
                     prepared: dict | None = None,
                     max_seconds: float = _budget.MAX_SECONDS) -> list[int]:
    """One target call of K-draft, L-token speculative decoding; returns the emitted tokens.

    ``prepared``, if given, keeps the rules prepared at each (prefix, number of drafts) for reuse by
    later calls (the laws at a prefix never change); useful where prefixes recur. ``max_seconds``
    limits each rule's estimated preparation (:func:`mdtheory.rules.make_rule`).
    """
    from .. import rules  # loaded on use: the rules import scipy, HiGHS and numba

    drafts, q = draft_tree(drafter, context, DraftTree.chains(K, L, sampling), rng)
    p = _laws(target, [context + tuple(drafts[k, :d].tolist()) for k in range(K) for d in range(L + 1)])
    emitted: list[int] = []
    alive = np.arange(K)
    for d in range(L):
        here = context + tuple(emitted)
        kind = sampling if d == 0 else "iid"
        params = dict(rule_params or {})
        if kind != "iid" and "sampling" in rules.rule_keywords(rules.RULES[rule]):
            params["sampling"] = kind  # a rule for any draft model (optimal) is told which
        key = (here, alive.size)
        if prepared is not None and key in prepared:
            r = prepared[key]
        else:
            r = rules.make_rule(rule, p[here], q[here], alive.size, normalize=True,
                                max_seconds=max_seconds, **params)
            if prepared is not None:
                prepared[key] = r
        y, accepted = r.select(drafts[alive, d], rng)
        emitted.append(y)
        alive = alive[drafts[alive, d] == y]
        if not accepted or alive.size == 0:
            return emitted
    end = context + tuple(emitted)
    emitted.append(int(draw(p[end][None, :], rng)[0]))
    return emitted


def draft_tree(drafter, context: tuple, tree, rng) -> tuple[np.ndarray, dict]:
    """One draft tree (:class:`mdtheory.blocks.DraftTree`) from ``context``: the (K, L) drafts and
    the drafter's law at every node it expanded (absolute contexts), one batch per depth
    (:meth:`mdtheory.blocks.DraftTree.sample`)."""
    q: dict = {}

    def rows(contexts):
        q.update(_laws(drafter, contexts))
        return [np.asarray(q[c], dtype=np.float64) for c in contexts]

    return tree.sample(drafter, rng, context, rows=rows), q


def verifier_step(target, drafter, context: tuple, verifier, tree, rng) -> list[int]:
    """One target call with a sequence-level verifier (:mod:`mdtheory.blocks.verifiers`): draft the
    tree, score every node with the target in one batch, emit the verifier's block."""
    drafts, q = draft_tree(drafter, context, tree, rng)
    nodes = [context + tuple(drafts[k, :d].tolist()) for k in range(tree.n) for d in range(tree.length + 1)]
    p = _laws(target, nodes)

    def at(table):
        return lambda ctx: table[context + tuple(ctx)]

    return verifier.sample(at(p), at(q), drafts, rng).tolist()


#: Seconds per token of the contexts a target call builds (the text and a draft prefix, per node:
#: tuples of Python ints, hashed as keys).
CONTEXT_TOKEN_SECONDS = 2e-8


def mean_context(tree, steps: int, replicates: int = 1, start: int = 1) -> int:
    """The mean length of the text at a target call: ``start`` tokens, then about 1 + L/2 tokens a
    call (between 1 and L + 1) over ``steps // replicates`` calls a text."""
    per = max(1, steps // max(1, replicates))
    return int(start + (per - 1) / 2 * (1 + tree.length / 2))


def model_estimate(target, drafter, tree, steps: int, replicates: int = 1, start: int = 1,
                   optimum: bool = False) -> _budget.Estimate:
    """The models' work in one target call, from their own measured calls
    (:meth:`~mdtheory.language.langmodel.LanguageModel.laws_seconds`) at the run's mean context
    length T (:func:`mean_context`): the drafter once per depth on the nodes of that depth (b_1 ...
    b_d of them), the target once on every node, and the nodes' contexts built
    (:data:`CONTEXT_TOKEN_SECONDS` per token); with ``optimum``, the bound at the call's context (its
    laws in batches of 64 nodes, :func:`mdtheory.blocks.bound.estimate` for the rest). Its seconds
    are a call's (the verifiers' estimates take them as their ``model_time``); its bytes the
    largest call's (:meth:`~mdtheory.language.langmodel.LanguageModel.laws_bytes`, at the longest
    context of the run)."""
    import math

    from .bound import estimate as bound_estimate
    from .bound import internal_nodes

    T = mean_context(tree, steps, replicates, start)
    # the text grows at most L + 1 tokens a call, and a node adds at most L draft tokens
    longest = start + (max(1, steps // max(1, replicates)) - 1) * (tree.length + 1) + tree.length
    widths = [math.prod(tree.branching[:d]) for d in range(tree.length + 1)]
    target, drafter = as_model(target), as_model(drafter)
    seconds = sum(drafter.laws_seconds(w, T + d) for d, w in enumerate(widths[:-1]))
    seconds += target.laws_seconds(sum(widths), T + tree.length // 2)
    seconds += CONTEXT_TOKEN_SECONDS * tree.n * (tree.length + 1) * (T + tree.length)
    peak = max(drafter.laws_bytes(max(widths[:-1]), longest), target.laws_bytes(sum(widths), longest))
    if optimum:
        expanded = min(256.0, internal_nodes(target.V, tree.length))
        batches = math.ceil(expanded / 64)
        seconds += batches * (target.laws_seconds(64, T + 1) + drafter.laws_seconds(64, T + 1))
        bound = bound_estimate(target.V, tree.length, 256, tree)
        seconds += bound.seconds
        peak = max(peak, bound.bytes, target.laws_bytes(64, longest), drafter.laws_bytes(64, longest))
    return _budget.Estimate(f"the models' calls at texts of about {T} tokens (measured)", seconds, peak)


def simulate(target, drafter, verifier, tree, steps: int, rng, *, replicates: int = 1,
             start: tuple = (), quiet: bool = True, ceiling=None, ceiling_kind: str | None = None
             ) -> BlockResult:
    """``steps`` target calls with ``verifier`` on ``tree`` (K iid drafts: ``iid_drafts(K, L)``), in
    ``replicates`` independent texts from ``start`` of ``steps // replicates`` calls each.

    ``ceiling(context) -> float``, if given, is evaluated at every call's context (a proven bound on,
    or the exact value of, the optimal E|B| there) and its mean kept beside the result.
    """
    _check_sizes(tree.n, tree.length, steps)
    if isinstance(replicates, bool) or not isinstance(replicates, (int, np.integer)) or not \
            1 <= replicates <= steps:
        raise InvalidInputError(
            f"--replicates must be an integer in 1 .. steps = {steps}, got {replicates!r}")
    per = steps // replicates
    counts = np.zeros(per * replicates, dtype=np.int64)
    ceilings = []
    streams = rng.spawn(replicates)
    text = tuple(start)
    for j in progress(range(per * replicates), per * replicates, verifier.label, quiet):
        r, i = divmod(j, per)
        if i == 0:  # a fresh, independent text
            text = tuple(start)
        if ceiling is not None:
            ceilings.append(float(ceiling(text)))
        out = verifier_step(target, drafter, text, verifier, tree, streams[r])
        counts[j] = len(out)
        text = text + tuple(out)
    return BlockResult(verifier.label, tree.n, tree.length, counts, replicates,
                       float(np.mean(ceilings)) if ceilings else None, ceiling_kind)


def drafter_equals_target(target, drafter) -> bool:
    """Whether the drafter is the target itself (the same LSTM at the same temperature and
    truncation): then every single draft is accepted and block efficiencies say nothing."""
    from ..language.drafters import LSTMLaw

    if drafter is target:
        return True
    same = isinstance(drafter, LSTMLaw) and isinstance(target, LSTMLaw) and drafter.model is target.model
    return same and (drafter.temperature, drafter.top_k, drafter.top_p) == (
        target.temperature, target.top_k, target.top_p)


def ceiling(target, drafter, tree, *, max_seconds: float = _budget.MAX_SECONDS,
            max_bytes: float = _budget.MAX_BYTES):
    """``(function(context) -> float, kind)``: the ceiling of E|B| for the draft tree (K iid
    drafts: ``iid_drafts(K, L)``) at a context of the text: a proven upper bound on the optimum
    (:func:`mdtheory.blocks.bound.block_efficiency_bound`, each within ``max_seconds`` and
    ``max_bytes``)."""
    from .bound import block_efficiency_bound as bound

    limits = {"max_seconds": max_seconds, "max_bytes": max_bytes}
    if tree.is_iid_drafts:
        return (lambda context: bound(target, drafter, tree.n, tree.length, context=tuple(context),
                                      **limits).value, "optimum_bound")
    return (lambda context: bound(target, drafter, tree=tree, context=tuple(context), **limits).value,
            "optimum_bound")


#: Small exact instances of ``exact_rows``: Sun et al.'s toy, or ``random:V:SEED``.
INSTANCE_HELP = "toy (Sun et al.: V = 2, p = (1/3, 2/3), q = (2/3, 1/3)) or random:V:SEED"


def parse_instance(text: str):
    """``(target, draft)`` of a small exact instance named as :data:`INSTANCE_HELP` says."""
    if text == "toy":
        return sun_toy()
    parts = str(text).split(":")
    try:
        if len(parts) != 3 or parts[0] != "random":
            raise ValueError
        V, seed = int(parts[1]), int(parts[2])
    except ValueError:
        raise InvalidInputError(f"--instance must be {INSTANCE_HELP}; got {text!r}") from None
    if not 2 <= V <= 8:
        raise InvalidInputError(f"--instance random:V:SEED needs 2 <= V <= 8 for exact enumeration, got {V}")
    return random_instance(V, seed)


#: Seconds of one draw of the drafts in an exact block law besides the verifier's own work (the
#: laws read and checked at the draw's nodes, the block law's branches summed): 80 to 300 us a draw
#: measured on the instances of ``parse_instance`` (V = 2 .. 8, K = 1 .. 7, L = 1 .. 14),
#: ``benchmarks/bench_exact_rows.py``.
EXACT_DRAW_SECONDS = 2e-4
#: Bytes per block of an exact block law held (a tuple key of small ints, a float, the dict's slot).
LAW_BLOCK_BYTES = 200.0
#: Bytes per (context, number of drafts) a verifier keeps across draws: the token verifier's prepared
#: rules (at most :data:`~mdtheory.blocks.verifiers.token_by_token.PREPARED_RULES`; 5 KB each
#: measured with the optimal rule at V = 4), the laws' rows.
PREPARED_BYTES = 8e3
# the validity TV: seconds per block of the law and per sequence of V^(L+1) (a target row read at a
# context, a block's mass placed)
_TV_CELL_SECONDS = 5e-6


def exact_estimate(verifiers, V: int, tree, optimum: bool = False) -> _budget.Estimate:
    """Seconds and bytes of :func:`exact_rows` from sizes alone: for each verifier its own
    :meth:`~mdtheory.blocks.verifiers.base.BlockVerifier.estimate` with one step per draw of its draft
    model (:meth:`~mdtheory.blocks.trees.DraftTree.count_draws`; the token verifier's own work, its
    rules' preparation, once per context and number of drafts where they all stay prepared), the models
    :data:`EXACT_DRAW_SECONDS` a draw, holding the block law (up to V + V^2 + ... + V^(L+1) blocks,
    :data:`LAW_BLOCK_BYTES` each) and what it keeps per context and number of drafts
    (:data:`PREPARED_BYTES`), then the validity TV (the target's rows at every context of up
    to L tokens, the law's blocks placed, (L + 4) float rows over the V^(L+1) sequences); with
    ``optimum``, the optimum's (:func:`mdtheory.blocks.optimum.estimate` or
    :func:`~mdtheory.blocks.optimum.tree_estimate`)."""
    from .optimum import estimate as optimum_estimate
    from .optimum import tree_estimate

    n, L = tree.n, tree.length
    cells = float(L + 1) if V == 1 else _budget.capped_power(V, L + 1)
    blocks = float(L + 1) if V == 1 else (_budget.capped_power(V, L + 2) - V) / (V - 1)
    tv = _budget.Estimate("validity TV", (blocks + cells) * _TV_CELL_SECONDS, 8.0 * (L + 4) * cells)
    prepared = blocks / V * n  # blocks / V: the contexts of up to L tokens
    kept = PREPARED_BYTES * min(prepared, PREPARED_RULES) + LAW_BLOCK_BYTES * blocks
    parts, draws = [], 0
    for v in verifiers:
        model = v.draft_model(n, L)
        count = model.count_draws(V)
        draws = max(draws, count)
        est = v.estimate(V, model, count, EXACT_DRAW_SECONDS)
        if isinstance(v, TokenByToken) and count > prepared <= PREPARED_RULES:  # each rule prepared once
            own = v.estimate(V, model, 1, 0.0).seconds
            est = est._replace(seconds=est.seconds - (count - prepared) * own)
        parts += [est._replace(bytes=max(est.bytes, kept)), tv]
    what = (f"exact block efficiency of {len(verifiers)} verifier{'s' * (len(verifiers) != 1)} over "
            f"{draws:.3g} draws of K = {n} drafts of L = {L} tokens, V = {V}")
    if optimum:
        best = optimum_estimate(V, n, L) if tree.is_iid_drafts else tree_estimate(V, tree)
        parts.append(best)
        what += f", and {best.what}"
    return _budget.combine(*parts, what=what)


def exact_rows(target, draft, verifiers, tree, optimum: bool = False, *,
               max_seconds: float | None = _budget.MAX_SECONDS,
               max_bytes: float | None = _budget.MAX_BYTES) -> list[dict]:
    """Exact E|B| of each verifier on a small instance, by enumerating every draw of the drafts
    (``tree``: the draft model), each checked lossless; with ``optimum``, the exact optimum of that
    draft model (:func:`mdtheory.blocks.optimum.optimal_block_efficiency`, K iid drafts or the tree)
    beside them. Refused before any work over :data:`mdtheory.blocks.trees.MAX_TREE_DRAWS` draws or
    when :func:`exact_estimate` is over ``max_seconds`` or ``max_bytes`` (None: no limit).

    Raises
    ------
    ProblemTooLargeError
        The draws or the estimate over a limit (the message states it).
    InvalidInputError
        A bad limit, or a verifier whose tree is not ``tree``.
    """
    from .optimum import optimal_block_efficiency

    max_seconds, max_bytes = _budget.limits(max_seconds, max_bytes)
    V = checked_row(draft, (), "draft").size
    for v in verifiers:
        v.draft_model(tree.n, tree.length).check_draws(V)
    _budget.require(exact_estimate(verifiers, V, tree, optimum), max_seconds, max_bytes=max_bytes)
    rows = []
    best = None
    limits = {"max_seconds": max_seconds, "max_bytes": max_bytes}
    if optimum:
        if tree.is_iid_drafts:
            best = float(optimal_block_efficiency(target, draft, tree.n, tree.length, **limits).value)
        else:
            best = float(optimal_block_efficiency(target, draft, tree=tree, **limits).value)
    for verifier in verifiers:
        law = exact_block_law(verifier, target, draft, tree.n, tree.length)
        efficiency = float(sum(len(b) * w for b, w in law.items()))
        tv = float(block_law_tv(law, target, tree.length))
        row = {"rule": verifier.label, "drafts": tree.n, "length": tree.length,
               "block_efficiency": efficiency, "exact": True, "validity_tv": tv}
        if best is not None:
            row["optimum"] = best
        row.update(status="exact", success=tv <= EXACT_TOL,  # the rows' JSON has every result's shape
                   message=f"exact: E|B| = {efficiency:.6g}, validity TV {tv:.1e}")
        rows.append(row)
    return rows


def _check_sizes(K, L, steps) -> None:
    for name, value in (("drafts", K), ("length", L), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidInputError(f"--{name} must be an integer >= 1, got {value!r}")


def _check_rule(rule: str, sampling: str) -> None:
    if sampling not in tree_samplings():
        raise InvalidInputError(f"unknown sampling {sampling!r}; valid choices: "
                                f"{', '.join(tree_samplings())}")
    if not rule_runs_on(rule, sampling):
        from .. import rules

        raise InvalidInputError(f"rule {rule!r} expects {rules.RULES[rule].sampling} drafts, not {sampling}")


def with_models(est: _budget.Estimate, models: _budget.Estimate) -> _budget.Estimate:
    """A verifier's estimate that already counts the models' time a call, with the memory of the
    models' largest call (:func:`model_estimate`)."""
    return est._replace(bytes=max(est.bytes, models.bytes))


def estimate(rule: str, V: int, K: int, L: int, steps: int,
             model_time: float | None = None) -> _budget.Estimate:
    """``steps`` target calls with ``rule`` on K drafts of L tokens, the models taking
    ``model_time`` seconds a call (:func:`model_estimate`; None: a guess from the sizes)
    (:func:`mdtheory.blocks.verifiers.token_by_token.rule_estimate`)."""
    return rule_estimate(rule, V, K, L, steps, model_time)


def block_efficiency(target, drafter, rule: str, K: int, L: int, steps: int, rng,
                     sampling: str = "iid", start: tuple = (), quiet: bool = True,
                     rule_params: dict | None = None,
                     max_seconds: float = _budget.MAX_SECONDS) -> BlockResult:
    """Run ``steps`` target calls of speculative decoding from ``start`` and count tokens per call;
    refused first if :func:`estimate` (from the sizes, then with the models' measured calls,
    :func:`model_estimate`) is over ``max_seconds`` or the memory limit."""
    _check_sizes(K, L, steps)
    _check_rule(rule, sampling)
    _budget.require(estimate(rule, target.V, K, L, steps), max_seconds)  # the sizes, then the models
    models = model_estimate(target, drafter, iid_drafts(K, L), steps, start=max(len(start), 1))
    _budget.require(with_models(estimate(rule, target.V, K, L, steps, models.seconds), models),
                    max_seconds)
    text = tuple(start)
    counts = np.zeros(steps, dtype=np.int64)
    for i in progress(range(steps), steps, rule, quiet):
        out = speculative_step(target, drafter, text, rule, K, L, rng, sampling, rule_params,
                               max_seconds=max_seconds)
        counts[i] = len(out)
        text = text + tuple(out)
    return BlockResult(rule, K, L, counts)
