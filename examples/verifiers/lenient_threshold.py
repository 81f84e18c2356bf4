"""LOSSY: recursive rejection sampling with an acceptance threshold below one.

"Lenient" verification accepts draft x when u < r(x) / (tau q(x)) with tau < 1, i.e. whenever the
ratio r(x)/q(x) clears tau u instead of u: more acceptance, and the residuals no longer make up the
difference, so the tokens the draft over-proposes come out too often.
"""

import numpy as np

TAU = 0.8


def residual(r, q):
    d = np.clip(r - q, 0.0, None)
    s = d.sum()
    return d / s if s > 0 else r


def verify(p, q, drafts, rng):
    r = p
    for x in drafts:
        if rng.random() * TAU * q[x] < r[x]:  # BUG: threshold TAU < 1
            return int(x), True
        r = residual(r, q)
    return int(rng.choice(len(p), p=r)), False


def law(p, q, drafts):
    accept, reach, r = np.zeros(len(p)), 1.0, p
    for x in drafts:
        a = min(1.0, r[x] / (TAU * q[x]))
        accept[x] += reach * a
        reach *= 1.0 - a
        r = residual(r, q)
    return accept, reach * r
