"""Tree verifiers in the engines' linked-list tree contract: target-only, traversal, and token-level
verification with the optimal rule at every node.

The contract (SGLang's ``tree_speculative_sampling_target_only``, ``sgl-kernel/python/sgl_kernel/
speculative.py`` of sgl-project/sglang; TensorRT-LLM's dynamic-tree ops share the layout)::

    f(candidates [B, N], next_token [B, N], next_sibling [B, N], target_probs [B, N, V],
      draft_probs [B, N, V] or None, generator) -> emitted [B, D + 1]

Node 0 is the root (its candidate is ignored); ``target_probs[b, j]`` is the target's law after node
j's path, ``draft_probs[b, j]`` the law that drew node j's children (unused at a leaf; None for
deterministic children). ``emitted`` holds the accepted path's tokens and the final token, padded
with -1. D is the tree's depth: pass ``depth=D`` (the engine's static tree depth) for a call with
no host synchronisation; without it the depth is read from the links (one synchronisation).
Siblings may repeat a token when children are sampled.

=============== ================================================================ ==============
name            verifier                                                         children
=============== ================================================================ ==============
``target-only`` at each node one coin over the children's target masses (first    deterministic
                occurrences), the final token from the target off the children
``traversal``   traversal verification (Weng et al., NeurIPS 2025): leaf to root,  iid from
                residuals passed between siblings (papers/blocks_verifiers.md §4) ``draft_probs``
``tree-optimal`` token by token, the optimal rule (papers/theory.md §5) at every   iid from
                node on the node's children, the first child with the accepted     ``draft_probs``
                token followed
=============== ================================================================ ==============

Their numpy forms: :class:`mdtheory.blocks.Traversal` and :class:`mdtheory.blocks.TokenByToken`
(rule ``optimal``) on a draft tree with iid children; target-only verification of a deterministic
tree attains the bound 1 + Σ_nodes p(path) of papers/blocks.md.
"""

from __future__ import annotations

import numpy as np

from .links import TreeLinks
from .stops import EngineVerifier, StopLaw, _torch, at, categorical, put_rows, rows_at, tree_inputs, uniforms

__all__ = ["TargetOnlyTree", "TraversalTree", "OptimalTree"]


class _Tree(EngineVerifier):
    contract = "tree"
    drafts = "sampled"
    needs_draft_probs = True

    def _inputs(self, candidates, next_token, next_sibling, target_probs, draft_probs, generator=None,
                depth=None, validate=False):
        cand, nxt, sib, p, q, depth = tree_inputs(self.name, candidates, next_token, next_sibling,
                                                  target_probs, draft_probs, generator, depth, validate,
                                                  self.needs_draft_probs)
        return cand, TreeLinks(nxt, sib), p, q, depth

    def __call__(self, candidates, next_token, next_sibling, target_probs, draft_probs=None,
                 generator=None, *, depth: int | None = None, validate: bool = False):
        """``emitted`` [B, D + 1], int64: the accepted path's tokens, the final token, then -1.

        ``depth``: D, the tree's depth (default: read off the links, one host synchronisation).
        Shapes, dtypes and devices are always checked; ``validate`` also checks the links, token
        ranges and law rows (:func:`mdtheory.engines.contracts.check_tree_inputs`, on the host)."""
        cand, links, p, q, depth = self._inputs(candidates, next_token, next_sibling, target_probs,
                                                draft_probs, generator, depth, validate)
        D = links.max_depth() if depth is None else depth
        if validate:
            self._check(links, D)
        return self._sample(cand, links, p, q, D, generator)

    def _check(self, links, D: int) -> None:
        """Host checks of the tree's shape beyond the contract's (none here)."""

    def _sample(self, cand, links, p, q, D, generator):
        """Draw the stop node, then its token (verifiers with :meth:`stops`)."""
        state = self._prepare(cand, links, p, q)
        u = uniforms(cand.shape[0], 2, generator, p.device)
        node = categorical(state[0], u[:, 0])
        token = categorical(self._correction(cand, links, p, q, state, node), u[:, 1])
        out = links.path(cand, node, D + 1)
        return out.scatter(1, at(links.depth, node).clamp(max=D)[:, None], token[:, None])

    def stops(self, candidates, next_token, next_sibling, target_probs, draft_probs=None) -> StopLaw:
        """The exact law of ``emitted`` given the inputs: a stop at every node."""
        torch = _torch()
        cand, links, p, q, D = self._inputs(candidates, next_token, next_sibling, target_probs, draft_probs,
                                            validate=True)
        state = self._prepare(cand, links, p, q)
        B, N = cand.shape
        corr = torch.stack([self._correction(cand, links, p, q, state,
                                             torch.full((B,), j, device=p.device)) for j in range(N)], 1)
        return StopLaw(state[0], links.prefixes(cand, max(D, 1)), links.depth, corr)


class TargetOnlyTree(_Tree):
    """Target-only verification of a tree of deterministic children (SGLang's target-only rule).

    At a node with target row p and children :math:`y_1, y_2, \\dots` (in sibling order) one coin
    accepts child j when it falls in j's slice of length :math:`p(y_j)` (0 for a token an earlier
    sibling already holds); if no child is accepted the final token is drawn from p without the
    children's tokens. A node is reached with probability :math:`p(\\text{path})`, so the verifier
    keeps :math:`E|B| = 1 + \\sum_{\\text{nodes}} p(\\text{path})`, the most any lossless verifier
    keeps on a deterministic tree (papers/blocks.md §10). ``draft_probs`` is not read.
    """

    name = "target-only"
    drafts = "deterministic"
    needs_draft_probs = False

    def _prepare(self, cand, links, p, q):
        torch = _torch()
        B = p.shape[0]
        child = links.parent >= 0
        at_parent = p[torch.arange(B, device=p.device)[:, None], links.parent.clamp(min=0), cand]
        repeat = (links.earlier & (cand[:, :, None] == cand[:, None, :])).any(1)
        slice_ = torch.where(child & ~repeat, at_parent.to(torch.float64), 0.0)
        reach = torch.where(links.anc & child[:, :, None], slice_[:, :, None], 1.0).prod(1)
        kids = torch.zeros_like(slice_).scatter_add_(1, links.parent.clamp(min=0), slice_)
        stop = torch.where(links.in_tree, reach * (1 - kids).clamp(min=0), 0.0)
        return (stop,)

    def _correction(self, cand, links, p, q, state, node):
        row = rows_at(p, node)
        kids = (links.parent == node[:, None]) & (links.parent >= 0)
        res = row.clone().scatter_reduce_(1, cand, (~kids).to(row.dtype), reduce="prod")
        fall = res.sum(-1) <= 0
        return res.lerp_(row, fall[:, None].to(row.dtype))


class TraversalTree(_Tree):
    """Traversal verification (Weng et al., NeurIPS 2025) of a tree of iid sampled children.

    Every node j holds a sub-measure :math:`t_j` of mass :math:`m_j`: the root :math:`t = p_0`
    (mass 1); a child y of a node whose current sub-measure is t, drawn from the node's draft row
    u, gets :math:`a = \\min(1, t(y)/u(y))` and :math:`t_{\\text{child}} = a\\, p_{\\text{child}}`,
    after which the node's t becomes :math:`(t - u)^+ / (\\rho + 1 - m)` of mass
    :math:`\\rho / (\\rho + 1 - m)` (:math:`\\rho = \\sum (t - u)^+`); a child whose token u cannot
    draw is skipped. These masses do not depend on the coins, so they are computed first, node by
    node in depth-first pre-order (N - 1 steps over (B, V) rows). The walk leaf to root then accepts
    the first node, in post-order, whose coin falls below its final mass (the root always), so a
    node stops with probability :math:`m_j \\prod_{i \\text{ before } j} (1 - m_i)`; its final token
    comes from :math:`t_j` normalised. The numpy form is :class:`mdtheory.blocks.Traversal`
    (papers/blocks_verifiers.md §4, Proposition 3).
    """

    name = "traversal"

    def _prepare(self, cand, links, p, q):
        torch = _torch()
        B, N, V = p.shape
        T = torch.empty_like(p, memory_format=torch.contiguous_format)  # every row written before read
        T[:, 0] = p[:, 0]
        m = torch.zeros(B, N, dtype=torch.float64, device=p.device)
        m[:, 0] = 1.0
        order = torch.argsort(links.pre, dim=1)
        for s in range(1, N):
            j = order[:, s]
            pa = at(links.parent, j)
            ok = pa >= 0
            pa = pa.clamp(min=0)
            t, u = rows_at(T, pa), rows_at(q, pa)
            y = at(cand, j)[:, None]
            ty, uy = t.gather(1, y).squeeze(1).double(), u.gather(1, y).squeeze(1).double()
            a = torch.where(ok & (uy > 0), (ty / uy.clamp(min=1e-300)).clamp(max=1.0), 0.0)
            put_rows(T, j, rows_at(p, j).mul_(a[:, None].to(p.dtype)))
            m.scatter_(1, j[:, None], a[:, None])
            excess = u.neg_().add_(t).clamp_(min=0)  # (t - u)^+, in u's place
            rho = excess.sum(-1).double()
            mp = at(m, pa)
            den = rho + (1 - mp)
            upd = ok & (uy > 0) & (den > 0)
            scale = torch.where(upd, 1 / den.clamp(min=1e-300), 0.0)
            put_rows(T, pa, excess.mul_(scale[:, None].to(p.dtype)).lerp_(t, (~upd)[:, None].to(p.dtype)))
            m.scatter_(1, pa[:, None], torch.where(upd, rho * scale, mp)[:, None])
        m[:, 0] = 1.0
        post = torch.argsort(links.post, dim=1)
        mo = m.gather(1, post)
        survive = torch.cat([torch.ones_like(mo[:, :1]), (1 - mo[:, :-1]).cumprod(-1)], 1)
        stop = torch.zeros_like(m).scatter_(1, post, mo * survive)
        return stop, T, m

    def _correction(self, cand, links, p, q, state, node):
        t = rows_at(state[1], node)
        fall = (at(state[2], node) <= 0) | (t.sum(-1) <= 0)
        return t.lerp_(rows_at(p, node), fall[:, None].to(t.dtype))


class OptimalTree(_Tree):
    """Token-by-token verification of a tree of iid sampled children with the optimal rule at
    every node.

    Depth by depth along the accepted path: the node's children (n of them, iid from its draft row
    q) are offered to the optimal rule for (p, q, n) (:mod:`mdtheory.engines.optimal`: every child
    draws a time from its token's cells, the earliest is the candidate y, of exact marginal μ with
    :math:`\\sum \\min(p, \\mu) = \\alpha^*`); y is accepted with probability
    :math:`\\min(1, p(y)/\\mu(y))` and the walk moves to the first child holding y; otherwise the
    token is drawn from :math:`(p - \\mu)^+` normalised and the walk stops. At a leaf the bonus
    token comes from its target row. A call prepares the rule D times, for every row's node at
    that depth (a sort of q/p and linear passes over (B, V) rows each).

    The rule is the numpy optimal rule's default realisation (cells and swaps): the numpy form of
    this verifier is :class:`mdtheory.blocks.TokenByToken` with ``rule="optimal"``, and
    :meth:`stops` is its exact law, the candidate's law given the children taken from the numpy
    rule (:func:`mdtheory.engines.optimal.node_rule`; papers/blocks_verifiers.md §10).
    """

    name = "tree-optimal"

    def _sample(self, cand, links, p, q, D, generator):
        from .optimal import optimal_step  # loads the numpy rules on first use

        torch = _torch()
        B, N, V = p.shape
        dev = p.device
        cur = torch.zeros(B, dtype=torch.long, device=dev)
        alive = torch.ones(B, dtype=torch.bool, device=dev)
        out = torch.full((B, D + 1), -1, dtype=torch.long, device=dev)
        child = links.parent >= 0
        for d in range(D + 1):
            row = rows_at(p, cur)
            u = uniforms(B, 2, generator, dev)
            if d == D:
                out[:, d] = torch.where(alive, categorical(row, u[:, 1]), out[:, d])
                break
            kids = child & (links.parent == cur[:, None]) & alive[:, None]
            y, accept, token = optimal_step(row, rows_at(q, cur), cand, kids, u, generator)
            out[:, d] = torch.where(alive, token, out[:, d])
            same = kids & (cand == y[:, None])
            first = torch.where(same, links.rank, N).argmin(1)
            cur = torch.where(alive & accept, first, cur)
            alive = alive & accept
        return out

    def stops(self, candidates, next_token, next_sibling, target_probs, draft_probs=None) -> StopLaw:
        """The exact law of ``emitted`` given the inputs: a stop at every node, the candidate's law
        at a node given its children the numpy optimal rule's."""
        from .optimal import step_law

        torch = _torch()
        cand, links, p, q, D = self._inputs(candidates, next_token, next_sibling, target_probs, draft_probs,
                                            validate=True)
        B, N, V = p.shape
        P, Q = (t.detach().cpu().to(torch.float64).numpy() for t in (p, q))
        tok, parent, rank, depth = (t.cpu().numpy() for t in (cand, links.parent, links.rank, links.depth))
        prob, corr = np.zeros((B, N)), np.zeros((B, N, V))
        for b in range(B):
            reach = np.zeros(N)
            reach[0] = 1.0
            for j in np.argsort(depth[b], kind="stable"):
                kids = sorted(np.flatnonzero(parent[b] == j), key=lambda c: rank[b, c])
                accept, prob[b, j], corr[b, j] = step_law(P[b, j], Q[b, j], tok[b, kids], reach[j])
                seen = set()
                for c in kids:  # the walk enters the first child holding the accepted token
                    if tok[b, c] not in seen:
                        seen.add(tok[b, c])
                        reach[c] = reach[j] * accept[tok[b, c]]
        dev = p.device
        return StopLaw(torch.tensor(prob, device=dev), links.prefixes(cand, max(D, 1)), links.depth,
                       torch.tensor(corr, device=dev))
