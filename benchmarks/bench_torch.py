"""Torch bridge benchmark: batched alpha* and per-rule throughput. Prints a table.

    .venv/bin/python benchmarks/bench_torch.py [--device cpu|cuda]

alpha*: the sorted-prefix route on (B, V) float32 tensors, median of 5 runs after a warm-up (CUDA
runs are synchronised). Rules: positions per second for one verification step each, preparation
included, on LLM-like pairs (mdtheory._synthetic.llm_pairs), n = 4 drafts.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from mdtheory import torch_bridge as tb
from mdtheory._synthetic import llm_pairs


def timed(fn, device, repeats=5):
    fn()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    dev = args.device
    print(f"device: {dev}; torch {torch.__version__}; threads {torch.get_num_threads()}")
    gen = torch.Generator(device=dev).manual_seed(0)
    for B, V in [(64, 128_000), (1024, 128_000)]:
        logits = torch.randn(B, V, generator=gen, device=dev)
        p = torch.softmax(logits, -1)
        q = torch.softmax(logits + torch.randn(B, V, generator=gen, device=dev), -1)
        t = timed(lambda p=p, q=q: tb.alpha_star(p, q, 4), dev)
        print(f"alpha* B x V = {B} x {V}: {t * 1e3:.1f} ms ({B / t:,.0f} positions/s)")
        del logits, p, q
    rng = np.random.default_rng(0)
    for name, B, V in [("rrs", 4096, 1000), ("k-seq", 4096, 1000), ("khisti-lp", 256, 10),
                       ("optimal", 256, 10), ("optimal", 1024, 1000)]:
        P, Q = (torch.as_tensor(x, dtype=torch.float64, device=dev) for x in llm_pairs(rng, B, V))

        def run(P=P, Q=Q, name=name):
            rule = tb.TORCH_RULES[name](P, Q, 4)
            return rule.step(tb.sample_drafts(Q, 4, gen), gen)

        t = timed(run, dev, repeats=3)
        print(f"{name:<10s} B = {B}, V = {V}: {B / t:,.0f} positions/s (prepare + one step)")


if __name__ == "__main__":
    main()
