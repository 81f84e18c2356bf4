"""Lower bounds on α* for successive sampling from majorants of its containment, and the face
certificate built on them (papers/theory.md, "Successive sampling: lower bounds from majorants of
the containment").

Drafts without replacement are the first n tokens to ring among independent exponential clocks.
Letting some drawn tokens ring again (the partial-replacement model :math:`M_W`), or letting more
clocks ring before the n-th draft (the clock majorant Ψ), can only raise every containment Q(B),
and a majorant Q̂ ≥ Q gives :math:`\\alpha^* \\ge 1 + \\min_B [p(B) - \\hat Q(B)]`. Each majorant
here is convex in the mass of the tokens it does not resolve one by one, so its minimum is one over
prefixes in the order of p/q (per part C of W for :math:`M_W`). On the face of the prefix route's
cut (:func:`face_bound`, :func:`race_excess`) they prove α* where Wolfe's minimum-norm point creeps:
at α* = 1, and where α* falls short of one only by tokens the drafter almost never proposes.
"""

from __future__ import annotations

import math

import numpy as np

from .._budget import MAJORANT_EXACT, MAJORANT_WORK
from .._jit import njit
from .base import DraftModel
from .vertices import model_vertex

__all__ = ["partial_replacement_coefficients", "race_excess", "best_prefix", "face_bound", "exact_tokens",
           "MAJORANT_WORK", "MAJORANT_EXACT", "CHORD"]

@njit(cache=True)
def _path_table(qw, outside, n):
    """F[D, w]: the weight of the draw sequences of :math:`M_W` that take exactly the tokens D of W
    (a bit mask over ``qw``) and w draws from outside W, the latter without their factor r. The
    mass left after D is ``outside`` plus the masses of W not in D, a sum of non-negative terms
    (1 - q(D) would cancel where D holds nearly all the mass)."""
    m = qw.size
    full = 1 << m
    left = np.zeros(full)
    count = np.zeros(full, dtype=np.int64)
    left[full - 1] = outside
    for D in range(full - 2, -1, -1):
        for i in range(m):
            if not (D >> i) & 1:
                left[D] = left[D | (1 << i)] + qw[i]
                break
    for D in range(1, full):
        for i in range(m):
            if (D >> i) & 1:
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
            rest = left[D]
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


def partial_replacement_coefficients(qw: np.ndarray, n: int, outside: float | None = None) -> np.ndarray:
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
    outside : float, optional
        The mass outside W, 1 - q(W) (default: computed so); given, the masses left are summed
        from it and W's, never 1 minus a mass drawn.

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
    if outside is None:
        outside = max(0.0, 1.0 - math.fsum(qw))
    F, count = _path_table(qw, float(outside), int(n))
    return _zeta(F, count, int(n))


@njit(cache=True)
def _poly_and_slope(coef, C, r):
    """Row C of coef as a polynomial at r, and its derivative there (Horner's rule)."""
    degree = coef.shape[1] - 1
    value, slope = coef[C, degree], 0.0
    for w in range(degree - 1, -1, -1):
        slope = slope * r + value
        value = value * r + coef[C, w]
    return value, slope


@njit(cache=True)
def _small_min(coef, coef_z, pw, qw, P, R, s0, base, delta, scale, replacement):
    """min over the parts C of W with q(C) below s0 (all where s0 is inf) of p(C) plus the larger
    of two bounds, each the minimum over the prefixes j of the other tokens (masses P[j], R[j], R
    increasing) of P[j] - h(R[j]) for one majorant h of :func:`race_excess`: the
    partial-replacement polynomial (``coef``; only if ``replacement``) and, if delta > 0, base +
    delta times the polynomial of Z (``coef_z``) at R[j] / scale; each h up to r* = s0 - q(C) and
    its tangent at r* beyond. +inf if no part."""
    full, degree = coef.shape[0], coef.shape[1] - 1
    m = pw.size
    pad = (m + 2) * 2.0 ** -52  # q(C) summed in floating point: r* errs upward only
    Rz = R / scale
    best = np.inf
    pc = np.zeros(full)
    qc = np.zeros(full)
    for C in range(full):
        if C:
            for i in range(m):
                if (C >> i) & 1:
                    pc[C] = pc[C ^ (1 << i)] + pw[i]
                    qc[C] = qc[C ^ (1 << i)] + qw[i]
                    break
        rstar = s0 - qc[C] + pad * max(s0, qc[C])
        if not rstar > 0.0:
            continue
        split = np.searchsorted(R, rstar, side="right")  # R[j] <= r* below it
        first = np.inf if replacement else -np.inf
        second = np.inf if delta > 0.0 else -np.inf
        for j in range(split):
            a, b = coef[C, degree], coef_z[C, degree]
            r, rz = R[j], Rz[j]
            for w in range(degree - 1, -1, -1):
                a = a * r + coef[C, w]
                b = b * rz + coef_z[C, w]
            first = min(first, P[j] - a)
            second = min(second, P[j] - base - delta * b)
        if split < R.size:
            top, slope = _poly_and_slope(coef, C, rstar)
            top_z, slope_z = _poly_and_slope(coef_z, C, rstar / scale)
            slope_z /= scale
            for j in range(split, R.size):
                first = min(first, P[j] - top - slope * (R[j] - rstar))
                second = min(second, P[j] - base - delta * (top_z + slope_z * (R[j] - rstar)))
        best = min(best, pc[C] + max(first, second))
    return best


def _large_min(P, S, psi, chord, k):
    """min over the prefixes j of P[j] - h(S[j]), h the majorant Ψ from S[k] on (``psi``) and below
    S[k] the line through Ψ(S[k]) of slope ``chord[k]`` (at least 0), clipped at 0."""
    h = np.where(np.arange(P.size) >= k, psi, np.maximum(0.0, psi[k] + chord[k] * (S - S[k])))
    return float((P - h).min())


#: The chord that bounds the slope of Ψ at a threshold s0 from below spans this much mass (the
#: errors of the two values of Ψ, ~1e-15, grow by 2 / CHORD in the bound; 1e-4 and 1e-3 closed
#: the same rows of ``benchmarks/bench_wor_rows.py``).
CHORD = 1e-2


def exact_tokens(q: np.ndarray, n: int, others: int, work: int = MAJORANT_WORK) -> int:
    """The size m of W: the largest with :math:`2^m (J + 1)(n + 1)` cells within ``work``, J the
    tokens left outside W, at most :data:`MAJORANT_EXACT` and the tokens of positive mass."""
    live = int(np.count_nonzero(q > 0))
    m = 0
    while m < min(MAJORANT_EXACT, live) and (2 << m) * (max(others - m - 1, 0) + 1) * (n + 1) <= work:
        m += 1
    return m


def _contraction_factor(qT: np.ndarray, c: float, n: int) -> float:
    """δ of :func:`race_excess`: the least probability, over the draws of n tokens from T, that no
    token outside T (mass c) rings before them."""
    total = float(qT.sum())
    top = np.concatenate(([0.0], np.cumsum(np.sort(qT)[::-1][:n - 1])))
    delta = 1.0
    for t in top:
        left = max(total - t, 0.0)
        delta *= left / (left + c) if c > 0 else 1.0
    return delta


def race_excess(p: np.ndarray, q: np.ndarray, n: int, kept: np.ndarray, outside: float,
                work: int = MAJORANT_WORK, enough: float | None = None) -> float:
    """An ε ≥ 0 with :math:`p(A) \\le D(A) + \\varepsilon` for every A ⊆ T, where
    :math:`D(A) = Q(T) - Q(T \\setminus A)` is the contraction by S = Ω \\\\ T of the coverage of n
    drafts without replacement from q (with T = Ω the coverage itself: ε = 0 proves Hall's
    condition, acceptance one for a target of total one).

    Three majorants of Q(B), B ⊆ T, all from the exponential clocks of successive sampling:

    * :math:`\\Psi(q(B)) = E[e^{-q(\\Omega \\setminus B)\\, \\tau_n(T)}]`, :math:`\\tau_n(T)` the
      n-th ring of T's clocks (:func:`~mdtheory.models.containment.successive_outside_containment`),
      exact at B = T and tight near it;
    * the partial-replacement majorant :math:`Q_{M_W}(B)` (:func:`partial_replacement_coefficients`,
      W the m most likely tokens of T, :func:`exact_tokens`), tight for small B;
    * :math:`Q(T) - \\delta + \\delta\\, Q_{Z, M_W}(B)`, Z the successive sampling from q restricted
      to T and renormalised and

      .. math:: \\delta = \\prod_{k=1}^{n} \\frac{q(T) - t_{k-1}}{q(T) - t_{k-1} + c}

      (c = q(S), :math:`t_k` the k largest masses of T summed) the least probability that S rings
      after Z's n draws; good where S is heavy.

    The sets with q(B) at least a threshold s0 take Ψ; the others, by their part C of W, the better
    of the other two, each extended from r* = s0 - q(C) on by its tangent: every majorant is then
    convex in q(B) (or in q(B \\\\ W)), so each minimum of p(B) - h is one over prefixes in the order
    of p/q. s0 is the least prefix mass at which Ψ's class meets the cut's value, or infinite
    (papers/theory.md, "Successive sampling: lower bounds from majorants of the containment").

    Parameters
    ----------
    p, q : ndarray, shape (V,)
        The target's masses (any total) and the draft law (summing to one).
    n : int
    kept : ndarray of int
        T's tokens in the order of the exact ratio p/q increasing, at least n of positive mass.
    outside : float
        c = q(S).
    work : int
        :data:`MAJORANT_WORK`: the cells of each minimum over the parts of W.
    enough : float, optional
        Try the third majorant alone first (it needs no quadrature) and return its ε if it is at
        most this; None: all three at once.
    """
    from .containment import successive_outside_containment

    qT, pT = q[kept], p[kept]
    P = np.concatenate(([0.0], np.cumsum(pT)))
    others = np.flatnonzero(qT > 0)
    m = exact_tokens(qT, n, others.size, work)
    exact = np.argsort(-qT, kind="stable")[:m]
    inside = np.zeros(qT.size, dtype=bool)
    inside[exact] = True
    rest = others[~inside[others]]
    total, beyond = float(qT.sum()), float(qT[rest].sum())  # T, T outside W
    delta = _contraction_factor(qT, outside, n)
    parts = (partial_replacement_coefficients(qT[exact], n, outside + beyond),
             partial_replacement_coefficients(qT[exact] / total, n, beyond / total),
             np.ascontiguousarray(pT[exact], dtype=float), np.ascontiguousarray(qT[exact], dtype=float),
             np.concatenate(([0.0], np.cumsum(pT[rest]))), np.concatenate(([0.0], np.cumsum(qT[rest]))))
    if enough is not None and delta > 0.0:  # δ alone: ε = p(T) - δ - min_B [p(B) - δ Q_Z(B)]
        eps = max(0.0, P[-1] - _small_min(*parts, np.inf, -delta, delta, total, False))
        if eps <= enough:
            return eps
    S = np.concatenate(([0.0], np.cumsum(qT)))
    after = np.concatenate((np.cumsum(qT[::-1])[::-1], [0.0]))  # q of T after each prefix
    y = outside + after  # q(Ω \ B_j), summed without cancellation
    low = y + np.minimum(S, CHORD)  # at S[j] - CHORD (at 0 below CHORD)
    values = successive_outside_containment(qT, n, np.concatenate((y, low)))
    psi, left = values[:y.size], values[y.size:]
    chord = np.maximum(0.0, (psi - left) / np.maximum(np.minimum(S, CHORD), 1e-300))
    chord[S <= 0.0] = 0.0
    target = P[-1] - psi[-1]  # p(T) - Q(T)
    k_lo, k_hi = -1, P.size  # the least k whose class of Ψ meets the target (P.size: none)
    while k_hi - k_lo > 1:
        mid = (k_lo + k_hi) // 2
        if _large_min(P, S, psi, chord, mid) >= target:
            k_hi = mid
        else:
            k_lo = mid
    if k_hi == 0:
        return 0.0  # Ψ alone, every set in its class
    large, s0 = (_large_min(P, S, psi, chord, k_hi), S[k_hi]) if k_hi < P.size else (np.inf, np.inf)
    small = _small_min(*parts, s0, psi[-1] - delta, delta, total, True)
    return max(0.0, target - min(large, small))


def best_prefix(p: np.ndarray, model: DraftModel, order: np.ndarray) -> tuple[float, int]:
    """(1 + min over the prefixes T of ``order`` of p(T) - Q(T), the length of the first best
    prefix), Q from the model's one-pass prefix containments."""
    values = np.concatenate(([0.0], np.cumsum(p[order]) - model.prefix_pass(order)))
    k = int(np.argmin(values))
    return 1.0 + float(values[k]), k


def face_bound(p: np.ndarray, model: DraftModel, order: np.ndarray, length: int,
               work: int = MAJORANT_WORK, goal: float | None = None) -> float | None:
    """A lower bound on α* for successive sampling from the face of the cut T = ``order[:length]``
    (all tokens where ``length`` is 0: a cut of value one).

    With S the other tokens and v the vertex of the order listing S first (``order`` reversed),
    α* is at least :math:`\\sum_{y \\in S} \\min(p_y, v_y) + p(T) - \\varepsilon`, ε the
    :func:`race_excess` of p on T. Against the cut's value :math:`1 + p(T) - Q(T) = v(S) + p(T)`
    the gap is :math:`\\sum_S (v - p)^+ + \\varepsilon`. Proof: papers/theory.md, "Successive
    sampling: lower bounds from majorants of the containment".

    Parameters
    ----------
    p : ndarray, shape (V,)
    model : DraftModel
        Successive sampling (:attr:`~mdtheory.models.base.DraftModel.exponential_race`).
    order : ndarray of int, shape (V,)
        The tokens by the exact ratio p/q increasing (checked by the caller).
    length : int
        The cut's length along ``order``.
    work : int
        :data:`MAJORANT_WORK`.
    goal : float, optional
        A bound at least this is enough: the excess's cheapest majorant is tried alone first
        (``race_excess``'s ``enough``).

    Returns
    -------
    float or None
        None where T holds fewer than n tokens of positive mass.
    """
    q, n = model.q, model.n
    cut = order[:length] if length > 0 else order
    in_cut = np.zeros(p.size, dtype=bool)
    in_cut[cut] = True
    if np.count_nonzero(q[in_cut]) < n:
        return None
    side = 0.0
    if length > 0 and length < p.size:  # S first: its vertex entries are a base of g on S
        rest = ~in_cut
        side = float(np.minimum(p[rest], model_vertex(model, order[::-1])[rest]).sum())
    head = side + float(p[in_cut].sum())
    kept = order[in_cut[order]]  # T's tokens in the same order
    eps = race_excess(p, q, n, kept, float(q[~in_cut].sum()), work,
                      None if goal is None else head - goal)
    return head - eps
