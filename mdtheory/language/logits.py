"""Logits to a sampling law: temperature, then top-k, then top-p (nucleus), then softmax.

One implementation for numpy arrays and torch tensors (the torch bridge's
:func:`mdtheory.torch_bridge.to_probs` and the language model of :mod:`mdtheory.language.lm` both call
:func:`to_probs`), in the order Hugging Face's samplers apply the three transforms. A torch tensor
keeps its dtype and device and stays differentiable; torch is never imported for numpy input.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidInputError

__all__ = ["to_probs", "check_sampling", "tempered"]


def check_sampling(temperature: float = 1.0, top_k: int | None = None,
                   top_p: float | None = None) -> None:
    """Raise :class:`~mdtheory.errors.InvalidInputError` naming a bad sampling parameter."""
    if not 0 < temperature < float("inf"):
        raise InvalidInputError(f"temperature must be finite and > 0, got {temperature}")
    if top_k is not None and (isinstance(top_k, bool) or not _is_integer(top_k) or top_k < 1):
        raise InvalidInputError(f"top_k must be an integer >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise InvalidInputError(f"top_p must be in (0, 1], got {top_p}")


def _is_integer(k) -> bool:
    try:
        return int(k) == k
    except (TypeError, ValueError, OverflowError):
        return False


def _as_logits(x) -> np.ndarray:
    """``x`` as a float array of at least one axis (a list, a scalar's row), or raise naming it."""
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:  # ragged nested lists
        raise InvalidInputError(f"logits must be a rectangular array of numbers ({exc})") from None
    if arr.dtype.kind not in "iuf" or arr.ndim == 0:
        raise InvalidInputError(f"logits must be an array of real numbers of shape (..., V), got "
                                f"dtype {arr.dtype} and shape {arr.shape}")
    return arr if arr.dtype.kind == "f" else arr.astype(np.float64)


def _check_logits(x) -> None:
    """Refuse NaN or +inf logits and rows whose logits are all -inf (numpy or torch)."""
    if bool((x != x).any()):
        raise InvalidInputError("logits contain NaN")
    if bool((x == float("inf")).any()):
        raise InvalidInputError("logits contain +inf")
    if x.shape[-1] == 0 or bool((x == float("-inf")).all(-1).any()):
        raise InvalidInputError("a row of logits is empty or all -inf (no token can be sampled)")


class _NumpyOps:
    @staticmethod
    def sort(x):
        idx = np.argsort(x, axis=-1, kind="stable")
        return np.take_along_axis(x, idx, axis=-1), idx

    @staticmethod
    def mask(x, drop):
        return np.where(drop, -np.inf, x)

    @staticmethod
    def unsort(drop_sorted, idx):
        out = np.empty_like(drop_sorted)
        np.put_along_axis(out, idx, drop_sorted, axis=-1)
        return out

    @staticmethod
    def rowmax(x):
        return x.max(axis=-1, keepdims=True)

    @staticmethod
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


class _TorchOps:
    @staticmethod
    def sort(x):
        res = x.sort(dim=-1)
        return res.values, res.indices

    @staticmethod
    def mask(x, drop):
        return x.masked_fill(drop, float("-inf"))

    @staticmethod
    def unsort(drop_sorted, idx):
        return drop_sorted.scatter(-1, idx, drop_sorted)

    @staticmethod
    def rowmax(x):
        return x.max(dim=-1, keepdim=True).values

    @staticmethod
    def softmax(x):
        return x.softmax(dim=-1)


def to_probs(logits, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None):
    """Softmax of ``logits / temperature`` after top-k, then top-p (nucleus) filtering.

    Parameters
    ----------
    logits : array_like or Tensor, shape (..., V)
        Real numbers (a list is read as a float array; a tensor must be floating-point). May hold
        -inf (a token never sampled), but not NaN or +inf, and not a row of only -inf.
    temperature : float
        Finite and > 0. The logits are shifted by their row maximum before the division, so a
        temperature so small that the gaps overflow gives the limit law: a point mass on the
        argmax (split evenly over tied maxima).
    top_k : int, optional
        Keep the k largest logits (ties at the k-th value are kept).
    top_p : float, optional
        In (0, 1]: keep the smallest set of most likely tokens whose probability reaches top_p
        (at least one token).

    Returns
    -------
    ndarray or Tensor, same shape, dtype (and device) as ``logits`` (float64 for a list or an
    integer array).

    Raises
    ------
    InvalidInputError
        A parameter out of range, logits that are not real numbers, or logits that define no law
        (NaN, +inf, a row all -inf).

    Examples
    --------
    >>> to_probs(np.log(np.array([0.5, 0.3, 0.2])), top_k=2).round(3).tolist()
    [0.625, 0.375, 0.0]
    """
    check_sampling(temperature, top_k, top_p)
    if type(logits).__module__.split(".")[0] == "torch" and hasattr(logits, "masked_fill"):
        ops = _TorchOps
        if not logits.is_floating_point():
            raise InvalidInputError(f"logits must be a floating-point tensor, got {logits.dtype}")
    else:
        ops, logits = _NumpyOps, _as_logits(logits)
    _check_logits(logits)
    with np.errstate(over="ignore"):  # gaps overflowing to -inf are the intended limit
        x = (logits - ops.rowmax(logits)) / temperature  # <= 0, the max at 0: never +inf
    if top_k is None and top_p is None:
        return ops.softmax(x)
    sorted_x, idx = ops.sort(x)  # ascending
    if top_k is not None:
        kth = sorted_x[..., max(x.shape[-1] - int(top_k), 0)][..., None]
        x = ops.mask(x, x < kth)
        sorted_x = ops.mask(sorted_x, sorted_x < kth)
    if top_p is not None:
        drop = ops.softmax(sorted_x).cumsum(-1) <= 1 - top_p
        drop[..., -1] = False  # always keep the most likely token
        x = ops.mask(x, ops.unsort(drop, idx))
    return ops.softmax(x)


def tempered(q: np.ndarray, temperature: float) -> np.ndarray:
    """q's drafter at another temperature: :math:`q^{1/T} / \\sum_y q(y)^{1/T}` (zeros stay zero).

    If q = softmax(z) then :math:`q^{1/T} \\propto e^{z/T}`, so this is softmax(z / T), the law the
    drafter's logits give at temperature T, taking q's own temperature as 1.

    Parameters
    ----------
    q : ndarray, shape (V,)
        A distribution with at least one positive entry.
    temperature : float
        T > 0.

    Returns
    -------
    ndarray, shape (V,)

    Examples
    --------
    >>> tempered(np.array([0.8, 0.2, 0.0]), 0.5).round(6).tolist()  # q^2 / (0.64 + 0.04)
    [0.941176, 0.058824, 0.0]
    """
    logq = np.log(np.where(q > 0, q, 1.0)) / temperature
    w = np.exp(logq - logq[q > 0].max()) * (q > 0)
    return w / w.sum()
