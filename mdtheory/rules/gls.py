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

from .. import _budget
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
#: Race times held at once by a step.
RACES = 1 << 18
#: Nodes times tokens from which the acceptance's kernel runs compiled.
COMPILED_WORK = 20_000
#: Slopes of Φ below this are divided by in logs (1/s overflows near the subnormals).
TINY = 1e-290
#: Draft multisets whose conditional law a prepared rule keeps.
CACHE = 4096
#: Seconds per race time of a step and per (node, level or draft) of a conditional law, and the
#: nodes a law takes about (a few hundred; up to a few thousand at ratios p/q near float64's range):
#: 1.5e-8 to 2.7e-8 s per cell measured at V = 1000 to 32,000, n = 64 to 10,000 on a 2-core x86
#: machine under a load of 11, for the estimate.
RACE_SECONDS, LAW_CELL_SECONDS, LAW_NODES = 2e-8, 2e-8, 500


@functools.cache
def _legendre() -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre points and weights on [-1, 1] (computed once: an eigenvalue problem)."""
    return np.polynomial.legendre.leggauss(POINTS)


def _nodes(n: int, log_lo: float, log_fastest: float, log_size: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ln t and log weights (the Jacobian and the races' common factor :math:`e^{-nt}`
    included) of :math:`\\int_0^\\infty e^{-nt} f(t)\\, dt` for f a combination of
    :math:`e^{-\\lambda t}`, :math:`0 \\le \\lambda \\le e^{\\text{log\\_fastest}}`, with
    :math:`e^{-nt} f(t) \\le n e^{\\ell - nt}` (:math:`\\ell` = ``log_size``): composite
    Gauss-Legendre in ln t from ``log_lo`` (the caller's cut: f's bound near 0 times
    :math:`e^{\\text{log\\_lo}}` is at most 1e-18) to :math:`\\ln((45 + \\ell)/n)` (the rest weighs
    under :math:`e^{-45}`); panels of width 2 where the exponentials decay, 8 below a thousandth of
    the fastest one's time scale, where f is flat. In logs, so that t may lie below float64's range."""
    hi = math.log((45.0 + log_size) / n)
    lo = min(log_lo, hi)
    knee = min(max(lo, math.log(1e-3) - float(np.logaddexp(math.log(n), log_fastest))), hi)
    edges = np.concatenate([np.linspace(lo, knee, max(1, math.ceil((knee - lo) / FAR_WIDTH)) + 1),
                            np.linspace(knee, hi, max(1, math.ceil((hi - knee) / WIDTH)) + 1)[1:]])
    x, w = _legendre()
    mid, half = 0.5 * (edges[1:] + edges[:-1]), 0.5 * np.diff(edges)
    log_t = (mid[:, None] + half[:, None] * x).ravel()
    with np.errstate(divide="ignore"):  # an empty panel (lo = knee): weight zero
        return log_t, np.log((half[:, None] * w).ravel()) + log_t - n * np.exp(log_t)


@njit(cache=True, error_model="numpy")
def _segment(lt, t, offset, l, excess, log_excess, rise, log_rise, slope):
    """:math:`e^{-\\text{offset}} (e^{-t(\\Phi(\\rho_l) - 1)} - e^{-t(\\Phi(\\rho_{l+1}) - 1)})/s_l`
    at the node ln t = ``lt`` (at the top level, the first term alone). t Φ is a product where t is
    above 1e-300 and Φ a float, else formed in logs; where :math:`s_l` is below :data:`TINY` the
    segment is formed in logs without dividing by it (1/s may overflow, and the rise
    :math:`s_l (\\rho_{l+1} - \\rho_l)` lose its digits as a subnormal), with :math:`1 - e^{-x} = x`
    below x = 1e-300."""
    direct = t > 1e-300
    rate = t * excess[l] if direct and excess[l] < math.inf else math.exp(lt + log_excess[l])
    if l == slope.size - 1:
        return math.exp(-rate - offset) / slope[l]
    if slope[l] >= TINY:
        step = t * rise[l] if direct and rise[l] < math.inf else math.exp(lt + log_rise[l])
        return math.exp(-rate - offset) * -math.expm1(-step) / slope[l]
    step = math.exp(lt + log_rise[l])
    gone = math.log(-math.expm1(-step)) if step > 1e-300 else lt + log_rise[l]
    return math.exp(gone - rate - offset - math.log(slope[l]))


@njit(cache=True, error_model="numpy")
def _rejected(log_t, weights, excess, log_excess, rise, log_rise, slope, level, q, p, n, tail):
    """:math:`\\sum_y n p_y \\int (e^{-t} - e^{-t\\Phi(r_y)})(e^{-t} - q_y g_y(t))^{n-1} dt` over the
    tokens given (``level``, ``q``, ``p``: their Φ level and masses) at the nodes: per node, the
    segments' suffix sums (``tail``, workspace of length L: :math:`e^t g`) from the top level down,
    then one pass over the tokens. Every term is non-negative; :math:`1 - q_y e^t g_y` is a
    difference of masses, guarded at zero against rounding."""
    L = excess.size
    total = 0.0
    for j in range(log_t.size):
        lt = log_t[j]
        t = math.exp(lt)
        running = 0.0
        for m in range(L - 1, -1, -1):
            running += _segment(lt, t, 0.0, m, excess, log_excess, rise, log_rise, slope)
            tail[m] = running
        here = 0.0
        for i in range(level.size):
            missed = max(1.0 - q[i] * tail[level[i]], 0.0)
            here += p[i] * -math.expm1(-t * excess[level[i]]) * _ipow(missed, n - 1)
        total += weights[j] * here
    return n * total


@njit(cache=True, error_model="numpy")
def _law_nodes(log_t, log_w, excess, log_excess, rise, log_rise, slope, at, counts, log_r, n, below,
               drafted, seg, tail, others):
    """The quadrature of the law given drafts at the nodes (ln t, log weights without
    :math:`e^{-nt}`), added into ``below`` (L + 1: per level, :math:`\\sum_j w_j h_j(l)`, the h-part
    of the law over p for the tokens at level l) and ``drafted`` (m: the drafted tokens' own term).
    ``at``, ``counts``, ``log_r``: the distinct drafted tokens' levels (ascending), multiplicities and
    ln(c r); ``seg``, ``tail``, ``others``: workspaces of lengths L, L, m. Per node, from the top
    level down, the segments :math:`(e^{-t\\Phi(\\rho_l)} - e^{-t\\Phi(\\rho_{l+1})})/s_l`
    (:func:`_segment`) and their suffix sums, the probability :math:`g` that a race drafting the
    level's token outlasts t (at most one: no product of them overflows); then each draft's other
    races' product :math:`G_i` and, from the bottom level up, :math:`h(l) = \\sum_{l' < l}
    \\mathrm{seg}_{l'} W_{l'}`, :math:`W_{l'} = \\sum_{\\ell(i) \\le l'} c_i G_i`."""
    L, m = slope.size, at.size
    for j in range(log_t.size):
        lt = log_t[j]
        t = math.exp(lt)
        running = 0.0
        for l in range(L - 1, -1, -1):
            seg[l] = _segment(lt, t, t, l, excess, log_excess, rise, log_rise, slope)
            running += seg[l]
            tail[l] = running
        before = 1.0
        for i in range(m):  # others[i]: the races of the tokens before i, then times those after
            others[i] = before * _ipow(tail[at[i]], counts[i] - 1)
            before *= _ipow(tail[at[i]], counts[i])
        after = 1.0
        for i in range(m - 1, -1, -1):
            others[i] *= after
            after *= _ipow(tail[at[i]], counts[i])
        w = math.exp(log_w[j])
        weight, h, k = 0.0, 0.0, 0
        for l in range(L):
            while k < m and at[k] == l:
                weight += counts[k] * others[k]
                k += 1
            h += seg[l] * weight
            below[l + 1] += w * h
        for i in range(m):
            if others[i] > 0.0:
                rate = t * excess[at[i]] if t > 1e-300 and excess[at[i]] < math.inf \
                    else math.exp(lt + log_excess[at[i]])
                drafted[i] += math.exp(log_w[j] + math.log(others[i]) + log_r[i] - t - rate)


class GumbelListSampling(SelectionRule):
    """Gumbel-max list sampling (Rowan, Phan and Khisti 2025) as a verifier of n iid drafts.

    The output is the target's race winner :math:`Y = \\arg\\min_i \\min_k S_{k,i}/p_i`, accepted when
    it is a draft. Given drafts x, the races are drawn from their conditional law (papers/theory.md
    §GLS): for each k, :math:`M_k \\sim \\mathrm{Exp}(1)`,
    :math:`S_{k,x_k} = q_{x_k} M_k` and :math:`S_{k,i} = q_i M_k + E_{k,i}` with fresh
    :math:`E_{k,i} \\sim \\mathrm{Exp}(1)`; the pair (drafts, output) then has the law of the paper's
    procedure, which draws the drafts from the races. A step costs O(nV) time and
    O(V + :data:`RACES`) memory (the races are drawn a block of rows at a time).

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
    against exact rationals they agree to about 1e-14 (``tests/test_gls.py``). The law given the drafts
    keeps every race's factor a probability, so it holds at any probability Q(x) of the drafts, and
    forms t Φ, the segments of a subnormal slope and the drafted tokens' own terms in logs, so it holds
    at ratios p/q past float64 (q subnormal); a step compares the drafted tokens' times in logs for
    the same reason. :meth:`select`, :meth:`law` and :meth:`conditional` refuse a draft of q = 0,
    which has no conditional law.
    """

    name = "gls"

    @classmethod
    def estimate(cls, model):
        """The preparation (a sort of the V ratios), one step (n races of V times: O(nV) time,
        O(V + :data:`RACES`) memory) and one conditional law (about :data:`LAW_NODES` quadrature nodes,
        each O(V + n))."""
        n, V = model.n, model.V
        step = _budget.Estimate(f"one step: {n} races of {V} times", RACE_SECONDS * n * V,
                                8.0 * (2 * V + min(n * V, RACES + V)))
        law = _budget.Estimate(f"one conditional law: about {LAW_NODES} nodes over {V} tokens",
                               LAW_CELL_SECONDS * LAW_NODES * (V + n),
                               8.0 * (6 * V + 4 * n))
        return _budget.combine(super().estimate(model), step, law)

    def _prepare(self):
        p, q, V = self.p, self.q, self.V
        self.free = q == 0  # never drafted: no ratio, no level
        on = np.flatnonzero(~self.free)
        with np.errstate(divide="ignore", over="ignore"):
            ratio = p[on] / q[on]  # inf where p/q overflows float64 (q subnormal)
            big = np.isinf(ratio)
            log_ratio = np.where(big, np.log(p[on]) - np.log(q[on]), np.log(ratio))  # -inf at p = 0
        self.log_ratio = np.full(V, np.inf)  # ln(p/q) of every token, inf where q = 0
        self.log_ratio[on] = log_ratio
        # levels: the distinct finite ratios, then the distinct log ratios of the overflowing ones
        rho, level = np.unique(ratio[~big], return_inverse=True)
        over, over_level = np.unique(log_ratio[big], return_inverse=True)
        with np.errstate(divide="ignore"):  # a ratio 0 (p = 0): ln = -inf
            log_rho = np.concatenate([np.log(rho), over])
        L = log_rho.size
        self.level = np.full(V, L)
        self.level[on[~big]] = level
        self.level[on[big]] = rho.size + over_level
        # Φ's slope from the l-th ratio on, its rise to the next ratio, and its value there less one
        self.slope = np.cumsum(np.bincount(self.level[on], weights=q[on], minlength=L))
        gap = np.full(L - 1, np.inf)  # ρ_{l+1} - ρ_l, inf from the last finite ratio on
        gap[:rho.size - 1] = np.diff(rho)
        log_gap = np.log(gap)
        at = np.arange(max(rho.size - 1, 0), L - 1)  # from the last finite ratio on, in logs
        log_gap[at] = log_rho[at + 1] + np.log1p(-np.exp(log_rho[at] - log_rho[at + 1]))
        self.rise = self.slope[:-1] * gap
        self.log_rise = np.log(self.slope[:-1]) + log_gap  # its digits even where the rise is subnormal
        self.excess = np.concatenate(([0.0], np.cumsum(self.rise)))  # Φ(ρ_l) - 1, inf past float64
        with np.errstate(divide="ignore"):
            self.log_excess = np.where(np.isfinite(self.excess), np.log(self.excess),
                                       np.logaddexp.accumulate(np.concatenate(([-np.inf], self.log_rise))))
        # the integrands' fastest exponential, n Φ(ρ_L), in logs
        self.log_fastest = math.log(self.n) + float(np.logaddexp(0.0, self.log_excess[-1]))
        self._laws: dict[tuple, np.ndarray] = {}
        self._acceptance: float | None = None

    def _check_drafts(self, drafts) -> np.ndarray:
        """The base class's check, and q > 0 at every draft (a draft of q = 0 has no law)."""
        x = super()._check_drafts(drafts)
        if self.free[x].any():
            k = int(np.flatnonzero(self.free[x])[0])
            raise InvalidInputError(f"drafts[{k}] = {x[k]} has draft probability q = 0: impossible "
                                    f"drafts have no conditional law")
        return x

    def law(self, drafts: ArrayLike) -> np.ndarray:
        """P(Y = y | X = drafts) for every y, shape (V,) (the sum of :meth:`conditional`'s pair).

        Raises
        ------
        InvalidInputError
            Drafts that are not n token ids, or a draft of q = 0.
        """
        x = self._check_drafts(drafts)
        key = tuple(sorted(x.tolist()))  # the law is symmetric in the drafts' order
        if key not in self._laws:
            if len(self._laws) >= CACHE:
                self._laws.clear()
            self._laws[key] = self._law(np.asarray(key))
        return self._laws[key].copy()

    def _law(self, x: np.ndarray) -> np.ndarray:
        """The theorem's integrals with every race's factor a probability (:func:`_law_nodes`): the
        products over the n races cannot overflow whatever Q(x), and where they underflow the
        integrand is below 1e-300. A drafted token's own term :math:`c_i G_i r_i e^{-t\\Phi(r_i)}` is
        formed in logs (r may overflow float64; the term is at most 1/(e t))."""
        tokens, counts = np.unique(x, return_counts=True)
        order = np.argsort(self.level[tokens], kind="stable")
        tokens, counts = tokens[order], counts[order]
        at = self.level[tokens]
        # near t = 0 the integrand is at most p_y n (1 + r_y [y drafted]) (h_{y,y} = e^{-tΦ} / q_y);
        # everywhere at most n p_y e^{-nt} / Q(x), the drafts' probability (each race's factor is
        # at most e^{-t} before dividing by q_x)
        cut = LOG_TAIL - math.log(self.n) - float(np.logaddexp(0.0, self.log_ratio[tokens]).max())
        log_t, log_w = _nodes(self.n, cut, self.log_fastest, -float(counts @ np.log(self.q[tokens])))
        log_w += self.n * np.exp(log_t)  # each race's factor has its e^{-t}
        L = self.slope.size
        below, drafted = np.zeros(L + 1), np.zeros(tokens.size)
        kernel = _law_nodes.compiled if log_t.size * L > COMPILED_WORK else _law_nodes
        kernel(log_t, log_w, self.excess, self.log_excess, self.rise, self.log_rise, self.slope, at,
               counts, self.log_ratio[tokens] + np.log(counts), self.n, below, drafted, np.empty(L),
               np.empty(L), np.empty(tokens.size))
        out = self.p * below[self.level]
        out[tokens] += drafted
        return out

    def conditional(self, drafts):
        """Exact (a, r): the law of Y given the drafts, on the drafted tokens (accepted) and off them
        (rejected). Cached per draft multiset.

        Raises
        ------
        InvalidInputError
            Drafts that are not n token ids, or a draft of q = 0 (an impossible draft tuple).
        """
        law = self.law(drafts)
        drafted = np.zeros(self.V, dtype=bool)
        drafted[np.asarray(drafts)] = True
        return np.where(drafted, law, 0.0), np.where(drafted, 0.0, law)

    def _step(self, drafts, rng):
        """One step: the races redrawn given the drafts, then the target's winner, O(nV) time and
        O(V + :data:`RACES`) memory. The drafted entries :math:`S_{k,x_k}/p_{x_k} = M_k/r_{x_k}` are
        compared in logs (the ratio may overflow float64); the others, :math:`q_i M_k + E_{k,i}`,
        directly."""
        n, V = self.n, self.V
        minimum = rng.standard_exponential(n)
        best = np.full(V, np.inf)
        rows = max(1, RACES // V)
        for start in range(0, n, rows):
            k = np.arange(start, min(start + rows, n))
            races = rng.standard_exponential((k.size, V))
            races += self.q * minimum[k, None]
            races[np.arange(k.size), drafts[k]] = np.inf  # the drafted entries: below
            np.minimum(best, races.min(axis=0), out=best)
        times = self._times(best)
        y = int(np.argmin(times))
        with np.errstate(divide="ignore"):
            drafted = np.log(minimum) - self.log_ratio[drafts]  # +inf where p = 0: never the winner
            k = int(np.argmin(drafted))
            if drafted[k] < np.log(times[y]):
                y = int(drafts[k])
        return y, bool(np.any(drafts == y))

    def _times(self, times: np.ndarray) -> np.ndarray:
        """times_i / p_i, inf where p_i = 0."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.p > 0, times / self.p, np.inf)

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
        y = int(np.argmin(self._times(S.min(axis=0))))
        return drafts, y, bool(np.any(drafts == y))

    def closed_form_acceptance(self):
        """P(Y is a draft) by its one-dimensional integral (papers/theory.md §GLS), O(V) per
        quadrature node (at most about 400 nodes)."""
        if self._acceptance is None:
            on = np.flatnonzero(~self.free & (self.p > 0))
            # the integrand is at most n p_y: cut at 1e-18 / n
            log_t, log_w = _nodes(self.n, LOG_TAIL - math.log(self.n), self.log_fastest)
            kernel = _rejected.compiled if log_t.size * on.size > COMPILED_WORK else _rejected
            lost = kernel(log_t, np.exp(log_w), self.excess, self.log_excess, self.rise, self.log_rise,
                          self.slope, self.level[on], self.q[on], self.p[on], self.n,
                          np.empty(self.excess.size))
            self._acceptance = float(self.p[~self.free].sum()) - lost  # never drafted: rejected
        return self._acceptance

    def list_matching_bound(self) -> float:
        """The list matching lemma's lower bound on the acceptance (Rowan et al., Theorem 1):
        :math:`\\sum_y n p_y / (n - 1 + \\Phi(r_y))`, the probability that Y is won by a race whose
        draft is Y."""
        on = ~self.free
        return float(np.sum(self.n * self.p[on] / (self.n + self.excess[self.level[on]])))
