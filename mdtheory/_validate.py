"""Validation of user input at the package boundary.

Every public entry point passes its probability vectors through :func:`as_distribution` once; the
solvers behind it trust their inputs. Tolerances are named here and nowhere else.
"""

from __future__ import annotations

import numpy as np

from .errors import InvalidDistributionError, InvalidInputError

#: A probability vector may sum to 1 within this absolute tolerance; it is then rescaled exactly.
SUM_TOL = 1e-6
#: Acceptance counts as exactly one when the optimum is within this of 1 (floating-point routes).
ONE_TOL = 1e-12


def as_distribution(x, name: str, *, normalize: bool = False, ndim: int = 1) -> np.ndarray:
    """Return ``x`` as a float64 probability array whose last axis sums to one.

    Parameters
    ----------
    x : array_like
        Non-negative, finite numbers; shape ``(V,)`` when ``ndim == 1``.
    name : str
        How the error messages call the argument (``"p"``, ``"q"``, ``"q[2]"``).
    normalize : bool
        Rescale each vector to sum one instead of refusing a sum off 1 by more than :data:`SUM_TOL`.
    ndim : int
        Required number of dimensions.

    Raises
    ------
    InvalidDistributionError
        Non-numeric data, wrong number of dimensions, an empty axis, a NaN, infinite or negative entry,
        an all-zero vector, or a sum off one (unless ``normalize``).
    """
    arr = np.asarray(x)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise InvalidDistributionError(f"{name} has dtype {arr.dtype}; expected real numbers")
    if arr.ndim != ndim:
        raise InvalidDistributionError(
            f"{name} has {arr.ndim} dimension(s) (shape {arr.shape}); expected {ndim}"
        )
    if arr.size == 0:
        raise InvalidDistributionError(
            f"{name} is empty" + (f" (shape {arr.shape})" if arr.ndim > 1 else "")
        )
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidDistributionError(f"{name}{_fmt_index(idx)} = {arr[idx]} is not finite")
    neg = arr < 0
    if neg.any():
        idx = tuple(int(i) for i in np.argwhere(neg)[0])
        raise InvalidDistributionError(f"{name}{_fmt_index(idx)} = {arr[idx]:g} is negative")
    sums = arr.sum(axis=-1, keepdims=True)
    for idx in np.ndindex(sums.shape[:-1]):
        s = float(sums[idx][0])
        label = f"{name}{_fmt_index(idx)}" if idx else name
        if s == 0.0:
            raise InvalidDistributionError(f"{label} is all zeros")
        if not normalize and abs(s - 1.0) > SUM_TOL:
            raise InvalidDistributionError(
                f"{label} sums to {s:.10g}, not 1 (tolerance {SUM_TOL:g}); "
                "pass normalize=True (CLI: --normalize) to rescale"
            )
    return arr / sums


def as_drafts(n) -> int:
    """Return the number of drafts as an int >= 1, or raise :class:`InvalidInputError`."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise InvalidInputError(f"the number of drafts must be an integer, got {n!r}")
    if n < 1:
        raise InvalidInputError(f"the number of drafts must be at least 1, got {n}")
    return int(n)


def _fmt_index(idx: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in idx) + "]" if idx else ""
