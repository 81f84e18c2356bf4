"""Standard chain speculative sampling in the chain contract: lossless.

    mdtheory audit --engine chain examples/verifiers/engines/chain_rejection.py:verify -L 2 --instance toy
    mdtheory audit --block examples/verifiers/engines/chain_rejection.py:law --exact --instance toy -n 1 -L 2

The rule of FlashInfer's ``chain_speculative_sampling`` (flashinfer-ai/flashinfer,
``flashinfer/sampling.py``; Leviathan et al. 2023, Chen et al. 2023), written from its documentation:
draft i is accepted while ``u_i * q_i(x_i) < p_i(x_i)``; at the first rejection one token is drawn from
``relu(p_i - q_i)`` normalised; when all k drafts pass, a bonus token is drawn from row k. It needs the
draft's probabilities (``draft_probs``); for deterministic drafts see chain_deterministic_drafts.py.

``verify`` is the torch function in the contract (``mdtheory.engines.contracts``); ``law`` its output's
exact law given the drafts, in numpy (``mdtheory audit --block ... --exact``), written from the same rule.
"""

import numpy as np
import torch


def verify(draft_token_ids, draft_probs, target_probs, generator):
    if draft_probs is None:
        raise ValueError("standard chain rejection needs draft_probs")
    B, k = draft_token_ids.shape
    rows = torch.arange(B, device=target_probs.device)
    x = draft_token_ids[..., None]
    p_x = target_probs[:, :k].gather(2, x)[..., 0]
    q_x = draft_probs.gather(2, x)[..., 0]
    u = torch.rand(B, k, generator=generator, device=target_probs.device, dtype=target_probs.dtype)
    m = (u * q_x < p_x).long().cumprod(1).sum(1)  # drafts kept: up to the first rejection
    p_m = target_probs[rows, m]
    q_m = torch.cat([draft_probs, torch.zeros_like(draft_probs[:, :1])], 1)[rows, m]  # zero row: bonus
    last = (p_m - q_m).clamp(min=0)
    last = torch.where(last.sum(1, keepdim=True) > 0, last, p_m)
    token = torch.multinomial(last, 1, generator=generator)[:, 0]
    pos = torch.arange(k + 1, device=target_probs.device)
    out = torch.cat([draft_token_ids, token[:, None]], 1)
    out = torch.where(pos < m[:, None], out, -1)
    out[rows, m] = token
    return out, m


def law(target, draft, drafts):
    x = [int(t) for t in drafts[0]]
    out, reach = {}, 1.0
    for i, xi in enumerate(x):
        p, q = target(tuple(x[:i])), draft(tuple(x[:i]))
        a = min(1.0, p[xi] / q[xi]) if q[xi] > 0 else 0.0
        r = np.clip(p - q, 0.0, None)
        for y in np.flatnonzero(r):
            out[(*x[:i], int(y))] = reach * (1 - a) * r[y] / r.sum()
        reach *= a
    p = target(tuple(x))
    for y in np.flatnonzero(p):
        out[(*x, int(y))] = reach * p[y]
    return out
