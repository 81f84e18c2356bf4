"""Gumbel-max list sampling (GLS; Rowan, Phan and Khisti, NeurIPS 2025), papers/theory.md §GLS.

n races of V independent Exp(1) variables S[k, i] are shared by the drafter and the verifier. Draft k
is :math:`X_k = \\arg\\min_i S_{k,i}/q_i`; the output is :math:`Y = \\arg\\min_i \\min_k S_{k,i}/p_i`,
always, and a draft is accepted when Y is one of them. Y has law p whatever q is (lossless), and given
the races it is a function of p alone (drafter invariance, :meth:`GumbelListSampling.couple`). The
drafts' marginal law is iid q, so the rule verifies iid drafts it is given: it redraws the races from
their conditional law given the drafts (:meth:`GumbelListSampling.select`) and has the exact
conditional law of Y given the drafts as a one-dimensional Laplace integral, evaluated by
Gauss-Legendre quadrature in ln t (:meth:`GumbelListSampling.conditional`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import ArrayLike

from .._jit import njit
from ..errors import InvalidInputError
from ..routes.subsets import _ipow
from .base import SelectionRule

__all__ = ["GumbelListSampling"]

#: Gauss-Legendre points per panel of the quadrature in ln t.
POINTS = 16
#: Panel width in ln t where the integrand's exponentials live, and in the far left tail.
WIDTH, FAR_WIDTH = 2.0, 8.0
#: Natural log of the bound on the mass of the integrals' left tails left out.
LOG_TAIL = math.log(1e-18)
#: Nodes times tokens held at once by the quadrature of the law.
CHUNK = 1 << 20
#: Nodes times tokens from which the acceptance's kernel runs compiled.
COMPILED_WORK = 20_000
#: Drafts less likely than this (natural log) condition no race: the law's integrand, up to about
#: e^45 / Q(x), would overflow below Q(x) = 1e-289.
LOG_RAREST = math.log(1e-280)
#: Draft multisets whose conditional law a prepared rule keeps.
CACHE = 4096


@functools.cache
def _legendre() -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre points and weights on [-1, 1] (computed once: an eigenvalue problem)."""
    return np.polynomial.legendre.leggauss(POINTS)


def _nodes(n: int, log_lo: float, fastest: float, log_size: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Nodes t and weights (the Jacobian and the races' common factor :math:`e^{-nt}` included) of
    :math:`\\int_0^\\infty e^{-nt} f(t)\\, dt` for f a combination of :math:`e^{-\\lambda t}`,
    :math:`0 \\le \\lambda \\le` ``fastest``, with :math:`e^{-nt} f(t) \\le n e^{\\ell - nt}`
    (:math:`\\ell` = ``log_size``): composite Gauss-Legendre in ln t from ``log_lo`` (the caller's
    cut: f's bound near 0 times :math:`e^{\\text{log\\_lo}}` is at most 1e-18) to
    :math:`\\ln((45 + \\ell)/n)` (the rest weighs under :math:`e^{-45}`); panels of width 2 where the
    exponentials decay, 8 below a thousandth of the fastest one's time scale, where f is flat."""
    hi = math.log((45.0 + log_size) / n)
    lo = min(log_lo, hi)
    knee = min(max(lo, math.log(1e-3) - math.log(n + min(fastest, 1e300))), hi)
    edges = np.concatenate([np.linspace(lo, knee, max(1, math.ceil((knee - lo) / FAR_WIDTH)) + 1),
                            np.linspace(knee, hi, max(1, math.ceil((hi - knee) / WIDTH)) + 1)[1:]])
    x, w = _legendre()
    mid, half = 0.5 * (edges[1:] + edges[:-1]), 0.5 * np.diff(edges)
    t = np.exp((mid[:, None] + half[:, None] * x).ravel())
    return t, (half[:, None] * w).ravel() * t * np.exp(-n * t)


@njit(cache=True, error_model="numpy")
def _rejected(t, weights, excess, rise, slope, level, q, p, n, tail):
    """:math:`\\sum_y n p_y \\int (e^{-t} - e^{-t\\Phi(r_y)})(e^{-t} - q_y g_y(t))^{n-1} dt` over the
    tokens given (``level``, ``q``, ``p``: their Φ level and masses) at the nodes: per node, the
    segments' suffix sums (``tail``, workspace of length L) from the top level down, then one pass
    over the tokens. Every term is non-negative; :math:`1 - q_y e^t g_y` is a difference of masses,
    guarded at zero against rounding."""
    L = excess.size
    total = 0.0
    for j in range(t.size):
        running = 0.0
        for m in range(L - 1, -1, -1):
            seg = math.exp(-t[j] * excess[m]) / slope[m]
            if m < L - 1:
                seg *= -math.expm1(-t[j] * rise[m])
            running += seg
            tail[m] = running
        here = 0.0
        for i in range(level.size):
            missed = max(1.0 - q[i] * tail[level[i]], 0.0)
            here += p[i] * -math.expm1(-t[j] * excess[level[i]]) * _ipow(missed, n - 1)
        total += weights[j] * here
    return n * total


class GumbelListSampling(SelectionRule):
    """Gumbel-max list sampling (Rowan, Phan and Khisti 2025) as a verifier of n iid drafts.

    The output is the target's race winner :math:`Y = \\arg\\min_i \\min_k S_{k,i}/p_i`, accepted when
    it is a draft. Given drafts x, the races are drawn from their conditional law (papers/theory.md
    §GLS): for each k, :math:`M_k \\sim \\mathrm{Exp}(1)`,
    :math:`S_{k,x_k} = q_{x_k} M_k` and :math:`S_{k,i} = q_i M_k + E_{k,i}` with fresh
    :math:`E_{k,i} \\sim \\mathrm{Exp}(1)`; the pair (drafts, output) then has the law of the paper's
    procedure, which draws the drafts from the races. A step costs O(nV).

    With :math:`\\Phi(u) = \\sum_i \\max(q_i u, p_i)` and :math:`r_i = p_i/q_i`,

    .. math:: P(Y = y \\mid X = x) = p_y \\int_0^\\infty \\sum_k h_{x_k, y}(t) \\prod_{j \\ne k}
              g_{x_j}(t)\\, dt,

    :math:`g_x(t) = t \\int_{r_x}^\\infty e^{-t\\Phi(u)} du`, :math:`h_{x,y}(t) = t \\int_{r_x}^{r_y}
    e^{-t\\Phi(u)} du` (zero if :math:`r_y \\le r_x`), :math:`h_{y,y}(t) = e^{-t\\Phi(r_y)}/q_y`; Φ is
    piecewise linear, so each factor is a short sum of exponentials in t. The acceptance is
    :math:`1 - \\sum_y n p_y \\int_0^\\infty (e^{-t} - e^{-t\\Phi(r_y)})(e^{-t} - q_y g_y(t))^{n-1} dt`,
    O(V) per quadrature node, and the list matching lemma's lower bound is
    :math:`\\sum_y n p_y / (n - 1 + \\Phi(r_y))` (:meth:`list_matching_bound`).

    Notes
    -----
    The integrals are evaluated by composite Gauss-Legendre quadrature in ln t (a few hundred nodes);
    against exact rationals they agree to about 1e-14 (``tests/test_gls.py``). A draft at a token whose
    ratio p/q overflows float64 (q below about 1e-308 p) conditions no race, and drafts whose joint
    probability is below 1e-280 (:data:`LOG_RAREST`) condition none: :meth:`select` and
    :meth:`conditional` alike redraw those races unconditioned.
    """

    name = "gls"

    def _prepare(self):
        p, q, V = self.p, self.q, self.V
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            ratio = np.where(q > 0, p / np.where(q > 0, q, 1.0), np.inf)
        # tokens whose race a draft cannot condition: q = 0, or p/q past float64
        self.free = ~np.isfinite(ratio)
        rho, level = np.unique(ratio[~self.free], return_inverse=True)
        L = rho.size
        self.level = np.full(V, L)
        self.level[~self.free] = level
        # Φ's slope from the l-th ratio on, its value there less one, and its rise to the next ratio
        self.slope = np.cumsum(np.bincount(level, weights=q[~self.free], minlength=L))
        self.rise = self.slope[:-1] * np.diff(rho)
        self.excess = np.concatenate(([0.0], np.cumsum(self.rise)))  # Φ(ρ_l) - 1
        self.ratio = ratio
        self.fastest = self.n * (1.0 + float(self.excess[-1]))  # the integrands' fastest exponential
        self._laws: dict[tuple, np.ndarray] = {}
        self._acceptance: float | None = None

    def _suffix(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """At nodes t (c,): :math:`e^{t} e^{-t\\Phi(\\rho_l)}` (c, L), and :math:`e^{t}\\, t
        \\int_{\\rho_l}^\\infty e^{-t\\Phi}`, the sums of the segments' :math:`(e^{-t\\Phi(\\rho_l)} -
        e^{-t\\Phi(\\rho_{l+1})})/s_l` from l on, with a zero column L for the tokens beyond every ratio
        (c, L + 1). Every term is non-negative."""
        with np.errstate(over="ignore"):  # t Φ past float64: e^{-inf} = 0, as it should
            z = np.exp(-t[:, None] * self.excess)
            seg = z / self.slope
            seg[:, :-1] *= -np.expm1(-t[:, None] * self.rise)
        tail = np.zeros((t.size, z.shape[1] + 1))
        tail[:, :-1] = np.cumsum(seg[:, ::-1], axis=1)[:, ::-1]
        return z, tail

    def law(self, drafts: ArrayLike) -> np.ndarray:
        """P(Y = y | X = drafts) for every y, shape (V,) (the sum of :meth:`conditional`'s pair).

        Raises
        ------
        InvalidInputError
            Drafts that are not n token ids.
        """
        x = self._check_drafts(drafts)
        key = tuple(sorted(x.tolist()))  # the law is symmetric in the drafts' order
        if key not in self._laws:
            if len(self._laws) >= CACHE:
                self._laws.clear()
            self._laws[key] = self._law(np.asarray(key))
        return self._laws[key].copy()

    def _held(self, drafts: np.ndarray) -> np.ndarray:
        """Which drafts condition their race: not at a free token, and the conditioned drafts'
        probability at least e^:data:`LOG_RAREST`."""
        held = ~self.free[drafts]
        if np.sum(np.log(self.q[drafts[held]])) < LOG_RAREST:
            held[:] = False
        return held

    def _law(self, x: np.ndarray) -> np.ndarray:
        held = self._held(x)
        free = int(np.count_nonzero(~held))  # unconditioned races: g = h = e^{-t}
        if free == x.size:  # every race unconditioned: Y has law p
            return self.p.copy()
        tokens, counts = np.unique(x[held], return_counts=True)
        at = self.level[tokens]
        # near t = 0 the integrand is at most p_y n (1 + r_y [y drafted]) (h_{y,y} = e^{-tΦ} / q_y);
        # everywhere at most n p_y e^{-nt} / Q(x), the drafts' probability (each race's factor is
        # at most e^{-t} before dividing by q_x)
        cut = LOG_TAIL - math.log(self.n) - math.log1p(float(self.ratio[tokens].max()))
        nodes, weights = _nodes(self.n, cut, self.fastest, -float(counts @ np.log(self.q[tokens])))
        out = np.zeros(self.V)
        step = max(1, CHUNK // (self.V * (tokens.size + 2)))
        for start in range(0, nodes.size, step):
            t, w = nodes[start:start + step], weights[start:start + step]
            z, tail = self._suffix(t)
            g = tail[:, at]  # (c, m): e^t g_x at the drafted tokens
            power = g ** counts
            ones = np.ones((t.size, 1))
            before = np.cumprod(np.hstack([ones, power[:, :-1]]), axis=1)  # races of earlier tokens
            after = np.cumprod(np.hstack([ones, power[:, :0:-1]]), axis=1)[:, ::-1]  # of later ones
            others = before * after * g ** (counts - 1)  # every other race's factor, one race of i out
            integrand = np.repeat(free * before[:, -1:] * power[:, -1:], self.V, axis=1)
            beyond = tail[:, self.level]  # (c, V)
            for i, tok in enumerate(tokens):
                integrand += counts[i] * others[:, i:i + 1] * np.maximum(g[:, i:i + 1] - beyond, 0.0)
                integrand[:, tok] += counts[i] * others[:, i] * z[:, at[i]] / self.q[tok]
            out += w @ integrand
        return self.p * out

    def conditional(self, drafts):
        """Exact (a, r): the law of Y given the drafts, on the drafted tokens (accepted) and off them
        (rejected). Cached per draft multiset."""
        law = self.law(drafts)
        drafted = np.zeros(self.V, dtype=bool)
        drafted[np.asarray(drafts)] = True
        return np.where(drafted, law, 0.0), np.where(drafted, 0.0, law)

    def _step(self, drafts, rng):
        """One step: the races redrawn given the drafts, then the target's winner, O(nV)."""
        races = rng.standard_exponential((self.n, self.V))
        minimum = rng.standard_exponential(self.n)
        rows = np.flatnonzero(self._held(drafts))
        races[rows] += self.q * minimum[rows, None]
        races[rows, drafts[rows]] = self.q[drafts[rows]] * minimum[rows]
        y = self._winner(races.min(axis=0))
        return y, bool(np.any(drafts == y))

    def _winner(self, times: np.ndarray) -> int:
        """argmin_i times_i / p_i over the tokens with p_i > 0."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return int(np.argmin(np.where(self.p > 0, times / self.p, np.inf)))

    def couple(self, races: ArrayLike) -> tuple[np.ndarray, int, bool]:
        """The paper's procedure on given races: drafts, output and acceptance.

        Parameters
        ----------
        races : array_like, shape (n, V)
            Positive race times S[k, i] (iid Exp(1) in the paper).

        Returns
        -------
        (ndarray of int, int, bool)
            The drafts :math:`\\arg\\min_i S_{k,i}/q_i`, the output :math:`\\arg\\min_i \\min_k
            S_{k,i}/p_i` (a function of the races and p alone: drafter invariance) and whether it is
            a draft.

        Raises
        ------
        InvalidInputError
            Races of another shape, or not positive and finite.
        """
        S = np.asarray(races, dtype=float)
        if S.shape != (self.n, self.V) or not np.all(np.isfinite(S) & (S > 0)):
            raise InvalidInputError(f"races must be positive finite times of shape ({self.n}, "
                                    f"{self.V}), got shape {S.shape}")
        with np.errstate(divide="ignore", invalid="ignore"):
            drafts = np.argmin(np.where(self.q > 0, S / self.q, np.inf), axis=1)
        y = self._winner(S.min(axis=0))
        return drafts, y, bool(np.any(drafts == y))

    def closed_form_acceptance(self):
        """P(Y is a draft) by its one-dimensional integral (papers/theory.md §GLS), O(V) per
        quadrature node (at most about 400 nodes)."""
        if self._acceptance is None:
            on = np.flatnonzero(~self.free & (self.p > 0))
            # the integrand is at most n p_y: cut at 1e-18 / n
            t, w = _nodes(self.n, LOG_TAIL - math.log(self.n), self.fastest)
            kernel = _rejected.compiled if t.size * on.size > COMPILED_WORK else _rejected
            lost = kernel(t, w, self.excess, self.rise, self.slope, self.level[on], self.q[on],
                          self.p[on], self.n, np.empty(self.excess.size))
            self._acceptance = 1.0 - float(self.p[self.free].sum()) - lost  # never drafted: rejected
        return self._acceptance

    def list_matching_bound(self) -> float:
        """The list matching lemma's lower bound on the acceptance (Rowan et al., Theorem 1):
        :math:`\\sum_y n p_y / (n - 1 + \\Phi(r_y))`, the probability that Y is won by a race whose
        draft is Y."""
        on = ~self.free
        return float(np.sum(self.n * self.p[on] / (self.n + self.excess[self.level[on]])))
