"""LOSSY: target-only tree verification with acceptance thresholds below one.

    mdtheory audit --engine tree examples/verifiers/engines/tree_target_only_threshold.py:verify \\
        --tree 2,2 --instance toy --deterministic
    mdtheory audit --block examples/verifiers/engines/tree_target_only_threshold.py:law --exact \\
        --instance toy --tree 2,2

The rule of tree_target_only.py with the two thresholds that SGLang's target-only tree kernel offers
as options (``threshold_single``, ``threshold_acc``; sgl-project/sglang,
``sgl-kernel/python/sgl_kernel/speculative.py``): child j is accepted when the coin is at most the
slices so far divided by THRESHOLD_ACC, or when its own target probability is at least
THRESHOLD_SINGLE. At 1 and 1 it is the lossless rule; below one it accepts drafted tokens more often
than the target draws them.
"""

import numpy as np
import torch

BRANCHING = (2, 2)
THRESHOLD_ACC = 0.5
THRESHOLD_SINGLE = 1.0


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
    left = target_probs[:, 0].clone()
    out = torch.full((B, D + 1), -1, dtype=torch.long, device=dev)
    walking = torch.ones(B, dtype=torch.bool, device=dev)
    for depth in range(D):
        u = torch.rand(B, generator=generator, device=dev, dtype=dt)
        slices = torch.zeros(B, device=dev, dtype=dt)
        child = torch.where(walking, next_token[rows, node], -1)
        taken = torch.full((B,), -1, dtype=torch.long, device=dev)
        for _ in range(N):
            trying = (child >= 0) & (taken < 0)
            c = child.clamp(min=0)
            x = candidates[rows, c]
            single = left[rows, x]
            end = slices + single
            hit = trying & ((u <= end / THRESHOLD_ACC) | (single >= THRESHOLD_SINGLE))  # BUG below 1
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


def law(target, draft, drafts):
    out = {}
    L = len(BRANCHING)

    def walk(ctx, depth, start, width, w):
        left = target(ctx).copy()
        passed = 0.0  # P(u <= the threshold of the siblings tried so far)
        if depth < L:
            b = BRANCHING[depth]
            for j in range(b):
                lo, sub = start + j * (width // b), width // b
                y = int(drafts[lo, depth])
                end = min(1.0, (1 - left.sum() + left[y]) / THRESHOLD_ACC)  # slices so far + p(y)
                take = 1.0 - passed if left[y] >= THRESHOLD_SINGLE else max(end - passed, 0.0)
                if take > 0:
                    walk(ctx + (y,), depth + 1, lo, sub, w * take)
                passed += take
                left[y] = 0.0
        rest = 1.0 - passed
        if rest > 0 and left.sum() > 0:
            for y in np.flatnonzero(left):
                out[ctx + (int(y),)] = out.get(ctx + (int(y),), 0.0) + w * rest * left[y] / left.sum()
        elif rest > 0:
            p = target(ctx)
            for y in np.flatnonzero(p):
                out[ctx + (int(y),)] = out.get(ctx + (int(y),), 0.0) + w * rest * p[y]
    walk((), 0, 0, drafts.shape[0], 1.0)
    return out
