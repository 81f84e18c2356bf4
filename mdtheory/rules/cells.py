"""The optimal rule for iid drafts by cells of time and swaps between them: one sort and linear passes.

papers/theory.md, "The optimal rule batched: cells of time and swaps between them" (the torch rule's
construction, :mod:`mdtheory.torch_bridge.optimal`), here for one row, compiled. Tokens in the order
of q/p increasing own consecutive *cells* of [0, 1] (the cell of a priority order: its G-mass Δ is
what the earliest of n uniform times puts there); the target marginal μ follows the running minima of
D = G - P, so Σ min(p, μ) = α*; cells whose G-mass exceeds their target (*up*) swap time with later
cells short of theirs (*down*), first in first out along the running sums of the excesses. A draft of
token x picks its own cell or one of its swapped cells in proportion to its lengths there, and a time
uniform on the *whole* cell (a soft schedule); the earliest draft is the candidate, whose exact law
:attr:`CellSchedule.marginal` is computed from the stored pieces, so rounding in the construction
never breaks the output law. Unlike the window schedule (:mod:`mdtheory.rules.schedule`), no token is
placed by a search: one sort of q/p and a few passes.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from .._jit import njit
from ..errors import InvalidInputError, ProblemTooLargeError
from ..models.polymatroid import _power_diff

__all__ = ["CellSchedule", "cell_schedule", "MAX_CELL_DRAFTS"]

#: Most drafts the cell schedule serves: the exact law of a draft tuple integrates, on a cell that
#: two drafted tokens share, a polynomial of degree n - 1 by Gauss-Legendre nodes (n/2 of them).
MAX_CELL_DRAFTS = 256
#: Tokens with 0 < q < FRONT_Q (2^-51) take their cells at the front of [0, 1]: any heavier token's
#: cell, a difference of two masses of at most one, is at least one float apart.
FRONT_Q = 2.0 ** -51
#: Up to this many drafts a cell's G-mass (1 - a)^n - (1 - b)^n is taken as (b - a) times the sum of
#: its n positive terms (no branch); beyond, by binary powers (:func:`_power_diff`).
FEW_DRAFTS = 16


@njit(cache=True, error_model="numpy")
def _sum2(a, b):
    s = a + b
    v = s - a
    return s, (a - (s - v)) + (b - v)


@njit(cache=True, error_model="numpy")
def _build(p, q, n, top, g0, t0, order, where, rest, keep, marginal, up_cell, down_cell, cum, first,
           stop, scratch, positions):
    """The cells and swaps of the tokens in ``order`` (q/p increasing), after a front block of time
    [0, 1 - ``top``] whose G-mass is ``g0`` and target mass ``t0``. Fills ``where`` (each token's
    position) and, by position k: ``rest`` (V + 1; the q-mass from k on, scaled so that
    rest[0] = ``top``: one minus the cell's start; the cell's length is rest[k] - rest[k + 1]) and
    ``keep`` (the length of its own cell the token keeps); by token, ``marginal`` (the exact law of
    the candidate, from the stored pieces); the pieces j < J (returned): up cell ``up_cell[j]`` and
    down cell ``down_cell[j]`` swap ``cum[j + 1] - cum[j]`` of time (``cum``, J + 1 running sums);
    position k's pieces are ``first[k]`` .. ``stop[k] - 1``. ``scratch`` (10 rows of V + 1) and
    ``positions`` (2 rows, integers) hold the working arrays, reused from rule to rule by the caller
    (a fresh array is mapped page by page on first touch, which cost more than the work).

    Bounds: one pass per quantity, and the merge of the two running sums of excesses advances one of
    its two positions every turn (at most 2V turns)."""
    V = p.size
    po, aim, got, dens = scratch[0], scratch[2], scratch[3], scratch[4]
    D, m, used, length, ell = scratch[5], scratch[6], scratch[7], scratch[8], scratch[9]
    upos, dpos = positions[0], positions[1]
    s, c = 0.0, 0.0
    rest[V] = 0.0
    for k in range(V - 1, -1, -1):  # compensated suffix sums of q along the order
        x = np.uint64(order[k])
        where[x] = k
        s, e = _sum2(s, q[x])
        c += e
        rest[k] = s + c
    scale = top / rest[0] if rest[0] > 0.0 else 0.0
    rest[0] = top if rest[0] > 0.0 else 0.0
    # G - P at every boundary after the front, compensated; its least value (first) is alpha* - 1
    # at the cut
    D[0] = g0 - t0
    g, gc, t, tc = g0, 0.0, t0, 0.0
    cut, low = 0, D[0]
    for k in range(V):
        rest[k + 1] *= scale  # rest[0] = top: the cells' G-masses add up to top^n
        length[k] = rest[k] - rest[k + 1]
    if n <= FEW_DRAFTS:  # a^n - b^n = (a - b) sum_i a^i b^(n-1-i): positive terms, no branch
        for k in range(V):
            a, b = rest[k], rest[k + 1]
            s, bp = 1.0, 1.0
            for _ in range(n - 1):
                bp *= b
                s = a * s + bp
            dens[k] = s  # the cell's mean density, rise / length
    for k in range(V):
        po[k] = p[np.uint64(order[k])]
        if n <= FEW_DRAFTS:
            rise = length[k] * dens[k]
        else:
            rise = _power_diff(rest[k], length[k], n)
            dens[k] = rise / length[k] if length[k] > 0.0 else 0.0
        keep[k] = rise  # the cell's G-mass, for now
        g, e = _sum2(g, rise)
        gc += e
        t, e = _sum2(t, po[k])
        tc += e
        D[k + 1] = (g + gc) - (t + tc)
        if D[k + 1] < low:
            cut, low = k + 1, D[k + 1]
    # targets: M = P + the running minimum of D up to the cut, + its suffix minimum after it
    run = D[0]
    for k in range(cut + 1):
        run = min(run, D[k])
        m[k] = run
    run = D[V]
    for k in range(V, cut, -1):
        run = min(run, D[k])
        m[k] = run
    # up cells (G-mass above the target) and down cells, in order, with their excess and shortfall
    nu, nd = 0, 0
    ups, downs = 0.0, 0.0
    for k in range(V):
        aim[k] = max(po[k] + (m[k + 1] - m[k]), 0.0)
        x = keep[k] - aim[k]
        first[k], stop[k] = 0, 0
        got[k], used[k] = 0.0, 0.0
        if x > 0.0:
            upos[nu], m[nu] = k, x  # m is free again: the excesses
            nu += 1
            ups += x
        elif x < 0.0:
            dpos[nd], D[nd] = k, -x  # D too: the shortfalls
            nd += 1
            downs -= x
    # the swaps: up cells give their excess to later down cells, first in first out, along the
    # two running sums; each piece's length is its mass over the density gap. A piece ends where
    # its up or its down cell does, so there are fewer than V of them
    total = min(ups, downs)
    J = 0
    i, j = 0, 0
    a_lo, b_lo = 0.0, 0.0
    a_hi = m[0] if nu > 0 else 0.0
    b_hi = D[0] if nd > 0 else 0.0
    a = upos[0] if nu > 0 else 0
    b = dpos[0] if nd > 0 else 0
    # each cell's pieces are consecutive: its first and stop written when it starts and ends, its
    # sums kept out of memory while it lasts
    first[a], first[b] = 0, 0
    a_used, a_got, b_used, b_got = 0.0, 0.0, 0.0, 0.0
    for _ in range(nu + nd):
        if i >= nu or j >= nd:
            break
        lo, hi = max(a_lo, b_lo), min(a_hi, b_hi, total)
        if hi > lo and a < b and dens[a] > dens[b] and J < ell.size:
            piece = (hi - lo) / (dens[a] - dens[b])
            up_cell[J], down_cell[J], ell[J] = a, b, piece
            a_used += piece
            a_got += piece * dens[b]
            b_used += piece
            b_got += piece * dens[a]
            J += 1
        if a_hi <= b_hi:  # the up cell ends
            used[a], got[a], stop[a] = a_used, a_got, J
            a_used, a_got = 0.0, 0.0
            i += 1
            a_lo = a_hi
            if i < nu:
                a = upos[i]
                first[a] = J
                a_hi = a_lo + m[i]
        else:
            used[b], got[b], stop[b] = b_used, b_got, J
            b_used, b_got = 0.0, 0.0
            j += 1
            b_lo = b_hi
            if j < nd:
                b = dpos[j]
                first[b] = J
                b_hi = b_lo + D[j]
    if i < nu:
        used[a], got[a], stop[a] = a_used, a_got, J
    if j < nd:
        used[b], got[b], stop[b] = b_used, b_got, J
    # a cell never swaps more than its length (exact in real arithmetic; rounding only): where one
    # does, its swaps are scaled down and what the pieces give recomputed
    for _ in range(2):
        over = False
        for k in range(V):
            over |= used[k] > length[k]
        if not over:
            break
        shrink = D  # free again
        for k in range(V):
            shrink[k] = length[k] / used[k] if used[k] > length[k] else 1.0
            used[k], got[k] = 0.0, 0.0
        for j in range(J):
            ua, ub = np.uint64(up_cell[j]), np.uint64(down_cell[j])
            ell[j] *= min(shrink[ua], shrink[ub])
            used[ua] += ell[j]
            used[ub] += ell[j]
            got[ua] += ell[j] * dens[ub]
            got[ub] += ell[j] * dens[ua]
    for k in range(V):
        keep[k] = max(length[k] - used[k], 0.0)
        marginal[np.uint64(order[k])] = got[k] + keep[k] * dens[k]
    cum[0] = 0.0
    for j in range(J):
        cum[j + 1] = cum[j] + ell[j]
    return J


@njit(cache=True, error_model="numpy")
def _keys(p, q, out):
    """q/p into ``out``: 0 for q = 0 (first: no cell), inf for p = 0 < q (last)."""
    for k in range(p.size):
        out[k] = 0.0 if q[k] == 0.0 else (q[k] / p[k] if p[k] > 0.0 else np.inf)
    return out


@njit(cache=True, error_model="numpy")
def _earliest(drafts, u, where, rest, keep, first, stop, cum, up_cell, down_cell, front_start,
              front_length):
    """The candidate of a tuple of drafts: draft i picks its token's own cell or a swapped one by
    u[2i] (in proportion to its lengths there), a time uniform on the whole cell by u[2i + 1]; the
    draft whose time is earliest (largest one-minus-time) wins, ties to the first. A front token
    (``where`` = -1 - its rank) draws its time in its front cell, before every other cell. -1 if a
    draft is not a token with q > 0 (none is read then)."""
    for i in range(drafts.size):
        if drafts[i] < 0 or drafts[i] >= where.size:
            return -1
        k = where[drafts[i]]
        if k >= 0 and rest[k] - rest[k + 1] <= 0.0:
            return -1
    best, pick = -np.inf, drafts[0]
    early, first_pick = np.inf, -1
    for i in range(drafts.size):
        k = where[drafts[i]]
        if k < 0:  # a front token
            t = front_start[-1 - k] + u[2 * i + 1] * front_length[-1 - k]
            if t < early:
                early, first_pick = t, drafts[i]
            continue
        w = u[2 * i] * (rest[k] - rest[k + 1])
        cell = k
        if w >= keep[k] and stop[k] > first[k]:  # in a swapped cell: the piece by bisection
            v = cum[first[k]] + (w - keep[k])
            lo, hi = first[k], stop[k] - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if cum[mid] <= v:
                    lo = mid
                else:
                    hi = mid - 1
            cell = down_cell[lo] if up_cell[lo] == k else up_cell[lo]
        late = rest[cell] - u[2 * i + 1] * (rest[cell] - rest[cell + 1])
        if late > best:
            best, pick = late, drafts[i]
    return first_pick if first_pick >= 0 else pick


#: Each thread keeps the working arrays of its largest schedule up to this many tokens.
CACHE_TOKENS = 1 << 18
_cache = threading.local()


def _scratch(V: int) -> tuple[np.ndarray, np.ndarray]:
    """Working arrays for V tokens (10 rows of V + 1 floats, 2 of integers): this thread's kept
    ones if large enough (one schedule at a time uses them; the kernel calls back nothing that
    could enter again)."""
    ws = getattr(_cache, "ws", None)
    if ws is not None and ws[0].shape[1] >= V + 1:
        return ws[0][:, : V + 1], ws[1][:, : V + 1]
    ws = (np.empty((10, V + 1)), np.empty((2, V + 1), np.int64))
    if V <= CACHE_TOKENS:
        _cache.ws = ws
    return ws


@functools.lru_cache(maxsize=16)
def _nodes(count: int):
    """Gauss-Legendre nodes and weights on [0, 1] (exact for polynomials of degree < 2 count)."""
    x, w = np.polynomial.legendre.leggauss(count)
    return (x + 1.0) / 2.0, w / 2.0


class CellSchedule:
    """The cells and swaps of the optimal rule for n iid drafts (module docstring).

    Attributes
    ----------
    where : ndarray of int, shape (V,)
        Each token's position in the order of q/p increasing.
    rest : ndarray, shape (V + 1,)
        One minus the start of each position's cell (rest[0] = 1); :attr:`length` its differences.
    keep : ndarray, shape (V,)
        The length of its own cell each position's token keeps.
    up_cell, down_cell : ndarray of int, shape (J,)
        Swap j: the up cell's token holds ``ell[j]`` of the down cell's time, and the other way.
    cum : ndarray, shape (J + 1,)
        Running sums of the swaps' lengths (:attr:`ell`).
    first, stop : ndarray of int, shape (V,)
        Position k's swaps are ``first[k]`` .. ``stop[k] - 1`` (empty where equal).
    marginal : ndarray, shape (V,)
        The candidate's exact law by token, from the stored pieces.
    """

    def __init__(self, p: np.ndarray, q: np.ndarray, n: int):
        if n > MAX_CELL_DRAFTS:
            raise ProblemTooLargeError(f"the cell schedule serves at most {MAX_CELL_DRAFTS} drafts, "
                                       f"got n = {n}")
        V = q.size
        self.n, self.V = int(n), V
        work, positions = _scratch(V)
        # tokens too light for a cell of their own in the cells' coordinates (1 - time) take
        # consecutive cells at the front of [0, 1], lightest first, in the time coordinates, where
        # floats are finest (the window schedule's rule, mdtheory.rules.schedule)
        light = np.flatnonzero((q > 0.0) & (q < FRONT_Q))
        top, g0, t0 = 1.0, 0.0, 0.0
        if light.size:
            light = light[np.argsort(q[light], kind="stable")]
            self.front_length = q[light].copy()
            self.front_start = np.concatenate([[0.0], np.cumsum(self.front_length)[:-1]])
            front_mass = np.array([_power_diff(1.0 - a, ell, self.n)
                                   for a, ell in zip(self.front_start, self.front_length, strict=True)])
            top = 1.0 - float(self.front_start[-1] + self.front_length[-1])
            g0, t0 = math.fsum(front_mass), math.fsum(p[light])
            p, q = p.copy(), q.copy()
            p[light], q[light] = 0.0, 0.0
        else:
            self.front_start, self.front_length = np.zeros(0), np.zeros(0)
        order = np.argsort(_keys(p, q, work[0, :V]))
        # what the schedule keeps, in two allocations
        ints, floats = np.empty(5 * V + 2, np.int32), np.empty(4 * V + 3)
        self.where, self.first, self.stop = ints[:V], ints[V: 2 * V], ints[2 * V: 3 * V]
        up, down = ints[3 * V: 4 * V + 1], ints[4 * V + 1:]
        self.rest, self.keep = floats[: V + 1], floats[V + 1: 2 * V + 1]
        self.marginal, cum = floats[2 * V + 1: 3 * V + 1], floats[3 * V + 1:]
        J = _build(p, q, self.n, top, g0, t0, order, self.where, self.rest, self.keep, self.marginal,
                   up, down, cum, self.first, self.stop, work, positions)
        self.up_cell, self.down_cell, self.cum = up[:J], down[:J], cum[: J + 1]
        if light.size:
            self.where[light] = -1 - np.arange(light.size)
            self.marginal[light] = front_mass

    @property
    def length(self) -> np.ndarray:
        """Each position's cell length (its q, as the cells' bounds give it)."""
        return self.rest[:-1] - self.rest[1:]

    @property
    def ell(self) -> np.ndarray:
        """Each swap's length."""
        return np.diff(self.cum)

    def candidate(self, drafts: np.ndarray, rng: np.random.Generator) -> int:
        """The candidate of one tuple of token ids (shape (n,)), from ``rng.random(2 n)``.

        Raises
        ------
        InvalidInputError
            A draft outside the tokens, or of a token with q = 0.
        """
        drafts = np.ascontiguousarray(drafts, dtype=np.int64)
        pick = _earliest(drafts, rng.random(2 * drafts.size), self.where, self.rest, self.keep,
                         self.first, self.stop, self.cum, self.up_cell, self.down_cell,
                         self.front_start, self.front_length)
        if pick < 0:
            raise InvalidInputError(f"drafts must be tokens in 0..{self.V - 1} with q > 0, got "
                                    f"{drafts.tolist()}")
        return int(pick)

    def shares(self, x: int) -> tuple[np.ndarray, np.ndarray]:
        """Token x's cells (positions, increasing) and its length in each (summing to its q)."""
        k = int(self.where[x])
        j = slice(self.first[k], self.stop[k])
        partners = np.where(self.up_cell[j] == k, self.down_cell[j], self.up_cell[j])
        cells = np.concatenate([[k], partners])
        lengths = np.concatenate([[self.keep[k]], self.cum[self.first[k] + 1: self.stop[k] + 1]
                                  - self.cum[self.first[k]: self.stop[k]]])
        by = np.argsort(cells, kind="stable")
        return cells[by], lengths[by]

    def candidate_law(self, drafts) -> np.ndarray:
        """Exact law of the candidate given the draft tuple ``drafts``, shape (V,).

        Walk the drafted tokens' cells in time order. On a cell, drafted token y's survival (the
        chance its time is later) falls linearly from :math:`S_y` by :math:`a_y` = (its length in
        the cell)/q_y, over the cell's fraction s in [0, 1]; with m_y drafts of token y, token x
        wins there with probability
        :math:`\\int_0^1 m_x a_x (S_x - a_x s)^{m_x - 1} \\prod_{y \\ne x} (S_y - a_y s)^{m_y} ds`:
        in closed form (a difference of powers) where x alone has time in the cell, else by
        Gauss-Legendre nodes, exact for its degree n - 1. Every term is a product of non-negative
        factors.

        Raises
        ------
        InvalidInputError
            A draft outside the tokens, or of a token with q = 0.
        """
        drafts = np.asarray(drafts).ravel()
        if drafts.size == 0 or not np.issubdtype(drafts.dtype, np.integer) \
                or drafts.min() < 0 or drafts.max() >= self.V:
            raise InvalidInputError(f"drafts must be tokens in 0..{self.V - 1}, got {drafts.tolist()}")
        tokens, mult = np.unique(drafts, return_counts=True)
        length = self.length
        pos = self.where[tokens]
        if np.any((pos >= 0) & (length[np.maximum(pos, 0)] <= 0.0)):
            bad = int(tokens[(pos >= 0) & (length[np.maximum(pos, 0)] <= 0.0)][0])
            raise InvalidInputError(f"token {bad} has q = 0 and is never drafted")
        law = np.zeros(self.V)
        if np.any(pos < 0):  # a front token drafted: the one whose front cell comes first wins
            code = np.where(pos < 0, pos.astype(np.int64), np.iinfo(np.int64).min)
            law[tokens[np.argmax(code)]] = 1.0  # -1 - rank: the least rank has the largest code
            return law
        entries = []  # (cell, token index, share of the token's q)
        for i, x in enumerate(tokens):
            cells, lengths = self.shares(int(x))
            total = length[self.where[x]]
            entries += [(int(c), i, ell / total) for c, ell in zip(cells, lengths, strict=True) if ell > 0]
        entries.sort()
        u = tokens.size
        # survival at each entry's cell start: the token's shares from that cell on (suffix sums)
        left = np.zeros(u)
        after = []
        for _, i, a in reversed(entries):
            after.append(left[i])
            left[i] += a
        after.reverse()
        S = np.minimum(left, 1.0)  # survival before the first cell: one, up to rounding
        at = 0
        while at < len(entries):
            cell = entries[at][0]
            end = at
            while end < len(entries) and entries[end][0] == cell:
                end += 1
            a = np.zeros(u)
            for k in range(at, end):
                a[entries[k][1]] += entries[k][2]
            a = np.minimum(a, S)
            moving = np.flatnonzero(a > 0)
            if moving.size == 1:
                x = moving[0]
                others = np.prod(np.delete(S, x) ** np.delete(mult, x))
                law[tokens[x]] += _power_diff(S[x], a[x], int(mult[x])) * others
            else:
                s, w = _nodes(max((self.n + 1) // 2, 1))
                surv = S[:, None] - a[:, None] * s[None, :]  # (u, nodes)
                surv = np.maximum(surv, 0.0)
                for x in moving:
                    rest = np.prod(np.delete(surv, x, axis=0) ** np.delete(mult, x)[:, None], axis=0)
                    f = mult[x] * a[x] * surv[x] ** (mult[x] - 1) * rest
                    law[tokens[x]] += float(w @ f)
            for k in range(at, end):
                S[entries[k][1]] = after[k]
            at = end
        return law


def cell_schedule(p: np.ndarray, q: np.ndarray, n: int) -> CellSchedule:
    """The cell schedule of (p, q) for n iid drafts, on validated distributions."""
    return CellSchedule(p, q, n)
