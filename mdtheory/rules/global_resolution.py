"""Global Resolution's softmax rule (Thomas & Pal, ICLR 2026), fitted by its convex programs."""

from __future__ import annotations

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

from .. import _budget
from ..errors import InvalidInputError
from ..models.polymatroid import lex_optimal_base_iid
from .base import SetPlanRule

__all__ = ["GlobalResolution"]


class GlobalResolution(SetPlanRule):
    """Softmax selection with weights from two convex programs, iid drafts.

    Let H* be the optimal cut set and O its complement. If the draft set U meets O, propose a drafted
    token of O with probability :math:`\\propto e^{\\alpha_i}`; if U ⊆ H*, propose y ∈ U with
    probability :math:`e^{\\beta_y} / (1 + \\sum_{j \\in U} e^{\\beta_j})` or no candidate. The weights
    minimise

    .. math:: \\Phi(\\alpha) = \\sum_{U \\cap O \\ne \\emptyset} w_U
              \\,\\mathrm{logsumexp}(\\alpha_{U \\cap O}) - \\sum_{i \\in O} t_i \\alpha_i, \\qquad
              \\Theta(\\beta) = \\sum_{U \\subseteq H^*} w_U \\log(1 + \\sum_{j \\in U} e^{\\beta_j})
              - \\sum_{i \\in H^*} p_i \\beta_i,

    whose gradients are (marginal - target): at the optimum tokens of H* receive p and tokens of O
    receive t. Φ is usually stated with p as the target (papers/theory.md §5); since the sets
    meeting O carry only :math:`1 - Q(H^*) < p(O)` when α* < 1, that Φ is unbounded below, so the
    targets here are the lexicographically optimal base on O
    (:func:`~mdtheory.models.polymatroid.lex_optimal_base_iid`), which sums to 1 - Q(H*) and is at most p.
    Both programs are solved by L-BFGS-B to gradient tolerance τ, as Global Resolution does; the
    speculative step then runs against the exact marginal of the fitted weights
    (:class:`~mdtheory.rules.base.SetPlanRule`), so the rule is lossless for every τ and its
    acceptance falls short of α* by at most the fit error.

    Parameters
    ----------
    tau : float
        L-BFGS-B gradient tolerance (default 1e-3, the paper's).

    Attributes
    ----------
    fit : dict
        L-BFGS-B iterations and the largest |marginal - target| of each program.
    """

    name = "gr-softmax"
    #: Seconds of the two L-BFGS-B fits: FIT_SECONDS * (sets * V) ** 1.5 (measured, 2-core x86).
    FIT_SECONDS = 2e-9

    @classmethod
    def estimate(cls, model) -> _budget.Estimate:
        """The set law's forward pass, then two softmax fits over draft sets x tokens."""
        sets, V = float(model.count_sets()), model.V
        return _budget.Estimate(f"gr-softmax: fits over {sets:.3g} draft sets x {V} tokens",
                                sets * V * _budget.LAW_CELL_SECONDS
                                + cls.FIT_SECONDS * _budget.capped_power(sets * V, 1.5), 40.0 * sets * V)

    def _prepare(self, tau: float = 1e-3):
        if not (isinstance(tau, (int, float)) and tau > 0):
            raise InvalidInputError(f"gr-softmax needs a tolerance tau > 0, got {tau!r}")
        law = self.model.set_law()
        members, w = law.members, law.probs
        base = lex_optimal_base_iid(self.p, self.q, self.n)
        inside = np.zeros(self.V, dtype=bool)
        inside[base.cut] = True
        meets_out = (members & ~inside).any(axis=1)
        plan = np.zeros(members.shape)
        self.fit = {}
        for part, rows, target, reject in (("phi", meets_out, base.mu, False),
                                           ("theta", ~meets_out, self.p, True)):
            tokens = ~inside if part == "phi" else inside
            if not rows.any() or not tokens.any():
                continue
            mask = members[rows][:, tokens]
            coef = self._fit(mask, w[rows], target[tokens], reject, tau, part)
            plan_rows = np.zeros((rows.sum(), self.V))
            plan_rows[:, tokens] = self._probs(coef, mask, reject)
            plan[rows] = plan_rows
        self._use_plan(members, w, plan)

    @staticmethod
    def _probs(coef: np.ndarray, mask: np.ndarray, reject: bool) -> np.ndarray:
        logits = np.where(mask, coef[None, :], -np.inf)
        if reject:  # an always-present "no candidate" option of logit 0
            norm = np.logaddexp(logsumexp(logits, axis=1), 0.0)
        else:
            norm = logsumexp(logits, axis=1)
        return np.exp(logits - norm[:, None])

    def _fit(self, mask, w, target, reject, tau, part):
        def value_and_grad(coef):
            logits = np.where(mask, coef[None, :], -np.inf)
            norm = logsumexp(logits, axis=1)
            if reject:
                norm = np.logaddexp(norm, 0.0)
            probs = np.exp(logits - norm[:, None])
            return float(w @ norm - target @ coef), w @ probs - target

        lo, hi = -60.0, 60.0
        res = optimize.minimize(value_and_grad, np.zeros(mask.shape[1]), jac=True,
                                method="L-BFGS-B", bounds=[(lo, hi)] * mask.shape[1],
                                options={"gtol": tau, "ftol": 0.0, "maxiter": 10_000})
        # projected gradient: a coordinate held at a bound by the sign of its gradient is stationary
        grad = np.where(((res.x <= lo) & (res.jac > 0)) | ((res.x >= hi) & (res.jac < 0)), 0.0,
                        res.jac)
        self.fit[part] = {"iterations": int(res.nit),
                          "max_marginal_error": float(np.abs(grad).max())}
        return res.x
