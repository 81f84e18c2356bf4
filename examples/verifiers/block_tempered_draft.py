"""LOSSY: block verification against a draft law other than the one the drafts were drawn from.

The drafts come from q, but the verifier recomputes the draft's probabilities with temperature 0.7
(q^(1/0.7), renormalised), as happens when the drafting and the verifying code read the sampling
settings from different places. Everything else is Sun et al.'s Algorithm 2.
"""

import numpy as np

TEMPERATURE = 0.7


def assumed_draft_row(draft, ctx):
    w = draft(ctx) ** (1.0 / TEMPERATURE)  # BUG: not the law the drafts were drawn from
    return w / w.sum()


def stops(target, draft, x):
    L = len(x)
    w, out = 1.0, []
    for i in range(L + 1):
        ctx = tuple(int(t) for t in x[:i])
        p, q = target(ctx), assumed_draft_row(draft, ctx)
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
