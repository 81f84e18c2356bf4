"""Batched optimal acceptance of iid drafts on tensors, differentiable through autograd."""

from __future__ import annotations

from ..errors import InvalidInputError
from .tensors import _check_pair, _torch

__all__ = ["alpha_star"]


#: Bins of the ratio p/q over [0, n] in the selection route of :func:`alpha_star`.
BINS = 4096
#: The selection route's safety margin on its bounds (relative to the float type's epsilon): a bin
#: is examined token by token unless its bound is below the best boundary value by this much.
MARGIN_EPS = 64
METHODS = ("auto", "sort", "select")


def alpha_star(p, q, n: int, method: str = "auto"):
    """Batched optimal acceptance of n iid drafts: :math:`1 - \\max(0, \\max_j [Q_j^n - P_j])` over
    prefixes in q/p-decreasing order.

    Parameters
    ----------
    p, q : Tensor, shape (V,) or (B, V)
        Probability rows: finite, non-negative, each summing to one within the tolerance of their
        dtype, :func:`mdtheory._validate.sum_tolerance` (:func:`to_probs` gives such rows). Of
        different float dtypes, both are taken in the wider one.
    n : int
    method : {"auto", "sort", "select"}
        ``"sort"``: one sort of p/q and running sums. ``"select"``: no full sort (see Notes), no
        gradient. ``"auto"`` (default): ``"select"`` unless a gradient is needed (autograd then
        follows the sort route).

    Returns
    -------
    Tensor, shape () or (B,), differentiable in p and q (a subgradient at ties).

    Raises
    ------
    InvalidInputError
        n is not an integer >= 1, or method is unknown.
    InvalidDistributionError
        p or q is not a tensor of probability rows, or their shapes or devices differ.

    Notes
    -----
    **Selection, exact.** A prefix whose last token has p/q > n is never optimal (dropping that
    token changes :math:`Q^n - P` by :math:`p - (Q^n - (Q - q)^n) \\ge p - nq > 0`), so only ratios
    in [0, n] matter. They are binned into :data:`BINS` equal bins (a floor, monotone in the ratio,
    so every bin boundary is a prefix of the sorted order); per-bin sums of p and q give the value at
    every boundary, and within bin k (ratios at least its lower edge τ) every prefix is at most
    :math:`\\max(Q_k^n - P_k, (Q_k + q_k)^n - P_k - \\tau q_k)` (convex in the q added). Only the bins
    whose bound reaches the best boundary value (less a margin of rounding) are sorted, token by
    token: the maximum is the sort route's, with a histogram, a few passes and a sort of those
    tokens only (all of them where every ratio falls in one bin, p = q for instance).
    """
    torch = _torch()
    if method not in METHODS:
        raise InvalidInputError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    p, q, n = _check_pair(torch, p, q, n)
    grad = p.requires_grad or q.requires_grad
    if method == "select" or (method == "auto" and not grad):
        if p.ndim == 1:
            return _select(p.detach()[None], q.detach()[None], n)[0]
        return _select(p.detach(), q.detach(), n)
    if not grad:
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


def _select(p, q, n: int):
    """alpha* of rows (B, V) by the binned selection of :func:`alpha_star` (Notes)."""
    torch = _torch()
    B, V = p.shape
    dev, dt = p.device, p.dtype
    K = BINS
    ratio = p / q  # q = 0: inf or NaN, beyond every bin
    scale = K / n
    # bin of each ratio in [0, n) (a floor: truncation of a non-negative value), K for the rest,
    # as an index into the rows' bins laid end to end
    flat = (ratio * scale).nan_to_num_(nan=float(K)).clamp_(max=float(K)).long()
    flat += (K + 1) * torch.arange(B, device=dev)[:, None]
    flat = flat.view(-1)
    qbin = torch.zeros(B * (K + 1), dtype=dt, device=dev).index_add_(0, flat, q.reshape(-1))
    pbin = torch.zeros(B * (K + 1), dtype=dt, device=dev).index_add_(0, flat, p.reshape(-1))
    qbin, pbin = qbin.view(B, K + 1)[:, :K], pbin.view(B, K + 1)[:, :K]
    Q = torch.cat([torch.zeros_like(qbin[:, :1]), qbin.cumsum(-1)], -1).clamp(max=1.0)
    P = torch.cat([torch.zeros_like(pbin[:, :1]), pbin.cumsum(-1)], -1)
    at_edges = Q ** n - P  # (B, K + 1): every boundary, the empty prefix included
    best = at_edges.amax(-1).clamp(min=0.0)
    # the lower edge, shaded by the rounding of ratio * scale and its floor
    eps = torch.finfo(dt).eps
    tau = torch.arange(K, device=dev, dtype=dt) / scale * (1 - MARGIN_EPS * eps)
    bound = torch.maximum(at_edges[:, :-1], Q[:, 1:] ** n - P[:, :-1] - tau * qbin)
    open_ = (bound >= best[:, None] - MARGIN_EPS * eps) & (qbin > 0)
    if not bool(open_.any()):
        return 1.0 - best
    # the tokens of the open bins, gathered row by row (padding: ratio inf, q 0)
    shut = torch.zeros_like(open_[:, :1])
    member = torch.cat([open_, shut], -1).view(-1)[flat].view(B, V)
    slot = member.cumsum(-1)
    m = int(slot[:, -1].max())
    slot.sub_(1).masked_fill_(~member, m)
    r_sel = torch.full((B, m + 1), float("inf"), dtype=dt, device=dev).scatter_(1, slot, ratio)
    q_sel = torch.zeros((B, m + 1), dtype=dt, device=dev).scatter_(1, slot, q)
    r_sel, order = torch.sort(r_sel[:, :m], dim=-1)
    q_sel = q_sel.gather(1, order)
    p_sel = torch.where(q_sel > 0, r_sel * q_sel, 0.0)
    b_sel = (r_sel * scale).nan_to_num_(nan=float(K)).clamp_(max=float(K)).long()  # as above
    real = b_sel < K
    bk = b_sel.clamp(max=K - 1)
    # running sums within each open bin, from the bin's lower boundary
    first = torch.cat([torch.ones_like(real[:, :1]), b_sel[:, 1:] != b_sel[:, :-1]], -1)
    cq, cp = q_sel.cumsum(-1), p_sel.cumsum(-1)
    zero = torch.zeros_like(cq[:, :1])
    start = torch.where(first, torch.arange(m, device=dev), 0).cummax(-1).values
    base_q = torch.cat([zero, cq[:, :-1]], -1).gather(1, start)
    base_p = torch.cat([zero, cp[:, :-1]], -1).gather(1, start)
    Qt = (Q.gather(1, bk) + cq - base_q).clamp(max=1.0)
    Pt = P.gather(1, bk) + cp - base_p
    inside = torch.where(real, Qt ** n - Pt, float("-inf")).amax(-1)
    return 1.0 - torch.maximum(best, inside).clamp(min=0.0)
