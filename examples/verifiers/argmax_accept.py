"""LOSSY: accepting by argmax at temperature > 0.

Greedy verification (output a draft when it is the target's most likely token) is exact only at
temperature 0. Here it is used with a sampled target: a draft equal to argmax p is accepted, other
drafts are rejected and the token is drawn from p. The argmax token comes out with probability
p_max + (1 - p_max) * P(argmax drafted) > p_max.
"""

import numpy as np


def verify(p, q, drafts, rng):
    top = int(np.argmax(p))
    if top in drafts:  # BUG: right at temperature 0 only
        return top, True
    return int(rng.choice(len(p), p=p)), False


def law(p, q, drafts):
    top = int(np.argmax(p))
    accept = np.zeros(len(p))
    if top in drafts:
        accept[top] = 1.0
        return accept, np.zeros(len(p))
    return accept, p.copy()
