"""Tensors in and out: the lazy torch import, validation of probability rows, logits to
probabilities, device checks and draft sampling."""

from __future__ import annotations

from .._validate import as_drafts, sum_tolerance
from ..errors import InvalidDistributionError, InvalidInputError, MdtheoryError
from ..language import logits as _logits

__all__ = ["to_probs", "check_device", "sample_drafts"]


def _torch():
    try:
        import torch
    except ImportError:
        raise MdtheoryError(
            "the torch bridge needs PyTorch; install it with pip install 'mdtheory[torch]'"
        ) from None
    return torch


def to_probs(logits, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None):
    """Softmax of ``logits / temperature`` after top-k, then top-p (nucleus) filtering.

    The shared implementation :func:`mdtheory.language.logits.to_probs` (also used by
    :mod:`mdtheory.language.lm`) on
    a tensor: the result keeps the dtype and device of ``logits`` and stays differentiable.
    """
    _torch()
    return _logits.to_probs(logits, temperature, top_k, top_p)


def _check_rows(torch, t, name: str) -> None:
    """Refuse anything but a float tensor of shape (V,) or (B, V) whose rows are distributions."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise InvalidDistributionError(f"{name} must be a floating-point torch tensor, got "
                                       f"{type(t).__name__}")
    if t.ndim not in (1, 2) or t.shape[-1] == 0 or t.numel() == 0:
        raise InvalidDistributionError(
            f"{name} has shape {tuple(t.shape)}; expected non-empty (V,) or (B, V)")
    d = t.detach()
    lo, hi = torch.aminmax(d)  # one pass; NaN propagates to both
    if not bool(torch.isfinite(hi)) or not bool(torch.isfinite(lo)):
        raise InvalidDistributionError(f"{name} has a non-finite entry")
    if lo < 0:
        raise InvalidDistributionError(f"{name} has a negative entry ({float(lo):g})")
    # the tolerance follows the dtype, as everywhere (mdtheory._validate): at least sqrt(eps), far
    # above a tree-summed row's rounding, so the row is summed in its own dtype (no float64 copy)
    tol = sum_tolerance(torch.finfo(d.dtype).eps)
    off = float((d.sum(-1) - 1.0).abs().max())
    if off > tol:
        raise InvalidDistributionError(
            f"a row of {name} sums {off:.3g} away from 1 (tolerance {tol:g})")


def _check_pair(torch, p, q, n, rows_only: bool = False):
    """Validate (p, q, n) as :func:`_check_rows` and :func:`mdtheory._validate.as_drafts` do, and
    return (p, q, n): p and q in their common dtype (a mixed pair works as its wider dtype).

    Raises
    ------
    InvalidInputError
        n is not an integer >= 1.
    InvalidDistributionError
        p or q is not a tensor of probability rows (of shape (B, V) with ``rows_only``), or their
        shapes or devices differ.
    """
    n = as_drafts(n)
    for name, t in (("p", p), ("q", q)):
        _check_rows(torch, t, name)
        if rows_only and t.ndim != 2:
            raise InvalidDistributionError(
                f"{name} has shape {tuple(t.shape)}; a batched rule takes rows of shape (B, V)")
    if p.shape != q.shape:
        raise InvalidDistributionError(f"p has shape {tuple(p.shape)} but q has {tuple(q.shape)}")
    if p.device != q.device:
        raise InvalidDistributionError(f"p is on {p.device} but q is on {q.device}")
    dtype = torch.promote_types(p.dtype, q.dtype)
    return p.to(dtype), q.to(dtype), n


def check_device(device: str) -> None:
    """Refuse a device string torch cannot parse or this machine cannot use, in one line.

    Raises
    ------
    InvalidInputError
        Naming the device and why (unknown type, or its backend is not available here).
    """
    torch = _torch()
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InvalidInputError(f"unknown device {device!r}; use cpu, cuda or cuda:N") from None
    if dev.type == "cpu":
        return
    try:
        torch.Generator(device=dev)
        torch.zeros(1, device=dev)
    except (RuntimeError, AssertionError, TypeError) as exc:
        raise InvalidInputError(
            f"device {device!r} is not available here ({str(exc).splitlines()[0].split('. ')[0]})"
        ) from None


def sample_drafts(q, n: int, generator=None):
    """n iid drafts per row of q (B, V): a long tensor (B, n) on q's device."""
    torch = _torch()
    return torch.multinomial(q, n, replacement=True, generator=generator)
