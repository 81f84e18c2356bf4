"""Draft models: the joint law Q of the draft tuple X = (X_1, ..., X_n) over V tokens; the interface.

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
``top``                    the n most likely tokens of q, fixed (no draw): the children of a
                           top-k draft tree's node.
=========================  ==================================================================

Each model is one module of :mod:`mdtheory.models`: a subclass of :class:`DraftModel` with its
declarations (``single_q``, ``prefix_property``, ``lex_base_closed_form``,
``closed_form_containment``, ``fixed_top``, ``order_vertices``, ``qs``, ``exponential_race``),
found by name through :func:`~mdtheory.models.registry.register_sampling` (a built-in model: one entry in
:data:`~mdtheory.models.registry.SAMPLINGS`). The routes, the certificate, the rules, the audit and
the command line read these declarations and the documented hooks (:meth:`DraftModel.prefix_pass`,
the size estimates :meth:`DraftModel.prefix_pass_seconds`, :meth:`DraftModel.law_seconds`,
:meth:`DraftModel.subset_row_seconds`) instead of testing model names or classes.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from typing import Any, ClassVar, NamedTuple

import numpy as np

from .. import _budget
from .._validate import as_distribution, as_drafts, as_generator, as_order, as_size
from ..errors import InvalidDistributionError, InvalidInputError, ProblemTooLargeError

__all__ = [
    "COUNT_CAP",
    "DraftModel",
    "SetLaw",
    "TupleLaw",
    "MAX_SUBSET_V",
    "MAX_SUBSET_V_SLOW",
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
    ``order_vertices``, ``qs``, ``mnp_iterations``, ``exponential_race``), and read by the solvers,
    the certificate, the size estimates and the rules, which test no model class or name.

    Attributes
    ----------
    n : int
        Number of drafts.
    V : int
        Alphabet size.
    sampling : str
        Registry name of the model (a key of :data:`mdtheory.models.registry.SAMPLINGS`).
    q : ndarray of shape (V,) or None
        The one draft distribution the model is built from (iid, without-replacement,
        conditional-poisson, greedy); None for models given by several laws or a joint table
        (independent, joint).
    single_q : bool
        Class attribute: the model is built from one q of shape (V,) and n (``q`` is set);
        otherwise from a table whose shape gives n (:func:`~mdtheory.models.registry.make_draft_model`).
    rows_per_draft : bool
        Class attribute: the table is one law per draft, shape (n, V) (independent drafts), as the
        command line reads it from one .npy file; False for one-law models and n-axis tables.
    prefix_property : {"proved", "checked", None}
        Class attribute: whether the best prefix of the tokens sorted by q/p decreasing is an optimal
        cut set (the ``prefix`` route, :func:`mdtheory.routes.subsets.prefix_scan`): ``"proved"``
        (papers/theory.md §4), ``"checked"`` (claimed by Hu et al. and re-checked by the tests
        against the exhaustive route; the front door then reports an upper bound where it cannot
        prove the value otherwise), or None (no prefix route).
    lex_base_closed_form : bool
        Class attribute: the coverage is :math:`g(S) = 1 - (1 - q(S))^n`, so the lexicographically
        optimal base is one sort and one convex hull
        (:func:`~mdtheory.models.polymatroid.lex_optimal_base_iid`) and the one-scan base certificate applies.
    closed_form_containment : bool
        Q(T) of one set costs O(V) (no quadrature); a property, as it may depend on n.
    enumeration_limit : int
        Largest V for which the exhaustive subset route enumerates all :math:`2^V` token sets
        (:data:`MAX_SUBSET_V`, or :data:`MAX_SUBSET_V_SLOW` without a closed-form containment).
    fixed_top : bool
        Class attribute: the drafts are fixed tokens ``top`` (int array), then one draw from the
        law ``tail`` (zero on the top) as the last draft, both set on the instance; the
        ``closed-form`` route and its factored-flow certificate apply (:mod:`mdtheory.routes.greedy`),
        and the ``greedy`` rule runs on it.
    order_vertices : bool
        Class attribute: :meth:`prefix_pass` is exact and costs about one pass, so the vertex of a
        priority order is cheap and the minimum-norm-point route (``mnp``) and its order-mixture
        rule apply (:mod:`mdtheory.routes.mnp`). False for a table with no faster pass than one
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
    tree_node : bool
        Class attribute: a node of a draft tree (:class:`mdtheory.blocks.DraftTree`) may draw its
        children by this model, from the draft's law at the node: the model implements
        :meth:`node_draws` and :meth:`node_sample` (iid, without replacement, top). A model that is
        not :attr:`deterministic` draws a node's one child (n = 1) from q itself.
    distinct_drafts : bool
        Class attribute: the drafts are distinct tokens (without replacement, top).
    deterministic : bool
        Class attribute: the drafts are a function of q, one draft tuple of probability one (the
        top n tokens); a draft tree of such children is drawn with probability one
        (papers/blocks.md §10), and its tokens are chosen in the arithmetic of q (exact fractions
        ordered exactly).
    exponential_race : bool
        Class attribute: the drafts are the first n tokens to ring, each token an independent
        exponential clock of rate q that rings once (successive sampling): drawing some tokens
        with replacement, or letting more clocks ring, can only raise every containment, so the
        certificate's majorant bounds apply (:mod:`mdtheory.models.majorant`; papers/theory.md,
        "Successive sampling: lower bounds from majorants of the containment").
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
    tree_node: ClassVar[bool] = False
    distinct_drafts: ClassVar[bool] = False
    deterministic: ClassVar[bool] = False
    exponential_race: ClassVar[bool] = False
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

    def set_law_size(self) -> int:
        """Upper bound on the draft sets the enumeration of :meth:`set_law` holds at once: here the
        sets of the law (:meth:`count_sets`); a model whose enumeration passes through more (a
        forward pass over the drafts) says so."""
        return self.count_sets()

    def _guard(self, kind: str) -> None:
        """Refuse, before enumerating anything, a tuple or set law over its size limit."""
        count, limit = (self.count_tuples(), MAX_TUPLES) if kind == "tuple" else \
            (self.set_law_size(), MAX_SETS)
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
        (:mod:`mdtheory.claims.exact`; small sizes only). Models without an exact law raise.

        Raises
        ------
        InvalidInputError
            The model has no exact set law.
        """
        raise InvalidInputError(f"no exact set law for sampling {cls.sampling!r}")

    # ------------------------------------------------------------------ a draft tree's node
    @classmethod
    def node_draws(cls, q: np.ndarray, n: int, where: str = "") -> list[tuple[tuple[int, ...], Any]]:
        """Every ordered tuple of ``n`` drafts of positive probability from the one law ``q``, with
        its probability, computed in the arithmetic of q's entries (float64, or exact fractions
        when q is an object array of :class:`fractions.Fraction`): the children of a draft tree's
        node (:class:`mdtheory.blocks.DraftTree`), q the draft's law there. ``where`` names the
        node in a refusal.

        Raises
        ------
        InvalidInputError
            The model draws no tree's children (:attr:`tree_node` False), or q cannot give n drafts.
        """
        raise InvalidInputError(f"sampling {cls.sampling!r} does not draw a draft tree's children")

    @classmethod
    def node_sample(cls, q: np.ndarray, n: int, rng: np.random.Generator, where: str = "") -> list[int]:
        """One ordered tuple of ``n`` drafts from the one law ``q``, drawn with ``rng``: the children
        of a draft tree's node, as :meth:`node_draws` lists them. ``q`` sums to one, float64 or exact
        fractions (an object array): a model that draws reads it as float64, a
        :attr:`deterministic` one chooses in q's own arithmetic, as :meth:`node_draws` does."""
        raise InvalidInputError(f"sampling {cls.sampling!r} does not draw a draft tree's children")

    @classmethod
    def node_sample_batch(cls, q: np.ndarray, n: int, m: int, rng: np.random.Generator,
                          where: str = "") -> np.ndarray:
        """The children of ``m`` nodes of one law ``q``, each drawn independently as
        :meth:`node_sample` draws them: an int array (m, n). Generic: m calls of :meth:`node_sample`;
        a model overrides it with one vectorised draw of the same law."""
        return np.array([cls.node_sample(q, n, rng, where) for _ in range(m)], dtype=np.int64).reshape(m, n)

    @classmethod
    def node_count(cls, V: int, n: int) -> int:
        """An upper bound on the number of tuples :meth:`node_draws` lists over V tokens: V^n."""
        return V ** n

    @classmethod
    def node_inclusion(cls, q: np.ndarray, n: int) -> tuple[np.ndarray, bool]:
        """P(token y is among the ``n`` drafts from ``q``) for every y, or an upper bound on it:
        ``(values, exact)``. Generic: summed over :meth:`node_draws` (exact)."""
        q = np.asarray(q, dtype=np.float64)
        out = np.zeros(q.size)
        for tokens, w in cls.node_draws(q, n):
            out[list(set(tokens))] += w
        return np.minimum(out, 1.0), True

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
        tokens with q > 0. Exact fractions (an object array) are stored as their float64 values."""
        if type(q) is np.ndarray and q.dtype == object and \
                all(isinstance(x, numbers.Real) for x in q.flat):
            try:  # anything else keeps its object dtype, refused by name below
                q = q.astype(np.float64)
            except OverflowError:
                raise InvalidDistributionError("q has an entry beyond float64's range") from None
        self.q = as_distribution(q, "q", normalize=normalize)
        self.n = as_drafts(n)
        self.V = self.q.size
        if distinct and self.n > (support := int(np.count_nonzero(self.q))):
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

    def set_law_size(self) -> int:
        """The forward pass holds after k drafts the sets drafted so far, each of at most k of
        the s tokens some draft can take: at most the non-empty sets of at most n of them, which
        may be far more than the sets at the end (successive sampling of n = 49 of 50 tokens ends
        with 50 sets after passing through C(50, 25) = 1.3e14)."""
        laws = self.q if self.q is not None else self.qs.sum(axis=0)
        return max(self.count_sets(), _count_up_to(int(np.count_nonzero(laws)), self.n))

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
