"""Validation of user input at the package boundary.

Every public entry point passes its probability vectors through :func:`as_distribution` once; the
solvers behind it trust their inputs. Tolerances are named here and nowhere else.

The sum rule. A probability vector must sum to one within a tolerance that follows the precision it
arrives in: :data:`SUM_TOL` (1e-6) for float64 and integer input, and :math:`\\sqrt{\\varepsilon}` of
its dtype where that is wider, the rule of ``numpy.random.Generator.choice``: about 3.5e-4 for
float32, 0.031 for float16, 0.088 for bfloat16 (torch tensors). A float32 softmax over 32,000 to
152,064 tokens misses one by up to about 2e-5, so probabilities taken straight from a model are
accepted. The dtype judged is the one the data arrives in: a float32 softmax cast to float64
afterwards is held to 1e-6 (take the softmax in float64, or pass ``normalize=True``). Every accepted
vector is converted to float64 and divided by its own float64 sum, so the solvers see an exact
distribution up to float64 rounding. ``normalize=True`` accepts any positive sum.
Torch tensors (any device, float16 and bfloat16 included) are detached and copied to float64 on the
CPU. Masked arrays are refused when an entry is masked (there is no single right fill value).
"""

from __future__ import annotations

import sys

import numpy as np

from ._jit import njit
from .errors import InvalidDistributionError, InvalidInputError

#: Sum tolerance for float64 and integer input: a vector may sum to 1 within this; it is then rescaled.
SUM_TOL = 1e-6
_FLOAT64 = np.dtype(np.float64)
#: Most drafts a draft model takes: the compiled kernels hold n in a 64-bit integer, and beyond 2^53
#: n itself is not exact in float64 (n = 10^30 is refused the same way whichever kernel would run).
MAX_DRAFTS = 2**53
#: Acceptance counts as exactly one when the optimum is within this of 1 (floating-point routes).
ONE_TOL = 1e-12
#: From this length on, once numba is loaded, a float64 vector is checked and divided by its sum in
#: one compiled pass (:func:`_scaled`) instead of numpy's three.
COMPILED_MIN_V = 4096


def sum_tolerance(eps: float) -> float:
    """The sum tolerance for input of machine epsilon ``eps``: ``max(SUM_TOL, sqrt(eps))``.

    Examples
    --------
    >>> sum_tolerance(np.finfo(np.float64).eps)
    1e-06
    >>> round(sum_tolerance(np.finfo(np.float32).eps), 6)
    0.000345
    """
    return max(SUM_TOL, float(np.sqrt(eps)))


def _as_array(x, name: str) -> tuple[np.ndarray, float]:
    """``x`` as a numpy array and the machine epsilon of the precision it arrived in."""
    if isinstance(x, np.ma.MaskedArray):
        masked = int(np.ma.count_masked(x))
        if masked:
            raise InvalidDistributionError(
                f"{name} is a masked array with {masked} masked entries; fill them first "
                "(for example with zeros) or pass the plain data"
            )
        x = np.ma.getdata(x)
    if type(x).__module__.split(".")[0] == "torch" and hasattr(x, "detach"):
        import torch  # already imported by whoever made the tensor

        x = x.detach().cpu()
        if x.dtype.is_floating_point:  # numpy has no bfloat16: widen first
            return x.to(torch.float64).numpy(), torch.finfo(x.dtype).eps
        return x.numpy(), 0.0
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as exc:  # ragged nested lists, for one
        raise InvalidDistributionError(f"{name} is not a rectangular array of numbers ({exc})") from None
    eps = float(np.finfo(arr.dtype).eps) if np.issubdtype(arr.dtype, np.floating) else 0.0
    return arr, eps


def as_distribution(x, name: str, *, normalize: bool = False, ndim: int = 1) -> np.ndarray:
    """Return ``x`` as a float64 probability array whose last axis sums to one.

    Parameters
    ----------
    x : array_like or torch.Tensor
        Non-negative, finite numbers; shape ``(V,)`` when ``ndim == 1``.
    name : str
        How the error messages call the argument (``"p"``, ``"q"``, ``"q[2]"``).
    normalize : bool
        Rescale each vector to sum one instead of refusing a sum off 1 by more than
        :func:`sum_tolerance` of its dtype (the module's sum rule).
    ndim : int
        Required number of dimensions.

    Raises
    ------
    InvalidDistributionError
        Non-numeric data, wrong number of dimensions, an empty axis, a NaN, infinite or negative entry,
        an all-zero vector, a masked entry, or a sum off one (unless ``normalize``).

    Examples
    --------
    >>> as_distribution(np.array([0.25, 0.75], dtype=np.float32), "p").dtype
    dtype('float64')
    """
    if type(x) is np.ndarray and x.dtype is _FLOAT64 and x.ndim == ndim == 1 and x.size:
        # the common case, a float64 vector with entries in [0, 1] (no NaN, a sum that cannot
        # overflow), checked as below at less cost; anything else takes the general path. The
        # sum is numpy's pairwise sum, as ``sum(axis=-1, keepdims=True)`` below: the same bits
        if x.size >= COMPILED_MIN_V and "numba" in sys.modules and x.flags.c_contiguous:
            s = x.sum()  # NaN or inf fail the test (and the entries then the general path)
            if s != 0.0 and (normalize or abs(s - 1.0) <= SUM_TOL):
                out = np.empty_like(x)
                if _scaled(x, s, out):
                    return out
        elif x.min() >= 0.0 and x.max() <= 1.0:
            s = x.sum()
            if s != 0.0 and (normalize or abs(s - 1.0) <= SUM_TOL):
                return x / s
    precision = str(getattr(x, "dtype", "float64")).removeprefix("torch.")
    arr, eps = _as_array(x, name)
    tol = sum_tolerance(eps)
    if arr.dtype.kind not in "iuf":  # numpy counts timedelta64 as an integer: refused here too
        raise InvalidDistributionError(f"{name} has dtype {arr.dtype}; expected real numbers")
    if arr.ndim != ndim:
        raise InvalidDistributionError(
            f"{name} has {arr.ndim} dimension(s) (shape {arr.shape}); expected {ndim}"
        )
    if arr.size == 0:
        raise InvalidDistributionError(
            f"{name} is empty" + (f" (shape {arr.shape})" if arr.ndim > 1 else "")
        )
    arr = np.asarray(arr, dtype=np.float64)  # no copy when it is float64 already
    with np.errstate(over="ignore"):  # an overflowed sum is handled by _rescale_overflow
        sums = arr.sum(axis=-1, keepdims=True)
    if not arr.min() >= 0.0 or not np.isfinite(sums).all():  # two passes, no temporaries
        _refuse_entry(arr, name)  # NaN fails the first test, inf the second
        arr, sums = _rescale_overflow(arr, sums, name, normalize)
    for idx in np.ndindex(sums.shape[:-1]):
        s = float(sums[idx][0])
        label = f"{name}{_fmt_index(idx)}" if idx else name
        if s == 0.0:
            raise InvalidDistributionError(f"{label} is all zeros")
        if not normalize and abs(s - 1.0) > tol:
            raise InvalidDistributionError(
                f"{label} sums to {s:.10g}, not 1 (tolerance {tol:.2g} for {precision} "
                "input); rescale it with normalize=True (command line: --normalize)"
            )
    return arr / sums


@njit(cache=True, error_model="numpy")
def _scaled(x, s, out):
    """``out = x / s`` (the bits of numpy's division) and whether every entry of x lies in
    [0, 1] (NaN does not), in one pass."""
    inside = True
    for i in range(x.size):
        v = x[i]
        inside &= (v >= 0.0) & (v <= 1.0)
        out[i] = v / s
    return inside


def _rescale_overflow(arr: np.ndarray, sums: np.ndarray, name: str, normalize: bool):
    """(arr, sums) with each vector whose float64 sum overflowed (finite entries) divided by its
    largest entry first (``normalize``; dividing by an infinite sum would give zeros), or raise."""
    over = ~np.isfinite(sums)
    if not over.any():
        return arr, sums
    if not normalize:
        raise InvalidDistributionError(f"{name} sums past the float64 range (largest entry "
                                       f"{arr.max():g}), not 1; rescale it with normalize=True "
                                       "(command line: --normalize)")
    arr = arr / np.where(over, arr.max(axis=-1, keepdims=True), 1.0)
    return arr, arr.sum(axis=-1, keepdims=True)


def _refuse_entry(arr: np.ndarray, name: str) -> None:
    """Raise for the first non-finite or negative entry of ``arr``, if any (the caller found the
    minimum negative or NaN, or the sum not finite; a sum that overflowed is left to the sum rule)."""
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidDistributionError(f"{name}{_fmt_index(idx)} = {arr[idx]} is not finite")
    neg = arr < 0
    if neg.any():
        idx = tuple(int(i) for i in np.argwhere(neg)[0])
        raise InvalidDistributionError(f"{name}{_fmt_index(idx)} = {arr[idx]:g} is negative")


def as_drafts(n) -> int:
    """Return the number of drafts as an int in [1, :data:`MAX_DRAFTS`], or raise
    :class:`InvalidInputError`.

    Examples
    --------
    >>> as_drafts(np.int64(3))
    3
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise InvalidInputError(f"the number of drafts must be an integer, got {n!r}")
    if n < 1:
        raise InvalidInputError(f"the number of drafts must be at least 1, got {n}")
    if n > MAX_DRAFTS:
        raise InvalidInputError(f"the number of drafts must be at most 2^53 = {MAX_DRAFTS:.3g} (the "
                                f"compiled kernels count drafts in 64-bit integers), got {float(n):.3g}")
    return int(n)


def as_order(order, V: int) -> np.ndarray:
    """Return a token order (distinct tokens 0..V-1, at most V of them) as an int64 array, or raise
    :class:`InvalidInputError`.

    Examples
    --------
    >>> as_order([2, 0], 3).tolist()
    [2, 0]
    """
    arr = np.asarray(order)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise InvalidInputError(f"a token order must be a 1-D array of integers, got shape {arr.shape} "
                                f"and dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    seen = np.zeros(V, dtype=bool)
    try:  # one scatter finds tokens >= V (an IndexError) and repeats (fewer distinct than given)
        seen[arr] = True
        outside = arr.size and arr.min() < 0
    except IndexError:
        outside = True
    if outside:
        bad = arr[(arr < 0) | (arr >= V)][0]
        raise InvalidInputError(f"token order holds {bad}, outside 0..{V - 1}")
    if np.count_nonzero(seen) != arr.size:
        raise InvalidInputError("token order repeats a token; the tokens of an order must be distinct")
    return arr


def as_size(size) -> int:
    """Return a number of samples as an int >= 0, or raise :class:`InvalidInputError`."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise InvalidInputError(f"the number of samples must be a non-negative integer, got {size!r}")
    return int(size)


def as_generator(rng) -> np.random.Generator:
    """numpy's usual random source: None (fresh entropy), an integer seed, a ``SeedSequence``,
    a ``BitGenerator`` or a ``Generator`` (used as is), as :func:`numpy.random.default_rng` takes.

    Raises
    ------
    InvalidInputError
        Anything else (a ``RandomState`` included), or a negative seed.

    Examples
    --------
    >>> bool(as_generator(0).integers(10) == as_generator(0).integers(10))
    True
    """
    if isinstance(rng, np.random.Generator):  # the common case, per step: no copy, no cost
        return rng
    ok = (np.random.BitGenerator, np.random.SeedSequence, int, np.integer)
    if rng is not None and (isinstance(rng, bool) or not isinstance(rng, ok)):
        raise InvalidInputError(f"rng must be None, an integer seed or a numpy.random.Generator, "
                                f"got {type(rng).__name__}")
    try:
        return np.random.default_rng(rng)
    except ValueError as exc:  # a negative seed
        raise InvalidInputError(f"rng: {exc}") from None


def _fmt_index(idx: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in idx) + "]" if idx else ""



def batch_rows(p_rows: int, q_rows: int) -> int:
    """The number of rows of a (p, q) batch: equal row counts, or one row broadcast to the other's.

    Raises
    ------
    InvalidDistributionError
        Both sides have several rows and the counts differ.

    Examples
    --------
    >>> batch_rows(3, 1), batch_rows(1, 3), batch_rows(2, 2)
    (3, 3, 2)
    """
    if p_rows != q_rows and 1 not in (p_rows, q_rows):
        raise InvalidDistributionError(
            f"p has {p_rows} rows but q has {q_rows}; give equal batches or one row to broadcast"
        )
    return max(p_rows, q_rows)


def as_fractions(q) -> list:
    """q as exact rationals (:class:`fractions.Fraction`), checked non-negative and summing to 1.

    Raises
    ------
    InvalidInputError
        A negative entry or a sum other than exactly 1.
    """
    from fractions import Fraction

    out = [Fraction(x) for x in q]
    if any(x < 0 for x in out) or sum(out) != 1:
        raise InvalidInputError("an exact distribution needs non-negative rationals summing to 1")
    return out
