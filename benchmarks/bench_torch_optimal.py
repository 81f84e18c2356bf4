"""Positions per second of the torch ``optimal`` rule (prepare + one step), CPU or GPU.

    PYTHONPATH=$PWD python benchmarks/bench_torch_optimal.py [--device cpu] [--threads 1]
        [--sizes 1024x32000,4096x1000] [--repeats 3]

Each size: LLM-like float64 pairs (mdtheory._synthetic.llm_pairs), n = 4, one warm-up on 4 rows,
then the minimum over the repeats of the wall time of building the rule for B positions and taking
one verification step (CUDA synchronised). It uses only ``TORCH_RULES["optimal"]``, so pointing
PYTHONPATH at an older checkout measures that checkout's rule the same way (the before/after
figures of papers/theory.md's batched construction were taken so).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from mdtheory import torch_bridge as tb
from mdtheory._synthetic import llm_pairs


def positions_per_second(B: int, V: int, device: str, repeats: int, n: int = 4) -> float:
    p, q = (torch.as_tensor(x, device=device) for x in llm_pairs(np.random.default_rng(0), B, V))
    gen = torch.Generator(device=device).manual_seed(0)

    def run(P, Q):
        rule = tb.TORCH_RULES["optimal"](P, Q, n)
        out = rule.step(tb.sample_drafts(Q, n, gen), gen)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return out

    run(p[:4], q[:4])
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        run(p, q)
        best = min(best, time.perf_counter() - t0)
    return B / best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's own)")
    ap.add_argument("--sizes", default="1024x32000,4096x1000")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for size in args.sizes.split(","):
        B, V = (int(x) for x in size.split("x"))
        rate = positions_per_second(B, V, args.device, args.repeats)
        print(f"optimal {B:>5d} x {V:<6d} {args.device} threads {torch.get_num_threads()}: "
              f"{rate:10,.0f} positions/s", flush=True)


if __name__ == "__main__":
    main()
