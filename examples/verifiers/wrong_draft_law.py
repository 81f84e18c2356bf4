"""LOSSY: verifying against a distribution other than the one the drafts were drawn from.

The drafts come from q, but the verifier recomputes the draft probabilities with a temperature of
0.7 applied to them (q^(1/0.7), renormalised), as happens when the drafting and the verifying code
read the sampling settings from different places. Its ratios and residuals are those of RRS for
the wrong q.
"""

import numpy as np

TEMPERATURE = 0.7


def residual(r, q):
    d = np.clip(r - q, 0.0, None)
    s = d.sum()
    return d / s if s > 0 else r


def assumed_draft_law(q):
    w = q ** (1.0 / TEMPERATURE)  # BUG: not the law the drafts were drawn from
    return w / w.sum()


def verify(p, q, drafts, rng):
    q, r = assumed_draft_law(q), p
    for x in drafts:
        if rng.random() * q[x] < r[x]:
            return int(x), True
        r = residual(r, q)
    return int(rng.choice(len(p), p=r)), False


def law(p, q, drafts):
    q = assumed_draft_law(q)
    accept, reach, r = np.zeros(len(p)), 1.0, p
    for x in drafts:
        a = min(1.0, r[x] / q[x])
        accept[x] += reach * a
        reach *= 1.0 - a
        r = residual(r, q)
    return accept, reach * r
