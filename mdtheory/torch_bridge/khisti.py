"""Khisti et al.'s truncated tournament solved on the device, every position of a batch at once.

The same program as :mod:`mdtheory.rules.khisti` (papers/theory.md, "The truncated LP without a V x V
state"): per stage, the top s tokens by :math:`p - \\ell r` (``torch.topk``, no sort), the pairs among
them split by a maximum flow, every other pair settled by a score (bucketed keys, no sort; or ranks).
On a GPU the flow is solved exactly by a batched simplex (:func:`batched_max_flow`): its constraint
matrix is a network matrix, so every tableau entry stays in {-1, 0, 1} and every pivot is exact; only
the right-hand sides (masses) carry rounding. Its cost grows with the pairs cubed, so the device's
default truncation is :data:`DEVICE_S`. On the CPU each row's flow is the numpy rule's (augmenting
paths, compiled), and the default truncation is the numpy rule's: the same program.
"""

from __future__ import annotations

import numpy as np

from ..rules.khisti import BUCKET_EDGES, BUCKETS, RESTS, _outside_rows, _stage_blocks
from ..rules.khisti import bucket_score as _numpy_score
from ..rules.khisti import default_size as _numpy_size
from .tensors import _torch

__all__ = ["bucket_score", "batched_max_flow", "default_size", "truncated_stage", "DEVICE_S"]

#: The default truncation on a GPU: the batched simplex's tableau has (s(s - 1)/2 + 2s) rows and
#: about three times as many columns, and one thread of a CPU ran it at 2,465 positions per second
#: at s = 8 and 33 at s = 16 (B = 256, V = 1,000, n = 4; papers/theory.md, "Default truncation and
#: its guard").
DEVICE_S = 8


def default_size(V: int, device) -> int:
    """The default truncation of the device rule: the numpy rule's
    (:func:`mdtheory.rules.khisti.default_size`) on the CPU, where each row's flow is the numpy
    rule's; at most :data:`DEVICE_S` on a GPU (the batched simplex)."""
    torch = _torch()
    if torch.device(device).type == "cpu":
        return _numpy_size(V)
    return min(DEVICE_S, V)


def _rows_blocks(pt, lt, rt, lo, ro, s, a, b):
    """The pairs of every row's top on the CPU in one compiled call, the numpy rule's program
    (:func:`mdtheory.rules.khisti._stage_blocks`: its flow by augmenting paths, its block and law
    on the top), in float64: the blocks (B, S, S) and the laws on the top (B, S), in pt's dtype."""
    torch = _torch()
    arrays = (np.ascontiguousarray(x.detach().to(torch.float64).numpy()) for x in (pt, lt, rt, lo, ro))
    S = pt.shape[1]
    count = s.clamp(0, S).numpy().astype(np.int64)
    block, law = _stage_blocks(*arrays, count, a.numpy().astype(np.int64),
                               b.numpy().astype(np.int64), 1e-300, 64 * (S * S + 1))
    return torch.from_numpy(block).to(pt.dtype), torch.from_numpy(law).to(pt.dtype)


def bucket_score(key):
    """:func:`mdtheory.rules.khisti.bucket_score` on a tensor: the same scores, int64. On a GPU one
    ``torch.bucketize``; on the CPU, where its binary search is slow, the numpy rule's own compiled
    exponent and mantissa arithmetic (exact, so the same integers)."""
    torch = _torch()
    if key.is_cuda:
        edges = torch.as_tensor(BUCKET_EDGES, dtype=key.dtype, device=key.device)
        return torch.bucketize(key, edges, right=False)
    flat = np.ascontiguousarray(key.detach().to(torch.float64).numpy()).ravel()  # exact from float32
    return torch.from_numpy(_numpy_score(flat)).view(key.shape)


def _pairs(s: int, device):
    torch = _torch()
    a, b = torch.triu_indices(s, s, 1, device=device)
    return a, b


def batched_max_flow(d, m, a, b, max_iter: int | None = None):
    """Maximum flow from pairs (supply m, shape (B, E)) to tokens (capacity d, shape (B, s)); pair e
    may send to tokens a[e] and b[e]. A primal simplex with Bland's rule on the LP

    .. math:: \\max \\sum_k z_k,\\ z_k \\le d_k,\\ z_k \\le \\sum_{a_e = k} y_e + \\sum_{b_e = k} w_e,
              \\ y_e + w_e \\le m_e,\\ y, w, z \\ge 0,

    started at 0 (feasible), every row of the batch pivoting in lockstep until it is optimal.

    Returns
    -------
    w : Tensor (B, E)
        Flow of each pair to its second token b_e.
    value : Tensor (B,)
        The flow's value (the optimum, for every row whose ``done`` is True).
    done : Tensor (B,) bool
        The row reached optimality within ``max_iter`` pivots (default 20 x the columns); a row that
        did not still holds a feasible flow.
    """
    torch = _torch()
    B, E = m.shape
    s = d.shape[1]
    dev, dt = m.device, m.dtype
    cols = 2 * E + s  # y (to a), w (to b), z
    rows = E + 2 * s  # supply, z <= d, z <= inflow
    A = torch.zeros(rows, cols, dtype=dt, device=dev)
    e = torch.arange(E, device=dev)
    k = torch.arange(s, device=dev)
    A[e, e] = 1.0
    A[e, E + e] = 1.0
    A[E + k, 2 * E + k] = 1.0
    A[E + s + k, 2 * E + k] = 1.0
    A[E + s + a, e] = -1.0
    A[E + s + b, E + e] = -1.0
    T = torch.zeros(B, rows + 1, cols + rows + 1, dtype=dt, device=dev)
    T[:, :rows, :cols] = A
    T[:, :rows, cols:cols + rows] = torch.eye(rows, dtype=dt, device=dev)
    T[:, :E, -1] = m
    T[:, E:E + s, -1] = d
    T[:, rows, 2 * E:cols] = -1.0  # objective row: reduced costs of max sum z
    basis = torch.arange(cols, cols + rows, device=dev).expand(B, rows).clone()
    done = torch.zeros(B, dtype=torch.bool, device=dev)
    rowsB = torch.arange(B, device=dev)
    big = cols + rows + 1
    limit = max_iter if max_iter is not None else 20 * (cols + rows)
    for it in range(limit):
        red = T[:, rows, :-1]
        neg = red < -0.5  # reduced costs are integers: the matrix is a network matrix
        done = done | ~neg.any(1)
        if it % 8 == 0 and bool(done.all()):
            break
        # Bland: the first improving column, the leaving row of least ratio, ties by basic index
        enter = torch.where(neg, torch.arange(cols + rows, device=dev), big).argmin(1)
        col = T[rowsB, :rows, enter]  # (B, rows)
        rhs = T[:, :rows, -1]
        pos = col > 0.5
        ratio = torch.where(pos, rhs, torch.inf)
        best = ratio.amin(1, keepdim=True)
        tie = pos & (ratio == best)
        leave = torch.where(tie, basis, big).argmin(1)
        active = ~done & pos.any(1)
        pivot_row = T[rowsB, leave]  # (B, cols + rows + 1), pivot element exactly 1
        factor = T[rowsB, :, enter] * active[:, None]  # (B, rows + 1)
        factor[rowsB, leave] = 0.0
        T.baddbmm_(factor[:, :, None], pivot_row[:, None, :], alpha=-1.0)  # T -= outer product
        T[:, :rows, -1].clamp_(min=0.0)
        basis[rowsB, leave] = torch.where(active, enter, basis[rowsB, leave])
    red = T[:, rows, :-1]
    done = done | ~(red < -0.5).any(1)
    x = torch.zeros(B, cols + rows + 1, dtype=dt, device=dev)
    x.scatter_(1, basis, T[:, :rows, -1])
    w = torch.minimum(x[:, E:2 * E], m)
    return w, T[:, rows, -1], done


#: Lanes per bin of the scores' sums on a GPU.
_LANES = 16
#: The same on the CPU (1: plain bins; tests set it to check the lanes there).
_CPU_LANES = 1


def _lane_cumsum(sums, lanes: int, shift: bool):
    """Running sums over bins of lane-spread bin sums (B, nb * lanes), given back per lane (every
    lane of a bin holds its bin's value): the sum over bins <= b, or < b with ``shift``."""
    torch = _torch()
    B = sums.shape[0]
    run = sums.view(B, -1, lanes).sum(-1).cumsum(1)
    if shift:
        run = torch.cat([torch.zeros_like(run[:, :1]), run[:, :-1]], 1)
    return run.repeat_interleave(lanes, dim=1) if lanes > 1 else run


def _bins_outside(left, right, score, top, active, nb):
    """The law outside the top, l_k R(<= score_k) + r_k L(< score_k) over the outside tokens, by
    sums over bins of the scores (the active top tokens in a bin of their own, nb - 1, above every
    score): (the scores as the step reads them, the law; its top entries to be overwritten).
    ``score`` is overwritten."""
    torch = _torch()
    B, V = left.shape
    dev = left.device
    lanes = _LANES if left.is_cuda else _CPU_LANES
    stored = score.to(torch.int16 if nb <= 32767 else torch.int32)  # what the step reads
    c = score
    if lanes > 1:  # a bin's tokens spread over lanes: fewer atomic additions on one address
        c.mul_(lanes).add_(torch.arange(V, device=dev) % lanes)
    own = (nb - 1) * lanes + top % lanes
    c.scatter_(1, top, torch.where(active, own, c.gather(1, top)))
    R = _lane_cumsum(torch.zeros(B, nb * lanes, dtype=left.dtype, device=dev).scatter_add_(1, c, right),
                     lanes, shift=False)
    L = _lane_cumsum(torch.zeros(B, nb * lanes, dtype=left.dtype, device=dev).scatter_add_(1, c, left),
                     lanes, shift=True)
    return stored, left * R.gather(1, c) + right * L.gather(1, c)


def _rows_outside(left, right, key, top, s):
    """The bucket scores and the law outside the top on the CPU, every row in one compiled call of
    the numpy rule's kernels (:func:`mdtheory.rules.khisti._outside_rows`), in float64: (the scores
    (B, V) int16, as the step reads them, the law in left's dtype, 0 on the active top)."""
    torch = _torch()
    arrays = (np.ascontiguousarray(x.detach().to(torch.float64).numpy()) for x in (left, right, key))
    count = s.clamp(0, top.shape[1]).numpy().astype(np.int64)
    score, mu = _outside_rows(*arrays, np.ascontiguousarray(top.numpy()), count, (BUCKET_EDGES.size - 1) // 2)
    return torch.from_numpy(score), torch.from_numpy(mu).to(left.dtype)


def truncated_stage(p, left, right, s, S: int, rest: str = "bucket"):
    """One stage for every row: :func:`mdtheory.rules.khisti.truncated_stage` batched.

    Parameters
    ----------
    p, left, right : Tensor (B, V)
    s : Tensor (B,) long
        Each row's truncation (at most S; 0 keeps the previous winner everywhere).
    S : int
        Width of the top kept (the largest s).

    Returns
    -------
    stage : dict
        ``top`` (B, S) tokens, ``active`` (B, S) bool (position < s), ``block`` (B, S, S) keep-left
        probabilities, ``score`` (B, V) integer scores, ``done`` (B,) the flow reached its optimum
        (the batched simplex on a GPU; on the CPU each row's flow is the numpy rule's).
    mu : Tensor (B, V)
        The exact law of the kept token under the stage as stored.
    """
    torch = _torch()
    B, V = p.shape
    dev = p.device
    key = p - left * right
    if rest == "rank":
        order = torch.sort(key, dim=-1, descending=True, stable=True).indices
        top = order[:, :S]
        score = torch.empty(B, V, dtype=torch.long, device=dev)
        score.scatter_(1, order, torch.arange(V - 1, -1, -1, device=dev).expand(B, V))
        nb = V + 1
    elif rest == "bucket":
        top = torch.topk(key, S, dim=-1, sorted=True).indices if S else key[:, :0].long()
        score = bucket_score(key) if p.is_cuda else None
        nb = BUCKETS + 1
    else:
        from ..errors import InvalidInputError
        raise InvalidInputError(f"khisti-lp's rest rule must be one of {', '.join(RESTS)}, got {rest!r}")
    active = torch.arange(S, device=dev) < s[:, None]
    lt, rt = left.gather(1, top) * active, right.gather(1, top) * active
    lo = (left.sum(-1) - lt.sum(-1)).clamp(min=0.0)
    ro = (right.sum(-1) - rt.sum(-1)).clamp(min=0.0)
    if score is None:  # the CPU's bucket scores and outside law, the numpy rule's, in one call
        stored, mu = _rows_outside(left, right, key, top, s)
    else:
        stored, mu = _bins_outside(left, right, score, top, active, nb)
    done = torch.ones(B, dtype=torch.bool, device=dev)
    if not p.is_cuda:  # the numpy rule's program for every row in one compiled call
        block, mu_top = _rows_blocks(p.gather(1, top), lt, rt, lo, ro, s, *_pairs(S, dev))
    else:
        block = torch.ones(B, S, S, dtype=p.dtype, device=dev)
        if S > 1:
            a, b = _pairs(S, dev)
            mass = lt[:, a] * rt[:, b] + lt[:, b] * rt[:, a]
            mu0 = lt * rt + lt * ro[:, None] + rt * lo[:, None]
            d = (p.gather(1, top) - mu0).clamp(min=0.0) * active
            w, _, done = batched_max_flow(d, mass, a, b)
            frac = torch.where(mass > 0, ((mass - w) / torch.where(mass > 0, mass, 1.0)).clamp(0.0, 1.0),
                               torch.ones_like(mass))
            block[:, a, b] = frac
            block[:, b, a] = 1.0 - frac
        joint = lt[:, :, None] * rt[:, None, :]
        mu_top = ((joint * block).sum(2) + (joint * (1.0 - block)).sum(1)
                  + lt * ro[:, None] + rt * lo[:, None])
    if S:
        mu.scatter_(1, top, torch.where(active, mu_top, mu.gather(1, top)))
    return {"top": top, "active": active, "block": block, "score": stored, "done": done}, mu
