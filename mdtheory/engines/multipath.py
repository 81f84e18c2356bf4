"""Verifiers of n sampled chains of L tokens, in the tree contract: the optimal token-level rule,
greedy multi-path block verification (GBV) and multi-path block verification with the optimal
selection.

The n chains are a tree (:mod:`mdtheory.engines.tree`'s contract) whose root has n children, the
chains' first tokens, and every other node at most one child; each chain is drawn iid from the draft
(its node's ``draft_probs`` row drew the next token). Every chain must have L = D tokens (D the
tree's depth, ``depth=`` or read from the links), so N = 1 + n L. The drafts consistent with the
accepted (or selected) prefix are merged: at depth d they are the chains whose first d tokens agree
with it, whose next tokens are iid from the draft's law after that prefix, which any consistent
chain's node holds.

=====================  ============================================================  ==========
name                   verifier                                                      numpy form
=====================  ============================================================  ==========
``chains-optimal``     token by token, the optimal rule on the consistent chains'    ``token``
                       next tokens, until a rejection (then its residual token)      (optimal)
``gbv``                Thomas & Pal's greedy multi-path block verification: the      ``gbv``
                       chain of highest p/q ranks, block-verified against its law
``multipath-optimal``  the optimal rule's candidate (its earliest draft) selects a   ``multipath``
                       path depth by depth; block verification against the           (optimal)
                       candidate's law
=====================  ============================================================  ==========

(papers/blocks_verifiers.md §3, §3b; the numpy forms are :mod:`mdtheory.blocks`' verifiers on K = n
iid drafts.) The optimal rule is the numpy rule's cells (:mod:`mdtheory.engines.optimal`), so each
verifier's :meth:`stops` is its numpy form's exact law.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidInputError
from . import stops
from .chain import _output, block_stops, block_weights
from .stops import StopLaw, _torch, at, categorical, excess_masses, residual, rows_at, uniforms
from .tree import _Tree

__all__ = ["ChainsOptimal", "GreedyChains", "SelectedChains"]


class _Chains(_Tree):
    drafts = "chains"

    def _layout(self, links, N: int, L: int):
        """The chains' nodes (B, n, L): chain c is the root's c-th child and its descendants."""
        torch = _torch()
        if L < 1 or (N - 1) % L:
            raise InvalidInputError(f"{self.name}: n chains of L = {L} tokens need N = 1 + n L nodes, "
                                    f"got N = {N}")
        n = (N - 1) // L
        B = links.parent.shape[0]
        head = (links.parent == 0) & (links.rank < n)
        col = torch.where(head, links.rank, n)
        ar = torch.arange(N, device=links.parent.device).expand(B, N)
        heads = torch.zeros(B, n + 1, dtype=torch.long, device=ar.device).scatter_(1, col, ar)[:, :n]
        nodes = [heads]
        for _ in range(L - 1):
            nodes.append(links.next_token.gather(1, nodes[-1]).clamp(min=0))
        return torch.stack(nodes, 2)

    def _sample(self, cand, links, p, q, D, generator):
        return self._run(cand, self._layout(links, cand.shape[1], D), p, q, generator)

    def _check(self, links, L: int) -> None:
        """Every row is n chains of L tokens: the root's n children, each the head of a path of L
        nodes with one child each (read on the host)."""
        from .contracts import EngineContractError

        torch = _torch()
        N = links.parent.shape[1]
        nodes = self._layout(links, N, L)
        B, n, _ = nodes.shape
        above = torch.cat([torch.zeros_like(nodes[:, :, :1]), nodes[:, :, :-1]], 2)
        flat = nodes.reshape(B, -1)
        ok = (links.parent.gather(1, flat) == above.reshape(B, -1)).all(1)
        ok &= (links.depth.gather(1, flat) == torch.arange(1, L + 1, device=flat.device).repeat(n)).all(1)
        ok &= ((links.parent >= 0).sum(1) == n * L) & ((links.parent == 0).sum(1) == n)
        bad = torch.nonzero(~ok).flatten().tolist()
        if bad:
            raise EngineContractError(f"tree contract: row {bad[0]} is not n chains of L = {L} tokens "
                                      f"(the root's n = {n} children, each followed by one child per depth)")

    def _exact_inputs(self, candidates, next_token, next_sibling, target_probs, draft_probs, depth):
        """The validated inputs of an exact law, on the host: target and draft rows (B, N, V)
        float64, the chains' tokens and nodes (B, n, L), and L."""
        torch = _torch()
        cand, links, p, q, L = self._inputs(candidates, next_token, next_sibling, target_probs, draft_probs,
                                            depth=depth, validate=True)
        self._check(links, L)
        nodes = self._layout(links, cand.shape[1], L)
        tok = cand.gather(1, nodes.reshape(nodes.shape[0], -1)).reshape(nodes.shape)
        P, Q = (t.detach().cpu().to(torch.float64).numpy() for t in (p, q))
        return P, Q, tok.cpu().numpy(), nodes.cpu().numpy(), L

    def _walk(self, cand, nodes, p, q, select):
        """Depth by depth: ``select(d, p_row, q_row, tokens, consistent, memo)`` returns the chosen
        token (B,) and what it records (``memo``: a dict kept along the walk); the consistent chains
        shrink to those holding it. Returns the records, the path (B, L) and the context nodes
        (B, L + 1)."""
        torch = _torch()
        B, n, L = nodes.shape
        tokens = cand.gather(1, nodes.reshape(B, n * L)).reshape(B, n, L)
        consistent = torch.ones(B, n, dtype=torch.bool, device=p.device)
        ctx = torch.zeros(B, dtype=torch.long, device=p.device)
        records, path, ctxs, memo = [], [], [ctx], {}
        for d in range(L):
            y, rec = select(d, rows_at(p, ctx), rows_at(q, ctx), tokens[:, :, d], consistent, memo)
            records.append(rec)
            path.append(y)
            consistent = consistent & (tokens[:, :, d] == y[:, None])
            ctx = at(nodes[:, :, d], consistent.int().argmax(1))
            ctxs.append(ctx)
        return records, torch.stack(path, 1), torch.stack(ctxs, 1)


class _BlockOnPath(_Chains):
    """Select a path, then block-verify it against the selection's law μ (Proposition 2 of
    papers/blocks_verifiers.md); subclasses give ``_select``."""

    def _prepare_path(self, cand, nodes, p, q, generator=None):
        """The stop law along the selected path: ``_select`` records, at each depth, the chosen
        token's target and proposal probabilities (float64), the proposal row μ and the target row
        (normalised) at the path's context."""
        torch = _torch()
        records, path, ctxs = self._walk(cand, nodes, p, q,
                                         lambda *a: self._select(*a, generator=generator))
        px = torch.stack([r[0] for r in records], 1)
        mux = torch.stack([r[1] for r in records], 1)
        mus = torch.stack([r[2] for r in records], 1)
        w = block_weights(px, mux)
        rho = excess_masses(torch.stack([r[3] for r in records], 1), mus, w)  # (w_i p_i - mu_i)^+'s masses
        return block_stops(w, rho), w, path, ctxs, mus

    def _correction_at(self, p, state, tau):
        _, w, path, ctxs, mus = state
        L = path.shape[1]
        i = tau.clamp(max=L - 1)
        return residual(rows_at(p, at(ctxs, tau)), rows_at(mus, i), at(w, tau), keep=tau == L)

    def _run(self, cand, nodes, p, q, generator):
        state = self._prepare_path(cand, nodes, p, q, generator)
        u = uniforms(cand.shape[0], 2, generator, p.device)
        tau = categorical(state[0], u[:, 0])
        token = categorical(self._correction_at(p, state, tau), u[:, 1])
        return _output(state[2], tau, token)


class GreedyChains(_BlockOnPath):
    """Greedy multi-path block verification (GBV; Thomas & Pal, 2026) of n iid chains.

    At each depth tokens are ranked by :math:`p/q` at the path's context (ties: the larger token
    index higher; one stable sort of the (B, V) ratios), the chain of highest rank among the
    consistent ones is followed, and its next token's law given the path is the skewed
    :math:`\\mu_c(v) = q(v) S(R + G(v) + q(v), R + G(v)) / S(R + 1, R)` (G the q-mass ranked below v,
    :math:`S(a, b) = \\sum_{i < n} a^i b^{n - 1 - i}` with every argument divided by R + 1,
    :math:`R \\leftarrow (R + G(y)) / q(y)`; μ = q once R overflows). Block verification of the path
    against μ follows. The selection is deterministic, so :meth:`stops` is its exact law; the
    numpy form is :class:`mdtheory.blocks.GreedyMultiPath`.
    """

    name = "gbv"

    def _select(self, d, p_row, q_row, tokens, consistent, memo, generator=None):
        torch = _torch()
        R = memo.get("R")
        if R is None:
            R = torch.zeros(p_row.shape[0], dtype=torch.float64, device=p_row.device)
        n = tokens.shape[1]
        p = p_row.div_(p_row.sum(-1, keepdim=True))
        q = q_row.div_(q_row.sum(-1, keepdim=True))
        order = _stable_order((p / q).masked_fill_(q == 0, torch.inf))  # ties in token order
        qs = q.gather(1, order)
        below = torch.empty_like(q).scatter_(1, order, qs.cumsum(-1).sub_(qs))
        rank = torch.empty_like(order).scatter_(1, order, torch.arange(q.shape[1], device=q.device)
                                                .expand_as(order))
        y = at(tokens, torch.where(consistent, rank.gather(1, tokens), -1).argmax(1))
        qy, gy = at(q, y).double(), at(below, y).double()
        # mu = q S(hi, lo) / S(1, r0), every argument divided by R + 1 (R = inf: mu = q)
        infinite = torch.isinf(R)
        Rf = torch.where(infinite, 0.0, R)
        scale = (1 / (Rf + 1))[:, None].to(p.dtype)
        lo = below.add_(Rf[:, None].to(p.dtype)).mul_(scale)
        hi = torch.addcmul(lo, q, scale)
        r0 = Rf / (Rf + 1)
        mu = _power_sums(hi, lo, n).mul_(q).div_(_power_sums(torch.ones_like(r0), r0, n)[:, None].to(p.dtype))
        mu.lerp_(q, infinite[:, None].to(p.dtype))
        memo["R"] = torch.where(infinite | (qy <= 0), torch.inf, (R + gy) / qy.clamp(min=1e-300))
        return y, (at(p, y).double(), at(mu, y).double(), mu, p)

    def stops(self, candidates, next_token, next_sibling, target_probs, draft_probs=None,
              *, depth: int | None = None) -> StopLaw:
        """The exact law of ``emitted`` given the inputs: a stop after each of 0..L path tokens."""
        torch = _torch()
        cand, links, p, q, L = self._inputs(candidates, next_token, next_sibling, target_probs, draft_probs,
                                            depth=depth, validate=True)
        self._check(links, L)
        nodes = self._layout(links, cand.shape[1], L)
        state = self._prepare_path(cand, nodes, p, q)
        B = cand.shape[0]
        corr = torch.stack([self._correction_at(p, state, torch.full((B,), i, device=p.device))
                            for i in range(L + 1)], 1)
        length = torch.arange(L + 1, device=p.device).expand(B, L + 1)
        col = torch.arange(L, device=p.device)
        prefix = torch.where(col[None, None, :] < length[..., None], state[2][:, None, :], -1)
        return StopLaw(state[0], prefix, length, corr)


def _stable_order(key):
    """Indices sorting each row of ``key`` (B, V), non-negative floats or inf, ties in index order:
    ``torch.sort(stable=True)`` on a device; on the CPU numpy's (vectorised) sort of unique keys,
    a float32 key's bits followed by the index in one int64, or a float64 key sorted and the
    rows with ties sorted again stably."""
    torch = _torch()
    if key.device.type != "cpu" or not stops.CPU_KERNELS:
        return torch.sort(key, dim=-1, stable=True).indices
    x = key.numpy()
    if x.dtype == np.float32:  # non-negative floats' bits order them; the index breaks the ties
        packed = (x.view(np.int32).astype(np.int64) << 32) | np.arange(x.shape[1], dtype=np.int64)
        return torch.from_numpy(np.argsort(packed, axis=1))
    order = np.argsort(x, axis=1)
    ranked = np.take_along_axis(x, order, 1)
    for b in np.flatnonzero((ranked[:, 1:] == ranked[:, :-1]).any(1)):
        order[b] = np.argsort(x[b], kind="stable")
    return torch.from_numpy(order)


def _power_sums(a, b, n: int):
    """:math:`\\sum_{i=0}^{n-1} a^i b^{n-1-i}` elementwise (non-negative terms), by
    :math:`S_1 = 1`, :math:`S_{k+1} = a S_k + b^k`: a new tensor."""
    total = a.new_ones(a.shape) if n == 1 else a + b
    bk = b * b if n > 2 else None
    for _ in range(2, n):
        total.mul_(a).add_(bk)
        bk.mul_(b)
    return total


class SelectedChains(_BlockOnPath):
    """Multi-path block verification with the optimal selection, on n iid chains.

    At each depth the optimal rule for the path's context and the m consistent chains
    (:mod:`mdtheory.engines.optimal`) draws its candidate, the earliest of their next tokens' times,
    which selects the token (no acceptance step); the candidate's exact marginal μ is the proposal
    of block verification along the selected path (papers/blocks_verifiers.md §3; numpy form
    :class:`mdtheory.blocks.SelectedPath` with ``rule="optimal"``). :meth:`stops` is the exact law:
    the mixture over the selected paths (the numpy rule's candidate law given the consistent
    chains) of block verification's stops along each.
    """

    name = "multipath-optimal"

    def _select(self, d, p_row, q_row, tokens, consistent, memo, generator=None):
        from .optimal import candidates  # loads the numpy rules on first use

        p = p_row.div_(p_row.sum(-1, keepdim=True))
        y, mu = candidates(p, q_row, tokens, consistent, generator)
        return y, (at(p, y).double(), at(mu, y), mu.to(p.dtype), p)

    def stops(self, candidates, next_token, next_sibling, target_probs, draft_probs=None,
              *, depth: int | None = None) -> StopLaw:
        """The exact law of ``emitted`` given the inputs: for every path the selection may take
        (with its probability), a stop after each of its 0..L tokens."""
        from .optimal import node_rule

        torch = _torch()
        P, Q, tok, nodes, L = self._exact_inputs(candidates, next_token, next_sibling, target_probs,
                                                 draft_probs, depth)
        rows = []
        for b in range(P.shape[0]):
            found = []

            def walk(path, chains, ctx, weight, recs, b=b, found=found):
                if len(path) == L:  # block verification along the path against the proposals
                    px, mux, mus, ps = (torch.tensor(np.array(x))[None] for x in zip(*recs, strict=True))
                    w = block_weights(px, mux)
                    h = block_stops(w, excess_masses(ps, mus, w))[0].numpy()
                    bonus = P[b, ctx] / P[b, ctx].sum()
                    for i in range(L + 1):
                        row = bonus if i == L else np.maximum(float(w[0, i]) * recs[i][3] - recs[i][2], 0.0)
                        found.append((weight * h[i], path[:i], row if row.sum() > 0 else recs[i][3]))
                    return
                d = len(path)
                row = P[b, ctx] / P[b, ctx].sum()
                drafts = [int(tok[b, c, d]) for c in chains]
                rule = node_rule(row, Q[b, ctx], len(drafts))
                law = rule.schedule.candidate_law(np.asarray(drafts))
                for y in sorted(set(drafts)):
                    if law[y] > 0:
                        keep = [c for c in chains if tok[b, c, d] == y]
                        walk(path + (y,), keep, int(nodes[b, keep[0], d]), weight * law[y],
                             recs + [(row[y], rule.marginal[y], rule.marginal, row)])

            walk((), list(range(tok.shape[1])), 0, 1.0, [])
            rows.append(found)
        return _stop_law(rows, L, P.shape[2], target_probs.device)


class ChainsOptimal(_Chains):
    """Token-by-token verification of n iid chains with the optimal rule on the consistent chains.

    At depth d the m chains consistent with the accepted prefix offer their next tokens (iid from
    the draft's law there) to the optimal rule for (p, q, m) (:mod:`mdtheory.engines.optimal`); its
    candidate y is accepted with probability :math:`\\min(1, p(y)/\\mu(y))` and the chains holding y
    stay; otherwise the token comes from :math:`(p - \\mu)^+` normalised and the block ends. After L
    accepted tokens the bonus token comes from the target after the path. The numpy form is
    :class:`mdtheory.blocks.TokenByToken` with ``rule="optimal"`` on K = n iid drafts; :meth:`stops`
    is its exact law (a stop at every prefix the chains share, the numpy rule's law given the
    consistent chains' tokens).
    """

    name = "chains-optimal"

    def _run(self, cand, nodes, p, q, generator):
        from .optimal import optimal_step  # loads the numpy rules on first use

        torch = _torch()
        B, n, L = nodes.shape
        state = {"alive": torch.ones(B, dtype=torch.bool, device=p.device),
                 "out": torch.full((B, L + 1), -1, dtype=torch.long, device=p.device)}

        def select(d, p_row, q_row, tokens, consistent, memo):
            u = uniforms(B, 2, generator, p.device)
            y, accept, token = optimal_step(p_row, q_row, tokens, consistent, u, generator)
            alive = state["alive"]
            state["out"][:, d] = torch.where(alive, token, state["out"][:, d])
            state["alive"] = alive & accept
            return y, None

        _, _, ctxs = self._walk(cand, nodes, p, q, select)
        u = uniforms(B, 1, generator, p.device)
        bonus = categorical(rows_at(p, ctxs[:, L]), u[:, 0])
        out = state["out"]
        out[:, L] = torch.where(state["alive"], bonus, out[:, L])
        return out

    def stops(self, candidates, next_token, next_sibling, target_probs, draft_probs=None,
              *, depth: int | None = None) -> StopLaw:
        """The exact law of ``emitted`` given the inputs: a stop at every prefix the chains share."""
        from .optimal import step_law

        P, Q, tok, nodes, L = self._exact_inputs(candidates, next_token, next_sibling, target_probs,
                                                 draft_probs, depth)
        rows = []
        for b in range(P.shape[0]):
            found = []

            def walk(path, chains, ctx, reach, b=b, found=found):
                d = len(path)
                drafts = tok[b, chains, d] if d < L else []
                accept, stop, row = step_law(P[b, ctx], Q[b, ctx], drafts, reach)
                found.append((stop, path, row))
                for y in sorted(set(int(t) for t in drafts)):
                    if accept[y] > 0:
                        keep = [c for c in chains if tok[b, c, d] == y]
                        walk(path + (y,), keep, int(nodes[b, keep[0], d]), reach * accept[y])

            walk((), list(range(tok.shape[1])), 0, 1.0)
            rows.append(found)
        return _stop_law(rows, L, P.shape[2], target_probs.device)


def _stop_law(rows, L: int, V: int, device) -> StopLaw:
    """A :class:`StopLaw` from each row's stops (probability, prefix tuple, correction (V,)),
    padded with stops of probability zero."""
    torch = _torch()
    B, S = len(rows), max(len(r) for r in rows)
    prob, length = np.zeros((B, S)), np.zeros((B, S), dtype=np.int64)
    prefix, corr = np.full((B, S, max(L, 1)), -1, dtype=np.int64), np.ones((B, S, V))
    for b, found in enumerate(rows):
        for s, (w, path, row) in enumerate(found):
            prob[b, s], length[b, s] = w, len(path)
            prefix[b, s, :len(path)] = path
            corr[b, s] = row
    return StopLaw(*(torch.tensor(x, device=device) for x in (prob, prefix, length, corr)))
