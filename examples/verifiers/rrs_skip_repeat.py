"""LOSSY: recursive rejection sampling that skips a repeated iid draft, and its residual update.

With iid drafts a token can be drafted twice. Skipping the repeat looks harmless (it was rejected
once already) but RRS must still move to the next residual: the repeat's test against the current
residual is what removes that token's mass. With p = (.2, .4, .4), q = (.6, .3, .1) and n = 2 this
verifier emits (.2, .46, .34), TV 0.06 from p:

    mdtheory audit --exact examples/verifiers/rrs_skip_repeat.py:law p.npy q.npy --drafts 2
"""

import numpy as np


def residual(r, q):
    d = np.clip(r - q, 0.0, None)
    s = d.sum()
    return d / s if s > 0 else r


def verify(p, q, drafts, rng):
    r, seen = p, set()
    for x in drafts.tolist():
        if x in seen:  # BUG: the repeat is skipped, and so is its residual update
            continue
        seen.add(x)
        if rng.random() * q[x] < r[x]:
            return x, True
        r = residual(r, q)
    return int(rng.choice(len(p), p=r)), False


def law(p, q, drafts):
    accept, reach, r, seen = np.zeros(len(p)), 1.0, p, set()
    for x in drafts.tolist():
        if x in seen:
            continue
        seen.add(x)
        a = min(1.0, r[x] / q[x])
        accept[x] += reach * a
        reach *= 1.0 - a
        r = residual(r, q)
    return accept, reach * r
