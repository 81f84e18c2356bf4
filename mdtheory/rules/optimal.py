"""The optimal verifier: the lexicographically optimal base realised by a time schedule.

See papers/theory.md §5.
"""

from __future__ import annotations

import math
import time
import warnings
from abc import ABC, abstractmethod

import numpy as np

from .. import _budget
from .._budget import MAX_SECONDS, Estimate
from ..errors import InvalidInputError, OptimalityGapWarning
from ..models.mixture import OrderMixture
from ..models.polymatroid import lex_optimal_base_iid
from ..routes.mnp import MNP_ACCEPT, min_norm_base
from .base import SetPlanRule
from .baselines import GreedyDrafts
from .cells import MAX_CELL_DRAFTS, CellSchedule
from .schedule import _realise

__all__ = ["Optimal", "MAX_PLAN_SETS", "Strategy", "STRATEGIES", "REALISATIONS", "strategy_for"]

#: Non-iid drafts: the LP plan over draft sets up to this many sets, the order mixture beyond.
MAX_PLAN_SETS = 2_000


class Optimal(SetPlanRule):
    """Optimal selection: acceptance α* of the draft model, output law exactly p.

    **iid drafts** (the default), up to :data:`~mdtheory.rules.cells.MAX_CELL_DRAFTS` (256) drafts:
    cells of time and swaps between them (:class:`~mdtheory.rules.cells.CellSchedule`; proof:
    papers/theory.md, section "The optimal rule batched: cells of time and swaps between them").
    Tokens in the order of q/p own consecutive cells of [0, 1]; a target marginal from the running
    minima of G - P attains :math:`\\sum_y \\min(p, \\mu) = \\alpha^*`; cells above their target swap
    time with later cells below theirs. Every draft draws a time from its token's cells and the
    earliest draft is the candidate, whose exact law μ (:attr:`marginal`) is computed from the stored
    pieces. One speculative step against μ follows: accept the candidate y with probability
    :math:`\\min(1, p(y)/\\mu(y))`, otherwise sample :math:`\\mathrm{norm}((p - \\mu)^+)`. The output
    law is p (Khisti et al., Thm 1) and the acceptance is α* up to float rounding (within 1e-12,
    ``tests/test_fuzz_optimal.py``); preparation is one sort of q/p and a few linear passes (about
    3x one ``np.argsort`` at V = 32,000, ``benchmarks/bench_speed.py``). Tokens with q below
    :data:`~mdtheory.rules.cells.FRONT_Q` (2^-51) take their cells at the front of [0, 1], where
    floats are finest, so every token with q > 0 owns time; this costs at most n times their mass
    of acceptance.

    **iid drafts, any n** (``realise="windows"``, and beyond 256 drafts): the lexicographically
    optimal base μ* of the coverage polymatroid
    (:func:`mdtheory.models.polymatroid.lex_optimal_base_iid`, one sort and one convex hull) attains
    :math:`\\sum_y \\min(p, \\mu^*) = \\alpha^*`, and a time schedule of windows
    (:func:`mdtheory.rules.schedule.realise_iid`) makes it a rule: every draft draws a time from its
    token's pieces of [0, 1], the earliest draft is the candidate, whose law is the schedule's exact
    marginal μ (μ* up to rounding), then the same speculative step. At most
    :data:`mdtheory.rules.schedule.MAX_DRAFTS` (2^20) drafts: a schedule's G-masses are powers of
    degree n, each exact to about n 2^-53.

    *Every valid input* includes subnormal and underflowing masses, by design: the base treats
    masses below :data:`mdtheory.models.polymatroid.TINY` (2^-600) as zero, which moves α* by less than
    (n + 1) V 2^-600 and keeps every ratio and slope finite; the schedule gives tokens with
    q < :data:`mdtheory.rules.schedule.SHORT` (2^-70) their pieces first, so every token with q > 0 owns
    a piece and the per-tuple law (:meth:`conditional`, closed form) is finite. The speculative
    step always uses the true p and the schedule's exact marginal, so the output law is p whatever
    the base. Accuracy of the acceptance: :func:`mdtheory.rules.schedule.realise_iid` (Notes); measured
    within 1e-12 of α* up to V = 128k, n = 1024 (``benchmarks/bench_gap.py``,
    ``benchmarks/fuzz_optimal.py``).

    **Greedy drafts** (``sampling="greedy"``, or any model declaring
    :attr:`~mdtheory.models.base.DraftModel.fixed_top`; Hu et al.'s set: the top n - 1 tokens of q and one
    draw c from :math:`\\tilde q`, q renormalised outside them). Closed form, O(V) with the draft
    model's one selection, at any V: the verifier of the ``greedy`` rule
    (:class:`~mdtheory.rules.baselines.GreedyDrafts`), whose law per draft tuple is that of one
    candidate and one speculative step against its exact marginal (stored as :attr:`marginal`); the
    acceptance is α* of the greedy set and the output law p (proof: papers/theory.md, section "The
    greedy draft set's optimal verifier"). n = 1 (empty top) is single-draft speculative sampling.

    **Independent drafts** (``sampling="independent"``, q of shape (n, V)), and any other draft model
    with more than :data:`MAX_PLAN_SETS` draft sets (successive sampling, conditional Poisson:
    their vertices come from the one-pass prefix containments). The minimum-norm-point
    base (:func:`mdtheory.routes.mnp.min_norm_base`, no enumeration) is a mixture of priority
    orders; the rule draws an order and proposes the highest-ranked drafted token
    (:class:`mdtheory.models.mixture.OrderMixture`), whose exact marginal μ is recomputed from the
    orders, then the same speculative step against μ: acceptance :math:`\\sum_y \\min(p, \\mu)`, within
    :data:`mdtheory.routes.mnp.MNP_TOL` of α* (:data:`~mdtheory.routes.mnp.MNP_ACCEPT` where
    the run stalls). Where the method does not close (a known failure: p one of the drafts' laws
    or near one, :func:`~mdtheory.routes.mnp.min_norm_base`, Notes), the rule is still built from
    the run's order mixture: lossless (its marginal is exact), accepting with
    :math:`\\sum_y \\min(p, \\mu)`, a proven lower bound on α*, short of it by at most the gap
    reported in :attr:`alpha_bounds` and by an :class:`~mdtheory.errors.OptimalityGapWarning`.

    **Other draft models, small** (``sampling="without-replacement"``, ...). A maximum flow S(U, y)
    of the token/draft-set network (HiGHS, from the dual LP's row duals,
    :func:`mdtheory.routes.dual.dual_lp`) is an optimal relaxed OTLP plan: given the draft set U, propose
    y ∈ U with probability :math:`S(U, y)/w_U`, then the same speculative step against the plan's
    exact marginal. Preparation enumerates the draft sets, so it is for small sizes (at most
    :data:`MAX_PLAN_SETS` sets).

    Parameters
    ----------
    sampling : str
        Draft model (default ``"iid"``); any model of :data:`mdtheory.models.registry.SAMPLINGS` built from
        (q, n) works.
    max_seconds : float
        Order mixtures only: Wolfe's iterations stop this long after the rule is created, the rule
        then built from the run's order mixture with its proven bounds (default 60 s).
    realise : str
        iid drafts: ``"cells"`` (default; the windows beyond 256 drafts) or ``"windows"``
        (:data:`REALISATIONS`).

    The four cases are four :class:`Strategy` objects (:data:`STRATEGIES`): the rule picks one per
    draft model, once (:func:`strategy_for`), and hands it the estimate, the preparation, the exact
    law of a step and the step.

    Attributes
    ----------
    strategy : Strategy
        The one serving this rule's draft model.
    marginal : ndarray, shape (V,)
        Exact law of the candidate.
    schedule : CellSchedule, Schedule or None
        The time schedule the candidate is drawn from (iid drafts): its cells and swaps
        (``realise="cells"``), or its windows (``realise="windows"``, or n > 256); each has the
        candidate's exact law (``marginal``, ``candidate_law``).
    base : LexBase or None
        The lexicographically optimal base the windows realise.
    mixture : OrderMixture or None
        The order mixture it samples (independent drafts; other non-iid models beyond
        :data:`MAX_PLAN_SETS` draft sets).
    greedy : GreedyDrafts or None
        The verifier it runs (greedy drafts).
    alpha_bounds : tuple of float or None
        Order mixtures only: (its acceptance :math:`\\sum_y \\min(p, \\mu)`, the best cut's value
        :math:`1 + p(T) - Q(T)`), proven bounds on α*; they differ by more than
        :data:`~mdtheory.routes.mnp.MNP_ACCEPT` only where the method did not close (then an
        :class:`~mdtheory.errors.OptimalityGapWarning` is issued). None for the other routes.

    References
    ----------
    Khisti et al., ICLR 2025, Thm 1; Fujishige (lexicographically optimal base); Thomas & Pal,
    ICLR 2026 (max-flow form); Hu et al., ICLR 2025 (greedy draft set).
    """

    name = "optimal"

    def __init__(self, p, q, n, *, sampling: str = "iid", normalize: bool = False,
                 max_seconds: float = MAX_SECONDS, realise: str = "cells", **params):
        if realise not in REALISATIONS:
            raise InvalidInputError(f"realise must be one of {', '.join(REALISATIONS)}, got {realise!r}")
        self.sampling = sampling
        self.realise = realise
        self.deadline = time.perf_counter() + max_seconds
        super().__init__(p, q, n, normalize=normalize, **params)

    @classmethod
    def estimate(cls, model) -> Estimate:
        """The preparation's estimate on ``model``, by the strategy :func:`strategy_for` picks: the
        greedy verifier (O(V)), the minimum-norm point (:func:`mdtheory._budget.min_norm_point`;
        stopped at ``max_seconds`` anyway), the dual LP over the draft sets, or for iid drafts a
        sort and linear passes (cells), or a sort, a convex hull and the windows (O(V log V))."""
        return strategy_for(model).estimate(model)

    def _prepare(self):
        self.strategy = strategy_for(self.model, self.realise)(self)

    schedule = property(lambda self: self.strategy.schedule,
                        doc="The time schedule its candidate is drawn from (iid drafts).")
    base = property(lambda self: self.strategy.base, doc="The base the windows realise (iid drafts).")
    mixture = property(lambda self: self.strategy.mixture, doc="The order mixture it samples.")
    greedy = property(lambda self: self.strategy.greedy, doc="The verifier it runs (greedy drafts).")
    alpha_bounds = property(lambda self: self.strategy.alpha_bounds,
                            doc="Proven bounds on alpha* (order mixtures).")

    def conditional(self, drafts):
        return self.strategy.conditional(self, drafts)

    def _step(self, drafts, rng):
        return self.strategy.step(self, drafts, rng)


class Strategy(ABC):
    """How the optimal rule proposes its candidate on one kind of draft model.

    The rule picks one strategy per draft model (:func:`strategy_for`, the first of
    :data:`STRATEGIES` whose :meth:`fits` admits the model) and hands it every call that depends on
    the kind: the estimate, the preparation (the constructor, which gives the rule its exact
    marginal), the exact law of a step (:meth:`conditional`) and a step (:meth:`step`). The default
    step is a candidate (:meth:`candidate`, law :meth:`candidate_law`) and one speculative step
    against the rule's marginal.

    Attributes
    ----------
    schedule, base, mixture, greedy, alpha_bounds
        What the strategy built, None where it builds no such thing (see :class:`Optimal`).
    """

    schedule = base = mixture = greedy = alpha_bounds = None

    @staticmethod
    @abstractmethod
    def fits(model) -> bool:
        """Whether the strategy serves ``model`` (asked in the order of :data:`STRATEGIES`)."""

    @staticmethod
    @abstractmethod
    def estimate(model) -> Estimate:
        """The preparation's time and memory on ``model``, from its sizes alone."""

    @abstractmethod
    def __init__(self, rule: Optimal):
        """Prepare the strategy for ``rule`` (its p, q and draft model)."""

    def candidate(self, drafts: np.ndarray, rng: np.random.Generator) -> int:
        """A candidate among ``drafts`` (for the default :meth:`step`; a strategy that overrides
        :meth:`step` and :meth:`conditional` need not draw one)."""
        raise TypeError(f"{type(self).__name__} draws no candidate of its own: it defines step")

    def candidate_law(self, drafts: np.ndarray) -> np.ndarray:
        """The exact law of :meth:`candidate` given ``drafts``, shape (V,)."""
        raise TypeError(f"{type(self).__name__} draws no candidate of its own: it defines conditional")

    def conditional(self, rule: Optimal, drafts):
        accept = self.candidate_law(drafts) * rule.accept_ratio
        return accept, max(1.0 - accept.sum(), 0.0) * rule.res

    def step(self, rule: Optimal, drafts, rng):
        y = self.candidate(drafts, rng)
        if rng.random() < rule.accept_ratio[y]:
            return y, True
        k = np.searchsorted(rule._res_cdf, rng.random() * rule._res_cdf[-1], side="right")
        return int(min(k, rule.V - 1)), False


class GreedyVerifier(Strategy):
    """Greedy drafts (any model declaring ``fixed_top``): the ``greedy`` rule's verifier, whose
    steps the rule runs as they are."""

    @staticmethod
    def fits(model) -> bool:
        return bool(model.fixed_top)

    @staticmethod
    def estimate(model) -> Estimate:
        V = model.V
        return Estimate(f"optimal rule on {model.sampling} drafts, V = {V}", 1e-7 * V, 40.0 * V)

    def __init__(self, rule: Optimal):
        self.greedy = GreedyDrafts(rule.p, rule.model, rule.n)
        rule.marginal = self.greedy.marginal

    def conditional(self, rule, drafts):
        return self.greedy.conditional(drafts)

    def step(self, rule, drafts, rng):
        return self.greedy._step(drafts, rng)


class MixtureOfOrders(Strategy):
    """Independent drafts, and the other models with more than :data:`MAX_PLAN_SETS` draft sets:
    the minimum-norm-point base as a mixture of priority orders, with its proven bounds."""

    @staticmethod
    def fits(model) -> bool:
        return model.qs is not None or (
            not model.lex_base_closed_form and model.count_sets() > MAX_PLAN_SETS)

    @staticmethod
    def estimate(model) -> Estimate:
        return _budget.min_norm_point(model)

    def __init__(self, rule: Optimal):
        base = min_norm_base(rule.p, rule.model, strict=False, deadline=rule.deadline)
        self.mixture = OrderMixture(rule.model, base.orders, base.weights, base.vertices)
        rule._use_marginal(self.mixture.marginal)
        self.alpha_bounds = (rule.closed_form_acceptance(), base.upper)
        if not base.upper - self.alpha_bounds[0] <= MNP_ACCEPT:
            warnings.warn(OptimalityGapWarning(
                f"optimal rule ({rule.model.sampling} drafts): the minimum-norm-point method left "
                f"a gap of {base.upper - self.alpha_bounds[0]:.3g}; the rule is lossless and "
                f"accepts with {self.alpha_bounds[0]:.12g}, alpha* <= {base.upper:.12g} "
                "(alpha_bounds)"), stacklevel=6)

    def candidate(self, drafts, rng):
        return self.mixture.candidate(drafts, rng)

    def candidate_law(self, drafts):
        return self.mixture.candidate_law(drafts)


class SetPlan(Strategy):
    """Other draft models, small: a maximum flow of the token/draft-set network (the dual LP's),
    as a plan over the draft sets (the rule's :class:`~mdtheory.rules.base.SetPlanRule` steps)."""

    @staticmethod
    def fits(model) -> bool:
        return not model.lex_base_closed_form

    @staticmethod
    def estimate(model) -> Estimate:
        return _budget.law_route(model, "dual")

    def __init__(self, rule: Optimal):
        from ..routes.dual import dual_lp  # HiGHS, loaded where a plan is built

        flow = dual_lp(rule.p, rule.model).proof  # a SetFlow
        w = flow.support_probs
        # a set whose probability underflowed to 0 gets an empty plan row, not 0/0; the solver's
        # S(U, y) <= w_U up to its tolerance, 1e-10 over a w_U = 2e-322: capped, not inf (NaN rows)
        plan = np.divide(np.minimum(flow.flow, w[:, None]), w[:, None], out=np.zeros(flow.flow.shape),
                         where=w[:, None] > 0)
        rule._use_plan(flow.support, w, plan)

    def conditional(self, rule, drafts):
        return SetPlanRule.conditional(rule, drafts)

    def step(self, rule, drafts, rng):
        return SetPlanRule._step(rule, drafts, rng)


class TimeCells(Strategy):
    """iid drafts, up to :data:`~mdtheory.rules.cells.MAX_CELL_DRAFTS`: cells of time in the order of
    q/p and swaps between them (:class:`~mdtheory.rules.cells.CellSchedule`), one sort and linear
    passes."""

    @staticmethod
    def fits(model) -> bool:
        return bool(model.lex_base_closed_form) and model.n <= MAX_CELL_DRAFTS

    @staticmethod
    def estimate(model) -> Estimate:
        V = model.V
        return Estimate(f"optimal rule on iid drafts, V = {V}, n = {model.n}: cells of time and "
                        "their swaps", 2e-8 * V * max(math.log2(V), 1.0), 160.0 * V)

    def __init__(self, rule: Optimal):
        self.schedule = CellSchedule(rule.p, rule.q, rule.n)
        rule._use_marginal(self.schedule.marginal)

    def candidate(self, drafts, rng):
        return self.schedule.candidate(drafts, rng)

    def candidate_law(self, drafts):
        return self.schedule.candidate_law(drafts)


class TimeSchedule(Strategy):
    """iid drafts, any number (``realise="windows"``, and beyond
    :data:`~mdtheory.rules.cells.MAX_CELL_DRAFTS`): the lexicographically optimal base and its time
    schedule of windows."""

    @staticmethod
    def fits(model) -> bool:
        return bool(model.lex_base_closed_form)

    @staticmethod
    def estimate(model) -> Estimate:
        V = model.V
        return Estimate(f"optimal rule on iid drafts, V = {V}, n = {model.n}: a base and its "
                        "schedule", 1e-7 * V * max(math.log2(V), 1.0), 200.0 * V)

    def __init__(self, rule: Optimal):
        self.base = lex_optimal_base_iid(rule.p, rule.q, rule.n)
        # realise_iid's checks, less their cost: q divided by its float sum once more, mu as built;
        # the base's order makes the schedule's sort linear
        self.schedule = _realise(self.base.mu, rule.q / rule.q.sum(), rule.n, self.base.order)
        rule._use_marginal(self.schedule.marginal)

    def candidate(self, drafts, rng):
        return self.schedule.candidate(drafts, rng)

    def candidate_law(self, drafts):
        return self.schedule.candidate_law(drafts)


#: The optimal rule's strategies, in the order :func:`strategy_for` asks them.
STRATEGIES: tuple[type[Strategy], ...] = (GreedyVerifier, MixtureOfOrders, SetPlan, TimeCells,
                                          TimeSchedule)
#: The iid realisations by name (``Optimal(..., realise=NAME)``).
REALISATIONS = {"cells": TimeCells, "windows": TimeSchedule}


def strategy_for(model, realise: str = "cells") -> type[Strategy]:
    """The first of :data:`STRATEGIES` that fits ``model`` (every model fits one: the set plan
    takes every model without the iid closed form, the schedules the rest); for iid drafts,
    ``realise="windows"`` asks for the window schedule whatever n."""
    if realise == "windows" and TimeSchedule.fits(model):
        return TimeSchedule
    return next(s for s in STRATEGIES if s.fits(model))
