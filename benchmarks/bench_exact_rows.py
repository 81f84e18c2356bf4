"""The exact rows of ``block-efficiency --instance``: their size estimate against measured time and memory.

:func:`mdtheory.blocks.simulation.exact_rows` refuses, before any work, rows whose estimate
(:func:`~mdtheory.blocks.simulation.exact_estimate`) is over ``max_seconds`` / ``max_bytes``. Here,
on a small grid of the instances ``--instance`` names (K iid drafts and draft trees, with and without
the optimum), each case's estimate is printed beside the measured wall time (one run, after a warm-up
that imports and compiles what the verifiers use) and the peak of memory allocated through Python
and numpy during a second run (``tracemalloc``), with their ratios: an honest estimate is within a
factor of 10 either way (a refusal of work that would have fitted counts as a failure).

    python benchmarks/bench_exact_rows.py
    python benchmarks/bench_exact_rows.py --json benchmarks/results/exact_rows.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mdtheory.blocks import DraftTree, make_verifier  # noqa: E402
from mdtheory.blocks.simulation import exact_estimate, exact_rows, parse_instance  # noqa: E402
from mdtheory.blocks.trees import iid_drafts  # noqa: E402

#: The verifiers of every case: the README's example's, token by token with rrs and optimal.
VERIFIERS = (("token", "rrs"), ("token", "optimal"), ("block", None), ("multipath", "rrs"), ("gbv", None),
             ("trie", None), ("traversal", None))
#: (instance, K, L, tree branching or None, sampling, optimum)
CASES = (
    ("toy", 2, 2, None, "iid", True),
    ("toy", 1, 12, None, "iid", False),
    ("random:3:1", 2, 3, None, "iid", True),
    ("random:4:1", 3, 2, None, "iid", False),
    ("random:8:1", 2, 2, None, "iid", True),
    ("random:3:1", 3, 3, None, "iid", False),
    ("random:6:2", 4, 1, None, "iid", True),
    ("random:3:1", 4, 2, (2, 2), "without-replacement", True),
    ("random:4:1", 4, 2, (2, 2), "iid", False),
)


def verifiers_for(tree) -> list:
    """The verifiers of :data:`VERIFIERS` that take ``tree`` (the tree verifiers on a tree)."""
    out = []
    for name, rule in VERIFIERS:
        if not tree.is_iid_drafts and name not in ("token", "traversal"):
            continue
        if not tree.is_iid_drafts and name == "token" and rule == "rrs" and tree.sampling != "iid":
            rule = "rrs-wor"
        out.append(make_verifier(name, **({"rule": rule} if rule else {}),
                                 tree=None if tree.is_iid_drafts else tree))
    return out


def case(instance: str, K: int, L: int, branching, sampling: str, optimum: bool) -> dict:
    target, draft = parse_instance(instance)
    tree = iid_drafts(K, L) if branching is None else DraftTree(branching, sampling)
    verifiers = verifiers_for(tree)
    V = len(draft(()))
    est = exact_estimate(verifiers, V, tree, optimum)
    t0 = time.perf_counter()
    exact_rows(target, draft, verifiers, tree, optimum, max_seconds=None, max_bytes=None)
    seconds = time.perf_counter() - t0
    target, draft = parse_instance(instance)  # fresh laws and verifiers: no cache carried over
    verifiers = verifiers_for(tree)
    tracemalloc.start()
    exact_rows(target, draft, verifiers, tree, optimum, max_seconds=None, max_bytes=None)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"instance": instance, "K": K, "L": L, "tree": None if branching is None else list(branching),
            "sampling": sampling, "optimum": optimum, "verifiers": len(verifiers), "V": V,
            "estimate_seconds": est.seconds, "seconds": seconds, "estimate_bytes": est.bytes,
            "peak_bytes": peak, "time_ratio": est.seconds / seconds, "bytes_ratio": est.bytes / peak}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    case("toy", 1, 1, None, "iid", True)  # warm-up: imports, the rules' kernels
    case("random:3:1", 2, 1, (2,), "without-replacement", True)
    rows = []
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'case':44s} {'est s':>8s} {'s':>8s} {'ratio':>6s} {'est B':>9s} {'peak B':>9s} {'ratio':>6s}")
    for spec in CASES:
        r = case(*spec)
        rows.append(r)
        name = (f"{r['instance']} K={r['K']} L={r['L']}" + (f" tree={r['tree']} {r['sampling']}" if r["tree"]
                                                           else "") + (" +opt" if r["optimum"] else ""))
        print(f"{name:44s} {r['estimate_seconds']:8.3g} {r['seconds']:8.3g} {r['time_ratio']:6.2f} "
              f"{r['estimate_bytes']:9.3g} {r['peak_bytes']:9.3g} {r['bytes_ratio']:6.2f}", flush=True)
    worst = max(max(r[k], 1 / r[k]) for r in rows for k in ("time_ratio", "bytes_ratio"))
    print(f"worst factor either way: {worst:.2f}; load average {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if worst <= 10 else 1


if __name__ == "__main__":
    sys.exit(main())
