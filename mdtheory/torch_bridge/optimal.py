"""The optimal rule's construction for a whole batch on the device: sorts, running sums, one merge.

For iid drafts (papers/theory.md, "The optimal rule batched: cells of time and swaps between
them"): tokens in order of q/p increasing own consecutive *cells* of time, token k the cell of
length q_k that a priority order gives it, of G-mass Δ_k (G(t) = 1 - (1 - t)^n, the law of the
earliest of n uniform times). The target marginal is μ_k = M_k - M_{k-1} with

    M_k = P_k + min_{j <= k} (G_j - P_j)  (k <= k*),   M_k = P_k + min_{j >= k} (G_j - P_j)  (k >= k*),

(P, G the running sums of p and of the cells' G-masses, k* the optimal cut where G - P is least):
μ <= p before the cut, μ >= p after it, μ(first k*) = G_{k*}, so its acceptance Σ min(p, μ) is α*.
Cells whose G-mass exceeds their target (*up* cells) swap part of their time with later cells whose
target exceeds theirs (*down* cells), matched first-in first-out along the running sums of the
excesses; a swap of length ℓ between cells a < b moves ℓ (h_a - h_b) of G-mass from a to b (h the
cells' mean densities Δ/q), and no cell swaps more than its length. A draft's time is uniform on a
cell chosen among its token's own cell and its swapped pieces in proportion to their lengths, so a
time is uniform on [0, 1] whatever the token, and the earliest draft, the candidate, has the exact
law :math:`\\mu_x = \\sum_{\\text{pieces}} \\ell \\, h_{\\text{cell}}` (computed from the stored
pieces, so rounding in the construction never breaks the output law).

Everything is done in float64 on the device with (B, V) tensors: one sort of q/p, running sums,
running minima, one sort merging the two running sums of excesses, searches; no per-position loop.
"""

from __future__ import annotations

from .tensors import _torch

__all__ = ["OptimalPlan", "optimal_plan"]

#: On the CPU the plan is built this many (row x token) entries at a time: each working tensor then
#: stays in the caches (8 MiB in float64) instead of a fresh allocation of B x V per operation.
CPU_CHUNK = 2 ** 20
#: Sort CPU tensors with numpy (the tests turn it off to run the device's torch.sort route on the CPU).
_NUMPY_SORT_ON_CPU = True


class OptimalPlan:
    """The batched plan of :func:`optimal_plan`; every tensor has the batch as its first dimension.

    Attributes
    ----------
    order, where : (B, V) long
        Token at each position of the order (q/p increasing, ties in any order), and its inverse.
    rest : (B, V) float64
        1 - (time at which each position's cell starts) = the q-mass of this position and after
        (exactly 1 at the first position).
    length : (B, V) float64
        Each position's q (its cell's length, ``rest`` less the next position's ``rest``).
    keep : (B, V) float64
        The part of its own cell each position keeps.
    first, stop : (B, V) long
        Its swapped pieces are ``first`` .. ``stop - 1`` of the piece arrays.
    up : (B, V) bool
        Whether it is an up position (its pieces lie in the down cells ``down_cell``) or not
        (they lie in ``up_cell``).
    up_cell, down_cell : (B, J) long
        The two positions of each swap piece (up_cell < down_cell where the length is positive).
    cum : (B, J + 1) float64
        Running sum of the pieces' lengths (piece j spans ``cum[j]`` .. ``cum[j + 1]``).
    mu : (B, V) float64
        Exact law of the candidate, by token (not by position).
    target : (B, V) float64
        The marginal aimed at, by token (μ up to the rounding of the construction).
    """

    def __init__(self, **tensors):
        self.__dict__.update(tensors)

    @classmethod
    def stack(cls, plans) -> OptimalPlan:
        """The plans of consecutive row blocks as one."""
        torch = _torch()
        return cls(**{name: torch.cat([vars(pl)[name] for pl in plans]) for name in vars(plans[0])})

    def repeat_rows(self, k: int) -> OptimalPlan:
        return OptimalPlan(**{name: t.repeat_interleave(k, dim=0) for name, t in vars(self).items()})

    def times(self, drafts, generator=None):
        """The time of every draft (B, m), as 1 - time (the largest is the earliest)."""
        torch = _torch()
        kw = {"generator": generator, "device": drafts.device, "dtype": torch.float64}
        pos = self.where.gather(1, drafts)  # the drafted tokens' positions
        u, v = torch.rand(2, *drafts.shape, **kw)
        qx, keep = self.length.gather(1, pos), self.keep.gather(1, pos)
        own = u * qx < keep
        lo, hi = self.first.gather(1, pos), self.stop.gather(1, pos)
        c0, c1 = self.cum.gather(1, lo), self.cum.gather(1, hi)
        # beyond the own cell: a point of the token's stretch of the pieces' running lengths
        frac = ((u * qx - keep) / (qx - keep).clamp(min=1e-300)).clamp(0.0, 1.0)
        j = torch.searchsorted(self.cum, c0 + frac * (c1 - c0), right=True) - 1
        j = j.clamp(max=hi - 1).maximum(lo).clamp(0, self.up_cell.shape[1] - 1)
        partner = torch.where(self.up.gather(1, pos), self.down_cell.gather(1, j),
                              self.up_cell.gather(1, j))
        cell = torch.where(own | (hi <= lo), pos, partner)
        return self.rest.gather(1, cell) - v * self.length.gather(1, cell)


def _argsort(x, merge: bool = False):
    """Indices sorting each row of x: ``torch.sort`` on the device; numpy's sorts for a CPU tensor
    (torch's CPU sort took 5 ms for one row of 32,000 floats, numpy's 0.6 ms). ``merge``: the row is
    two sorted runs, merged stably (numpy's timsort merges runs in linear time)."""
    torch = _torch()
    if x.device.type == "cpu" and _NUMPY_SORT_ON_CPU:
        import numpy as np

        return torch.from_numpy(np.argsort(x.numpy(), axis=-1, kind="stable" if merge else None))
    return torch.sort(x, dim=-1, stable=merge).indices


def _rises(rest, length, n):
    """G-mass of each cell, rest^n - (rest - length)^n, to full relative precision."""
    torch = _torch()
    safe = rest.clamp(min=1e-300)
    r = (length / safe).clamp(max=1.0)
    return torch.where(rest > 0, -safe ** n * torch.expm1(n * torch.log1p(-r)),
                       torch.zeros_like(rest))


def optimal_plan(p, q, n) -> OptimalPlan:
    """The optimal rule's cells and swaps for rows (p, q) of shape (B, V), n iid drafts.

    Parameters
    ----------
    p, q : tensor, shape (B, V)
        Distributions (any float dtype; the plan is built in float64 on their device).
    n : int or tensor of shape (B,)
        Number of iid drafts, at least 1 (a tensor: one count per row, on the rows' device).

    Returns
    -------
    OptimalPlan
        Its :attr:`~OptimalPlan.mu` is the exact law of the candidate of
        :meth:`OptimalPlan.times`' earliest draft, and :math:`\\sum_y \\min(p, \\mu)` is α* up to
        float rounding (papers/theory.md).
    """
    torch = _torch()
    B, V = p.shape
    rows = max(1, CPU_CHUNK // V)
    if p.device.type == "cpu" and B > rows:
        return OptimalPlan.stack([optimal_plan(p[i:i + rows], q[i:i + rows],
                                               n[i:i + rows] if torch.is_tensor(n) else n)
                                  for i in range(0, B, rows)])
    p, q = (t.detach().to(torch.float64) for t in (p, q))
    p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
    dev = p.device
    # q/p increasing; q = 0 first (no cell), p = 0 < q last (ratio inf)
    key = torch.where(q > 0, q / p, torch.zeros_like(q))
    order = _argsort(key)
    po = p.gather(1, order)
    # q of this position and after: 1 - its cell's start. Divided by the whole suffix sum, the first
    # is exactly 1, so the cells' G-masses add up to G(1) = 1 at any n (the suffix sum's own
    # rounding, raised to the power n, would be n times larger); each cell's length is the
    # difference of its bounds, so consecutive cells meet exactly (Sterbenz: where both bounds lie
    # in [1/2, 1], the only place where G's density reaches n)
    rest = q.gather(1, order).flip(-1).cumsum(-1).flip(-1)
    rest = rest / rest[:, :1]
    qo = rest - torch.cat([rest[:, 1:], torch.zeros_like(rest[:, :1])], -1)
    if torch.is_tensor(n):
        n = n.to(dev, torch.float64)[:, None]
    rise = _rises(rest, qo, n)  # the cells' G-masses
    zero = torch.zeros(B, 1, dtype=torch.float64, device=dev)
    G = torch.cat([zero, rise.cumsum(-1)], -1)
    P = torch.cat([zero, po.cumsum(-1)], -1)
    D = G - P  # (B, V + 1); its least value, at the cut k*, is alpha* - 1
    cut = D.argmin(-1, keepdim=True)
    lead = D.cummin(-1).values
    tail = D.flip(-1).cummin(-1).values.flip(-1)
    idx = torch.arange(V + 1, device=dev)
    M = P + torch.where(idx <= cut, lead, tail)
    target = (M[:, 1:] - M[:, :-1]).clamp(min=0.0)
    del G, P, D, lead, tail, M, key
    # excess G-mass of each cell over its target: up cells give, down cells take, first in first out
    excess = rise - target
    ups, downs = excess.clamp(min=0.0), (-excess).clamp(min=0.0)
    U, Dn = ups.cumsum(-1), downs.cumsum(-1)
    total = torch.minimum(U[:, -1:], Dn[:, -1:])
    # merge the two running sums: piece j runs between the merged values j - 1 and j, inside the up
    # cell of the running sum U that comes next, and the down cell of Dn that comes next
    both = torch.cat([U, Dn], -1).clamp(max=total)
    src = _argsort(both, merge=True)
    ends = both.gather(1, src)
    del both
    del U, Dn, ups, downs, excess
    from_up = (src < V).long()
    a = from_up.cumsum(-1) - from_up  # U values merged before piece j
    b = torch.arange(2 * V, device=dev) - a
    mass = ends - torch.cat([zero, ends[:, :-1]], -1)
    del ends
    rank = torch.empty_like(src).scatter_(1, src, torch.arange(2 * V, device=dev).expand(B, -1))
    del src, from_up
    a, b = a.clamp(max=V - 1), b.clamp(max=V - 1)
    dens = torch.where(qo > 0, rise / qo.clamp(min=1e-300), torch.zeros_like(qo))
    gap = dens.gather(1, a) - dens.gather(1, b)
    ok = (mass > 0) & (a < b) & (gap > 0)
    length = torch.where(ok, mass / gap.clamp(min=1e-300), torch.zeros_like(mass))
    del mass, gap, ok
    # a cell never swaps more than its length (exact in real arithmetic; rounding only); two
    # passes always, a pass that finds nothing over multiplying by one (no host synchronisation)
    for _ in range(2):
        used = torch.zeros_like(qo).scatter_add_(1, a, length).scatter_add_(1, b, length)
        over = torch.where(used > qo, qo / used.clamp(min=1e-300), torch.ones_like(qo))
        length = length * torch.minimum(over.gather(1, a), over.gather(1, b))
    used = torch.zeros_like(qo).scatter_add_(1, a, length).scatter_add_(1, b, length)
    keep = (qo - used).clamp(min=0.0)
    # the candidate's exact law from the stored pieces
    got = keep * dens
    got = got.scatter_add(1, a, length * dens.gather(1, b)).scatter_add(1, b, length * dens.gather(1, a))
    cum = torch.cat([zero, length.cumsum(-1)], -1)
    pos = torch.arange(V, device=dev).expand(B, V).contiguous()
    up = rise > target
    # position k's pieces: those after the merged value of its cell's running sum at k - 1, up to
    # and including the one at k
    stop = torch.where(up, rank[:, :V], rank[:, V:]) + 1
    first = torch.where(up, torch.cat([zero.long(), rank[:, :V - 1] + 1], -1),
                        torch.cat([zero.long(), rank[:, V:-1] + 1], -1))
    del rank
    where = torch.empty_like(order).scatter_(1, order, pos)
    mu = torch.empty_like(got).scatter_(1, order, got)
    aim = torch.empty_like(target).scatter_(1, order, target)
    return OptimalPlan(order=order, where=where, rest=rest, length=qo, keep=keep, first=first,
                       stop=stop, up=up, up_cell=a, down_cell=b, cum=cum, mu=mu, target=aim)
