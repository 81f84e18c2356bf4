"""Practical selection rules with closed-form or enumerated acceptance (papers/theory.md §6)."""

from __future__ import annotations

import numpy as np

from .. import _budget
from .base import SelectionRule, residual

__all__ = ["SingleDraft", "RecursiveRejection", "RecursiveRejectionWithoutReplacement", "KSeq",
           "GreedyDrafts"]


def _ratio(num: float, den: float) -> float:
    """min(1, num / den); a draft of zero proposal mass is never offered."""
    return 1.0 if num >= den else num / den


def _cdf(law: np.ndarray) -> np.ndarray:
    """Cumulative sums of a law, for :func:`_draw` (prepared once per position)."""
    return np.cumsum(law)


def _draw(cdf: np.ndarray, rng: np.random.Generator) -> int:
    """One token from the law with cumulative sums ``cdf``, by bisection: O(log V).

    ``side="right"`` lands on the first token whose cumulative sum exceeds u * total, which has
    positive mass, so a token of zero mass is never drawn.
    """
    k = np.searchsorted(cdf, rng.random() * cdf[-1], side="right")
    return int(min(k, cdf.size - 1))


def _sequential_select(ratios, drafts, residual_cdf, rng) -> tuple[int, bool]:
    """Offer the drafts in turn, accepting draft i with probability ``ratios(i, x_i)``; after n
    rejections draw from the residual. The law of :meth:`conditional`, in O(n + log V)."""
    for i, x in enumerate(drafts):
        x = int(x)
        if rng.random() < ratios(i, x):
            return x, True
    return _draw(residual_cdf, rng), False


class SingleDraft(SelectionRule):
    """Single-draft speculative sampling on the first draft (Leviathan et al. 2023, Chen et al. 2023).

    Accept :math:`x_1` with probability :math:`\\min(1, p(x_1)/q(x_1))`, else sample
    :math:`\\mathrm{norm}((p - q)^+)`. Acceptance :math:`\\sum_y \\min(p(y), q(y)) = 1 - TV(p, q)`.

    >>> SingleDraft([0.7, 0.3], [0.4, 0.6], 2).exact_acceptance()
    0.7
    """

    name = "single"
    first_draft_only = True

    def _prepare(self):
        self.res = residual(self.p, self.q)

    def conditional(self, drafts):
        y = int(drafts[0])
        a = _ratio(self.p[y], self.q[y])
        accept = np.zeros(self.V)
        accept[y] = a
        return accept, (1.0 - a) * self.res

    def closed_form_acceptance(self):
        return float(np.minimum(self.p, self.q).sum())


class RecursiveRejection(SelectionRule):
    """Recursive rejection sampling, SpecInfer (Miao et al. 2024), for iid drafts.

    With :math:`r_1 = p`: accept :math:`x_i` with probability :math:`\\min(1, r_i(x_i)/q(x_i))`, else
    continue with :math:`r_{i+1} = \\mathrm{norm}((r_i - q)^+)`; after n rejections sample
    :math:`r_{n+1}`. Acceptance :math:`1 - \\prod_i (1 - \\sum_y \\min(r_i(y), q(y)))`.
    """

    name = "rrs"

    def _prepare(self):
        _budget.require(_budget.stored_floats(
            f"rrs keeps n + 1 = {self.n + 1} residuals of V = {self.V} tokens", (self.n + 1) * self.V))
        self.r = [self.p]
        for _ in range(self.n):
            self.r.append(residual(self.r[-1], self.q))
        self._res_cdf = _cdf(self.r[self.n])

    def conditional(self, drafts):
        accept, reach = np.zeros(self.V), 1.0
        for i, x in enumerate(drafts):
            a = _ratio(self.r[i][x], self.q[x])
            accept[x] += reach * a
            reach *= 1.0 - a
        return accept, reach * self.r[self.n]

    def _step(self, drafts, rng):
        """One step of the procedure itself (law :meth:`conditional`), O(n + log V)."""
        return _sequential_select(lambda i, x: _ratio(self.r[i][x], self.q[x]), drafts,
                                  self._res_cdf, rng)

    def closed_form_acceptance(self):
        miss = np.prod([1.0 - np.minimum(r, self.q).sum() for r in self.r[: self.n]])
        return float(1.0 - miss)


class RecursiveRejectionWithoutReplacement(SelectionRule):
    """Recursive rejection sampling without replacement (Jeon et al. 2024), drafts by successive
    sampling.

    Draft i comes from :math:`q_i = q` renormalised off the earlier drafts; accept it with probability
    :math:`\\min(1, r_i(x_i)/q_i(x_i))`, else :math:`r_{i+1} = \\mathrm{norm}((r_i - q_i)^+)`; after n
    rejections sample :math:`r_{n+1}`. Each step is single-draft speculative sampling of
    :math:`r_i` against the proposal actually used, so the output law is p. No closed form: the
    acceptance is enumerated over draft tuples.
    """

    name = "rrs-wor"
    sampling = "without-replacement"

    def _prepare(self):
        pass

    def conditional(self, drafts):
        accept, reach, r = np.zeros(self.V), 1.0, self.p
        free = self.q.copy()
        for x in drafts:
            proposal = free / free.sum()
            a = _ratio(r[x], proposal[x])
            accept[x] += reach * a
            reach *= 1.0 - a
            r = residual(r, proposal)
            free[x] = 0.0
        return accept, reach * r


class KSeq(SelectionRule):
    """SpecTr's K-SEQ (Sun et al. 2023) at its optimal ρ*.

    :math:`\\beta(\\rho) = \\sum_y \\min(p(y)/\\rho, q(y))`; :math:`\\rho^* \\in [1, n]` solves
    :math:`1 - (1 - \\beta)^n = \\rho \\beta`. Each draft in turn is accepted with probability
    :math:`\\min(1, p(x_i)/(\\rho^* q(x_i)))`; after n rejections sample the residual
    :math:`\\mathrm{norm}(p - A)` of the exact accepted marginal
    :math:`A = \\frac{1 - (1-\\beta)^n}{\\beta} \\min(q, p/\\rho^*)`. Acceptance
    :math:`1 - (1 - \\beta(\\rho^*))^n`, within :math:`(1 - 1/e)` of optimal (SpecTr Thm 3).

    Notes
    -----
    ρ* is found by bisection keeping :math:`1 - (1-\\beta)^n \\le \\rho\\beta`, i.e. A <= p, so the
    residual is a distribution and the rule is lossless for the ρ actually used.
    """

    name = "k-seq"

    def _beta(self, rho: float) -> float:
        return float(np.minimum(self.p / rho, self.q).sum())

    def _excess(self, rho: float) -> float:
        b = self._beta(rho)
        return 1.0 - (1.0 - b) ** self.n - rho * b

    def _prepare(self):
        lo, hi = 1.0, float(self.n)
        if self._excess(lo) <= 0.0:
            hi = lo
        for _ in range(200):
            if hi - lo <= 1e-15 * hi:
                break
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if self._excess(mid) > 0.0 else (lo, mid)
        self.rho = hi
        self.beta = self._beta(hi)
        accepted = np.minimum(self.q, self.p / hi)
        scale = (1.0 - (1.0 - self.beta) ** self.n) / self.beta if self.beta > 0 else 0.0
        self.res = residual(self.p, scale * accepted)
        self._res_cdf = _cdf(self.res)

    def conditional(self, drafts):
        accept, reach = np.zeros(self.V), 1.0
        for x in drafts:
            a = _ratio(self.p[x], self.rho * self.q[x])
            accept[x] += reach * a
            reach *= 1.0 - a
        return accept, reach * self.res

    def _step(self, drafts, rng):
        """One step of the procedure itself (law :meth:`conditional`), O(n + log V)."""
        return _sequential_select(lambda i, x: _ratio(self.p[x], self.rho * self.q[x]), drafts,
                                  self._res_cdf, rng)

    def closed_form_acceptance(self):
        return float(1.0 - (1.0 - self.beta) ** self.n)


class GreedyDrafts(SelectionRule):
    """Hu et al.'s greedy draft set (top n - 1 tokens of q plus one draw c from q renormalised outside
    them; SpecHub's set for n = 2) with its optimal verifier. It runs on every draft model that
    declares :attr:`~mdtheory.models.base.DraftModel.fixed_top` (fixed tokens ``top``, then one draw
    from ``tail``), not only on :class:`~mdtheory.models.greedy.Greedy`.

    Accept c with probability :math:`\\min(1, p(c)/\\tilde q(c))`; else sample the residual
    :math:`\\propto p` on the top tokens and :math:`(p - \\tilde q)^+` outside them. A residual token in
    the top is a drafted token, so it counts as accepted. Acceptance
    :math:`p(\\mathrm{top}) + \\sum_{c \\notin \\mathrm{top}} \\min(p(c), \\tilde q(c))`, the optimum
    for this draft set. Preparation O(V) (the draft model finds the top by one selection); a step
    O(log V).

    Attributes
    ----------
    marginal : ndarray, shape (V,)
        The same rule written as one candidate and one speculative step (the ``optimal`` rule's
        form, :class:`~mdtheory.rules.optimal.Optimal`): the candidate is c with probability
        :math:`a(c) = \\min(1, p(c)/\\tilde q(c))`, otherwise a top token t with probability
        :math:`p(t)/p(\\mathrm{top})` (none if :math:`p(\\mathrm{top}) = 0`). Its exact law is
        :math:`\\mu(c) = \\min(p(c), \\tilde q(c))` outside the top and
        :math:`\\mu(t) = R\\, p(t)/p(\\mathrm{top})` on it, with
        :math:`R = \\sum_c \\tilde q(c) (1 - a(c))` the probability that c is not the candidate.
    """

    name = "greedy"
    sampling = "greedy"
    needs = "fixed_top"

    def _prepare(self):
        self.tail = self.model.tail  # zero on the top tokens
        self.in_top = np.zeros(self.V, dtype=bool)
        self.in_top[self.model.top] = True
        # single-draft speculative sampling of c against q~; q~ = 0 on the top, so there the
        # residual is p itself
        self.res = residual(self.p, self.tail)
        self._res_cdf = _cdf(self.res)
        self.marginal = np.minimum(self.p, self.tail)  # zero on the top so far
        passed = float((self.tail - self.marginal).sum())  # R, a sum of non-negative terms
        top = self.model.top
        top_mass = float(self.p[top].sum())
        if top_mass > 0:  # p(t) <= p(top): the share cannot overflow
            self.marginal[top] = passed * (self.p[top] / top_mass)

    def conditional(self, drafts):
        c = int(drafts[-1])
        a = _ratio(self.p[c], self.tail[c])
        accept = np.where(self.in_top, (1.0 - a) * self.res, 0.0)
        accept[c] += a
        return accept, np.where(self.in_top, 0.0, (1.0 - a) * self.res)

    def _step(self, drafts, rng):
        """One step of the procedure itself (law :meth:`conditional`), O(log V)."""
        c = int(drafts[-1])
        if rng.random() < _ratio(self.p[c], self.tail[c]):
            return c, True
        y = _draw(self._res_cdf, rng)
        return y, bool(self.in_top[y])

    def closed_form_acceptance(self):
        from ..routes.greedy import greedy_closed_form

        return greedy_closed_form(self.p, self.model).value
