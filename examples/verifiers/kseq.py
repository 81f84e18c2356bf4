"""SpecTr's K-SEQ (Sun et al. 2023), written from scratch: lossless.

Each draft in turn is accepted with probability min(1, p(x) / (rho q(x))); after n rejections the
token is drawn from norm(p - A), with A = (1 - (1 - beta)^n) / beta * min(q, p / rho) the exact law
of an accepted draft and beta = sum_y min(q(y), p(y) / rho). rho in [1, n] solves
1 - (1 - beta)^n = rho beta (found by bisection, on the side that keeps p - A >= 0).

    mdtheory audit examples/verifiers/kseq.py:verify examples/p.npy examples/q.npy --drafts 4
"""

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=8)
def _prepare(p_bytes, q_bytes, n):
    p, q = np.frombuffer(p_bytes), np.frombuffer(q_bytes)

    def excess(rho):
        beta = np.minimum(q, p / rho).sum()
        return 1.0 - (1.0 - beta) ** n - rho * beta

    lo, hi = 1.0, float(n)
    if excess(lo) <= 0:
        hi = lo
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    beta = np.minimum(q, p / hi).sum()
    accepted = (1.0 - (1.0 - beta) ** n) / beta * np.minimum(q, p / hi)
    rest = np.clip(p - accepted, 0.0, None)
    return hi, rest / rest.sum() if rest.sum() > 0 else p


def verify(p, q, drafts, rng):
    rho, rest = _prepare(p.tobytes(), q.tobytes(), len(drafts))
    for x in drafts:
        if rng.random() * rho * q[x] < p[x]:
            return int(x), True
    return int(rng.choice(len(p), p=rest)), False
