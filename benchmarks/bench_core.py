"""Benchmarks for the optimal-acceptance core. Prints a table; writes no files.

    .venv/bin/python benchmarks/bench_core.py            # all three parts
    .venv/bin/python benchmarks/bench_core.py --part prefix|otlp|literal

1. prefix: the sorted-prefix alpha* at V = 128,000 (iid, n = 4), as a ratio to one np.sort of a float64
   vector of that length, medians over repeats in the same process.
2. otlp: the symmetry-reduced OTLP (LP over draft sets, HiGHS) at (V, n) = (10, 5) and (10, 6).
3. literal: the literal V^n x V OTLP at growing sizes, each in a subprocess killed after --limit seconds,
   up to the largest one that solves within 60 s.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np

import mdtheory as md
from mdtheory._synthetic import SERVING, llm_pairs
from mdtheory.routes.subsets import prefix_scan


def llm_pair(V: int, seed: int = 0):
    """One LLM-like pair (:func:`mdtheory._synthetic.llm_pairs`, the benchmarks' draft noise)."""
    (p,), (q,) = llm_pairs(np.random.default_rng(seed), 1, V, noise=SERVING[0],
                           temperature=SERVING[1])
    return p, q


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def bench_prefix(repeats: int = 30) -> None:
    V, n = 128_000, 4
    p, q = llm_pair(V)
    model = md.IID(q, n)
    x = np.random.default_rng(1).random(V)
    prefix_scan(p, model)  # warm-up
    t_sort = median_time(lambda: np.sort(x), repeats)
    t_scan = median_time(lambda: prefix_scan(p, model), repeats)
    t_door = median_time(lambda: md.optimal_acceptance(p, q, n), repeats)
    print(f"prefix  V = {V}, n = {n}: alpha* = {md.alpha_star(p, q, n):.10f}")
    print(f"  np.sort                         {t_sort * 1e3:8.3f} ms")
    print(f"  prefix_scan (argsort + cumsums) {t_scan * 1e3:8.3f} ms   ratio {t_scan / t_sort:.2f}x")
    print(f"  optimal_acceptance (validation, model, scan, certificate) "
          f"{t_door * 1e3:8.3f} ms   ratio {t_door / t_sort:.2f}x")


def hard_pair(V: int, seed: int):
    """A small-V pair far enough apart that alpha* < 1 at n = 5 and 6 (a strongly tempered draft)."""
    rng = np.random.default_rng(seed)
    logits = -1.5 * np.log(np.arange(1, V + 1))
    p = np.exp(logits)
    q = np.exp(rng.permutation(logits) / 3.0)
    return p / p.sum(), q / q.sum()


def bench_otlp(repeats: int = 3) -> None:
    for V, n in [(10, 5), (10, 6)]:
        p, q = hard_pair(V, seed=V + n)
        res = md.optimal_acceptance(p, q, n, method="otlp")
        t = median_time(lambda p=p, q=q, n=n: md.optimal_acceptance(p, q, n, method="otlp"), repeats)
        ref = md.alpha_star(p, q, n, method="subsets")
        print(f"otlp (sets) V = {V}, n = {n}: {len(res.support)} sets x {V} tokens, "
              f"{t * 1e3:.1f} ms (median of {repeats}), alpha* = {res.value:.10f}, "
              f"|alpha* - subsets| = {abs(res.value - ref):.1e}, gap {res.duality_gap:.1e}")


def literal_one(V: int, n: int) -> None:
    p, q = hard_pair(V, seed=V + n)
    t0 = time.perf_counter()
    res = md.optimal_acceptance(p, q, n, method="otlp-literal")
    t = time.perf_counter() - t0
    ref = md.alpha_star(p, q, n)
    print(f"{t:.3f} {len(res.support) * V} {abs(res.value - ref):.2e}")


def bench_literal(limit: float) -> None:
    sizes = [(10, 3), (10, 4), (12, 4), (8, 5), (13, 4), (9, 5), (15, 4), (10, 5)]
    best = None
    for V, n in sizes:
        cmd = [sys.executable, __file__, "--literal-one", str(V), str(n)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            print(f"literal V = {V}, n = {n}: {V ** (n + 1):.2e} variables, over {limit:.0f} s")
            continue
        if out.returncode != 0:
            print(f"literal V = {V}, n = {n}: failed: {out.stderr.strip().splitlines()[-1]}")
            continue
        secs, cols, err = out.stdout.split()
        print(f"literal V = {V}, n = {n}: {int(cols):.2e} variables, {float(secs):.2f} s, "
              f"|alpha* - prefix| = {err}")
        if float(secs) <= 60 and (best is None or int(cols) > best[2]):
            best = (V, n, int(cols), float(secs))
    if best:
        print(f"largest literal OTLP within 60 s: V = {best[0]}, n = {best[1]} "
              f"({best[2]:.2e} variables, {best[3]:.1f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--part", choices=["prefix", "otlp", "literal", "all"], default="all")
    ap.add_argument("--limit", type=float, default=90.0, help="seconds per literal size")
    ap.add_argument("--literal-one", nargs=2, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.literal_one:
        literal_one(*args.literal_one)
        return
    if args.part in ("prefix", "all"):
        bench_prefix()
    if args.part in ("otlp", "all"):
        bench_otlp()
    if args.part in ("literal", "all"):
        bench_literal(args.limit)


if __name__ == "__main__":
    main()
