"""Batched optimal acceptance of iid drafts on tensors, differentiable through autograd."""

from __future__ import annotations

from ..errors import InvalidDistributionError, InvalidInputError
from .tensors import _check_rows, _torch

__all__ = ["alpha_star"]


def alpha_star(p, q, n: int):
    """Batched optimal acceptance of n iid drafts: :math:`1 - \\max(0, \\max_j [Q_j^n - P_j])` over
    prefixes in q/p-decreasing order.

    Parameters
    ----------
    p, q : Tensor, shape (V,) or (B, V)
        Probability rows: finite, non-negative, each summing to one within the tolerance of their
        dtype, :func:`mdtheory._validate.sum_tolerance` (:func:`to_probs` gives such rows).
    n : int

    Returns
    -------
    Tensor, shape () or (B,), differentiable in p and q (a subgradient at ties).

    Raises
    ------
    InvalidDistributionError
        p or q is not a tensor of probability rows, or their shapes differ.
    """
    torch = _torch()
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInputError(f"the number of drafts must be an integer >= 1, got {n!r}")
    for name, t in (("p", p), ("q", q)):
        _check_rows(torch, t, name)
    if p.shape != q.shape:
        raise InvalidDistributionError(f"p has shape {tuple(p.shape)} but q has {tuple(q.shape)}")
    if not (p.requires_grad or q.requires_grad):
        # p = (p/q) q: the sorted ratios give the sorted p, one gather fewer (a token with q = 0 sorts
        # last and adds to P only; taking its p as 0 repeats the value of the prefix before it)
        ratio, order = torch.sort(p / q, dim=-1)  # NaN (p = q = 0) sorts last
        qs = q.gather(-1, order)
        ps = torch.where(qs > 0, ratio * qs, 0.0)
    else:
        order = torch.argsort(p.detach() / q.detach(), dim=-1)
        qs, ps = torch.gather(q, -1, order), torch.gather(p, -1, order)
    gain = (qs.cumsum(-1).clamp(max=1.0) ** n - ps.cumsum(-1)).amax(dim=-1)
    return 1.0 - gain.clamp(min=0.0)
