"""LOSSY: block verification ported without the draft's probabilities: q(x_i) taken as 1 in the
weights and the draft's law left out of the residuals.

    mdtheory audit --engine chain examples/verifiers/engines/chain_block_ignores_draft_probs.py:verify \\
        -L 2 --instance toy
    mdtheory audit --block examples/verifiers/engines/chain_block_ignores_draft_probs.py:law --exact \\
        --instance toy -n 1 -L 2

Sun et al.'s Algorithm 2 (chain_block_verification.py) with ``draft_probs`` ignored: the weights become
w_i = min(1, w_{i-1} p_{i-1}(x_i) / 1) and the residuals (w_i p_i - 0)^+, so every h_i is w_i and a
correction is drawn from the target's row itself, drafted token included. Users reported a
block-verification port with the draft probabilities missing (later fixed or disabled). Taking q
one-hot at the drafted token instead (chain_block_verification.py with ``draft_probs=None``) is
lossless on any drafts, sampled or not: given the drafts, the output then has the target's law; it
only keeps fewer tokens. Ignoring q is lossy on every draft model, deterministic drafts included.
"""

import numpy as np
import torch


def verify(draft_token_ids, draft_probs, target_probs, generator):
    B, k = draft_token_ids.shape
    dev, dt = target_probs.device, target_probs.dtype
    rows = torch.arange(B, device=dev)
    p_x = target_probs[:, :k].gather(2, draft_token_ids[..., None])[..., 0]
    w = torch.cat([torch.ones(B, 1, device=dev, dtype=dt), p_x.cumprod(1)], 1)  # BUG: q(x_i) taken as 1
    h = w.clone()  # s_i / (s_i + 1 - w_i) with s_i = w_i: the residual w_i p_i has no q in it (BUG)
    h[:, 0] = 1.0
    u = torch.rand(B, k + 1, generator=generator, device=dev, dtype=dt)
    m = k - (u <= h).flip(1).long().argmax(1)
    token = torch.multinomial(target_probs[rows, m], 1, generator=generator)[:, 0]
    pos = torch.arange(k + 1, device=dev)
    out = torch.where(pos < m[:, None], torch.cat([draft_token_ids, token[:, None]], 1), -1)
    out[rows, m] = token
    return out, m


def law(target, draft, drafts):
    x = [int(t) for t in drafts[0]]
    L = len(x)
    w, h = [1.0], [1.0]
    for i in range(L):
        w.append(w[-1] * target(tuple(x[:i]))[x[i]])
        h.append(w[-1])
    out, later = {}, 1.0
    for i in range(L, -1, -1):
        p = target(tuple(x[:i]))
        for y in np.flatnonzero(p):
            out[(*x[:i], int(y))] = later * h[i] * p[y]
        later *= 1 - h[i]
    return out
