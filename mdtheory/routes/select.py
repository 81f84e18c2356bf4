"""α* of iid drafts without a sort: buckets of the ratio p/q bracket every prefix.

By the prefix property (papers/theory.md §4), :math:`\\alpha^* = 1 - \\max(0, \\max_c [q(H_c)^n -
p(H_c)])` over the sets :math:`H_c = \\{y : r_y < c\\}` of the ratio :math:`r = p/q`: only the value
and one optimal threshold are needed, not the order. One pass puts every token in a bucket of its
ratio (a digit of the ratio's bits, so the buckets are intervals of r in order) and sums p and q per
bucket. That gives the exact gain at every bucket boundary and, inside each bucket, a bound on the
gain of every prefix: its ratios are at least the bucket's lowest, so
:math:`q(H)^n - p(H) \\le \\max(G_j, (Q_j + q_j)^n - P_j - r_j q_j)` (convex in the mass added).
Only the buckets whose bound reaches the best boundary are *opened*: their tokens (a few hundred on
language-model pairs) are sorted and every prefix at the end of a class of equal ratios is evaluated.
The best of all these is α*, and the bounds of the others, all below it, prove it: the bracket
closes exactly. Proof and floating point: papers/theory.md, section "α* without a sort: buckets of
the ratio bracket every prefix".

The ratio is :func:`~mdtheory.routes.subsets._ratio`'s (masses below
:data:`~mdtheory.models.polymatroid.TINY` read as zero, as the sort-based ``prefix`` route orders
them), the masses summed are the unrounded ones, and the power of a prefix's mass is taken as the
``prefix`` route takes it (:func:`~mdtheory.routes.subsets._iid_power`; beyond
:data:`~mdtheory.routes.subsets.LOG_POWER_N` drafts from the distance to one, the complement's
mass, so that n up to 2^53 stays exact). The sort-based route stays as the cross-check.
"""

from __future__ import annotations

import functools
import math
import time
from typing import NamedTuple

import numpy as np

from .._jit import _two_sum, njit
from ..errors import InvalidInputError
from ..models.base import DraftModel
from .proofs import PrefixBuckets, RouteOutput
from .subsets import LOG_POWER_N, TIE_TOL, _add, _iid_power, _ratio

__all__ = ["select_scan", "bracket", "bucket_scheme", "Bracket", "DIGIT_BITS", "LOW_EXP",
           "SELECT_MIN_V"]

#: Mantissa bits of a bucket's digit: a bucket spans a factor of at most 1 + 2^-DIGIT_BITS of the ratio.
DIGIT_BITS = 5
#: Ratios p/q below 2^-LOW_EXP share the first bucket (with the ratio 0, p = 0 < q).
LOW_EXP = 40
#: ``method="auto"`` takes this route for iid drafts from this many tokens on (below, the sort-based
#: ``prefix`` route is as fast); below it, one bucket holds all the tokens (it is opened: a sort of
#: V keys, cheaper there than a pass over the buckets).
SELECT_MIN_V = 2048
#: Room for this many opened tokens before they are counted (beyond, they are gathered again).
GATHER_ROOM = 4096
#: Tokens per block of the passes over the tokens: a block's buckets, computed by a vectorisable
#: loop, stay in the L1 cache for the loop that reads them.
BLOCK = 1024
#: Tokens per sub-block of the gathering: one without an opened bucket is skipped after a
#: vectorisable count, so a token of an opened bucket costs a scan of this many.
SUB_BLOCK = 128
#: A bucket's lowest ratio is shaded by this (relative) before it bounds the p of its tokens: the
#: computed ratio p/q is within 2^-53 of the true one.
RATIO_SHADE = 2.0 ** -52


@functools.lru_cache(maxsize=256)
def bucket_scheme(V: int, n: int) -> tuple[int, int, int]:
    """The buckets for V tokens and n drafts, as (shift, lo, nb): a token of ratio bits b goes to
    bucket ``clip((b >> shift) - lo, -1, nb) + 1``, so bucket 0 holds the ratios below
    :math:`2^{-LOW\\_EXP}`, buckets 1..nb the digits in between, bucket nb + 1 the ratios of at
    least :math:`2^{e}` with :math:`2^{e} \\ge 2n` (no prefix ending there is optimal) and inf and
    NaN. The digit keeps up to :data:`DIGIT_BITS` mantissa bits, fewer where V is small (about V/8
    buckets at most); below :data:`SELECT_MIN_V` tokens there is one bucket."""
    if V < SELECT_MIN_V:
        return 63, 0, 0  # every non-negative ratio's bits shift to 0: all in bucket 1, from r = 0
    top = max(int(n - 1).bit_length(), 0) + 1  # 2^top >= 2n
    exponents = LOW_EXP + top
    bits = min(DIGIT_BITS, max(int(V // (8 * exponents)).bit_length() - 1, 0))
    shift = 52 - bits
    lo = int(np.float64(2.0 ** -LOW_EXP).view(np.int64)) >> shift
    hi = int(np.float64(2.0 ** top).view(np.int64)) >> shift
    return shift, lo, hi - lo


@njit(cache=True, error_model="numpy")
def _ratio_bits(a, b):
    """The bits of :func:`~mdtheory.routes.subsets._ratio` as an int64: increasing with the ratio
    (NaN, p = q = 0, above inf)."""
    return np.float64(_ratio(a, b)).view(np.int64)


@njit(cache=True, error_model="numpy")
def _digit(bits, shift, lo, nb):
    return min(max((bits >> shift) - lo, -1), nb) + 1


@njit(cache=True, error_model="numpy")
def _histogram(p, q, shift, lo, nb, digit, sums):
    """Each token's bucket into ``digit`` and the sums of p and q per bucket into ``sums`` (shape
    (nb + 2, 2), zero on entry): by blocks of :data:`BLOCK` tokens, two loops, the first
    vectorisable, the second a scatter of the block still in the L1 cache."""
    for start in range(0, p.size, BLOCK):
        a = p[start:start + BLOCK]
        b = q[start:start + BLOCK]
        dd = digit[start:start + BLOCK]
        for k in range(a.size):
            dd[k] = _digit(_ratio_bits(a[k], b[k]), shift, lo, nb)
        for k in range(a.size):
            d = dd[k]
            sums[d, 0] += a[k]
            sums[d, 1] += b[k]


@njit(cache=True, error_model="numpy")
def _range(flags):
    """The first flagged bucket and the distance to the last ((0, -1) if none is flagged)."""
    first, last = 0, -1
    for j in range(flags.size - 1, -1, -1):
        if flags[j]:
            first = j
            last = max(last, j)
    return first, last - first


@njit(cache=True, error_model="numpy")
def _take(p, q, dd, start, flags, first, span, bits, ps, qs, m):
    """Gather the tokens start + k whose bucket ``dd[k]`` is flagged: their ratio bits, p and q
    written from position m of ``bits``, ``ps``, ``qs`` while there is room; returns the count
    so far. By sub-blocks of :data:`SUB_BLOCK` tokens, one without a bucket in the flagged range
    ``first``..``first + span`` (:func:`_range`) skipped after a vectorisable count."""
    room = bits.size
    for s in range(0, dd.size, SUB_BLOCK):
        sub = dd[s:s + SUB_BLOCK]
        hit = 0
        for k in range(sub.size):
            hit += ((np.int64(sub[k]) - first) & 0xFFFF) <= span
        if hit == 0:
            continue
        for k in range(sub.size):
            if flags[sub[k]]:
                i = start + s + k
                if m < room:
                    bits[m] = _ratio_bits(p[i], q[i])
                    ps[m], qs[m] = p[i], q[i]
                m += 1
    return m


@njit(cache=True, error_model="numpy")
def _refill(p, q, shift, lo, nb, flags, sums, bits, ps, qs):
    """The certificate's pass: the sums of p and q per bucket into ``sums`` (zero on entry) and
    the tokens of the flagged buckets gathered as :func:`_take` does; returns how many there
    are. By blocks of :data:`BLOCK` tokens: their buckets (a vectorisable loop), the scatter, and
    the gathering."""
    buf = np.empty(BLOCK, np.uint16)
    first, span = _range(flags)
    m = 0
    for start in range(0, p.size, BLOCK):
        a = p[start:start + BLOCK]
        b = q[start:start + BLOCK]
        hit = 0
        for k in range(a.size):
            d = _digit(_ratio_bits(a[k], b[k]), shift, lo, nb)
            buf[k] = d
            hit += ((d - first) & 0xFFFF) <= span
        for k in range(a.size):
            d = buf[k]
            sums[d, 0] += a[k]
            sums[d, 1] += b[k]
        if hit:
            m = _take(p, q, buf[:a.size], start, flags, first, span, bits, ps, qs, m)
    return m


@njit(cache=True, error_model="numpy")
def _power(t, tc, rest, n):
    """:math:`Q(H) = (1 - q(H^c))^n` for a prefix H of mass t + tc (compensated) whose complement
    has mass ``rest``: :func:`~mdtheory.routes.subsets._iid_power` up to
    :data:`~mdtheory.routes.subsets.LOG_POWER_N` drafts; beyond, for a mass of at least 1/2,
    :math:`\\exp(n \\log1p(x))` with :math:`x = -q(H^c)`, the complement's mass, to its own
    relative precision (papers/theory.md, "iid containments near one")."""
    if n <= LOG_POWER_N:
        return _iid_power(t, tc, n, 0.0)
    if t + tc < 0.5:
        return 0.0
    x = -rest
    return 1.0 if x >= 0.0 else math.exp(n * math.log1p(x))


@njit(cache=True, error_model="numpy")
def _bounds(sums, shift, lo, nb, n, tie_tol, P, Pc, Q, Qc, gain, bound, opened):
    """Running sums over the buckets and what they give: ``P[j] + Pc[j]``, ``Q[j] + Qc[j]`` the
    masses before bucket j (compensated), ``gain[j]`` the gain of that prefix (j = 0..nb+2, the
    last all tokens), ``bound[j]`` the bound on every prefix that ends inside bucket j (-inf
    where the bucket has no q) and ``opened[j]`` whether it reaches the best boundary less
    ``tie_tol``. Returns the complement masses ``rest`` (q of bucket j on) and the best
    boundary's gain (0 at least: the empty prefix)."""
    m = nb + 2
    rest = np.empty(m + 1)
    rest[m] = 0.0
    s, c = 0.0, 0.0
    for j in range(m - 1, -1, -1):  # an empty bucket adds nothing: skipped (the same bits)
        if sums[j, 1] != 0.0:
            s, c = _add(s, c, sums[j, 1])
        rest[j] = s + c
    t, tc, u, uc = 0.0, 0.0, 0.0, 0.0
    P[0], Pc[0], Q[0], Qc[0] = 0.0, 0.0, 0.0, 0.0
    g = _power(0.0, 0.0, rest[0], n)
    gain[0] = g
    for j in range(m):  # one power per bucket that holds mass: an empty bucket's end is its start
        a, b = sums[j, 0], sums[j, 1]
        bound[j] = -np.inf
        if a != 0.0 or b != 0.0:
            t, e = _two_sum(t, a)
            tc += e
            u, e = _two_sum(u, b)
            uc += e
            start, g = g, _power(u, uc, rest[j + 1], n) - (t + tc)
            if b > 0.0:
                low = 0.0 if j == 0 else np.int64((j - 1 + lo) << shift).view(np.float64)
                bound[j] = max(start, g + a - low * (1.0 - RATIO_SHADE) * b)
        P[j + 1], Pc[j + 1], Q[j + 1], Qc[j + 1], gain[j + 1] = t, tc, u, uc, g
    best = max(gain.max(), 0.0)
    for j in range(m):
        opened[j] = bound[j] >= best - tie_tol
    return rest, best


@njit(cache=True, error_model="numpy")
def _gather(p, q, digit, flags, bits, ps, qs):
    """The route's gathering: the tokens of the flagged buckets, by :func:`_take` over the kept
    buckets ``digit``; returns how many there are (more than the room: call again with room for
    all)."""
    return _take(p, q, digit, 0, flags, *_range(flags), bits, ps, qs, 0)


@njit(cache=True, error_model="numpy")
def _inside(bits, ps, qs, shift, lo, nb, n, P, Pc, Q, Qc, rest, gains):
    """The gain of every prefix that ends a class of equal ratios inside an opened bucket, for
    the opened buckets' tokens sorted by ratio: ``gains[k]`` at the class's last token k (-inf
    elsewhere). Each bucket starts from its boundary's running sums; the complement's mass at a
    point is the bucket's q after it (a suffix sum) plus ``rest`` after the bucket. Returns the
    largest gain (-inf if none)."""
    m = bits.size
    best = -np.inf
    start = 0
    for _ in range(m + 1):  # one bucket per turn: at most m turns
        if start >= m:
            break
        j = _digit(bits[start], shift, lo, nb)
        end = start + 1
        while end < m and _digit(bits[end], shift, lo, nb) == j:
            end += 1
        # suffix sums of q within the bucket, stored in gains for now (overwritten below)
        s, c = 0.0, 0.0
        for k in range(end - 1, start - 1, -1):
            gains[k] = s + c  # q of the bucket's tokens after k
            s, c = _add(s, c, qs[k])
        t, tc, u, uc = P[j], Pc[j], Q[j], Qc[j]
        for k in range(start, end):
            t, tc = _add(t, tc, ps[k])
            u, uc = _add(u, uc, qs[k])
            if k + 1 < end and bits[k + 1] == bits[k]:
                gains[k] = -np.inf
                continue
            g = _power(u, uc, gains[k] + rest[j + 1], n) - (t + tc)
            gains[k] = g
            best = max(best, g)
        start = end
    return best


@njit(cache=True, error_model="numpy")
def _threshold(gain, bound, opened, bits, gains, shift, lo, nb, floor):
    """The first prefix, in the order of the ratio, whose gain is at least ``floor``: as (bucket
    j, bits k) meaning the tokens of the buckets before j and those of bucket j with ratio bits at
    most k (k = -1: bucket j's boundary). Opened buckets' points are visited in order between
    their boundaries; (nb + 2, -1), all tokens, if none qualifies."""
    m = bits.size
    k = 0
    for j in range(nb + 2):
        if gain[j] >= floor:
            return j, -1
        if opened[j]:
            while k < m and _digit(bits[k], shift, lo, nb) == j:
                if gains[k] >= floor:
                    return j, bits[k]
                k += 1
    return nb + 2, -1


@njit(cache=True, error_model="numpy")
def _cut(p, q, digit, j, kbits, out):
    """The tokens below the threshold (j, kbits) of :func:`_threshold`, in increasing order, into
    ``out``; returns how many. A block of :data:`BLOCK` tokens all in buckets before j is written
    whole, one with none there and none in bucket j skipped; the others token by token,
    branch-free (each token is written and counted if it belongs)."""
    count = np.uint64(0)  # unsigned: an index numba does not wrap around
    for start in range(0, p.size, BLOCK):
        dd = digit[start:start + BLOCK]
        below, at = 0, False
        for k in range(dd.size):
            below += dd[k] < j
            at |= dd[k] == j
        if below == dd.size:
            for k in range(dd.size):
                out[count + np.uint64(k)] = start + k
            count += np.uint64(dd.size)
            continue
        if below == 0 and not at:
            continue
        for k in range(dd.size):
            d = np.int64(dd[k])
            inside = d < j
            if d == j:  # the opened bucket the cut ends in: a few tokens
                inside = _ratio_bits(p[start + k], q[start + k]) <= kbits
            out[count] = start + k
            count += np.uint64(inside)
    return np.int64(count)


@njit(cache=True, error_model="numpy")
def _cut_masses(bits, ps, qs, shift, lo, nb, n, P, Pc, Q, Qc, rest, j, kbits):
    """p(T) and q(T)^n of the cut T = (j, kbits) of :func:`_threshold` (the tokens of the buckets
    before j and those of bucket j whose ratio bits are at most kbits): the running sums at
    bucket j's boundary plus, for kbits >= 0, the gathered tokens of bucket j (which must be
    among ``bits``, ``ps``, ``qs``) up to kbits, compensated; the power as :func:`_power` takes
    it, from the complement's mass."""
    t, tc, u, uc = P[j], Pc[j], Q[j], Qc[j]
    s, c = rest[j], 0.0
    if kbits >= 0:
        s = rest[j + 1]
        for k in range(bits.size):
            if _digit(bits[k], shift, lo, nb) == j:
                if bits[k] <= kbits:
                    t, tc = _add(t, tc, ps[k])
                    u, uc = _add(u, uc, qs[k])
                else:
                    s, c = _add(s, c, qs[k])
    return t + tc, _power(u, uc, s + c, n)


@njit(cache=True, error_model="numpy")
def _settle(bits, ps, qs, shift, lo, nb, n, P, Pc, Q, Qc, rest, gain, bound, opened, best,
            tie_tol, cut_j, cut_k):
    """Everything after the gathering, in one call: the opened buckets' tokens sorted by ratio
    (stable), the gains inside them (:func:`_inside`), the best gain (with ``best``, the best
    boundary), the largest bound of the buckets not opened, the cut (:func:`_threshold`; empty
    when the best is within ``tie_tol`` of 0) and, for ``cut_j`` >= 0, the masses of the cut
    (``cut_j``, ``cut_k``) (:func:`_cut_masses`; NaN otherwise). Returns (best, closed, j, kbits,
    cut_p, cut_q)."""
    by = np.argsort(bits, kind="mergesort")
    bits, ps, qs = bits[by], ps[by], qs[by]
    gains = np.empty(bits.size)
    best = max(best, _inside(bits, ps, qs, shift, lo, nb, n, P, Pc, Q, Qc, rest, gains))
    closed = -np.inf
    for j in range(nb + 2):
        if not opened[j]:
            closed = max(closed, bound[j])
    j, kbits = 0, -1
    if best > tie_tol:
        j, kbits = _threshold(gain, bound, opened, bits, gains, shift, lo, nb, best - tie_tol)
    cut_p, cut_q = np.nan, np.nan
    if cut_j >= 0:
        cut_p, cut_q = _cut_masses(bits, ps, qs, shift, lo, nb, n, P, Pc, Q, Qc, rest,
                                   cut_j, cut_k)
    return best, closed, j, kbits, cut_p, cut_q


@njit(cache=True, error_model="numpy")
def _bracket(p, q, shift, lo, nb, n, tie_tol, digit, flags, cut_j, cut_k):
    """:func:`bracket` in one call. The route (``digit`` of length V): each token's bucket kept
    there, the opened buckets gathered by a second pass. A certificate (``digit`` empty): the
    flagged buckets gathered in the pass that fills the buckets, and a second pass only where a
    bucket opens that was not flagged; every flagged bucket is opened. The cut (``cut_j``,
    ``cut_k``) is measured where ``cut_j`` >= 0 (its bucket opened if the cut ends inside it).
    Returns (best, closed, j, kbits, cut_p, cut_q, opened), as :func:`_settle` and the opened
    buckets."""
    sums = np.zeros((nb + 2, 2))
    room = min(p.size, GATHER_ROOM)
    bits, ps, qs = np.empty(room, np.int64), np.empty(room), np.empty(room)
    route = digit.size > 0
    m = 0
    if route:
        _histogram(p, q, shift, lo, nb, digit, sums)
    else:
        m = _refill(p, q, shift, lo, nb, flags, sums, bits, ps, qs)
    P, Pc, Q, Qc, gain, bound = np.empty(nb + 3), np.empty(nb + 3), np.empty(nb + 3), \
        np.empty(nb + 3), np.empty(nb + 3), np.empty(nb + 2)
    opened = np.empty(nb + 2, np.bool_)
    rest, best = _bounds(sums, shift, lo, nb, n, tie_tol, P, Pc, Q, Qc, gain, bound, opened)
    if cut_j >= 0 and cut_k >= 0:
        opened[cut_j] = True
    missing = m > room
    if not route:
        for j in range(nb + 2):
            missing |= opened[j] and not flags[j]
            opened[j] |= flags[j]
    if route or missing:  # the route's gathering, or a certificate's second pass
        for _ in range(2):  # room for all of them the second time, if there was not the first
            m = _gather(p, q, digit, opened, bits, ps, qs) if route else \
                _refill(p, q, shift, lo, nb, opened, np.zeros_like(sums), bits, ps, qs)
            if m <= bits.size:
                break
            bits, ps, qs = np.empty(m, np.int64), np.empty(m), np.empty(m)
    best, closed, j, kbits, cut_p, cut_q = _settle(
        bits[:m], ps[:m], qs[:m], shift, lo, nb, n, P, Pc, Q, Qc, rest, gain, bound, opened,
        best, tie_tol, cut_j, cut_k)
    return best, closed, j, kbits, cut_p, cut_q, opened


class Bracket(NamedTuple):
    """What :func:`bracket` found.

    Attributes
    ----------
    best : float
        The largest gain :math:`q(H)^n - p(H)` over the bucket boundaries and the prefixes inside
        the opened buckets, and 0 (the empty prefix): α* = 1 - best when the bracket closes.
    closed : float
        The largest bound of a bucket not opened (-inf if none): every prefix ending there gains
        at most this. α* >= 1 - max(best, closed).
    threshold : tuple of int
        The cut: the first prefix within ``tie_tol`` of ``best`` (empty if best <= tie_tol), as
        (bucket, ratio bits) of :func:`_threshold`.
    scheme : tuple of int
        (shift, lo, nb) of :func:`bucket_scheme`.
    opened : ndarray of bool, shape (nb + 2,)
    digit : ndarray of uint16, shape (V,), or None
        Each token's bucket (kept by the route's pass only).
    cut_p, cut_q : float
        p(T) and q(T)^n of the cut T that :func:`bracket` was asked to measure (NaN if none).
    """

    best: float
    closed: float
    threshold: tuple
    scheme: tuple
    opened: np.ndarray
    digit: np.ndarray | None
    cut_p: float = float("nan")
    cut_q: float = float("nan")


def bracket(p: np.ndarray, q: np.ndarray, n: int, scheme: tuple | None = None,
            tie_tol: float = TIE_TOL, claimed: np.ndarray | None = None,
            cut: tuple | None = None) -> Bracket:
    """Bracket :math:`\\max_c [q(H_c)^n - p(H_c)]` by buckets of the ratio p/q (module docstring).

    Parameters
    ----------
    p, q : ndarray, shape (V,)
        Validated distributions.
    n : int
    scheme : tuple of int, optional
        (shift, lo, nb) of :func:`bucket_scheme` (its choice by default).
    tie_tol : float
        Buckets whose bound reaches the best boundary less this are opened, so that the first
        prefix within ``tie_tol`` of the best is found (the cut, as the ``prefix`` route's).
    claimed : ndarray of int, optional
        For a certificate: buckets (indices in 0..nb+1) expected to open. Their tokens are
        gathered in the pass that fills the buckets (no second pass where the expectation holds;
        the buckets that do open and were not claimed are gathered by a second one), every
        claimed bucket is opened too, and no token's bucket is kept (``digit`` None). Default:
        the route's two passes, the buckets kept for the cut.
    cut : tuple of int, optional
        A cut (j, kbits) as :func:`_threshold` gives it, to measure (``cut_p``, ``cut_q``): its
        bucket j is opened when the cut ends inside it.

    Returns
    -------
    Bracket
    """
    V, n = p.size, int(n)
    shift, lo, nb = bucket_scheme(V, n) if scheme is None else scheme
    digit = np.empty(V if claimed is None else 0, np.uint16)
    flags = np.zeros(nb + 2, np.bool_)
    if claimed is not None:
        flags[claimed] = True
    best, closed, j, kbits, cut_p, cut_q, opened = _bracket(
        p, q, shift, lo, nb, n, tie_tol, digit, flags, *(cut if cut is not None else (-1, -1)))
    return Bracket(float(best), float(closed), (int(j), int(kbits)), (shift, lo, nb), opened,
                   digit if claimed is None else None, float(cut_p), float(cut_q))


def select_scan(p: np.ndarray, model: DraftModel, cut: bool = True) -> RouteOutput:
    """α* of iid drafts by buckets of the ratio, no sort of the tokens (module docstring).

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : DraftModel
        iid drafts (:attr:`~mdtheory.models.base.DraftModel.lex_base_closed_form`).
    cut : bool
        Write the cut's tokens (default). False: ``cut`` is None, the proof's ``threshold``
        describes it (its masses are measured by the certificate), one pass fewer.

    Returns
    -------
    RouteOutput
        ``value`` = 1 - the best gain, ``cut`` (the first prefix in the order of the ratio within
        :data:`~mdtheory.routes.subsets.TIE_TOL` of the best, ending a class of equal ratios; empty
        when no prefix gains more than that), ``proof`` (a
        :class:`~mdtheory.routes.proofs.PrefixBuckets`: the buckets, which the certifier fills
        again from p and q and bounds, the buckets opened and the cut's threshold), ``timings``.

    Raises
    ------
    InvalidInputError
        A draft model other than iid.

    Notes
    -----
    Two passes over the tokens (the bucket of each and the scatter of p and q), one over the
    buckets, one that gathers the opened buckets' tokens (reading only the buckets of a block
    without them), a sort of those, and the pass that writes the cut: O(V + B + m log m) for B
    buckets and m opened tokens.
    """
    if not model.lex_base_closed_form:
        raise InvalidInputError(f"method 'select' is exact only for iid drafts, not {model.sampling!r}; "
                                "use 'prefix'")
    t0 = time.perf_counter()
    found = bracket(p, model.q, model.n)
    j, kbits = found.threshold
    tokens = None
    if cut:
        out = np.empty(p.size, np.int64)
        tokens = out[:_cut(p, model.q, found.digit, j, kbits, out)]
    proof = PrefixBuckets(found.scheme, np.flatnonzero(found.opened), found.threshold)
    return RouteOutput(value=1.0 - found.best, cut=tokens, proof=proof,
                       timings={"scan": time.perf_counter() - t0})
