"""Exact block efficiencies E|B| of the sequence-level verifiers, by enumerating the drafts.

For Sun et al.'s toy (V = 2, target (1/3, 2/3), draft (2/3, 1/3) at every context) and seeded
random context-dependent instances (Dirichlet(1) laws per context, :func:`mdtheory.blocks.random_instance`),
K iid drafts of L tokens: token by token with RRS and with the optimal token-level rule, block
verification (first draft), multi-path block verification (a path selected by RRS or by the
optimal token-level rule, then block-verified against the selection's law), greedy multi-path
block verification (Thomas & Pal: the draft of highest p/q ranks, block-verified against its own
law), block verification over the prefix trie, traversal verification over the K drafts as
separate paths, and traversal over the tree of K distinct first tokens (drawn without
replacement, each continued on its own; a different draft model). Each law is checked lossless
(``block_law_tv``) and the largest distance is printed. Where
``mdtheory.blocks.optimal_block_efficiency`` exists, the exact optimum of K iid drafts is printed too.

Run:  python benchmarks/block_verifier_table.py [--instances toy,2:0,2:1,2:2] [--max-draws 20000]
          [--verifiers gbv,multipath:optimal] [--no-optimum] [--json out]
"""

from __future__ import annotations

import argparse
import json
import time

from mdtheory import blocks
from mdtheory.blocks import (
    BlockVerification,
    DraftTree,
    GreedyMultiPath,
    PrefixTrie,
    SelectedPath,
    TokenByToken,
    Traversal,
    block_law_tv,
    exact_block_law,
    random_instance,
    sun_toy,
)


def _instance(spec: str):
    if spec == "toy":
        return sun_toy()
    V, seed = (int(x) for x in spec.split(":"))
    return random_instance(V, seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", default="toy,2:0,2:1,2:2")
    ap.add_argument("--drafts", default="1,2,3,4")
    ap.add_argument("--lengths", default="1,2,3")
    ap.add_argument("--max-draws", type=int, default=20000)
    ap.add_argument("--verifiers", help="comma-separated columns to compute (default all)")
    ap.add_argument("--no-optimum", action="store_true", help="skip the LP optimum")
    ap.add_argument("--json")
    args = ap.parse_args()
    optimum = None if args.no_optimum else getattr(blocks, "optimal_block_efficiency", None)
    only = set(args.verifiers.split(",")) if args.verifiers else None
    rows = []
    for spec in args.instances.split(","):
        target, draft = _instance(spec)
        V = target(()).size
        for L in (int(x) for x in args.lengths.split(",")):
            for K in (int(x) for x in args.drafts.split(",")):
                if V ** (K * L) > args.max_draws:
                    continue
                t0 = time.perf_counter()
                verifiers = {"token:rrs": TokenByToken("rrs"), "token:optimal": TokenByToken("optimal"),
                             "block": BlockVerification(), "multipath:rrs": SelectedPath(),
                             "multipath:optimal": SelectedPath("optimal"), "gbv": GreedyMultiPath(),
                             "trie": PrefixTrie(), "traversal": Traversal()}
                if V >= K:
                    verifiers["traversal-wor"] = Traversal(DraftTree.chains(K, L, "without-replacement"))
                if only is not None:
                    verifiers = {k: v for k, v in verifiers.items() if k in only}
                row = {"instance": spec, "V": V, "K": K, "L": L}
                worst = 0.0
                for name, verifier in verifiers.items():
                    law = exact_block_law(verifier, target, draft, K, L)
                    worst = max(worst, block_law_tv(law, target, L))
                    row[name] = float(sum(len(b) * w for b, w in law.items()))
                row["max_tv"] = worst
                if optimum is not None:
                    row["optimum"] = float(optimum(target, draft, K, L).value)
                row["seconds"] = time.perf_counter() - t0
                rows.append(row)
                cells = "  ".join(f"{k} {v:.4f}" for k, v in row.items()
                                  if k not in ("instance", "V", "K", "L", "max_tv", "seconds"))
                print(f"{spec:5s} K={K} L={L}  {cells}  (max TV {worst:.1e}, {row['seconds']:.1f} s)",
                      flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
