"""LOSSY: ensemble verification, v = w p + (1 - w) q, accepting draft i with probability
min(1, v_i(x_i) / q_i(x_i)).

    mdtheory audit --engine chain examples/verifiers/engines/chain_ensemble.py:verify -L 2 --instance toy
    mdtheory audit --block examples/verifiers/engines/chain_ensemble.py:law --exact --instance toy -n 1 -L 2

Written from the option's documented rule (a "static ensemble verification" merged in Hugging Face
transformers' assisted generation, huggingface/transformers pull request 45979, after "DIVERSED:
Relaxed Speculative Decoding via Dynamic Ensemble Verification", AISTATS 2026, arXiv 2604.07622): the chain
rule of chain_rejection.py run against the mixture v_i instead of p_i, a rejection drawing from
relu(v_i - q_i) normalised (which is relu(p_i - q_i) normalised), and the bonus token from the
target's row k. Each emitted token then follows v, not p: the output is lossy by design, and the
audit states by how much. WEIGHT is w.
"""

import numpy as np
import torch

WEIGHT = 0.5


def verify(draft_token_ids, draft_probs, target_probs, generator):
    B, k = draft_token_ids.shape
    dev = target_probs.device
    rows = torch.arange(B, device=dev)
    v = WEIGHT * target_probs[:, :k] + (1 - WEIGHT) * draft_probs
    x = draft_token_ids[..., None]
    v_x, q_x = v.gather(2, x)[..., 0], draft_probs.gather(2, x)[..., 0]
    u = torch.rand(B, k, generator=generator, device=dev, dtype=target_probs.dtype)
    m = (u * q_x < v_x).long().cumprod(1).sum(1)
    v_m = torch.cat([v, target_probs[:, k:]], 1)[rows, m]  # row k: the target's bonus row
    q_m = torch.cat([draft_probs, torch.zeros_like(draft_probs[:, :1])], 1)[rows, m]
    last = (v_m - q_m).clamp(min=0)
    last = torch.where(last.sum(1, keepdim=True) > 0, last, v_m)
    token = torch.multinomial(last, 1, generator=generator)[:, 0]
    pos = torch.arange(k + 1, device=dev)
    out = torch.where(pos < m[:, None], torch.cat([draft_token_ids, token[:, None]], 1), -1)
    out[rows, m] = token
    return out, m


def law(target, draft, drafts):
    x = [int(t) for t in drafts[0]]
    out, reach = {}, 1.0
    for i, xi in enumerate(x):
        p, q = target(tuple(x[:i])), draft(tuple(x[:i]))
        v = WEIGHT * p + (1 - WEIGHT) * q
        a = min(1.0, v[xi] / q[xi]) if q[xi] > 0 else 0.0
        r = np.clip(v - q, 0.0, None)
        for y in np.flatnonzero(r):
            out[(*x[:i], int(y))] = reach * (1 - a) * r[y] / r.sum()
        reach *= a
    p = target(tuple(x))
    for y in np.flatnonzero(p):
        out[(*x, int(y))] = reach * p[y]
    return out
