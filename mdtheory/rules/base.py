"""The interface every token-level selection rule implements, and what follows from it.

A rule prepares once per position from (p, q, n) and then, given a draft tuple x, has an exact
conditional law of its output Y and of the event "a draft was accepted":

.. math:: a(y \\mid x) = P(Y = y, \\text{accepted} \\mid x), \\qquad
          r(y \\mid x) = P(Y = y, \\text{not accepted} \\mid x).

Everything else is derived once, here: sampling a step (:meth:`SelectionRule.select` draws from
(a, r)), the exact acceptance :math:`\\sum_x Q(x) \\sum_y a(y \\mid x)` and exact output law
:math:`\\sum_x Q(x) [a + r](\\cdot \\mid x)` by enumeration over draft tuples, and Monte Carlo estimates.
Acceptance is the probability that the rule accepts one of the drafts; it is at most
:math:`P(Y \\in \\mathrm{set}(X)) \\le \\alpha^*` of the rule's draft model.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from .. import _budget
from .._jit import njit
from .._validate import as_distribution, as_generator
from ..errors import InvalidDistributionError, InvalidInputError, ProblemTooLargeError
from ..models.base import DraftModel
from ..models.registry import SAMPLINGS, make_draft_model

__all__ = ["SelectionRule", "SetPlanRule", "residual", "speculative_step", "MAX_ENUMERATION"]

#: Largest number of draft tuples :meth:`SelectionRule.enumerate` visits.
MAX_ENUMERATION = 200_000


def residual(target: np.ndarray, proposal: np.ndarray) -> np.ndarray:
    """norm((target - proposal)^+); ``target`` itself when that is zero (then it is never used)."""
    r = np.clip(target - proposal, 0.0, None)
    s = r.sum()
    return r / s if s > 0 else target


def speculative_step(p: np.ndarray, marginal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Single-draft speculative sampling of p against a proposal of law ``marginal``.

    Returns the acceptance probability :math:`\\min(1, p(y)/\\mu(y))` of each candidate y (1 where
    μ(y) = 0, never proposed) and the residual :math:`\\mathrm{norm}((p - \\mu)^+)`; with μ the exact
    marginal of the candidate, the output law is p (Khisti et al., Thm 1).
    """
    return _speculative(np.asarray(p, dtype=float), np.asarray(marginal, dtype=float))[:2]


def _speculative(p: np.ndarray, marginal: np.ndarray):
    """:func:`speculative_step` and the running sums of the residual (``np.cumsum``'s)."""
    if p.shape != marginal.shape or p.ndim != 1:  # the kernel reads both along p
        raise InvalidInputError(f"p and the marginal must be vectors of one length, got shapes "
                                f"{p.shape} and {marginal.shape}")
    ratio, excess, cdf = np.empty(p.size), np.empty(p.size), np.empty(p.size)
    _ratio_excess(p, marginal, ratio, excess)
    total = excess.sum()  # numpy's pairwise sum, as residual's
    if not total > 0:
        return ratio, p, np.cumsum(p)
    _normalise(excess, total, cdf)
    return ratio, excess, cdf


@njit(cache=True, error_model="numpy")
def _ratio_excess(p, marginal, ratio, excess):
    """min(1, p/μ) (divided only where p < μ: the quotient is below one, so a subnormal μ cannot
    overflow it) and (p - μ)^+, in one pass."""
    for y in range(p.size):
        ratio[y] = p[y] / marginal[y] if p[y] < marginal[y] else 1.0
        excess[y] = max(p[y] - marginal[y], 0.0)


@njit(cache=True, error_model="numpy")
def _normalise(res, total, cdf):
    """res / total in place, and its running sums left to right (``np.cumsum``'s), in one pass."""
    running = 0.0
    for y in range(res.size):
        res[y] /= total
        running = res[y] if y == 0 else running + res[y]
        cdf[y] = running


class SelectionRule(ABC):
    """A lossless token-level selection rule for multi-draft speculative sampling.

    Parameters
    ----------
    p : array_like, shape (V,)
        Target distribution.
    q : array_like, shape (V,)
        Draft distribution.
    n : int
        Number of drafts.
    normalize : bool
        Rescale p and q instead of refusing sums off one.

    Attributes
    ----------
    name : str
        Registry name.
    sampling : str
        The draft model the rule builds from q and n (a key of
        :data:`mdtheory.models.registry.SAMPLINGS`).
    needs : str or None
        Class attribute: the declared draft-model capability the rule runs on (the name of a
        boolean class attribute of :class:`~mdtheory.models.base.DraftModel`, e.g.
        ``"fixed_top"``): a ready draft model that declares it is accepted whatever its name.
        None: only the model ``sampling`` names.
    first_draft_only : bool
        Class attribute: the rule reads the first draft alone and needs its law to be q, so it runs
        on the drafts of every model whose first draft has law q (iid, without replacement), not
        only on its own ``sampling``.
    model : DraftModel
        That draft model built from q and n.
    prepare_seconds : float
        Wall time of the per-position preparation (validation included).
    """

    name: ClassVar[str] = ""
    sampling: ClassVar[str] = "iid"
    needs: ClassVar[str | None] = None
    first_draft_only: ClassVar[bool] = False

    @classmethod
    def estimate(cls, model: DraftModel) -> _budget.Estimate:
        """Time and memory of the preparation on ``model``, from its sizes alone, before any work:
        :func:`mdtheory.rules.make_rule` refuses it over the limits. Here a sort and a few passes
        over the V tokens; a rule that enumerates, fits or solves more states its own."""
        V = model.V
        return _budget.Estimate(f"{cls.name}: a sort and a few passes over {V} tokens",
                                1e-7 * V * max(math.log2(V), 1.0), 80.0 * V)

    def __init__(self, p: ArrayLike, q: ArrayLike | DraftModel, n: int, *, normalize: bool = False,
                 **params: Any) -> None:
        t0 = time.perf_counter()
        self.p = as_distribution(p, "p", normalize=normalize)
        if self.needs is not None and isinstance(q, DraftModel):  # any name: the capability counts
            self.model: DraftModel = make_draft_model(q, n)
        else:
            self.model = make_draft_model(q, n, self.sampling, normalize=normalize)
        expected = getattr(SAMPLINGS.get(self.sampling), "sampling", self.sampling)  # aliases
        fits = (self.model.sampling == expected if self.needs is None
                else bool(getattr(self.model, self.needs, False)))
        if not fits:  # a ready DraftModel of another kind
            kind = f"{expected} drafts" if self.needs is None else f"draft models with {self.needs}"
            raise InvalidInputError(
                f"{self.name} is a rule for {kind}; got a {self.model.sampling} draft model"
            )
        if self.p.size != self.model.V:
            raise InvalidDistributionError(
                f"p has length {self.p.size} but q has length {self.model.V}"
            )
        self.q = self.model.q  # None for models without one draft law (independent, joint)
        self.n, self.V = self.model.n, self.model.V
        self._prepare(**params)
        self.prepare_seconds = time.perf_counter() - t0

    @abstractmethod
    def _prepare(self, **params: Any) -> None:
        """Per-position preparation (residuals, LP solves, fitted weights)."""

    @abstractmethod
    def conditional(self, drafts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact (a(. | x), r(. | x)), two sub-probability vectors of shape (V,) summing to one."""

    def closed_form_acceptance(self) -> float | None:
        """The rule's acceptance by its published closed form, or None where there is none."""
        return None

    # ------------------------------------------------------------------ derived, shared by all rules
    def select(self, drafts: ArrayLike, rng: np.random.Generator | int | None = None
               ) -> tuple[int, bool]:
        """One verification step: the output token and whether a draft was accepted.

        Parameters
        ----------
        drafts : array_like of int, shape (n,)
            The draft tokens, each in ``0 .. V-1``.
        rng : None, int or numpy.random.Generator
            Random source, as :func:`numpy.random.default_rng` takes it.

        Returns
        -------
        (int, bool)
            The output token and whether it is an accepted draft.

        Raises
        ------
        InvalidInputError
            Drafts that are not n integer token ids in ``0 .. V-1``, or a bad ``rng``.
        """
        return self._step(self._check_drafts(drafts), as_generator(rng))

    def _check_drafts(self, drafts) -> np.ndarray:
        x = np.asarray(drafts)
        if x.dtype.kind not in "iu":  # numpy's integer kinds (not bool, kind "b")
            raise InvalidInputError(f"drafts must be integer token ids, got dtype {x.dtype}")
        if x.shape != (self.n,):
            raise InvalidInputError(f"{self.name} was prepared for n = {self.n} drafts; got drafts of "
                                    f"shape {x.shape}")
        if x.min() < 0 or x.max() >= self.V:
            bad = np.flatnonzero((x < 0) | (x >= self.V))
            raise InvalidInputError(f"drafts[{bad[0]}] = {x[bad[0]]} is not a token id in "
                                    f"0 .. {self.V - 1}")
        return x

    def _step(self, drafts: np.ndarray, rng: np.random.Generator) -> tuple[int, bool]:
        """:meth:`select` on checked drafts (Monte Carlo calls it on drafts it drew itself)."""
        accept, reject = self.conditional(drafts)
        u = rng.random()
        if u < accept.sum():
            return int(rng.choice(self.V, p=accept / accept.sum())), True
        return int(rng.choice(self.V, p=reject / reject.sum())), False

    def enumerate(self) -> tuple[float, np.ndarray]:
        """Exact (acceptance, output law) by summing over the draft tuples of positive probability.

        Raises
        ------
        ProblemTooLargeError
            More than :data:`MAX_ENUMERATION` tuples.
        """
        count = self.model.count_tuples()
        if count > MAX_ENUMERATION:
            raise ProblemTooLargeError(
                f"{self.name}: exact enumeration visits up to {count:.3g} draft tuples, over "
                f"{MAX_ENUMERATION:g}; use Monte Carlo"
            )
        law = self.model.tuple_law()
        accepted, output = 0.0, np.zeros(self.V)
        for x, w in zip(law.tuples, law.probs, strict=True):
            a, r = self.conditional(x)
            accepted += w * a.sum()
            output += w * (a + r)
        return float(accepted), output

    def exact_acceptance(self) -> float:
        """Closed form where the rule has one, else exact enumeration."""
        closed = self.closed_form_acceptance()
        return closed if closed is not None else self.enumerate()[0]

    def exact_output_law(self) -> np.ndarray:
        return self.enumerate()[1]

    def acceptance(self, samples: int = 20_000, rng: np.random.Generator | int | None = None, *,
                   max_seconds: float | None = _budget.MAX_SECONDS,
                   max_bytes: float | None = _budget.MAX_BYTES, repeats: int = 1,
                   progress: Callable[[int], object] | None = None
                   ) -> tuple[float, bool, tuple[float, float] | None]:
        """The rule's acceptance by the cheapest exact means, else by Monte Carlo: its closed form
        (:meth:`closed_form_acceptance`), exact enumeration where the draft tuples number at most
        :data:`MAX_ENUMERATION` (:meth:`enumerate`), or ``samples`` steps (:meth:`monte_carlo`).

        Parameters
        ----------
        samples : int
            Monte Carlo steps where neither exact means applies.
        rng : None, int or numpy.random.Generator
            Random source of the Monte Carlo steps.
        max_seconds, max_bytes : float or None
            The work is estimated first (:func:`mdtheory._budget.enumeration`,
            :func:`mdtheory._budget.monte_carlo`) and refused over them; None: no limit.
        repeats : int
            The work is estimated as if done this many times (the positions of a batch, each
            asking for its own acceptance).
        progress : callable, optional
            Passed to :meth:`monte_carlo`.

        Returns
        -------
        (float, bool, (float, float) or None)
            The acceptance, whether it is exact, and the Monte Carlo estimate's 95% interval (None
            when exact).

        Raises
        ------
        ProblemTooLargeError
            The enumeration or the Monte Carlo run is estimated over the limits.
        """
        max_seconds, max_bytes = _budget.limits(max_seconds, max_bytes)
        closed = self.closed_form_acceptance()
        if closed is not None:
            return closed, True, None
        count = self.model.count_tuples()
        if count <= MAX_ENUMERATION:
            _budget.require(_budget.repeated(_budget.enumeration(count, self.n, self.V), repeats),
                            max_seconds, max_bytes=max_bytes, flag="max_seconds")
            return self.enumerate()[0], True, None
        _budget.require(_budget.repeated(self._monte_carlo_estimate(samples), repeats), max_seconds,
                        max_bytes=max_bytes, flag="max_seconds")
        mc = self.monte_carlo(samples, rng, progress=progress, max_seconds=None, max_bytes=None)
        return mc["acceptance"], False, mc["ci95"]

    def _monte_carlo_estimate(self, samples) -> _budget.Estimate:
        """:func:`mdtheory._budget.monte_carlo` of ``samples`` checked steps of this rule."""
        if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
            raise InvalidInputError(f"Monte Carlo needs an integer number of samples >= 1, got "
                                    f"{samples!r}")
        return _budget.monte_carlo(int(samples), self.n, self.V)

    def monte_carlo(self, samples: int, rng: np.random.Generator | int | None = None,
                    progress: Callable[[int], object] | None = None, *,
                    max_seconds: float | None = _budget.MAX_SECONDS,
                    max_bytes: float | None = _budget.MAX_BYTES) -> dict[str, Any]:
        """Simulate drafts and verification; acceptance estimate with a 95% normal interval.

        Draft tuples are drawn in chunks of :func:`mdtheory._budget.mc_chunk` (sampling buffers of at
        most :data:`mdtheory._budget.CHUNK_BYTES`), so memory does not grow with ``samples``.

        Parameters
        ----------
        samples : int
            At least 1.
        rng : None, int or numpy.random.Generator
            Random source, as :func:`numpy.random.default_rng` takes it.
        progress : callable, optional
            Called with the number of steps done after each chunk.
        max_seconds, max_bytes : float or None
            The run is estimated first (:func:`mdtheory._budget.monte_carlo`, from ``samples``, n and
            V) and refused over them (default 60 s and 4 GiB); None: no limit.

        Returns
        -------
        dict
            ``acceptance``, ``ci95`` (pair), ``counts`` (output token counts, shape (V,)).

        Raises
        ------
        InvalidInputError
            ``samples`` is not an integer >= 1, a bad ``rng`` or limit.
        ProblemTooLargeError
            The run is estimated over ``max_seconds`` or ``max_bytes``, before any step.
        """
        est = self._monte_carlo_estimate(samples)
        max_seconds, max_bytes = _budget.limits(max_seconds, max_bytes)
        _budget.require(est, max_seconds, max_bytes=max_bytes, flag="max_seconds")
        rng = as_generator(rng)
        chunk = max(1, min(_budget.mc_chunk(self.V), _budget.CHUNK_BYTES // (8 * self.n)))  # as audit's
        counts = np.zeros(self.V, dtype=np.int64)
        hits = 0
        for start in range(0, samples, chunk):
            size = min(chunk, samples - start)
            for x in self.model.sample(rng, size):
                y, ok = self._step(x, rng)
                counts[y] += 1
                hits += ok
            if progress is not None:
                progress(size)
        est = hits / samples
        half = 1.96 * np.sqrt(max(est * (1 - est), 1.0 / samples) / samples)
        return {"acceptance": est, "ci95": (max(est - half, 0.0), min(est + half, 1.0)),
                "counts": counts}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(V={self.V}, n={self.n})"


class SetPlanRule(SelectionRule):
    """A rule whose importance-sampling step is a plan over draft sets, then one speculative step.

    Subclasses set, in ``_prepare``, a plan :math:`\\pi(y \\mid U)` for every draft set U (support y ∈ U,
    total at most 1, the rest meaning "no candidate") through :meth:`_use_plan`. The speculative step
    runs against the exact marginal :math:`A(y) = \\sum_U w_U \\pi(y \\mid U)` of the plan actually
    stored: accept the candidate y with probability :math:`\\min(1, p(y)/A(y))`, otherwise sample
    :math:`\\mathrm{norm}((p - A)^+)`. The output law is p for any plan (Khisti et al., Thm 1), and the
    acceptance is :math:`\\sum_y \\min(p(y), A(y))`.
    """

    def _use_plan(self, members: np.ndarray, w: np.ndarray, plan: np.ndarray) -> None:
        plan = np.where(members, np.clip(plan, 0.0, None), 0.0)
        plan /= np.maximum(plan.sum(axis=1, keepdims=True), 1.0)  # a row may not exceed 1
        self.plan = plan
        self.set_index = {frozenset(np.flatnonzero(row).tolist()): k for k, row in enumerate(members)}
        self._use_marginal(w @ plan)

    def _use_marginal(self, marginal: np.ndarray) -> None:
        """Store the exact marginal of the candidate and the speculative step against it (with the
        residual's running sums, ``_res_cdf``)."""
        self.marginal = marginal
        self.accept_ratio, self.res, self._res_cdf = _speculative(self.p, marginal)

    def conditional(self, drafts):
        """The plan's row for the draft set times the acceptance ratio, the rest on the residual.

        A draft set of probability 0 under the draft model (its probability underflowed, e.g. a token
        of q = 1e-300 drafted twice) has no plan row: nothing is proposed and the step outputs the
        residual, a valid law; such a set carries no weight in the output law, which stays p.
        """
        k = self.set_index.get(frozenset(np.asarray(drafts).tolist()))
        if k is None:
            return np.zeros(self.V), self.res.copy()
        accept = self.plan[k] * self.accept_ratio
        return accept, max(1.0 - accept.sum(), 0.0) * self.res  # 1 - (1 + ulp) is not a mass

    def closed_form_acceptance(self):
        return float(np.minimum(self.p, self.marginal).sum())
