"""Batched optimal acceptance of iid drafts on tensors, differentiable through autograd."""

from __future__ import annotations

from ..errors import InvalidInputError
from .tensors import _check_pair, _torch

__all__ = ["alpha_star"]


#: The selection route's safety margin (relative to the float type's epsilon): a bucket is opened
#: unless its bound is below the best boundary by this much, and its lowest ratio is shaded by it.
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
    **Selection, exact** (papers/theory.md, section "α* without a sort: buckets of the ratio
    bracket every prefix", the numpy route's form). Each ratio r = p/q goes to a bucket by a
    digit of its bits (its exponent and top :data:`~mdtheory.routes.select.DIGIT_BITS` mantissa
    bits, the ratios below 2^-40 in the first, those at or above 2n, inf and NaN in the last),
    so the buckets are intervals of r in order and every bucket boundary is a prefix of the sorted
    order. Per-bucket sums of p and q (two ``index_add_``) give the gain at every boundary, and
    within bucket j (ratios at least its lower end ℓ) every prefix gains at most
    :math:`\\max(G_j, (Q_j + q_j)^n - P_j - \\ell q_j)` (convex in the q added). The tokens of the
    buckets whose bound reaches the best boundary (less a margin of rounding) are gathered, sorted
    by row and ratio (a sort of those tokens only, a few dozen per row on language-model pairs) and
    evaluated; the maximum is the sort route's. The buckets' sums are the input dtype's; the running
    sums over the buckets and the opened tokens are taken in float64.
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


def _scheme(torch, dtype, n: int):
    """(integer dtype of the ratio's bits, shift, lo, nb) of the buckets for float ``dtype``: as
    :func:`mdtheory.routes.select.bucket_scheme` at its largest, for the dtype's mantissa."""
    from ..routes.select import DIGIT_BITS, LOW_EXP

    single = dtype == torch.float32
    shift = (23 if single else 52) - DIGIT_BITS  # the mantissa's bits
    ints = torch.int32 if single else torch.int64
    top = max(int(n - 1).bit_length(), 0) + 1  # 2^top >= 2n

    def bits(x):
        return int(torch.tensor(x, dtype=dtype).view(ints)) >> shift

    lo = bits(2.0 ** -LOW_EXP)
    return ints, shift, lo, bits(2.0 ** top) - lo


def _select(p, q, n: int):
    """alpha* of rows (B, V) by the buckets of :func:`alpha_star` (Notes)."""
    torch = _torch()
    if p.dtype not in (torch.float32, torch.float64):  # half precisions: their bits are too few
        p, q = p.float(), q.float()
    B, V = p.shape
    dev, dt = p.device, p.dtype
    ints, shift, lo, nb = _scheme(torch, dt, n)
    m = nb + 2  # buckets per row: below 2^-40, the digits, at least 2^top (inf and NaN too)
    ratio = p / q
    # each token's bucket, as an index into the rows' buckets laid end to end: the bits of the
    # ratio (increasing with it; a NaN's may be negative, clamped to bucket 0, where its p = q = 0
    # adds nothing), shifted, less the first digit, clamped to the row's range
    start = torch.arange(B, device=dev, dtype=ints)[:, None] * m
    flat = ratio.view(ints) >> shift
    flat.sub_(start.neg().add_(lo - 1))
    flat = torch.clamp_(flat, min=start, max=start + (m - 1)).view(-1)
    qbin = torch.zeros(B * m, dtype=dt, device=dev).index_add_(0, flat, q.reshape(-1))
    pbin = torch.zeros(B * m, dtype=dt, device=dev).index_add_(0, flat, p.reshape(-1))
    qbin, pbin = qbin.view(B, m).double(), pbin.view(B, m).double()
    zero = torch.zeros_like(qbin[:, :1])
    Q = torch.cat([zero, qbin.cumsum(-1)], -1).clamp_(max=1.0)  # (B, m + 1): every boundary
    P = torch.cat([zero, pbin.cumsum(-1)], -1)
    gain = Q ** n - P
    best = gain.amax(-1).clamp(min=0.0)
    eps = torch.finfo(dt).eps
    # each bucket's lowest ratio (0 for the first), shaded by the rounding of the ratio
    low = torch.arange(lo, lo + nb + 1, device=dev, dtype=torch.int64) << shift
    low = low.to(ints).view(dt).double() * (1.0 - MARGIN_EPS * eps)
    low = torch.cat([torch.zeros(1, dtype=torch.float64, device=dev), low])
    bound = torch.maximum(gain[:, :-1], Q[:, 1:] ** n - P[:, :-1] - low * qbin)
    open_ = (bound >= best[:, None] - MARGIN_EPS * eps) & (qbin > 0)
    if not bool(open_.any()):
        return (1.0 - best).to(dt)
    # the opened buckets' tokens (row, column), sorted by row, then ratio (stable sorts)
    rows, cols = open_.view(-1).index_select(0, flat).view(B, V).nonzero(as_tuple=True)
    r = ratio[rows, cols]
    by = torch.sort(r, stable=True).indices
    by = by[torch.sort(rows[by], stable=True).indices]
    rows, cols = rows[by], cols[by]
    bucket = flat.view(B, V)[rows, cols] - start[rows, 0]
    qs, ps = q[rows, cols].double(), p[rows, cols].double()
    # running sums from each opened bucket's start (its boundary's sums plus the bucket's tokens
    # so far); every prefix is evaluated, a class's inner points never beating its ends (convex)
    first = torch.ones_like(rows, dtype=torch.bool)
    first[1:] = (rows[1:] != rows[:-1]) | (bucket[1:] != bucket[:-1])
    at = torch.arange(rows.numel(), device=dev)
    head = torch.where(first, at, 0).cummax(0).values
    cq, cp = qs.cumsum(0), ps.cumsum(0)
    Qt = Q[rows, bucket] + cq - (cq - qs)[head]
    Pt = P[rows, bucket] + cp - (cp - ps)[head]
    gains = Qt.clamp(max=1.0) ** n - Pt
    inside = torch.full((B,), float("-inf"), dtype=torch.float64, device=dev)
    inside.scatter_reduce_(0, rows, gains, "amax")
    return (1.0 - torch.maximum(best, inside).clamp(min=0.0)).to(dt)
