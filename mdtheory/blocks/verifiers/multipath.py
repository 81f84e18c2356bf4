"""Multi-path block verification: a token-level rule selects one drafted path, block verification of
it against the law the selection induces (papers/blocks_verifiers.md §3)."""

from __future__ import annotations

from fractions import Fraction
from itertools import product

import numpy as np

from ...errors import ProblemTooLargeError
from ..trees import MAX_TREE_DRAWS
from .base import BlockVerifier, _as_law, _draw, _pos, _rule_params, _total
from .block import _bv_law, _bv_sample

__all__ = ["SelectedPath"]


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
    takes_rule = "select"

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
        from ... import rules

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
