"""Token-by-token verification of K drafts or a draft tree with a token-level selection rule at
every node."""

from __future__ import annotations

import numpy as np

from ... import _budget
from ..trees import DraftTree
from .base import BlockVerifier, _draw, _rule_params, _tree_tag, default_rule, measured

__all__ = ["TokenByToken", "rule_estimate", "PREPARED_RULES"]

#: Rules a token verifier keeps prepared (one per context and number of drafts offered) at most.
PREPARED_RULES = 4096


def rule_estimate(rule: str, V: int, K: int, L: int, steps: int, model_time: float | None = None,
                  offered: int | None = None) -> _budget.Estimate:
    """``steps`` target calls of the simulation verifying token by token with ``rule``: each drafts
    K x L tokens and scores the nodes (``model_time`` seconds a call, the models' own measured calls,
    :func:`mdtheory.blocks.simulation.model_estimate`; None: about 2 ms an LSTM call per depth, the
    char-LSTM's, measured with ``lm-pairs``), keeps K (L + 1) target laws and prepares the rule at
    up to L prefixes (the rule's :meth:`~mdtheory.rules.base.SelectionRule.estimate` on the drafts a
    node offers it: ``offered``, a tree's largest branching, default K, an upper bound)."""
    from ... import rules
    from ...models.registry import make_draft_model

    cls = rules.RULES[rule]
    n = K if offered is None else offered
    prep = cls.estimate(make_draft_model(np.full(V, 1.0 / V), n, cls.sampling))
    models = L * 2 * 2e-3 if model_time is None else model_time
    return _budget.Estimate(
        f"block-efficiency with {rule}: {steps} target calls of K = {K} drafts of L = {L} tokens "
        f"over V = {V}" + measured(model_time), steps * (models + L * prep.seconds),
        8.0 * K * (L + 1) * V + prep.bytes)


class TokenByToken(BlockVerifier):
    """Token-by-token verification with a token-level selection rule at each node.

    At depth d the drafts consistent with the accepted prefix offer their d-th tokens to the rule
    prepared for (p, q) there (K iid drafts: every consistent draft, iid given the prefix; a tree:
    the node's children, as the tree draws them); the rule's output is
    emitted and a rejection ends the block; after L accepted tokens one bonus token is drawn from p.
    In a tree whose accepted token labels several siblings the first is followed.

    Parameters
    ----------
    rule : str, optional
        A key of :data:`mdtheory.rules.RULES` whose draft model matches the tree's sampling
        (``rrs-wor`` or ``optimal`` on trees without replacement, ``optimal`` on top trees);
        default :func:`~mdtheory.blocks.verifiers.base.default_rule` of the tree's drafts (``rrs``
        on iid drafts).
    tree : DraftTree, optional
        Verify a tree; default K iid drafts.
    **params
        The rule's keywords.
    """

    name = "token"
    takes_rule = "verify"
    tree_samplings = None

    def __init__(self, rule: str | None = None, tree: DraftTree | None = None, **params):
        tree = self._check_tree(tree)
        wanted = "iid" if tree is None else tree.sampling
        rule = default_rule(wanted) if rule is None else rule
        self.rule, self.tree, self.params = rule, tree, _rule_params(rule, wanted, params)
        self._prepared: dict = {}

    @property
    def label(self) -> str:
        return f"token:{self.rule}" + _tree_tag(self.tree)

    def estimate(self, V: int, tree: DraftTree, steps: int,
                 model_time: float | None = None) -> _budget.Estimate:
        """:func:`rule_estimate` of the rule on the tree's K drafts of L tokens, a node offering the
        rule its children (K iid drafts: all K)."""
        return rule_estimate(self.rule, V, tree.n, tree.length, steps, model_time,
                             None if tree.is_iid_drafts else max(tree.branching))

    def _rule(self, laws, ctx, n):
        from ... import rules

        key = (id(laws.target), id(laws.draft), ctx, n)
        r = self._prepared.get(key)
        if r is None:
            p = np.asarray(laws.p(ctx), dtype=np.float64)
            q = laws.q(ctx)  # in the laws' arithmetic: exact fractions choose top drafts exactly
            r = rules.make_rule(self.rule, p, q, n, normalize=True, **self.params)
            if len(self._prepared) >= PREPARED_RULES:
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
