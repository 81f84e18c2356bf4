"""Small sequence-level instances: next-token laws as callables, draft enumeration, the validity check.

A *law* is any callable ``law(context: tuple[int, ...]) -> ndarray (V,)``: the next-token distribution
after ``context`` (the empty tuple is the root). Sequences of length L over V tokens are indexed
lexicographically (base V, first token most significant), as :func:`all_sequences` lists them.

Validity of a verifier (papers/blocks.md): the emitted block B = (b_1..b_{k+1}), followed by fresh
target tokens up to length L + 1, must have the target's law on :math:`V^{L+1}`:

.. math:: \\sum_{k=0}^{L} P(B = y_{1:k+1})\\, p(y_{k+2:L+1} \\mid y_{1:k+1}) = p(y)
          \\quad \\text{for every } y \\in V^{L+1}.

:func:`block_law_tv` returns the total-variation distance between the two sides.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import lru_cache
from itertools import combinations_with_replacement

import numpy as np

from .._validate import sum_tolerance
from ..errors import InvalidDistributionError, InvalidInputError, MdtheoryError

__all__ = ["Law", "batched", "context_law", "watched", "real_array", "is_complex", "ConstantLaw",
           "RandomLaw", "sun_toy", "random_instance", "vocabulary_size", "all_sequences",
           "conditional_tables", "sequence_probs", "draft_tuples", "draft_multisets", "block_law_tv",
           "continuation_probs"]

Law = Callable[[tuple], np.ndarray]

class ConstantLaw:
    """The same next-token law at every context.

    Examples
    --------
    >>> ConstantLaw([0.25, 0.75])((0, 1)).tolist()
    [0.25, 0.75]
    """

    def __init__(self, probs):
        p = np.asarray(probs, dtype=np.float64)
        if p.ndim != 1 or p.size < 1 or not np.all(np.isfinite(p)) or np.any(p < 0) \
                or abs(p.sum() - 1.0) > row_tolerance(probs):
            raise InvalidDistributionError(f"a law must be a probability vector, got {probs!r}")
        self.probs = p / p.sum()
        self.probs.setflags(write=False)

    def __call__(self, context: tuple = ()) -> np.ndarray:
        return self.probs

    def __repr__(self) -> str:
        return f"ConstantLaw({self.probs.tolist()})"


class RandomLaw:
    """A Dirichlet(``concentration``) next-token law drawn afresh at each context, deterministic in
    (``seed``, ``stream``, context): the same context always gives the same law, in any process.

    Examples
    --------
    >>> law = RandomLaw(3, seed=7)
    >>> bool(np.array_equal(law((1, 2)), RandomLaw(3, seed=7)((1, 2))))
    True
    """

    def __init__(self, V: int, seed: int = 0, concentration: float = 1.0, stream: int = 0):
        if isinstance(V, bool) or not isinstance(V, (int, np.integer)) or V < 1:
            raise InvalidInputError(f"V must be an integer >= 1, got {V!r}")
        if not (concentration > 0 and math.isfinite(concentration)):
            raise InvalidInputError(f"concentration must be a positive number, got {concentration!r}")
        self.V, self.seed, self.stream = int(V), int(seed), int(stream)
        self.concentration = float(concentration)
        self._at = lru_cache(maxsize=1 << 16)(self._draw)

    def _draw(self, context: tuple) -> np.ndarray:
        # the length is part of the entropy so that () and (0,) differ
        ss = np.random.SeedSequence([self.seed, self.stream, len(context), *context])
        p = np.random.default_rng(ss).dirichlet(np.full(self.V, self.concentration))
        p.setflags(write=False)
        return p

    def __call__(self, context: tuple = ()) -> np.ndarray:
        return self._at(tuple(int(c) for c in context))

    def __repr__(self) -> str:
        return (f"RandomLaw(V={self.V}, seed={self.seed}, concentration={self.concentration}, "
                f"stream={self.stream})")


def sun_toy() -> tuple[ConstantLaw, ConstantLaw]:
    """Sun et al.'s toy (Block Verification, ICLR 2025, §3): V = 2, target (1/3, 2/3) and draft
    (2/3, 1/3) at every context. Returns ``(target, draft)``."""
    return ConstantLaw([1 / 3, 2 / 3]), ConstantLaw([2 / 3, 1 / 3])


def random_instance(V: int, seed: int = 0, concentration: float = 1.0) -> tuple[RandomLaw, RandomLaw]:
    """A seeded context-dependent instance ``(target, draft)``: independent Dirichlet laws per context."""
    return (RandomLaw(V, seed, concentration, stream=0), RandomLaw(V, seed, concentration, stream=1))


def batched(law) -> Callable[[list], np.ndarray]:
    """``contexts -> (B, V)`` for ``law``: its ``batch`` method if it has one, the batched laws of the
    package's language models (:meth:`mdtheory.language.langmodel.LanguageModel.laws`), else one call per
    context."""
    if hasattr(law, "batch"):
        return law.batch
    from ..language.langmodel import LanguageModel

    if isinstance(law, LanguageModel):
        return lambda contexts: law.laws([tuple(int(t) for t in c) for c in contexts])
    # the rows keep their dtype: a float32 law is judged by float32's sum tolerance
    return lambda contexts: np.stack([_as_row(law(tuple(c))) for c in contexts])


def _as_row(raw) -> np.ndarray:
    """A law's row as the array it came in (its dtype kept: the checks judge its precision, and
    refuse complex values), or as an object array (exact fractions stay exact)."""
    arr = np.asarray(raw)
    if arr.dtype != object:
        return arr
    arr.astype(np.float64)  # entries that are not numbers raise here, as a float row's would
    return arr


def context_law(law) -> Law:
    """``law`` as a per-context callable ``context -> (V,)`` (see :func:`batched`)."""
    if hasattr(law, "batch"):
        fn = batched(law)
        return lambda context=(): np.asarray(fn([tuple(context)])[0])
    return law


def watched(law: Law, name: str) -> Law:
    """``law`` with each call made through the watchdog (:meth:`mdtheory.audit.watchdog.Watchdog.call_law`):
    while a run is armed with its ``max_seconds``, a call that does not return is interrupted."""
    from ..audit.watchdog import CALLS

    def call(context=()):
        return CALLS.call_law(name, context, law, context)

    return call


def is_complex(raw) -> bool:
    """Whether ``raw`` converts to an array of complex numbers."""
    try:
        return np.asarray(raw).dtype.kind == "c"
    except Exception:  # noqa: BLE001 -- a user's object may raise anything on conversion
        return False


def real_array(raw) -> np.ndarray | None:
    """``raw`` as a float64 array, or None where it does not hold real numbers: complex values (whose
    imaginary part a float cast would drop), strings, objects that do not convert."""
    try:
        arr = np.asarray(raw)
        if arr.dtype.kind == "O":
            arr = arr.astype(np.float64)
    except (TypeError, ValueError):
        return None
    if arr.dtype.kind not in "iuf":
        return None
    return arr.astype(np.float64, copy=False)


def call_law(law: Law, context: tuple):
    """``law(context)``, with anything it raises (other than the package's own errors) turned into
    :class:`~mdtheory.errors.InvalidInputError` naming the context."""
    if not callable(law):
        raise InvalidInputError(f"a law must be a callable law(context) -> (V,), got {type(law).__name__}")
    try:
        return law(context)
    except MdtheoryError:
        raise
    except Exception as exc:  # noqa: BLE001 -- a user's callable may raise anything
        raise InvalidInputError(
            f"the law raised {type(exc).__name__} at context {tuple(context)}: {exc}") from None


def vocabulary_size(law: Law) -> int:
    """V, read off the law at the root."""
    row = call_law(law, ())
    shape = np.shape(row) if not isinstance(row, str) else ()
    if len(shape) != 1 or shape[0] < 1:
        raise InvalidInputError(f"the law at the root returned {type(row).__name__}, not a vector")
    return int(shape[0])


def row_tolerance(row) -> float:
    """The sum tolerance of a law's row, by the precision it arrives in (the package's sum rule,
    :func:`mdtheory._validate.sum_tolerance`): 1e-6 for float64, sqrt(eps) for narrower floats
    (3.5e-4 for float32, whose softmax misses sum 1 by more than float64's tolerance)."""
    dtype = getattr(row, "dtype", None)
    eps = np.finfo(np.float64).eps
    try:
        if dtype is not None and np.issubdtype(np.dtype(dtype), np.floating):
            eps = np.finfo(np.dtype(dtype)).eps
    except TypeError:       # a torch dtype
        import torch

        if isinstance(dtype, torch.dtype) and dtype.is_floating_point:
            eps = torch.finfo(dtype).eps
    return sum_tolerance(float(eps))


def _check_law_row(row, context, V: int) -> np.ndarray:
    """The row as float64, rescaled to sum 1 when it sums to 1 within :func:`row_tolerance`."""
    tol = row_tolerance(row)
    arr = real_array(row)
    if arr is None and is_complex(row):
        raise InvalidDistributionError(f"the law at context {tuple(context)} has complex values; "
                                       "expected real numbers")
    if arr is None or arr.ndim != 1:
        raise InvalidInputError(
            f"the law at context {tuple(context)} returned {type(row).__name__}, not a vector of length {V}")
    if arr.shape != (V,) or not np.all(np.isfinite(arr)) or np.any(arr < 0) or abs(arr.sum() - 1) > tol:
        raise InvalidDistributionError(
            f"the law at context {tuple(context)} is not a probability vector of length {V}")
    return arr / arr.sum()


def _check_length(length, name: str = "length", low: int = 1) -> int:
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < low:
        raise InvalidInputError(f"{name} must be an integer >= {low}, got {length!r}")
    return int(length)


def all_sequences(V: int, length: int) -> np.ndarray:
    """Every sequence of ``length`` tokens, (V**length, length), in lexicographic order.

    Examples
    --------
    >>> all_sequences(2, 2).tolist()
    [[0, 0], [0, 1], [1, 0], [1, 1]]
    """
    if length == 0:
        return np.zeros((1, 0), dtype=np.int64)
    grids = np.indices((V,) * length).reshape(length, -1).T
    return np.ascontiguousarray(grids, dtype=np.int64)


def conditional_tables(law: Law, V: int, length: int) -> list[np.ndarray]:
    """``tables[j]`` (V**j, V): the law at every context of j tokens, j = 0..length - 1, rows in
    lexicographic order of the contexts. Each row is checked to be a probability vector."""
    tables = []
    for j in range(length):
        rows = [_check_law_row(call_law(law, tuple(c.tolist())), c, V) for c in all_sequences(V, j)]
        tables.append(np.stack(rows))
    return tables


def sequence_probs(law: Law, V: int, length: int, tables: list[np.ndarray] | None = None) -> np.ndarray:
    """P(first ``length`` tokens = s) from the root, (V**length,), in lexicographic order.

    Examples
    --------
    >>> target, _ = sun_toy()
    >>> np.round(sequence_probs(target, 2, 2) * 9, 12).tolist()
    [1.0, 2.0, 2.0, 4.0]
    """
    tables = conditional_tables(law, V, length) if tables is None else tables
    probs = np.ones(1)
    for j in range(length):
        probs = (probs[:, None] * tables[j]).reshape(-1)
    return probs


def continuation_probs(law: Law, V: int, length: int, tables: list[np.ndarray] | None = None) -> np.ndarray:
    """``cont[k, y]`` = p(y_{k+2:length} | y_{1:k+1}) for y in V**length (lexicographic) and
    k = 0..length - 1: the probability that fresh tokens from ``law`` complete the prefix of k + 1
    tokens to y. ``cont[length - 1]`` is all ones."""
    tables = conditional_tables(law, V, length) if tables is None else tables
    seqs = all_sequences(V, length)
    N = seqs.shape[0]
    # step[j, y] = law(y_{1:j})[y_{j+1}], j = 0..length-1
    step = np.empty((length, N))
    for j in range(length):
        ctx_index = seqs[:, :j] @ (V ** np.arange(j - 1, -1, -1)) if j else np.zeros(N, dtype=np.int64)
        step[j] = tables[j][ctx_index, seqs[:, j]]
    cont = np.ones((length, N))
    for k in range(length - 2, -1, -1):
        cont[k] = cont[k + 1] * step[k + 1]
    return cont


def draft_tuples(draft: Law, n: int, length: int, V: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """All ordered tuples of ``n`` iid drafts of ``length`` tokens from ``draft`` at the root.

    Returns
    -------
    drafts : ndarray of int, (V**(n*length), n, length)
    probs : ndarray, (V**(n*length),)
        Their probabilities (product of the drafts' sequence probabilities).
    """
    n, length = _check_length(n, "n"), _check_length(length)
    V = vocabulary_size(draft) if V is None else V
    seqs = all_sequences(V, length)
    q = sequence_probs(draft, V, length)
    idx = all_sequences(seqs.shape[0], n)
    return seqs[idx], np.prod(q[idx], axis=1)


def draft_multisets(draft: Law, n: int, length: int, V: int | None = None,
                    q: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The multisets of ``n`` iid drafts of ``length`` tokens from ``draft`` at the root.

    Returns
    -------
    members : ndarray of int, (M, n)
        Each multiset as sorted sequence indices (lexicographic index into :func:`all_sequences`).
    drafts : ndarray of int, (M, n, length)
        The same multisets as draft arrays.
    probs : ndarray, (M,)
        P(the unordered drafts = the multiset): the product of the sequences' probabilities times the
        multinomial coefficient (number of orderings).
    """
    n, length = _check_length(n, "n"), _check_length(length)
    V = vocabulary_size(draft) if V is None else V
    seqs = all_sequences(V, length)
    q = sequence_probs(draft, V, length) if q is None else q
    members = np.array(list(combinations_with_replacement(range(seqs.shape[0]), n)), dtype=np.int64)
    orderings = np.array([_orderings(row) for row in members], dtype=np.float64)
    return members, seqs[members], np.prod(q[members], axis=1) * orderings


def _orderings(row) -> int:
    count = math.factorial(len(row))
    for m in np.unique(row, return_counts=True)[1]:
        count //= math.factorial(int(m))
    return count


def block_law_tv(block_law: Mapping[tuple, float], target: Law, length: int, V: int | None = None) -> float:
    """Total-variation distance between "B then fresh target tokens" and the target on V**(length + 1).

    ``block_law`` maps each emitted block (a tuple of 1..length + 1 tokens) to its probability; a
    verifier is valid (lossless) exactly when this returns 0. Mass on blocks of any other length, or
    missing mass, shows up in the distance.

    Examples
    --------
    >>> target, _ = sun_toy()
    >>> block_law_tv({(0,): 1 / 3, (1,): 2 / 3}, target, 1) < 1e-15
    True
    >>> round(block_law_tv({(0, 0): 1.0}, target, 1), 12)
    0.888888888889
    """
    length = _check_length(length)
    V = vocabulary_size(target) if V is None else V
    L1 = length + 1
    tables = conditional_tables(target, V, L1)
    full = sequence_probs(target, V, L1, tables)
    cont = continuation_probs(target, V, L1, tables)
    lhs = np.zeros(V ** L1)
    stray = 0.0
    for block, mass in block_law.items():
        block = tuple(int(b) for b in block)
        mass = float(mass)
        if not 1 <= len(block) <= L1 or any(not 0 <= b < V for b in block):
            stray += abs(mass)
            continue
        k1 = len(block)
        start = 0
        for b in block:
            start = start * V + b
        span = V ** (L1 - k1)
        start *= span
        lhs[start:start + span] += mass * cont[k1 - 1, start:start + span]
    return 0.5 * (float(np.abs(lhs - full).sum()) + stray)
