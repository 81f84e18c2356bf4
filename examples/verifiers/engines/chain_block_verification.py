"""Block verification (Sun et al., "Block Verification Accelerates Speculative Decoding", ICLR 2025,
Algorithm 2) in the chain contract: lossless, and optimal for one draft.

    mdtheory audit --engine chain examples/verifiers/engines/chain_block_verification.py:verify -L 2 \\
        --instance toy
    mdtheory audit --block examples/verifiers/engines/chain_block_verification.py:law --exact --instance toy \\
        -n 1 -L 2

Written from the paper and the engines' documented rule (vLLM's model runner V2 and SGLang's Triton
chain kernels offer it): along the drafts, w_0 = 1 and w_i = min(1, w_{i-1} p_{i-1}(x_i) / q_{i-1}(x_i));
the residual after i drafts is r_i = (w_i p_i - q_i)^+ of mass s_i, h_i = s_i / (s_i + 1 - w_i) for
0 < i < k, h_0 = 1 and h_k = w_k. With one uniform u_i per position the number of drafts kept is the
LAST i with u_i <= h_i (no early stop), followed by one token from r_i normalised (row k at i = k).
Without ``draft_probs`` q is one-hot at the drafted token (deterministic drafts).
"""

import numpy as np
import torch


def verify(draft_token_ids, draft_probs, target_probs, generator):
    B, k = draft_token_ids.shape
    V = target_probs.shape[-1]
    dev, dt = target_probs.device, target_probs.dtype
    rows = torch.arange(B, device=dev)
    x = draft_token_ids[..., None]
    q = torch.nn.functional.one_hot(draft_token_ids, V).to(dt) if draft_probs is None else draft_probs
    ratio = target_probs[:, :k].gather(2, x)[..., 0] / q.gather(2, x)[..., 0]
    w = [torch.ones(B, device=dev, dtype=dt)]
    for i in range(k):
        w.append(torch.clamp(w[-1] * ratio[:, i], max=1.0))  # q(x_i) > 0: x_i was drawn from q
    w = torch.stack(w, 1)  # (B, k + 1)
    res = (w[:, :k, None] * target_probs[:, :k] - q).clamp(min=0)  # r_0 .. r_{k-1}
    s = res.sum(-1)
    den = s + 1 - w[:, :k]
    h = torch.where(den > 0, s / den.clamp(min=1e-300), 1.0)
    h = torch.cat([h, w[:, k:]], 1)
    h[:, 0] = 1.0
    u = torch.rand(B, k + 1, generator=generator, device=dev, dtype=dt)
    ok = u <= h
    m = k - ok.flip(1).long().argmax(1)  # the last i with u_i <= h_i
    last = torch.cat([res, target_probs[:, k:]], 1)[rows, m]
    last = torch.where(last.sum(1, keepdim=True) > 0, last, target_probs[rows, m])
    token = torch.multinomial(last, 1, generator=generator)[:, 0]
    pos = torch.arange(k + 1, device=dev)
    out = torch.where(pos < m[:, None], torch.cat([draft_token_ids, token[:, None]], 1), -1)
    out[rows, m] = token
    return out, m


def law(target, draft, drafts):
    x = [int(t) for t in drafts[0]]
    L = len(x)
    w, h, lasts = 1.0, [], []
    for i in range(L + 1):
        p = target(tuple(x[:i]))
        if i == L:
            h.append(w)
            lasts.append(p)
            break
        q = draft(tuple(x[:i]))
        r = np.clip(w * p - q, 0.0, None)
        s = r.sum()
        h.append(1.0 if i == 0 else (s / (s + 1 - w) if s + 1 - w > 0 else 1.0))
        lasts.append(r / s if s > 0 else p)
        w = min(1.0, w * p[x[i]] / q[x[i]])
    out, later = {}, 1.0
    for i in range(L, -1, -1):
        for y in np.flatnonzero(lasts[i]):
            out[(*x[:i], int(y))] = later * h[i] * lasts[i][y]
        later *= 1 - h[i]
    return out
