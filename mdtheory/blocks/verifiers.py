"""Sequence-level verifiers: from K drafts of L tokens to one emitted block, each with its exact law.

A verifier sees the drafts (an int array (K, L)), the target's and the draft's next-token laws at
every node of the draft tree (callables ``law(context) -> (V,)``, contexts relative to the start of
the block), and emits a block B = (b_1..b_{k+1}): b_{1:k} the first k tokens of some draft, b_{k+1}
the correction or bonus token. It is valid (lossless) when B followed by fresh target tokens has the
target's law on V^(L+1) (:func:`mdtheory.blocks.block_law_tv`). Each verifier has two forms:

- ``sample(target, draft, drafts, rng)``: the emitted block, a 1-D int array;
- ``law(target, draft, drafts)``: the emitted block's exact law given the drafts, ``{block: prob}``
  (exact fractions when the laws return :class:`fractions.Fraction` entries, except ``token``,
  whose rules work in floats);

and :meth:`BlockVerifier.block_efficiency` sums ``law`` over every draw of the drafts (small
instances). Both forms compute in floats while every normalising divisor is at least
:data:`FLOAT_FLOOR` and otherwise redo that draft array in exact fractions of the laws' entries, so
that ``law`` sums to one and ``sample`` draws from it even on draft arrays of tiny probability; the
laws are validated as they are read (:func:`mdtheory.blocks.trees.checked_row`). The verifiers
(derivations and proofs in ``papers/blocks_verifiers.md``):

=============  ===========================================================================  ========
name           verifier                                                                     drafts
=============  ===========================================================================  ========
``token``      token by token along the drafts consistent with the accepted prefix, with a  iid/tree
               token-level selection rule of :data:`mdtheory.rules.RULES` at each node
``block``      block verification (Sun et al., ICLR 2025, Algorithm 2) on the first draft  any
``multipath``  multi-path block verification: a token-level rule selects one drafted path  iid
               top-down, then block verification of it against the selection's law
``gbv``        greedy multi-path block verification (Thomas & Pal, 2026): the draft of      iid
               highest p/q ranks, block-verified against its own law
``trie``       block verification over the prefix trie of the drafts: at each node the      iid
               distinct next tokens are tried in order with the residual passed on
``traversal``  traversal verification (Weng et al., NeurIPS 2025): leaf to root over a      tree
               draft tree, residuals passed to the next sibling
=============  ===========================================================================  ========

Where they coincide (proved in the paper, checked in the tests): at K = 1 ``multipath``, ``gbv``,
``trie`` and ``traversal`` are ``block``; at L = 1 ``block`` is single-draft speculative sampling,
``traversal`` on an iid tree is recursive rejection sampling (``token`` with ``rrs``), on a tree
without replacement it is ``token`` with ``rrs-wor``, ``multipath`` with ``rrs`` is ``token`` with
``rrs`` and ``trie`` is recursive rejection sampling over the distinct drafted tokens, without
replacement.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable
from fractions import Fraction
from itertools import product

import numpy as np

from .._validate import as_generator
from ..errors import InvalidInputError, ProblemTooLargeError
from .trees import MAX_TREE_DRAWS, DraftTree, checked_row, iid_drafts

__all__ = ["BlockVerifier", "TokenByToken", "BlockVerification", "SelectedPath", "GreedyMultiPath",
           "PrefixTrie", "Traversal", "VERIFIERS", "make_verifier", "exact_block_law",
           "block_efficiency", "FLOAT_FLOOR"]

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


def _rule_params(rule: str, wanted: str, params: dict) -> dict:
    """The keywords to prepare ``rule`` with on ``wanted`` drafts, or the refusal: a rule runs on
    its own draft model, reads only the first draft (:attr:`first_draft_only`, whose law is q on
    any model), or takes a ``sampling`` keyword, then set to ``wanted`` (the rules' declarations)."""
    from .. import rules  # loaded on use: the rules import scipy, HiGHS and numba

    if rule not in rules.RULES:
        raise InvalidInputError(
            f"unknown selection rule {rule!r}; valid choices: {', '.join(rules.RULES)}")
    cls = rules.RULES[rule]
    if cls.sampling == wanted or cls.first_draft_only and _first_draft_is_q(wanted):
        return params
    if "sampling" in rules.rule_keywords(cls):
        return {"sampling": wanted, **params}
    raise InvalidInputError(f"rule {rule!r} expects {cls.sampling} drafts, not {wanted}")


def _first_draft_is_q(sampling: str) -> bool:
    """Whether the first draft of ``sampling``'s drafts is a draw from q (iid, successive sampling),
    read off the model's own first-draft law on a small q."""
    from ..models.registry import make_draft_model

    model = make_draft_model(np.array([0.5, 0.3, 0.2]), 2, sampling)
    return bool(np.allclose(model.first_draft_law(), model.q, rtol=0, atol=1e-12))


class BlockVerifier(ABC):
    """A sequence-level verifier: ``sample`` and ``law`` forms, exact block efficiency.

    Attributes
    ----------
    name : str
        Registry name (:data:`VERIFIERS`).
    tree : DraftTree or None
        The draft tree the verifier reads the drafts as; None: K iid drafts (any K).
    """

    name = ""
    tree: DraftTree | None = None

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
        if self.tree is not None:
            x = self.tree.check_drafts(x)
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


# ---------------------------------------------------------------------------------------- block
class BlockVerification(BlockVerifier):
    """Block verification (Sun et al., ICLR 2025, Algorithm 2) of the first draft.

    Along the draft x_1..x_L: weights :math:`w_0 = 1`, :math:`w_i = \\min(1, w_{i-1}\\, p(x_i \\mid
    x_{<i}) / q(x_i \\mid x_{<i}))`; at each prefix i < L the residual :math:`r_i = (w_i\\, p(\\cdot
    \\mid x_{\\le i}) - q(\\cdot \\mid x_{\\le i}))^+` of mass :math:`\\rho_i`, and
    :math:`h_i = \\rho_i / (\\rho_i + 1 - w_i)` (:math:`h_0 = 1`), :math:`h_L = w_L`. With
    :math:`\\eta_i \\sim U(0, 1)` the accepted length is the largest i with :math:`\\eta_i \\le h_i`;
    the correction is drawn from :math:`r_\\tau / \\rho_\\tau` (from :math:`p(\\cdot \\mid x)` at
    τ = L). With K > 1 drafts it verifies the first (single-draft block verification).

    Examples
    --------
    >>> from fractions import Fraction as F
    >>> law = lambda probs: (lambda ctx: np.array(probs, dtype=object))
    >>> p, q = law([F(1, 3), F(2, 3)]), law([F(2, 3), F(1, 3)])
    >>> BlockVerification().block_efficiency(p, q, 1, 2)
    Fraction(20, 9)
    """

    name = "block"

    def _law(self, laws, x, out):
        row = [int(v) for v in x[0]]
        _bv_law(laws, [laws.q(tuple(row[:i])) for i in range(len(row))], row, 1, out)

    def _sample(self, laws, x, rng):
        row = [int(v) for v in x[0]]
        return _bv_sample(laws, [laws.q(tuple(row[:i])) for i in range(len(row))], row, rng)


def _bv_weights(laws, proposals, row):
    """Block verification's stopping weights h_0..h_L, residuals r_0..r_{L-1} and their masses
    along ``row``, whose i-th token was proposed from ``proposals[i]`` (the draft's law there, or
    the law of the token a selection picked) and whose target law at a prefix is ``laws.p``.

    The weights w_i are kept as weights (never renormalised); a denominator rho_i + 1 - w_i below
    :data:`FLOAT_FLOOR` sends float mode to exact arithmetic."""
    p = laws.p
    L = len(row)
    w = [1]
    for i in range(L):
        u = proposals[i][row[i]]
        w.append(min(1, w[-1] * p(tuple(row[:i]))[row[i]] / u) if u > 0 else 0 * u)
    h, res, mass = [1], [], []
    for i in range(L):
        r = _pos(w[i] * p(tuple(row[:i])) - proposals[i])
        rho = _total(r)
        res.append(r)
        mass.append(rho)
        if i:
            den = rho + (1 - w[i])  # 1 - w first: exact when w is 1
            laws.guard(den)
            h.append(rho / den if den > 0 else 1)
    h.append(w[L])
    return h, res, mass


def _bv_law(laws, proposals, row, weight, out: dict) -> None:
    """Add ``weight`` times block verification's law along ``row`` to ``out``."""
    h, res, mass = _bv_weights(laws, proposals, row)
    L = len(row)
    later = 1  # prod_{j > i} (1 - h_j)
    for i in range(L, -1, -1):
        stop = h[i] * later
        later *= 1 - h[i]
        if stop == 0:
            continue
        head = tuple(row[:i])
        if i == L:
            corr, total = laws.p(head), 1
        else:
            laws.guard(mass[i])
            # an empty residual with a stop (exact arithmetic: a path of draft probability 0)
            # corrects from the target, as the sampler does
            corr, total = (res[i], mass[i]) if mass[i] != 0 else (laws.p(head), 1)
        for y in np.flatnonzero(corr != 0):
            key = head + (int(y),)
            out[key] = out.get(key, 0) + weight * stop * corr[y] / total


def _bv_sample(laws, proposals, row, rng) -> list[int]:
    h, res, mass = _bv_weights(laws, proposals, row)
    L = len(row)
    tau = max(i for i in range(L + 1) if rng.random() <= float(h[i]) or i == 0)
    if tau == L:
        return row + [_draw(laws.p(tuple(row)), rng)]
    laws.guard(mass[tau])
    corr = res[tau] if mass[tau] != 0 else laws.p(tuple(row[:tau]))  # the latter: probability 0
    return row[:tau] + [_draw(corr, rng)]


# ---------------------------------------------------------------------------------------- path selection
def _rrs_selection(laws, ctx, tokens):
    r"""Recursive rejection sampling (SpecInfer) of p against the iid drafted ``tokens`` from q, used
    to *select* one drafted token: the accepted one, or the first draft when every round rejects.

    Returns (the selection's law given the tokens as a dict, its marginal over iid drafts (V,)):
    the marginal is :math:`\sum_i R_i \min(q, r_i) + (q - \min(q, p)) \prod_{j \ge 2}(1 - \beta_j)`
    with :math:`r_1 = p`, :math:`r_{i+1} = (r_i - q)^+/\sum(r_i - q)^+`,
    :math:`\beta_i = \sum \min(r_i, q)` and :math:`R_i = \prod_{j < i}(1 - \beta_j)`;
    :math:`1 - \beta_i` is taken as the residual's mass :math:`\sum (r_i - q)^+` (equal, without
    the cancellation).
    """
    p, q = laws.p(ctx), laws.q(ctx)
    n = len(tokens)
    r, rs, left = p, [], []  # left[i] = 1 - beta_i
    for i in range(n):
        rs.append(r)
        excess = _pos(r - q)
        mass = _total(excess)
        left.append(mass)
        if i < n - 1:
            laws.guard(mass)
            r = excess / mass if mass > 0 else r
    marginal, reach = 0 * q, 1
    for ri, m in zip(rs, left, strict=True):
        marginal = marginal + reach * np.minimum(q, ri)
        reach *= m
    tail = 1
    for m in left[1:]:
        tail *= m
    marginal = marginal + (q - np.minimum(q, p)) * tail
    law: dict = {}
    reach = 1
    for ri, y in zip(rs, tokens, strict=True):
        a = min(1, ri[y] / q[y]) if q[y] > 0 else 0
        law[y] = law.get(y, 0) + reach * a
        reach *= 1 - a
    law[tokens[0]] = law.get(tokens[0], 0) + reach
    return law, marginal


class SelectedPath(BlockVerifier):
    r"""Multi-path block verification: select one drafted path, then block-verify it against the law
    the selection induces.

    Going down from the root, the drafts consistent with the path so far (n of them) offer their next
    tokens, iid from q there; the token-level rule ``rule`` run on them selects one (its accepted
    token, or the first draft's if it rejects them all; for ``optimal``, its candidate: the earliest
    draft of its time schedule, before the acceptance step), and the drafts that drafted it stay.
    The selected path is a draft whose next token, given the path and n, has the selection's
    marginal law μ (closed form for ``rrs``, :func:`_rrs_selection`, and for ``optimal``, the
    schedule's exact marginal, with :math:`\sum \min(p, \mu) = \alpha^*`, at any V; for other
    rules by enumerating the n-tuples, small V only). Block verification (Sun et al.) of the
    selected path with μ in place of q is lossless, n being part of the draft's state
    (papers/blocks_verifiers.md §3). At K = 1 it is block verification; at L = 1 its acceptance
    :math:`\sum \min(p, \mu)` is at least the rule's (equal for ``rrs``, α* for ``optimal``).
    Path selection followed by single-path block verification is the structure of Thomas & Pal's
    greedy multi-path block verification (2026), whose own selection is :class:`GreedyMultiPath`;
    these selection rules are ours.

    Parameters
    ----------
    rule : str
        The selecting rule, a key of :data:`mdtheory.rules.RULES` for iid drafts (default ``rrs``).
    **params
        The rule's keywords.

    Examples
    --------
    >>> from fractions import Fraction as F
    >>> law = lambda probs: (lambda ctx: np.array(probs, dtype=object))
    >>> p, q = law([F(1, 3), F(2, 3)]), law([F(2, 3), F(1, 3)])
    >>> SelectedPath().block_efficiency(p, q, 1, 2)
    Fraction(20, 9)
    """

    name = "multipath"

    def __init__(self, rule: str = "rrs", **params):
        self.rule, self.params = rule, _rule_params(rule, "iid", params)
        self._rules: dict = {}

    @property
    def label(self) -> str:
        return f"multipath:{self.rule}"

    def _select(self, laws, ctx, tokens):
        """The selection's law given the offered tokens, and its marginal over n iid drafts."""
        if self.rule == "rrs":
            return _rrs_selection(laws, ctx, tokens)
        from .. import rules

        n = len(tokens)
        key = (id(laws.target), id(laws.draft), ctx, n)
        got = self._rules.get(key)
        if got is None:
            p = np.asarray(laws.p(ctx), dtype=np.float64)
            q = np.asarray(laws.q(ctx), dtype=np.float64)
            r = rules.make_rule(self.rule, p, q, n, normalize=True, **self.params)
            if len(self._rules) > 4096:
                self._rules.clear()
            got = self._rules[key] = [r, {}, laws.target, laws.draft]  # keeps the ids alive
        r, marginals = got[0], got[1]
        schedule = getattr(r, "schedule", None)
        mu = marginals.get(laws.exact)
        if mu is None:
            if schedule is not None:  # the candidate's law over iid drafts, in closed form
                mu = _as_law(laws, schedule.marginal)
            else:
                mu = self._marginal(laws, ctx, r, n)
            marginals[laws.exact] = mu
        if schedule is not None:
            return self._candidate(laws, schedule, ctx, tokens), mu
        return self._choice(laws, r, tokens), mu

    @staticmethod
    def _candidate(laws, schedule, ctx, tokens) -> dict:
        """The selection of a rule with a candidate schedule: its candidate, the earliest draft of
        the time schedule (whatever the acceptance step would do with it)."""
        q = laws.q(ctx)
        offered = [y for y in tokens if q[y] > 0]  # a token of q = 0 cannot have been drafted
        if not offered:
            return {tokens[0]: 1 + 0 * q[0]}
        law = _as_law(laws, schedule.candidate_law(np.asarray(offered)))
        return {int(y): law[y] for y in np.flatnonzero(law != 0)}

    @staticmethod
    def _choice(laws, r, tokens) -> dict:
        """The selection given the offered tokens: the rule's accepted law (on the offered tokens;
        scaled down if its rounding sums over one), the rest on the first token."""
        acc, _ = r.conditional(np.asarray(tokens))
        offered = set(tokens)
        conv = (lambda v: Fraction(float(v))) if laws.exact else float
        law = {y: conv(acc[y]) for y in offered if acc[y] > 0}
        total = sum(law.values(), 0 * conv(0))
        if total > 1:
            law = {y: v / total for y, v in law.items()}
            total = 1
        law[tokens[0]] = law.get(tokens[0], 0) + (1 - total)
        return law

    def _marginal(self, laws, ctx, r, n):
        """The selected token's law over n iid drafts, by enumerating the ordered n-tuples (exact
        tuple probabilities in exact mode)."""
        q = laws.q(ctx)
        support = [int(y) for y in np.flatnonzero(q != 0)]
        if len(support) ** n > MAX_TREE_DRAWS:
            raise ProblemTooLargeError(
                f"multipath:{self.rule} enumerates {len(support)}^{n} draft tuples at context {ctx}, "
                f"over {MAX_TREE_DRAWS:,}; rrs and optimal select in closed form, as does gbv")
        mu = 0 * q
        for t in product(support, repeat=n):
            w = 1
            for y in t:
                w = w * q[y]
            if w == 0:
                continue
            for y, s in self._choice(laws, r, list(t)).items():
                mu[y] = mu[y] + w * s
        return mu

    def _law(self, laws, x, out):
        L = x.shape[1]

        def rec(ctx, depth, rows, weight, proposals):
            if depth == L:
                _bv_law(laws, proposals, list(ctx), weight, out)
                return
            tokens = [int(y) for y in x[rows, depth]]
            law, mu = self._select(laws, ctx, tokens)
            for y, w in law.items():
                if w != 0:
                    rec(ctx + (y,), depth + 1, rows[x[rows, depth] == y], weight * w, proposals + [mu])

        rec((), 0, np.arange(x.shape[0]), 1, [])

    def _sample(self, laws, x, rng):
        ctx, rows, proposals = (), np.arange(x.shape[0]), []
        for depth in range(x.shape[1]):
            tokens = [int(y) for y in x[rows, depth]]
            law, mu = self._select(laws, ctx, tokens)
            keys = list(law)
            y = keys[_draw(np.array([law[k] for k in keys], dtype=object if laws.exact else float), rng)]
            ctx, rows = ctx + (y,), rows[x[rows, depth] == y]
            proposals.append(mu)
        return _bv_sample(laws, proposals, list(ctx), rng)


class GreedyMultiPath(BlockVerifier):
    r"""Greedy multi-path block verification (GBV; Thomas & Pal, 2026): block verification of the
    lexicographically greatest draft against that draft's own law.

    Tokens at a node with context c are ranked by the ratio :math:`p(y \mid c) / q(y \mid c)`
    (ties: the larger token index ranks higher), paths lexicographically by these ranks. The
    selected path is the greatest of the K iid drafts (the walk that steps from the root to the
    child of highest ratio); its next token given its prefix c has the law

    .. math:: \mu_c(v) = \frac{(R + G(v) + q(v))^K - (R + G(v))^K}{(R + 1)^K - R^K}
              = q(v)\, \frac{S(R + G(v) + q(v),\, R + G(v))}{S(R + 1,\, R)},

    :math:`G(v)` the q-mass of the tokens ranked below v at c, :math:`S(a, b) = \sum_{i<K} a^i
    b^{K-1-i}`, and :math:`R = A / Q(c)`, the probability that one draft deviates below c before
    reaching its end over the probability that it starts with c (:math:`R = 0` at the root,
    :math:`R_{c v} = (R_c + G_c(v)) / q(v \mid c)`). Block verification of the selected path with
    :math:`\mu` in place of q is lossless (Proposition 2 of ``papers/blocks_verifiers.md``; the
    path's law is :math:`\prod \mu`). At K = 1, :math:`\mu = q` and GBV is block verification.

    The selection and the skewed law are the authors' (their reference implementation's
    ``gbv_verify`` and ``compute_skew``); this form computes :math:`\mu` by the positive
    expansion S (no cancellation), keeps R instead of the two underflowing joint masses, and breaks
    ties by one rule in both the walk and :math:`\mu`.

    Examples
    --------
    >>> from fractions import Fraction as F
    >>> law = lambda probs: (lambda ctx: np.array(probs, dtype=object))
    >>> p, q = law([F(1, 3), F(2, 3)]), law([F(2, 3), F(1, 3)])
    >>> GreedyMultiPath().block_efficiency(p, q, 1, 2)
    Fraction(20, 9)
    """

    name = "gbv"

    @staticmethod
    def _ranks(laws, ctx):
        """Each token's rank at ctx (0 the lowest) and the q-mass below each token."""
        p, q = laws.p(ctx), laws.q(ctx)
        inf = float("inf")
        key = [(p[y] / q[y] if q[y] > 0 else inf, y) for y in range(q.size)]
        order = sorted(range(q.size), key=key.__getitem__)
        rank = np.empty(q.size, dtype=np.int64)
        below = 0 * q
        acc = 0 * q[0]
        for i, y in enumerate(order):
            rank[y] = i
            below[y] = acc
            acc = acc + q[y]
        return rank, below

    def _path(self, laws, x):
        """The selected path and the skewed laws mu along it."""
        K, L = x.shape
        rows, path, mus = np.arange(K), [], []
        R = 0 * laws.q(())[0]
        for depth in range(L):
            ctx = tuple(path)
            q = laws.q(ctx)
            rank, below = self._ranks(laws, ctx)
            if R == float("inf"):  # R past the float range (or a prefix of draft probability 0):
                mu = q                # mu is q to within 1 / R
            else:
                scale = R + 1  # S is homogeneous of degree K - 1: divide every argument by R + 1
                hi, lo, r0 = (R + below + q) / scale, (R + below) / scale, R / scale
                mu = q * _power_sums(hi, lo, K) / _power_sums(1 + 0 * r0, r0, K)
            tokens = x[rows, depth]
            y = int(tokens[np.argmax(rank[tokens])])
            rows = rows[tokens == y]
            path.append(y)
            mus.append(mu)
            with np.errstate(over="ignore"):
                R = (R + below[y]) / q[y] if q[y] > 0 else float("inf")
        return path, mus

    def _law(self, laws, x, out):
        path, mus = self._path(laws, x)
        _bv_law(laws, mus, path, 1, out)

    def _sample(self, laws, x, rng):
        path, mus = self._path(laws, x)
        return _bv_sample(laws, mus, path, rng)


def _power_sums(a, b, K: int):
    """:math:`\\sum_{i=0}^{K-1} a^i b^{K-1-i}` (elementwise), a sum of non-negative terms."""
    total, ai = 0 * a, 1 + 0 * a
    for i in range(K):
        total = total + ai * b ** (K - 1 - i)
        ai = ai * a
    return total


# ---------------------------------------------------------------------------------------- tries and trees
class _Recursive(BlockVerifier):
    """Residual-recycling block verification over a tree of drafts, leaf to root.

    At a node with context c the verifier holds a target sub-measure t on the next token (mass a:
    the probability that the block goes through c, given the drafts above). It tries the node's
    children in order: child y, drawn from the proposal law u (q at c, off the earlier siblings for
    draws without replacement), gets the weight :math:`\\min(1, t(y)/u(y))` and the sub-measure that
    weight times :math:`p(\\cdot \\mid c\\,y)`; if the child's whole subtree rejects, t becomes
    :math:`(t - u)^+ / \\sum (u - t)^+`. After the last child the node itself is accepted with
    probability :math:`\\sum t`, its correction drawn from t normalised; otherwise the node rejects
    to its parent. The root holds t = p(. | ()) and never rejects.

    The mass m of t is carried along, not re-summed: a child's sub-measure has mass its weight,
    the root's is 1, and an update divides by :math:`D = \\sum (u - t)^+ = \\rho + 1 - m`
    (:math:`\\rho = \\sum (t - u)^+`, the same number, without summing the cancelling entries),
    so that m becomes :math:`\\rho / D \\le 1` and stays exactly 1 at the root. A child whose
    proposal probability is 0 (a draft the draft model cannot draw) is skipped.
    """

    @abstractmethod
    def _children(self, x, depth: int, rows: np.ndarray) -> tuple[list[tuple[int, np.ndarray]], bool]:
        """The node's children in order, ``[(token, rows), ...]``, and whether each later child is
        drawn off the earlier siblings' tokens (without replacement)."""

    @staticmethod
    def _off(u, y):
        """The proposal law of the next sibling drawn without replacement: u off token y."""
        u = u.copy()
        u[y] = 0
        s = _total(u)
        return u / s if s > 0 else u

    @staticmethod
    def _update(laws, t, m, u):
        """t and its mass m after a child drawn from u rejected: (t - u)^+ / (rho + 1 - m)."""
        excess = _pos(t - u)
        rho = _total(excess)
        den = rho + (1 - m)  # 1 - m first: exact when m is 1
        laws.guard(den)
        return excess / den, rho / den

    def _children_of(self, laws, x, ctx, depth, rows):
        """The node's children with each one's proposal law (those of proposal probability 0
        left out)."""
        children, wor = self._children(x, depth, rows)
        u, out = laws.q(ctx), []
        for k, (y, child_rows) in enumerate(children):
            if wor and k:
                u = self._off(u, children[k - 1][0])
            if u[y] > 0:
                out.append((y, child_rows, u))
        return out

    def _law(self, laws, x, out):
        L = x.shape[1]

        def rec(ctx, depth, rows, t, m):
            """Emitted sub-law below ctx (keys relative to ctx) and the probability of rejecting."""
            law: dict = {}
            carry = 1
            if depth < L:
                for y, child_rows, u in self._children_of(laws, x, ctx, depth, rows):
                    a = min(1, t[y] / u[y])
                    rej = 1
                    if a != 0:
                        sub, rej = rec(ctx + (y,), depth + 1, child_rows, a * laws.p(ctx + (y,)), a)
                        for blk, w in sub.items():
                            key = (y,) + blk
                            law[key] = law.get(key, 0) + carry * w
                    carry *= rej
                    if carry == 0:
                        break
                    t, m = self._update(laws, t, m, u)
            for y in np.flatnonzero(t != 0):
                key = (int(y),)
                law[key] = law.get(key, 0) + carry * t[y]
            return law, carry * (1 - m)

        law, _ = rec((), 0, np.arange(x.shape[0]), laws.p(()), 1)
        out.update(law)

    def _sample(self, laws, x, rng):
        L = x.shape[1]

        def rec(ctx, depth, rows, t, m):
            if depth < L:
                for y, child_rows, u in self._children_of(laws, x, ctx, depth, rows):
                    a = min(1, t[y] / u[y])
                    if a != 0:
                        got = rec(ctx + (y,), depth + 1, child_rows, a * laws.p(ctx + (y,)), a)
                        if got is not None:
                            return [y] + got
                    t, m = self._update(laws, t, m, u)
            if depth == 0 or rng.random() < float(m):
                return [_draw(t if m > 0 else laws.p(ctx), rng)]
            return None

        return rec((), 0, np.arange(x.shape[0]), laws.p(()), 1)


class PrefixTrie(_Recursive):
    """Block verification of K iid drafts over their prefix trie, residuals passed between siblings.

    The drafts that agree on a prefix share its node; a node's children are the distinct next
    tokens of its drafts in order of first appearance (row order), so each child is drawn from q off
    the earlier children's tokens (the first appearances of an iid sequence are successive sampling
    without replacement), and a child's subtree holds every draft through it. The recursion of
    :class:`_Recursive` then runs on this trie. At K = 1 it is block verification.

    Examples
    --------
    >>> from fractions import Fraction as F
    >>> law = lambda probs: (lambda ctx: np.array(probs, dtype=object))
    >>> p, q = law([F(1, 3), F(2, 3)]), law([F(2, 3), F(1, 3)])
    >>> PrefixTrie().block_efficiency(p, q, 1, 2)
    Fraction(20, 9)
    """

    name = "trie"

    def _children(self, x, depth, rows):
        tokens = x[rows, depth]
        order = list(dict.fromkeys(int(y) for y in tokens))
        return [(y, rows[tokens == y]) for y in order], True


class Traversal(_Recursive):
    """Traversal verification (Weng et al., NeurIPS 2025) of a draft tree, leaf to root.

    Parameters
    ----------
    tree : DraftTree, optional
        The tree the drafts were drawn as (branching factors and iid or without-replacement
        children). Default: K iid drafts, the tree ``(K, 1, ..., 1)`` read off the drafts' shape.

    The depth-first order visits the first leaf first: it is accepted with its sequence-level
    weight, else removed and its parent's residual passed to the next sibling, drawn from q off the
    earlier siblings for trees without replacement; a node whose children are all removed becomes a
    leaf. The children must be draws from q (iid or without replacement), not fixed tokens.
    On K iid drafts it shares no prefix (drafts with one first token are different subtrees), unlike
    :class:`PrefixTrie`.
    """

    name = "traversal"

    def __init__(self, tree: DraftTree | None = None):
        if tree is not None and not isinstance(tree, DraftTree):
            raise InvalidInputError(f"tree must be a DraftTree, got {tree!r}")
        if tree is not None and tree.sampling not in ("iid", "without-replacement"):
            raise InvalidInputError(f"traversal verifies trees of children drawn from q (iid or "
                                    f"without-replacement), not {tree.sampling}")
        self.tree = tree

    @property
    def label(self) -> str:
        return "traversal" + _tree_tag(self.tree)

    def _prepare(self, laws, drafts):
        x = super()._prepare(laws, drafts)
        self._layout = self.tree if self.tree is not None else iid_drafts(*x.shape)
        return x

    def _children(self, x, depth, rows):
        tree = self._layout
        kids = tree.children_rows(depth, int(rows[0]))
        return [(int(x[lo, depth]), np.arange(lo, hi)) for lo, hi in kids], tree.distinct


# ---------------------------------------------------------------------------------------- token by token
class TokenByToken(BlockVerifier):
    """Token-by-token verification with a token-level selection rule at each node.

    At depth d the drafts consistent with the accepted prefix offer their d-th tokens to the rule
    prepared for (p, q) there (K iid drafts: every consistent draft, iid given the prefix; a tree:
    the node's children, as the tree draws them); the rule's output is
    emitted and a rejection ends the block; after L accepted tokens one bonus token is drawn from p.
    In a tree whose accepted token labels several siblings the first is followed.

    Parameters
    ----------
    rule : str
        A key of :data:`mdtheory.rules.RULES` whose draft model matches the tree's sampling
        (``rrs-wor`` or ``optimal`` on trees without replacement, ``optimal`` on top trees).
    tree : DraftTree, optional
        Verify a tree; default K iid drafts.
    **params
        The rule's keywords.
    """

    name = "token"

    def __init__(self, rule: str = "rrs", tree: DraftTree | None = None, **params):
        if tree is not None and not isinstance(tree, DraftTree):
            raise InvalidInputError(f"tree must be a DraftTree, got {tree!r}")
        wanted = "iid" if tree is None else tree.sampling
        self.rule, self.tree, self.params = rule, tree, _rule_params(rule, wanted, params)
        self._prepared: dict = {}

    @property
    def label(self) -> str:
        return f"token:{self.rule}" + _tree_tag(self.tree)

    def _rule(self, laws, ctx, n):
        from .. import rules

        key = (id(laws.target), id(laws.draft), ctx, n)
        r = self._prepared.get(key)
        if r is None:
            p = np.asarray(laws.p(ctx), dtype=np.float64)
            q = np.asarray(laws.q(ctx), dtype=np.float64)
            r = rules.make_rule(self.rule, p, q, n, normalize=True, **self.params)
            if len(self._prepared) > 4096:
                self._prepared.clear()
            self._prepared[key] = (r, laws.target, laws.draft)  # keeps the ids alive
            return r
        return r[0]

    def _offer(self, x, depth, rows):
        """The tokens offered at this node and the rows each accepted token continues with."""
        if self.tree is None:
            tokens = x[rows, depth]
            return tokens, lambda y: rows[tokens == y]
        kids = self.tree.children_rows(depth, int(rows[0]))
        tokens = np.array([x[lo, depth] for lo, _ in kids])

        def follow(y):
            lo, hi = kids[int(np.flatnonzero(tokens == y)[0])]
            return np.arange(lo, hi)

        return tokens, follow

    def _law(self, laws, x, out):
        L = x.shape[1]

        def rec(ctx, depth, rows, w):
            if depth == L:
                p = laws.p(ctx)
                for y in np.flatnonzero(p > 0):
                    key = ctx + (int(y),)
                    out[key] = out.get(key, 0) + w * float(p[y])
                return
            tokens, follow = self._offer(x, depth, rows)
            acc, rej = self._rule(laws, ctx, tokens.size).conditional(tokens)
            for y in np.flatnonzero(rej > 0):
                key = ctx + (int(y),)
                out[key] = out.get(key, 0) + w * float(rej[y])
            for y in np.flatnonzero(acc > 0):
                rec(ctx + (int(y),), depth + 1, follow(int(y)), w * float(acc[y]))

        rec((), 0, np.arange(x.shape[0]), 1.0)

    def _sample(self, laws, x, rng):
        L = x.shape[1]
        ctx, rows = (), np.arange(x.shape[0])
        for depth in range(L):
            tokens, follow = self._offer(x, depth, rows)
            y, accepted = self._rule(laws, ctx, tokens.size).select(tokens, rng)
            ctx = ctx + (int(y),)
            if not accepted:
                return list(ctx)
            rows = follow(int(y))
        return list(ctx) + [_draw(laws.p(ctx), rng)]


#: Verifiers by name.
VERIFIERS: dict[str, type[BlockVerifier]] = {
    cls.name: cls for cls in (TokenByToken, BlockVerification, SelectedPath, GreedyMultiPath,
                              PrefixTrie, Traversal)
}


def make_verifier(name: str, *, rule: str = "rrs", tree: DraftTree | None = None, **params) -> BlockVerifier:
    """A verifier by name: ``token`` (with ``rule`` and its keywords, on ``tree`` if given),
    ``block``, ``multipath`` (selection by ``rule``; K iid drafts), ``gbv`` (K iid drafts),
    ``trie`` (K iid drafts) or ``traversal`` (on ``tree``, default K iid drafts)."""
    if name not in VERIFIERS:
        raise InvalidInputError(f"unknown verifier {name!r}; valid choices: {', '.join(VERIFIERS)}")
    if name == "token":
        return TokenByToken(rule, tree, **params)
    if name == "multipath":
        if tree is not None:
            raise InvalidInputError("multipath verifies K iid drafts; for a draft tree use traversal")
        return SelectedPath(rule, **params)
    if params:
        raise InvalidInputError(f"verifier {name!r} takes no keyword {', '.join(map(repr, params))}")
    if name == "traversal":
        return Traversal(tree)
    if tree is not None and name in ("trie", "gbv"):
        raise InvalidInputError(f"{name} verifies K iid drafts; for a draft tree use traversal")
    return VERIFIERS[name]()


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
