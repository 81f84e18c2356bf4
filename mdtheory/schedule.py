"""Time schedules: an exact, fast realisation of any base of the iid coverage polymatroid.

**The rule.** Each of the n iid drafts carries, besides its token x ~ q, a private "time"
:math:`t \\in [0, 1]` drawn uniformly from a set :math:`E_x` of total length :math:`q_x`, where the sets
of all tokens tile [0, 1]; the candidate is the draft with the earliest time. A draft's time is then
uniform on [0, 1] whatever its token, so the earliest of n has density :math:`n (1 - t)^{n-1}` and

.. math:: \\mu(x) = P(\\text{candidate} = x) = \\int_{E_x} n (1 - t)^{n-1} \\, dt
          = \\sum_{[a, b] \\subseteq E_x} (1 - a)^n - (1 - b)^n,

exactly, from the pieces of :math:`E_x`. A priority order is the schedule with consecutive intervals in
priority order; every base μ of :math:`g(S) = 1 - (1 - q(S))^n` has a schedule, and
:func:`realise_iid` builds one in one pass.

**Construction.** Order the tokens by :math:`r_x = \\mu_x / q_x` decreasing (prefixes of this order
satisfy :math:`\\mu(S) \\le g(S)` since μ ∈ B(g)). Each token in turn takes the window of length
:math:`q_x`, contiguous in the coordinates of the time still free, whose G-mass
:math:`\\int n(1-t)^{n-1}` is :math:`\\mu_x`; the G-mass of a window decreases as it slides later, so the
window is unique. By induction the free time can always hold the rest: the free time in front of the
window carries density at least :math:`r_x \\ge r_y` for every later token y, so each later prefix
keeps the front capacity it needs, and the window always exists. A window never lies wholly before the
hole the previous token left (its density would exceed that token's ratio), so each search starts
there: the pass is linear in practice, and a token owns one to three pieces on the examples tried.

This is the realisation step the optimal verifier needs: the lexicographically optimal base
(:func:`mdtheory.polymatroid.lex_optimal_base_iid`) attains α*, and its schedule makes it a sampling
rule with an exactly known marginal, with no enumeration of draft sets.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._validate import as_distribution
from .errors import InvalidInputError

__all__ = ["Schedule", "realise_iid"]


@njit(cache=True)
def _gmass(a, b, n):
    """G-mass of [a, b]: (1 - a)^n - (1 - b)^n (exact 1 - a for a >= 1/2)."""
    return (1.0 - a) ** n - (1.0 - b) ** n


@njit(cache=True)
def _window_mass(i, x, j, y, middle, sa, sb, n):
    if i == j:
        return _gmass(x, y, n)
    return _gmass(x, sb[i], n) + middle + _gmass(sa[j], y, n)


@njit(cache=True)
def _window_end(i, x, length, nxt, sa, sb, n):
    """Move right by ``length`` of free time from (node i, position x): (j, y, G-mass of whole nodes)."""
    j, y, middle = i, x, 0.0
    while True:
        if length <= sb[j] - y:
            return j, y + length, middle
        length -= sb[j] - y
        if nxt[j] < 0:
            return j, sb[j], middle
        if j != i:
            middle += _gmass(sa[j], sb[j], n)
        j = nxt[j]
        y = sa[j]


@njit(cache=True)
def _record(k, a, b, owner, start, end, npieces):
    """Append the piece [a, b] of token position k unless it is empty."""
    if b > a:
        owner[npieces], start[npieces], end[npieces] = k, a, b
        npieces += 1
    return npieces


@njit(cache=True)
def _unlink(node, head, nxt, prv):
    """Remove ``node`` from the free-time list; returns the new head."""
    a, b = prv[node], nxt[node]
    if b >= 0:
        prv[b] = a
    if a >= 0:
        nxt[a] = b
        return head
    return b


@njit(cache=True)
def _build(qs, mus, n):
    """The window construction over [0, 1] for tokens already in processing order.

    Returns (owner, start, end): piece k of the schedule is [start[k], end[k]] owned by token
    position owner[k]; each token's pieces are consecutive.
    """
    m = qs.size
    cap = 2 * m + 2
    sa, sb = np.zeros(cap), np.zeros(cap)
    nxt, prv = -np.ones(cap, np.int64), -np.ones(cap, np.int64)
    sa[0], sb[0] = 0.0, 1.0
    head, nodes = 0, 1
    owner = np.zeros(3 * m + 2, np.int64)
    start, end = np.zeros(3 * m + 2), np.zeros(3 * m + 2)
    npieces = 0
    ci, cx = 0, 0.0  # the hole the previous token left, as (node, position)
    for k in range(m):
        if head < 0:
            break
        if k == m - 1:  # the last token takes all the free time
            i = head
            while i >= 0:
                npieces = _record(k, sa[i], sb[i], owner, start, end, npieces)
                i = nxt[i]
            head = -1
            break
        length, target = qs[k], mus[k]
        # start one window-length before the hole
        i, x, back = ci, cx, length
        while True:
            if back <= x - sa[i]:
                x -= back
                break
            back -= x - sa[i]
            if prv[i] < 0:
                x = sa[i]
                break
            i = prv[i]
            x = sb[i]
        j, y, middle = _window_end(i, x, length, nxt, sa, sb, n)
        if _window_mass(i, x, j, y, middle, sa, sb, n) < target:  # safeguard: search from the front
            i, x = head, sa[head]
            j, y, middle = _window_end(i, x, length, nxt, sa, sb, n)
        # slide right piece by piece until the window's G-mass falls to the target
        while True:
            d = min(sb[i] - x, sb[j] - y)
            at_end = nxt[j] < 0 and y + d >= sb[j]
            if _window_mass(i, x + d, j, y + d, middle, sa, sb, n) <= target or at_end:
                break
            x += d
            y += d
            if x >= sb[i] and nxt[i] >= 0:
                i = nxt[i]
                x = sa[i]
                if i == j:
                    middle = 0.0
                else:
                    middle -= _gmass(sa[i], sb[i], n)
            if y >= sb[j] and nxt[j] >= 0:
                if j != i:
                    middle += _gmass(sa[j], sb[j], n)
                j = nxt[j]
                y = sa[j]
        # exact middle mass, then Newton on the convex, decreasing mass(x') - target in [x, x + d]
        middle = 0.0
        if i != j:
            t = nxt[i]
            while t != j:
                middle += _gmass(sa[t], sb[t], n)
                t = nxt[t]
        gap = y - x
        lo, hi = x, x + d
        for _ in range(100):
            f = _window_mass(i, x, j, x + gap, middle, sa, sb, n) - target
            slope = n * ((1.0 - x - gap) ** (n - 1) - (1.0 - x) ** (n - 1))
            if f <= 0.0 or slope >= 0.0:
                break
            step = -f / slope
            new = min(x + step, hi)
            if new <= x:
                break
            x = new
        x = min(max(x, lo), hi)
        y = x + gap
        # record the pieces and remove the window from the free time
        if i == j:
            npieces = _record(k, x, y, owner, start, end, npieces)
            right = nodes
            nodes += 1
            sa[right], sb[right] = y, sb[i]
            nxt[right], prv[right] = nxt[i], i
            if nxt[i] >= 0:
                prv[nxt[i]] = right
            nxt[i] = right
            sb[i] = x
        else:
            npieces = _record(k, x, sb[i], owner, start, end, npieces)
            t = nxt[i]
            while t != j:
                npieces = _record(k, sa[t], sb[t], owner, start, end, npieces)
                t = nxt[t]
            npieces = _record(k, sa[j], y, owner, start, end, npieces)
            sb[i], sa[j] = x, y
            nxt[i], prv[j] = j, i
            right = j
        # the hole sits between the end of node i and the start of node ``right``; drop empty nodes
        ci, cx = i, x
        if sb[i] - sa[i] <= 0.0:
            ci, cx = right, y
            head = _unlink(i, head, nxt, prv)
        if sb[right] - sa[right] <= 0.0:
            if ci == right:
                ci = prv[right]
                if ci >= 0:
                    cx = sb[ci]
                elif nxt[right] >= 0:
                    ci, cx = nxt[right], sa[nxt[right]]
            head = _unlink(right, head, nxt, prv)
        if head < 0:
            break
    return owner[:npieces], start[:npieces], end[:npieces]


class Schedule:
    """A time schedule for n iid drafts: the pieces of [0, 1] each token's drafts draw their time from.

    Parameters
    ----------
    q : ndarray, shape (V,)
        Draft distribution.
    n : int
        Number of iid drafts.
    owner, start, end : ndarray, shape (P,)
        Piece k is :math:`[start_k, end_k]`, owned by token ``owner[k]``; a token's pieces are
        consecutive in these arrays and the pieces of all tokens tile [0, 1].

    Attributes
    ----------
    marginal : ndarray, shape (V,)
        The exact law of the candidate, :math:`\\mu(x) = \\sum_{\\text{pieces}} (1-a)^n - (1-b)^n`.
    lengths : ndarray, shape (V,)
        Total length of each token's pieces (q up to rounding).
    first, count : ndarray of int, shape (V,)
        Token x owns pieces ``first[x]`` to ``first[x] + count[x] - 1``.
    cumulative : ndarray, shape (P + 1,)
        The pieces laid end to end: piece k spans ``cumulative[k]`` to ``cumulative[k + 1]``; a time is
        drawn as a uniform point of the token's stretch, mapped back to its piece.
    """

    def __init__(self, q: np.ndarray, n: int, owner, start, end):
        self.q, self.n, self.V = q, n, q.size
        self.owner, self.start, self.end = np.asarray(owner), np.asarray(start), np.asarray(end)
        lengths = self.end - self.start
        self.cumulative = np.concatenate([[0.0], np.cumsum(lengths)])
        # tokens own consecutive pieces but not in token order: index their runs explicitly
        runs = np.flatnonzero(np.diff(self.owner, prepend=-1)) if self.owner.size else np.zeros(0, int)
        self.first = np.zeros(self.V, np.int64)
        self.count = np.zeros(self.V, np.int64)
        if self.owner.size:
            bounds = np.append(runs, self.owner.size)
            self.first[self.owner[runs]] = runs
            self.count[self.owner[runs]] = np.diff(bounds)
        self.lengths = np.bincount(self.owner, lengths, minlength=self.V)
        self.marginal = np.bincount(self.owner, (1.0 - self.start) ** n - (1.0 - self.end) ** n,
                                    minlength=self.V)

    def pieces(self, x: int) -> np.ndarray:
        """The pieces of token x as rows [start, end]."""
        k = slice(self.first[x], self.first[x] + self.count[x])
        return np.column_stack([self.start[k], self.end[k]])

    def times(self, drafts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A time for every draft (any shape): uniform on the pieces of its token."""
        drafts = np.asarray(drafts)
        base = self.cumulative[self.first[drafts]]
        v = base + rng.random(drafts.shape) * self.lengths[drafts]
        k = np.clip(np.searchsorted(self.cumulative, v, side="right") - 1,
                    self.first[drafts], self.first[drafts] + self.count[drafts] - 1)
        # a token whose q vanishes at the resolution of its position owns no piece: it comes last
        return np.where(self.count[drafts] > 0, self.start[k] + (v - self.cumulative[k]), 1.0)

    def candidates(self, drafts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The candidate of each row of ``drafts`` (shape (..., n)): the draft with the earliest time."""
        drafts = np.asarray(drafts)
        pick = np.argmin(self.times(drafts, rng), axis=-1)
        return np.take_along_axis(drafts, pick[..., None], axis=-1)[..., 0]

    def candidate_law(self, drafts) -> np.ndarray:
        """Exact law of the candidate given the draft tuple ``drafts``, shape (V,).

        :math:`P(\\text{draft } i \\text{ wins}) = \\int f_i(t) \\prod_{j \\ne i} (1 - F_j(t)) \\, dt`
        with :math:`F_x` piecewise linear: Gauss–Legendre with n nodes on every interval between
        breakpoints integrates the degree-(n - 1) polynomial exactly.
        """
        drafts = np.asarray(drafts)
        tokens = np.unique(drafts)
        cuts = np.unique(np.concatenate([[0.0, 1.0]] + [self.pieces(x).ravel() for x in tokens]))
        nodes, weights = np.polynomial.legendre.leggauss(len(drafts))
        half = np.diff(cuts) / 2
        t = (cuts[:-1] + half)[:, None] + half[:, None] * nodes[None, :]  # (intervals, nodes)
        w = half[:, None] * weights[None, :]
        density, cdf = {}, {}
        for x in tokens:
            pc = self.pieces(x)
            inside = (t[..., None] >= pc[:, 0]) & (t[..., None] <= pc[:, 1])
            density[x] = inside.any(-1) / self.lengths[x]
            cdf[x] = np.clip(t[..., None] - pc[:, 0], 0.0, pc[:, 1] - pc[:, 0]).sum(-1) / self.lengths[x]
        law = np.zeros(self.V)
        for i, x in enumerate(drafts):
            survive = np.ones_like(t)
            for j, z in enumerate(drafts):
                if j != i:
                    survive = survive * (1.0 - cdf[z])
            law[x] += float((w * density[x] * survive).sum())
        return law


def realise_iid(mu, q, n: int) -> Schedule:
    """A schedule whose candidate has law μ (up to float rounding), for a base μ of the iid coverage.

    Parameters
    ----------
    mu : array_like, shape (V,)
        A point of B(g), :math:`g(S) = 1 - (1 - q(S))^n`, with μ = 0 where q = 0.
    q : array_like, shape (V,)
        Draft distribution.
    n : int
        Number of iid drafts.

    Returns
    -------
    Schedule
        Its :attr:`~Schedule.marginal` is computed from the pieces, so it is the exact law of the rule
        that the schedule defines, whatever the rounding of the construction.

    Examples
    --------
    >>> s = realise_iid([0.6, 0.4], [0.5, 0.5], 2)
    >>> np.round(s.marginal, 12).tolist()
    [0.6, 0.4]
    """
    q = as_distribution(q, "q")
    mu = np.asarray(mu, dtype=float)
    if mu.shape != q.shape:
        raise InvalidInputError(f"mu has shape {mu.shape} but q has shape {q.shape}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidInputError(f"the number of drafts must be a positive integer, got {n!r}")
    live = np.flatnonzero(q > 0)
    order = live[np.argsort(-(mu[live] / q[live]), kind="stable")]
    owner, start, end = _build(q[order], mu[order], int(n))
    return Schedule(q, int(n), order[owner], start, end)
