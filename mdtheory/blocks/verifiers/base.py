"""The interface of the sequence-level verifiers (:class:`BlockVerifier`), the arithmetic their laws
share (floats while every normalising divisor is at least :data:`FLOAT_FLOOR`, else exact fractions),
and the exact block law over every draw of the drafts (:func:`exact_block_law`)."""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable
from fractions import Fraction
from typing import ClassVar

import numpy as np

from ... import _budget
from ..._validate import as_generator
from ...errors import InvalidInputError
from ..trees import DraftTree, checked_row, iid_drafts

__all__ = ["BlockVerifier", "exact_block_law", "block_efficiency", "rule_runs_on", "rules_for",
           "default_rule", "FLOAT_FLOOR"]


#: The float forms trust a normalising divisor (a residual's mass, a stopping weight's denominator)
#: down to this; below it cancellation may have eaten its digits, and the draft array's law (or
#: block) is recomputed in exact rational arithmetic. Above it a float law is within about
#: ``V * eps / FLOAT_FLOOR`` (~1e-9) of the exact one, and sums to one by construction.
FLOAT_FLOOR = 2.0 ** -20


class _Inexact(Exception):
    """Float arithmetic was about to divide by less than :data:`FLOAT_FLOOR`: recompute exactly."""


def _pos(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def _total(x: np.ndarray):
    """Sum of a mass vector, a Python scalar (a Fraction for exact laws)."""
    s = x.sum()
    return s if isinstance(s, (Fraction, int)) and not isinstance(s, bool) else float(s)


def _tree_tag(tree) -> str:
    """``"[2,2 without-replacement]"`` for a tree, ``""`` for K iid drafts."""
    return "" if tree is None else f"[{','.join(map(str, tree.branching))} {tree.sampling}]"


def _draw(weights: np.ndarray, rng: np.random.Generator) -> int:
    """One index drawn with probability proportional to ``weights`` (exact ones normalised before
    rounding to floats, so that masses below the float range still draw)."""
    if weights.dtype == object:
        s = sum(weights)
        weights = np.array([float(w / s) for w in weights])
    w = np.asarray(weights, dtype=np.float64)
    return int(rng.choice(w.size, p=w / w.sum()))


def _exact_row(row: np.ndarray) -> np.ndarray:
    """A validated row as exact fractions summing to exactly one."""
    fr = [Fraction(v) if isinstance(v, numbers.Rational) else Fraction(float(v)) for v in row]
    s = sum(fr)
    return np.array([v / s for v in fr], dtype=object)


def _as_law(laws, row: np.ndarray) -> np.ndarray:
    """A float law computed by a rule, in the laws' arithmetic: float64 rescaled to sum one, or
    exact fractions of its entries summing to exactly one."""
    row = np.clip(np.asarray(row, dtype=np.float64), 0, None)
    return _exact_row(row) if laws.exact else row / row.sum()


class _Laws:
    """The target's and draft's laws at contexts relative to the block, each read once, validated
    and cached: float64 rows rescaled to sum one, or (``exact``) fractions summing to exactly one.

    A law that returns fractions makes the whole computation exact (:class:`_Inexact` is raised
    on reading one in float mode)."""

    def __init__(self, target: Callable, draft: Callable, exact: bool = False):
        self.target, self.draft, self.exact = target, draft, exact
        self.inputs_exact = False
        self._p: dict = {}
        self._q: dict = {}
        self.V = None

    def exactly(self) -> _Laws:
        """The same laws in exact arithmetic."""
        out = _Laws(self.target, self.draft, exact=True)
        out.inputs_exact, out.V = self.inputs_exact, self.V
        return out

    def _row(self, law, cache, ctx, name):
        row = cache.get(ctx)
        if row is None:
            raw = checked_row(law, ctx, name, self.V)
            if self.V is None:
                self.V = raw.size
            if raw.dtype == object:
                self.inputs_exact = True
                if not self.exact:
                    raise _Inexact
            row = _exact_row(raw) if self.exact else raw / raw.sum()
            cache[ctx] = row
        return row

    def p(self, ctx: tuple) -> np.ndarray:
        return self._row(self.target, self._p, ctx, "target")

    def q(self, ctx: tuple) -> np.ndarray:
        return self._row(self.draft, self._q, ctx, "draft")

    def guard(self, divisor) -> None:
        """In float mode, refuse to normalise by less than :data:`FLOAT_FLOOR` (:class:`_Inexact`)."""
        if not self.exact and divisor < FLOAT_FLOOR:
            raise _Inexact


def _check_drafts(drafts, V: int) -> np.ndarray:
    try:
        x = np.asarray(drafts)
    except (TypeError, ValueError):
        raise InvalidInputError("drafts must be an int array (K, L), got a ragged or non-numeric "
                                f"{type(drafts).__name__}") from None
    if x.ndim == 1:
        x = x[None, :]
    if x.dtype.kind not in "iu" or x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise InvalidInputError(f"drafts must be an int array (K, L) with K, L >= 1, got {x.dtype} "
                                f"of shape {np.shape(drafts)}")
    if x.min() < 0 or x.max() >= V:
        raise InvalidInputError(f"drafts hold a token outside 0 .. {V - 1}")
    return x


def rule_runs_on(rule: str, sampling: str) -> bool:
    """Whether the selection rule ``rule`` runs on drafts of ``sampling`` (the rules' declarations):
    its own draft model, any model whose first draft is a draw from q for a rule that reads only
    the first draft (:attr:`~mdtheory.rules.base.SelectionRule.first_draft_only`), or any model for
    a rule that takes a ``sampling`` keyword.

    Raises
    ------
    InvalidInputError
        An unknown rule (the message lists the registered ones).
    """
    from ... import rules  # loaded on use: the rules import scipy, HiGHS and numba

    if rule not in rules.RULES:
        raise InvalidInputError(
            f"unknown selection rule {rule!r}; valid choices: {', '.join(rules.RULES)}")
    cls = rules.RULES[rule]
    return cls.sampling == sampling or "sampling" in rules.rule_keywords(cls) or \
        cls.first_draft_only and _first_draft_is_q(sampling)


def rules_for(sampling: str) -> list[str]:
    """The registered selection rules that run on drafts of ``sampling`` (:func:`rule_runs_on`), in
    the registry's order.

    >>> rules_for("top")
    ['optimal']
    """
    from ... import rules

    return [name for name in rules.RULES if rule_runs_on(name, sampling)]


def default_rule(sampling: str) -> str:
    """The rule a verifier that takes one uses on drafts of ``sampling`` when none is given: ``rrs``
    where it runs, else the first registered rule declared for those drafts, else the first that
    runs on them (:func:`rules_for`).

    >>> default_rule("iid"), default_rule("without-replacement"), default_rule("top")
    ('rrs', 'rrs-wor', 'optimal')

    Raises
    ------
    InvalidInputError
        No registered rule runs on drafts of ``sampling``.
    """
    from ... import rules

    fits = rules_for(sampling)
    if not fits:
        raise InvalidInputError(f"no registered selection rule runs on {sampling} drafts")
    own = [name for name in fits if rules.RULES[name].sampling == sampling]
    return "rrs" if "rrs" in fits else (own or fits)[0]


def _rule_params(rule: str, wanted: str, params: dict) -> dict:
    """The keywords to prepare ``rule`` with on ``wanted`` drafts (:func:`rule_runs_on`; a rule
    that takes a ``sampling`` keyword gets ``wanted``), or the refusal: a rule that does not run on
    them (the message lists those that do), a keyword the rule does not take, or a ``sampling``
    keyword other than ``wanted`` (the drafts' own model is the verifier's to say)."""
    from ... import rules

    if not rule_runs_on(rule, wanted):
        raise InvalidInputError(f"rule {rule!r} expects {rules.RULES[rule].sampling} drafts, not {wanted}; "
                                f"rules for {wanted} drafts: {', '.join(rules_for(wanted))}")
    cls = rules.RULES[rule]
    valid = rules.rule_keywords(cls)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise InvalidInputError(f"rule {rule!r} takes no keyword {', '.join(map(repr, unknown))}; valid "
                                f"keywords: {', '.join(valid) if valid else 'none'}")
    if "sampling" in params and params["sampling"] != wanted:
        raise InvalidInputError(f"sampling={params['sampling']!r} contradicts the drafts verified, which "
                                f"are {wanted}; leave sampling out (the tree's sampling is used)")
    if cls.sampling == wanted or cls.first_draft_only and _first_draft_is_q(wanted):
        return params
    return {**params, "sampling": wanted}  # a rule for any draft model is told which


def _first_draft_is_q(sampling: str) -> bool:
    """Whether the first draft of ``sampling``'s drafts is a draw from q (iid, successive sampling),
    read off the model's own first-draft law on a small q."""
    from ...models.registry import make_draft_model

    model = make_draft_model(np.array([0.5, 0.3, 0.2]), 2, sampling)
    return bool(np.allclose(model.first_draft_law(), model.q, rtol=0, atol=1e-12))


def measured(model_time: float | None) -> str:
    """How an estimate names the models' measured time (empty where it is a guess)."""
    return "" if model_time is None else f", the models {_budget.fmt_seconds(model_time)} a call (measured)"


class BlockVerifier(ABC):
    """A sequence-level verifier: ``sample`` and ``law`` forms, exact block efficiency, and the
    declarations of what it takes, which :func:`~mdtheory.blocks.verifiers.make_verifier`, the
    command line and the tests read (none of them tests a verifier's name).

    Attributes
    ----------
    name : str
        Class attribute: the registry name (:data:`~mdtheory.blocks.verifiers.VERIFIERS`).
    takes_rule : {None, "verify", "select"}
        Class attribute: whether the verifier takes a token-level selection rule
        (``rule=``, a key of :data:`mdtheory.rules.RULES`, and the rule's keywords), and what for:
        to verify at every node (token by token) or to select the path it verifies (multi-path).
    tree_samplings : tuple of str or None
        Class attribute: the draft trees it verifies (``tree=``), by the tree's sampling; ``()``:
        K iid drafts only; None: every tree sampling (its rule must run on that draft model).
    first_draft_only : bool
        Class attribute: it reads the first draft alone, so it runs, as on K iid drafts, on any
        tree whose first draft is a draw from q autoregressively (iid or without-replacement
        children: the first child of every node is drawn from q).
    tree : DraftTree or None
        The draft tree the verifier reads the drafts as; None: K iid drafts (any K).
    """

    name: ClassVar[str] = ""
    takes_rule: ClassVar[str | None] = None
    tree_samplings: ClassVar[tuple[str, ...] | None] = ()
    first_draft_only: ClassVar[bool] = False
    tree: DraftTree | None = None

    # ------------------------------------------------------------------ the contract
    @classmethod
    def verifies(cls, tree: DraftTree) -> bool:
        """Whether the verifier runs on the drafts of ``tree`` (its declarations)."""
        if tree.is_iid_drafts:
            return True
        if cls.first_draft_only:
            return _first_draft_is_q(tree.sampling)
        return cls.tree_samplings is None or tree.sampling in cls.tree_samplings

    @classmethod
    def refusal(cls, tree: DraftTree) -> str:
        """Why the verifier does not run on ``tree`` (where :meth:`verifies` is False)."""
        if cls.first_draft_only:
            return f"verifier {cls.name} reads the first draft as a draw from q; {tree!r}'s is not"
        if not cls.tree_samplings:
            return f"verifier {cls.name} verifies K iid drafts, not {tree!r}"
        return (f"verifier {cls.name} verifies trees of {' or '.join(cls.tree_samplings)} children, "
                f"not {tree.sampling}")

    @classmethod
    def create(cls, *, rule: str | None = None, tree: DraftTree | None = None, **params) -> BlockVerifier:
        """The verifier of the drafts of ``tree`` (None: K iid drafts) with, where it takes one,
        the selection ``rule`` (default: :func:`default_rule` of the tree's drafts, ``rrs`` on iid
        drafts) and the rule's keywords, as the declarations allow
        (:func:`~mdtheory.blocks.verifiers.make_verifier`).

        Raises
        ------
        InvalidInputError
            A tree the verifier does not verify (:meth:`refusal`), a rule or keyword it does not
            take, a rule that does not run on the tree's draft model (the message lists those that
            do), or a ``sampling`` keyword other than the tree's.
        """
        if tree is not None and not isinstance(tree, DraftTree):
            raise InvalidInputError(f"tree must be a DraftTree, got {tree!r}")
        if tree is not None and not cls.verifies(tree):
            raise InvalidInputError(cls.refusal(tree))
        kwargs: dict = {}
        if cls.takes_rule is not None:
            kwargs["rule"] = default_rule("iid" if tree is None else tree.sampling) if rule is None else rule
        elif rule is not None or params:
            what = [*(["the rule"] if rule is not None else []), *map(repr, params)]
            raise InvalidInputError(f"verifier {cls.name!r} takes no keyword {', '.join(what)}")
        if tree is not None and cls.tree_samplings != () and not cls.first_draft_only:
            kwargs["tree"] = tree
        return cls(**kwargs, **params)

    def _check_tree(self, tree) -> DraftTree | None:
        """``tree`` (None or a DraftTree this verifier verifies), else :class:`InvalidInputError`."""
        if tree is not None and not isinstance(tree, DraftTree):
            raise InvalidInputError(f"tree must be a DraftTree, got {tree!r}")
        if tree is not None and not self.verifies(tree):
            raise InvalidInputError(self.refusal(tree))
        return tree

    def estimate(self, V: int, tree: DraftTree, steps: int,
                 model_time: float | None = None) -> _budget.Estimate:
        """Seconds and bytes of ``steps`` target calls of the simulation with this verifier on
        ``tree`` (:func:`mdtheory.blocks.simulation.simulate`): the drafter at each internal node
        and the target at every node (``model_time`` seconds a call, the models' own measured
        calls, :func:`mdtheory.blocks.simulation.model_estimate`; None: about 2 ms an LSTM call per
        depth, measured with ``lm-pairs`` on one BLAS thread) and O(V) work per node."""
        nodes = tree.n * (tree.length + 1)
        models = (tree.length + 1) * 2e-3 if model_time is None else model_time
        return _budget.Estimate(
            f"block-efficiency: {steps} target calls of a tree of K = {tree.n} paths of L = {tree.length} "
            f"tokens over V = {V}" + measured(model_time), steps * (models + nodes * V * 2e-7),
            16.0 * nodes * V)

    @property
    def label(self) -> str:
        """The verifier as the CLI prints it."""
        return self.name

    def draft_model(self, n: int, length: int) -> DraftTree:
        """The draft model whose draws :meth:`block_efficiency` enumerates."""
        if self.tree is None:
            return iid_drafts(n, length)
        if (self.tree.n, self.tree.length) != (n, length):
            raise InvalidInputError(f"{self.label} verifies the tree {self.tree!r} (K = {self.tree.n}, "
                                    f"L = {self.tree.length}), not K = {n}, L = {length}")
        return self.tree

    def _prepare(self, laws: _Laws, drafts) -> np.ndarray:
        x = _check_drafts(drafts, laws.p(()).size)
        laws.q(())
        if self.tree is not None:  # deterministic children: the draft law's own (its top tokens)
            x = self.tree.check_drafts(x, laws.q)
        return x

    def sample(self, target: Callable, draft: Callable, drafts, rng=None) -> np.ndarray:
        """One emitted block given ``drafts`` (K, L): a 1-D int array of 1..L+1 tokens."""
        rng = as_generator(rng)
        state = rng.bit_generator.state
        laws = _Laws(target, draft)
        try:
            block = self._sample(laws, self._prepare(laws, drafts), rng)
        except _Inexact:  # replay the same draws in exact arithmetic
            rng.bit_generator.state = state
            laws = laws.exactly()
            block = self._sample(laws, self._prepare(laws, drafts), rng)
        return np.asarray(block, dtype=np.int64)

    def law(self, target: Callable, draft: Callable, drafts) -> dict[tuple, float]:
        """The emitted block's exact law given ``drafts``: ``{block tuple: probability}``.

        Computed in floats while every normalising divisor is at least :data:`FLOAT_FLOOR`, else
        in exact fractions of the laws' entries (returned as floats unless the laws return
        fractions); either way it sums to one.
        """
        laws = _Laws(target, draft)
        out: dict = {}
        try:
            self._law(laws, self._prepare(laws, drafts), out)
        except _Inexact:
            laws, out = laws.exactly(), {}
            self._law(laws, self._prepare(laws, drafts), out)
            if not laws.inputs_exact:
                out = {k: float(v) for k, v in out.items()}
        return {k: v for k, v in out.items() if v != 0}

    def block_efficiency(self, target: Callable, draft: Callable, n: int, length: int):
        """Exact E|B| over every draw of the drafts (:func:`block_efficiency`)."""
        return block_efficiency(self, target, draft, n, length)

    @abstractmethod
    def _sample(self, laws, x, rng) -> list[int]:
        """One emitted block for the drafts ``x`` (the ``sample`` form, laws cached in ``laws``)."""

    @abstractmethod
    def _law(self, laws, x, out: dict) -> None:
        """Add the emitted block's law given the drafts ``x`` into ``out`` (the ``law`` form)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r})"



def exact_block_law(verifier: BlockVerifier, target: Callable, draft: Callable, n: int,
                    length: int) -> dict[tuple, float]:
    """The emitted block's law averaged over every draw of the drafts (the verifier's draft model:
    K = ``n`` iid drafts of ``length`` tokens, or its tree); refused over
    :data:`mdtheory.blocks.trees.MAX_TREE_DRAWS` draws."""
    for value, what in ((n, "n"), (length, "length")):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidInputError(f"{what} must be an integer >= 1, got {value!r}")
    model = verifier.draft_model(int(n), int(length))
    total: dict = {}
    for drafts, prob in model.enumerate(draft):
        for block, w in verifier.law(target, draft, drafts).items():
            total[block] = total.get(block, 0) + prob * w
    return total


def block_efficiency(verifier: BlockVerifier, target: Callable, draft: Callable, n: int, length: int):
    """Exact E|B| of ``verifier`` with K = ``n`` drafts of ``length`` tokens, by enumerating the drafts
    (exact fractions when the laws return fractions and the verifier computes in them)."""
    return sum((len(b) * w for b, w in exact_block_law(verifier, target, draft, n, length).items()), 0)
