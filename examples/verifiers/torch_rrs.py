"""Recursive rejection sampling in batched torch: lossless.

    mdtheory audit --torch examples/verifiers/torch_rrs.py:verify examples/p.npy examples/q.npy -n 4

p, q: (B, V) tensors; drafts: (B, n) long tensor; returns (tokens (B,), accepted (B,)).
"""

import torch


def residual(r, q):
    d = (r - q).clamp(min=0.0)
    s = d.sum(-1, keepdim=True)
    return torch.where(s > 0, d / s.clamp(min=1e-300), r)


def verify(p, q, drafts, generator):
    B, n = drafts.shape
    u = torch.rand(B, n, generator=generator, device=p.device, dtype=p.dtype)
    token = torch.full((B,), -1, dtype=torch.long, device=p.device)
    done = torch.zeros(B, dtype=torch.bool, device=p.device)
    r = p
    for i in range(n):
        x = drafts[:, i : i + 1]
        take = ~done & (u[:, i] * q.gather(1, x)[:, 0] < r.gather(1, x)[:, 0])
        token = torch.where(take, x[:, 0], token)
        done |= take
        r = residual(r, q)
    fallback = torch.multinomial(r, 1, generator=generator)[:, 0]
    return torch.where(done, token, fallback), done
