"""LOSSY: sibling tests against the parent's unchanged target row, the residual taken from the
original rows.

    mdtheory audit --engine tree examples/verifiers/engines/tree_siblings_unchanged_parent.py:verify \\
        --tree 2,2 --instance toy
    mdtheory audit --block examples/verifiers/engines/tree_siblings_unchanged_parent.py:law --exact \\
        --instance toy --tree 2,2

At a node with target row p and draft row q (the law that drew its children), each child j in sibling
order is tested with its own uniform, accepted when u_j < min(1, p(x_j) / q(x_j)); p is not updated
between siblings. If every child fails, the final token comes from relu(p - q) normalised, of the
original rows; a leaf emits a bonus token from its target row. This is the rule reported for one
stored version of TensorRT-LLM's dynamic-tree rejection kernel (NVIDIA/TensorRT-LLM). With one child
per node it is the chain rule; with two or more sampled siblings the second test must be against the
residual of the first (recursive rejection sampling), and without that update the output is lossy.
"""

import numpy as np
import torch

BRANCHING = (2, 2)


def depth_of(next_token, next_sibling):
    """The tree's depth D (the emitted width is D + 1), from the links."""
    B, N = next_token.shape
    depth = torch.full((B, N), -1, dtype=torch.long, device=next_token.device)
    depth[:, 0] = 0
    for _ in range(N):
        for link, step in ((next_token, 1), (next_sibling, 0)):
            hop = torch.where((depth >= 0) & (link >= 0), depth + step, -1)
            depth = depth.scatter_reduce(1, link.clamp(min=0), hop, reduce="amax")
    return int(depth.max())


def verify(candidates, next_token, next_sibling, target_probs, draft_probs, generator):
    if draft_probs is None:
        raise ValueError("sibling tests need draft_probs")
    B, N, V = target_probs.shape
    D = depth_of(next_token, next_sibling)
    dev, dt = target_probs.device, target_probs.dtype
    rows = torch.arange(B, device=dev)
    node = torch.zeros(B, dtype=torch.long, device=dev)
    out = torch.full((B, D + 1), -1, dtype=torch.long, device=dev)
    walking = torch.ones(B, dtype=torch.bool, device=dev)
    rejected = torch.zeros(B, dtype=torch.bool, device=dev)  # stopped at a node with children
    for depth in range(D):
        p, q = target_probs[rows, node], draft_probs[rows, node]  # BUG: never updated between siblings
        child = torch.where(walking, next_token[rows, node], -1)
        taken = torch.full((B,), -1, dtype=torch.long, device=dev)
        had_child = child >= 0
        for _ in range(N):
            trying = (child >= 0) & (taken < 0)
            c = child.clamp(min=0)
            x = candidates[rows, c]
            u = torch.rand(B, generator=generator, device=dev, dtype=dt)
            hit = trying & (u * q[rows, x] < p[rows, x])
            taken = torch.where(hit, c, taken)
            child = torch.where(trying & ~hit, next_sibling[rows, c], -1)
        moved = taken >= 0
        out[rows[moved], depth] = candidates[rows[moved], taken[moved]]
        rejected |= walking & had_child & ~moved
        node = torch.where(moved, taken, node)
        walking = moved
    p, q = target_probs[rows, node], draft_probs[rows, node]
    last = torch.where(rejected[:, None], (p - q).clamp(min=0), p)
    last = torch.where(last.sum(1, keepdim=True) > 0, last, p)
    final = torch.multinomial(last, 1, generator=generator)[:, 0]
    out[rows, (out >= 0).sum(1)] = final
    return out


def law(target, draft, drafts):
    out = {}
    L = len(BRANCHING)

    def emit(ctx, w, row):
        for y in np.flatnonzero(row):
            out[ctx + (int(y),)] = out.get(ctx + (int(y),), 0.0) + w * row[y] / row.sum()

    def walk(ctx, depth, start, width, w):
        p = target(ctx)
        if depth == L:
            emit(ctx, w, p)
            return
        q = draft(ctx)
        b = BRANCHING[depth]
        for j in range(b):
            lo, sub = start + j * (width // b), width // b
            y = int(drafts[lo, depth])
            a = min(1.0, p[y] / q[y]) if q[y] > 0 else 1.0
            if a > 0:
                walk(ctx + (y,), depth + 1, lo, sub, w * a)
            w *= 1 - a
        if w > 0:
            r = np.clip(p - q, 0.0, None)
            emit(ctx, w, r if r.sum() > 0 else p)

    walk((), 0, 0, drafts.shape[0], 1.0)
    return out
