"""Recursive rejection sampling (SpecInfer, Miao et al. 2024), written from scratch: lossless.

    mdtheory audit examples/verifiers/rrs.py:verify examples/p.npy examples/q.npy --drafts 4

``verify`` is the sampler the audit calls once per draft tuple; ``law`` is its exact conditional law
in the rules' convention, for ``mdtheory audit --exact examples/verifiers/rrs.py:law ...``.
"""

import numpy as np


def residual(r, q):
    """norm((r - q)^+), or r itself when r <= q everywhere (then it is never reached)."""
    d = np.clip(r - q, 0.0, None)
    s = d.sum()
    return d / s if s > 0 else r


def verify(p, q, drafts, rng):
    r = p
    for x in drafts:
        if rng.random() * q[x] < r[x]:  # accept with probability min(1, r(x) / q(x))
            return int(x), True
        r = residual(r, q)
    return int(rng.choice(len(p), p=r)), False


def law(p, q, drafts):
    accept, reach, r = np.zeros(len(p)), 1.0, p
    for x in drafts:
        a = min(1.0, r[x] / q[x])
        accept[x] += reach * a
        reach *= 1.0 - a
        r = residual(r, q)
    return accept, reach * r
