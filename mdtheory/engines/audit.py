"""Audit a verifier in an engine's contract: is "emitted tokens, then fresh target tokens" the target's law?

:func:`audit_chain` and :func:`audit_tree` take a verifier in the chain or tree contract
(:mod:`mdtheory.engines.contracts`: plain torch tensors, FlashInfer's and SGLang's layouts) and test it
exactly as :func:`mdtheory.blocks.audit.audit_block` tests a block verifier, with the same statistics,
verdicts and result fields (papers/blocks.md, and papers/engines.md for what it finds in engine-style
verifiers):

1. The audit draws B draft trees at a time (:meth:`mdtheory.blocks.trees.DraftTree.sample_batch`:
   children iid or without replacement from the draft's law at their parent; with
   ``deterministic=True`` each node's children are the draft's most likely tokens there, distinct,
   and no draft probabilities are passed), lays them out in the contract (nodes numbered breadth
   first, :func:`~mdtheory.engines.contracts.tree_layout`) with the target's law at every node (and
   the draft's, which drew the node's children), and calls ``f`` once on the whole batch
   (B = ``batch`` problems, 16,384 by default, so 10^5 to 10^6 samples take seconds).
2. Every output row is checked against the contract
   (:func:`~mdtheory.engines.contracts.chain_output_faults`,
   :func:`~mdtheory.engines.contracts.tree_output_faults`): tokens on an accepted path, then one token,
   then -1. A row that breaks it (a token off the accepted path, padding in the middle, a wrong length,
   dtype or shape, or a call that raised) is a failure of the verifier: the verdict is ``"invalid"``
   and the first bad rows are kept with their drafts, never a crash. The rows of a call are counted
   as independent samples, as the contracts require (:mod:`~mdtheory.engines.contracts`: each
   row's randomness its own): a verifier that shares its uniforms between rows is rejected even
   where each row's law is exact.
3. Each good row's tokens are completed with fresh target tokens to length L + 1 and the completed
   sequences are tested against the target's law on :math:`V^{L+1}` (Pearson's test with sparse cells
   pooled, the power bound and sample-size rule of :mod:`mdtheory.audit.statistics`): ``"lossy"``,
   ``"passed"`` or ``"inconclusive"`` as :func:`~mdtheory.blocks.audit.audit_block` decides.

The result also reports the verifier's block efficiency :math:`E|B|` (sampled mean with a 95%
interval) and, where the instance is small enough, the optimum for the same drafts
(:func:`mdtheory.blocks.optimum.optimal_block_efficiency` of the same draft tree); a mean
significantly above it is impossible for a lossless verifier.

A verifier that never returns is interrupted by the audits' watchdog
(:mod:`mdtheory.audit.watchdog`, :class:`~mdtheory.errors.VerifierTimeoutError`); the run's time and
memory are estimated before it starts (``max_seconds``, ``max_bytes``), and its pace checked after
the first call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import _budget
from ..audit.statistics import DEFAULT_LEVEL, MAX_SAMPLES, TARGET_TV, samples_for
from ..audit.verifier import _USER_ERRORS, _describe, _one_line
from ..audit.watchdog import CALLS
from ..blocks.audit import (
    MAX_CELLS,
    SHOW_VIOLATIONS,
    BlockAuditResult,
    _bound,
    _context,
    _Law,
    _summary,
    _tables,
)
from ..blocks.trees import DraftTree, tree_samplings
from ..errors import InvalidInputError, MdtheoryError, ProblemTooLargeError
from ..models.top import Top
from ..torch_bridge.tensors import _torch, check_device
from .contracts import (
    chain_output_faults,
    check_chain_inputs,
    check_tree_inputs,
    tree_candidates,
    tree_layout,
    tree_output_faults,
)

__all__ = ["audit_chain", "audit_tree", "EngineAuditResult", "BATCH", "OPTIMUM_SECONDS"]

#: Problems per verifier call by default.
BATCH = 16_384
#: The optimum for the same drafts is solved when its estimate is within this (and ``max_seconds``).
OPTIMUM_SECONDS = 10.0
#: Seconds per (problem, node) of the audit's own work (drawing, layout, checks, completion),
#: measured at V = 3 on the project's 2-core machine; the verifier's own time is judged after its
#: first call.
_NODE_SECONDS = 2e-6


@dataclass
class EngineAuditResult(BlockAuditResult):
    """What :func:`audit_chain` and :func:`audit_tree` found: a
    :class:`~mdtheory.blocks.audit.BlockAuditResult` (same fields, verdicts and statistics) with the
    contract's.

    Attributes
    ----------
    contract : {"chain", "tree"}
    deterministic : bool
        Children were the draft's top tokens, no draft probabilities passed.
    batch : int
        Problems per verifier call.
    calls : int
        Verifier calls made.
    dtype, device : str
        Of the laws passed to the verifier.
    optimum : float or None
        The largest E|B| of any lossless verifier of the same drafts
        (:func:`~mdtheory.blocks.optimum.optimal_block_efficiency`); None where not computed.
    optimum_note : str
        Why the optimum is missing ("" when it is there).
    violation_examples : list of dict
        Up to :data:`~mdtheory.blocks.audit.SHOW_VIOLATIONS` bad rows: ``sample`` (its index in the
        run), ``drafts`` (K, L), ``output`` (the row; the chain's with ``emitted_draft_token_num``)
        and ``reason``.
    """

    contract: str = "chain"
    deterministic: bool = False
    batch: int = BATCH
    calls: int = 0
    dtype: str = "float64"
    device: str = "cpu"
    optimum: float | None = None
    optimum_note: str = ""


def audit_chain(f: Callable, target: Callable, draft: Callable, length: int, *,
                deterministic: bool = False, samples: int | None = None, seed: int = 0,
                level: float = DEFAULT_LEVEL, detect_tv: float = TARGET_TV, batch: int | None = None,
                device: str = "cpu", dtype="float64", context=(),
                max_seconds: float | None = _budget.MAX_SECONDS,
                max_bytes: float | None = _budget.MAX_BYTES) -> EngineAuditResult:
    """Audit a verifier in the chain contract (:mod:`mdtheory.engines.contracts`).

    ``f(draft_token_ids [B, L], draft_probs [B, L, V] or None, target_probs [B, L+1, V], generator)
    -> (output_token_ids [B, L+1], emitted_draft_token_num [B])``.

    Parameters
    ----------
    f : callable
        The verifier.
    target, draft : callable
        Next-token laws ``law(context: tuple[int, ...]) -> (V,)``, the context being the tokens
        after ``context`` (the package's language-model objects qualify).
    length : int
        L = k, the drafted tokens per chain.
    deterministic : bool
        Each draft token is the draft law's most likely token (ties to the lower index) and
        ``draft_probs`` is None; default: drawn from the draft's law, which is passed.
    samples : int, optional
        Problems audited; default :func:`~mdtheory.audit.statistics.samples_for` ``(detect_tv)`` on
        the target's law over :math:`V^{L+1}`, as :func:`~mdtheory.blocks.audit.audit_block`.
    seed : int
        Seeds the drafts, the verifier's ``torch.Generator`` and the completions.
    level, detect_tv : float
        As :func:`~mdtheory.blocks.audit.audit_block`.
    batch : int, optional
        Problems per call (default :data:`BATCH`, at most ``samples``).
    device : str
        Where the tensors and the generator live (``"cpu"``, ``"cuda"``, ``"cuda:1"``).
    dtype : {"float64", "float32"} or torch dtype
        Of the laws passed.
    context : sequence of int
        The root context (default empty).
    max_seconds, max_bytes : float or None
        Refuse a run estimated over these before it starts (the audit's work from sizes, the
        tensors of one call); after the first call, a run whose pace projects over ``max_seconds``;
        a call that runs longer than ``max_seconds`` is interrupted (the watchdog). None: no limit.

    Returns
    -------
    EngineAuditResult

    Raises
    ------
    InvalidInputError
        Bad laws or options (one named line).
    ProblemTooLargeError
        :math:`V^{L+1} >` :data:`~mdtheory.blocks.audit.MAX_CELLS`, or a run over the limits
        (:class:`~mdtheory.errors.VerifierTimeoutError`: a call that did not return).

    Examples
    --------
    >>> import torch
    >>> from mdtheory.blocks import sun_toy
    >>> def first_draft_always(ids, q, p, gen):  # accept every draft and a bonus token of row k
    ...     bonus = torch.multinomial(p[:, -1], 1, generator=gen)
    ...     return torch.cat([ids, bonus], 1), torch.full((ids.shape[0],), ids.shape[1])
    >>> r = audit_chain(first_draft_always, *sun_toy(), length=2, samples=20_000)
    >>> r.verdict, r.block_efficiency
    ('lossy', 3.0)
    """
    L = _positive(length, "length")
    sampling = Top.sampling if _flag(deterministic) else "iid"
    shape = _Shape(L, L + 1, sampling, lambda: DraftTree((1,) * L, sampling))
    return _audit("chain", f, target, draft, shape, samples, seed, level, detect_tv, batch, device, dtype,
                  context, max_seconds, max_bytes)


def audit_tree(f: Callable, target: Callable, draft: Callable, tree, *, deterministic: bool = False,
               sampling: str = "iid", samples: int | None = None, seed: int = 0,
               level: float = DEFAULT_LEVEL, detect_tv: float = TARGET_TV, batch: int | None = None,
               device: str = "cpu", dtype="float64", context=(),
               max_seconds: float | None = _budget.MAX_SECONDS,
               max_bytes: float | None = _budget.MAX_BYTES) -> EngineAuditResult:
    """Audit a verifier in the tree contract (:mod:`mdtheory.engines.contracts`).

    ``f(candidates [B, N], next_token [B, N], next_sibling [B, N], target_probs [B, N, V],
    draft_probs [B, N, V] or None, generator) -> emitted [B, L+1]``, N the tree's nodes with the
    root, L its depth.

    Parameters
    ----------
    tree : sequence of int or DraftTree
        Children per node at depths 1..L (``(2, 2)``: two children at the root, two under each);
        a :class:`~mdtheory.blocks.trees.DraftTree` also says how they are drawn.
    deterministic : bool
        Each node's children are the draft law's most likely tokens there (distinct, ties to the
        lower index; the tree sampling ``"top"``) and ``draft_probs`` is None (engines' top-k trees).
    sampling : str
        How the children are drawn from the draft's law at their parent, with ``tree`` a sequence
        (:func:`~mdtheory.blocks.trees.tree_samplings`: ``"iid"``, ``"without-replacement"``,
        ``"top"``, the last the same as ``deterministic=True``).
    **others
        As :func:`audit_chain`.

    Returns
    -------
    EngineAuditResult

    Examples
    --------
    >>> import torch
    >>> from mdtheory.blocks import sun_toy
    >>> def root_only(cand, nt, ns, p, q, gen):  # emit one target token at the root: lossless
    ...     out = torch.full((cand.shape[0], 3), -1)
    ...     out[:, 0] = torch.multinomial(p[:, 0], 1, generator=gen)[:, 0]
    ...     return out
    >>> r = audit_tree(root_only, *sun_toy(), (2, 2), samples=30_000)
    >>> r.verdict, r.block_efficiency, r.optimum is not None
    ('passed', 1.0, True)
    """
    if not isinstance(tree, DraftTree):
        if sampling not in tree_samplings():
            raise InvalidInputError(f"unknown sampling {sampling!r}; valid choices: "
                                    f"{', '.join(tree_samplings())}")
        tree = DraftTree(tree, Top.sampling if _flag(deterministic) and sampling == "iid" else sampling)
    if _flag(deterministic) and tree.sampling != Top.sampling:
        raise InvalidInputError(f"deterministic=True draws the draft's top tokens, not {tree.sampling} "
                                "children")
    nodes = 1 + sum(math.prod(tree.branching[:d + 1]) for d in range(tree.length))
    return _audit("tree", f, target, draft, _Shape(tree.length, nodes, tree.sampling, lambda: tree), samples,
                  seed, level, detect_tv, batch, device, dtype, context, max_seconds, max_bytes)


# ---------------------------------------------------------------------------------------- checks
def _positive(x, name: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
        raise InvalidInputError(f"{name} must be an integer >= 1, got {x!r}")
    return int(x)


def _flag(x) -> bool:
    if not isinstance(x, (bool, np.bool_)):
        raise InvalidInputError(f"deterministic must be True or False, got {x!r}")
    return bool(x)


def _dtype(torch, dtype):
    named = {"float64": torch.float64, "float32": torch.float32}
    out = named.get(dtype, dtype)
    if out not in (torch.float64, torch.float32):
        raise InvalidInputError(f"dtype must be float64 or float32, got {dtype!r}")
    return out


# ---------------------------------------------------------------------------------------- the run
class _Tables:
    """The laws at every context of up to L tokens as one (R, V) table, row ``offset[d] + code`` for
    a context of d tokens whose base-V code is ``code`` (first token most significant)."""

    def __init__(self, law: _Law, V: int, L: int):
        self.V, self.L = V, L
        self.offset = np.cumsum([0] + [V ** d for d in range(L + 1)])
        self.rows = np.concatenate([np.stack([law(_tokens(code, d, V)) for code in range(V ** d)])
                                    for d in range(L + 1)])
        self.cdf = np.cumsum(self.rows, axis=1)


def _tokens(code: int, d: int, V: int) -> tuple:
    return tuple((code // V ** (d - 1 - j)) % V for j in range(d))


class _Shape(NamedTuple):
    """The drafts' tree before it is built: its depth L, its nodes N with the root (integers of any
    size, read from the branching), its sampling, and how to build it once the run's size is
    accepted."""

    length: int
    nodes: int
    sampling: str
    build: Callable[[], DraftTree]


def _power10(e: float) -> str:
    """10^e for a message (e >= 0 of any size)."""
    return f"about 10^{e:.1f}" if e < 100 else f"about 10^{e:,.0f}"


def _count(x: int) -> str:
    """An integer of any size for a message: with thousands separators, or as a power of ten."""
    return f"{x:,}" if x < 10 ** 15 else _power10(math.log10(x))


def _cells(V: int, L: int) -> int:
    """V^(L+1), the sequences the audit tests, refused over :data:`MAX_CELLS` without forming a
    larger number."""
    if (L + 1) * math.log2(V) > math.log2(MAX_CELLS) + 1:
        size = _power10((L + 1) * math.log10(V))
    else:
        cells = V ** (L + 1)
        if cells <= MAX_CELLS:
            return cells
        size = f"{cells:,}"
    raise ProblemTooLargeError(
        f"the audit tests the law of V^(L+1) = {V}^{L + 1} = {size} sequences, over {MAX_CELLS:,}; "
        "shorten the drafts or audit on a smaller vocabulary")


def _audit(contract, f, target, draft, shape: _Shape, samples, seed, level, detect_tv, batch, device,
           dtype, context, max_seconds, max_bytes) -> EngineAuditResult:
    t0 = time.perf_counter()
    max_seconds, max_bytes = _budget.limits(max_seconds, max_bytes)
    if not callable(f):
        raise InvalidInputError(f"the verifier must be callable, got {type(f).__name__}")
    if not 0 < level < 1:
        raise InvalidInputError(f"the level must be in (0, 1), got {level}")
    if not 0 < detect_tv <= 1:
        raise InvalidInputError(f"detect_tv must be in (0, 1], got {detect_tv}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidInputError(f"seed must be an integer >= 0, got {seed!r}")
    torch = _torch()
    check_device(device)
    dtype = _dtype(torch, dtype)
    L = shape.length
    P = _Law(target, "target", _context(context))
    V = P.V = P(()).size
    Q = _Law(draft, "draft", _context(context), V)
    Q(())
    cells = _cells(V, L)
    _, p_full = _tables(P, V, L + 1)
    if samples is None:
        samples = samples_for(detect_tv, p_full, level)
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) \
            or not 10 <= samples <= MAX_SAMPLES:
        raise InvalidInputError(f"samples must be an integer in 10..{MAX_SAMPLES}, got {samples!r}")
    samples = int(samples)
    batch = min(samples, BATCH if batch is None else _positive(batch, "batch"))
    N = shape.nodes
    det = shape.sampling == Top.sampling  # no draft probabilities passed
    item = torch.finfo(dtype).bits // 8
    # from the branching's numbers, before anything of the tree's size is built: the tensors of
    # one call (laws, ids and links) and the layout (five integers a node, one a path's token)
    per_call = batch * N * V * item * (1 if det else 2) + batch * N * 8 * 8 + N * 8 * (5 + L)
    calls = -(-samples // batch)
    _budget.require(_budget.Estimate(
        f"audit of {_describe(f)} in the {contract} contract ({samples:,} problems of {_count(N)} nodes over "
        f"V = {V}, {calls:,} call{'s' if calls != 1 else ''} of {batch:,})",
        min(samples * N, 10 ** 300) * _NODE_SECONDS,
        min(per_call, 10 ** 300), "lower --batch to use less memory"), max_seconds, max_bytes=max_bytes)
    tree = shape.build()
    layout = tree_layout(tree)
    Pt = _Tables(P, V, L)
    draws = _Draws(torch, tree, layout, Pt, None if det else _Tables(Q, V, L), device, dtype)
    name = _describe(f)
    common = {"sampling": tree.sampling, "drafts": tree.n, "vocab": V, "positions": 1, "level": level,
              "target": name, "length": L, "branching": list(tree.branching), "detect_tv": detect_tv,
              "cells": cells, "contract": contract, "deterministic": det, "batch": batch,
              "dtype": str(dtype).removeprefix("torch."), "device": str(device)}
    bound = _bound(p_full, Q, V, 1, L) if contract == "chain" and not det else None
    optimum, note = _optimum(P, Q, tree, max_seconds, max_bytes)

    draft_seq, fill_seq, verifier_seq = np.random.SeedSequence(seed).spawn(3)
    draft_rng, fill_rng = np.random.default_rng(draft_seq), np.random.default_rng(fill_seq)
    generator = torch.Generator(device=device).manual_seed(int(verifier_seq.generate_state(1)[0]))
    counts = np.zeros(cells + 1, dtype=np.int64)
    lengths = np.zeros(L + 2, dtype=np.int64)
    kinds: dict[str, int] = {}
    examples: list[dict] = []
    done = made = 0
    pace = _Pace(name, samples, calls, max_seconds)
    with CALLS.armed(max_seconds, f"{contract} audit of {name} (batches of {batch:,} problems)"):
        while done < samples:
            B = min(batch, samples - done)
            drafts = tree.sample_batch(Q, draft_rng, B)  # Q: the draft's rows, read and checked once
            args, inputs = draws.inputs(contract, drafts, generator)
            pace.call_starts()
            try:
                out = CALLS.call(None, drafts[0], f, *args)  # a hang names the first problem's drafts
                pace.call_ends()
                faults = (chain_output_faults if contract == "chain" else tree_output_faults)(out, inputs)
            except _USER_ERRORS as exc:  # anything the user's code raises is a verdict on it
                pace.call_ends()
                faults = None
                reason = f"raised {_one_line(exc)}"
                kinds[reason] = kinds.get(reason, 0) + B
                counts[cells] += B
                if len(examples) < SHOW_VIOLATIONS:
                    examples.append({"sample": done, "drafts": drafts[0].tolist(), "output": None,
                                     "reason": reason})
            made += 1
            if faults is not None:
                _tally(faults, drafts, out, contract, done, kinds, examples)
                _complete(faults, Pt, fill_rng, L, V, counts, lengths)
            done += B
            if faults is None:
                break  # a verifier that raises is not called again
            pace.check(done, made)
    fields = _summary(counts, lengths, kinds, examples, p_full, bound, common,
                      ceiling=None if optimum is None else optimum - 1)
    return EngineAuditResult(**fields, seed=seed, seconds=time.perf_counter() - t0, calls=made,
                             optimum=optimum, optimum_note=note, **common)


class _Pace:
    """The run's pace, the verifier's calls timed apart from the audit's own work (drawing the
    drafts, laying them out, checking and completing the outputs): after the first call the whole
    run is projected from it, and after every later one from the pace so far; a refusal names the
    part that is slow."""

    def __init__(self, name: str, samples: int, calls: int, max_seconds: float):
        self.name, self.samples, self.calls, self.max_seconds = name, samples, calls, max_seconds
        self.start = time.perf_counter()
        self.verifier = 0.0
        self._t = self.start

    def call_starts(self) -> None:
        self._t = time.perf_counter()

    def call_ends(self) -> None:
        self.verifier += time.perf_counter() - self._t

    def check(self, done: int, made: int) -> None:
        elapsed = time.perf_counter() - self.start
        own = max(elapsed - self.verifier, 0.0)
        projected = max(elapsed, elapsed * self.samples / done)
        if projected <= self.max_seconds or done >= self.samples:
            return
        fmt = _budget.fmt_seconds
        calls = f"{made:,} verifier call" + ("s" if made != 1 else "")
        slow = ("the verifier's calls take most of it" if self.verifier >= own
                else "the audit's own drawing and checks take most of it")
        when = (f"timed on the first of {self.calls:,} calls" if made == 1 else
                f"after {done:,} of {self.samples:,} problems, slower than on the first call")
        raise ProblemTooLargeError(
            f"audit of {self.name}: {self.samples:,} problems projected at {fmt(projected)} ({when}), "
            f"over the limit of {fmt(self.max_seconds)}: {slow} ({calls}: {fmt(self.verifier)}; the "
            f"audit's own work: {fmt(own)}); raise it with --max-seconds, or audit fewer --samples")


def _optimum(P: _Law, Q: _Law, tree: DraftTree, max_seconds: float, max_bytes: float):
    """(optimum E|B| for the tree's drafts, "") or (None, why not); the laws relative to the root."""
    from ..blocks.optimum import optimal_block_efficiency

    limit = min(OPTIMUM_SECONDS, max_seconds)
    try:
        return float(optimal_block_efficiency(P, Q, tree=tree, max_seconds=limit,
                                              max_bytes=max_bytes).value), ""
    except ProblemTooLargeError:
        return None, f"the optimum's LP is estimated over {_budget.fmt_seconds(limit)}"
    except (MdtheoryError, ImportError) as exc:  # an LP solver not installed (highspy)
        return None, f"the optimum is not available here: {_one_line(exc)}"


class _Draws:
    """Lays out draws of the tree in the contract, with the laws at every node, on the device."""

    def __init__(self, torch, tree, layout, Pt: _Tables, Qt: _Tables | None, device, dtype):
        self.torch, self.tree, self.layout = torch, tree, layout
        self.P = torch.as_tensor(Pt.rows, dtype=dtype, device=device)
        self.Q = None if Qt is None else torch.as_tensor(Qt.rows, dtype=dtype, device=device)  # None: top
        self.offset, self.V, self.device = Pt.offset, Pt.V, device
        self.order = [np.flatnonzero(layout.depth == d) for d in range(1, tree.length + 1)]

    def rows(self, cand: np.ndarray) -> np.ndarray:
        """The table row of every node's context (B, N)."""
        code = np.zeros(cand.shape, dtype=np.int64)
        for nodes in self.order:  # breadth first: a parent before its children
            code[:, nodes] = code[:, self.layout.parent[nodes]] * self.V + cand[:, nodes]
        return self.offset[self.layout.depth] + code

    def inputs(self, contract: str, drafts: np.ndarray, generator):
        """The verifier's arguments for ``drafts`` (B, K, L) and the validated inputs its output is
        checked against (copies: a verifier that writes into its arguments cannot move the checks)."""
        torch = self.torch
        cand = tree_candidates(self.layout, drafts)
        rows = torch.as_tensor(self.rows(cand), device=self.device)
        p = self.P[rows]
        q = None if self.Q is None else self.Q[rows]
        if contract == "chain":
            ids = torch.as_tensor(cand[:, 1:], device=self.device)
            q = None if q is None else q[:, :-1]
            inputs = check_chain_inputs(ids.clone(), q, p, generator, check_values=False)
            return (ids, q, p, generator), inputs
        B = cand.shape[0]
        links = [torch.as_tensor(np.broadcast_to(x, (B, x.size)).copy(), device=self.device)
                 for x in (self.layout.next_token, self.layout.next_sibling)]
        cand_t = torch.as_tensor(cand, device=self.device)
        inputs = check_tree_inputs(cand_t.clone(), *(x.clone() for x in links), p, q, generator,
                                   depth=self.tree.length, check_values=False)
        return (cand_t, *links, p, q, generator), inputs


def _tally(faults, drafts, out, contract: str, start: int, kinds: dict, examples: list) -> None:
    """Count the bad rows by reason and keep the first ones with their drafts."""
    bad = np.flatnonzero(faults.bad)
    if not bad.size:
        return
    reasons, counts = np.unique(faults.reason[bad].astype(str), return_counts=True)
    for r, c in zip(reasons.tolist(), counts.tolist(), strict=True):
        kinds[r] = kinds.get(r, 0) + int(c)
    for b in bad[:max(0, SHOW_VIOLATIONS - len(examples))].tolist():
        examples.append({"sample": start + b, "drafts": drafts[b].tolist(),
                         "output": _row(out, b, contract), "reason": str(faults.reason[b])})


def _row(out, b: int, contract: str):
    """Row b of a verifier's output as lists (whatever the output is), for the report."""
    try:
        if contract == "chain":
            return {"output_token_ids": out[0][b].tolist(), "emitted_draft_token_num": int(out[1][b])}
        return out[b].tolist()
    except Exception:  # noqa: BLE001 -- a malformed output may fail any way
        return None


def _complete(faults, Pt: _Tables, rng: np.random.Generator, L: int, V: int, counts: np.ndarray,
              lengths: np.ndarray) -> None:
    """Complete the good rows with fresh target tokens to L + 1 tokens and count the sequences (the
    bad rows go to the last cell, of target mass 0)."""
    good = ~faults.bad
    counts[-1] += int(faults.bad.sum())
    if not good.any():
        return
    tokens, count = faults.tokens[good], faults.count[good]
    np.add.at(lengths, count, 1)
    seq = np.zeros((tokens.shape[0], L + 1), dtype=np.int64)
    width = min(tokens.shape[1], L + 1)
    seq[:, :width] = np.maximum(tokens[:, :width], 0)
    code = np.zeros(tokens.shape[0], dtype=np.int64)
    for t in range(L + 1):
        fill = count <= t
        if fill.any():
            cdf = Pt.cdf[Pt.offset[t] + code[fill]]
            u = rng.random(int(fill.sum())) * cdf[:, -1]
            seq[fill, t] = np.minimum((cdf <= u[:, None]).sum(axis=1), V - 1)
        code = code * V + seq[:, t]
    np.add.at(counts, code, 1)
