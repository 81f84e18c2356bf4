"""The optimal rule at one node of every row, for the engine verifiers: the candidate among the
node's drafts and the rule's exact marginal, sampled, and the rule's exact law given the drafts.

The rule is the numpy optimal rule for n iid drafts realised by cells of time and swaps between them
(:class:`mdtheory.rules.cells.CellSchedule`, ``realise="cells"``): tokens in the order of q/p own
consecutive cells, a target marginal from running minima, swaps between cells above and below their
target; every draft draws a time from its token's cells and the earliest is the candidate, of exact
marginal μ with :math:`\\sum \\min(p, \\mu) = \\alpha^*` (papers/theory.md, "The optimal rule
batched"; papers/blocks_verifiers.md §10). :func:`candidates` draws it two ways, one law:

* on CPU tensors, each row's cells are built by the numpy rule's own compiled kernels
  (:mod:`mdtheory.rules.cells`: one sort of q/p for all rows at once, then linear passes, about
  3 sorts' time a row) and the candidate drawn among the drafts by their times, in one compiled
  loop over the rows: the numpy rule's construction itself, so its law is the reference's;
* on other devices, the batched device construction
  (:func:`mdtheory.torch_bridge.optimal.optimal_plan`), whose law given the drafts is the numpy
  rule's to rounding where no two tokens have the same q/p (whose cells either sort may order
  differently) and no token has 0 < q < 2^-51 (front cells in the numpy rule only).

:func:`node_rule` is the exact law's side: the numpy rule at one node, whose ``candidate_law``
gives the law of the candidate given the drafts (the verifiers' ``stops``).
"""

from __future__ import annotations

import numpy as np

from .._jit import njit
from ..models.polymatroid import _power_diff
from ..rules.cells import FRONT_Q, _build, _earliest, _sum2
from . import stops
from .stops import _torch, at

__all__ = ["candidates", "optimal_step", "node_rule", "step_law"]

#: On the CPU, rows are keyed and sorted this many (row x token) entries at a time, so that the
#: working arrays stay small.
CPU_CHUNK = 2 ** 21


def candidates(p, q, tokens, valid, generator):
    """The optimal rule's candidate at each row's node and its exact marginal.

    Parameters
    ----------
    p, q : tensor (B, V)
        The target's and the draft's law at the node (any float dtype, rows summing to about one).
    tokens : int64 tensor (B, m)
        Token ids; the drafts of row b are ``tokens[b, valid[b]]``, iid from q.
    valid : bool tensor (B, m)
    generator : torch.Generator or None

    Returns
    -------
    y : int64 tensor (B,)
        The candidate (where a row has no draft: its first token, to be ignored).
    mu : float64 tensor (B, V)
        The candidate's exact marginal (where a row has no draft: not specified).
    """
    torch = _torch()
    valid = valid & (q.gather(1, tokens) > 0)  # a draft q cannot draw has no cell (off the contract)
    n = valid.sum(1)
    if p.device.type == "cpu" and stops.CPU_KERNELS:
        u = torch.rand(tokens.shape[0], 2 * tokens.shape[1], generator=generator, dtype=torch.float64)
        return _cpu(p, q, tokens, valid, u)
    from ..torch_bridge.optimal import optimal_plan

    plan = optimal_plan(p, q, n.clamp(min=1))
    late = plan.times(tokens, generator).masked_fill(~valid, -1.0)
    return at(tokens, late.argmax(1)), plan.mu


def optimal_step(p, q, tokens, valid, u, generator):
    """One token-level step of the optimal rule at each row's node: the candidate y
    (:func:`candidates`), accepted with probability :math:`\\min(1, p(y)/\\mu(y))` by ``u[:, 0]``;
    otherwise (and on rows with no draft) the token is drawn by ``u[:, 1]`` from
    :math:`(p - \\mu)^+` normalised (from p where that is empty or there is no draft).

    Returns (y, accept (B,) bool, token (B,)): the emitted token is y where accepted."""
    from .stops import categorical, residual

    torch = _torch()
    has = (valid & (q.gather(1, tokens) > 0)).any(1)
    y, mu = candidates(p, q, tokens, valid, generator)
    row = p.to(torch.float64)
    row = row.div_(row.sum(-1, keepdim=True))
    mu_y = at(mu, y)
    ratio = torch.where(mu_y > 0, at(row, y) / mu_y.clamp(min=1e-300), 1.0).clamp(max=1.0)
    accept = has & (u[:, 0] < ratio)
    token = categorical(residual(row, mu, keep=~has), u[:, 1])
    return y, accept, torch.where(accept, y, token)


def step_law(p, q, drafts, reach: float):
    """The exact law of :func:`optimal_step` at one node reached with probability ``reach``: p, q
    rows (V,) and the node's drafts (token ids). Returns (accept (V,): the probability of accepting
    each token, stop: ``reach`` times the probability of stopping there, correction (V,): the
    stopped token's law up to a factor)."""
    total = p.sum()
    row = p / total if total > 0 else p
    drafts = [int(y) for y in drafts if q[y] > 0]
    if reach == 0 or not drafts:
        return np.zeros(p.size), reach, row
    accept, rejected = node_rule(row, q, len(drafts)).conditional(np.asarray(drafts))
    mass = rejected.sum()
    return accept, reach * mass, rejected if mass > 0 else row


def node_rule(p, q, n: int):
    """The numpy optimal rule (cells) at one node: p, q float rows (V,), n >= 1 iid drafts; its
    ``marginal``, ``accept_ratio``, ``res`` and ``schedule.candidate_law(drafts)`` are the exact law
    of a step."""
    from ..rules.optimal import Optimal

    return Optimal(np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64), int(n), normalize=True)


def _cpu(p, q, tokens, valid, u):
    """:func:`candidates` on CPU tensors by the numpy rule's kernels: the rows with drafts, a block
    of rows at a time (on the host, the rows without drafts are skipped without a cost)."""
    torch = _torch()
    B, V = p.shape
    y = tokens[:, 0].clone()
    mu = torch.zeros(B, V, dtype=torch.float64)
    ids, ok, uu = (t.contiguous().numpy() for t in (tokens, valid, u))
    busy = np.flatnonzero(ok.any(1))
    P, Q = (t.detach().contiguous().numpy() for t in (p, q))
    rows = max(1, CPU_CHUNK // V)
    for lo in range(0, busy.size, rows):
        at_ = busy[lo:lo + rows]
        Pb, Qb = P[at_], Q[at_]
        # the numpy rule's normalisation: x / x.sum(), pairwise sums of float64 rows
        sp, sq = (x.sum(1, dtype=np.float64) for x in (Pb, Qb))
        key = np.empty(Pb.shape)
        _keys(Pb, Qb, sp, sq, key)
        order = np.argsort(key, axis=1)
        yb, mub = np.empty(at_.size, np.int64), np.empty(Pb.shape)
        _rows(Pb, Qb, sp, sq, order, ids[at_], ok[at_], uu[at_], mub, yb)
        y.numpy()[at_], mu.numpy()[at_] = yb, mub
    return y, mu


@njit(cache=True, error_model="numpy")
def _keys(P, Q, sp, sq, key):
    """Per row, q/p of the normalised rows (p = P / sp, q = Q / sq, in float64) into ``key``: 0 where
    q = 0 (no cell) or q < FRONT_Q (a front cell), inf where p = 0 < q (as
    :func:`mdtheory.rules.cells._keys` on the normalised rows)."""
    B, V = P.shape
    for b in range(B):
        for k in range(V):
            q = np.float64(Q[b, k]) / sq[b]
            p = np.float64(P[b, k]) / sp[b]
            key[b, k] = 0.0 if q == 0.0 or q < FRONT_Q else (q / p if p > 0.0 else np.inf)


@njit(cache=True, error_model="numpy")
def _rows(P, Q, sp, sq, order, tokens, valid, U, mu, out):
    """Per row: the numpy rule's cells of the normalised rows (P / sp, Q / sq, in float64; ``order``
    sorts their keys) for the drafts ``tokens[valid]`` (n of them; the front cells of the tokens
    with 0 < q < FRONT_Q as :class:`mdtheory.rules.cells.CellSchedule` lays them), the candidate by
    their times (uniforms ``U``, two per draft) into ``out`` and the exact marginal into ``mu``; a
    row with no draft gets its first token and the marginal of one draft."""
    B, V = P.shape
    m = tokens.shape[1]
    work = np.empty((10, V + 1))
    positions = np.empty((2, V + 1), np.int64)
    ints = np.empty(5 * V + 2, np.int32)
    floats = np.empty(4 * V + 3)
    where, first, stop = ints[:V], ints[V: 2 * V], ints[2 * V: 3 * V]
    up, down = ints[3 * V: 4 * V + 1], ints[4 * V + 1:]
    rest, keep, marginal, cum = floats[: V + 1], floats[V + 1: 2 * V + 1], floats[2 * V + 1: 3 * V + 1], \
        floats[3 * V + 1:]
    p, q = np.empty(V), np.empty(V)
    light = np.empty(V, np.int64)
    drafts = np.empty(max(m, 1), np.int64)
    u = np.empty(2 * max(m, 1))
    for b in range(B):
        n = 0
        for i in range(m):
            if valid[b, i]:
                drafts[n] = tokens[b, i]
                u[2 * n], u[2 * n + 1] = U[b, 2 * i], U[b, 2 * i + 1]
                n += 1
        if n == 0:
            drafts[0], u[0], u[1] = tokens[b, 0], U[b, 0], U[b, 1]
        nl = 0
        for k in range(V):
            p[k], q[k] = np.float64(P[b, k]) / sp[b], np.float64(Q[b, k]) / sq[b]
            if 0.0 < q[k] < FRONT_Q:
                light[nl] = k
                nl += 1
        top, g0, t0 = 1.0, 0.0, 0.0
        front_start, front_length = np.zeros(nl), np.zeros(nl)
        front_mass = np.zeros(nl)
        tiny = light[:nl]
        if nl:
            tiny = light[:nl][np.argsort(q[light[:nl]], kind="mergesort")]
            gc, tc, at_ = 0.0, 0.0, 0.0
            for i in range(nl):
                front_length[i] = q[tiny[i]]
                front_start[i] = at_
                at_ += front_length[i]
                front_mass[i] = _power_diff(1.0 - front_start[i], front_length[i], max(n, 1))
                g0, e = _sum2(g0, front_mass[i])
                gc += e
                t0, e = _sum2(t0, p[tiny[i]])
                tc += e
            g0, t0 = g0 + gc, t0 + tc
            top = 1.0 - (front_start[nl - 1] + front_length[nl - 1])
            for i in range(nl):
                p[tiny[i]], q[tiny[i]] = 0.0, 0.0
        J = _build(p, q, max(n, 1), top, g0, t0, order[b], where, rest, keep, marginal, up, down, cum, first,
                   stop, work, positions)
        for i in range(nl):
            where[tiny[i]] = -1 - i
            marginal[tiny[i]] = front_mass[i]
        k = max(n, 1)
        out[b] = _earliest(drafts[:k], u[: 2 * k], where, rest, keep, first, stop, cum[: J + 1], up[:J],
                           down[:J], front_start, front_length)
        for v in range(V):
            mu[b, v] = marginal[v]
