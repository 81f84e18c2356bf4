"""Audit anyone's block or tree verifier: is "emitted block, then fresh target tokens" the target's law?

A sequence-level verifier reads K drafts of L tokens, drawn autoregressively from a draft model
q(· | context), and emits a block :math:`B = (b_1, \\dots, b_{k+1})`, :math:`0 \\le k \\le L`, whose
first k tokens are the first k tokens of some draft and whose last token is the correction or bonus
token. It is *valid* (lossless) when B, completed by fresh tokens of the target p(· | context) up to
length L + 1, has the target's law on :math:`V^{L+1}`:

.. math::

    \\sum_{k=0}^{L} P(B = y_{1:k+1})\\, p(y_{k+2:L+1} \\mid y_{1:k+1}) = p(y_{1:L+1})
    \\quad \\text{for every } y \\in V^{L+1}

(papers/theory.md §A). :func:`audit_block` takes a verifier written by
anyone, in one of two forms, and checks it:

* **sampled** (default): ``f(target, draft, drafts, rng) -> block``, a 1-D integer array, called once
  per draft array drawn by the audit; each block is completed with fresh target tokens and the
  completed sequences are tested against :math:`p` on :math:`V^{L+1}` with the token-level audit's
  statistics (:mod:`mdtheory.audit`: Pearson's test with sparse cells pooled, the power bound
  :func:`~mdtheory.audit.statistics.detectable_tv`, the sample-size rule
  :func:`~mdtheory.audit.statistics.samples_for`,
  the upper confidence bound on TV). The cells are the :math:`V^{L+1}` sequences and one cell of
  target mass 0 for blocks that cannot be completed (a token out of range, a block of length 0 or
  over L + 1, not an integer array): one such block rejects outright.
* **exact** (``exact=True``): ``law(target, draft, drafts) -> {block: probability}``; every draft
  array is enumerated with its probability (small instances) and the completed law is compared
  with :math:`p` exactly: exact TV and exact block efficiency.

Here ``target`` and ``draft`` are the audit's read-only, validated views of the laws, with contexts
relative to the root: ``target(())`` is the target's law after the root context (a law is a function
of the context: each row is read from the user's law once, checked and cached; a law that returns
exact fractions is seen in them, summing to exactly one, so that a tree's top children are chosen
exactly, as everywhere in :mod:`mdtheory.blocks.trees`). ``drafts`` is an
int64 array (K, L), row k the k-th draft. By default the K drafts are iid (a tree with branching
(K, 1, ..., 1)); ``tree=DraftTree((b_1, ..., b_L), sampling)`` draws a draft tree instead
(:class:`~mdtheory.blocks.trees.DraftTree`: each node's b_d children drawn from q at that node,
iid, without replacement or its top b_d tokens), and lists its K = b_1 ⋯ b_L root-to-leaf paths in
depth-first (mixed-radix) order: paths k and k' share their node at depth d exactly when
``k // (K // (b_1 ⋯ b_d))`` agree (a tree verifier must know the branching; the array does not tell
siblings that drew the same token apart).

Every emitted block is also checked for *structural* validity: length 1..L + 1, tokens in 0..V - 1,
:math:`b_{1:k}` a prefix of some draft. A violation is a failure of the verifier (verdict
``"invalid"``), counted and shown with its drafts, never a crash; a verifier that raises, or that
would run over ``max_seconds``, is bad input (:class:`~mdtheory.errors.InvalidInputError`,
:class:`~mdtheory.errors.ProblemTooLargeError`) named in one line.

**Verdicts.** Exact mode: ``"lossless"`` when the exact TV is at most
:data:`~mdtheory.audit.verifier.EXACT_TOL`, else ``"lossy"``. Sampled mode, by the token-level audit's
rule (:func:`mdtheory.audit.verifier.audit`): ``"lossy"`` when the test rejects at ``level``;
otherwise ``"passed"`` when the run detects every deviation of TV at least ``detect_tv`` with
probability :data:`~mdtheory.audit.statistics.POWER` (the default sample size is the smallest that
does), and ``"inconclusive"`` when it does not (too few samples were asked for). Only
``"lossless"`` and ``"passed"`` set ``lossless``: an inconclusive run never reads as lossless. A
sampled pass is *lossless to within* ``detect_tv``: a verifier whose TV is below ``detect_tv`` is,
by design, not expected to be caught (the token-level audit's sampled "lossless" means the same);
to rule out a smaller loss, ask for it with a smaller ``detect_tv`` (the run grows as its inverse
square), or audit the law form exactly. The word "passed" (not "lossless") says that it was
sampled.

**Block efficiency and its ceiling.** The result reports :math:`E|B|` (tokens per target call) and
the accepted draft tokens :math:`E k = E|B| - 1` against the proven bound
:math:`E k \\le \\sum_{m=1}^{L} \\alpha^*_m` for iid drafts, :math:`\\alpha^*_m` the token-level optimum
over the alphabet :math:`V^m` of m-token prefixes with K iid draft prefixes (papers/theory.md §A); an
acceptance significantly above the bound is impossible for a valid verifier.

References
----------
Sun et al., "Block Verification Accelerates Speculative Decoding", ICLR 2025 (the validity condition,
§2; Algorithm 2). Weng et al., "Traversal Verification for Speculative Tree Decoding", NeurIPS 2025.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import product

import numpy as np

from .. import _budget
from ..audit.statistics import (
    DEFAULT_LEVEL,
    MAX_SAMPLES,
    TARGET_TV,
    _tv_upper,
    detectable_tv,
    law_test,
    samples_for,
)
from ..audit.verifier import (
    _USER_ERRORS,
    EXACT_TOL,
    PILOT_CALLS,
    SHOW_WORST,
    AuditResult,
    _describe,
    _one_line,
    _pilot,
)
from ..audit.watchdog import CALLS
from ..errors import InvalidDistributionError, InvalidInputError, MdtheoryError, ProblemTooLargeError
from .markov import row_tolerance
from .trees import MAX_TREE_DRAWS, DraftTree, _law_row, draft_shape, iid_drafts

__all__ = ["audit_block", "BlockAuditResult", "MAX_CELLS", "MAX_TREES",
           "BOUND_MAX_PREFIXES"]

#: Largest V^(L+1): the completed sequences are the test's cells.
MAX_CELLS = 1 << 16
#: Exact mode enumerates at most this many draft arrays (V to the number of tree nodes for sampled
#: children; :data:`mdtheory.blocks.trees.MAX_TREE_DRAWS`).
MAX_TREES = MAX_TREE_DRAWS
#: The bound sum_m alpha*_m is computed when V^L is at most this.
BOUND_MAX_PREFIXES = 4096
#: Violations listed with their drafts in ``violation_examples``.
SHOW_VIOLATIONS = 5


@dataclass
class BlockAuditResult(AuditResult):
    """What :func:`audit_block` found (an :class:`~mdtheory.audit.verifier.AuditResult` with block fields).

    The inherited fields read on blocks: ``tv``, ``tv_upper``, ``pvalue`` and ``detectable_tv`` are
    of the completed law on :math:`V^{L+1}` against the target's; ``acceptance`` is :math:`E k`, the
    accepted draft tokens per call (a mean, not a fraction), with a normal 95% interval;
    ``alpha_star`` is the bound :math:`\\sum_m \\alpha^*_m` on it (None where not computed: trees
    other than K iid drafts, or :math:`V^L >` :data:`BOUND_MAX_PREFIXES`); ``optimum_pvalue``
    tests acceptance above that bound; ``worst_tokens`` lists the completed sequences that deviate
    most (key ``sequence``).

    Attributes
    ----------
    verdict : {"lossless", "lossy", "passed", "inconclusive", "invalid"}
        See the module notes; ``lossless`` is True for "lossless" (exact) and "passed" (sampled:
        no loss of TV at least ``detect_tv``, the run detecting such a loss with probability
        :data:`~mdtheory.audit.statistics.POWER`) only.
    length : int
        L, the draft length.
    branching : list of int
        Children per node at each depth (K iid drafts: [K, 1, ..., 1]).
    block_efficiency : float
        :math:`E|B|`, tokens per target call (= acceptance + 1), over the blocks that could be
        completed.
    block_efficiency_ci95 : (float, float)
        Normal interval over the independent calls (a point in exact mode).
    detect_tv : float
        The TV the run was sized to detect with probability :data:`~mdtheory.audit.statistics.POWER`.
    cells : int
        :math:`V^{L+1}`.
    violations : dict
        Structural violations by kind: counts (sampled) or probabilities (exact).
    invalid_mass : float
        Fraction of calls (sampled) or probability (exact) with a structurally invalid block.
    violation_examples : list of dict
        Up to :data:`SHOW_VIOLATIONS`: ``drafts``, ``block``, ``reason``.
    """

    verdict: str = ""
    length: int = 1
    branching: list = field(default_factory=list)
    block_efficiency: float = 0.0
    block_efficiency_ci95: tuple[float, float] = (0.0, 0.0)
    detect_tv: float = TARGET_TV
    cells: int = 0
    violations: dict = field(default_factory=dict)
    invalid_mass: float = 0.0
    violation_examples: list = field(default_factory=list)



# ---------------------------------------------------------------------------------------- laws
def _context(context) -> tuple[int, ...]:
    try:
        return tuple(operator.index(c) for c in context)
    except TypeError:
        raise InvalidInputError(f"a context must be a sequence of integer tokens, got {context!r}") from None


class _Law:
    """A next-token law relative to the root context, each row validated once, cached and read-only."""

    def __init__(self, law: Callable, name: str, root: tuple = (), V: int | None = None):
        if not callable(law):
            raise InvalidInputError(f"the {name} must be a callable law(context) -> (V,), got "
                                    f"{type(law).__name__}")
        self.law, self.name, self.root, self.V = law, name, root, V
        self._rows: dict[tuple, np.ndarray] = {}
        self._cdf: dict[tuple, np.ndarray] = {}
        self.__qualname__ = f"{name} law"

    def __call__(self, context=()) -> np.ndarray:
        ctx = context if type(context) is tuple else _context(context)
        row = self._rows.get(ctx)
        return row if row is not None else self._fetch(_context(ctx))

    def _fetch(self, ctx: tuple) -> np.ndarray:
        try:
            raw = self.law(self.root + ctx)
        except _USER_ERRORS as exc:  # the user's law may raise anything
            raise InvalidInputError(f"the {self.name} raised {_one_line(exc)} at context {ctx}") from None
        try:
            row = np.array(raw, dtype=np.float64)
        except (TypeError, ValueError):
            row = np.full(1, np.nan)
        V = self.V if self.V is not None else row.shape[-1] if row.ndim == 1 else 0
        if row.shape != (V,) or V < 1 or not np.isfinite(row).all() or row.min() < 0 \
                or abs(row.sum() - 1) > row_tolerance(raw):
            raise InvalidDistributionError(
                f"the {self.name} at context {ctx} is not a probability vector"
                + (f" of length {self.V}" if self.V else "") + f": {_short(raw)}")
        self.V = V
        row /= row.sum()  # within the sum rule of its precision: rescaled, as the optimum does
        if np.asarray(raw).dtype == object:  # exact fractions stay exact (checked above as floats)
            row = _law_row(lambda _: raw, ctx)
        row.setflags(write=False)
        self._rows[ctx] = row
        return row

    def sample(self, ctx: tuple, rng: np.random.Generator) -> int:
        cdf = self._cdf.get(ctx)
        if cdf is None:
            cdf = self._cdf[ctx] = np.cumsum(np.asarray(self(ctx), dtype=np.float64))
        return min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), cdf.size - 1)


def _short(x) -> str:
    text = " ".join(repr(x).split())
    return text if len(text) <= 80 else text[:77] + "..."


def _tables(law: _Law, V: int, L1: int) -> tuple[np.ndarray, np.ndarray]:
    """``step[j, y] = law(y_{1:j})[y_{j+1}]`` and the sequence law ``prod_j step[j]``, y in V^L1
    (lexicographic, first token most significant)."""
    N = V ** L1
    idx = np.arange(N)
    step = np.empty((L1, N))
    for j in range(L1):
        rows = np.stack([law(c) for c in product(range(V), repeat=j)])  # (V^j, V), lexicographic
        step[j] = rows[idx // V ** (L1 - j), (idx // V ** (L1 - j - 1)) % V]
    return step, step.prod(axis=0)


# ---------------------------------------------------------------------------------------- blocks
def _check_block(out, prefixes: set, V: int, L: int) -> tuple[tuple | None, str | None]:
    """(block, None) for a valid block; (block, reason) for one that is not a draft prefix plus a
    token (it can still be completed); (None, reason) for one that cannot be completed."""
    try:
        arr = np.asarray(out)
    except Exception:  # anything a user's object does on conversion
        return None, "not an integer array"
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        return None, f"not a 1-D integer array ({arr.dtype}, shape {arr.shape})"
    if not 1 <= arr.size <= L + 1:
        return None, f"length {arr.size} outside 1..{L + 1}"
    if arr.min() < 0 or arr.max() >= V:
        return None, f"a token outside 0..{V - 1}"
    block = tuple(arr.tolist())
    if block[:-1] not in prefixes:
        return block, "not a draft prefix plus one token"
    return block, None


def _prefixes(drafts: np.ndarray) -> set:
    rows = drafts.tolist()
    return {tuple(r[:m]) for r in rows for m in range(len(r) + 1)}


def _index(seq, V: int) -> int:
    i = 0
    for t in seq:
        i = i * V + t
    return i


# ---------------------------------------------------------------------------------------- front door
def audit_block(f: Callable, target: Callable, draft: Callable, n: int | None = None,
                length: int | None = None, *, tree: DraftTree | None = None, samples: int | None = None,
                seed: int = 0, level: float = DEFAULT_LEVEL, detect_tv: float = TARGET_TV,
                exact: bool = False, context=(), max_seconds: float | None = _budget.MAX_SECONDS
                ) -> BlockAuditResult:
    """Audit a block or tree verifier: is "emitted block + fresh target tokens" the target's law?

    Parameters
    ----------
    f : callable
        Sampled form ``f(target, draft, drafts, rng) -> block`` (1-D integer array of 1..L + 1
        tokens); with ``exact=True``, ``law(target, draft, drafts) -> {block tuple: probability}``.
        ``target`` and ``draft`` are read-only views of the laws with contexts relative to the root,
        ``drafts`` int64 (n, length), ``rng`` a :class:`numpy.random.Generator`.
    target, draft : callable
        Next-token laws ``law(context: tuple[int, ...]) -> (V,)`` (the package's language-model
        objects qualify).
    n : int, optional
        K, the number of drafts (root-to-leaf paths of a tree; optional with ``tree``).
    length : int, optional
        L, the number of tokens per draft (optional with ``tree``).
    tree : DraftTree, optional
        Draw the drafts as this tree (:class:`~mdtheory.blocks.trees.DraftTree`: branching factors
        per depth, children ``"iid"``, ``"without-replacement"`` or ``"top"`` at every node);
        default K = ``n`` iid drafts of ``length`` tokens. A given ``n`` or ``length`` must be the
        tree's.
    samples : int, optional
        Sampled form: verifier calls; default
        :func:`~mdtheory.audit.statistics.samples_for` ``(detect_tv)`` on
        the target's law over :math:`V^{L+1}`.
    seed : int
    level : float
        Level of the test.
    detect_tv : float
        The TV the run must detect with probability :data:`~mdtheory.audit.statistics.POWER` to pass.
    exact : bool
        ``f`` is the law form: enumerate every draft array.
    context : sequence of int
        The root context (default empty).
    max_seconds : float or None
        Refuse (:class:`~mdtheory.errors.ProblemTooLargeError`, with the estimate) a run whose first
        :data:`~mdtheory.audit.verifier.PILOT_CALLS` verifier calls predict more than this (judged
        after every call once they took :data:`~mdtheory.audit.verifier.PILOT_EARLY` of it), and
        interrupt a verifier call that runs longer than this by itself
        (:class:`~mdtheory.errors.VerifierTimeoutError`, :mod:`mdtheory.audit.watchdog`).
        Default 60 s (:data:`mdtheory._budget.MAX_SECONDS`), as :func:`mdtheory.audit` and the
        CLI; None: no limit.

    Returns
    -------
    BlockAuditResult

    Raises
    ------
    InvalidInputError
        Bad laws or options; a verifier (or law) that raises, named with the drafts; an exact law
        whose probabilities are not finite, non-negative and summing to one.
    ProblemTooLargeError
        :math:`V^{L+1} >` :data:`MAX_CELLS`, more than :data:`MAX_TREES` draft arrays to enumerate,
        or a run estimated over ``max_seconds``.

    Examples
    --------
    >>> p, q = (lambda c: np.array([1 / 3, 2 / 3])), (lambda c: np.array([2 / 3, 1 / 3]))
    >>> def target_only(target, draft, drafts, rng):  # ignore the drafts: valid, E|B| = 1
    ...     return np.array([rng.choice(2, p=target(()))])
    >>> r = audit_block(target_only, p, q, n=1, length=2, samples=2000)
    >>> r.verdict, r.block_efficiency
    ('inconclusive', 1.0)
    >>> def first_draft(target, draft, drafts):  # accept draft 1 and a bonus token: lossy
    ...     return {tuple(drafts[0]) + (y,): float(target(tuple(drafts[0]))[y]) for y in range(2)}
    >>> r = audit_block(first_draft, p, q, n=1, length=2, exact=True)
    >>> r.verdict, round(r.tv, 6), round(r.block_efficiency, 12)
    ('lossy', 0.333333, 3.0)
    """
    t0 = time.perf_counter()
    if tree is None:
        tree = iid_drafts(_positive(n, "n"), _positive(length, "length"))
    n, L = draft_shape(n, length, tree)
    max_seconds = _budget.check_limit(max_seconds, "max_seconds")
    if not 0 < level < 1:
        raise InvalidInputError(f"the level must be in (0, 1), got {level}")
    if not 0 < detect_tv <= 1:
        raise InvalidInputError(f"detect_tv must be in (0, 1], got {detect_tv}")
    if not callable(f):
        raise InvalidInputError(f"the verifier must be callable, got {type(f).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidInputError(f"seed must be an integer >= 0, got {seed!r}")
    P = _Law(target, "target", _context(context))
    V = P.V = P(()).size
    Q = _Law(draft, "draft", _context(context), V)
    Q(())
    L1 = L + 1
    cells = V ** L1
    if cells > MAX_CELLS:
        raise ProblemTooLargeError(
            f"the audit tests the law of V^(L+1) = {V}^{L1} = {cells:,} sequences, over {MAX_CELLS:,}; "
            "shorten the block or audit on a smaller vocabulary")
    step, p_full = _tables(P, V, L1)
    common = {"sampling": tree.sampling, "drafts": n, "vocab": V, "positions": 1, "level": level,
              "target": _describe(f), "length": L, "branching": list(tree.branching),
              "detect_tv": detect_tv, "cells": cells}
    bound = _bound(p_full, Q, V, n, L) if tree.is_iid_drafts else None
    if exact:
        with CALLS.armed(max_seconds, f"block audit of {_describe(f)}"):
            return _exact(f, P, Q, V, L, tree, step, p_full, bound, max_seconds, t0, common)
    if samples is None:
        samples = samples_for(detect_tv, p_full, level)
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) \
            or not 10 <= samples <= MAX_SAMPLES:
        raise InvalidInputError(f"samples must be an integer in 10..{MAX_SAMPLES}, got {samples!r}")
    with CALLS.armed(max_seconds, f"block audit of {_describe(f)}"):
        return _sampled(f, P, Q, V, L, tree, p_full, int(samples), seed, bound, max_seconds,
                        t0, common)


def _positive(x, name: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
        raise InvalidInputError(f"{name} must be an integer >= 1, got {x!r}")
    return int(x)


def _bound(p_full: np.ndarray, Q: _Law, V: int, n: int, L: int) -> float | None:
    """sum_{m=1}^{L} alpha*_m over m-token prefixes, n iid drafts (None when V^L is too large)."""
    from ..solve import optimal_acceptance

    if V ** L > BOUND_MAX_PREFIXES:
        return None
    _, q_full = _tables(Q, V, L)
    total = 0.0
    for m in range(1, L + 1):
        p_m = p_full.reshape(V ** m, -1).sum(axis=1)
        q_m = q_full.reshape(V ** m, -1).sum(axis=1)
        try:
            total += optimal_acceptance(p_m / p_m.sum(), q_m / q_m.sum(), n).value
        except MdtheoryError:  # a route that cannot prove the value: no bound rather than a guess
            return None
    return float(total)


def _sampled(f, P, Q, V, L, tree, p_full, samples, seed, bound, max_seconds, t0, common):
    L1, N = L + 1, V ** (L + 1)
    draft_rng, verifier_rng, fill_rng = (np.random.default_rng(s)
                                         for s in np.random.SeedSequence(seed).spawn(3))
    counts = np.zeros(N + 1, dtype=np.int64)  # the last cell: blocks that cannot be completed
    lengths = np.zeros(L + 2, dtype=np.int64)
    kinds: dict[str, int] = {}
    examples: list[dict] = []
    def rows(contexts):  # the draft's rows, validated once and cached by the view
        return [Q(c) for c in contexts]

    t_pilot = time.perf_counter()
    for i in range(samples):
        _pilot(f, i, min(PILOT_CALLS, samples - 1), t_pilot, samples, max_seconds)
        drafts = tree.sample(Q, draft_rng, rows=rows)
        drafts.setflags(write=False)
        try:
            out = CALLS.call(None, drafts, f, P, Q, drafts, verifier_rng)  # (watchdog)
        except _USER_ERRORS as exc:  # anything the user's code raises is bad input to the audit
            raise InvalidInputError(
                f"VERIFIER {_describe(f)} raised {_one_line(exc)} on drafts {drafts.tolist()}") from None
        block, reason = _check_block(out, _prefixes(drafts), V, L)
        if reason is not None:
            kinds[reason] = kinds.get(reason, 0) + 1
            if len(examples) < SHOW_VIOLATIONS:
                examples.append({"drafts": drafts.tolist(), "block": _short(out), "reason": reason})
        if block is None:
            counts[N] += 1
            continue
        lengths[len(block)] += 1
        seq = list(block)
        while len(seq) < L1:
            seq.append(P.sample(tuple(seq), fill_rng))
        counts[_index(seq, V)] += 1
    return BlockAuditResult(**_summary(counts, lengths, kinds, examples, p_full, bound, common), seed=seed,
                            seconds=time.perf_counter() - t0, **common)


def _above_ceiling(mean: float, n: int, top: float, lo: float, hi: float) -> float:
    """One-sided p-value of a mean of n independent draws in [lo, hi] at or above ``mean`` when
    their expectation is at most ``top``: Hoeffding's bound (1963, Theorem 1)
    :math:`\\exp(-n\\,\\mathrm{kl}(x \\| m))`, x and m the mean and ``top`` rescaled to [0, 1] and
    kl the Bernoulli relative entropy. It needs no variance estimate (a run whose every block has
    the same length has none), holds for every law on the range, and is largest at the expectation
    ``top``, so it is valid for the whole null."""
    x = (min(max(mean, lo), hi) - lo) / (hi - lo)
    m = (min(max(top, lo), hi) - lo) / (hi - lo)
    if x <= m:
        return 1.0
    if m <= 0.0:
        return 0.0

    def term(a: float, b: float) -> float:
        return 0.0 if a <= 0.0 else a * (math.log(a) - math.log(b)) if b > 0.0 else math.inf

    kl = term(x, m) + term(1.0 - x, 1.0 - m)
    return float(math.exp(-n * kl))


def _summary(counts: np.ndarray, lengths: np.ndarray, kinds: dict, examples: list, p_full: np.ndarray,
             bound: float | None, common: dict, ceiling: float | None = None) -> dict:
    """The sampled audit's statistics and verdict, as :class:`BlockAuditResult` fields: ``counts``
    of the completed sequences (V^(L+1) cells and a last one for the blocks that cannot be
    completed), ``lengths[m]`` the completed blocks of m tokens, ``kinds`` the structural
    violations by reason. Acceptance above ``bound`` (or ``ceiling``, a tighter ceiling on E k when
    smaller) is tested one-sided (:func:`_above_ceiling`, on the range -1..L of k)."""
    samples = int(counts.sum())
    L = lengths.size - 2
    p_ext = np.append(p_full, 0.0)
    pvalue = law_test(counts, p_ext)
    observed = counts / samples
    tv = 0.5 * float(np.abs(observed - p_ext).sum())
    tv_upper = max(_tv_upper(counts, p_ext, 0.05), tv)
    detectable = detectable_tv(p_full, samples, common["level"])
    completed = int(lengths.sum())
    ks = np.arange(-1, L + 1)  # accepted tokens k = |B| - 1 for |B| = 0..L+1
    mean_k = float((lengths * ks).sum() / completed) if completed else 0.0
    sd = float(np.sqrt(max((lengths * (ks - mean_k) ** 2).sum() / max(completed - 1, 1), 0.0)))
    half = 1.959963984540054 * sd / math.sqrt(max(completed, 1))
    top = min(x for x in (bound, ceiling, math.inf) if x is not None)
    opt = None
    if math.isfinite(top) and completed > 1:
        opt = _above_ceiling(mean_k, completed, top, -1.0, float(L))
    invalid = sum(kinds.values())
    if invalid:
        verdict = "invalid"
    elif pvalue < common["level"]:
        verdict = "lossy"
    elif detectable > common["detect_tv"] * (1 + 1e-12):  # the token-level audit's rule
        verdict = "inconclusive"
    else:
        verdict = "passed"
    return dict(
        lossless=verdict == "passed", pvalue=pvalue, tv=tv, tv_upper=float(tv_upper),
        acceptance=mean_k, acceptance_ci95=(mean_k - half, mean_k + half), alpha_star=bound,
        samples=samples, worst_tokens=_worst(observed, p_ext, common["vocab"], L + 1),
        detectable_tv=detectable, optimum_pvalue=opt, mode="sampled", verdict=verdict,
        block_efficiency=mean_k + 1, block_efficiency_ci95=(mean_k + 1 - half, mean_k + 1 + half),
        violations=kinds, invalid_mass=invalid / samples, violation_examples=examples)


def _exact(law, P, Q, V, L, tree, step, p_full, bound, max_seconds, t0, common):
    nodes = sum(math.prod(tree.branching[:d + 1]) for d in range(L))
    count = tree.count_draws(V)
    if count > MAX_TREES:
        raise ProblemTooLargeError(
            f"exact mode would enumerate V^nodes = {V}^{nodes} = {count:.3g} draft arrays, over "
            f"{MAX_TREES:,}; audit the sampler instead")
    L1, N = L + 1, V ** (L + 1)
    cont = np.ones((L1 + 1, N))  # cont[m, y]: fresh target tokens complete y_{1:m} to y
    for m in range(L1 - 1, 0, -1):
        cont[m] = cont[m + 1] * step[m]
    lhs = np.zeros(N)
    stray, efficiency = 0.0, 0.0
    kinds: dict[str, float] = {}
    examples: list[dict] = []
    t_pilot = time.perf_counter()
    trees = list(tree.enumerate(Q, V))
    for i, (drafts, w) in enumerate(trees):
        _pilot(law, i, min(PILOT_CALLS, len(trees) - 1), t_pilot, len(trees), max_seconds)
        drafts.setflags(write=False)
        try:
            out = CALLS.call(None, drafts, law, P, Q, drafts)  # (watchdog)
        except _USER_ERRORS as exc:  # the user's code may raise anything
            raise InvalidInputError(
                f"VERIFIER {_describe(law)} raised {_one_line(exc)} on drafts {drafts.tolist()}") from None
        items = _law_items(law, out, drafts)
        prefixes = _prefixes(drafts)
        for key, mass in items:
            if mass == 0:
                continue
            block, reason = _check_block(key, prefixes, V, L)
            if reason is not None:
                kinds[reason] = kinds.get(reason, 0.0) + w * mass
                if len(examples) < SHOW_VIOLATIONS:
                    examples.append({"drafts": drafts.tolist(), "block": _short(key), "reason": reason,
                                     "probability": mass})
            if block is None:
                stray += w * mass
                continue
            m = len(block)
            span = V ** (L1 - m)
            start = _index(block, V) * span
            lhs[start:start + span] += w * mass * cont[m, start:start + span]
            efficiency += w * mass * m
    tv = 0.5 * (float(np.abs(lhs - p_full).sum()) + stray)
    invalid, efficiency = float(sum(kinds.values())), float(efficiency)
    kinds = {r: float(v) for r, v in kinds.items()}
    verdict = "invalid" if invalid > 0 else "lossless" if tv <= EXACT_TOL else "lossy"
    k = efficiency - 1
    return BlockAuditResult(
        lossless=verdict == "lossless", pvalue=None, tv=tv, tv_upper=tv, acceptance=k,
        acceptance_ci95=(k, k), alpha_star=bound, samples=None,
        worst_tokens=_worst(np.append(lhs, stray), np.append(p_full, 0.0), V, L1),
        detectable_tv=0.0, optimum_pvalue=None, mode="exact", seed=None,
        seconds=time.perf_counter() - t0, verdict=verdict, block_efficiency=efficiency,
        block_efficiency_ci95=(efficiency, efficiency), violations=kinds, invalid_mass=invalid,
        violation_examples=examples, **common)


def _law_items(law, out, drafts) -> list[tuple]:
    """The (block, probability) pairs of a law form's output, checked to be a probability law."""
    bad = InvalidInputError(
        f"VERIFIER {_describe(law)} on drafts {drafts.tolist()} did not return a law: a mapping "
        f"{{block tuple: probability}} of finite non-negative probabilities summing to one, got "
        f"{_short(out)}")
    if not isinstance(out, Mapping):
        raise bad
    try:
        items = [(k, float(v)) for k, v in out.items()]
    except (TypeError, ValueError):
        raise bad from None
    masses = np.array([v for _, v in items])
    tol = row_tolerance(np.asarray(list(out.values())))
    if not (masses.size and np.isfinite(masses).all() and masses.min() >= -1e-12
            and abs(masses.sum() - 1) <= tol):
        raise bad
    return items


def _worst(observed: np.ndarray, expected: np.ndarray, V: int, L1: int) -> list[dict]:
    dev = np.abs(observed - expected)
    out = []
    for i in np.argsort(-dev, kind="stable")[:SHOW_WORST].tolist():
        if dev[i] > 0:
            seq = "not completable" if i == V ** L1 else \
                [(i // V ** (L1 - 1 - j)) % V for j in range(L1)]
            out.append({"sequence": seq, "expected": float(expected[i]),
                        "observed": float(observed[i])})
    return out
