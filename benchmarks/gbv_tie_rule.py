"""GBV's tie rule: the walk and the skewed law must rank tied tokens alike, or GBV is lossy.

The reference implementation of Thomas & Pal's GBV ranks a node's tokens by p/q for the skewed law
(a stable sort: among equal ratios the larger token index ranks higher) but walks to the *first*
drafted child of largest ratio (a strict ``>``); one copy of it ranks by min(1, p/q), under which
every token with p >= q ties. This script computes, by enumerating every draw of the drafts, the
validity TV of three selections, all block-verified against the same skewed law mu:

- ``ours``: mdtheory's ``gbv`` (walk and mu rank ties by token index);
- ``first-drafted``: the walk takes the first drafted token of largest ratio (ties by draft order);
- ``min1-first-drafted``: ratio min(1, p/q) in both, the walk taking the first drafted tied token.

    python benchmarks/gbv_tie_rule.py
"""

from __future__ import annotations

import numpy as np

from mdtheory.blocks import (
    ConstantLaw,
    GreedyMultiPath,
    block_law_tv,
    exact_block_law,
    random_instance,
    sun_toy,
)
from mdtheory.blocks.verifiers.gbv import _power_sums


class _Variant(GreedyMultiPath):
    def __init__(self, clip: bool, first_drafted: bool):
        self.clip, self.first_drafted = clip, first_drafted

    def _ranks(self, laws, ctx):
        p, q = laws.p(ctx), laws.q(ctx)
        ratio = [p[y] / q[y] if q[y] > 0 else float("inf") for y in range(q.size)]
        if self.clip:
            ratio = [min(1, r) for r in ratio]
        self._ratio = ratio
        order = sorted(range(q.size), key=lambda y: (ratio[y], y))
        rank = np.empty(q.size, dtype=np.int64)
        below, acc = 0 * q, 0 * q[0]
        for i, y in enumerate(order):
            rank[y], below[y] = i, acc
            acc = acc + q[y]
        if self.first_drafted:  # the walk: first drafted token of the largest ratio
            self._walk_key = lambda tokens: max(range(len(tokens)),
                                                key=lambda i: (ratio[tokens[i]], -i))
        return rank, below

    def _path(self, laws, x):
        if not self.first_drafted:
            return super()._path(laws, x)
        K, L = x.shape
        rows, path, mus = np.arange(K), [], []
        R = 0 * laws.q(())[0]
        for depth in range(L):
            ctx = tuple(path)
            q = laws.q(ctx)
            _, below = self._ranks(laws, ctx)
            scale = R + 1
            mu = q * _power_sums((R + below + q) / scale, (R + below) / scale, K) / \
                _power_sums(1 + 0 * R / scale, R / scale, K)
            tokens = [int(t) for t in x[rows, depth]]
            y = tokens[self._walk_key(tokens)]
            rows = rows[x[rows, depth] == y]
            path.append(y)
            mus.append(mu)
            R = (R + below[y]) / q[y]
        return path, mus


def main() -> None:
    instances = {"toy": sun_toy(), "p = q = (1/2, 1/2)": (ConstantLaw([0.5, 0.5]),) * 2,
                 "p = q = (0.2, 0.3, 0.5)": (ConstantLaw([0.2, 0.3, 0.5]),) * 2,
                 "random V=3 seed 1": random_instance(3, 1), "random V=3 seed 2": random_instance(3, 2)}
    variants = {"ours": GreedyMultiPath(), "first-drafted": _Variant(False, True),
                "min1-first-drafted": _Variant(True, True)}
    print(f"{'instance':26s} K L  " + "  ".join(f"{k:>20s}" for k in variants))
    for name, (p, q) in instances.items():
        for K, L in [(2, 1), (2, 2), (3, 2)]:
            tvs = [block_law_tv(exact_block_law(v, p, q, K, L), p, L) for v in variants.values()]
            print(f"{name:26s} {K} {L}  " + "  ".join(f"{t:20.2e}" for t in tvs))


if __name__ == "__main__":
    main()
