"""Audit anyone's verifier: is its output law the target p, and how close is its acceptance to α*?

A multi-draft verifier is *lossless* when its output Y has law p whatever the draft model, and its
acceptance is at most the optimum :math:`\\alpha^* = 1 + \\min_T [p(T) - Q(T)]` (Khisti et al.,
ICLR 2025, Thm 2; Hu et al., ICLR 2025). :func:`audit` takes a verifier written by anyone, in one of
three forms, and checks it:

* **sampled** (default): ``f(p, q, drafts, rng) -> token`` or ``-> (token, accepted)``, called once
  per draft tuple drawn by the audit; the output counts are tested against p.
* **exact**: a :class:`mdtheory.rules.SelectionRule` subclass, or (``exact=True``) a function
  ``law(p, q, drafts) -> (accept, residual)`` in the rules' convention (two sub-probability vectors
  summing to one: the output law given the drafts, split by whether a draft was accepted). Every
  draft tuple is enumerated: exact TV and exact acceptance.
* **torch** (``torch=True``): ``f(p, q, drafts, generator) -> tokens`` (or ``(tokens, accepted)``) on
  (B, V) / (B, n) tensors, or a :class:`mdtheory.torch_bridge.TorchRule` subclass (prepared once per
  position). :func:`mdtheory.audit.crossval.cross_validate` is this audit applied to the built-in
  torch rules.

Statistics (sampled and torch forms), per position with N samples: Pearson's chi-square test of
the output counts against p, tokens with expected count below :data:`MIN_EXPECTED` pooled into one
cell, a token with p = 0 that comes out rejecting outright (p-value 0); several positions:
Bonferroni. The default N (:func:`samples_for`) detects every deviation of TV at least
:data:`TARGET_TV` with probability :data:`POWER`; :func:`detectable_tv` states what a given N
detects; ``tv`` is the plug-in estimate and ``tv_upper`` a 95% upper bound. The derivations (power
bound, sample-size rule, the bias of ``tv``, the inversion behind ``tv_upper``) are in
papers/theory.md, section "The audit's statistics".

References
----------
Khisti et al., "Multi-draft speculative sampling: canonical decomposition and theoretical limits",
ICLR 2025 (Thm 1: one speculative step against the candidate's exact marginal is lossless; Thm 2: α*).
Hu et al., "Towards optimal multi-draft speculative decoding", ICLR 2025 (α* as an optimal transport
problem).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import operator
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from .. import _budget
from .._validate import as_distribution, as_drafts, batch_rows
from ..errors import InvalidDistributionError, InvalidInputError, ProblemTooLargeError
from ..models.registry import SAMPLINGS as _MODELS
from ..models.registry import make_draft_model, sampling_names
from ..result import Result
from ..solve import optimal_acceptance
from .statistics import (
    DEFAULT_LEVEL,
    MAX_SAMPLES,
    TARGET_TV,
    _tv_upper,
    _wilson,
    bonferroni,
    detectable_tv,
    law_test,
    samples_for,
    z_pvalues,
)
from .watchdog import CALLS

if TYPE_CHECKING:
    from ..rules.base import SelectionRule

__all__ = ["audit", "AuditResult", "load_target"]

#: Exact mode: an output law within this TV of p counts as lossless (float64 round-off).
EXACT_TOL = 1e-9
#: Sampled form: calls of the target timed to estimate the whole audit (``max_seconds``).
PILOT_CALLS = 100
#: Exit code of ``mdtheory audit`` for an inconclusive run (too few samples for ``--detect-tv``).
EXIT_INCONCLUSIVE = 5
#: During the pilot, the pace is judged after every call once the calls so far took this fraction
#: of ``max_seconds`` (slow calls are refused after a few, not after :data:`PILOT_CALLS`).
PILOT_EARLY = 0.1
#: After the pilot, the audit's pace is re-checked this often (seconds).
PACE_EVERY = 0.25
#: Tokens listed in ``worst_tokens``.
SHOW_WORST = 5


def audit_samplings(torch: bool = False) -> tuple[str, ...]:
    """The draft models :func:`audit` draws, by name: for the numpy forms every registered model
    built from one law q and n (:attr:`~mdtheory.models.base.DraftModel.single_q`), for the torch form
    those that are a ``torch.multinomial`` draw."""
    if torch:
        return sampling_names(lambda cls: cls.single_q and cls.torch_replacement is not None)
    return sampling_names(lambda cls: cls.single_q)


@dataclass
class AuditResult(Result):
    """What :func:`audit` found (a :class:`~mdtheory.result.Result`: ``status`` is the verdict,
    ``success`` is ``lossless``).

    Attributes
    ----------
    lossless : bool
        The run shows the verifier lossless: exact mode, exact TV <= :data:`EXACT_TOL`; sampled,
        the output-law test did not reject at ``level`` *and* the run detects every TV of at least
        ``detect_tv`` with probability :data:`POWER` (``detectable_tv <= detect_tv``). False for a
        lossy verifier and for an inconclusive run alike: read ``verdict``.
    verdict : {"lossless", "lossy", "inconclusive"}
        ``"inconclusive"``: not rejected, but too few samples to detect TV ``detect_tv``.
    pvalue : float or None
        Of the output-law test, Bonferroni-adjusted over positions; None in exact mode.
    tv, tv_upper : float
        Plug-in estimate of TV(output law, p) and a 95% upper confidence bound (the largest over
        positions); both exact in exact mode.
    acceptance : float
        Fraction of steps that accepted a draft (mean over positions).
    acceptance_ci95 : (float, float)
        Wilson interval (a point in exact mode).
    alpha_star : float
        Optimal acceptance of the draft model (mean over positions).
    samples : int or None
        Verification steps per position; None in exact mode.
    worst_tokens : list of dict
        The tokens whose observed frequency deviates most from p: ``token``, ``position``,
        ``expected``, ``observed``.
    detectable_tv : float
        The TV this run detects with probability :data:`POWER` (0 in exact mode).
    detect_tv : float
        The TV the run was asked to detect (:data:`TARGET_TV` by default; it sizes the default
        ``samples``).
    optimum_pvalue : float or None
        One-sided test that acceptance exceeds α* (impossible for a lossless verifier that counts
        only drafted outputs as accepted); None in exact mode.
    mode, sampling, drafts, vocab, positions, level, seed, seconds, target
        How the audit ran.
    """

    lossless: bool
    pvalue: float | None
    tv: float
    tv_upper: float
    acceptance: float
    acceptance_ci95: tuple[float, float]
    alpha_star: float
    samples: int | None
    worst_tokens: list = field(default_factory=list)
    detectable_tv: float = 0.0
    optimum_pvalue: float | None = None
    verdict: str = ""
    detect_tv: float = TARGET_TV
    mode: str = "sampled"
    sampling: str = "iid"
    drafts: int = 1
    vocab: int = 0
    positions: int = 1
    level: float = DEFAULT_LEVEL
    seed: int | None = 0
    seconds: float = 0.0
    target: str = ""
    per_position: list = field(default_factory=list, repr=False)

    @property
    def status(self) -> str:
        """The verdict."""
        return self.verdict

    @property
    def success(self) -> bool:
        """Whether the run shows the verifier lossless (``lossless``)."""
        return bool(self.lossless)

    @property
    def message(self) -> str:
        what = {"lossless": f"lossless: TV {self.tv:.3g}",
                "passed": f"passed: no evidence of loss; this run detects TV >= {self.detectable_tv:.3g}",
                "lossy": f"lossy: TV {self.tv:.3g}",
                "inconclusive": f"inconclusive: this run detects TV >= {self.detectable_tv:.3g}, not "
                                f"{self.detect_tv:g}",
                "invalid": "invalid: the verifier emitted structurally invalid output"}
        return what.get(self.verdict, self.verdict)


# ---------------------------------------------------------------------------------------- targets
#: What a target's code may raise that the audit reports as a bad verifier (exit 2): any exception,
#: and sys.exit(), which would otherwise end the audit with the target's exit code and no verdict.
_USER_ERRORS = (Exception, SystemExit)


def load_target(spec: str):
    """Import ``path/to/file.py:NAME`` or ``module:NAME`` and return the named object.

    Raises
    ------
    InvalidInputError
        A malformed spec, a missing file or module, an import that raised, or no such name.
    """
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name.isidentifier():
        raise InvalidInputError(f"VERIFIER {spec!r} must be FILE.py:NAME or MODULE:NAME")
    try:
        if path.endswith(".py"):
            file = Path(path)
            if not file.is_file():
                raise InvalidInputError(f"VERIFIER {spec}: no such file: {path}")
            mod_name = f"_mdtheory_audit_{file.stem}"
            loader = importlib.util.spec_from_file_location(mod_name, file)
            module = importlib.util.module_from_spec(loader)
            sys.modules[mod_name] = module  # dataclasses and pickling look the module up
            loader.loader.exec_module(module)
        else:
            module = importlib.import_module(path)
    except InvalidInputError:
        raise
    except _USER_ERRORS as exc:  # the user's module may raise anything while importing
        raise InvalidInputError(
            f"VERIFIER {spec}: cannot import {path}: {_one_line(exc)}"
        ) from None
    try:
        obj = getattr(module, name)
    except AttributeError:
        raise InvalidInputError(f"VERIFIER {spec}: {path} has no {name!r}") from None
    if not callable(obj):
        raise InvalidInputError(f"VERIFIER {spec}: {name!r} is a {type(obj).__name__}, not callable")
    return obj


def _readonly(x: np.ndarray) -> np.ndarray:
    """A read-only copy: a target cannot corrupt the audit's p and q."""
    x = x.copy()
    x.setflags(write=False)
    return x


def _describe(f) -> str:
    return getattr(f, "__qualname__", None) or type(f).__name__


def _one_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: " + " ".join(str(exc).split())


def _raised(f, exc: Exception, drafts, position: int) -> InvalidInputError:
    return InvalidInputError(
        f"VERIFIER {_describe(f)} raised {_one_line(exc)} on drafts "
        f"{tuple(int(x) for x in drafts)} (position {position})"
    )


def _token(out, V: int, drafts) -> tuple[int, bool]:
    """Validate one sampled output: (token, accepted)."""
    if isinstance(out, tuple) and len(out) == 2:
        tok, acc = out
        if not (isinstance(acc, (bool, np.bool_))
                or isinstance(acc, (int, np.integer)) and acc in (0, 1)):
            raise TypeError(f"accepted must be a bool (or 0/1), got {acc!r}")
        accepted = bool(acc)
    else:
        tok, accepted = out, None
    if isinstance(tok, (bool, np.bool_)):
        raise TypeError("a bool")
    tok = operator.index(tok)
    if not 0 <= tok < V:
        raise ValueError(f"token {tok} is outside 0..{V - 1}")
    return tok, (tok in drafts) if accepted is None else accepted


def _pilot_check(f, calls: int, seconds: float, total: int, max_seconds: float | None) -> None:
    """Refuse the audit if ``total`` calls at the pilot's pace exceed ``max_seconds``."""
    if max_seconds is None:
        return
    _budget.require(_budget.Estimate(
        f"audit of {_describe(f)}: {total:,} verifier calls at {seconds / calls * 1e6:.3g} us "
        f"each (timed on the first {calls})", total * seconds / calls), max_seconds)


def _pilot(f, i: int, last: int, t0: float, total: int, max_seconds: float | None) -> None:
    """The pilot's check before call ``i`` (``i`` calls made since ``t0``): at its end (``last``),
    and before every call up to it once the calls so far took :data:`PILOT_EARLY` of
    ``max_seconds``, so that slow calls are refused within about the limit plus one call."""
    if max_seconds is None or not 0 < i <= last:
        return
    seconds = time.perf_counter() - t0
    if i == last or seconds >= PILOT_EARLY * max_seconds:
        _pilot_check(f, i, seconds, total, max_seconds)


def _pace_check(f, calls: int, seconds: float, total: int, max_seconds: float | None) -> None:
    """Stop the audit once ``calls`` calls took ``seconds`` and the pace so far projects ``total``
    calls past ``max_seconds`` (a verifier that slows down after the pilot)."""
    if max_seconds is None or calls <= 0:
        return
    projected = max(seconds, total * seconds / calls)
    if projected > max_seconds:
        raise ProblemTooLargeError(
            f"audit of {_describe(f)} stopped after {calls:,} of {total:,} verifier calls in "
            f"{_budget.fmt_seconds(seconds)}: at this pace the audit takes "
            f"{_budget.fmt_seconds(projected)}, over the limit of {_budget.fmt_seconds(max_seconds)} "
            "(the verifier slowed down after its first calls); raise it with --max-seconds")


def _run_sampled(fs, P, models, samples, seed, max_seconds=None, quiet=True):
    """counts (B, V) and accepted hits (B,) of numpy verifiers (one per position), called once per
    draft tuple; refused after :data:`PILOT_CALLS` calls if the whole is estimated over
    ``max_seconds``; a progress bar on a terminal unless ``quiet``. The draft tuples are drawn in
    chunks whose sampling buffers (n per tuple, or V for Gumbel-top-k) stay under
    :data:`~mdtheory._budget.CHUNK_BYTES`, so memory does not grow with ``samples``."""
    from .._progress import progress

    B, V = P.shape
    chunk = max(1, min(_budget.mc_chunk(V), _budget.CHUNK_BYTES // (8 * models[0].n)))
    draft_rng, rule_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    counts, hits = np.zeros((B, V), dtype=np.int64), np.zeros(B, dtype=np.int64)
    bar = progress(None, B * samples, "audit", quiet)
    t0, checked = 0.0, 0.0
    for b, (f, model) in enumerate(zip(fs, models, strict=True)):
        p, q = _readonly(P[b]), _readonly(model.q)
        tokens = np.empty(samples, dtype=np.int64)
        acc = 0
        t0 = t0 or time.perf_counter()  # the pilot times the target's calls only
        for i in range(samples):
            if i % chunk == 0:
                sampled = model.sample(draft_rng, min(chunk, samples - i))
                sampled.setflags(write=False)
            x = sampled[i % chunk]
            if b == 0:
                _pilot(f, i, min(PILOT_CALLS, samples - 1), t0, B * samples, max_seconds)
            if max_seconds is not None and (b or i > PILOT_CALLS):  # the pace, re-checked
                now = time.perf_counter()
                if now - checked >= PACE_EVERY:
                    checked = now
                    _pace_check(f, b * samples + i, now - t0, B * samples, max_seconds)
            if bar is not None and i % 1024 == 0:
                bar.update(min(1024, samples - i))
            try:
                out = CALLS.call(b, x, f, p, q, x, rule_rng)  # (a call that hangs: watchdog)
            except _USER_ERRORS as exc:  # anything the user's code raises is bad input to the audit
                raise _raised(f, exc, x, b) from None
            try:
                tokens[i], ok = _token(out, V, x.tolist())
            except (TypeError, ValueError) as exc:
                raise InvalidInputError(
                    f"VERIFIER {_describe(f)} returned {out!r} on drafts {tuple(x.tolist())} "
                    f"(position {b}); expected a token in 0..{V - 1} or (token, accepted): {exc}"
                ) from None
            acc += ok
        counts[b] = np.bincount(tokens, minlength=V)
        hits[b] = acc
    if bar is not None:
        bar.close()
    return counts, hits


def _run_torch(f, P, Q, n, sampling, samples, seed, device, dtype, quiet=True):
    """counts (B, V) and hits (B,) of a batched torch verifier (a function or a TorchRule class);
    an allocation torch refuses (CPU or GPU) is a :class:`ProblemTooLargeError`; a progress bar on
    a terminal unless ``quiet``."""
    from ..torch_bridge import rules as tb_rules
    from ..torch_bridge import tensors as tb

    torch = tb._torch()
    tb.check_device(device)
    try:
        return _torch_steps(torch, tb_rules, f, P, Q, n, sampling, samples, seed, device, dtype, quiet)
    except RuntimeError as exc:  # torch.OutOfMemoryError (GPU) or the CPU allocator's message
        if not (isinstance(exc, getattr(torch, "OutOfMemoryError", ())) or "allocate" in str(exc)):
            raise
        raise ProblemTooLargeError(
            f"out of memory on {device} with {P.shape[0]} positions x {samples} steps of n = {n} "
            f"drafts over V = {P.shape[1]}: {' '.join(str(exc).split())[:200]}"
        ) from None


def _torch_steps(torch, tb_rules, f, P, Q, n, sampling, samples, seed, device, dtype, quiet):
    from .._progress import progress

    dtype = dtype or torch.float64
    gen = torch.Generator(device=device).manual_seed(int(seed))
    Pt = torch.as_tensor(P, dtype=dtype, device=device)
    Qt = torch.as_tensor(Q, dtype=dtype, device=device)
    B, V = P.shape
    prepared = f(Pt, Qt, n) if isinstance(f, type) and issubclass(f, tb_rules.TorchRule) else None
    per_call = _budget.torch_steps_per_call(B, samples, V, n)
    counts = torch.zeros(B, V, dtype=torch.float64, device=device)
    hits = torch.zeros(B, dtype=torch.float64, device=device)
    done = 0
    bar = progress(None, B * samples, f"audit {_describe(f)}", quiet)
    while done < samples:
        m = min(per_call, samples - done)
        q_rows = Qt.repeat_interleave(m, dim=0)
        drafts = torch.multinomial(q_rows, n, replacement=_MODELS[sampling].torch_replacement,
                                   generator=gen)
        try:
            if prepared is not None:
                out = prepared.repeat_rows(m).step(drafts, gen)
            else:
                out = f(Pt.repeat_interleave(m, dim=0), q_rows, drafts, gen)
        except _USER_ERRORS as exc:  # the user's code may raise anything
            first = tuple(drafts[0].tolist())
            raise InvalidInputError(
                f"VERIFIER {_describe(f)} raised {_one_line(exc)} on a batch of "
                f"{B * m} draft tuples (first {first})"
            ) from None
        tokens, accepted = out if isinstance(out, tuple) else (out, None)
        if not hasattr(tokens, "shape") or tuple(tokens.shape) != (B * m,) \
                or tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
            raise InvalidInputError(
                f"VERIFIER {_describe(f)} returned {getattr(tokens, 'dtype', type(tokens).__name__)} "
                f"of shape {tuple(getattr(tokens, 'shape', ()))}; expected integer tokens ({B * m},)"
            )
        tokens = tokens.long()
        if tokens.min() < 0 or tokens.max() >= V:
            bad = int(torch.nonzero((tokens < 0) | (tokens >= V))[0, 0])
            raise InvalidInputError(
                f"VERIFIER {_describe(f)} returned token {int(tokens[bad])} outside 0..{V - 1} on "
                f"drafts {tuple(drafts[bad].tolist())} (position {bad // m})"
            )
        if accepted is None:
            accepted = (drafts == tokens[:, None]).any(dim=1)
        counts.scatter_add_(1, tokens.reshape(B, m),
                            torch.ones(B, m, dtype=torch.float64, device=device))
        hits += accepted.reshape(B, m).double().sum(dim=1)
        done += m
        if bar is not None:
            bar.update(B * m)
    if bar is not None:
        bar.close()
    return counts.cpu().numpy().astype(np.int64), hits.cpu().numpy().astype(np.int64)


def _run_exact(laws_by_position, P, models):
    """Exact output laws (B, V) and acceptances (B,) by enumerating the draft tuples."""
    from ..rules.base import MAX_ENUMERATION

    B, V = P.shape
    laws, acc = np.zeros((B, V)), np.zeros(B)
    for b, (law, model) in enumerate(zip(laws_by_position, models, strict=True)):
        count = model.count_tuples()
        if count > MAX_ENUMERATION:
            raise InvalidInputError(
                f"exact mode would enumerate {count:.3g} draft tuples at position {b}, over "
                f"{MAX_ENUMERATION:g}; audit the sampler instead"
            )
        tuples = model.tuple_law()
        p, q = _readonly(P[b]), _readonly(model.q)
        for x, w in zip(tuples.tuples, tuples.probs, strict=True):
            try:
                a, r = CALLS.call(b, x, law, p, q, x)
            except _USER_ERRORS as exc:  # the user's code may raise anything
                raise _raised(law, exc, x, b) from None
            a, r = np.asarray(a, dtype=float), np.asarray(r, dtype=float)
            total = a.sum() + r.sum() if a.shape == r.shape == (V,) else np.nan
            if not (abs(total - 1) <= 1e-9 and np.isfinite(a).all() and np.isfinite(r).all()
                    and a.min() >= -1e-12 and r.min() >= -1e-12):
                raise InvalidInputError(
                    f"VERIFIER {_describe(law)} on drafts {tuple(x.tolist())} (position {b}) did not "
                    f"return (accept, residual): two non-negative vectors of shape ({V},) summing "
                    "to one"
                )
            laws[b] += w * (a + r)
            acc[b] += w * a.sum()
    return laws, acc


# ---------------------------------------------------------------------------------------- front door
def _rows(x, name: str, normalize: bool) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim not in (1, 2):
        raise InvalidDistributionError(f"{name} has shape {arr.shape}; expected (V,) or (B, V)")
    return np.atleast_2d(as_distribution(arr, name, normalize=normalize, ndim=arr.ndim))


def _worst(observed: np.ndarray, P: np.ndarray) -> list[dict]:
    dev = np.abs(observed - P)
    flat = np.argsort(-dev, axis=None, kind="stable")[:SHOW_WORST]
    out = []
    for i in flat:
        b, y = divmod(int(i), P.shape[1])
        if dev[b, y] > 0:
            out.append({"token": y, "position": b, "expected": float(P[b, y]),
                        "observed": float(observed[b, y])})
    return out


def audit(f: Callable | type, p: ArrayLike, q: ArrayLike, n: int, *, sampling: str | None = None,
          samples: int | None = None, seed: int = 0, level: float = DEFAULT_LEVEL,
          exact: bool = False, torch: bool = False, device: str = "cpu", dtype: Any = None,
          normalize: bool = False, max_seconds: float | None = _budget.MAX_SECONDS,
          max_bytes: float = _budget.MAX_BYTES, detect_tv: float = TARGET_TV,
          quiet: bool = True) -> AuditResult:
    """Audit a multi-draft verifier: is its output law p, and how far is its acceptance from α*?

    Parameters
    ----------
    f : callable or class
        The verifier. Sampled form ``f(p, q, drafts, rng) -> token | (token, accepted)`` with p, q
        read-only float64 (V,), drafts int64 (n,), rng a :class:`numpy.random.Generator`. A
        :class:`~mdtheory.rules.SelectionRule` subclass is prepared per position and audited
        exactly (by enumeration), or sampled when ``samples`` is given or the draft tuples are more
        than ``mdtheory.rules.base.MAX_ENUMERATION``. With
        ``exact=True``, ``f(p, q, drafts) -> (accept, residual)``. With ``torch=True``,
        ``f(p, q, drafts, generator) -> tokens | (tokens, accepted)`` on (B, V), (B, n) tensors, or a
        :class:`~mdtheory.torch_bridge.TorchRule` subclass. Without an accepted flag, a step counts as
        accepted when its output is one of its drafts.
    p, q : array_like, shape (V,) or (B, V)
        Target and draft distributions; B positions (a single row broadcasts).
    n : int
        Number of drafts.
    sampling : str, optional
        Draft model (default iid; a SelectionRule's own model): any registered model built from one
        law q (:func:`audit_samplings`), for the torch form one that ``torch.multinomial`` draws.
    samples : int, optional
        Verification steps per position; default :func:`samples_for` at ``detect_tv``.
    seed : int
        Seed of the draws, an integer >= 0.
    level : float
        Level of the output-law test (Bonferroni over positions).
    exact, torch : bool
        Select the exact or the batched torch form (see above).
    device, dtype
        Torch form only: where the rows live (default cpu, float64).
    normalize : bool
        Rescale p and q that do not sum to one.
    max_seconds : float or None
        Sampled form: the target is timed on its first :data:`PILOT_CALLS` calls and the audit is
        refused (:class:`~mdtheory.errors.ProblemTooLargeError`, stating the estimate) if all
        positions x samples calls would take longer (judged after every call once the pilot has
        taken :data:`PILOT_EARLY` of the limit, so slow calls stop it early); the pace is re-checked every
        :data:`PACE_EVERY` seconds after that, and the audit stopped the same way once the calls so
        far project past the limit. Default 60 s, as the CLI's; None: no limit.
    max_bytes : float
        Limit of the estimated working memory (the exact mode's enumeration, the torch form's
        batches), checked before any work. Default 4 GiB.
    detect_tv : float
        The run must detect every TV(output, p) of at least this with probability :data:`POWER`
        for a verdict of lossless (it sizes the default ``samples``); fewer samples that do not
        reject give ``verdict="inconclusive"`` and ``lossless=False``. Default :data:`TARGET_TV`.
    quiet : bool
        Sampled form: no progress bar (one is shown on stderr when it is a terminal).

    Returns
    -------
    AuditResult

    Raises
    ------
    InvalidInputError
        Bad distributions or options, a target that raises (the draft tuple is named) or returns
        something other than a token.

    Examples
    --------
    >>> def first(p, q, drafts, rng):  # always accept the first draft: lossless only if p = q
    ...     return int(drafts[0])
    >>> audit(first, [0.5, 0.5], [0.5, 0.5], 2, samples=2000, detect_tv=0.05).verdict
    'lossless'
    >>> audit(first, [0.5, 0.5], [0.5, 0.5], 2, samples=2000).verdict  # TV 0.02 needs 9,431
    'inconclusive'
    >>> audit(first, [0.9, 0.1], [0.5, 0.5], 2, samples=2000).verdict
    'lossy'
    """
    from ..rules.base import MAX_ENUMERATION, SelectionRule

    t0 = time.perf_counter()
    n = as_drafts(n)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidInputError(f"seed must be an integer >= 0, got {seed!r}")
    if not 0 < level < 1:
        raise InvalidInputError(f"the level must be in (0, 1), got {level}")
    if isinstance(detect_tv, bool) or not isinstance(detect_tv, (int, float, np.floating)) \
            or not 0 < detect_tv <= 1:
        raise InvalidInputError(f"the TV to detect must be in (0, 1], got {detect_tv!r}")
    max_seconds = _budget.check_limit(max_seconds, "max_seconds")
    max_bytes = _budget.check_limit(max_bytes, "max_bytes")
    max_bytes = math.inf if max_bytes is None else max_bytes
    if exact and torch:
        raise InvalidInputError("choose one of exact and torch")
    rule_cls = f if isinstance(f, type) and issubclass(f, SelectionRule) else None
    if rule_cls is not None and torch:
        raise InvalidInputError(f"{rule_cls.__name__} is a numpy SelectionRule, not a torch verifier")
    if rule_cls is not None and sampling not in (None, rule_cls.sampling):
        raise InvalidInputError(
            f"{rule_cls.__name__} draws {rule_cls.sampling} drafts; sampling={sampling!r} contradicts it"
        )
    sampling = sampling or (rule_cls.sampling if rule_cls else "iid")
    if rule_cls is None and sampling not in (valid := audit_samplings(torch)):
        raise InvalidInputError(f"unknown sampling {sampling!r}; valid choices: {', '.join(valid)}")
    P, Q = _rows(p, "p", normalize), _rows(q, "q", normalize)
    if P.shape[1] != Q.shape[1]:
        raise InvalidDistributionError(f"p has {P.shape[1]} tokens but q has {Q.shape[1]}")
    B = batch_rows(len(P), len(Q))
    P, Q = np.broadcast_to(P, (B, P.shape[1])).copy(), np.broadcast_to(Q, (B, Q.shape[1])).copy()
    if rule_cls is not None:
        rules = [rule_cls(P[b], Q[b], n) for b in range(B)]
        models = [r.model for r in rules]
    else:
        models = [make_draft_model(Q[b], n, sampling) for b in range(B)]
    alphas = np.array([optimal_acceptance(P[b], m).value for b, m in enumerate(models)])
    common = {"sampling": sampling, "drafts": n, "vocab": P.shape[1], "positions": B,
              "level": level, "target": _describe(f), "detect_tv": float(detect_tv)}

    if exact or (rule_cls is not None and not torch and samples is None
                 and all(m.count_tuples() <= MAX_ENUMERATION for m in models)):
        laws_by_position = [f] * B if rule_cls is None else [_conditional(r) for r in rules]
        count = sum(float(m.count_tuples()) for m in models)
        _budget.require(_budget.enumeration(count, n, P.shape[1]),
                        math.inf if max_seconds is None else max_seconds, max_bytes=max_bytes,
                        flag="max_seconds")
        with CALLS.armed(max_seconds, f"audit of {_describe(f)}"):
            laws, acc = _run_exact(laws_by_position, P, models)
        tv_rows = 0.5 * np.abs(laws - P).sum(axis=1)
        tv = float(tv_rows.max())
        return AuditResult(
            lossless=tv <= EXACT_TOL, verdict="lossless" if tv <= EXACT_TOL else "lossy",
            pvalue=None, tv=tv, tv_upper=tv, acceptance=float(acc.mean()),
            acceptance_ci95=(float(acc.mean()), float(acc.mean())), alpha_star=float(alphas.mean()),
            samples=None, worst_tokens=_worst(laws, P), detectable_tv=0.0, mode="exact", seed=None,
            seconds=time.perf_counter() - t0,
            per_position=[{"tv": float(t), "acceptance": float(a), "alpha_star": float(s)}
                          for t, a, s in zip(tv_rows, acc, alphas, strict=True)],
            **common)

    if samples is None:
        samples = max(samples_for(detect_tv, P[b], level, B) for b in range(B))
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) \
            or not 10 <= samples <= MAX_SAMPLES:
        raise InvalidInputError(f"samples must be an integer in 10..{MAX_SAMPLES}, got {samples!r}")
    samples = int(samples)
    V = P.shape[1]
    if torch:  # the draft tuples and rows of one call (time: a user's verifier is not modelled)
        _budget.require(_budget.Estimate(f"audit --torch of {_describe(f)}", 0.0,
                                         _budget.batched_steps(B, samples, V, n).bytes),
                        max_bytes=max_bytes)
        counts, hits = _run_torch(f, P, Q, n, sampling, samples, seed, device, dtype, quiet)
        mode = "torch"
    else:
        samplers = [f] * B if rule_cls is None else [_select(r) for r in rules]
        with CALLS.armed(max_seconds, f"audit of {_describe(f)}"):
            counts, hits = _run_sampled(samplers, P, models, samples, seed, max_seconds, quiet)
        mode = "sampled"
    return _summarise(counts, hits, P, alphas, samples, seed, mode, t0, common)


def _conditional(rule: SelectionRule):
    """A prepared rule's exact law in the ``law(p, q, drafts)`` convention."""
    def law(p, q, drafts):
        return rule.conditional(drafts)
    law.__qualname__ = type(rule).__qualname__
    return law


def _select(rule: SelectionRule):
    """A prepared rule as a sampled verifier ``f(p, q, drafts, rng)``."""
    def select(p, q, drafts, rng):
        return rule.select(drafts, rng)
    select.__qualname__ = type(rule).__qualname__
    return select


def _summarise(counts, hits, P, alphas, samples, seed, mode, t0, common) -> AuditResult:
    B = P.shape[0]
    level = common["level"]
    pvals = np.array([law_test(c, p) for c, p in zip(counts, P, strict=True)])
    observed = counts / samples
    tv_rows = 0.5 * np.abs(observed - P).sum(axis=1)
    upper = np.maximum([_tv_upper(c, p, 0.05 / B) for c, p in zip(counts, P, strict=True)], tv_rows)
    acc_rows = hits / samples
    opt = z_pvalues(acc_rows, alphas, samples, side="greater")
    pvalue = bonferroni(pvals)
    detectable = max(detectable_tv(p, samples, level, B) for p in P)
    verdict = "lossy" if pvalue < level else \
        "lossless" if detectable <= common["detect_tv"] * (1 + 1e-12) else "inconclusive"
    return AuditResult(
        lossless=verdict == "lossless", verdict=verdict, pvalue=pvalue, tv=float(tv_rows.max()),
        tv_upper=float(upper.max()), acceptance=float(acc_rows.mean()),
        acceptance_ci95=_wilson(int(hits.sum()), samples * B), alpha_star=float(alphas.mean()),
        samples=samples, worst_tokens=_worst(observed, P),
        detectable_tv=detectable,
        optimum_pvalue=bonferroni(opt), mode=mode, seed=seed, seconds=time.perf_counter() - t0,
        per_position=[{"pvalue": float(pv), "tv": float(t), "tv_upper": float(u),
                       "acceptance": float(a), "alpha_star": float(s)}
                      for pv, t, u, a, s in zip(pvals, tv_rows, upper, acc_rows, alphas, strict=True)],
        **common)
