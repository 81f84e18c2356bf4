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
instances). The verifiers (derivations and proofs in ``papers/blocks_verifiers.md``):

=============  ===========================================================================  ========
name           verifier                                                                     drafts
=============  ===========================================================================  ========
``token``      token by token along the drafts consistent with the accepted prefix, with a  iid/tree
               token-level selection rule of :data:`mdtheory.rules.RULES` at each node
``block``      block verification (Sun et al., ICLR 2025, Algorithm 2) on the first draft  any
``multipath``  multi-path block verification: a token-level rule selects one drafted path  iid
               top-down, then block verification of it against the selection's law
``trie``       block verification over the prefix trie of the drafts: at each node the      iid
               distinct next tokens are tried in order with the residual passed on
``traversal``  traversal verification (Weng et al., NeurIPS 2025): leaf to root over a      tree
               draft tree, residuals passed to the next sibling
=============  ===========================================================================  ========

Where they coincide (proved in the paper, checked in the tests): at K = 1 ``multipath``, ``trie``
and ``traversal`` are ``block``; at L = 1 ``block`` is single-draft speculative sampling,
``traversal`` on an iid tree is recursive rejection sampling (``token`` with ``rrs``), on a tree
without replacement it is ``token`` with ``rrs-wor``, ``multipath`` with ``rrs`` is ``token`` with
``rrs`` and ``trie`` is recursive rejection sampling over the distinct drafted tokens, without
replacement.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from ..errors import InvalidInputError
from .trees import DraftTree, _law_row, iid_drafts

__all__ = ["BlockVerifier", "TokenByToken", "BlockVerification", "SelectedPath", "PrefixTrie",
           "Traversal",
           "VERIFIERS", "make_verifier", "exact_block_law", "block_efficiency"]


def _pos(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def _total(x: np.ndarray):
    """Sum of a mass vector, a Python scalar (a Fraction for exact laws)."""
    s = x.sum()
    return s if isinstance(s, (Fraction, int)) and not isinstance(s, bool) else float(s)


def _tree_tag(tree) -> str:
    """``"[2,2 wor]"`` for a tree, ``""`` for K iid drafts."""
    return "" if tree is None else f"[{','.join(map(str, tree.branching))} {tree.sampling}]"


def _draw(weights: np.ndarray, rng: np.random.Generator) -> int:
    w = np.asarray(weights, dtype=np.float64)
    return int(rng.choice(w.size, p=w / w.sum()))


class _Laws:
    """The target's and draft's laws at contexts relative to the block, each looked up once."""

    def __init__(self, target: Callable, draft: Callable):
        self.target, self.draft = target, draft
        self._p: dict = {}
        self._q: dict = {}
        self.V = None

    def _row(self, law, cache, ctx):
        row = cache.get(ctx)
        if row is None:
            row = _law_row(law, ctx)
            if self.V is None:
                self.V = row.size
            elif row.size != self.V:
                raise InvalidInputError(f"the laws disagree on V: {row.size} at context {ctx}, "
                                        f"{self.V} elsewhere")
            cache[ctx] = row
        return row

    def p(self, ctx: tuple) -> np.ndarray:
        return self._row(self.target, self._p, ctx)

    def q(self, ctx: tuple) -> np.ndarray:
        return self._row(self.draft, self._q, ctx)


def _check_drafts(drafts, V: int) -> np.ndarray:
    x = np.asarray(drafts)
    if x.ndim == 1:
        x = x[None, :]
    if x.dtype.kind not in "iu" or x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise InvalidInputError(f"drafts must be an int array (K, L) with K, L >= 1, got {x.dtype} "
                                f"of shape {np.shape(drafts)}")
    if x.min() < 0 or x.max() >= V:
        raise InvalidInputError(f"drafts hold a token outside 0 .. {V - 1}")
    return x


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

    def _prepare(self, target, draft, drafts) -> tuple[_Laws, np.ndarray]:
        laws = _Laws(target, draft)
        x = _check_drafts(drafts, laws.p(()).size)
        laws.q(())
        if self.tree is not None:
            x = self.tree.check_drafts(x)
        return laws, x

    def sample(self, target: Callable, draft: Callable, drafts, rng=None) -> np.ndarray:
        """One emitted block given ``drafts`` (K, L): a 1-D int array of 1..L+1 tokens."""
        laws, x = self._prepare(target, draft, drafts)
        rng = np.random.default_rng(rng)
        return np.asarray(self._sample(laws, x, rng), dtype=np.int64)

    def law(self, target: Callable, draft: Callable, drafts) -> dict[tuple, float]:
        """The emitted block's exact law given ``drafts``: ``{block tuple: probability}``."""
        laws, x = self._prepare(target, draft, drafts)
        out: dict = {}
        self._law(laws, x, out)
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
        _bv_law(laws.p, [laws.q(tuple(row[:i])) for i in range(len(row))], row, 1, out)

    def _sample(self, laws, x, rng):
        row = [int(v) for v in x[0]]
        return _bv_sample(laws.p, [laws.q(tuple(row[:i])) for i in range(len(row))], row, rng)


def _bv_weights(p, proposals, row):
    """Block verification's stopping weights h_0..h_L and residuals r_0..r_{L-1} along ``row``,
    whose i-th token was proposed from ``proposals[i]`` (the draft's law there, or the law of the
    token a selection rule picked) and whose target law at a prefix is ``p(prefix)``."""
    L = len(row)
    w = [1]
    for i in range(L):
        u = proposals[i][row[i]]
        ratio = p(tuple(row[:i]))[row[i]] / u if u > 0 else 0
        w.append(min(1, w[-1] * ratio))
    h, res = [], []
    for i in range(L):
        r = _pos(w[i] * p(tuple(row[:i])) - proposals[i])
        rho = _total(r)
        den = rho + 1 - w[i]
        h.append(1 if i == 0 or den <= 0 else rho / den)
        res.append(r)
    h.append(w[L])
    return h, res


def _bv_law(p, proposals, row, weight, out: dict) -> None:
    """Add ``weight`` times block verification's law along ``row`` to ``out``."""
    h, res = _bv_weights(p, proposals, row)
    L = len(row)
    later = 1  # prod_{j > i} (1 - h_j)
    for i in range(L, -1, -1):
        stop = h[i] * later
        later *= 1 - h[i]
        if stop == 0:
            continue
        head = tuple(row[:i])
        corr = p(head) if i == L else res[i]
        mass = 1 if i == L else _total(corr)
        if mass == 0:
            continue
        for y in np.flatnonzero(corr != 0):
            key = head + (int(y),)
            out[key] = out.get(key, 0) + weight * stop * corr[y] / mass


def _bv_sample(p, proposals, row, rng) -> list[int]:
    h, res = _bv_weights(p, proposals, row)
    L = len(row)
    tau = max(i for i in range(L + 1) if rng.random() <= float(h[i]) or i == 0)
    corr = p(tuple(row)) if tau == L else res[tau]
    if _total(corr) == 0:  # reached with probability 0 only (rounding): any token is valid
        corr = p(tuple(row[:tau]))
    return row[:tau] + [_draw(corr, rng)]


# ---------------------------------------------------------------------------------------- path selection
def _rrs_selection(p, q, tokens):
    r"""Recursive rejection sampling (SpecInfer) of p against the iid drafted ``tokens`` from q, used
    to *select* one drafted token: the accepted one, or the first draft when every round rejects.

    Returns (the selection's law given the tokens as a dict, its marginal over iid drafts (V,)):
    the marginal is :math:`\sum_i R_i \min(q, r_i) + (q - \min(q, p)) \prod_{j \ge 2}(1 - \beta_j)`
    with :math:`r_1 = p`, :math:`r_{i+1} = (r_i - q)^+/\sum(r_i - q)^+`,
    :math:`\beta_i = \sum \min(r_i, q)` and :math:`R_i = \prod_{j < i}(1 - \beta_j)`.
    """
    n = len(tokens)
    r, rs = p, []
    for _ in range(n):
        rs.append(r)
        excess = _pos(r - q)
        mass = _total(excess)
        r = excess / mass if mass > 0 else r
    beta = [_total(np.minimum(ri, q)) for ri in rs]
    marginal, reach = 0 * q, 1
    for ri, b in zip(rs, beta, strict=True):
        marginal = marginal + reach * np.minimum(q, ri)
        reach *= 1 - b
    tail = 1
    for b in beta[1:]:
        tail *= 1 - b
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
    token, or the first draft's if it rejects them all), and the drafts that drafted it stay. The
    selected path is a draft whose next token, given the path and n, has the selection's marginal law
    μ (closed form for ``rrs``, :func:`_rrs_selection`; for other rules by enumerating the n-tuples,
    small V only). Block verification (Sun et al.) of the selected path with μ in place of q is
    lossless, n being part of the draft's state (papers/blocks_verifiers.md §3). At K = 1 it is block
    verification; at L = 1 its acceptance :math:`\sum \min(p, \mu)` is at least the rule's (equal
    for ``rrs``, α* for ``optimal``). Path selection followed by single-path block verification is
    the structure of Thomas & Pal's greedy multi-path block verification (2026); these selection
    rules are ours.

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
        from .. import rules

        if rule not in rules.RULES:
            raise InvalidInputError(
                f"unknown selection rule {rule!r}; valid choices: {', '.join(rules.RULES)}")
        if rule not in ("optimal", "single") and rules.RULES[rule].sampling != "iid":
            raise InvalidInputError(f"rule {rule!r} expects {rules.RULES[rule].sampling} drafts, "
                                    "not iid")
        self.rule, self.params = rule, params
        self._marginals: dict = {}

    @property
    def label(self) -> str:
        return f"multipath:{self.rule}"

    def _select(self, laws, ctx, tokens):
        """The selection's law given the offered tokens, and its marginal over n iid drafts."""
        if self.rule == "rrs":
            return _rrs_selection(laws.p(ctx), laws.q(ctx), tokens)
        from .. import rules

        key = (id(laws.target), id(laws.draft), ctx, len(tokens))
        got = self._marginals.get(key)
        if got is None:
            p = np.asarray(laws.p(ctx), dtype=np.float64)
            r = rules.make_rule(self.rule, p, np.asarray(laws.q(ctx), dtype=np.float64), len(tokens),
                                normalize=True, **self.params)
            tuples = r.model.tuple_law()  # refused over its size limit
            mu = np.zeros(p.size)
            for t, w in zip(tuples.tuples, tuples.probs, strict=True):
                acc, _ = r.conditional(t)
                mu += w * acc
                mu[t[0]] += w * max(0.0, 1.0 - acc.sum())
            if len(self._marginals) > 4096:
                self._marginals.clear()
            got = self._marginals[key] = (r, mu, laws.target, laws.draft)
        r, mu = got[0], got[1]
        acc, _ = r.conditional(np.asarray(tokens))
        law = {int(y): float(acc[y]) for y in np.flatnonzero(acc > 0)}
        law[tokens[0]] = law.get(tokens[0], 0.0) + max(0.0, 1.0 - float(acc.sum()))
        return law, mu

    def _law(self, laws, x, out):
        L = x.shape[1]

        def rec(ctx, depth, rows, weight, proposals):
            if depth == L:
                _bv_law(laws.p, proposals, list(ctx), weight, out)
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
            y = keys[_draw(np.array([float(law[k]) for k in keys]), rng)]
            ctx, rows = ctx + (y,), rows[x[rows, depth] == y]
            proposals.append(mu)
        return _bv_sample(laws.p, proposals, list(ctx), rng)


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
    """

    @abstractmethod
    def _children(self, x, depth: int, rows: np.ndarray) -> tuple[list[tuple[int, np.ndarray]], bool]:
        """The node's children in order, ``[(token, rows), ...]``, and whether each later child is
        drawn off the earlier siblings' tokens (without replacement)."""

    def _step(self, laws, ctx, q, u, used, t, y):
        """Child y's weight, and the proposal law u of this child."""
        if used:
            u = u.copy()
            u[used[-1]] = 0
            s = _total(u)
            u = u / s if s > 0 else u
        a = min(1, t[y] / u[y]) if u[y] > 0 else 0
        return a, u

    @staticmethod
    def _update(t, u):
        excess = _pos(t - u)
        den = _total(_pos(u - t))
        return excess / den if den > 0 else excess

    def _law(self, laws, x, out):
        L = x.shape[1]

        def rec(ctx, depth, rows, t):
            """Emitted sub-law below ctx (keys relative to ctx) and the probability of rejecting."""
            law: dict = {}
            carry = 1
            if depth < L:
                children, wor = self._children(x, depth, rows)
                q = laws.q(ctx)
                u, used = q, []
                for y, child_rows in children:
                    a, u = self._step(laws, ctx, q, u, used if wor else [], t, y)
                    if a != 0:
                        sub, rej = rec(ctx + (y,), depth + 1, child_rows, a * laws.p(ctx + (y,)))
                        for blk, w in sub.items():
                            key = (y,) + blk
                            law[key] = law.get(key, 0) + carry * w
                    else:
                        rej = 1
                    carry *= rej
                    t = self._update(t, u)
                    used.append(y)
                    if carry == 0:
                        break
            for y in np.flatnonzero(t != 0):
                key = (int(y),)
                law[key] = law.get(key, 0) + carry * t[y]
            return law, carry * max(0, 1 - _total(t))  # the mass of t is at most 1

        law, _ = rec((), 0, np.arange(x.shape[0]), laws.p(()))
        out.update(law)

    def _sample(self, laws, x, rng):
        L = x.shape[1]

        def rec(ctx, depth, rows, t):
            if depth < L:
                children, wor = self._children(x, depth, rows)
                q = laws.q(ctx)
                u, used = q, []
                for y, child_rows in children:
                    a, u = self._step(laws, ctx, q, u, used if wor else [], t, y)
                    if a != 0:
                        got = rec(ctx + (y,), depth + 1, child_rows, a * laws.p(ctx + (y,)))
                        if got is not None:
                            return [y] + got
                    t = self._update(t, u)
                    used.append(y)
            mass = _total(t)
            if depth == 0 or rng.random() < float(mass):
                return [_draw(t if mass > 0 else laws.p(ctx), rng)]
            return None

        return rec((), 0, np.arange(x.shape[0]), laws.p(()))


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
    earlier siblings for ``"wor"`` trees; a node whose children are all removed becomes a leaf.
    On K iid drafts it shares no prefix (drafts with one first token are different subtrees), unlike
    :class:`PrefixTrie`.
    """

    name = "traversal"

    def __init__(self, tree: DraftTree | None = None):
        if tree is not None and not isinstance(tree, DraftTree):
            raise InvalidInputError(f"tree must be a DraftTree, got {tree!r}")
        self.tree = tree

    @property
    def label(self) -> str:
        return "traversal" + _tree_tag(self.tree)

    def _prepare(self, target, draft, drafts):
        laws, x = super()._prepare(target, draft, drafts)
        self._layout = self.tree if self.tree is not None else iid_drafts(*x.shape)
        return laws, x

    def _children(self, x, depth, rows):
        tree = self._layout
        kids = tree.children_rows(depth, int(rows[0]))
        return [(int(x[lo, depth]), np.arange(lo, hi)) for lo, hi in kids], tree.sampling == "wor"


# ---------------------------------------------------------------------------------------- token by token
class TokenByToken(BlockVerifier):
    """Token-by-token verification with a token-level selection rule at each node.

    At depth d the drafts consistent with the accepted prefix offer their d-th tokens to the rule
    prepared for (p, q) there (K iid drafts: every consistent draft, iid given the prefix; a tree:
    the node's children, iid or without replacement as the tree draws them); the rule's output is
    emitted and a rejection ends the block; after L accepted tokens one bonus token is drawn from p.
    In a tree whose accepted token labels several siblings the first is followed.

    Parameters
    ----------
    rule : str
        A key of :data:`mdtheory.rules.RULES` whose draft model matches (``rrs-wor`` or
        ``optimal`` on ``"wor"`` trees).
    tree : DraftTree, optional
        Verify a tree; default K iid drafts.
    **params
        The rule's keywords.
    """

    name = "token"

    def __init__(self, rule: str = "rrs", tree: DraftTree | None = None, **params):
        from .. import rules  # loaded on use: the rules import scipy, HiGHS and numba

        if rule not in rules.RULES:
            raise InvalidInputError(
                f"unknown selection rule {rule!r}; valid choices: {', '.join(rules.RULES)}")
        if tree is not None and not isinstance(tree, DraftTree):
            raise InvalidInputError(f"tree must be a DraftTree, got {tree!r}")
        expects = rules.RULES[rule].sampling
        sampling = "iid" if tree is None else tree.sampling
        wanted = {"iid": "iid", "wor": "without-replacement"}[sampling]
        if rule not in ("optimal", "single") and expects != wanted:
            raise InvalidInputError(f"rule {rule!r} expects {expects} drafts, not {wanted}")
        if rule == "optimal" and sampling == "wor":
            params = {"sampling": "without-replacement", **params}
        self.rule, self.tree, self.params = rule, tree, params
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
    cls.name: cls for cls in (TokenByToken, BlockVerification, SelectedPath, PrefixTrie, Traversal)
}


def make_verifier(name: str, *, rule: str = "rrs", tree: DraftTree | None = None, **params) -> BlockVerifier:
    """A verifier by name: ``token`` (with ``rule`` and its keywords, on ``tree`` if given),
    ``block``, ``multipath`` (selection by ``rule``; K iid drafts), ``trie`` (K iid drafts) or
    ``traversal`` (on ``tree``, default K iid drafts)."""
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
    if tree is not None and name == "trie":
        raise InvalidInputError("trie verifies K iid drafts (their prefix trie); for a draft tree "
                                "use traversal")
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
