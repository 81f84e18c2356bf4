"""LOSSY: block verification with q taken as 1 when the drafted token's probability is missing.

The drafter recorded no probability for its sampled tokens (only the logits of each step, for the
residual), so the verifier's lookup of q(x_i) falls back to 1: the weights become
w_i = min(1, w_{i-1} p(x_i) / 1), while the residuals (w p - q)^+ still use the draft's law.
Everything else is Sun et al.'s Algorithm 2. (Taking the draft as certain throughout, q = 1 at x_i
and 0 elsewhere in the residuals too, would be lossless: given any draft, the output then has the
target's law. It is the mixture of the two conventions that loses.)
"""

import numpy as np


def drafted_token_prob(record, token):
    return record.get(token, 1.0)  # BUG: a missing probability is taken as 1


def stops(target, draft, x):
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
        w = min(1.0, w * p[x[i]] / drafted_token_prob({}, int(x[i])))
    return out


def verify(target, draft, drafts, rng):
    x = drafts[0]
    tau, steps = 0, stops(target, draft, x)
    for i in range(1, len(steps)):
        if rng.random() <= steps[i][0]:
            tau = i
    law = steps[tau][1]
    return np.array([*x[:tau], rng.choice(len(law), p=law)], dtype=np.int64)


def law(target, draft, drafts):
    x = [int(t) for t in drafts[0]]
    steps = stops(target, draft, x)
    out, later = {}, 1.0
    for i in range(len(steps) - 1, -1, -1):
        h, last = steps[i]
        for y, py in enumerate(last):
            if py > 0:
                out[(*x[:i], y)] = out.get((*x[:i], y), 0.0) + later * h * float(py)
        later *= 1.0 - h
    return out
