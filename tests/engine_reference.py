"""References for the engine verifiers' tests: contract tensors from draft trees, the numpy form of
the device's optimal rule, and a stratified chi-square test.

The device's optimal rule (:func:`mdtheory.torch_bridge.optimal.optimal_plan`) realises an optimal
marginal μ that can differ from the numpy rule's lexicographically optimal one, and the block law of
a multi-draft verifier depends on the rule's law given the drafts, not only on μ. ``PlanRule`` is
that rule as a numpy :class:`mdtheory.rules.base.SelectionRule`: each draft's time is uniform on a
cell chosen among its token's own cell and its swapped pieces (as ``OptimalPlan.times`` draws it),
and the law of the earliest draft given the drafts is computed exactly, cell by cell, as the
integral of one draft's density times the others' survival functions (polynomials on each cell).
Registered under ``"plan-optimal"`` for a test, it lets the numpy block verifiers
(:mod:`mdtheory.blocks`) compute the exact law the device verifiers sample.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch
from numpy.polynomial import polynomial as P
from scipy import stats

from mdtheory.rules.base import SelectionRule, speculative_step
from mdtheory.torch_bridge.optimal import optimal_plan

PLAN_RULE = "plan-optimal"


# ------------------------------------------------------------------ contract tensors
def tree_tensors(tree, draws, target, draft, dtype=torch.float64):
    """The tree contract's tensors for draft arrays laid out as ``tree`` (a DraftTree), one row per
    array, nodes numbered in depth-first pre-order: (candidates, next_token, next_sibling,
    target_probs, draft_probs)."""
    rows = []
    for x in draws:
        paths, kids = _preorder(tree, x)
        N = len(paths)
        nxt = [kids[j][0] if kids[j] else -1 for j in range(N)]
        sib = [-1] * N
        for j in range(N):
            for a, b in zip(kids[j][:-1], kids[j][1:], strict=True):
                sib[a] = b
        rows.append(([p[-1] if p else 0 for p in paths], nxt, sib,
                     [np.asarray(target(p), dtype=float) for p in paths],
                     [np.asarray(draft(p), dtype=float) for p in paths]))
    cand, nxt, sib, tp, dp = (np.array(a) for a in zip(*rows, strict=True))
    ids = [torch.tensor(a, dtype=torch.long) for a in (cand, nxt, sib)]
    return (*ids, torch.tensor(tp, dtype=dtype), torch.tensor(dp, dtype=dtype))


def deterministic_tensors(tree, target, dtype=torch.float64):
    """The tree contract's tensors (one row) of a :class:`~mdtheory.blocks.deterministic.DeterministicTree`,
    nodes in its order after the root; ``draft_probs`` None."""
    paths = [()] + list(tree.paths)
    index = {x: j for j, x in enumerate(paths)}
    kids = {j: [] for j in range(len(paths))}
    for x in tree.paths:
        kids[index[x[:-1]]].append(index[x])
    nxt = [kids[j][0] if kids[j] else -1 for j in range(len(paths))]
    sib = [-1] * len(paths)
    for j in kids:
        for a, b in zip(kids[j][:-1], kids[j][1:], strict=True):
            sib[a] = b
    cand = [x[-1] if x else 0 for x in paths]
    tp = np.array([np.asarray(target(x), dtype=float) for x in paths])
    ids = [torch.tensor([a], dtype=torch.long) for a in (cand, nxt, sib)]
    return (*ids, torch.tensor(tp[None], dtype=dtype), None)


def _preorder(tree, x):
    """The nodes of one draw ``x`` of ``tree`` in depth-first pre-order: their paths, and each
    node's children (node indices, in order)."""
    paths, kids = [()], {0: []}

    def grow(depth, start, node, path):
        if depth == tree.length:
            return
        for lo, _ in tree.children_rows(depth, start):
            y = int(x[lo, depth])
            j = len(paths)
            paths.append(path + (y,))
            kids[node].append(j)
            kids[j] = []
            grow(depth + 1, lo, j, path + (y,))

    grow(0, 0, 0, ())
    return paths, kids


def chain_tensors(chains, target, draft, dtype=torch.float64):
    """The chain contract's tensors for chains (B, k): (draft_token_ids, draft_probs, target_probs)."""
    x = np.asarray(chains)
    k = x.shape[1]
    tp = [[target(tuple(c[:i])) for i in range(k + 1)] for c in x.tolist()]
    dp = [[draft(tuple(c[:i])) for i in range(k)] for c in x.tolist()]
    return (torch.tensor(x, dtype=torch.long), torch.tensor(np.array(dp), dtype=dtype),
            torch.tensor(np.array(tp), dtype=dtype))


# ------------------------------------------------------------------ the device's optimal rule in numpy
class _Cells:
    """Each token's time law under an :class:`OptimalPlan` row: weights on the cells of [0, 1]."""

    def __init__(self, plan, row: int = 0):
        g = {k: v[row].cpu().numpy() for k, v in vars(plan).items()}
        V = g["order"].size
        self.start = 1.0 - g["rest"]  # cell k (position k) spans [start_k, start_k + length_k]
        self.length = g["length"]
        self.weights = np.zeros((V, V))  # [token, cell]
        for pos in range(V):
            y, qx, keep = int(g["order"][pos]), g["length"][pos], g["keep"][pos]
            lo, hi = int(g["first"][pos]), int(g["stop"][pos])
            if qx <= 0:
                continue
            if hi <= lo:
                self.weights[y, pos] = 1.0
                continue
            own = min(max(keep / qx, 0.0), 1.0)
            self.weights[y, pos] += own
            span = g["cum"][hi] - g["cum"][lo]
            for j in range(lo, hi):
                cell = int(g["down_cell"][j] if g["up"][pos] else g["up_cell"][j])
                share = (g["cum"][j + 1] - g["cum"][j]) / span if span > 0 else 0.0
                self.weights[y, cell] += (1 - own) * share

    def earliest(self, tokens) -> np.ndarray:
        """P(draft i has the earliest time) for the drafts ``tokens``, exactly per cell."""
        w = self.weights[np.asarray(tokens)]  # (m, cells)
        m = w.shape[0]
        survive = 1.0 - np.cumsum(w, axis=1) + w  # at each cell's start
        out = np.zeros(m)
        for c in np.flatnonzero(self.length > 0):
            for i in range(m):
                if w[i, c] == 0:
                    continue
                poly = np.array([w[i, c]])
                for j in range(m):
                    if j != i:
                        poly = P.polymul(poly, [survive[j, c], -w[j, c]])
                out[i] += P.polyval(1.0, P.polyint(poly))
        return out


class _Candidate:
    """The ``schedule`` face :class:`mdtheory.blocks.SelectedPath` reads: marginal and candidate law."""

    def __init__(self, cells, mu, V):
        self.cells, self.marginal, self.V = cells, mu, V

    def candidate_law(self, tokens) -> np.ndarray:
        law = np.zeros(self.V)
        np.add.at(law, np.asarray(tokens), self.cells.earliest(tokens))
        return law


class PlanRule(SelectionRule):
    """The optimal rule as the device builds it (one row of ``optimal_plan``), with its exact law."""

    name = PLAN_RULE
    sampling = "iid"

    def _prepare(self):
        plan = optimal_plan(torch.tensor(self.p)[None], torch.tensor(self.q)[None], self.n)
        self.marginal = plan.mu[0].numpy()
        self.ratio, self.res = speculative_step(self.p, self.marginal)
        self.schedule = _Candidate(_Cells(plan), self.marginal, self.V)

    def conditional(self, drafts):
        accept = self.schedule.candidate_law(drafts) * self.ratio
        return accept, max(1.0 - accept.sum(), 0.0) * self.res


# ------------------------------------------------------------------ the test of samples against laws
def stratified_pvalue(groups) -> float:
    """Pearson's test of observed blocks against their laws, summed over strata: ``groups`` is a list
    of (law dict, list of observed block tuples); in each stratum cells expecting under 5 are pooled.
    A block outside its law's support gives 0."""
    stat, df = 0.0, 0
    for law, seen in groups:
        counts = Counter(seen)
        if set(counts) - set(law):
            return 0.0
        n = len(seen)
        keys = sorted(law, key=law.get, reverse=True)
        exp = np.array([n * law[k] for k in keys])
        obs = np.array([counts.get(k, 0) for k in keys], dtype=float)
        big = exp >= 5
        e = np.append(exp[big], exp[~big].sum())
        o = np.append(obs[big], obs[~big].sum())
        keep = e > 0
        stat += float(((o[keep] - e[keep]) ** 2 / e[keep]).sum())
        df += int(keep.sum()) - 1
    return float(stats.chi2.sf(stat, df)) if df > 0 else 1.0
