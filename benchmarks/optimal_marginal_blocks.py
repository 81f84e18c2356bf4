"""Two optimal token-level rules, two block laws: the optimal rule's two iid realisations, the window
schedule of the lexicographically optimal marginal (``realise="windows"``) and the cells and swaps
(``realise="cells"``, the default, the device's construction in mdtheory.torch_bridge.optimal),
inside token-by-token and multi-path block verification of K iid drafts, exactly
(papers/blocks_verifiers.md, section 10).

    PYTHONPATH=$PWD python benchmarks/optimal_marginal_blocks.py [--seeds 0,1,2,3,4,5]

Both rules accept with alpha* at every node and both verifiers stay lossless; the block laws differ
(mean TV between them per draw of the drafts) and so do the exact block efficiencies.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mdtheory.blocks import make_verifier, random_instance  # noqa: E402
from mdtheory.blocks.trees import iid_drafts  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2,3,4,5")
    args = ap.parse_args()
    print(f"{'V=3 seed':>8} {'K':>2} {'L':>2} {'verifier':<10} {'mean TV':>8} {'E|B| lex':>10} "
          f"{'E|B| cells':>12}")
    for seed in map(int, args.seeds.split(",")):
        target, draft = random_instance(3, seed=seed)
        for K, L in ((3, 1), (2, 2), (3, 2)):
            for name in ("token", "multipath"):
                a = make_verifier(name, rule="optimal", realise="windows")
                b = make_verifier(name, rule="optimal", realise="cells")
                tv = ea = eb = 0.0
                for d, w in iid_drafts(K, L).enumerate(draft):
                    la, lb = a.law(target, draft, d), b.law(target, draft, d)
                    tv += w * 0.5 * sum(abs(la.get(k, 0) - lb.get(k, 0)) for k in set(la) | set(lb))
                    ea += w * sum(len(k) * v for k, v in la.items())
                    eb += w * sum(len(k) * v for k, v in lb.items())
                print(f"{seed:>8} {K:>2} {L:>2} {name:<10} {tv:8.4f} {ea:10.6f} {eb:12.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
