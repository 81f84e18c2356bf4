"""Block verification (Sun et al., "Block Verification Accelerates Speculative Decoding", ICLR 2025,
Algorithm 2), written from the paper's definitions: lossless, and optimal for one draft.

    mdtheory audit --block examples/verifiers/block_verification.py:verify --instance toy -n 1 -L 2
    mdtheory audit --block examples/verifiers/block_verification.py:law --exact --instance toy -n 1 -L 2

Along the first draft x_1..x_L, with p and q the target's and the draft's next-token laws after
x_{1:i}, the weights are w_0 = 1, w_i = min(1, w_{i-1} p(x_i) / q(x_i)). The residual after i tokens
is (w_i p - q)^+ with mass s_i, and h_i = s_i / (s_i + 1 - w_i) (i < L), h_L = w_L. With
eta_i ~ U(0, 1), tau = max{i : eta_i <= h_i} (0 if none); the block is x_{1:tau} followed by a token
from the normalised residual after tau tokens (the target itself after L tokens).
"""

import numpy as np


def stops(target, draft, x):
    """[(h_i, law of the last token)] for i = 0..L along the draft x (h_0 = 1)."""
    L = len(x)
    w, out = 1.0, []
    for i in range(L + 1):
        ctx = tuple(int(t) for t in x[:i])
        p, q = target(ctx), draft(ctx)
        if i == L:
            out.append((w, p))
            break
        r = np.clip(w * p - q, 0.0, None)
        s = r.sum()
        h = 1.0 if i == 0 else (s / (s + 1.0 - w) if s + 1.0 - w > 0 else 0.0)
        out.append((h, r / s if s > 0 else p))
        w = min(1.0, w * p[x[i]] / q[x[i]])
    return out


def verify(target, draft, drafts, rng):
    x = drafts[0]
    tau, steps = 0, stops(target, draft, x)
    for i in range(1, len(steps)):
        if rng.random() <= steps[i][0]:
            tau = i
    law = steps[tau][1]
    y = rng.choice(len(law), p=law)
    return np.array([*x[:tau], y], dtype=np.int64)


def law(target, draft, drafts):
    x = [int(t) for t in drafts[0]]
    steps = stops(target, draft, x)
    out, later = {}, 1.0  # later: P(eta_j > h_j for every j > i)
    for i in range(len(steps) - 1, -1, -1):
        h, last = steps[i]
        for y, py in enumerate(last):
            if py > 0:
                key = (*x[:i], y)
                out[key] = out.get(key, 0.0) + later * h * float(py)
        later *= 1.0 - h
    return out
