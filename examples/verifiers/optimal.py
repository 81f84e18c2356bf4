"""mdtheory's optimal rule (the lexicographically optimal base realised by a time schedule), audited
like anyone else's verifier: lossless, and its acceptance is alpha*.

    mdtheory audit examples/verifiers/optimal.py:verify examples/p.npy examples/q.npy --drafts 4
    mdtheory audit --exact examples/verifiers/optimal.py:law examples/p.npy examples/q.npy --drafts 2

(``mdtheory audit mdtheory.rules.optimal:Optimal ...`` audits the SelectionRule class itself, exactly.)
"""

from functools import lru_cache

import numpy as np

from mdtheory.rules import make_rule


@lru_cache(maxsize=8)
def _rule(p_bytes, q_bytes, n):
    return make_rule("optimal", np.frombuffer(p_bytes), np.frombuffer(q_bytes), n)


def verify(p, q, drafts, rng):
    return _rule(p.tobytes(), q.tobytes(), len(drafts)).select(drafts, rng)


def law(p, q, drafts):
    return _rule(p.tobytes(), q.tobytes(), len(drafts)).conditional(drafts)
