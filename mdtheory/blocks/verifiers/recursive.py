"""Residual-recycling block verification over a tree of drafts, leaf to root: the recursion shared by
the prefix-trie and the traversal verifiers."""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from .base import BlockVerifier, _draw, _pos, _total

__all__ = ["_Recursive"]


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
