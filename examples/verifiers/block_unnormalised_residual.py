"""LOSSY: block verification whose correction token is drawn from a residual not renormalised.

The residual (w p - q)^+ has mass s < 1; the code draws from it by inverse CDF with u ~ U(0, 1)
without dividing by s, and clamps the index to the last token, so that token also receives the
missing mass 1 - s. Everything else is Sun et al.'s Algorithm 2.
"""

import numpy as np


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
        out.append((h, r if s > 0 else p))  # BUG: r is not divided by s
        w = min(1.0, w * p[x[i]] / q[x[i]])
    return out


def draw(weights, u):
    """Inverse CDF of ``weights`` at u, clamped to the last token."""
    return min(int(np.searchsorted(np.cumsum(weights), u, side="right")), len(weights) - 1)


def verify(target, draft, drafts, rng):
    x = drafts[0]
    tau, steps = 0, stops(target, draft, x)
    for i in range(1, len(steps)):
        if rng.random() <= steps[i][0]:
            tau = i
    return np.array([*x[:tau], draw(steps[tau][1], rng.random())], dtype=np.int64)


def law(target, draft, drafts):
    x = [int(t) for t in drafts[0]]
    steps = stops(target, draft, x)
    out, later = {}, 1.0
    for i in range(len(steps) - 1, -1, -1):
        h, weights = steps[i]
        last = np.array(weights, dtype=float)
        last[-1] += 1.0 - last.sum()  # what draw() gives the last token
        for y, py in enumerate(last):
            if py > 0:
                out[(*x[:i], y)] = out.get((*x[:i], y), 0.0) + later * h * float(py)
        later *= 1.0 - h
    return out
