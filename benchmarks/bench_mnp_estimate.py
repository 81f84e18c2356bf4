"""The ``mnp`` route's size estimate (:func:`mdtheory._budget.min_norm_point`) against measured runs.

    .venv/bin/python benchmarks/bench_mnp_estimate.py          # the grid (about ten minutes)
    .venv/bin/python benchmarks/bench_mnp_estimate.py --quick  # V <= 1000, n = 4 (seconds)

For each draft model, V and n: an llm-like pair (``bench_core.llm_pair``; independent drafts are q
at the temperatures of :data:`TEMPERATURES`) and a Dirichlet(0.5) pair; Wolfe's iterations, the
final corral size, the CPU seconds of :func:`mdtheory.routes.mnp.min_norm_base` (process time, so
that other work on a shared machine does not count), the estimate, and the
ratios iterations / sqrt(V) and measured / estimated seconds. The estimate is meant to tell seconds
from hours; the ratio shows how far off it is. Writes ``benchmarks/results/mnp_estimate.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

import mdtheory as md
from mdtheory import _budget
from mdtheory.language.logits import tempered
from mdtheory.models.registry import make_draft_model
from mdtheory.routes.mnp import min_norm_base

sys.path.insert(0, str(Path(__file__).parent))
from bench_core import llm_pair  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TEMPERATURES = {2: (0.8, 1.4), 4: (0.7, 1.0, 1.4, 2.0), 8: (0.6, 0.7, 0.8, 1.0, 1.2, 1.4, 1.7, 2.0)}
GRID = [("independent", V, n) for V in (100, 1000, 3000) for n in (2, 4, 8)] + \
    [("independent", V, 4) for V in (10_000, 30_000)] + \
    [(s, V, n) for s in ("without-replacement", "conditional-poisson", "iid")
     for V in (100, 1000) for n in (2, 4)] + [("greedy", 1000, 4)]


def instance(kind: str, sampling: str, V: int, n: int):
    if kind == "llm":
        p, q = llm_pair(V, 0)
    else:
        rng = np.random.default_rng(0)
        p, q = rng.dirichlet(np.full(V, 0.5)), rng.dirichlet(np.full(V, 0.5))
    if sampling == "independent":
        return p, md.Independent(np.array([tempered(q, t) for t in TEMPERATURES[n]]))
    return p, make_draft_model(q, n, sampling)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    grid = [g for g in GRID if g[1] <= 1000 and g[2] == 4] if args.quick else GRID
    for sampling in dict.fromkeys(g[0] for g in grid):  # warm-up: numba's compiled kernels
        _, model = instance("dirichlet", sampling, 20, 2)
        min_norm_base(np.full(20, 0.05), model)
    rows = []
    for sampling, V, n in grid:
        for kind in ("llm", "dirichlet"):
            p, model = instance(kind, sampling, V, n)
            est = _budget.min_norm_point(model)
            t0 = time.process_time()
            try:
                base = min_norm_base(p, model)
            except md.MdtheoryError as exc:
                print(f"{sampling:20s} {kind:9s} V = {V:6d} n = {n}: {exc}")
                continue
            seconds = time.process_time() - t0
            row = {"sampling": sampling, "pair": kind, "V": V, "n": n, "iterations": base.iterations,
                   "corral": int(base.weights.size), "seconds": seconds,
                   "estimate_seconds": est.seconds, "gap": base.upper - base.lower}
            rows.append(row)
            print(f"{sampling:20s} {kind:9s} V = {V:6d} n = {n}: {base.iterations:5d} iterations "
                  f"({base.iterations / math.sqrt(V):6.1f} sqrt(V)), corral {row['corral']:4d}, "
                  f"{seconds:8.3f} s, estimate {est.seconds:8.3f} s (ratio "
                  f"{seconds / est.seconds:6.2f})", flush=True)
    ratios = np.array([r["seconds"] / r["estimate_seconds"] for r in rows])
    its = np.array([r["iterations"] / math.sqrt(r["V"]) for r in rows])
    print(f"measured / estimated seconds: median {np.median(ratios):.2f}, range "
          f"[{ratios.min():.2f}, {ratios.max():.2f}]; iterations / sqrt(V): median "
          f"{np.median(its):.1f}, range [{its.min():.1f}, {its.max():.1f}]")
    if not args.quick:
        path = ROOT / "benchmarks/results/mnp_estimate.json"
        path.write_text(json.dumps(rows, indent=1) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
