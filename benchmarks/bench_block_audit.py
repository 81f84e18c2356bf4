"""Block-audit benchmark: exact TVs, sample sizes, power and times of the block and tree examples.

    .venv/bin/python benchmarks/bench_block_audit.py [--seeds 40] [--out benchmarks/results/block_audit.json]

1. Exact mode (every draft array enumerated) of each example's law form on Sun et al.'s toy
   (V = 2) and seeded random instances (V = 3, seeds 1-3), n = 1 and 2 drafts, L = 2: verdict,
   exact TV of the completed law on V^(L+1), exact E|B|, the bound 1 + sum_m alpha*_m; seconds are
   the minimum of 3 runs.
2. Sampled mode at the sample size the audit chooses: the correct examples sized for the default
   TV 0.02, the lossy ones for their own exact TV; one run each (seed 0) with its seconds.
3. Power and level end to end over --seeds seeds on the V = 3 seed-1 instance, n = 1, L = 2: the
   fraction of runs that reject each lossy example at the size chosen for its exact TV (the
   audit's bound promises >= 0.9), and the fraction of runs of block verification rejected at
   level 0.01 at the default size.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mdtheory.audit.verifier import load_target
from mdtheory.blocks import audit_block
from mdtheory.blocks.markov import random_instance, sun_toy

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "verifiers"
CORRECT = ["block_verification", "tree_traversal"]
LOSSY = ["block_missing_q", "block_unnormalised_residual", "block_tempered_draft"]


def load(name, attr):
    return load_target(f"{EX / name}.py:{attr}")


def instances():
    yield "toy", *sun_toy()
    for seed in (1, 2, 3):
        yield f"random:3:{seed}", *random_instance(3, seed)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", type=int, default=40, help="end-to-end runs per measurement in part 3")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "block_audit.json")
    args = ap.parse_args()
    out = {"exact": [], "sampled": [], "power": []}

    print("1. exact mode, L = 2")
    print(f"   {'instance':<12s} {'n':>2s} {'verifier':<28s} {'verdict':<9s} {'TV':>9s} {'E|B|':>8s} "
          f"{'bound':>8s} {'seconds':>8s}")
    for inst, target, draft in instances():
        for n in (1, 2):
            for name in CORRECT + LOSSY:
                law = load(name, "law")
                times = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    r = audit_block(law, target, draft, n=n, length=2, exact=True)
                    times.append(time.perf_counter() - t0)
                bound = None if r.alpha_star is None else 1 + r.alpha_star
                print(f"   {inst:<12s} {n:>2d} {name:<28s} {r.verdict:<9s} {r.tv:9.3g} "
                      f"{r.block_efficiency:8.5f} {bound:8.5f} {min(times):8.3f}")
                out["exact"].append({"instance": inst, "n": n, "length": 2, "verifier": name,
                                     "verdict": r.verdict, "tv": r.tv,
                                     "block_efficiency": r.block_efficiency, "bound": bound,
                                     "seconds_min_of_3": min(times)})

    print("2. sampled mode at the audit's own sample size (seed 0), random:3:1, n = 1, L = 2")
    print(f"   {'verifier':<28s} {'detect_tv':>9s} {'samples':>8s} {'verdict':<12s} {'p-value':>9s} "
          f"{'tv_upper':>8s} {'seconds':>8s}")
    target, draft = random_instance(3, 1)
    exact_tv = {}
    for name in CORRECT + LOSSY:
        exact_tv[name] = audit_block(load(name, "law"), target, draft, n=1, length=2, exact=True).tv
        detect = 0.02 if name in CORRECT else exact_tv[name]
        t0 = time.perf_counter()
        r = audit_block(load(name, "verify"), target, draft, n=1, length=2, detect_tv=detect, seed=0)
        sec = time.perf_counter() - t0
        print(f"   {name:<28s} {detect:9.4f} {r.samples:8d} {r.verdict:<12s} {r.pvalue:9.3g} "
              f"{r.tv_upper:8.4f} {sec:8.2f}")
        out["sampled"].append({"verifier": name, "detect_tv": detect, "samples": r.samples,
                               "verdict": r.verdict, "pvalue": r.pvalue, "tv_upper": r.tv_upper,
                               "seconds": sec})

    print(f"3. power and level over {args.seeds} seeds (random:3:1, n = 1, L = 2)")
    for name in LOSSY:
        f = load(name, "verify")
        hits = sum(audit_block(f, target, draft, n=1, length=2, detect_tv=exact_tv[name],
                               seed=s).verdict == "lossy" for s in range(args.seeds))
        print(f"   {name:<28s} rejected {hits}/{args.seeds} at the size for TV {exact_tv[name]:.4f}")
        out["power"].append({"verifier": name, "tv": exact_tv[name], "rejected": hits,
                             "runs": args.seeds})
    f = load("block_verification", "verify")
    false = sum(audit_block(f, target, draft, n=1, length=2, seed=s).verdict == "lossy"
                for s in range(args.seeds))
    print(f"   block_verification (lossless) rejected {false}/{args.seeds} at level 0.01, default size")
    out["power"].append({"verifier": "block_verification", "tv": 0.0, "rejected": false,
                         "runs": args.seeds})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
