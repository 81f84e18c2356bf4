"""Lower bounds on α* for successive sampling from majorants of its containment: the
partial-replacement majorant and the face certificate built on it (papers/theory.md, "Successive
sampling: lower bounds from majorants of the containment").

Drafts without replacement stay in a token set T less often than draws with replacement do:
replacing some of the drawn tokens (the model :math:`M_W` below) can only raise every containment
:math:`Q(T)`, and a majorant Ψ ≥ Q gives :math:`\\alpha^* \\ge 1 + \\min_T [p(T) - \\Psi(T)]`. For
:math:`M_W` (only the drawn tokens of a small set W are removed) the minimum is exact and cheap: per
part C of W, the rest of T is a prefix of the other tokens in the order of q/p. Applied to the face
of the prefix route's cut (:func:`face_bound`) it proves α* where Wolfe's minimum-norm point creeps:
at α* = 1, and where α* falls short of one only by a few tokens the drafter almost never proposes.
"""

from __future__ import annotations

import math

import numpy as np

from .._budget import MAJORANT_EXACT, MAJORANT_WORK
from .._jit import njit
from .base import DraftModel
from .vertices import model_vertex

__all__ = ["partial_replacement_coefficients", "hall_excess", "best_prefix", "face_bound",
           "exact_tokens", "MAJORANT_WORK", "MAJORANT_EXACT"]



@njit(cache=True)
def _path_table(qw, n):
    """F[D, w]: the weight of the draw sequences of :math:`M_W` that take exactly the tokens D of W
    (a bit mask over ``qw``) and w draws from outside W, the latter without their factor r."""
    m = qw.size
    full = 1 << m
    mass = np.zeros(full)
    count = np.zeros(full, dtype=np.int64)
    for D in range(1, full):
        for i in range(m):
            if (D >> i) & 1:
                mass[D] = mass[D ^ (1 << i)] + qw[i]
                count[D] = count[D ^ (1 << i)] + 1
                break
    F = np.zeros((full, n + 1))
    F[0, 0] = 1.0
    for s in range(n):  # the sequences of s draws extend to s + 1
        for D in range(full):
            w = s - count[D]
            if w < 0 or count[D] > s:
                continue
            val = F[D, w]
            rest = 1.0 - mass[D]
            if val == 0.0 or not rest > 0.0:
                continue
            F[D, w + 1] += val / rest
            for i in range(m):
                if not (D >> i) & 1:
                    F[D | (1 << i), w] += val * qw[i] / rest
    return F, count


@njit(cache=True)
def _zeta(F, count, n):
    """coef[C, w] = sum over D ⊆ C with |D| = n - w of F[D, w]: the coefficients of
    :math:`Q_{M_W}(C \\cup R)` in r = q(R)."""
    full = F.shape[0]
    coef = np.zeros((full, n + 1))
    for D in range(full):
        w = n - count[D]
        if w >= 0:
            coef[D, w] = F[D, w]
    m = 0
    while (1 << m) < full:
        m += 1
    for i in range(m):
        bit = 1 << i
        for C in range(full):
            if C & bit:
                for w in range(n + 1):
                    coef[C, w] += coef[C ^ bit, w]
    return coef


def partial_replacement_coefficients(qw: np.ndarray, n: int) -> np.ndarray:
    """Coefficients of the containment of the partial-replacement model :math:`M_W`.

    :math:`M_W` draws n times from q, removing a drawn token only if it lies in W (masses ``qw``,
    of a law q summing to one); the tokens outside W are drawn again with their own mass. For
    C ⊆ W (a bit mask over ``qw``) and any set R outside W of mass r = q(R),

    .. math:: Q_{M_W}(C \\cup R) = \\sum_{w=0}^{n} \\mathrm{coef}[C, w]\\, r^w,

    a polynomial with non-negative coefficients, so convex and increasing in r
    (papers/theory.md, "Successive sampling: lower bounds from majorants of the containment").

    Parameters
    ----------
    qw : ndarray, shape (m,)
        Masses of the tokens of W, summing to at most one.
    n : int

    Returns
    -------
    ndarray, shape (2**m, n + 1)

    Examples
    --------
    W = {a} with q(a) = 1/2, two drafts: Q(R) = r², and Q({a} ∪ R) sums the sequences (a, R),
    (R, a) and (R, R): (1/2) r / (1/2) + r (1/2) + r² = 1.5 r + r².

    >>> c = partial_replacement_coefficients(np.array([0.5]), 2)
    >>> c[0].tolist(), c[1].tolist()
    ([0.0, 0.0, 1.0], [0.0, 1.5, 1.0])
    """
    qw = np.ascontiguousarray(qw, dtype=float)
    F, count = _path_table(qw, int(n))
    return _zeta(F, count, int(n))


@njit(cache=True)
def _majorant_min(coef, pw, P, R):
    """min over C (rows of coef) and prefixes j of p(C) + P[j] - sum_w coef[C, w] R[j]^w."""
    full, degree = coef.shape[0], coef.shape[1] - 1
    m = pw.size
    best = np.inf
    pc = np.zeros(full)
    for C in range(full):
        if C:
            for i in range(m):
                if (C >> i) & 1:
                    pc[C] = pc[C ^ (1 << i)] + pw[i]
                    break
        for j in range(P.size):
            r = R[j]
            acc = coef[C, degree]
            for w in range(degree - 1, -1, -1):
                acc = acc * r + coef[C, w]
            value = pc[C] + P[j] - acc
            if value < best:
                best = value
    return best


def exact_tokens(q: np.ndarray, n: int, others: int, work: int = MAJORANT_WORK) -> int:
    """The size m of W: the largest with :math:`2^m (J + 1)(n + 1)` cells within ``work``, J the
    tokens left outside W, at most :data:`MAJORANT_EXACT` and the tokens of positive mass."""
    live = int(np.count_nonzero(q > 0))
    m = 0
    while m < min(MAJORANT_EXACT, live) and (2 << m) * (max(others - m - 1, 0) + 1) * (n + 1) <= work:
        m += 1
    return m


def hall_excess(p: np.ndarray, q: np.ndarray, n: int, order: np.ndarray,
                work: int = MAJORANT_WORK) -> float:
    """An ε ≥ 0 with :math:`p(A) \\le g(A) + \\varepsilon` for every token set A, where
    :math:`g(A) = 1 - Q(\\Omega \\setminus A)` is the coverage of n drafts without replacement from q:
    ε = 0 proves Hall's condition (acceptance one for a target p of total one).

    By the partial-replacement majorant :math:`Q \\le Q_{M_W}` with W the m tokens of largest q
    (:func:`exact_tokens`): :math:`\\varepsilon = \\max(0, p(\\Omega) - 1 - \\min_T [p(T) - Q_{M_W}(T)])`,
    the minimum over every part of W and every prefix of the other tokens of positive mass in the
    order of q/p (papers/theory.md, "Successive sampling: lower bounds from majorants of the
    containment").

    Parameters
    ----------
    p : ndarray, shape (V,)
        Non-negative masses (any total).
    q : ndarray, shape (V,)
        The draft law, summing to one; at least n tokens of positive mass.
    n : int
    order : ndarray of int, shape (V,)
        The tokens by the exact ratio p/q increasing (the prefix route's order; the caller checks
        it: the minimum over prefixes is the minimum over sets only along this order).
    work : int
        :data:`MAJORANT_WORK`.
    """
    others = np.asarray(order)[q[order] > 0]
    m = exact_tokens(q, n, others.size, work)
    exact = np.argsort(-q, kind="stable")[:m]
    inside = np.zeros(q.size, dtype=bool)
    inside[exact] = True
    rest = others[~inside[others]]
    coef = partial_replacement_coefficients(q[exact], n)
    P = np.concatenate(([0.0], np.cumsum(p[rest])))
    R = np.minimum(np.concatenate(([0.0], np.cumsum(q[rest]))), 1.0)
    low = _majorant_min(coef, np.ascontiguousarray(p[exact], dtype=float), P, R)
    return max(0.0, math.fsum(p) - 1.0 - low)


def best_prefix(p: np.ndarray, model: DraftModel, order: np.ndarray) -> tuple[float, int]:
    """(1 + min over the prefixes T of ``order`` of p(T) - Q(T), the length of the first best
    prefix), Q from the model's one-pass prefix containments."""
    values = np.concatenate(([0.0], np.cumsum(p[order]) - model.prefix_pass(order)))
    k = int(np.argmin(values))
    return 1.0 + float(values[k]), k


def face_bound(p: np.ndarray, model: DraftModel, order: np.ndarray, length: int,
               work: int = MAJORANT_WORK) -> float | None:
    """A lower bound on α* for successive sampling from the face of the cut T = ``order[:length]``
    (all tokens where ``length`` is 0: a cut of value one).

    With S the other tokens, v the vertex of the order listing S first (``order`` reversed),
    c = q(S), :math:`Z` the successive sampling of n drafts from q restricted to T and renormalised,
    :math:`t_k` the k largest masses of T summed and

    .. math:: \\delta = \\prod_{k=1}^{n} \\frac{q(T) - t_{k-1}}{q(T) - t_{k-1} + c},

    α* is at least :math:`\\sum_{y \\in S} \\min(p_y, v_y) + p(T) - \\delta \\varepsilon`, with ε the
    :func:`hall_excess` of p/δ on T against Z. Against the cut's value
    :math:`1 + p(T) - Q(T) = v(S) + p(T)` the gap is :math:`\\sum_S (v - p)^+ + \\delta\\varepsilon`.
    Proof: papers/theory.md, "Successive sampling: lower bounds from majorants of the containment".

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : WithoutReplacement
    order : ndarray of int, shape (V,)
        The tokens by the exact ratio p/q increasing (checked by the caller).
    length : int
        The cut's length along ``order``.

    Returns
    -------
    float or None
        None where T holds fewer than n tokens of positive mass (no Z).
    """
    q, n = model.q, model.n
    cut = order[:length] if length > 0 else order
    in_cut = np.zeros(p.size, dtype=bool)
    in_cut[cut] = True
    qT = q[in_cut]
    if np.count_nonzero(qT) < n:
        return None
    side = 0.0
    if length > 0 and length < p.size:  # S first: its vertex entries are a base of g on S
        rest = ~in_cut
        side = math.fsum(np.minimum(p[rest], model_vertex(model, order[::-1])[rest]))
    total = math.fsum(qT)
    c = math.fsum(q[~in_cut])
    top = np.concatenate(([0.0], np.cumsum(np.sort(qT)[::-1][:n - 1])))
    delta = 1.0
    for t in top:
        left = max(total - t, 0.0)
        delta *= left / (left + c) if c > 0 else 1.0
    if not delta > 0.0:
        return None
    kept = order[in_cut[order]]  # T's tokens in the same order, renumbered
    index = np.full(p.size, -1, dtype=np.int64)
    index[np.flatnonzero(in_cut)] = np.arange(qT.size)
    eps = hall_excess(p[in_cut] / delta, qT / total, n, index[kept], work)
    return side + math.fsum(p[in_cut]) - delta * eps
