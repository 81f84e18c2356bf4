"""LOSSY, batched torch: recursive rejection sampling that skips a repeated draft and its residual
update (the torch form of rrs_skip_repeat.py).
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
        repeat = (drafts[:, :i] == x).any(dim=1)  # BUG: skipped, residual not updated
        take = ~done & ~repeat & (u[:, i] * q.gather(1, x)[:, 0] < r.gather(1, x)[:, 0])
        token = torch.where(take, x[:, 0], token)
        done |= take
        r = torch.where(repeat[:, None], r, residual(r, q))
    fallback = torch.multinomial(r, 1, generator=generator)[:, 0]
    return torch.where(done, token, fallback), done
