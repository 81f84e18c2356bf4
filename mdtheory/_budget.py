"""Size estimates for work that may be long or large, checked before it starts; one place for the limits.

Every estimator works from sizes alone (V, n, counts of draft sets or tuples, samples) and allocates
nothing. It returns an :class:`Estimate`: what would run, about how many seconds and how many bytes.
:func:`require` turns an estimate over the limits into a :class:`~mdtheory.errors.ProblemTooLargeError`
that states the estimate and how to raise the limit; the CLI calls it before any work, with
``--max-seconds`` as the time limit.

The seconds are rough: per-unit costs measured on a 2-core x86 machine (numpy 2, HiGHS 1.16,
networkx 3, pycddlib 3) and fitted by a power law; expect a factor of a few either way. They exist to
tell "seconds" from "hours" before starting, not to time anything.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

from .errors import InvalidInputError, ProblemTooLargeError

__all__ = ["Estimate", "require", "check_limit", "combine", "repeated", "fmt_seconds", "fmt_bytes",
           "stored_floats", "mc_chunk", "monte_carlo", "batched_steps", "lm_pairs", "ngram_distillation",
           "enumeration", "capped_power", "prefix_route", "select_route", "closed_form_route",
           "subsets_route", "law_route", "min_norm_point", "mnp_corral_cap", "mnp_run_bytes",
           "acceptance_cone", "verify_claim", "MAX_SECONDS", "MAX_BYTES", "MNP_MAX_ITER", "MNP_FIRST_ROWS",
           "CHUNK_BYTES", "MAX_CHUNK", "TORCH_CHUNK", "TORCH_CELLS", "torch_steps_per_call"]

#: Default time limit of one CLI step (``--max-seconds``).
MAX_SECONDS = 60.0
#: Memory limit of one step's estimated working set.
MAX_BYTES = 4 * 2**30
#: Monte Carlo draws are made in chunks whose draft-sampling buffers stay under this.
CHUNK_BYTES = 32 * 2**20
#: and of at most this many draft tuples.
MAX_CHUNK = 4096
#: Draft tuples per call of a batched torch verifier (``audit --torch``, ``cross-validate``) at most,
TORCH_CHUNK = 1 << 16
#: and cells (a tuple's tokens and drafts) per call at most (whole steps of every position, one at least).
TORCH_CELLS = 1 << 22

# Measured per-unit costs (seconds), see the module docstring.
_MC_STEP = 2e-5          # one verification step's fixed Python overhead
_MC_TOKEN = 3e-8         # per token and per draft in one step (residual updates, sampling)
WOR_PREFIX_TOKEN_SECONDS = 7e-8  # without replacement: per (token, degree) of the one-pass containment,
#                           at least 9 degrees (the kernels compiled for n <= 8 cost the same)
SUBSET_ROW_SECONDS = 1.2e-5     # one containment row of the exhaustive route (generic models)
_LP_COLUMN = 1e-7        # HiGHS transport LP: seconds = _LP_COLUMN * columns ** 1.5
_DUAL_ROW = 3e-6         # HiGHS dual simplex: seconds = _DUAL_ROW * rows ** 1.3
_FLOW_EDGE = 1e-4        # networkx preflow-push, per edge
_CDD_COLUMN = 1.3e-7     # cdd's exact simplex: seconds = _CDD_COLUMN * columns ** 3
_FRACTION_OP = 4e-7      # one Fraction operation
_FRACTION_BYTES = 100.0  # one exact rational held (a Python Fraction, or cdd's GMP entry)
LAW_CELL_SECONDS = 1e-8         # forward pass of a set law, per (set, token) cell
CP_SET_SECONDS = 2e-6           # conditional Poisson set law: one Python step per set
LAW_STEP_SECONDS = 2.5e-4       # forward pass of a set law, per draft (1.9e-4 s measured at V = 3)
_LP_BYTES = 800.0        # HiGHS transport LP: peak bytes per column (570 measured at V = 20, n = 4)
_CDD_REDUNDANCY = 8e-7  # Hall comparison: seconds = _CDD_REDUNDANCY * rows ** 3 * dimension
# mnp (Wolfe's minimum-norm point, mdtheory.routes.mnp): one iteration costs _MNP_STEP + _MNP_CELL per
# (corral vertex, token) + _MNP_CUBE per corral vertex cubed + the model's prefix containments of one
# order; about model.mnp_iterations * sqrt(V) iterations (default MNP_ITER_DEFAULT) with a corral of
# about _MNP_CORRAL * sqrt(V) vertices
_MNP_STEP = 1e-4
# successive sampling's majorant certificate (mdtheory.models.majorant): at most MAJORANT_WORK cells
# (a part of the 2^m parts of W, m <= MAJORANT_EXACT, a prefix, a degree), each a multiply-add
# (2^12 x 466 x 9 cells took 10 ms at V = 465, n = 8)
MAJORANT_WORK = 1 << 25
MAJORANT_EXACT = 14
_MAJORANT_CELL = 1.5e-9
_MNP_CELL = 3e-9
_MNP_CUBE = 4e-11
MNP_ITER_DEFAULT = 15.0  # (a model's own: DraftModel.mnp_iterations)
#: Major iterations (one vertex each) of the minimum-norm-point route at most (:mod:`mdtheory.routes.mnp`).
MNP_MAX_ITER = 10_000
_MNP_CORRAL = 1.5
# Wolfe runs of the mnp route alive at once at most: a free and a face run for each of the three
# raced norms, and a face starting beside the one it replaces
MNP_RUNS = 7
# bytes all the mnp route's runs may reserve for their corrals together (mnp_corral_cap)
MNP_RESERVE = 2.0 * 2**30
#: Corral rows a Wolfe run of the mnp route stores at first (doubled as its corral grows, up to
#: :func:`mnp_corral_cap`).
MNP_FIRST_ROWS = 32
# the mnp memory estimate (min_norm_point): _MNP_HELD runs, each holding storage for twice a corral
# of _MNP_CORRAL_DRAFT * n * sqrt(V) vertices (measured: 3 - 7 runs made, corrals of 0.1 - 2.1 n sqrt(V))
_MNP_HELD = 5
_MNP_CORRAL_DRAFT = 0.5
PRODUCT_TOKEN_SECONDS = 1e-8    # prefix containments of a product model (cumulative sums), per (token, law)
CP_PREFIX_TOKEN_SECONDS = 1e-8  # conditional Poisson: per (token, degree + 4) of the e_j recurrence
CONTAINMENT_SECONDS = 1.5e-5    # one generic containment Q(T) (greedy), plus LAW_CELL_SECONDS per token
_TORCH_ROW = 5e-6        # batched torch rules on the CPU: per (position, step) row of a batch,
_TORCH_DRAFT = 1e-6      # plus per draft (khisti-lp's sequential stages: 0.8 us at n = 512),
_TORCH_CELL = 5e-9       # plus per (draft, token) cell (rrs: 4.7 ns at V = 1000, n = 64),
_TORCH_TOKEN = 5e-8      # plus per token: the call's rows of p, q and the rule's state repeated
#                          (rrs 30 ns, the optimal rule 58 ns at V = 152,000, n = 2)
TORCH_CELL_BYTES = 200.0  # peak address space per (row, token) cell of one batched call (rrs 90,
#                           the optimal rule 264, with 36 and 113 per position and token besides)
AUDIT_TOKEN_SECONDS = 3e-6  # the audit's statistics per (position, token): three pooled chi-square
#                             passes, each a stable sort and a Python loop (3 - 4 us at V = 1e6)
NGRAM_ROW_SECONDS = 2e-6  # n-gram counts: per (position, context length) of the training texts
NGRAM_BPC_SECONDS = 5e-6  # n-gram held-out bits per char: per (strength, position, context length)
SAMPLING_BYTES = 2 * 2**20  # a language model's forward pass on a batch (the char-LSTM: 1.6 MB at 8
#                             texts), besides the laws' 4 x 8 bytes per (text, token)


class Estimate(NamedTuple):
    """What would run, its estimated time (seconds) and working memory (bytes), and a hint that a
    refusal appends (another route, say)."""

    what: str
    seconds: float
    bytes: float = 0.0
    hint: str = ""


def combine(*estimates: Estimate, what: str | None = None) -> Estimate:
    """Estimates of steps run one after the other: times add, the memory is the largest step's.

    ``what`` names the whole (default: the steps' names joined by ``"; "``).
    """
    return Estimate("; ".join(e.what for e in estimates) if what is None else what,
                    sum(e.seconds for e in estimates), max((e.bytes for e in estimates), default=0.0),
                    "; ".join(dict.fromkeys(e.hint for e in estimates if e.hint)))


def capped_power(x: float, e: float) -> float:
    """x ** e for x >= 0, capped near 1e304 instead of raising OverflowError (counts saturate at
    :data:`mdtheory.models.base.COUNT_CAP` = 1e300)."""
    return math.exp(min(e * math.log(x), 700.0)) if x > 0 else 0.0


_pow = capped_power


def _comb(m: int, k: int) -> float:
    """C(m, k) as a float, from log-gamma (capped near 1e304)."""
    return math.exp(min(math.lgamma(m + 1) - math.lgamma(k + 1) - math.lgamma(m - k + 1), 700.0))


def fmt_seconds(s: float) -> str:
    """``0.5 s``, ``2.4 min``, ``3.1 h``, ``4.2e+03 days``."""
    if math.isinf(s):
        return "over 1e+300 days"
    if s < 120:
        return f"{s:.2g} s"
    if s < 7200:
        return f"{s / 60:.2g} min"
    if s < 2 * 86400:
        return f"{s / 3600:.2g} h"
    return f"{s / 86400:.2g} days"


def fmt_bytes(b: float) -> str:
    """``512 B``, ``3.2 MiB``, ``7.3 TiB``."""
    if math.isinf(b):
        return "over 1e+300 TiB"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if b < 1024 or unit == "TiB":
            return f"{b:.3g} {unit}"
        b /= 1024
    raise AssertionError("unreachable")


#: The time limit's name in a refusal (the library's and the command line's) and its memory
#: counterpart.
_FLAGS = {"max_seconds": ("max_seconds (--max-seconds)", "max_bytes (--max-bytes)"),
          "--max-seconds": ("--max-seconds", "--max-bytes")}


def require(est: Estimate, max_seconds: float = MAX_SECONDS, *, max_bytes: float = MAX_BYTES,
            flag: str = "--max-seconds") -> None:
    """Refuse ``est`` if its time is over ``max_seconds`` or its memory over ``max_bytes``.

    Raises
    ------
    ProblemTooLargeError
        Naming what would run, the estimate, the limit and ``flag`` to raise it (the library's
        ``"max_seconds"`` is named with its command-line spelling too; either names its memory
        counterpart, ``max_bytes`` or ``--max-bytes``).
    """
    flag, bytes_flag = _FLAGS.get(flag, (flag, None))
    hint = f"; {est.hint}" if est.hint else ""
    if est.bytes > max_bytes:
        raise ProblemTooLargeError(
            f"{est.what}: estimated {fmt_bytes(est.bytes)} of memory, over the limit of "
            f"{fmt_bytes(max_bytes)}{hint}"
            + (f"; raise it with {bytes_flag} to run it anyway" if bytes_flag else "")
        )
    if est.seconds > max_seconds:
        raise ProblemTooLargeError(
            f"{est.what}: estimated {fmt_seconds(est.seconds)}, over the limit of "
            f"{fmt_seconds(max_seconds)}; raise it with {flag} to run it anyway{hint}"
        )


def limits(max_seconds, max_bytes) -> tuple[float, float]:
    """``max_seconds`` and ``max_bytes`` checked by :func:`check_limit`, None read as infinity (no
    limit).

    Examples
    --------
    >>> limits(None, 2**30)
    (inf, 1073741824.0)
    """
    seconds, nbytes = check_limit(max_seconds, "max_seconds"), check_limit(max_bytes, "max_bytes")
    return (math.inf if seconds is None else seconds), (math.inf if nbytes is None else nbytes)


def check_limit(value, name: str) -> float | None:
    """``value`` checked as a limit named ``name`` (``max_seconds``, ``max_bytes``): None (no limit)
    as is, else a positive real number (infinity: no limit) as a float.

    Raises
    ------
    InvalidInputError
        ``value`` is a bool, not a real number, NaN, zero or negative; the message names ``name``.

    Examples
    --------
    >>> check_limit(2, "max_seconds"), check_limit(None, "max_seconds")
    (2.0, None)
    >>> check_limit(float("nan"), "max_seconds")
    Traceback (most recent call last):
    ...
    mdtheory.errors.InvalidInputError: max_seconds must be a positive number or None, got nan
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or math.isnan(value) or not value > 0:
        raise InvalidInputError(f"{name} must be a positive number or None, got {value!r}")
    return float(value)


def repeated(est: Estimate, times: int) -> Estimate:
    """``est`` done ``times`` times one after the other (the positions of a batch): the time
    multiplied, the memory the same.

    Examples
    --------
    >>> repeated(Estimate("a sort", 2.0, 8.0), 3)
    Estimate(what='a sort, at each of 3 positions', seconds=6.0, bytes=8.0, hint='')
    """
    if times == 1:
        return est
    return est._replace(what=f"{est.what}, at each of {times} positions", seconds=est.seconds * times)


def stored_floats(what: str, count: float) -> Estimate:
    """Memory of ``count`` float64 numbers a preparation would keep (time not counted)."""
    return Estimate(what, 0.0, 8.0 * count)


def mc_chunk(V: int) -> int:
    """Draft tuples per Monte Carlo chunk: sampling allocates up to V floats per tuple, and a chunk
    holds at most :data:`MAX_CHUNK` tuples so that progress is reported every few seconds at most."""
    return max(1, min(MAX_CHUNK, CHUNK_BYTES // (8 * max(V, 1))))


def monte_carlo(samples: int, n: int, V: int) -> Estimate:
    """``samples`` verification steps, drawn in chunks of :func:`mc_chunk` draft tuples."""
    per_step = _MC_STEP + _MC_TOKEN * (n + 1) * V
    return Estimate(f"Monte Carlo over {samples:.3g} samples of n = {n} drafts, V = {V}",
                    samples * per_step, 8.0 * V * min(samples, mc_chunk(V)))


def torch_steps_per_call(batch: int, samples: int, V: int, n: int) -> int:
    """Steps per position in one call of a batched torch verifier: ``batch`` times it is at most
    :data:`TORCH_CHUNK` draft tuples and :data:`TORCH_CELLS` cells (a tuple's V tokens and n
    drafts), one at least."""
    return max(1, min(samples, TORCH_CHUNK // batch, TORCH_CELLS // (batch * (V + n))))


def batched_steps(batch: int, samples: int, V: int, n: int = 2, rules: int = 1,
                  what: str = "cross-validate") -> Estimate:
    """``samples`` steps for each of ``batch`` positions run as one batch by each of ``rules`` torch
    rules (``cross-validate``, ``audit --torch``), in calls of :func:`torch_steps_per_call` steps:
    :data:`TORCH_CELL_BYTES` per (row, token) cell of one call (the rows of p and q repeated, the
    rules' residuals and draws, as the address space they reserve), and the positions' p, q and
    output counts (three float64 rows each). Time: per row and step, :data:`_TORCH_ROW` plus
    :data:`_TORCH_DRAFT` per draft (the rules that loop over the drafts) plus :data:`_TORCH_CELL`
    per (draft, token) cell (residual updates) plus :data:`_TORCH_TOKEN` per token (the rows
    repeated for the call), measured with the library's torch rules on the CPU, so a user's
    batched verifier may differ; and the audit's statistics, :data:`AUDIT_TOKEN_SECONDS` per
    position and token."""
    rows = batch * torch_steps_per_call(batch, samples, V, n)
    per_row = _TORCH_ROW + _TORCH_DRAFT * n + (_TORCH_CELL * n + _TORCH_TOKEN) * V
    return Estimate(f"{what}: {batch} positions x {samples} steps of n = {n} drafts over "
                    f"V = {V}" + (f", {rules} rules" if rules > 1 else ""),
                    rules * batch * (samples * per_row + AUDIT_TOKEN_SECONDS * V),
                    TORCH_CELL_BYTES * rows * (V + n) + 3 * 8.0 * batch * V)


def lm_pairs(positions: int, V: int, seconds: float | None = None) -> Estimate:
    """``lm-pairs``: the (target, draft) laws of ``positions`` positions over V tokens, kept as
    per-step blocks and then concatenated (P and Q twice each at the peak). ``seconds``: the models'
    own estimate (:meth:`mdtheory.language.langmodel.LanguageModel.step_seconds` times the steps);
    default about 2 ms a position (the char-LSTM and its drafter)."""
    return Estimate(f"lm-pairs: {positions} positions x {V} tokens",
                    2e-3 * positions if seconds is None else seconds,
                    4 * 8.0 * positions * V + SAMPLING_BYTES)


def ngram_distillation(order: int, V: int, streams: int = 64, length: int = 300,
                       strengths: int = 7, sampling_seconds: float = 30.0) -> Estimate:
    """Distilling an n-gram drafter (:func:`mdtheory.language.drafters.distill_ngram`): ``streams``
    texts of ``length`` tokens sampled from the target (``sampling_seconds``, the target's own
    estimate; default about 30 s, the char-LSTM's), then counts for every context of up to
    ``order - 1`` tokens at every position of nine in ten texts (:data:`NGRAM_ROW_SECONDS` per
    position and context length; a row of V floats per distinct context, at most one per position
    and at most (V - 1)^m of length m), and the held-out bits per char for each of ``strengths``
    smoothing strengths (a pass over the context lengths per position: :data:`NGRAM_BPC_SECONDS`
    per context length). Measured against ``benchmarks/bench_lm_estimates.py`` (within 1.5x in
    time, 1 - 6x above in memory, on the char-LSTM)."""
    held = max(1, streams // 10)
    per_text = sum(min(order, t + 1) for t in range(1, length))  # contexts of lengths 0..order-1
    rows = (streams - held) * per_text
    bpc = strengths * held * per_text
    # distinct contexts of length m: at most one per training position, and at most (V - 1)^m
    positions = (streams - held) * max(length - 1, 0)
    distinct = sum(min(positions, _pow(V - 1, m)) for m in range(min(order, length)))
    return Estimate(f"n-gram drafter of order {order}: up to {distinct:.3g} context rows of {V} counts",
                    sampling_seconds + NGRAM_ROW_SECONDS * rows + NGRAM_BPC_SECONDS * bpc,
                    distinct * (8.0 * V + 200.0 + 8.0 * min(order, length))
                    + SAMPLING_BYTES + 4 * 8.0 * streams * V)


def enumeration(count: float, n: int, V: int) -> Estimate:
    """Exact enumeration of a rule over ``count`` draft tuples (one conditional law each)."""
    per_step = _MC_STEP + _MC_TOKEN * (n + 1) * V
    return Estimate(f"exact enumeration over {count:.3g} draft tuples of n = {n} drafts, V = {V}",
                    count * per_step, count * (V * 9.0 + 8.0 * (n + 1)))


def _head(model, method: str) -> str:
    return f"method {method!r} on {model.sampling} drafts, V = {model.V}, n = {model.n}"


def prefix_route(model) -> Estimate:
    """The ``prefix`` route: a sort and one scan of V prefixes (for a model without a closed-form
    containment, one :meth:`~mdtheory.models.base.DraftModel.prefix_pass`, and once more for the
    certificate's cut)."""
    V, n, head = model.V, model.n, _head(model, "prefix")
    if model.lex_base_closed_form:
        # iid: a sort and two scans; n enters only through the integer powers (log2 n squarings)
        return Estimate(head, 2e-8 * V * max(math.log2(V), 1.0) * (1.0 + math.log2(n) / 8), 40.0 * V)
    # successive sampling's certificate (mdtheory.models.majorant): three more passes (the best
    # prefix, a vertex, the quadrature of the clock majorant) and at most MAJORANT_WORK cells of
    # the minimum over the parts of W, twice, each cell one or two polynomials
    cells = min(MAJORANT_WORK, 2.0 ** min(MAJORANT_EXACT, V) * (V + 1) * (n + 1))
    extra = 3 * model.prefix_pass_seconds() + 3 * _MAJORANT_CELL * cells \
        if model.prefix_property == "checked" else 0.0
    if model.closed_form_containment:
        return Estimate(head, 1e-7 * V * max(math.log2(V), 1.0) * (n if n > 1 else 1) + extra,
                        40.0 * V)
    # one trapezoidal pass carrying a degree-n polynomial per node along the prefixes (and once
    # more for the certificate's cut)
    return Estimate(f"{head}: a one-pass containment over {V} prefixes",
                    2 * model.prefix_pass_seconds() + extra, 8.0 * V * (n + 2) * 64)


def closed_form_route(model) -> Estimate:
    """The ``closed-form`` route: O(V)."""
    V = model.V
    return Estimate(f"{_head(model, 'closed-form')}: a closed form over {V} tokens", 1e-7 * V,
                    40.0 * V)


def fixed_set_route(model) -> Estimate:
    """The ``fixed-set`` route: one pass over the model's one draft set (O(V)), and its flow
    certificate (a (1, V) flow)."""
    V = model.V
    return Estimate(f"{_head(model, 'fixed-set')}: one draft set over {V} tokens", 1e-7 * V, 40.0 * V)


def subsets_route(model) -> Estimate:
    """The ``subsets`` route: all 2^V token sets, one vectorised containment row each
    (:meth:`~mdtheory.models.base.DraftModel.subset_row_seconds`), and again for its certificate
    (:func:`mdtheory.certify.exhaustive_minimum`)."""
    V = model.V
    sets = _pow(2.0, V)
    return Estimate(f"{_head(model, 'subsets')}: 2^{V} token sets", 2 * sets * model.subset_row_seconds(),
                    sets * (V + 16), "method 'auto' picks a route that fits (use the prefix method "
                    "for iid, without-replacement and conditional-Poisson drafts, the dual method "
                    "for the others)")


def select_route(model) -> Estimate:
    """The ``select`` route (iid): the buckets of the ratio, filled twice (route and certificate),
    a sort of the opened buckets' tokens (a few hundred on language-model pairs, all of them at
    worst) and the cut. Linear but for that sort, whose worst case is counted."""
    V = model.V
    return Estimate(_head(model, "select"), 4e-9 * V + 1e-8 * V * max(math.log2(V), 1.0), 48.0 * V)


def law_route(model, method: str) -> Estimate:
    """The routes over the enumerated draft law: ``otlp`` (an LP over draft sets x tokens),
    ``otlp-literal`` (over ordered tuples x tokens), ``dual`` (a min-cut LP, one row per set and
    member) and ``maxflow`` (a flow network, one edge per set and member); the law's enumeration
    by :meth:`~mdtheory.models.base.DraftModel.law_seconds`.

    Raises
    ------
    InvalidInputError
        ``method`` is none of the four.
    """
    V, n, head = model.V, model.n, _head(model, method)
    literal = method == "otlp-literal"
    hint = ("method 'otlp' works over draft sets instead of tuples" if literal
            else "method 'prefix' enumerates nothing" if model.prefix_property else "")
    count = float(model.count_tuples() if literal else model.count_sets())
    kind = "draft tuples" if literal else "draft sets"
    held = count if literal else float(model.set_law_size())  # what the law's enumeration holds
    law_bytes = held * V * 9.0  # indicators and the forward pass's float masses
    law_seconds = 2 * model.law_seconds(held)  # the route's law, and the certificate's own
    if model.law_steps(held) > 1000:
        head += f" (its set law by {model.law_steps(held):.3g} forward steps)"
    if held > count:
        head += f" (its set law's enumeration through up to {held:.3g} sets)"
    incidences = count * min(n, V)  # rows of the dual, edges of the flow network (set members)
    if method in ("otlp", "otlp-literal"):
        cols = count * V
        return Estimate(f"{head}: an LP over {count:.3g} {kind} x {V} tokens = {cols:.3g} variables",
                        law_seconds + _LP_COLUMN * _pow(cols, 1.5), law_bytes + _LP_BYTES * cols, hint)
    if method == "dual":
        return Estimate(f"{head}: a dual LP over {count:.3g} {kind} ({incidences:.3g} rows)",
                        law_seconds + _DUAL_ROW * _pow(incidences, 1.3), law_bytes + 120.0 * incidences,
                        hint)
    if method == "maxflow":
        return Estimate(f"{head}: a flow network over {count:.3g} {kind} ({incidences:.3g} edges)",
                        law_seconds + _FLOW_EDGE * incidences, law_bytes + 1000.0 * incidences, hint)
    raise InvalidInputError(f"no law-route estimate for method {method!r}")


def mnp_corral_cap(V: int) -> int:
    """The most corral vertices one Wolfe run of the ``mnp`` route stores (its storage grows by
    doubling up to this): V + 2 (a corral is affinely independent), or fewer where
    :data:`MNP_RUNS` runs of that many would reserve more than :data:`MNP_RESERVE` bytes
    (:func:`mnp_run_bytes`); at least 8. A run whose corral would outgrow it stops as a stall,
    with its proven bounds."""
    if MNP_RUNS * mnp_run_bytes(V, V + 2) <= MNP_RESERVE:
        return V + 2
    a, b, c = 24.0, 32.0 * (V + 1), -MNP_RESERVE / MNP_RUNS  # mnp_run_bytes(V, K) = a K^2 + b K
    return max(8, int((-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)))


def mnp_run_bytes(V: int, K: float) -> float:
    """Bytes one Wolfe run reserves for a corral of K vertices: four K x (V + 1) arrays (the
    vertices, the same minus p and scaled, their orders, the least-squares route's Q) and three
    K x K (the Gram matrix, its Cholesky factor, the least-squares route's R), 8 bytes an entry."""
    return 32.0 * K * (V + 1) + 24.0 * K * K


def min_norm_point(model) -> Estimate:
    """The ``mnp`` route on ``model``: Wolfe's minimum-norm point (:mod:`mdtheory.routes.mnp`).

    An estimate, not a bound: the number of iterations is not known before the run. Each
    iteration sorts the gradient, computes the V prefix containments of the order
    (:meth:`~mdtheory.models.base.DraftModel.prefix_pass_seconds`) and runs Wolfe's minor cycle on the
    corral of K vertices (products with K rows of V tokens, a (K+1)-square solve). Measured in CPU time by
    ``benchmarks/bench_mnp_estimate.py`` (``benchmarks/results/mnp_estimate.json``: llm-like and
    Dirichlet(0.5) pairs, V = 100 to 30,000, n = 2 to 8): independent drafts took 0.5 to 64 sqrt(V)
    iterations; successive-sampling and conditional-Poisson drafts 0.8 to 12 sqrt(V); iid drafts
    (through ``mnp``) up to 113 sqrt(V) on the llm-like pair at V = 1000; greedy drafts under 1
    sqrt(V); corrals held 0.1 to 13 sqrt(V) vertices. Greedy and top-n drafts at V = 1000 to
    100,000 (llm-like and Dirichlet(0.5) pairs, n = 4) took 4 to 73 iterations (0.01 to 0.57
    sqrt(V)). Successive sampling at V = 500 to 10,000 (Dirichlet(1) and (0.5) pairs, n = 4 and
    8) took 2.9 to 79 sqrt(V). The estimate takes 10 sqrt(V) iterations for
    independent and successive-sampling drafts, 0.5 sqrt(V) for greedy ones, 0.2 sqrt(V) for top-n
    ones and 15 sqrt(V) for the others (at most the cap) and 1.5 sqrt(V) vertices (at most one an
    iteration); the json records each run's time beside the estimate it had.

    The memory is an estimate too: what the runs reserve as their corrals grow (each stores its
    corral in rows that double, from :data:`MNP_FIRST_ROWS`; :func:`mnp_run_bytes`), taken as five
    runs each holding rows for twice a corral of 0.5 n sqrt(V) vertices (at most one an iteration).
    Measured on Dirichlet(1) and (0.5) pairs, V = 500 to 10,000, n = 2 to 8, iid,
    successive-sampling, conditional-Poisson and independent drafts: 3 to 7 runs made, the largest
    corral 0.1 to 0.85 n sqrt(V), the peak traced by :mod:`tracemalloc` 0.14 to 0.77 times the
    estimate (``tests/test_mnp_reserve.py``); on the llm-like pairs of
    ``benchmarks/bench_mnp_estimate.py`` (V = 100 to 3000) corrals of up to 2.1 n sqrt(V) and
    peaks of 0.08 to 1.45 times the estimate. Its ceiling, reached at large n or V, is what the
    runs may reserve at most: :data:`MNP_RUNS` runs (a free and a face run for each of the three
    raced norms, and a face starting beside the one it replaces), each up to
    :func:`mnp_corral_cap` vertices, at most :data:`MNP_RESERVE` in all.
    """
    V, n = model.V, model.n
    per_root = model.mnp_iterations
    iterations = min(MNP_MAX_ITER, per_root * math.sqrt(V))
    # a corral holds at most one vertex an iteration, besides its first
    K = min(V + 1.0, _MNP_CORRAL * math.sqrt(V), iterations + 1)
    step = _MNP_STEP + _MNP_CELL * K * V + _MNP_CUBE * K**3 + model.prefix_pass_seconds()
    cap = mnp_corral_cap(V)
    corral = min(_MNP_CORRAL_DRAFT * n * math.sqrt(V), iterations + 1)
    rows = min(cap, max(MNP_FIRST_ROWS, 2 * corral))
    reserved = min(_MNP_HELD * mnp_run_bytes(V, rows), MNP_RUNS * mnp_run_bytes(V, cap)) + 64.0 * (V + 2)
    return Estimate(f"method 'mnp' on {model.sampling} drafts, V = {V}, n = {n}: about "
                    f"{iterations:.3g} iterations of Wolfe's minimum-norm point (an estimate; "
                    "runs vary ten-fold)", iterations * step, reserved,
                    f"the solver stops after {MNP_MAX_ITER} iterations at most")


def acceptance_cone(V: int, n: int, sampling: str, supports: int) -> Estimate:
    """``mdtheory dd`` / ``verify theorem2``: the cone's facets by double description (fast at these
    dimensions), then the comparison with Hall's family, whose redundancy removal solves one exact
    LP per row over the 2^V - 2 Hall inequalities and the non-negativity rows (the cost)."""
    rows, dim = 2.0**V - 2 + supports + V, V + supports
    return Estimate(f"the {sampling} acceptance-one cone for V = {V}, n = {n} (dimension {dim}) and its "
                    f"comparison with {rows:.3g} Hall and non-negativity inequalities",
                    _CDD_REDUNDANCY * _pow(rows, 3) * dim, _FRACTION_BYTES * rows * dim)


def verify_claim(claim: str, V: int, n: int, instances: int) -> Estimate:
    """One exact ``mdtheory verify`` check (theorem3, hu-wor) on V tokens with n drafts."""
    if claim == "theorem3":
        cols = (V + math.comb(V, 2)) * V  # exact OTLP over the draft sets of 2 iid drafts
        per = _CDD_COLUMN * _pow(cols, 3) + _FRACTION_OP * V * _pow(2.0, V)
        return Estimate(f"verify theorem3, V = {V}: {instances} instances, each 2^{V} token "
                        f"sets and an exact LP of {cols} variables", instances * per,
                        _FRACTION_BYTES * (cols * (cols + V) + V * _pow(2.0, V)))
    if claim == "hu-wor":  # in floats: V and n may be huge
        sets, tuples = _comb(V, n), math.exp(min(math.lgamma(V + 1) - math.lgamma(V - n + 1), 700.0))
        token_sets = sum(_comb(V, k) for k in range(n, V)) if V <= 64 else _pow(2.0, V)
        ops = tuples * n + 2.0 * token_sets * sets
        return Estimate(f"verify hu-wor, V = {V}, n = {n}: {instances} instances, each "
                        f"{tuples:.3g} ordered draft tuples and {token_sets:.3g} token "
                        f"sets against {sets:.3g} draft sets", instances * _FRACTION_OP * ops,
                        _FRACTION_BYTES * (tuples * n + sets * V))
    return Estimate(f"verify {claim}", 0.0)
