"""Cost of the front door's optimality certificate on the prefix route. Prints a table.

    .venv/bin/python benchmarks/bench_certify.py [--repeats 40] [--sizes 1000 128000]

Every time is the minimum over ``--repeats`` runs of this process's CPU time, as a ratio to one
``np.argsort`` of a float64 vector of the same length timed in the same process (the prefix route's
own cost is one argsort and two linear passes). Rows: the bare prefix scan; the front door with its
default certificate (the base pooled along the route's own order); the front door with
``certify="full"`` (the lexicographically optimal base of
:func:`~mdtheory.models.polymatroid.lex_optimal_base_iid`, with its own sort). The pair is
``bench_core.llm_pair`` (Zipf-like target, perturbed tempered draft), iid drafts, n = 4.
"""

from __future__ import annotations

import argparse
import inspect
import time

import numpy as np

import mdtheory as md
from mdtheory.routes.subsets import prefix_scan

try:
    from bench_core import llm_pair
except ImportError:  # run from the repository root
    from benchmarks.bench_core import llm_pair

#: CPU time of this process: on a shared machine, wall-clock minima still carry other jobs' load.
CLOCK = time.process_time


def min_time(fn, repeats: int) -> float:
    best = np.inf
    for _ in range(repeats):
        t0 = CLOCK()
        fn()
        best = min(best, CLOCK() - t0)
    return best


def bench(V: int, n: int, repeats: int) -> None:
    p, q = llm_pair(V)
    x = np.random.default_rng(1).random(V)
    full = "certify" in inspect.signature(md.optimal_acceptance).parameters
    rows = {
        "prefix_scan (route alone)": lambda: prefix_scan(p, md.IID(q, n)),
        "optimal_acceptance (default)": lambda: md.optimal_acceptance(p, q, n),
    }
    if full:
        rows['optimal_acceptance (certify="full")'] = \
            lambda: md.optimal_acceptance(p, q, n, certify="full")
    t_sort = min_time(lambda: np.argsort(x), repeats)
    res = md.optimal_acceptance(p, q, n)
    print(f"V = {V}, n = {n}: alpha* = {res.value:.15f}, certificate "
          f"{getattr(res, 'certificate', 'cut only')}, gap {getattr(res, 'certificate_gap', None)}")
    print(f"  {'np.argsort':38s} {t_sort * 1e3:8.3f} ms")
    for name, fn in rows.items():
        fn()  # warm-up (numba compilation) just before its own timing
        t = min_time(fn, repeats)
        print(f"  {name:38s} {t * 1e3:8.3f} ms   {t / t_sort:5.2f}x argsort")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 128_000])
    ap.add_argument("--drafts", type=int, default=4)
    args = ap.parse_args()
    for V in args.sizes:
        bench(V, args.drafts, args.repeats)


if __name__ == "__main__":
    main()
