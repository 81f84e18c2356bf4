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
    order = torch.argsort(p.detach() / q.detach(), dim=-1)  # NaN (p = q = 0) sorts last
    Q = torch.gather(q, -1, order).cumsum(-1).clamp(max=1.0)
    P = torch.gather(p, -1, order).cumsum(-1)
    gain = (Q**n - P).amax(dim=-1)
    return 1.0 - gain.clamp(min=0.0)
