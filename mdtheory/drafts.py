"""Draft models: the joint law Q of the draft tuple X = (X_1, ..., X_n) over an alphabet of V tokens.

Every formulation of the optimal acceptance consumes a :class:`DraftModel` through three exact
quantities (papers/theory.md §1, §3):

* the **containment** :math:`Q(T) = P(X_1, \\dots, X_n \\in T)` of a token set ``T``;
* the **set law** :math:`w_U = P(\\mathrm{set}(X) = U)`, the law of the set of distinct drafted tokens;
* the **tuple law** :math:`Q(x)` over ordered draft tuples (small sizes only; it is what the literal
  optimal-transport LP is written over).

Models
------
=========================  ==================================================================
``iid``                    n independent draws from q (sampling with replacement).
``without-replacement``    successive sampling: each draft from q renormalised on the tokens not
                           yet drafted; the law of ``torch.multinomial(q, n, replacement=False)``
                           and of the Gumbel-top-k trick.
``conditional-poisson``    P(set(X) = A) proportional to prod_{i in A} q_i over |A| = n, in a
                           uniformly random order. Not successive sampling (papers/theory.md §3).
``independent``            independent drafts with different laws q_1, ..., q_n.
``joint``                  an explicit table Q(x_1, ..., x_n).
``greedy``                 Hu et al.'s greedy set: the n - 1 most likely tokens of q and one
                           draw from q renormalised outside them.
=========================  ==================================================================

Adding a draft model touches its own code only: a subclass of :class:`DraftModel` with its
declarations (``single_q``, ``prefix_property``, ``lex_base_closed_form``,
``closed_form_containment``, ``fixed_top``, ``order_vertices``, ``qs``) and, to be found by name,
:func:`register_sampling`. The routes, the certificate, the rules, the audit and the command line read
these declarations and the documented hooks (:meth:`DraftModel.prefix_pass`, the size estimates
:meth:`DraftModel.prefix_pass_seconds`, :meth:`DraftModel.law_seconds`,
:meth:`DraftModel.subset_row_seconds`) instead of testing model names or classes.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from fractions import Fraction
from itertools import combinations, permutations, product
from typing import ClassVar, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from . import _budget
from ._validate import as_distribution, as_drafts, as_fractions, as_generator, as_order, as_size
from .errors import InvalidDistributionError, InvalidInputError, ProblemTooLargeError

__all__ = [
    "COUNT_CAP",
    "DraftModel",
    "IID",
    "WithoutReplacement",
    "ConditionalPoisson",
    "Independent",
    "Joint",
    "Greedy",
    "SetLaw",
    "TupleLaw",
    "SAMPLINGS",
    "register_sampling",
    "sampling_names",
    "file_samplings",
    "PREFIX_SAMPLINGS",
    "PREFIX_PROVED",
    "MAX_SUBSET_V",
    "MAX_SUBSET_V_SLOW",
    "make_draft_model",
]

#: Up to this many sets, conditional Poisson's containment takes one compiled pass per set.
FEW_SETS = 16
#: Largest number of ordered draft tuples the tuple law will enumerate.
MAX_TUPLES = 20_000_000
#: Largest number of distinct draft sets the set law will enumerate.
MAX_SETS = 2_000_000
#: Largest number of (support, token) cells of an enumerated law's indicator matrix.
MAX_CELLS = 200_000_000
#: Largest alphabet for the exhaustive subset route when Q(T) has a closed form.
MAX_SUBSET_V = 22
#: Largest alphabet for the exhaustive subset route when Q(T) needs a quadrature per set.
MAX_SUBSET_V_SLOW = 16

#: Counts of draft tuples and sets saturate here. A count this large only ever meets a size limit;
#: saturating keeps counting cheap (no million-digit integers) and every count convertible to float.
COUNT_CAP = 10**300


def _capped(log10_bound: float, exact) -> int:
    """``exact()``, or :data:`COUNT_CAP` when ``log10_bound`` (a bound on its log10) says it is
    larger, without computing it."""
    return COUNT_CAP if log10_bound > 300 else min(exact(), COUNT_CAP)


def _power(s: int, n: int) -> int:
    """s ** n, saturated."""
    return _capped(n * math.log10(s) if s > 1 else 0.0, lambda: s**n)


def _fmt_count(count: int) -> str:
    return "over 1e+300" if count >= COUNT_CAP else f"up to {count:.3g}"


def _count_exactly(s: int, n: int) -> int:
    """C(s, n), saturated (it is at most s ** n and 2 ** s)."""
    return _capped(min(n * math.log10(max(s, 2)), s * math.log10(2)), lambda: math.comb(s, n))


def _count_up_to(s: int, n: int) -> int:
    """Number of non-empty subsets of at most n of s tokens (at most s ** n and 2 ** s), saturated."""
    if n >= s:
        return _capped(s * math.log10(2), lambda: 2**s - 1)
    return _capped(n * math.log10(max(s, 2)), lambda: sum(math.comb(s, k) for k in range(1, n + 1)))


class SetLaw(NamedTuple):
    """Law of the set of distinct drafted tokens.

    Attributes
    ----------
    members : ndarray of bool, shape (M, V)
        Row ``k`` is the indicator of the k-th draft set :math:`U_k`.
    probs : ndarray of float, shape (M,)
        :math:`w_{U_k} = P(\\mathrm{set}(X) = U_k) > 0`; sums to one.
    """

    members: np.ndarray
    probs: np.ndarray


class TupleLaw(NamedTuple):
    """Law of the ordered draft tuple, restricted to tuples of positive probability.

    Attributes
    ----------
    tuples : ndarray of int, shape (M, n)
    probs : ndarray of float, shape (M,)
    """

    tuples: np.ndarray
    probs: np.ndarray

    def sets(self, V: int) -> SetLaw:
        """The law of the set of distinct drafted tokens: tuples grouped by their token set."""
        members = np.zeros((len(self.probs), V), dtype=bool)
        rows = np.arange(len(self.probs))
        for j in range(self.tuples.shape[1]):
            members[rows, self.tuples[:, j]] = True
        sets, inverse = np.unique(members, axis=0, return_inverse=True)
        return SetLaw(sets, np.bincount(inverse.ravel(), weights=self.probs, minlength=len(sets)))


class DraftModel(ABC):
    """Joint law of n drafts over V tokens.

    What a model supports is declared on it, once (``single_q``, ``prefix_property``,
    ``lex_base_closed_form``, ``closed_form_containment``, ``enumeration_limit``, ``fixed_top``,
    ``order_vertices``, ``qs``, ``mnp_iterations``), and read by the solvers, the certificate, the
    size estimates and the rules, which test no model class or name.

    Attributes
    ----------
    n : int
        Number of drafts.
    V : int
        Alphabet size.
    sampling : str
        Registry name of the model (a key of :data:`SAMPLINGS`).
    q : ndarray of shape (V,) or None
        The one draft distribution the model is built from (iid, without-replacement,
        conditional-poisson, greedy); None for models given by several laws or a joint table
        (independent, joint).
    single_q : bool
        Class attribute: the model is built from one q of shape (V,) and n (``q`` is set);
        otherwise from a table whose shape gives n (:func:`make_draft_model`).
    rows_per_draft : bool
        Class attribute: the table is one law per draft, shape (n, V) (independent drafts), as the
        command line reads it from one .npy file; False for one-law models and n-axis tables.
    prefix_property : {"proved", "checked", None}
        Class attribute: whether the best prefix of the tokens sorted by q/p decreasing is an optimal
        cut set (the ``prefix`` route, :func:`mdtheory.subsets.prefix_scan`): ``"proved"``
        (papers/theory.md §4), ``"checked"`` (claimed by Hu et al. and re-checked by the tests
        against the exhaustive route; the front door then reports an upper bound where it cannot
        prove the value otherwise), or None (no prefix route).
    lex_base_closed_form : bool
        Class attribute: the coverage is :math:`g(S) = 1 - (1 - q(S))^n`, so the lexicographically
        optimal base is one sort and one convex hull
        (:func:`~mdtheory.polymatroid.lex_optimal_base_iid`) and the one-scan base certificate applies.
    closed_form_containment : bool
        Q(T) of one set costs O(V) (no quadrature); a property, as it may depend on n.
    enumeration_limit : int
        Largest V for which the exhaustive subset route enumerates all :math:`2^V` token sets
        (:data:`MAX_SUBSET_V`, or :data:`MAX_SUBSET_V_SLOW` without a closed-form containment).
    fixed_top : bool
        Class attribute: the drafts are fixed tokens ``top`` (int array) and one draw from the law
        ``tail`` (zero on the top), both set on the instance; the ``closed-form`` route and its
        factored-flow certificate apply (:mod:`mdtheory.greedy`).
    order_vertices : bool
        Class attribute: :meth:`prefix_pass` is exact and costs about one pass, so the vertex of a
        priority order is cheap and the minimum-norm-point route (``mnp``) and its order-mixture
        rule apply (:mod:`mdtheory.mnp`). False for a table with no faster pass than one
        containment per prefix.
    qs : ndarray of shape (n, V) or None
        The drafts' own laws where the drafts are independent (Q(T) is the product of the
        :math:`q_i(T)`; the minimum-norm-point route then scans products), else None.
    torch_replacement : bool or None
        Class attribute: the drafts are ``torch.multinomial(q, n, replacement=torch_replacement)``
        draws, True for iid and False for successive sampling; None: no such draw (the torch form
        of the audit and the block-efficiency simulation draw only these).
    mnp_iterations : float
        Class attribute: the ``mnp`` route's iterations per :math:`\\sqrt V`, for its size
        estimate (:func:`mdtheory._budget.min_norm_point`).
    """

    sampling: str = ""
    single_q: ClassVar[bool] = True
    rows_per_draft: ClassVar[bool] = False
    prefix_property: ClassVar[str | None] = None
    lex_base_closed_form: ClassVar[bool] = False
    fixed_top: ClassVar[bool] = False
    order_vertices: ClassVar[bool] = True
    torch_replacement: ClassVar[bool | None] = None
    mnp_iterations: ClassVar[float] = _budget.MNP_ITER_DEFAULT
    n: int
    V: int
    q: np.ndarray | None = None
    qs: np.ndarray | None = None

    @property
    def closed_form_containment(self) -> bool:
        return True

    @property
    def enumeration_limit(self) -> int:
        return MAX_SUBSET_V if self.closed_form_containment else MAX_SUBSET_V_SLOW

    @abstractmethod
    def containment(self, T) -> np.ndarray:
        """Return :math:`Q(T) = P(\\text{all drafts lie in } T)`.

        Parameters
        ----------
        T : array_like of bool, shape (V,) or (M, V)
            Indicator(s) of token sets.

        Returns
        -------
        float or ndarray of shape (M,)
        """

    @abstractmethod
    def set_law(self) -> SetLaw:
        """Return the law of ``set(X)`` (exact enumeration; refuses sizes over :data:`MAX_SETS`)."""

    @abstractmethod
    def tuple_law(self) -> TupleLaw:
        """Return the law of the ordered tuple (exact enumeration; at most :data:`MAX_TUPLES`)."""

    @abstractmethod
    def count_tuples(self) -> int:
        """Upper bound on the number of ordered draft tuples of positive probability."""

    @abstractmethod
    def count_sets(self) -> int:
        """Upper bound on the number of distinct draft sets of positive probability."""

    def _guard(self, kind: str) -> None:
        """Refuse, before enumerating anything, a tuple or set law over its size limit."""
        count, limit = (self.count_tuples(), MAX_TUPLES) if kind == "tuple" else \
            (self.count_sets(), MAX_SETS)
        if count > limit or count * self.V > MAX_CELLS:
            raise ProblemTooLargeError(
                f"the {kind} law has {_fmt_count(count)} {kind}s (V = {self.V}, n = {self.n}), over the "
                f"limit of {limit:g} {kind}s or {MAX_CELLS:g} {kind}-token cells; use "
                + ("a method over draft sets (otlp, dual or prefix)" if kind == "tuple"
                   else "the prefix method where it applies")
            )

    def sample(self, rng=None, size: int = 1) -> np.ndarray:
        """Draw ``size`` draft tuples, shape (size, n).

        Parameters
        ----------
        rng : numpy.random.Generator, int, SeedSequence, BitGenerator or None
            Random source (:func:`numpy.random.default_rng`'s arguments).
        size : int
            Number of tuples, at least 0.
        """
        return self._draw(as_generator(rng), as_size(size))

    def _draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """:meth:`sample` on checked arguments; generic: from the tuple law (small models)."""
        law = self.tuple_law()
        return law.tuples[rng.choice(len(law.probs), size=size, p=law.probs / law.probs.sum())]

    @abstractmethod
    def first_draft_law(self) -> np.ndarray:
        """Return the law of X_1, shape (V,): the proposal of single-draft speculative sampling."""

    def prefix_containment(self, order) -> np.ndarray:
        """Q of every prefix of ``order``: entry k is Q({order[0], ..., order[k]}), shape (M,).

        Parameters
        ----------
        order : array_like of int, shape (M,)
            Distinct tokens, M <= V.

        Raises
        ------
        InvalidInputError
            An order that is not 1-D integers, holds a token outside 0..V-1 or repeats one.
        """
        return self.prefix_pass(as_order(order, self.V))

    def prefix_pass(self, order: np.ndarray) -> np.ndarray:
        """:meth:`prefix_containment` without checking ``order`` (the hook models override).

        The solvers call it with their own permutations (int64, distinct, in 0..V-1: not checked
        here). Generic: one :meth:`containment` per prefix, O(V) containments; a model with a
        one-pass formula overrides it (and :meth:`prefix_pass_seconds`).
        """
        mask = np.zeros(self.V, dtype=bool)
        out = np.empty(len(order))
        for k, y in enumerate(order):
            mask[y] = True
            out[k] = self.containment(mask)
        return out

    # ------------------------------------------------------------------ size estimates (seconds)
    def prefix_pass_seconds(self) -> float:
        """Estimated seconds of one :meth:`prefix_pass` over all V tokens (:mod:`mdtheory._budget`).
        Generic: one containment per prefix."""
        return self.V * (_budget.CONTAINMENT_SECONDS + _budget.LAW_CELL_SECONDS * self.V)

    def law_seconds(self, count: float) -> float:
        """Estimated seconds to enumerate ``count`` draft sets or tuples (:meth:`set_law`,
        :meth:`tuple_law`): one forward-pass cell per (entry, token) in each of
        :meth:`law_steps` steps, and a fixed cost per step."""
        steps = self.law_steps(count)
        return steps * (_budget.LAW_STEP_SECONDS + count * self.V * _budget.LAW_CELL_SECONDS)

    def law_steps(self, count: float) -> float:
        """Steps of the pass that enumerates the law (one pass over the ``count`` entries)."""
        return 1.0

    def subset_row_seconds(self) -> float:
        """Estimated seconds per token set of the exhaustive route's vectorised containment."""
        return _budget.SUBSET_ROW_SECONDS if self.closed_form_containment else 4e-4

    @classmethod
    def exact_set_law(cls, q, n: int) -> dict:
        """The set law in exact rationals, ``{frozenset U: Fraction w_U}``, from a rational q
        (:mod:`mdtheory.exact`; small sizes only). Models without an exact law raise.

        Raises
        ------
        InvalidInputError
            The model has no exact set law.
        """
        raise InvalidInputError(f"no exact set law for sampling {cls.sampling!r}")

    def coverage(self, S) -> np.ndarray:
        """Return the coverage :math:`g(S) = P(\\mathrm{set}(X) \\cap S \\neq \\emptyset) = 1 - Q(S^c)`.

        Computed as 1 - Q(S^c), so within a few ε absolute (what the base-polytope checks compare),
        not relative: a coverage far below ε (S holding only tokens of mass ~1e-20) comes out as 0
        or a few ε.
        """
        S = np.asarray(S, dtype=bool)
        return 1.0 - self.containment(~S)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(V={self.V}, n={self.n})"

    # ------------------------------------------------------------------ helpers for subclasses
    def _init_from_q(self, q, n, normalize: bool, distinct: str | None = None) -> None:
        """Validate and store q (shape (V,)) and n; ``distinct`` names a model that needs n distinct
        tokens with q > 0."""
        self.q = as_distribution(q, "q", normalize=normalize)
        self.n = as_drafts(n)
        self.V = self.q.size
        support = int(np.count_nonzero(self.q))
        if distinct and self.n > support:
            raise InvalidInputError(
                f"{distinct} needs n <= the number of tokens with q > 0 ({support}), got n = {self.n}"
            )

    def _masks(self, T) -> tuple[np.ndarray, bool]:
        T = np.asarray(T, dtype=bool)
        if T.ndim not in (1, 2):
            raise InvalidInputError(f"token sets have shape {T.shape}; expected (V,) or (M, V)")
        single = T.ndim == 1
        T = np.atleast_2d(T)
        if T.shape[-1] != self.V:
            raise InvalidInputError(f"token set has length {T.shape[-1]}; expected V = {self.V}")
        return T, single


class _MarkovDraftModel(DraftModel):
    """A model whose next draft depends on the past only through the step and the set drafted so far.

    Subclasses give :meth:`next_law`; set and tuple laws follow by one exact forward pass.
    """

    @abstractmethod
    def next_law(self, step: int, drafted: np.ndarray) -> np.ndarray:
        """Law of draft ``step`` (0-based) given the indicators ``drafted`` (M, V) of earlier drafts."""

    def law_steps(self, count: float) -> float:
        """One forward step per draft (each over the sets drafted so far): n, however few the
        sets (iid drafts on V = 3 tokens reach their 7 sets after 3 steps and take n anyway)."""
        return float(self.n)

    def tuple_law(self) -> TupleLaw:
        self._guard("tuple")
        tuples = np.zeros((1, 0), dtype=np.int64)
        drafted = np.zeros((1, self.V), dtype=bool)
        probs = np.ones(1)
        for step in range(self.n):
            joint = probs[:, None] * self.next_law(step, drafted)
            row, tok = np.nonzero(joint > 0)
            tuples = np.column_stack([tuples[row], tok])
            drafted = drafted[row].copy()
            drafted[np.arange(len(tok)), tok] = True
            probs = joint[row, tok]
        return TupleLaw(tuples, probs)

    def set_law(self) -> SetLaw:
        self._guard("set")
        drafted = np.zeros((1, self.V), dtype=bool)
        probs = np.ones(1)
        for step in range(self.n):
            joint = probs[:, None] * self.next_law(step, drafted)
            row, tok = np.nonzero(joint > 0)
            new = drafted[row].copy()
            new[np.arange(len(tok)), tok] = True
            drafted, inverse = np.unique(new, axis=0, return_inverse=True)
            probs = np.bincount(inverse.ravel(), weights=joint[row, tok], minlength=len(drafted))
        return SetLaw(drafted, np.minimum(probs, 1.0))  # one sure set: 1 + ε from its paths


class IID(_MarkovDraftModel):
    """n independent drafts from q (sampling with replacement).

    .. math:: Q(x) = \\prod_{i=1}^n q(x_i), \\qquad Q(T) = q(T)^n.

    Parameters
    ----------
    q : array_like, shape (V,)
        Draft distribution.
    n : int
        Number of drafts, at least 1.
    normalize : bool
        Rescale q to sum one instead of refusing a sum off one.

    Examples
    --------
    >>> float(IID([0.5, 0.5], 2).containment([True, False]))
    0.25
    """

    sampling = "iid"
    prefix_property = "proved"
    lex_base_closed_form = True
    torch_replacement = True

    @classmethod
    def exact_set_law(cls, q, n):
        """By enumeration of the ordered tuples."""
        q = as_fractions(q)
        law: dict = {}
        for x in product(range(len(q)), repeat=n):
            w = math.prod((q[i] for i in x), start=Fraction(1))
            if w:
                law[frozenset(x)] = law.get(frozenset(x), 0) + w
        return law

    def prefix_pass_seconds(self):
        return _budget.PRODUCT_TOKEN_SECONDS * self.V * self.n

    def subset_row_seconds(self):
        return 1e-8 * self.V

    def __init__(self, q, n: int, *, normalize: bool = False):
        self._init_from_q(q, n, normalize)

    def containment(self, T):
        """q(T)^n. A few sets (the certificate's cut): q(T) by numpy's pairwise sum, relative error
        at most about log2(V) u (u = 2^-53), or, where the power would amplify that past 1e-13
        (n log2(V) u > 1e-13, e.g. V = 10^6 with n = 10^6), from exactly rounded sums
        (:func:`math.fsum`, about 40 ns a token); a BLAS dot product errs by ~1e-13 at V = 10^6,
        which n = 10^6 makes 3e-7. Many sets: one matrix product. Where the power amplifies, a
        mass of at least 1/2 enters as its distance from 1 (:meth:`_powers`)."""
        T, single = self._masks(T)
        amplifies = self._amplifies()
        if T.shape[0] <= FEW_SETS:
            sums = np.array([math.fsum(self.q[row]) if amplifies else np.sum(self.q[row]) for row in T])
            gaps = np.array([math.fsum([*self.q[row], -1.0]) for row in T]) if amplifies else None
        else:
            sums = T @ self.q
            gaps = self._excess() - (~T) @ self.q if amplifies else None
        out = self._powers(sums, gaps)
        return out[0] if single else out

    def _amplifies(self) -> bool:
        """Whether the power n amplifies a mass's rounding past 1e-13 (n log2(V) 2^-53 > 1e-13)."""
        return self.n * math.log2(max(self.V, 2)) * 2.0 ** -53 > 1e-13

    def _excess(self) -> float:
        """q(Omega) - 1, exactly rounded (0 for a q that sums to one exactly)."""
        return math.fsum([*self.q, -1.0])

    def _powers(self, sums, gaps=None):
        """min(sums, 1)^n; with ``gaps`` (each mass minus 1, to its own relative precision: from
        exactly rounded sums, or as the total's excess less the mass off the set), a mass of at
        least 1/2 as exp(n log1p(gap)): rounding a mass within 2^-54 of 1 to 1 would move its power
        by up to n 2^-54 (0.054 at n = 10^15), while the gap keeps its bits."""
        out = np.minimum(sums, 1.0) ** self.n
        if gaps is not None:
            near = sums >= 0.5
            with np.errstate(under="ignore"):
                out[near] = np.exp(self.n * np.log1p(np.minimum(gaps[near], 0.0)))
        return out

    def next_law(self, step, drafted):
        return np.broadcast_to(self.q, drafted.shape)

    def count_tuples(self):
        return _power(int(np.count_nonzero(self.q)), self.n)

    def _draw(self, rng, size):
        return rng.choice(self.V, size=(size, self.n), p=self.q)

    def prefix_pass(self, order):
        qo = self.q[order]
        sums = np.cumsum(qo)
        if not self._amplifies():
            return self._powers(sums)
        rest = np.cumsum(qo[::-1])[::-1]  # the mass from each token on; off prefix k: rest[k + 1]
        return self._powers(sums, self._excess() - np.append(rest[1:], 0.0))

    def count_sets(self):
        return _count_up_to(int(np.count_nonzero(self.q)), self.n)

    def first_draft_law(self):
        return self.q


class WithoutReplacement(_MarkovDraftModel):
    """Successive sampling without replacement from q.

    Each draft is drawn from q restricted to the tokens not yet drafted and renormalised, so

    .. math:: Q(x) = \\prod_{k=1}^n \\frac{q(x_k)}{1 - \\sum_{j<k} q(x_j)}

    for distinct tokens. The containment has no product form. With independent exponential clocks of
    rates q_i the drafts are the first n arrivals, so all n lie in T iff the n-th arrival inside T
    precedes the first arrival outside it:

    .. math:: Q(T) = \\int_0^\\infty c\\, e^{-ct}\\, P(N_T(t) \\ge n)\\, dt, \\qquad c = 1 - q(T),

    with :math:`N_T(t)` Poisson-binomial with success probabilities :math:`1 - e^{-q_i t}`, i in T.

    Parameters
    ----------
    q : array_like, shape (V,)
    n : int
        At most the number of tokens with q > 0.
    normalize : bool

    Notes
    -----
    :meth:`containment` and :meth:`prefix_containment` evaluate the integral by one trapezoidal rule
    in log-time with a proven error bound (:mod:`mdtheory.containment`); n = 2 uses the closed form
    :math:`\\sum_{i \\in T} q_i (q(T) - q_i)/(1 - q_i)`. The set law is exact (a forward pass over
    partial draft sets) and independent of the integral; the tests compare the two, and compare the
    integral with exact rationals and with an independent Gauss-Legendre quadrature.

    Examples
    --------
    >>> m = WithoutReplacement([0.5, 0.3, 0.2], 2)
    >>> round(float(m.containment([True, True, False])), 4)
    0.5143
    """

    sampling = "without-replacement"
    prefix_property = "checked"
    torch_replacement = False

    @classmethod
    def exact_set_law(cls, q, n):
        """By enumeration of the ordered tuples, each draft from q renormalised on the rest."""
        q = as_fractions(q)
        law: dict = {}
        for x in permutations(range(len(q)), n):
            w, used = Fraction(1), Fraction(0)
            for i in x:
                if used == 1:
                    w = Fraction(0)
                    break
                w *= q[i] / (1 - used)
                used += q[i]
            if w:
                law[frozenset(x)] = law.get(frozenset(x), 0) + w
        return law

    def prefix_pass_seconds(self):
        # per (token, degree) of the one-pass containment, at least 9 degrees (the kernels compiled
        # for n <= 8 cost the same)
        return _budget.WOR_PREFIX_TOKEN_SECONDS * self.V * max(self.n + 1, 9)

    def __init__(self, q, n: int, *, normalize: bool = False):
        self._init_from_q(q, n, normalize, distinct="without replacement")

    @property
    def closed_form_containment(self) -> bool:
        return self.n <= 2  # n >= 3: an exponential-race quadrature per set

    def next_law(self, step, drafted):
        free = np.where(drafted, 0.0, self.q)
        return free / free.sum(axis=1, keepdims=True)

    def count_tuples(self):
        s = int(np.count_nonzero(self.q))
        return _capped(self.n * math.log10(max(s, 2)), lambda: math.perm(s, self.n))

    def _draw(self, rng, size):
        """Gumbel-top-k: the n largest of log q_i + Gumbel noise, in decreasing order.

        O(V) per tuple: a partition finds the n largest keys, a sort of those n orders them.
        """
        with np.errstate(divide="ignore"):
            keys = np.log(self.q)[None, :] + rng.gumbel(size=(size, self.V))
        top = np.argpartition(-keys, self.n - 1, axis=1)[:, : self.n]
        order = np.argsort(-np.take_along_axis(keys, top, axis=1), axis=1)
        return np.take_along_axis(top, order, axis=1)

    def count_sets(self):
        return _count_exactly(int(np.count_nonzero(self.q)), self.n)

    def first_draft_law(self):
        return self.q

    def containment(self, T):
        T, single = self._masks(T)
        out = np.array([self._containment_one(row) for row in T])
        return out[0] if single else out

    def prefix_pass(self, order):
        """Q of every prefix of ``order`` in one pass: the exponential-race integral by one
        trapezoidal rule in log-time shared by all prefixes, with a proven error bound
        (:func:`mdtheory.containment.successive_prefix_containment`), O(V n K)."""
        from .containment import _successive_prefix

        return _successive_prefix(self.q, order, self.n)

    def _containment_one(self, mask: np.ndarray) -> float:
        qT = self.q[mask & (self.q > 0)]
        if qT.size < self.n:
            return 0.0
        c = float(self.q[~mask].sum())
        if c == 0.0:
            return 1.0
        if self.n == 1:
            return min(float(qT.sum()), 1.0)
        if self.n == 2:
            # q(T) - q_i and 1 - q_i as sums of positive terms: subtracting cancels when q_i ~ 1
            # (exclusive running sums: cumsum(qT) - qT loses the smaller terms beside a q_i ~ 1)
            before = np.concatenate(([0.0], np.cumsum(qT)[:-1]))
            after = np.concatenate((np.cumsum(qT[::-1])[:-1][::-1], [0.0]))
            rest = before + after
            return min(float(np.sum(qT * rest / (rest + c))), 1.0)  # 1 + ε beside c ~ 1e-300
        from .containment import _successive_prefix

        return float(_successive_prefix(self.q, np.flatnonzero(mask), self.n)[-1])


class ConditionalPoisson(DraftModel):
    """Conditional Poisson sampling: a set A of n distinct tokens with P(A) proportional to prod q_i.

    .. math:: P(\\mathrm{set}(X) = A) = \\frac{\\prod_{i \\in A} q_i}{e_n(q)}, \\quad |A| = n,
       \\qquad Q(T) = \\frac{e_n(q|_T)}{e_n(q)},

    with :math:`e_n` the elementary symmetric polynomial; the drafts are A in uniformly random order.
    This is the model for which Hu et al.'s elementary-symmetric ratio is exact; it is *not* the law of
    successive sampling (:class:`WithoutReplacement`), see papers/theory.md §3.

    Parameters
    ----------
    q : array_like, shape (V,)
        Weights (a distribution); they are not the inclusion probabilities.
    n : int
        At most the number of tokens with q > 0.
    normalize : bool
    """

    sampling = "conditional-poisson"
    prefix_property = "proved"

    @classmethod
    def exact_set_law(cls, q, n):
        """By enumeration of the n-sets: each weighs its product of q, normalised by their sum
        :math:`e_n(q)`."""
        q = as_fractions(q)
        weights = {frozenset(A): math.prod((q[i] for i in A), start=Fraction(1))
                   for A in combinations(range(len(q)), n)}
        total = sum(weights.values(), Fraction(0))
        return {A: w / total for A, w in weights.items() if w}

    def prefix_pass_seconds(self):
        return _budget.CP_PREFIX_TOKEN_SECONDS * self.V * (self.n + 5)

    def law_seconds(self, count):
        return count * (self.V * _budget.LAW_CELL_SECONDS + _budget.CP_SET_SECONDS)

    def __init__(self, q, n: int, *, normalize: bool = False):
        self._init_from_q(q, n, normalize, distinct="conditional Poisson sampling")

    def _log_scale(self) -> float:
        """log c, c = 1 / (geometric mean of the n largest q), by logs (c itself can overflow): the
        set weights :math:`\\prod_{i \\in A} c q_i` are c^n times the true ones, so every ratio of the
        law is unchanged, and the heaviest set weighs 1, so e_n(c q) lies in [1, C(V, n)] and does
        not underflow when e_n(q) would (one dominant token, the rest of q ~ 1e-200)."""
        return -float(np.mean(np.log(np.sort(self.q)[-self.n:])))

    def _esp(self, weights: np.ndarray) -> np.ndarray:
        """e_n of each row of ``weights`` (M, V) by the recurrence over tokens."""
        e = np.zeros((weights.shape[0], self.n + 1))
        e[:, 0] = 1.0
        for j in range(weights.shape[1]):
            e[:, 1:] = e[:, 1:] + weights[:, j : j + 1] * e[:, :-1]
        return e[:, self.n]

    def containment(self, T):
        """Q(T) = e_n(q|_T) / e_n(q). A few sets: each by one compiled O(V n) pass that takes T's
        tokens first (:func:`mdtheory.containment.conditional_poisson_prefix_containment`, no
        underflow); many sets (the exhaustive route): the recurrence vectorised over the sets."""
        T, single = self._masks(T)
        # every e_j of c q normal, no overflow, where n max |log2(c q_i)| + V < 1000; the span from
        # logarithms, as c itself overflows when the n largest masses' geometric mean is below
        # 1e-308 (q = (1, 5e-324, ..., 5e-324), n = V >= 22: an OverflowError, even for one set)
        log_c = self._log_scale()
        span = np.abs(np.log(self.q[self.q > 0]) + log_c).max() / math.log(2.0)
        if T.shape[0] > FEW_SETS and self.n * span + self.V < 1000:
            cq = self.q * math.exp(log_c)
            out = self._esp(np.where(T, cq, 0.0)) / self._esp(cq[None, :])[0]
        else:  # a few sets, or set weights whose partial products could leave the normal range
            from .containment import _conditional_poisson_prefix

            out = np.array([_conditional_poisson_prefix(self.q, np.flatnonzero(row), self.n)[-1]
                            if row.any() else 0.0 for row in T])
        return out[0] if single else out

    def prefix_pass(self, order):
        """Q of every prefix of ``order`` in one O(V n) pass of the e_j recurrence
        (:func:`mdtheory.containment.conditional_poisson_prefix_containment`)."""
        from .containment import _conditional_poisson_prefix

        return _conditional_poisson_prefix(self.q, order, self.n)

    def count_tuples(self):
        s = int(np.count_nonzero(self.q))
        return _capped(self.n * math.log10(max(s, 2)), lambda: self.count_sets() * math.factorial(self.n))

    def count_sets(self):
        return _count_exactly(int(np.count_nonzero(self.q)), self.n)

    def set_law(self):
        self._guard("set")
        sets = list(combinations(np.flatnonzero(self.q).tolist(), self.n))
        members = np.zeros((len(sets), self.V), dtype=bool)
        for k, s in enumerate(sets):
            members[k, list(s)] = True
        # prod q over each set as (product of mantissas in [1/2, 1)) * 2^(sum of exponents): no
        # intermediate under- or overflows (the rescaled q's products passed through subnormals,
        # 8% off, or overflowed), each weight within n ε, the heaviest set scaled to about 1
        mant, expo = np.frexp(self.q)
        mant, extra = np.frexp(np.prod(np.where(members, mant, 1.0), axis=1))
        expo = members @ expo + extra
        weights = np.ldexp(mant, expo - expo.max())
        return SetLaw(members, weights / weights.sum())

    def tuple_law(self):
        self._guard("tuple")
        law = self.set_law()
        nfact = math.factorial(self.n)
        tuples, probs = [], []
        for row, w in zip(law.members, law.probs, strict=True):
            for perm in permutations(np.flatnonzero(row).tolist()):
                tuples.append(perm)
                probs.append(w / nfact)
        return TupleLaw(np.array(tuples, dtype=np.int64), np.array(probs))

    def first_draft_law(self):
        """Inclusion probabilities over n: :math:`q_i\\, e_{n-1}(q_{-i}) / (n\\, e_n(q))`, in O(V n).

        :math:`e_{n-1}(q_{-i}) = \\sum_j e_j(q_{<i})\\, e_{n-1-j}(q_{>i})` from prefix and suffix
        tables of elementary symmetric polynomials (sums of non-negative terms, no cancellation);
        no draft set is enumerated. In plain doubles every table entry is at most 1 (q sums to one)
        and every rounding that underflows errs by at most :math:`2^{-1075}`, so a weight errs by
        at most about :math:`6 V n\\, 2^{-1075}` absolute besides its few ε relative: where every
        weight of a token with q > 0 is at least :math:`V n\\, 2^{-1022}` that is under 3ε relative.
        Otherwise (subnormal masses, or a dominant token and the rest of q ~ 1e-200: weights that
        passed through subnormals, up to 2e-3 off, or underflowed to 0) the same sums with every
        table entry a mantissa times its own power of two
        (:func:`mdtheory.containment.scaled_inclusion_weights`), which cannot under- or overflow.
        """
        law = self._inclusion_weights()
        if not (law[self.q > 0] >= self.V * self.n * np.finfo(float).tiny).all():
            from .containment import scaled_inclusion_weights

            law = scaled_inclusion_weights(self.q, self.n)
        return law / law.sum()

    def _inclusion_weights(self) -> np.ndarray:
        """:math:`q_i\\, e_{n-1}(q_{-i})`, the inclusion probabilities times n e_n(q), in plain
        doubles (:func:`mdtheory.containment.esp_table`, compiled)."""
        from .containment import esp_table

        pre = esp_table(self.q, self.n)  # pre[i, j] = e_j(q_0..q_{i-1})
        suf = esp_table(np.ascontiguousarray(self.q[::-1]), self.n)[::-1]  # e_j(q_i..q_{V-1})
        return self.q * np.einsum("ij,ij->i", pre[:-1, : self.n], suf[1:, : self.n][:, ::-1])


class Independent(_MarkovDraftModel):
    """Independent drafts with different laws: :math:`Q(x) = \\prod_i q_i(x_i)`,
    :math:`Q(T) = \\prod_i q_i(T)`.

    Parameters
    ----------
    qs : array_like, shape (n, V)
        Row i is the law of draft i.
    normalize : bool
    """

    sampling = "independent"
    single_q = False
    rows_per_draft = True
    mnp_iterations = 10.0

    def __init__(self, qs, *, normalize: bool = False):
        self.qs = as_distribution(qs, "q", normalize=normalize, ndim=2)
        self.n, self.V = self.qs.shape

    def containment(self, T):
        T, single = self._masks(T)
        out = np.prod(np.minimum(T.astype(float) @ self.qs.T, 1.0), axis=1)  # q_i(T) <= 1, not 1 + ε
        return out[0] if single else out

    def next_law(self, step, drafted):
        return np.broadcast_to(self.qs[step], drafted.shape)

    def count_tuples(self):
        return min(math.prod(int(np.count_nonzero(row)) for row in self.qs), COUNT_CAP)

    def _draw(self, rng, size):
        return np.column_stack([rng.choice(self.V, size=size, p=row) for row in self.qs])

    def prefix_pass(self, order):
        return np.prod(np.minimum(np.cumsum(self.qs[:, order], axis=1), 1.0), axis=0)

    def prefix_pass_seconds(self):
        return _budget.PRODUCT_TOKEN_SECONDS * self.V * self.n

    def count_sets(self):
        return _count_up_to(int(np.count_nonzero(self.qs.sum(axis=0))), self.n)

    def first_draft_law(self):
        return self.qs[0]


class Joint(DraftModel):
    """An explicit joint table :math:`Q(x_1, \\dots, x_n)` of shape (V,) * n.

    Parameters
    ----------
    table : array_like, shape (V, ..., V)
        n axes of equal length V; non-negative, summing to one.
    normalize : bool
    """

    sampling = "joint"
    single_q = False
    order_vertices = False

    def __init__(self, table, *, normalize: bool = False):
        arr = np.asarray(table)
        if arr.ndim < 1 or len(set(arr.shape)) != 1:
            raise InvalidDistributionError(
                f"the joint draft table has shape {arr.shape}; expected n equal axes (V, ..., V)"
            )
        flat = as_distribution(arr.reshape(-1), "joint draft table", normalize=normalize)
        self.table = flat.reshape(arr.shape)
        self.n = arr.ndim
        self.V = arr.shape[0]
        if self.table.size > MAX_TUPLES:
            raise ProblemTooLargeError(f"the joint table has {self.table.size:g} entries")

    def containment(self, T):
        T, single = self._masks(T)
        out = np.minimum([self.table[np.ix_(*([row] * self.n))].sum() for row in T], 1.0)
        return out[0] if single else out

    def count_tuples(self):
        return int(np.count_nonzero(self.table))

    count_sets = count_tuples

    def tuple_law(self):
        idx = np.argwhere(self.table > 0)
        return TupleLaw(idx.astype(np.int64), self.table[tuple(idx.T)])

    def set_law(self):
        return self.tuple_law().sets(self.V)

    def first_draft_law(self):
        return self.table.reshape(self.V, -1).sum(axis=1)


def _largest(q: np.ndarray, k: int) -> np.ndarray:
    """The first k tokens of a stable sort of q by decreasing mass (ties by index), in O(V + k log k).

    One selection finds the k-th largest mass; the tokens above it and the first tokens (by index)
    at it make the k, sorted stably among themselves.
    """
    if k == 0:
        return np.empty(0, dtype=np.intp)
    kth = np.partition(q, q.size - k)[q.size - k]
    above = np.flatnonzero(q > kth)
    chosen = np.concatenate([above, np.flatnonzero(q == kth)[: k - above.size]])
    return chosen[np.argsort(-q[chosen], kind="stable")]


class Greedy(DraftModel):
    r"""Hu et al.'s greedy draft set: the n - 1 most likely tokens of q, then one draw from q
    renormalised outside them (for n = 2 the draft set of SpecHub).

    .. math:: X = (t_1, \dots, t_{n-1}, C), \qquad P(C = c) = \tilde q(c) =
       \frac{q(c)}{1 - q(\mathrm{top})}, \; c \notin \mathrm{top},
       \qquad Q(T) = 1[\mathrm{top} \subseteq T]\, \tilde q(T).

    Parameters
    ----------
    q : array_like, shape (V,)
    n : int
        At most the number of tokens with q > 0 (the drawn token needs mass outside the top).
    normalize : bool

    Notes
    -----
    Ties in q are broken by token index (the top tokens are the first n - 1 of a stable sort).
    """

    sampling = "greedy"
    fixed_top = True
    mnp_iterations = 2.0

    def __init__(self, q, n: int, *, normalize: bool = False):
        self._init_from_q(q, n, normalize, distinct="greedy drafts")
        self.top = _largest(self.q, self.n - 1)
        rest = np.ones(self.V, dtype=bool)
        rest[self.top] = False
        self.tail = np.where(rest, self.q, 0.0) / self.q[rest].sum()

    def containment(self, T):
        T, single = self._masks(T)
        out = T[:, self.top].all(axis=1) * np.minimum(T @ self.tail, 1.0)
        return out[0] if single else out

    def count_tuples(self):
        return int(np.count_nonzero(self.tail))

    count_sets = count_tuples

    def prefix_pass(self, order):
        """Q of every prefix in one O(V) pass: the tail's running mass once the prefix holds every
        top token, 0 before (the generic route took one containment per prefix, O(V^2))."""
        is_top = np.zeros(self.V, dtype=bool)
        is_top[self.top] = True
        holds_top = np.cumsum(is_top[order]) == self.top.size
        return np.where(holds_top, np.minimum(np.cumsum(self.tail[order]), 1.0), 0.0)

    def tuple_law(self):
        self._guard("tuple")
        tail = np.flatnonzero(self.tail)
        tuples = np.column_stack([np.tile(self.top, (tail.size, 1)), tail])
        return TupleLaw(tuples.astype(np.int64), self.tail[tail])

    def set_law(self):
        law = self.tuple_law()
        members = np.zeros((len(law.probs), self.V), dtype=bool)
        members[:, self.top] = True
        members[np.arange(len(law.probs)), law.tuples[:, -1]] = True
        return SetLaw(members, law.probs)

    def _draw(self, rng, size):
        drawn = rng.choice(self.V, size=size, p=self.tail)
        return np.column_stack([np.tile(self.top, (size, 1)), drawn])

    def first_draft_law(self):
        if self.n == 1:
            return self.tail
        law = np.zeros(self.V)  # a point mass on the top token (not a row of a V x V identity)
        law[self.top[0]] = 1.0
        return law


#: Registry of draft models by name, with their aliases (:func:`register_sampling` adds one).
SAMPLINGS: dict[str, type[DraftModel]] = {
    "iid": IID,
    "without-replacement": WithoutReplacement,
    "wor": WithoutReplacement,
    "conditional-poisson": ConditionalPoisson,
    "independent": Independent,
    "joint": Joint,
    "greedy": Greedy,
}


def register_sampling(cls: type[DraftModel], *aliases: str) -> type[DraftModel]:
    """Add a draft model class to :data:`SAMPLINGS` under ``cls.sampling`` (and ``aliases``), so
    that :func:`make_draft_model`, the front door's ``sampling=`` and the command line's
    ``--sampling`` find it by name. Returns ``cls`` (usable as a decorator).

    Raises
    ------
    InvalidInputError
        ``cls`` is not a :class:`DraftModel` subclass, has no ``sampling`` name, or a name is taken
        by another class.
    """
    if not (isinstance(cls, type) and issubclass(cls, DraftModel)) or not cls.sampling:
        raise InvalidInputError("register_sampling takes a DraftModel subclass with a sampling name")
    for name in (cls.sampling, *aliases):
        if SAMPLINGS.get(name, cls) is not cls:
            raise InvalidInputError(f"sampling {name!r} is already {SAMPLINGS[name].__name__}")
        SAMPLINGS[name] = cls
    return cls


def file_samplings() -> list[str]:
    """The registered names (aliases included) of the models the command line builds from one
    .npy file: the one-law models (:attr:`DraftModel.single_q`, rows (V,) or a batch (B, V)), then
    those with one law per draft (:attr:`DraftModel.rows_per_draft`, a table (n, V))."""
    return [name for name, cls in SAMPLINGS.items() if cls.single_q] + \
        [name for name, cls in SAMPLINGS.items() if cls.rows_per_draft and not cls.single_q]


def sampling_names(predicate=None) -> tuple[str, ...]:
    """The registered draft models' names (no aliases), in registry order, those whose class
    satisfies ``predicate(cls)`` if given (e.g. ``lambda cls: cls.single_q``)."""
    return tuple(dict.fromkeys(cls.sampling for cls in SAMPLINGS.values()
                               if predicate is None or predicate(cls)))


#: Draft models with a prefix route (:attr:`DraftModel.prefix_property`), by registry name.
PREFIX_SAMPLINGS = tuple(dict.fromkeys(cls.sampling for cls in SAMPLINGS.values()
                                       if cls.prefix_property is not None))
#: Of those, the ones whose prefix property is proved (the rest are checked, not proved).
PREFIX_PROVED = tuple(dict.fromkeys(cls.sampling for cls in SAMPLINGS.values()
                                    if cls.prefix_property == "proved"))


def make_draft_model(q: ArrayLike | DraftModel, n: int | None = None, sampling: str = "iid", *,
                     normalize: bool = False) -> DraftModel:
    """Build a draft model from its registry name.

    Parameters
    ----------
    q : array_like or DraftModel
        ``(V,)`` for iid, without-replacement and conditional-poisson; ``(n, V)`` for independent;
        ``(V,) * n`` for joint. A :class:`DraftModel` is returned unchanged.
    n : int, optional
        Number of drafts; required by the models built from one q, implied by the others.
    sampling : str
        A key of :data:`SAMPLINGS`.
    normalize : bool

    Raises
    ------
    InvalidInputError
        Unknown ``sampling``, a missing n, an n that contradicts the shape of q, or a draft model
        given with a sampling other than its own (or the default ``"iid"``).
    """
    try:
        cls = SAMPLINGS[sampling]
    except (KeyError, TypeError):
        raise InvalidInputError(
            f"unknown sampling {sampling!r}; valid choices: {', '.join(SAMPLINGS)}"
        ) from None
    if isinstance(q, DraftModel):
        if n is not None and as_drafts(n) != q.n:
            raise InvalidInputError(f"n = {n} contradicts the draft model's n = {q.n}")
        # "iid" is the default, so it cannot be told from no sampling given: any other must agree
        if sampling not in ("iid", q.sampling):
            raise InvalidInputError(f"sampling {sampling!r} contradicts the draft model, which is "
                                    f"{q.sampling!r}; pass the model alone or its own sampling")
        return q
    if not cls.single_q:
        model = cls(q, normalize=normalize)
        if n is not None and as_drafts(n) != model.n:
            raise InvalidInputError(
                f"n = {n} contradicts the {sampling} draft table, which has n = {model.n} drafts"
            )
        return model
    if n is None:
        raise InvalidInputError(f"sampling {sampling!r} needs the number of drafts n")
    return cls(q, n, normalize=normalize)
