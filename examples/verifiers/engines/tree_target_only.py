"""Target-only tree verification in the tree contract: lossless on any tree whose siblings are
distinct, the engines' rule for deterministic (top-k) trees.

    mdtheory audit --engine tree examples/verifiers/engines/tree_target_only.py:verify --tree 2,2 \\
        --instance toy --deterministic
    mdtheory audit --block examples/verifiers/engines/tree_target_only.py:law --exact --instance toy \\
        --tree 2,2

Written from the documented rule of SGLang's ``tree_speculative_sampling_target_only``
(sgl-project/sglang, ``sgl-kernel/python/sgl_kernel/speculative.py``): at a node, one coin u; the
children are tried in sibling order, child j accepted when u falls in its slice of the target's mass
p(x_j), the slices laid end to end over the siblings tried; a rejected sibling's token is removed
from the target's row (a repeated token then has an empty slice). The walk moves to the accepted
child with a fresh coin; when no child is accepted (or the node is a leaf) the final token is drawn
from the node's target row with the rejected tokens removed. Draft probabilities are not read.

``law`` is the exact law of the emitted tokens given the drafts (``mdtheory audit --block ... --exact``)
for a tree of branching BRANCHING laid out as the audit lays out draft trees.
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
    B, N, V = target_probs.shape
    D = depth_of(next_token, next_sibling)
    dev, dt = target_probs.device, target_probs.dtype
    rows = torch.arange(B, device=dev)
    node = torch.zeros(B, dtype=torch.long, device=dev)
    left = target_probs[:, 0].clone()  # the node's target row, rejected tokens removed
    out = torch.full((B, D + 1), -1, dtype=torch.long, device=dev)
    walking = torch.ones(B, dtype=torch.bool, device=dev)
    for depth in range(D):
        u = torch.rand(B, generator=generator, device=dev, dtype=dt)
        slices = torch.zeros(B, device=dev, dtype=dt)
        child = torch.where(walking, next_token[rows, node], -1)
        taken = torch.full((B,), -1, dtype=torch.long, device=dev)
        for _ in range(N):  # the siblings, in order
            trying = (child >= 0) & (taken < 0)
            c = child.clamp(min=0)
            x = candidates[rows, c]
            end = slices + left[rows, x]
            hit = trying & (u < end)
            taken = torch.where(hit, c, taken)
            miss = trying & ~hit
            left[rows[miss], x[miss]] = 0.0
            slices = torch.where(miss, end, slices)
            child = torch.where(miss, next_sibling[rows, c], -1)
        moved = taken >= 0
        out[rows[moved], depth] = candidates[rows[moved], taken[moved]]
        node = torch.where(moved, taken, node)
        left = torch.where(moved[:, None], target_probs[rows, node], left)
        walking = moved
    left = torch.where(left.sum(1, keepdim=True) > 0, left, target_probs[rows, node])
    final = torch.multinomial(left, 1, generator=generator)[:, 0]
    out[rows, (out >= 0).sum(1)] = final
    return out


def children(drafts, depth, start, width):
    """[(token, first row, rows)] of the node whose rows are start .. start + width (BRANCHING)."""
    b = BRANCHING[depth]
    return [(int(drafts[start + j * (width // b), depth]), start + j * (width // b), width // b)
            for j in range(b)]


def law(target, draft, drafts):
    out = {}
    L = len(BRANCHING)

    def walk(ctx, depth, start, width, w):
        left = target(ctx).copy()
        if depth < L:
            for y, lo, sub in children(drafts, depth, start, width):
                if left[y] > 0:
                    walk(ctx + (y,), depth + 1, lo, sub, w * left[y])
                left[y] = 0.0
        for y in np.flatnonzero(left):
            out[ctx + (int(y),)] = out.get(ctx + (int(y),), 0.0) + w * left[y]

    walk((), 0, 0, drafts.shape[0], 1.0)
    return out
