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

**In floating point** (:func:`realise_iid`, Notes). Tokens with q below :data:`SHORT` take their
pieces first, at the front of [0, 1], where floats are finest, so every token with q > 0 owns a
piece; G-masses are computed to full relative precision; each window carries the shortfall of
mass and of length of the windows before it, so rounding does not pile up on the last token; every
loop of the kernel has a stated bound, and an impossible state raises
:class:`~mdtheory.errors.SolverError` instead of spinning.

This is the realisation step the optimal verifier needs: the lexicographically optimal base
(:func:`mdtheory.models.polymatroid.lex_optimal_base_iid`) attains α*, and its schedule makes it a sampling
rule with an exactly known marginal, with no enumeration of draft sets.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit

from .._validate import as_distribution
from ..errors import InvalidInputError, ProblemTooLargeError, SolverError
from ..models.polymatroid import _power_diff as _power_diff_kernel
from ..models.polymatroid import stable_ties

__all__ = ["Schedule", "realise_iid", "SHORT", "MAX_DRAFTS"]

#: Tokens with 0 < q < SHORT (2^-70, about 8.5e-22) take their pieces first, at the front of [0, 1].
SHORT = 2.0 ** -70

#: Most drafts a schedule is built for. Each piece's G-mass (a power of degree n) carries a relative
#: error of about n 2^-53, and so does the marginal: measured against the law of the candidate in
#: 60-digit arithmetic, the rule's output law is off p by 2e-12 at n = 10^5, 2e-11 at 2^20, 2e-10
#: at 10^7, 1e-5 at 10^12, and the marginal summed to 103 at n = 2^62.
MAX_DRAFTS = 2 ** 20

#: :func:`mdtheory.models.polymatroid._power_diff`, compiled (inlined into the kernels below; numba's
#: cache watches this file only, so a change there must touch this one)
_power_diff = _power_diff_kernel.compiled

# status codes of :func:`_build`
_OK, _STUCK, _FULL = 0, 1, 2


@njit(cache=True, error_model="numpy", inline="always")
def _pow(x, n):
    """``x ** n`` for an integer n >= 0 with the same bits as numba's (repeated squaring), the common
    n <= 8 written out: no loop, which the kernels below run about 30 times per token."""
    if n > 8:
        return x ** n
    if n <= 2:
        return 1.0 if n == 0 else (x if n == 1 else x * x)
    x2 = x * x
    if n <= 4:
        return x * x2 if n == 3 else x2 * x2
    x4 = x2 * x2
    if n <= 6:
        return x * x4 if n == 5 else x2 * x4
    return (x * x2) * x4 if n == 7 else x4 * x4


@njit(cache=True, error_model="numpy", inline="always")
def _gmass(a, b, n):
    """G-mass of the piece [a, b], :math:`(1 - a)^n - (1 - b)^n`, to full relative precision
    (the piece's end points taken as exact)."""
    return _power_diff(1.0 - a, b - a, n)


@njit(cache=True, error_model="numpy", inline="always")
def _gmass_fast(a, b, n):
    """(1 - a)^n - (1 - b)^n as a difference of powers: absolute error about n 2^-53, enough to
    choose the nodes a window ends in (the window itself is then placed with :func:`_gmass`)."""
    return _pow(1.0 - a, n) - _pow(1.0 - b, n)


@njit(cache=True, error_model="numpy", inline="always")
def _window_parts(i, x, j, y, middle, sa, sb, n, target):
    """The window's G-mass minus ``target``, and the G-masses of its first and last pieces
    (:func:`_gmass`; one piece [x, y] and 0 when i == j), which :func:`_record` then stores."""
    if i == j:
        first = _gmass(x, y, n)
        return first - target, first, 0.0
    first, last = _gmass(x, sb[i], n), _gmass(sa[j], y, n)
    return first + middle + last - target, first, last


@njit(cache=True, error_model="numpy", inline="always")
def _window_mass_fast(i, x, j, y, middle, sa, sb, n):
    if i == j:
        return _gmass_fast(x, y, n)
    return _gmass_fast(x, sb[i], n) + middle + _gmass_fast(sa[j], y, n)


@njit(cache=True, error_model="numpy", inline="always")
def _window_end(i, x, length, nxt, sa, sb, n, cap):
    """Move right by ``length`` of free time from (node i, position x).

    Returns (j, y, G-mass of the whole nodes strictly between, ok); at most ``cap`` nodes are
    visited (the list holds fewer), so ``ok`` is False only for a corrupt list.
    """
    j, y, middle = i, x, 0.0
    for _ in range(cap):
        if length <= sb[j] - y:
            return j, y + length, middle, True
        length -= sb[j] - y
        if nxt[j] < 0:
            return j, sb[j], middle, True
        if j != i:
            middle += _gmass(sa[j], sb[j], n)
        j = nxt[j]
        y = sa[j]
    return j, y, middle, False


@njit(cache=True, error_model="numpy", inline="always")
def _end(x, gap, i, j, sa, sb):
    """End of the window of free length ``gap`` (occupied time included) from x, kept in node j."""
    return min(max(x + gap, x if i == j else sa[j]), sb[j])


@njit(cache=True, error_model="numpy", inline="always")
def _record(k, a, b, g, owner, start, end, mass, npieces, carry, spare):
    """Append the piece [a, b] of token position k, with its G-mass g (:func:`_gmass`), unless it
    is empty; counts past the capacity without writing (the caller turns that into an error).
    Returns the count, and ``carry`` and ``spare`` less the G-mass and length written."""
    if b > a:
        if npieces < owner.size:
            owner[npieces], start[npieces], end[npieces] = k, a, b
            mass[npieces] = g
            carry += -g
            spare += a - b
        npieces += 1
    return npieces, carry, spare


@njit(cache=True, error_model="numpy", inline="always")
def _unlink(node, head, nxt, prv):
    """Remove ``node`` from the free-time list; returns the new head."""
    a, b = prv[node], nxt[node]
    if b >= 0:
        prv[b] = a
    if a >= 0:
        nxt[a] = b
        return head
    return b


@njit(cache=True, _nrt=False, error_model="numpy")
def _build(qs, mus, n, nfront, sa, sb, nxt, prv, owner, start, end, mass):
    """The window construction over [0, 1] for tokens already in processing order.

    Tokens ``0..nfront-1`` (the short ones, by q increasing) take consecutive pieces from 0; the
    others take windows in the free time that follows, each aiming at its G-mass target and its
    length q plus the shortfalls of the windows before it (so rounding does not pile up on the last
    token); the last takes all the free time left.

    Returns (status, count): piece k < count of the schedule is [start[k], end[k]] owned by token
    position owner[k], of G-mass mass[k] (:func:`_gmass`); each token's pieces are consecutive.
    status is ``_OK``, ``_STUCK`` (a loop reached its bound: the free-time list is corrupt) or
    ``_FULL`` (more pieces than the bound below).

    The caller allocates every array (:func:`_workspace`): the free-time list ``sa``, ``sb``,
    ``nxt``, ``prv`` (``cap`` nodes) and the pieces ``owner``, ``start``, ``end``, ``mass``; the
    kernel allocates nothing, so it is compiled without numba's runtime: no reference counting of
    the arrays it hands its helpers, which took more than a third of its time.

    Bounds. Free-time nodes: one at the start, and each window splits at most one node, so at most
    m + 1 exist (``cap`` = ``sa.size``, at least 2m + 2 from :func:`_workspace`). Every walk along the list
    (back from the hole, to a window's end, across its middle, the last token's sweep) visits each
    node at most once: at most ``cap`` steps. The slide moves the window's start or end to the next
    node at every step, never back: at most 2 ``cap`` steps. Newton: at most 100 steps. Pieces: a
    window consumes whole nodes (each once in all) plus at most two partial ones, so at most
    3m + 1 pieces.
    """
    m = qs.size
    cap = sa.size
    npieces = 0
    c = 0.0  # the front: short tokens, consecutive, exact where the time resolution is finest
    for k in range(nfront):
        npieces = _record(k, c, c + qs[k], _gmass(c, c + qs[k], n), owner, start, end, mass,
                          npieces, 0.0, 0.0)[0]
        c += qs[k]
    sa[0], sb[0], nxt[0], prv[0] = c, 1.0, -1, -1
    head, nodes = (0 if c < 1.0 else -1), 1
    ci, cx = 0, c  # the hole the previous token left, as (node, position)
    carry, spare = 0.0, 0.0  # targets minus realised G-masses, and q minus realised lengths, so far
    for k in range(nfront, m):
        if head < 0:
            break
        if k == m - 1:  # the last token takes all the free time
            i = head
            for _ in range(cap):
                if i < 0:
                    break
                npieces = _record(k, sa[i], sb[i], _gmass(sa[i], sb[i], n), owner, start, end,
                                  mass, npieces, 0.0, 0.0)[0]
                i = nxt[i]
            if i >= 0:
                return _STUCK, npieces
            head = -1
            break
        length, target = max(qs[k] + spare, 0.0), max(mus[k] + carry, 0.0)
        # start one window-length before the hole
        i, x, back = ci, cx, length
        walked = False
        for _ in range(cap):
            if back <= x - sa[i]:
                x -= back
                walked = True
                break
            back -= x - sa[i]
            if prv[i] < 0:
                x = sa[i]
                walked = True
                break
            i = prv[i]
            x = sb[i]
        j, y, middle, ok = _window_end(i, x, length, nxt, sa, sb, n, cap)
        if not (walked and ok):
            return _STUCK, npieces
        # the fast mass minus the target at the window's start x, while it is known (NaN: not)
        f = _window_mass_fast(i, x, j, y, middle, sa, sb, n) - target
        if f < 0.0:  # safeguard: from the front
            f = np.nan
            i, x = head, sa[head]
            j, y, middle, ok = _window_end(i, x, length, nxt, sa, sb, n, cap)
            if not ok:
                return _STUCK, npieces
        # slide right node end by node end until the window's G-mass falls to the target
        slid = False
        d = 0.0
        for _ in range(2 * cap + 2):
            di, dj = sb[i] - x, sb[j] - y
            d = min(di, dj)
            xe = sb[i] if di <= dj else x + d
            ye = sb[j] if dj <= di else y + d
            at_end = nxt[j] < 0 and dj <= di
            fe = _window_mass_fast(i, xe, j, ye, middle, sa, sb, n) - target
            if fe <= 0.0 or at_end:
                slid = True
                break
            f = fe  # the window moves to (xe, ye), or to the same G-mass at the next nodes
            if dj <= di:  # the end passes into the next node (not at the end: nxt[j] >= 0)
                if j != i:
                    middle += _gmass_fast(sa[j], sb[j], n)
                j = nxt[j]
                y = sa[j]
            else:
                y = ye
            if di <= dj:  # the start passes into the next node (which exists: j lies beyond)
                i = nxt[i]
                x = sa[i]
                middle = 0.0 if i == j else middle - _gmass_fast(sa[i], sb[i], n)
            else:
                x = xe
        if not slid or i < 0:
            return _STUCK, npieces
        # accurate middle mass, then Newton on the convex, decreasing mass(x') - target in [x, x + d]
        middle = 0.0
        t = nxt[i] if i != j else j
        for _ in range(cap):
            if t == j or t < 0:
                break
            middle += _gmass(sa[t], sb[t], n)
            t = nxt[t]
        if t != j:
            return _STUCK, npieces
        gap = y - x
        lo, hi = x, min(x + d, sb[i])
        # the fast mass's terms that do not move with the window's start, out of the loop
        pin_i = _pow(1.0 - sb[i], n) if i != j else 0.0
        pin_j = _pow(1.0 - sa[j], n) if i != j else 0.0
        for _ in range(100):  # from the left with the fast mass (converges in a few steps)
            u = 1.0 - x
            if f != f:  # not known here yet
                un, yn = _pow(u, n), _pow(1.0 - (x + gap), n)
                f = (un - yn if i == j else un - pin_i + middle + (pin_j - yn)) - target
            slope = n * (_pow(u - gap, n - 1) - _pow(u, n - 1))  # only steers the step
            if f <= 0.0 or slope >= 0.0:
                break
            new = min(x - f / slope, hi)
            if new <= x:
                break
            # the powers' curvature is about (n - 1)/u: a step below 2^-20 u (n - 1)/3 (2^-20 u
            # at n = 4) leaves about 2^-40 u/(n - 1) for the polish, whatever n (a stop at
            # 2^-20 u for every n left 6e-3 of acceptance at n = 10^6)
            small = (new - x) * (n - 1) <= 3.0 * 2.0 ** -20 * u
            x, f = new, np.nan
            if small:
                break
        f, at = 0.0, -1.0  # the accurate mass error at the position ``at``, and its end pieces
        first_mass, last_mass = 0.0, 0.0
        for _ in range(3):  # polish with the accurate mass, either way
            f, first_mass, last_mass = _window_parts(i, x, j, _end(x, gap, i, j, sa, sb), middle,
                                                     sa, sb, n, target)
            at = x
            slope = n * (_pow(1.0 - x - gap, n - 1) - _pow(1.0 - x, n - 1))
            if f == 0.0 or slope >= 0.0:
                break
            new = min(max(x - f / slope, lo), hi)
            if new == x:
                break
            x = new
        if at != x:
            f, first_mass, last_mass = _window_parts(i, x, j, _end(x, gap, i, j, sa, sb), middle,
                                                     sa, sb, n, target)
        # the next float in the direction of the target moves the window's G-mass by about its
        # density times a rounding: keep it if it lands nearer
        cand = np.nextafter(x, 2.0) if f > 0.0 else np.nextafter(x, -1.0)
        if lo <= cand <= hi and f != 0.0:
            e, cand_first, cand_last = _window_parts(i, cand, j, _end(cand, gap, i, j, sa, sb),
                                                     middle, sa, sb, n, target)
            if abs(e) < abs(f):
                x, first_mass, last_mass = cand, cand_first, cand_last
        y = _end(x, gap, i, j, sa, sb)
        # record the pieces and remove the window from the free time
        # (carry and spare less what the window realised)
        if i == j:
            npieces, carry, spare = _record(k, x, y, first_mass, owner, start, end, mass, npieces,
                                            carry, spare)
            right = nodes
            nodes += 1
            if right >= cap:
                return _STUCK, npieces
            sa[right], sb[right] = y, sb[i]
            nxt[right], prv[right] = nxt[i], i
            if nxt[i] >= 0:
                prv[nxt[i]] = right
            nxt[i] = right
            sb[i] = x
        else:
            npieces, carry, spare = _record(k, x, sb[i], first_mass, owner, start, end, mass,
                                            npieces, carry, spare)
            t = nxt[i]
            for _ in range(cap):
                if t == j:
                    break
                npieces, carry, spare = _record(k, sa[t], sb[t], _gmass(sa[t], sb[t], n), owner,
                                                start, end, mass, npieces, carry, spare)
                t = nxt[t]
            npieces, carry, spare = _record(k, sa[j], y, last_mass, owner, start, end, mass,
                                            npieces, carry, spare)
            sb[i], sa[j] = x, y
            nxt[i], prv[j] = j, i
            right = j
        carry += mus[k]
        spare += qs[k]
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
        if ci < 0:
            ci, cx = head, sa[head]
    if npieces > owner.size:
        return _FULL, npieces
    return _OK, npieces


#: Workspaces for up to this many tokens are kept for reuse, one per thread (208 bytes per token,
#: at most about 14 MB a thread): fresh scratch arrays cost a page fault per 4 KB touched once the
#: allocator has returned them to the system (about 1,800 per preparation at V = 32,000).
CACHE_TOKENS = 1 << 16
_cache = threading.local()


class _Workspace:
    """The scratch arrays of :func:`_realise` for up to m tokens: the tokens' split and order
    (:func:`_split`), their q and μ in that order, and what :func:`_build` fills: free-time nodes
    (2m + 2) and pieces (3m + 2). Nothing a :class:`Schedule` keeps points into them, and their
    contents between calls are never read (every entry is written before it is read)."""

    def __init__(self, m: int):
        self.m = m
        self.front, self.rest, self.order = (np.empty(m, np.int64) for _ in range(3))
        self.keys, self.qs, self.mus = np.empty(m), np.empty(m), np.empty(m)
        cap, pieces = 2 * m + 2, 3 * m + 2
        self.build = (np.empty(cap), np.empty(cap), np.empty(cap, np.int64), np.empty(cap, np.int64),
                      np.empty(pieces, np.int64), np.empty(pieces), np.empty(pieces), np.empty(pieces))


def _workspace(m: int) -> _Workspace:
    """A workspace for m tokens: this thread's kept one if it is large enough, else a new one
    (kept in its place when m <= :data:`CACHE_TOKENS`). One :func:`_realise` at a time uses it
    (threads have their own; the kernels call back nothing that could enter it again)."""
    ws = getattr(_cache, "ws", None)
    if ws is not None and ws.m >= m:
        return ws
    ws = _Workspace(m)
    if m <= CACHE_TOKENS:
        _cache.ws = ws
    return ws


@njit(cache=True, _nrt=False, error_model="numpy")
def _split(q, mu, order, front, rest, keys):
    """The tokens with 0 < q < :data:`SHORT` into ``front`` (token order), those of ``order`` with
    q >= SHORT into ``rest`` (in that order) with their keys -(μ/q). Returns the two counts."""
    nfront = 0
    for t in range(q.size):
        if 0.0 < q[t] < SHORT:
            front[nfront] = t
            nfront += 1
    nrest = 0
    for t in order:
        if q[t] >= SHORT:
            rest[nrest] = t
            keys[nrest] = -(mu[t] / q[t])
            nrest += 1
    return nfront, nrest


@njit(cache=True, _nrt=False, error_model="numpy")
def _place(rest, keys, by, out):
    """``out`` = rest[by]; whether two neighbours of keys[by] are equal (then the sort's ties need
    :func:`~mdtheory.models.polymatroid.stable_ties`; the keys are finite)."""
    tied = False
    for k in range(by.size):
        out[k] = rest[by[k]]
        if k and keys[by[k]] == keys[by[k - 1]]:
            tied = True
    return tied


@njit(cache=True, _nrt=False, error_model="numpy")
def _index(owner, start, end, n, masses, cumulative, first, count, lengths, marginal):
    """One pass over the pieces for :class:`Schedule`: the pieces end to end (``cumulative``), each
    token's run of pieces (``first``, ``count``; a token's pieces are consecutive but tokens are
    not in order), and its total length and G-mass, summed in piece order (``lengths`` and
    ``marginal`` start at zero). The G-masses are ``masses`` where it has one per piece (those of
    :func:`_build`, the same :func:`_gmass`), else computed here."""
    known = masses.size == owner.size
    total, prev = 0.0, -1
    cumulative[0] = 0.0
    run, run_length, run_mass = 0, 0.0, 0.0  # the current run's sums, kept out of memory
    for k in range(owner.size):
        x, length = owner[k], end[k] - start[k]
        total += length
        cumulative[k + 1] = total
        if x != prev:  # a run starts: the previous one's sums go to its token
            if prev >= 0:
                count[prev] = run
                lengths[prev] += run_length
                marginal[prev] += run_mass
            first[x], prev = k, x
            run, run_length, run_mass = 0, 0.0, 0.0
        run += 1
        run_length += length
        run_mass += masses[k] if known else _gmass(start[k], end[k], n)
    if prev >= 0:
        count[prev] = run
        lengths[prev] += run_length
        marginal[prev] += run_mass


@njit(cache=True, _nrt=False, error_model="numpy")
def _finish(order, nfront, positions, src_start, src_end, masses, owner, start, end, cumulative,
            first, count, lengths, marginal):
    """:class:`Schedule`'s arrays from :func:`_build`'s pieces: the owners as tokens
    (``order[positions]``), the end points copied, then :func:`_index` with the pieces' G-masses.
    Returns the number of tokens ``order[nfront:]`` without a piece."""
    for k in range(positions.size):
        owner[k], start[k], end[k] = order[positions[k]], src_start[k], src_end[k]
    _index(owner, start, end, 0, masses, cumulative, first, count, lengths, marginal)
    lacking = 0
    for k in range(nfront, order.size):
        if count[order[k]] == 0:
            lacking += 1
    return lacking


@njit(cache=True, _nrt=False, error_model="numpy")
def _gather(q, mu, order, qs, mus):
    """q and μ in processing order."""
    for k in range(order.size):
        qs[k], mus[k] = q[order[k]], mu[order[k]]


@njit(cache=True, _nrt=False, error_model="numpy")
def _earliest(drafts, u, cumulative, first, count, lengths, start, end):
    """The draft with the earliest time, draft i's time taken from its uniform u[i] exactly as
    :meth:`Schedule.times` does (the point ``cumulative[first] + u L`` of the token's stretch, in
    its piece; the piece by bisection inside the token's run, which is what the clipped search
    over all pieces gives, ``cumulative`` being non-decreasing); ties go to the first draft.
    -1 if a draft is not a token (none is read then)."""
    for i in range(drafts.size):
        if drafts[i] < 0 or drafts[i] >= first.size:
            return -1
    best, pick = np.inf, drafts[0]
    for i in range(drafts.size):
        x = drafts[i]
        lo, hi = first[x], first[x] + count[x] - 1
        v = cumulative[first[x]] + u[i] * lengths[x]
        if hi < lo:  # a token without pieces (q = 0): the clip's upper end, wrapped as numpy does
            lo = hi + cumulative.size - 1 if hi < 0 else hi
        while lo < hi:  # the last piece of the run starting at or before v (lo if none): log2 steps
            mid = (lo + hi + 1) // 2
            if cumulative[mid] <= v:
                lo = mid
            else:
                hi = mid - 1
        t = start[lo] + min(max(v - cumulative[lo], 0.0), end[lo] - start[lo])
        if t < best:
            best, pick = t, x
    return pick


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
        consecutive in these arrays, every token with q > 0 owns at least one, and the pieces of all
        tokens tile [0, 1].

    Attributes
    ----------
    marginal : ndarray, shape (V,)
        The law of the candidate, :math:`\\mu(x) = \\sum_{\\text{pieces}} (1-a)^n - (1-b)^n`, each
        term to full relative precision (:func:`_gmass`).
    lengths : ndarray, shape (V,)
        Total length of each token's pieces (q up to the rounding of the end points).
    first, count : ndarray of int, shape (V,)
        Token x owns pieces ``first[x]`` to ``first[x] + count[x] - 1``.
    cumulative : ndarray, shape (P + 1,)
        The pieces laid end to end: piece k spans ``cumulative[k]`` to ``cumulative[k + 1]``; a time is
        drawn as a uniform point of the token's stretch, mapped back to its piece.

    Notes
    -----
    Exactness: the pieces' end points are floats, so a token's total length is q up to a few
    roundings of the end points (relative 2^-53 of the position, far finer than q for the short
    tokens, which sit at the front). The candidate law of the rule that samples these pieces is
    :attr:`marginal` up to that rounding; :meth:`candidate_law` is exact for the pieces as stored.
    """

    def __init__(self, q: np.ndarray, n: int, owner, start, end):
        owner = np.asarray(owner, dtype=np.int64)
        start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
        if not owner.shape == start.shape == end.shape or owner.ndim != 1:
            raise InvalidInputError("owner, start and end must be 1-d arrays of one length")
        if owner.size and (owner.min() < 0 or owner.max() >= q.size):
            raise InvalidInputError(f"piece owners must be tokens in 0..{q.size - 1}")
        self._fill(q, n, owner, start, end, np.empty(0))

    @classmethod
    def _built(cls, q, n, order, nfront, owner, start, end, masses) -> tuple[Schedule, int]:
        """The schedule of :func:`_build`'s pieces (owners as positions in ``order``, G-masses
        :func:`_gmass`), copied out of its workspace, and the number of tokens ``order[nfront:]``
        left without a piece (:func:`_finish`)."""
        schedule = cls.__new__(cls)
        schedule._allocate(q, n, owner.size)
        lacking = _finish(order, nfront, owner, start, end, masses, schedule.owner, schedule.start,
                          schedule.end, schedule.cumulative, schedule.first, schedule.count,
                          schedule.lengths, schedule.marginal)
        return schedule, lacking

    def _allocate(self, q, n, pieces):
        self.q, self.n, self.V = q, n, q.size
        self.owner, self.start, self.end = np.empty(pieces, np.int64), np.empty(pieces), np.empty(pieces)
        self.cumulative = np.empty(pieces + 1)
        self.first, self.count = np.zeros(self.V, np.int64), np.zeros(self.V, np.int64)
        self.lengths, self.marginal = np.zeros(self.V), np.zeros(self.V)

    def _fill(self, q, n, owner, start, end, masses):
        """Store the pieces and index them (:func:`_index`); ``masses`` as there."""
        self._allocate(q, n, owner.size)
        self.owner, self.start, self.end = owner, start, end
        _index(self.owner, self.start, self.end, int(n), masses, self.cumulative, self.first,
               self.count, self.lengths, self.marginal)

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
        return self.start[k] + np.clip(v - self.cumulative[k], 0.0, self.end[k] - self.start[k])

    def candidates(self, drafts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The candidate of each row of ``drafts`` (shape (..., n)): the draft with the earliest time."""
        drafts = np.asarray(drafts)
        pick = np.argmin(self.times(drafts, rng), axis=-1)
        return np.take_along_axis(drafts, pick[..., None], axis=-1)[..., 0]

    def candidate(self, drafts: np.ndarray, rng: np.random.Generator) -> int:
        """:meth:`candidates` of one tuple of token ids (shape (n,), integer), in one compiled pass:
        the same uniforms (``rng.random(n)``), the same float operations, the same candidate.

        Raises
        ------
        InvalidInputError
            A draft outside the tokens.
        """
        drafts = np.ascontiguousarray(drafts, dtype=np.int64)
        pick = _earliest(drafts, rng.random(drafts.size), self.cumulative, self.first, self.count,
                         self.lengths, self.start, self.end)
        if pick < 0:
            raise InvalidInputError(f"drafts must be tokens in 0..{self.V - 1}, got {drafts.tolist()}")
        return int(pick)

    def candidate_law(self, drafts) -> np.ndarray:
        """Exact law of the candidate given the draft tuple ``drafts``, shape (V,).

        Cut [0, 1] at the end points of the drafted tokens' pieces. On an interval inside a piece of
        token x, every other drafted token z has a constant survival :math:`S_z = 1 - F_z` (the
        pieces are disjoint), and x's survival falls linearly from :math:`s_0` to
        :math:`s_1 = s_0 - \\ell / L_x` (ℓ the interval's length, :math:`L_x` the token's total
        length). With :math:`m_x` drafts of token x, the chance that one of them wins there is

        .. math:: \\int m_x \\frac{1}{L_x} S_x^{m_x - 1} \\prod_{z \\ne x} S_z^{m_z} \\, dt
                  = (s_0^{m_x} - s_1^{m_x}) \\prod_{z \\ne x} S_z^{m_z},

        in closed form; :math:`s_0 = ` (length of x's pieces from this interval on) / :math:`L_x`,
        taken as a sum of piece lengths, so a piece of length 1e-16 at time 0.5 is as exact as any.
        The products are summed in logarithms. Cost O(u I) for u distinct tokens and I intervals.

        Raises
        ------
        InvalidInputError
            A draft outside the tokens, or of a token with q = 0 (never drafted).
        """
        drafts = np.asarray(drafts).ravel()
        if drafts.size == 0 or not np.issubdtype(drafts.dtype, np.integer) \
                or drafts.min() < 0 or drafts.max() >= self.V:
            raise InvalidInputError(f"drafts must be tokens in 0..{self.V - 1}, got {drafts.tolist()}")
        tokens, mult = np.unique(drafts, return_counts=True)
        if np.any(self.count[tokens] == 0):
            bad = int(tokens[self.count[tokens] == 0][0])
            raise InvalidInputError(f"token {bad} has q = 0 and is never drafted")
        pcs = [self.pieces(x) for x in tokens]
        cuts = np.unique(np.concatenate([[0.0, 1.0]] + [pc.ravel() for pc in pcs]))
        span = np.diff(cuts)
        owner = np.full(span.size, -1)  # the drafted token whose piece holds each interval
        for u, pc in enumerate(pcs):
            lo, hi = np.searchsorted(cuts, pc[:, 0]), np.searchsorted(cuts, pc[:, 1])
            for a, b in zip(lo, hi, strict=True):
                owner[a:b] = u
        inside = owner[None, :] == np.arange(tokens.size)[:, None]  # (u, I)
        own = np.where(inside, span[None, :], 0.0)
        remaining = np.cumsum(own[:, ::-1], axis=1)[:, ::-1]  # x's length from interval k on
        L = self.lengths[tokens][:, None]
        s0 = np.minimum(remaining / L, 1.0)
        after = np.clip((remaining - own) / L, 0.0, 1.0)  # survival at the interval's end
        with np.errstate(divide="ignore"):
            log_after = mult[:, None] * np.log(after)  # a token's factor where it does not own
        others = np.where(inside, 0.0, log_after).sum(axis=0)  # the other tokens, constant there
        law = np.zeros(self.V)
        k = np.flatnonzero(owner >= 0)
        u = owner[k]
        gain = np.array([_power_diff(s0[a, b], own[a, b] / L[a, 0], int(mult[a]))
                         for a, b in zip(u, k, strict=True)])
        np.add.at(law, tokens[u], gain * np.exp(others[k]))
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
        Its :attr:`~Schedule.marginal` is computed from the pieces, so it is the law of the rule
        that the schedule defines, whatever the rounding of the construction.

    Raises
    ------
    InvalidInputError
        Bad shapes, a negative or non-finite μ, or a bad n.
    ProblemTooLargeError
        n over :data:`MAX_DRAFTS`.
    SolverError
        The construction reached an impossible state (a loop bound); no valid input does this.

    Notes
    -----
    **Short tokens.** A token with q below :data:`SHORT` would get a window narrower than the
    spacing of floats near most times, so it takes its piece first, at the front of [0, 1] (in
    order of q, where the spacing is finer than each piece). Its G-mass there, about n q, is at
    most what a window would give beyond μ(x), so the other tokens lose at most
    :math:`n \\sum_{q < SHORT} q < n V 2^{-70}` of G-mass (below 2e-14 for V = 128k, n = 128). A
    token whose window still comes out empty (q under the spacing where its window falls) joins
    the front and the schedule is rebuilt; each rebuild moves at least one token, so there are at
    most V of them, and every token with q > 0 owns a piece of length q up to rounding.

    **Accuracy.** G-masses are computed to full relative precision (:func:`_power_diff`); each
    window aims at its target plus the shortfall of the windows before it, so the error of the
    cumulative mass stays that of one window instead of growing with V. What remains is the
    spacing of floats: moving a window's end by one float changes its G-mass by about the density
    times the spacing, :math:`n (1 - t)^{n-1} \\cdot 2^{-52} t \\le 2^{-52}` (as
    :math:`n t (1 - t)^{n-1} \\le 1`), and the window start is the nearest float found. With the
    carry, token k's mass is off by the difference of two such roundings, so
    :math:`\\alpha^* - \\sum_y \\min(p, \\mu) \\le 2^{-51} V` plus a few roundings of the base, in the
    worst case (5.8e-11 at V = 128k). Measured (``benchmarks/bench_gap.py``,
    ``benchmarks/fuzz_optimal.py``): at most 2e-13 on softmax pairs up to V = 128k, n = 1024, and
    at most 1e-12 in the worst configuration found, p = q at V = 128k, where every token needs
    μ = p exactly and each window's rounding counts (it is about 1e-17 per token there). The float
    vector q itself sums to one only within about V 2^-53, which changes the coverage, and so α*,
    by up to n times that; the measured gaps include it.

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
    if not np.all(np.isfinite(mu)) or np.any(mu < 0):
        raise InvalidInputError("mu must be finite and non-negative")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidInputError(f"the number of drafts must be a positive integer, got {n!r}")
    return _realise(mu, q, int(n))


def _realise(mu: np.ndarray, q: np.ndarray, n: int, hint: np.ndarray | None = None) -> Schedule:
    """:func:`realise_iid` on checked inputs.

    ``hint``, a permutation of all the tokens close to the processing order (μ/q decreasing), only
    makes the sort linear: the tokens are sorted by (-μ/q, token) whatever it is. For the
    lexicographically optimal base, its order (:attr:`~mdtheory.models.polymatroid.LexBase.order`, q/p
    increasing) is that order up to rounding: on a block of slope s, μ/q = s p/q falls along it,
    and across a hull vertex, between the block's last token a and the next block's first b,
    :math:`\\mu_a/q_a \\ge \\Delta G_a/q_a \\ge \\Delta G_b/q_b \\ge \\mu_b/q_b` (the path meets the hull
    from above at a vertex and leaves it upwards; ΔG/q, the secant of the concave
    :math:`1 - (1 - Q)^n`, falls along the order).
    """
    if n > MAX_DRAFTS:
        raise ProblemTooLargeError(f"a time schedule for n = {n} drafts would miss its candidate's law "
                                   f"by about n 2^-53; at most {MAX_DRAFTS} (2^20) drafts")
    ws = _workspace(q.size)
    nfront, nrest = _split(q, mu, np.arange(q.size) if hint is None else hint, ws.front, ws.rest,
                           ws.keys)
    keys = ws.keys[:nrest]
    by = np.argsort(keys, kind="stable")  # timsort: linear on the runs the hint leaves
    m = nfront + nrest
    order = ws.order[:m]
    if _place(ws.rest, keys, by, order[nfront:]):
        stable_ties(order[nfront:], keys[by])
    front = ws.front[:nfront].copy()
    qs, mus = ws.qs[:m], ws.mus[:m]
    for _ in range(m + 1):  # each rebuild moves at least one token to the front
        if nfront:
            front = front[np.argsort(q[front], kind="stable")]
            order[:nfront] = front
        _gather(q, mu, order, qs, mus)
        status, count = _build(qs, mus, int(n), nfront, *ws.build)
        if status != _OK:
            raise SolverError(f"schedule construction reached an impossible state (status {status}) "
                              f"at V = {q.size}, n = {n}")
        schedule, lacking = Schedule._built(q, int(n), order, nfront,
                                            *(a[:count] for a in ws.build[4:]))
        if not lacking:
            return schedule
        rest = order[nfront:]
        empty = schedule.count[rest] == 0
        front = np.concatenate([front, rest[empty]])
        order[front.size:] = rest[~empty]
        nfront = front.size
    raise SolverError(f"schedule construction left a token without a piece at V = {q.size}, n = {n}")
