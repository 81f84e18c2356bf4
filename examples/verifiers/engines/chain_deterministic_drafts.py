"""Chain verification of deterministic drafts (no draft probabilities): lossless on any drafts.

    mdtheory audit --engine chain examples/verifiers/engines/chain_deterministic_drafts.py:verify -L 2 \\
        --instance toy --deterministic

Engines verify n-gram and greedy (EAGLE top-1) drafts without ``draft_probs``: q is one-hot at the
drafted token, so draft i is accepted with probability ``p_i(x_i)`` and a rejection draws from ``p_i``
with ``x_i`` removed, renormalised; when all k pass, a bonus token comes from row k. This function
always takes q one-hot (it ignores ``draft_probs``). Given any drafts its output has the target's
law, so it is lossless on sampled drafts too (the audit without ``--deterministic`` passes it); there
it keeps fewer tokens than chain_rejection.py, which reads q.
"""

import numpy as np
import torch


def verify(draft_token_ids, draft_probs, target_probs, generator):
    B, k = draft_token_ids.shape
    rows = torch.arange(B, device=target_probs.device)
    x = draft_token_ids[..., None]
    p_x = target_probs[:, :k].gather(2, x)[..., 0]
    u = torch.rand(B, k, generator=generator, device=target_probs.device, dtype=target_probs.dtype)
    m = (u < p_x).long().cumprod(1).sum(1)
    last = target_probs[rows, m].clone()
    rejected = m < k
    last[rows[rejected], draft_token_ids[rows[rejected], m[rejected]]] = 0.0  # p without x_m
    token = torch.multinomial(last, 1, generator=generator)[:, 0]
    pos = torch.arange(k + 1, device=target_probs.device)
    out = torch.where(pos < m[:, None], torch.cat([draft_token_ids, token[:, None]], 1), -1)
    out[rows, m] = token
    return out, m


def law(target, draft, drafts):
    x = [int(t) for t in drafts[0]]
    out, reach = {}, 1.0
    for i, xi in enumerate(x):
        p = target(tuple(x[:i]))
        r = p.copy()
        r[xi] = 0.0
        for y in np.flatnonzero(r):
            out[(*x[:i], int(y))] = reach * r[y]  # (1 - p(x_i)) * r / (1 - p(x_i))
        reach *= p[xi]
    p = target(tuple(x))
    for y in np.flatnonzero(p):
        out[(*x, int(y))] = reach * p[y]
    return out
