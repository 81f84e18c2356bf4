"""Wolfe's minimum-norm point over the coverage polytope: α* with a certificate, and an exact
optimal rule, for independent drafts and every model with exact prefix containments (``mnp``).

For independent drafts, draft i has its own law :math:`q_i` and the drafts are independent, so the
containment is
:math:`Q(T) = \\prod_i q_i(T)` and

.. math:: \\alpha^* = 1 + \\min_{T \\subseteq \\Omega} f(T), \\qquad f(T) = p(T) - \\prod_{i=1}^n q_i(T).

**Submodularity.** :math:`h(T) = \\prod_i q_i(T)` is supermodular: the gain of a token a,
:math:`h(T + a) - h(T) = \\prod_i (q_i(T) + q_i(a)) - \\prod_i q_i(T)`, expands into products of the
non-negative, non-decreasing :math:`q_i(T)`, so it does not decrease as T grows. Hence f is
submodular, f(∅) = f(Ω) = 0, and α* is a submodular minimisation. Its certificate is a base of the
coverage polymatroid :math:`g(S) = 1 - h(\\Omega \\setminus S) = 1 - \\prod_i (1 - q_i(S))`
(papers/theory.md §5): every :math:`\\mu \\in B(g)` and every T satisfy

.. math:: \\sum_y \\min(p(y), \\mu(y)) \\le \\alpha^* \\le 1 + p(T) - Q(T),

and the two meet at an optimal pair (Edmonds' min-max theorem for :math:`B(f) = p - B(g)`).

**Method** (:func:`min_norm_base`): the Fujishige–Wolfe minimum-norm point of :math:`p - B(g)`,
i.e. :math:`\\min_{\\mu \\in B(g)} \\lVert \\mu - p \\rVert^2`, over the convex hull of the priority-order
vertices. A vertex for a linear objective is one sort and n cumulative sums
(:func:`~mdtheory.models.vertices.model_vertex`, O(V log V + nV)); the same sort gives the V + 1 level sets
of μ - p as candidate cuts, whose values
:math:`1 + p(T) - \\prod_i q_i(T)` are read off the same sums. The iteration stops as soon as the best
cut and :math:`\\sum_y \\min(p, \\mu)` meet within ``tol``: that pair is the certificate, checked
independently of how it was found. At the minimum-norm point μ* the cut :math:`\\{\\mu^* > p\\}` is
optimal (Fujishige's theorem), so the stopping rule is reached. Once the best cut settles, the run
moves to the face of B(g) that cut spans, where it closes far sooner (:func:`min_norm_base`, Notes).

**Rule** (:class:`~mdtheory.models.mixture.OrderMixture`): the base is kept as an explicit convex
combination of priority orders (Wolfe's corral), so "draw order k with probability λ_k, take the
highest-ranked drafted
token" has the exact marginal μ; one speculative step against μ keeps the output law p and accepts
with :math:`\\sum_y \\min(p, \\mu) = \\alpha^*` (up to ``tol``). Why not time schedules:
:func:`~mdtheory.rules.uniform_time.uniform_time_bound` (papers/theory.md) bounds what uniform-time
schedules reach; in general not the optimum.

**Other draft models.** Nothing above uses the product form except the speed of a vertex: every
draft model whose containments of the V prefixes of an order are exact
(:meth:`~mdtheory.models.base.DraftModel.prefix_containment`) has the same polytope, vertices and
certificate. :func:`suffix_containments` takes the product for independent drafts and the model's
one-pass prefix containments otherwise (successive sampling: :mod:`mdtheory.models.containment`), so the
route ``"mnp"`` certifies α* and the order mixture is an exact optimal rule for successive sampling
and conditional Poisson too, with no enumeration of draft sets (at V = 1000, n = 4, the base in
15 ms – 0.75 s of CPU for successive sampling, whose vertex is one quadrature pass, and 7 – 90 ms for
conditional Poisson, on the pairs of ``benchmarks/bench_draft_models.py --prep --seeds 2``).

References
----------
P. Wolfe, "Finding the nearest point in a polytope", Math. Programming 11 (1976); S. Fujishige,
"Submodular Functions and Optimization" (2005), §7.1 (min-norm base); Fujishige, Hayashi, Isotani,
"The minimum-norm-point algorithm applied to submodular function minimization" (2006). Khisti et
al., ICLR 2025, Thm 1 (canonical decomposition: importance sampling then one speculative step).
Hu et al., ICLR 2025, Thm 1 (the subset formula for α*).
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from .._budget import MNP_FIRST_ROWS, MNP_MAX_ITER, mnp_corral_cap
from .._jit import njit
from ..errors import InvalidInputError, OptimalityGapError
from ..models.base import DraftModel
from ..models.independent import Independent  # noqa: F401 (Independent: the doctests)
from ..models.vertices import _scan, model_vertex
from .proofs import PriorityOrders, RouteOutput

__all__ = ["min_norm_base", "MinNormBase", "mnp_route", "MNP_TOL", "MNP_ACCEPT", "MNP_MAX_ITER"]

#: The certificate's default target: best cut minus :math:`\\sum \\min(p, \\mu)`.
MNP_TOL = 1e-12
#: A run that stalls (Wolfe's optimality test passes in floating point) is accepted with a gap up to
#: this; above it the method raises.
MNP_ACCEPT = 1e-9
#: Corral weights at or below this leave the corral.
_DROP = 1e-15
#: Squared norm of the corral's point, relative to its vertices' largest, below which the affine
#: minimum moves from the Gram matrix's Cholesky factor (accurate to ~sqrt(ε) of the vertices'
#: scale) to least squares on the vertices (:meth:`_Wolfe._affine`).
_GRAM_FLOOR = 1e-12
#: The least-squares affine minimum's factorisation costs V K² to build (then V K a vertex added or
#: dropped): above this work none is built (the Gram route stays), one already kept goes on.
_LSTSQ_WORK = 2e7


class MinNormBase(NamedTuple):
    """A base of B(g) as a mixture of priority orders, with its best cut.

    Attributes
    ----------
    mu : ndarray, shape (V,)
        :math:`\\sum_k \\lambda_k v_k`, the vertices' exact mixture.
    orders : ndarray of int, shape (K, V)
        Priority orders, highest priority first.
    weights : ndarray, shape (K,)
        λ, positive, summing to one.
    cut : ndarray of int
        The best level set of μ - p found: :math:`1 + p(T) - Q(T)` is ``upper``.
    lower, upper : float
        :math:`\\sum_y \\min(p, \\mu)` and the cut's value; α* lies between them.
    iterations : int
        Major iterations (vertices added).
    vertices : ndarray, shape (K, V)
        The orders' vertices (:func:`~mdtheory.models.vertices.model_vertex`, the same numbers), for
        :class:`~mdtheory.models.mixture.OrderMixture`.
    """

    mu: np.ndarray
    orders: np.ndarray
    weights: np.ndarray
    cut: np.ndarray
    lower: float
    upper: float
    iterations: int
    vertices: np.ndarray


@njit(cache=True)
def _row_dot(L, i, y):
    """:math:`\\sum_{c < i} L_{ic} y_c` in four partial sums (1.5 times faster at i = 339 than one)."""
    a0 = a1 = a2 = a3 = 0.0
    top = i - i % 4
    for c in range(0, top, 4):
        a0 += L[i, c] * y[c]
        a1 += L[i, c + 1] * y[c + 1]
        a2 += L[i, c + 2] * y[c + 2]
        a3 += L[i, c + 3] * y[c + 3]
    for c in range(top, i):
        a0 += L[i, c] * y[c]
    return (a0 + a1) + (a2 + a3)


@njit(cache=True)
def _forward(L, b, K):
    """Solve L y = b for the leading K-by-K lower triangle of L."""
    y = b.copy()
    for i in range(K):
        y[i] = (y[i] - _row_dot(L, i, y)) / L[i, i]
    return y


@njit(cache=True)
def _forward_ones(L, y, done, K):
    """Solve L y = 1 in place for the leading K-by-K lower triangle of L, given its first ``done``
    entries (solved while L's first ``done`` rows were as now): the same numbers as
    ``_forward(L, np.ones(K), K)``, O(K (K - done))."""
    for i in range(done, K):
        y[i] = (1.0 - _row_dot(L, i, y)) / L[i, i]


@njit(cache=True)
def _backward(L, y, K):
    """Solve L^T x = y for the leading K-by-K lower triangle of L: by columns of L^T, i.e. rows of
    L (contiguous: 7 times faster at K = 339 than the dot products down L's columns)."""
    x = y.copy()
    for i in range(K - 1, -1, -1):
        xi = x[i] / L[i, i]
        x[i] = xi
        for r in range(i):
            x[r] -= L[i, r] * xi
    return x


@njit(cache=True)
def _chol_delete(L, K, j):
    """Remove row and column j from the K-by-K lower Cholesky factor L in place, keeping the order:
    the rows below shift up and their trailing block takes the rank-one update by the removed
    column (:math:`L_{22}' L_{22}'^T = L_{22} L_{22}^T + x x^T`), O(K²)."""
    n = K - 1
    x = L[j + 1:K, j].copy()
    for i in range(j, n):
        for c in range(j):
            L[i, c] = L[i + 1, c]
        for c in range(j, i + 1):
            L[i, c] = L[i + 1, c + 1]
    for k in range(j, n):
        lkk, xk = L[k, k], x[k - j]
        r = math.sqrt(lkk * lkk + xk * xk)
        c, s = r / lkk, xk / lkk
        L[k, k] = r
        for i in range(k + 1, n):
            L[i, k] = (L[i, k] + s * x[i - j]) / c
            x[i - j] = c * x[i - j] - s * L[i, k]


@njit(cache=True)
def _extend_factor(L, G, K):
    """Extend the lower Cholesky factor L of G + 1 1ᵀ (first K vertices) by vertex K's row of G:
    False (L untouched) if the Schur complement is too small, i.e. not clearly definite."""
    ell = np.empty(K)
    for i in range(K):
        ell[i] = G[K, i] + 1.0
    ell = _forward(L, ell, K)
    d = G[K, K] + 1.0
    for i in range(K):
        d -= ell[i] * ell[i]
    if not d > 1e-13 * (G[K, K] + 1.0):
        return False
    for i in range(K):
        L[K, i] = ell[i]
    L[K, K] = math.sqrt(d)
    return True


@njit(cache=True)
def _insert_vertex(L, G, S, R, orders, slot, K, v, raw, order, row, vv, chol):
    """Store vertex v (``raw`` unscaled, of ``order``) as corral vertex K, ``row`` its inner
    products with the corral, ``vv`` its own; extend the factor if ``chol``. -1 (nothing stored)
    if it equals a corral vertex (:math:`\\lVert s_i - v \\rVert^2 \\le 0` in rounding), else
    whether the factor is still definite."""
    for i in range(K):
        if G[i, i] - 2.0 * row[i] + vv <= 0.0:
            return -1
    S[K], R[K], orders[K], slot[K] = v, raw, order, K
    for i in range(K):
        G[K, i] = G[i, K] = row[i]
    G[K, K] = vv
    return 1 if chol and _extend_factor(L, G, K) else 0


@njit(cache=True)
def _vertex_and_gradient(H, order, p, sw, x):
    """The vertex of ``order`` from its suffix containments H
    (:func:`~mdtheory.models.vertices.model_vertex`) and, scaled, minus p (``v``, its squared norm and its
    inner product with x)."""
    raw, v = np.empty(order.size), np.empty(order.size)
    for k in range(order.size):
        raw[order[k]] = max(H[k] - H[k + 1], 0.0)
    vv = xv = 0.0
    for y in range(order.size):
        v[y] = (raw[y] - p[y]) * sw[y]
        vv += v[y] * v[y]
        xv += x[y] * v[y]
    return raw, v, vv, xv


@njit(cache=True)
def _qr_delete(Qt, R, K, j):
    """Remove column j of the thin factorisation :math:`B = Q R` of K columns in place (Q stored by
    rows: ``Qt[i]`` is its column i): R's later columns shift left and Givens rotations of rows
    (k, k + 1), applied to Q's columns too, restore the triangle, O(K² + V K)."""
    for c in range(j, K - 1):
        for i in range(c + 2):
            R[i, c] = R[i, c + 1]
    for k in range(j, K - 1):
        a, b = R[k, k], R[k + 1, k]
        r = math.hypot(a, b)
        if r == 0.0:
            continue
        c, s = a / r, b / r
        for col in range(k, K - 1):
            u, w = R[k, col], R[k + 1, col]
            R[k, col], R[k + 1, col] = c * u + s * w, c * w - s * u
        R[k + 1, k] = 0.0
        for i in range(Qt.shape[1]):
            u, w = Qt[k, i], Qt[k + 1, i]
            Qt[k, i], Qt[k + 1, i] = c * u + s * w, c * w - s * u


@njit(cache=True)
def _drop_vertex(L, G, S, R, orders, slot, K, j, chol):
    """Corral vertex j of K leaves: G keeps its order, and so does the factor L if ``chol`` (by
    :func:`_chol_delete`; else the caller refactors); its storage row takes the last row's."""
    r, last = slot[j], K - 1
    if r != last:  # storage stays rows 0..K-2
        S[r], R[r], orders[r] = S[last], R[last], orders[last]
        for i in range(K):
            if slot[i] == last:
                slot[i] = r
    for i in range(j, K - 1):
        slot[i] = slot[i + 1]
        for c in range(K):
            G[i, c] = G[i + 1, c]
    for i in range(K - 1):
        for c in range(j, K - 1):
            G[i, c] = G[i, c + 1]
    if chol:
        _chol_delete(L, K, j)


@njit(cache=True)
def _minor_chol(L, G, S, R, orders, slot, lam, K, drop, y, done):
    """:meth:`_Wolfe._minor` while the factor L of G + 1 1ᵀ is definite, in one call: (K, λ, the
    entries of :math:`y = L^{-1} \\mathbf{1}` still valid). ``y`` keeps that solve between calls: its
    first ``done`` entries are valid while L's first ``done`` rows stay (an added vertex appends a
    row; a drop at j changes the rows from j), so a minor cycle without drops solves one row."""
    for _ in range(K + 1):  # each pass drops at least one vertex or ends
        _forward_ones(L, y, done, K)
        done = K
        beta = _backward(L, y[:K], K)
        total = 0.0
        for i in range(K):
            total += beta[i]
        alpha = beta / total
        theta, blocked = 1.0, False
        for i in range(K):
            if not alpha[i] > drop:
                blocked = True
                if lam[i] > alpha[i]:  # only a falling weight limits the step (no 0 / 0)
                    theta = min(theta, lam[i] / (lam[i] - alpha[i]))
        if not blocked:
            lam = alpha
            break
        lam = (1 - theta) * lam + theta * alpha
        for j in range(K - 1, -1, -1):
            if not lam[j] > drop:
                _drop_vertex(L, G, S, R, orders, slot, K, j, True)
                K -= 1
                done = min(done, j)
        lam = lam[lam > drop]
    total = 0.0
    for i in range(K):
        total += lam[i]
    return K, lam / total, done


@njit(cache=True)
def _backsolve_upper(R, b, K):
    """Solve R x = b for the leading K-by-K upper triangle of R."""
    x = b.copy()
    for i in range(K - 1, -1, -1):
        acc = x[i]
        for c in range(i + 1, K):
            acc -= R[i, c] * x[c]
        x[i] = acc / R[i, i]
    return x


def _full_rank(diagonal: np.ndarray, norms: np.ndarray) -> bool:
    """Whether QR's diagonal is clearly nonzero against its columns' norms (the SVD route's rank
    cut is :math:`\\epsilon \\max(V, K)` of the largest singular value)."""
    return bool(np.all(diagonal > 1e-12 * norms))


def _affine_min(G: np.ndarray) -> np.ndarray:
    """Weights α (summing to one) of the point of the corral's affine hull nearest the origin, from
    the corral's Gram matrix G."""
    k = G.shape[0]
    M = np.empty((k + 1, k + 1))
    M[:k, :k] = G
    M[:k, k] = M[k, :k] = 1.0
    M[k, k] = 0.0
    rhs = np.zeros(k + 1)
    rhs[k] = 1.0
    try:
        sol = np.linalg.solve(M, rhs)
    except np.linalg.LinAlgError:
        sol = np.linalg.lstsq(M, rhs, rcond=None)[0]
    return sol[:k]


def min_norm_base(p: np.ndarray, model: DraftModel, *, tol: float = MNP_TOL,
                  max_iter: int = MNP_MAX_ITER, weights=None, strict: bool = True,
                  deadline: float | None = None) -> MinNormBase:
    """Minimise :math:`\\lVert \\mu - p \\rVert^2` over :math:`\\mu \\in B(g)` by Wolfe's algorithm, until
    the best level-set cut and :math:`\\sum_y \\min(p, \\mu)` meet within ``tol``.

    .. math:: g(S) = 1 - Q(\\Omega \\setminus S) \\quad
              \\big(= 1 - \\prod_{i=1}^n (1 - q_i(S)) \\text{ for independent drafts}\\big).

    Parameters
    ----------
    p : ndarray, shape (V,)
        Target distribution.
    model : DraftModel
        Independent drafts (product containments, O(nV) per vertex), or any model with exact
        prefix containments (:meth:`~mdtheory.models.base.DraftModel.prefix_containment`; successive
        sampling: one pass of its quadrature per vertex).
    tol : float
        Stop when upper - lower <= tol.
    max_iter : int
        Major iterations at most.
    deadline : float, optional
        A :func:`time.perf_counter` reading after which no further piece of iterations starts (the
        run then ends as at its cap, with its proven bounds).
    weights : array_like, shape (V,), optional
        Positive w: minimise :math:`\\sum_y w_y (\\mu_y - p_y)^2` instead (for any positive
        weights the cut :math:`\\{\\mu > p\\}` of the minimiser is optimal; ``1 / p`` gives the
        lexicographically optimal base, faster on flat pairs and slower on peaked ones). Default:
        all ones.
    strict : bool
        Raise when the bounds do not meet (default). False: return the run with the smallest gap
        whatever it is: ``upper`` is its cut's value, and the mixture of ``orders`` is a base whose
        :math:`\\sum \\min(p, \\mu)` bounds α* below (the optimal rule's fallback,
        ``make_rule("optimal", ...)``).

    Returns
    -------
    MinNormBase

    Raises
    ------
    OptimalityGapError
        ``strict`` and the bounds did not meet within :data:`MNP_ACCEPT` (``tol`` if larger) in
        ``max_iter`` iterations per norm; it carries them (``lower`` from the order mixture's
        recomputed marginal, as :class:`~mdtheory.models.mixture.OrderMixture` gives it).

    Notes
    -----
    Each major iteration: one sort of μ - p, the vertex (n suffix sums), the V + 1 cut values
    along the same order, then Wolfe's minor cycle on the corral (a (K+1)-square solve, K the corral
    size). The vertex weights are kept, so the result is a sampling rule whatever the stopping point.
    Start: the vertex of the order p - q̄ decreasing (q̄ the mean draft law).

    **Two phases.** Wolfe's gap falls fast and then creeps (thousands of iterations on peaked
    pairs at V = 1000), while the best cut settles early. So the free run stops once its best cut
    T has not improved for :data:`PATIENCE` iterations, and a second run works on the face of
    B(g) where :math:`S = \\Omega \\setminus T` comes first (orders sorted by (token in T,
    gradient); :math:`\\mu(S) = g(S)` on the face). If T is optimal the face holds an optimal base:
    for any optimal base μ*, :math:`\\alpha^* = \\sum \\min(p, \\mu^*) \\le \\mu^*(S) + p(T) \\le g(S) + p(T)
    = 1 + p(T) - Q(T) = \\alpha^*`, so :math:`\\mu^*(S) = g(S)`. The face is the product of the
    restriction to S and the contraction by S, smaller problems that close in tens to hundreds of
    iterations. A face run starts from the orders of the run whose cut it is, each re-sorted
    stably onto the face (their mixture is a point of the face, near the free run's point). If the
    face run finds a better cut that then holds for :data:`SWITCH` iterations, it moves to that
    cut's face, started from its own orders.
    If the face does not close in its budget (:data:`FACE_ITER`, or the free run's iterations so
    far if more) the free run resumes with doubled patience; the next face uses the best cut of
    both runs, and resumes the previous face if the cut is the same. Any point of the face is a
    base of B(g), so the certificate does not depend on T being right. A best cut of ∅ or Ω
    (value 1: α* = 1 or no better cut yet) spans all of B(g): no face run then, the free run goes
    on (a face run there would repeat the free run).

    **Linear algebra.** The affine minimum of a corral of K vertices is
    :math:`\\alpha \\propto (G + \\mathbf{1}\\mathbf{1}^T)^{-1}\\mathbf{1}` (G the Gram matrix of the
    vertices minus p; the bordered matrix is positive definite while they are affinely
    independent), from a Cholesky factor extended by one row per new vertex and downdated by a
    rank-one update per dropped vertex: O(K²) per step instead of a fresh O(K³) solve, and the
    corral's rows stay in place (a drop moves one row); while the factor is definite a whole
    minor cycle (solves, ratio test, drops) is one compiled call (:func:`_minor_chol`). A vertex
    that leaves the factor indefinite falls back to the bordered solve until the next drop. The
    Gram route squares the condition number, so its point is accurate only to about
    :math:`\\sqrt{\\epsilon}` of the vertices' scale: near α* = 1 (minimum-norm point ~0) it
    stalled with gaps of 1e-9. Once the
    point's squared norm falls below :data:`_GRAM_FLOOR` of the vertices', or on a stall, the run
    switches for good to least squares on the vertices themselves (:meth:`_Wolfe._affine`, error
    ~ε·cond; a QR factorisation of the bordered vertices kept by Gram–Schmidt and Givens
    updates, O(V K) a vertex), while K is within :data:`_LSTSQ_WORK` (V K²); larger corrals keep
    the Gram route (a refinement of its solve by residuals from the vertices did not close the
    gaps). Each major iteration must decrease the norm; when rounding stops it in that mode too,
    the run reports a stall (the gap it reached is accepted up to :data:`MNP_ACCEPT`).

    **Norms, raced.** Wolfe's iteration count depends heavily on the norm, in opposite ways on
    different pairs: the plain norm is fast on peaked pairs and can creep for thousands of
    iterations where tokens of tiny probability matter; the norm weighted by
    :math:`1 / (p + \\bar q)` resolves those (independent drafts, V = 465, α* = 1: the plain run
    creeps to a gap of 2.4e-8 in 10,000 iterations, the weighted one closes in about 6,800) and is
    slow elsewhere (one llm pair, conditional Poisson: 7,360 iterations against the plain norm's
    69). So both runs (:data:`RACE`) advance in turns of :data:`PIECE` iterations, always the one
    with fewer, the weighted one alone for its first :data:`HEAD` (it wins on most pairs), or
    :data:`HEAD_TRIVIAL` while no cut below 1 is known (α* = 1 or nearly: μ must be p, and the
    weighted norm took 2.8 – 5.4 times fewer iterations on the five softmax T = 2 pairs of all
    three models measured), until one closes. On the 20 ``prep_pairs`` of two seeds
    (``benchmarks/bench_draft_models.py --prep``), independent drafts and conditional Poisson:
    13,807 iterations in all for the plain norm alone, 5,222 raced evenly with no head start,
    3,507 with both (3,546 with a head of 200, 3,730 of 50); successive sampling, its 10 pairs:
    2,876 (2,698 with the α* = 1 head start only, 3,005 with a head of 200). Any positive
    weights are sound: the cut :math:`\\{\\mu > p\\}` of the weighted minimiser is optimal, and
    the certificate does not depend on the norm. For Hu et al.'s greedy set q̄ (the first
    draft's law) is a point mass on the top token, so the weights say nothing of the drafts, and
    the plain norm leads (the 10 ``prep_pairs`` and a Dirichlet(0.5) pair at V = 1000, n = 4: 104
    iterations in all for the plain norm, 519 for the weighted one, 508 raced with it leading).
    A run that ends (a stall, its cap) with a gap within :data:`MNP_ACCEPT` ends the race (the
    plain run alone stopped there too). If none closes, the smallest gap is kept.

    **A third norm, for α* = 1 on long tails.** The certificate's gap is an L1 deficit,
    :math:`\\sum_y (p_y - \\mu_y)^+`, and by Cauchy–Schwarz
    :math:`\\big(\\sum_y |\\mu_y - p_y|\\big)^2 \\le \\sum_y (\\mu_y - p_y)^2 / (p_y + c)
    \\cdot (1 + V c)`: the norm weighted by :math:`1 / (p + c)` (c = :data:`CHI2_FLOOR` times
    ``tol``) bounds the deficit directly, token by token at the scale of its own mass. It is raced
    third, evenly, while no cut below 1 is known (α* = 1 or within ``tol`` of it), and no longer
    advanced once one is. On next-token laws of the char-LSTM (V = 465; target at temperature 0.7,
    the same network at 1.0 drafting two tokens without replacement: α* = 1 on all 27 rows, most of
    the target's masses under 1e-12) the two norms above took 42,360 iterations in all (up to 19,200
    on a row; two rows stopped at gaps of 2.6e-11 and 6.5e-12, above ``tol``), the three 23,326 (up
    to 13,305, every row closed to ``tol``); rows of the quantized and hotter (1.3) tempered
    drafters (α* = 1 too) took 10% and 9% more, rows of an n-gram drafter (α* < 1) and the 30
    ``prep_pairs`` of two seeds, n = 4, the same iterations as before
    (``benchmarks/bench_mnp_lm_rows.py``).

    **Known failure** (open): where p is one of the drafts' laws, or near one (α* = 1, p close
    to the boundary of B(g) wherever the other drafts put little mass), the corral must reach
    about V vertices and Wolfe's method creeps: draft 1's law p and another Dirichlet(0.3) draft
    close in 700 – 1,750 iterations at V = 30, up to 8,300 at V = 40, and leave gaps of 1e-8 –
    1e-5 after 10,000 per norm from V = 60 (no norm tried closes them; 100,000 plain iterations
    at V = 200 reach 4e-8). For n = 2 the law q_1 is exactly the marginal of Plackett–Luce
    random orders with weights q_1 / q_2 (all V! orders), so no small corral holds it. Such runs
    raise, or (``strict=False``) return their proven bounds.

    Examples
    --------
    >>> b = min_norm_base(np.array([0.5, 0.5]), Independent([[1.0, 0.0], [0.0, 1.0]]))
    >>> round(b.lower, 12), round(b.upper, 12)
    (1.0, 1.0)
    """
    p = np.asarray(p, dtype=float)
    qbar = model.qs.mean(axis=0) if model.qs is not None else model.first_draft_law()
    race = RACE[::-1] if model.fixed_top else RACE  # q̄ a point mass: the plain norm leads
    norms = [weights] if weights is not None else \
        [None if a == 0 else (p + qbar + 1e-300) ** -a for a in race] + [1.0 / (p + CHI2_FLOOR * tol)]
    best, done = _race([_phases(p, model, qbar, tol, max_iter, w) for w in norms], tol, max_iter,
                       HEAD, HEAD_TRIVIAL, accept=max(tol, MNP_ACCEPT), deadline=deadline,
                       trivial_only=(2,))
    base = best.result(done)
    if strict and not base.upper - base.lower <= max(tol, MNP_ACCEPT):
        lower = float(np.minimum(p, base.weights @ base.vertices).sum())  # OrderMixture's marginal
        raise OptimalityGapError(
            f"the minimum-norm-point method left a gap of {base.upper - lower:.3g} after {done} "
            f"iterations (tolerance {max(tol, MNP_ACCEPT):g}): alpha* is proven in "
            f"[{lower:.12g}, {base.upper:.12g}] (its order mixture, its cut)", lower, base.upper)
    return base


def _gap(run) -> float:
    return run.upper - run.lower


def _race(runs, tol, max_iter, head=0, trivial_head=0, accept=None, deadline=None,
          trivial_only=()):
    """Advance the generators ``runs`` (:func:`_phases`) in turn, always the one with the fewest
    iterations (the first given ``head`` iterations alone, ``trivial_head`` while no cut below 1
    is known; the runs ``trivial_only`` only while no cut below 1 is known), until one closes
    within ``tol``, one ends (a stall or its cap) with a gap within ``accept`` (default ``tol``),
    or all end: (the run with the smallest gap, the iterations of all)."""
    accept = tol if accept is None else accept
    state = [next(r) for r in runs]  # (best run so far, iterations) of each
    live = set(range(len(runs)))
    for _ in range(len(runs) * (max_iter + 2)):  # a step ends a generator or runs iterations
        if not live or any(_gap(best) <= (tol if j in live else accept)
                           for j, (best, _) in enumerate(state)):
            break
        if deadline is not None and time.perf_counter() > deadline:
            break
        trivial = min(best.upper for best, _ in state) >= 1.0 - tol
        lead = trivial_head if trivial else head
        pool = live if trivial else (live - set(trivial_only)) or live
        i = min(pool, key=lambda j: state[j][1] - (lead if j == 0 else 0))
        step = next(runs[i], None)
        if step is None:
            live.discard(i)
        else:
            state[i] = step
    return min((best for best, _ in state), key=_gap), sum(done for _, done in state)


def _phases(p, model, qbar, tol, max_iter, weights):
    """The free and face runs of :func:`min_norm_base` in the norm weighted by ``weights`` (None:
    all ones), a generator: after each run, (the run with the smallest gap so far, the iterations
    spent)."""
    sw = np.ones(p.size) if weights is None else np.sqrt(np.asarray(weights, float))
    free = _Wolfe(p, model, sw, np.argsort(qbar - p, kind="stable"))  # under-drafted first
    best, face, done, spent, patience = free, None, 0, 0, PATIENCE
    yield best, done
    for _ in range(max_iter):  # every pass runs at least one iteration
        for ran in _drive(free, tol, max_iter - done, patience):
            done += ran
            spent += ran
            best = free if free.upper - free.lower <= best.upper - best.lower else best
            yield best, done
        if free.closed or done >= max_iter:
            break
        # the cut has settled: its complement comes first on the face of B(g) it spans
        source = free if face is None or free.upper <= face.upper else face
        if source.cut.size in (0, p.size):  # ∅ or Ω: the face is all of B(g), the free run's own
            if free.stalled:
                break
            patience *= 2
            continue
        for _ in range(max_iter):  # a face run that finds a better cut moves to that cut's face
            if face is None or not np.array_equal(face.face_cut, source.cut):
                if best is face:  # the face it replaces keeps only its result
                    best = face.frozen()
                face = _face(p, model, sw, qbar, source)
            source = None  # (an earlier face it started from is released)
            for ran in _drive(face, tol, min(max(FACE_ITER, spent), max_iter - done), None):
                done += ran  # (a face is resumed while its cut stays the same)
                best = face if face.upper - face.lower <= best.upper - best.lower else best
                yield best, done
            if face.closed or face.stalled or done >= max_iter or \
                    not face.upper < face.face_value - tol:
                break
            source = face
        if face.closed or (free.stalled and face.stalled) or done >= max_iter:
            break
        patience *= 2  # the cut was not optimal (or the face needs longer): resume the free run


def _gradient_order(g: np.ndarray, late=None) -> np.ndarray:
    """The tokens by increasing g, ties by index (``np.argsort(g, kind="stable")``), or with ``late``
    (0/1) by (late, g, index) (``np.lexsort((g, late))``). Without ties in g the order is unique, so
    the faster unstable sort finds it (half the time at V = 1000: the gradients measured had none);
    with ties the stable sort decides them."""
    order = np.argsort(g)
    gs = g[order]
    if np.any(gs[1:] == gs[:-1]):
        return np.argsort(g, kind="stable") if late is None else np.lexsort((g, late))
    if late is None:
        return order
    first = late[order] == 0  # a stable partition keeps the order within each part
    return np.concatenate([order[first], order[~first]])


def _drive(run, tol, quota, patience):
    """``run.run`` for up to ``quota`` iterations in pieces of at most :data:`PIECE` (a generator
    of the iterations of each piece), until it stops for its own reason (:meth:`_Wolfe.run`)."""
    used = 0
    for _ in range(quota):
        run.run(tol, min(PIECE, quota - used), patience, resume=used > 0)
        used += run.iterations_run
        yield run.iterations_run
        if run.stopped or used >= quota:
            return


def _face(p, model, sw, qbar, source) -> _Wolfe:
    """A Wolfe run on the face of ``source``'s best cut (its complement first), started from
    ``source``'s orders re-sorted onto the face."""
    late = np.zeros(p.size)
    late[source.cut] = 1.0
    face = _Wolfe(p, model, sw, np.lexsort((qbar - p, late)), late)
    face.face_cut, face.face_value = source.cut, source.upper
    rows = source.slot[:source.K]
    face.warm(source.orders[rows], source.lam, source.R[rows])
    return face


#: Corral rows a run stores at first (doubled as the corral grows, up to
#: :func:`mdtheory._budget.mnp_corral_cap`).
FIRST_ROWS = MNP_FIRST_ROWS
#: A face run moves to the face of a better cut it found once that cut has held this many iterations
#: (each move evaluates one vertex per order it starts from).
SWITCH = 25

#: Free Wolfe iterations without a better cut before the face of that cut is tried (doubles each time).
PATIENCE = 25
#: Wolfe iterations on a cut's face per attempt, at least (and at least as many as the free run has
#: had, so neither run starves the other); a face is resumed while the cut stays the same.
FACE_ITER = 200
#: The norms raced by :func:`min_norm_base`: weights (p + q̄)^-a for each a (0: plain).
RACE = (1.0, 0.0)
#: The third norm raced: weights 1 / (p + c), c this times ``tol`` (:func:`min_norm_base`, Notes).
CHI2_FLOOR = 1e-3
#: Iterations the first norm of :data:`RACE` runs alone before the race.
HEAD = 100
#: The same while no cut of value below 1 is known (α* = 1 or close: μ must be p, where the weighted
#: norm took 2.8 - 5.4 times fewer iterations on the prep pairs measured).
HEAD_TRIVIAL = 800
#: Iterations of one norm before the race looks at the others (:func:`_race`).
PIECE = 25


class _Wolfe:
    """Wolfe's minimum-norm-point iteration on B(g) (or, with ``late``, on the face where the tokens
    with late = 0 come first: the orders sort by (late, gradient)), resumable, with the best cut seen.

    State: the corral's vertices S (minus p, scaled by ``sw``), their orders, Gram matrix G and
    weights; ``closed`` once the best cut and :math:`\\sum \\min(p, \\mu)` meet within the tolerance.
    """

    def __init__(self, p, model, sw, order, late=None):
        self.p, self.model, self.sw, self.late = p, model, sw, late
        # a corral is affinely independent (at most V + 1 vertices); its storage grows by doubling
        # up to a cap (:func:`mdtheory._budget.mnp_corral_cap`, the ceiling of the route's memory estimate)
        self.cap = mnp_corral_cap(p.size)
        rows = min(self.cap, FIRST_ROWS)
        self.S, self.orders = np.empty((rows, p.size)), np.empty((rows, p.size), np.int64)
        self.R = np.empty((rows, p.size))  # the vertices themselves (S: minus p, scaled)
        self.G = np.empty((rows, rows))
        self.R[0] = model_vertex(model, order)
        self.S[0], self.orders[0] = (self.R[0] - p) * sw, order
        self.G[0, 0] = self.S[0] @ self.S[0]
        self.L = np.empty((rows, rows))
        self.y, self.solved = np.empty(rows), 0  # L^{-1} 1, its first ``solved`` entries valid
        self.accurate = False  # True: affine minima by least squares on the vertices (_affine)
        self.qr = None  # (Qt, R, c) of that route (_qr_build), None while not built or rank deficient
        self.slot = np.arange(rows)  # the storage row (of S, orders) of each corral vertex
        self._factor(1)
        self.K, self.lam, self.x = 1, np.array([1.0]), self.S[0].copy()
        self.upper, self.cut, self.lower = 1.0, np.zeros(0, np.int64), -np.inf  # T = ∅: α* <= 1
        self.closed, self.stalled, self.iterations_run = False, False, 0
        self.since, self.stopped = 0, False
        self.face_cut = None  # the cut whose face this run works on (None: all of B(g))
        self.face_value = -np.inf  # that cut's value

    def warm(self, orders, weights, vertices):
        """Start from a mixture of orders instead (each re-sorted stably by ``late`` onto the face;
        repeated orders merged), its point the mixture of their vertices (``vertices``, those of
        ``orders``, are reused for the orders the re-sort leaves as they are)."""
        rows, lam = {}, np.zeros(len(orders))
        self._grow(len(orders) + 1)  # (a face's cap is its source's: they always fit)
        for o, w, vertex in zip(orders, weights, vertices, strict=True):
            new = o[np.argsort(self.late[o], kind="stable")] if self.late is not None else o
            key = new.tobytes()
            if key not in rows:
                k = rows[key] = len(rows)
                self.R[k] = vertex if new is o or np.array_equal(new, o) else \
                    model_vertex(self.model, new)
                self.S[k], self.orders[k] = (self.R[k] - self.p) * self.sw, new
            lam[rows[key]] += w
        K = len(rows)
        self.G[:K, :K] = self.S[:K] @ self.S[:K].T
        self.slot[:K] = np.arange(K)
        self._factor(K)
        self.K, self.lam = K, lam[:K] / lam[:K].sum()
        self.x = self.lam @ self.S[:K]

    def run(self, tol, max_iter, patience, resume=False):
        """Up to ``max_iter`` iterations; stop when closed, or (``patience``) when the best cut has
        not improved by more than ``tol`` for that many iterations, or on a stall (Wolfe's
        optimality test passes in floating point: ``stalled``). ``stopped``: it ended for one of
        these reasons, not the budget; ``resume`` goes on counting the iterations since the last
        better cut (a run given in pieces, :func:`_drive`)."""
        p, sw = self.p, self.sw
        self.iterations_run, self.stopped = 0, True
        since = self.since if resume else 0
        for _ in range(max_iter):
            self.iterations_run += 1
            self.lower = float(np.minimum(p, self.x / sw + p).sum())
            g = self.x * sw  # the gradient: priority to the least covered (mu - p smallest)
            order = _gradient_order(g, self.late)
            H, values = _scan(self.model, p, order)
            k = int(np.argmin(values))  # T = the suffix of the order from position k
            since += 1
            self.since = since
            if values[k] < self.upper:
                since = self.since = 0 if values[k] < self.upper - tol else since
                self.upper, self.cut = float(values[k]), np.sort(order[k:])
            if self.upper - self.lower <= tol:
                self.closed = True
                return
            if patience is not None and since >= patience:
                return
            if self.upper < self.face_value - tol and since >= SWITCH:  # a better cut, settled
                return
            K = self.K
            if not self.accurate and self._lstsq_ok(K) and \
                    self.x @ self.x <= _GRAM_FLOOR * np.diagonal(self.G)[:K].max():
                self._refine()  # below the Gram route's resolution
            step = self._add(H, order)
            if step is None:  # the Gram route's point was not accurate enough: go on
                continue
            if not step:  # no progress possible: the caller reports the open gap
                self.stalled = True
                return
        self.stopped = False

    def _add(self, H, order):
        """Add the vertex of ``order`` (H its suffix containments) and run the minor cycle: True on
        progress, None after a switch to the accurate route, False on a stall."""
        K = self.K
        raw, v, vv, xv = _vertex_and_gradient(H, order, self.p, self.sw, self.x)
        norm = self.x @ self.x
        if norm - xv <= 1e-300 or not self._grow(K + 1):  # (a full corral at the cap: a stall)
            return None if self._refine() else False
        S = self.S
        row = (S[:K] @ v)[self.slot[:K]]
        if _insert_vertex(self.L, self.G, S, self.R, self.orders, self.slot, K, v, raw, order, row,
                          vv, False) < 0:
            return None if self._refine() else False
        self._append(K)
        self._minor(K + 1, np.append(self.lam, 0.0))
        return self.x @ self.x < norm or self._refine()  # else rounding has won

    def _minor(self, K, lam):
        """Wolfe's minor cycle on the first K corral vertices from weights ``lam``: move to the
        affine minimum, dropping the vertices whose weight it would make negative; sets K, λ, x."""
        if self.chol and not (self.accurate and self._lstsq_ok(K)):  # the factor's route, compiled
            self.K, self.lam, self.solved = _minor_chol(self.L, self.G, self.S, self.R, self.orders,
                                                        self.slot, lam, K, _DROP, self.y,
                                                        self.solved)
            if self.K < K:  # its drops do not downdate the least-squares route's factorisation
                self.qr = None
            self.x = self._point()
            return
        for _ in range(K + 1):  # each pass drops at least one vertex or ends
            alpha = self._affine(K)
            if np.all(alpha > _DROP):
                lam = alpha
                break
            fall = (alpha <= _DROP) & (lam > alpha)  # only a falling weight limits the step
            theta = min(1.0, float(np.min(lam[fall] / (lam[fall] - alpha[fall]), initial=1.0)))
            lam = (1 - theta) * lam + theta * alpha
            for j in np.flatnonzero(lam <= _DROP)[::-1]:
                self._drop(K, j)
                K -= 1
            lam = lam[lam > _DROP]
        self.K, self.lam = K, lam / lam.sum()
        self.x = self._point()

    def _grow(self, need) -> bool:
        """Whether the storage holds ``need`` corral vertices, after doubling it (rows of S, R and
        the orders; G and L; the least-squares route's factors) up to ``cap`` where it did not."""
        old = self.S.shape[0]
        if need <= old:
            return True
        if need > self.cap:
            return False
        new = min(self.cap, max(need, 2 * old))

        def rows(a, width=None):
            b = np.zeros((new, a.shape[1] if width is None else new), dtype=a.dtype)
            b[:old, :a.shape[1]] = a
            return b

        self.S, self.R, self.orders = rows(self.S), rows(self.R), rows(self.orders)
        self.G, self.L = rows(self.G, new), rows(self.L, new)
        self.y = np.concatenate([self.y, np.empty(new - old)])
        self.slot = np.concatenate([self.slot, np.arange(old, new)])
        if self.qr is not None:
            Qt, R, c = self.qr
            self.qr = (rows(Qt), rows(R, new), c)
        return True

    def _lstsq_ok(self, K) -> bool:
        """Whether a least-squares affine minimum of K vertices is within :data:`_LSTSQ_WORK`."""
        return self.p.size * K * K <= _LSTSQ_WORK

    def _refine(self) -> bool:
        """On a stall of the Gram route, switch (once) to the accurate affine minimum
        (:meth:`_affine`, ``accurate``) and redo the minor cycle on the corral; False if already
        switched (the stall is real)."""
        if self.accurate or not self._lstsq_ok(self.K):
            return False
        self.accurate, self.chol = True, False
        self._minor(self.K, self.lam)
        return True

    def _point(self) -> np.ndarray:
        """The corral's point: the λ-mixture of its vertices."""
        w = np.empty(self.K)
        w[self.slot[:self.K]] = self.lam
        return w @ self.S[:self.K]

    def _drop(self, K, j):
        """Remove corral vertex j of K: G and the factor keep their order (the factor by a rank-one
        update, O(K²)); its storage row takes the last row's contents."""
        _drop_vertex(self.L, self.G, self.S, self.R, self.orders, self.slot, K, j, self.chol)
        self.solved = min(self.solved, j)
        if self.qr is not None:
            _qr_delete(self.qr[0], self.qr[1], K, j)
        if not self.chol:
            self._factor(K - 1)

    # The affine minimum of the corral: α ∝ (G + 1 1ᵀ)^{-1} 1 (the Gram matrix of the vertices with
    # a coordinate 1 appended, positive definite while they are affinely independent), from its
    # Cholesky factor L, extended by one row per added vertex and downdated by a drop.

    def _factor(self, K):
        """Cholesky factor of G + 1 1ᵀ for the first K vertices (``chol`` False if not definite)."""
        self.solved = 0
        if self.accurate and self._lstsq_ok(K):
            return
        try:
            self.L[:K, :K] = np.linalg.cholesky(self.G[:K, :K] + 1.0)
            self.chol = True
        except np.linalg.LinAlgError:
            self.chol = False

    def _append(self, K):
        """Extend the factor by vertex K (a Schur complement too small: not definite), or the
        least-squares route's QR factorisation (:meth:`_qr_append`)."""
        if self.qr is not None:
            self._qr_append(K)
        self.chol = self.chol and _extend_factor(self.L, self.G, K)

    def _affine(self, K) -> np.ndarray:
        """Weights (summing to one) of the point of the corral's affine hull nearest the origin.

        The Gram route squares the condition number: its point is accurate only to about
        :math:`\\sqrt{\\epsilon}` of the vertices' scale, so near a minimum-norm point of norm
        ~1e-8 or less (α* near 1, or a gap of 1e-9 to close) it stalls. ``accurate`` solves the
        least-squares problem on the vertices themselves instead (backward stable: error ~ε·cond,
        not ε·cond²): the bordered vertices :math:`B = [s_1 \\dots s_K; c \\dots c]` (c the
        largest vertex norm) have :math:`B^T B = G + c^2 \\mathbf{1}\\mathbf{1}^T`, so the solution
        :math:`\\beta` of :math:`\\min \\lVert B \\beta - c e_{V+1} \\rVert` is proportional to the
        affine minimum's weights. It comes from a thin QR factorisation :math:`B = Q R`,
        :math:`\\beta = R^{-1} Q^T c e_{V+1}`, kept from solve to solve: a vertex extends it by
        Gram–Schmidt twice (:meth:`_qr_append`), a drop downdates it by Givens rotations
        (:func:`_qr_delete`), O(V K) each where the SVD least squares on
        :math:`s_0 + \\sum_{j \\ge 1} \\beta_j (s_j - s_0)` it replaces cost O(V K²) a solve (4.5 ms
        at V = 1000, K = 140). A corral whose R is not clearly of full rank goes to that SVD."""
        if self.accurate and self.qr is None and self._lstsq_ok(K):
            self._qr_build(K)
        if self.accurate and self.qr is not None:  # (kept past _LSTSQ_WORK too: O(V K) a vertex)
            Qt, R, c = self.qr
            beta = _backsolve_upper(R, c * Qt[:K, -1], K)
            return beta / beta.sum()
        if self.accurate and self._lstsq_ok(K):
            rows = self.S[self.slot[:K]]
            beta = np.linalg.lstsq((rows[1:] - rows[0]).T, -rows[0], rcond=None)[0]
            return np.concatenate([[1.0 - beta.sum()], beta])
        if not self.chol:
            return _affine_min(self.G[:K, :K])
        beta = _backward(self.L, _forward(self.L, np.ones(K), K), K)
        return beta / beta.sum()

    def _qr_build(self, K):
        """Householder QR of the bordered corral (:meth:`_affine`); ``qr`` None if not of full rank."""
        c = math.sqrt(max(float(np.diagonal(self.G)[:K].max()), 1e-300))
        B = np.empty((self.p.size + 1, K))
        B[:-1] = self.S[self.slot[:K]].T
        B[-1] = c
        Q, R = np.linalg.qr(B)
        Qt, Rf = np.empty((self.S.shape[0], B.shape[0])), np.zeros((self.S.shape[0],) * 2)
        Qt[:K], Rf[:K, :K] = Q.T, R
        self.qr = (Qt, Rf, c) if _full_rank(np.abs(np.diagonal(R)), np.linalg.norm(B, axis=0)) \
            else None

    def _qr_append(self, K):
        """Extend the QR factorisation by vertex K's bordered column: Gram–Schmidt twice (enough
        for orthogonality to rounding); ``qr`` None if the column is not clearly independent."""
        Qt, R, c = self.qr
        a = np.append(self.S[self.slot[K]], c)
        r = Qt[:K] @ a
        a -= r @ Qt[:K]
        r2 = Qt[:K] @ a
        a -= r2 @ Qt[:K]
        rho = float(np.sqrt(a @ a))
        if not _full_rank(np.array([rho]), np.array([math.sqrt(self.G[K, K] + c * c)])):
            self.qr = None
            return
        R[:K, K], R[K, :K], R[K, K] = r + r2, 0.0, rho
        Qt[K] = a / rho

    def result(self, iterations) -> MinNormBase:
        mu = self._point() / self.sw + self.p
        rows = self.slot[:self.K]
        return MinNormBase(mu, self.orders[rows], self.lam, self.cut,
                           float(np.minimum(self.p, mu).sum()), self.upper, iterations,
                           self.R[rows])

    def frozen(self) -> _Frozen:
        """This run's result and bounds, without its storage (for a run that stops iterating)."""
        return _Frozen(self.upper, self.lower, self.result(0))


class _Frozen(NamedTuple):
    """A finished run as :func:`_race` reads it: its bounds and result, none of its storage."""

    upper: float
    lower: float
    base: MinNormBase

    def result(self, iterations) -> MinNormBase:
        return self.base._replace(iterations=iterations)


def mnp_route(p: np.ndarray, model: DraftModel, deadline: float | None = None) -> RouteOutput:
    """The ``"mnp"`` route of :func:`mdtheory.solve.optimal_acceptance`: :func:`min_norm_base`, for
    independent drafts and every other model with prefix containments.

    Returns
    -------
    RouteOutput
        ``value`` (the cut's value, an upper bound met by the base within :data:`MNP_TOL`), ``cut``,
        ``proof`` (a :class:`~mdtheory.routes.proofs.PriorityOrders`: the base as a mixture of orders),
        ``iterations``, ``timings``.

    Raises
    ------
    InvalidInputError
        A model without cheap exact vertices (:attr:`~mdtheory.models.base.DraftModel.order_vertices`
        False: the joint table).
    SolverError
        The method did not close its gap.
    """
    if not model.order_vertices:
        raise InvalidInputError(f"method 'mnp' needs a draft model with prefix containments; "
                                f"{model.sampling} drafts have none (use method 'dual' or 'subsets')")
    t0 = time.perf_counter()
    base = min_norm_base(p, model, deadline=deadline)
    return RouteOutput(value=base.upper, cut=base.cut, proof=PriorityOrders(base.orders, base.weights),
                       iterations=base.iterations, timings={"mnp": time.perf_counter() - t0})
