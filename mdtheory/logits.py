"""Logits to a sampling law: temperature, then top-k, then top-p (nucleus), then softmax.

One implementation for numpy arrays and torch tensors (the torch bridge's
:func:`mdtheory.torch_bridge.to_probs` and the language model of :mod:`mdtheory.lm` both call
:func:`to_probs`), in the order Hugging Face's samplers apply the three transforms. A torch tensor
keeps its dtype and device and stays differentiable; torch is never imported for numpy input.
"""

from __future__ import annotations

import numpy as np

from .errors import InvalidInputError

__all__ = ["to_probs", "check_sampling"]


def check_sampling(temperature: float = 1.0, top_k: int | None = None,
                   top_p: float | None = None) -> None:
    """Raise :class:`~mdtheory.errors.InvalidInputError` naming a bad sampling parameter."""
    if not temperature > 0:
        raise InvalidInputError(f"temperature must be > 0, got {temperature}")
    if top_k is not None and (isinstance(top_k, bool) or int(top_k) != top_k or top_k < 1):
        raise InvalidInputError(f"top_k must be an integer >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise InvalidInputError(f"top_p must be in (0, 1], got {top_p}")


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
    def softmax(x):
        return x.softmax(dim=-1)


def to_probs(logits, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None):
    """Softmax of ``logits / temperature`` after top-k, then top-p (nucleus) filtering.

    Parameters
    ----------
    logits : ndarray or Tensor, shape (..., V)
    temperature : float
        > 0.
    top_k : int, optional
        Keep the k largest logits (ties at the k-th value are kept).
    top_p : float, optional
        In (0, 1]: keep the smallest set of most likely tokens whose probability reaches top_p
        (at least one token).

    Returns
    -------
    ndarray or Tensor, same shape, dtype (and device) as ``logits``.

    Raises
    ------
    InvalidInputError
        A parameter out of range.

    Examples
    --------
    >>> to_probs(np.log(np.array([0.5, 0.3, 0.2])), top_k=2).round(3).tolist()
    [0.625, 0.375, 0.0]
    """
    check_sampling(temperature, top_k, top_p)
    ops = _NumpyOps if isinstance(logits, np.ndarray) else _TorchOps
    x = logits / temperature
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
