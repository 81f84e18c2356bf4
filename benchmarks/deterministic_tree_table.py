"""Deterministic trees of N nodes against sampled drafts with the same N nodes, exactly
(papers/blocks.md, section 10).

    PYTHONPATH=$PWD python benchmarks/deterministic_tree_table.py [--instances toy,random:3:0,...]

For each instance and N: the best-first tree under the draft (what engines build) and under the
target (the best deterministic tree of N nodes), each with the most a lossless verifier keeps on it,
1 + sum of p(path) (target-only verification attains it); and the exact optimum of sampled drafts
with N nodes: K iid drafts of L tokens with K L = N (the n-drafts LP,
``optimal_block_efficiency(target, draft, K, L)``) and iid draft trees of N nodes
(``optimal_block_efficiency(target, draft, tree=...)``), the best shape of each named. Depth at most 2.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mdtheory.blocks import DraftTree, optimal_block_efficiency  # noqa: E402
from mdtheory.blocks.deterministic import deterministic_trees  # noqa: E402
from mdtheory.blocks.simulation import parse_instance  # noqa: E402

#: Sampled draft models with N nodes and depth <= 2: (K, L) iid drafts, and iid trees.
CHAINS = {2: [(1, 2), (2, 1)], 4: [(2, 2), (4, 1)], 6: [(3, 2), (6, 1)]}
TREES = {2: [], 4: [(1, 3)], 6: [(2, 2), (1, 5)]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", default="toy,random:3:0,random:3:1,random:3:2,random:4:0")
    args = ap.parse_args()
    print(f"{'instance':<12} {'N':>2} {'draft tree':>10} {'best tree':>10} {'K iid (K,L)':>18} "
          f"{'iid tree':>18}")
    for name in args.instances.split(","):
        target, draft = parse_instance(name)
        for N in (2, 4, 6):
            r = deterministic_trees(target, draft, N, 2)
            lp = max((float(optimal_block_efficiency(target, draft, K, L).value), (K, L))
                     for K, L in CHAINS[N])
            trees = [(float(optimal_block_efficiency(target, draft, tree=DraftTree(b)).value), b)
                     for b in TREES[N]]
            tr = max(trees) if trees else None
            cell = f"{tr[0]:.4f} {str(tr[1]):>7}" if tr else "-"
            print(f"{name:<12} {N:>2} {r.draft_value:10.4f} {r.best_value:10.4f} "
                  f"{lp[0]:10.4f} {str(lp[1]):>7} {cell:>18}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
