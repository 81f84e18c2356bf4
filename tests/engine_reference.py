"""References for the engine verifiers' tests: contract tensors from draft trees and a stratified
chi-square test."""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch
from scipy import stats


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
