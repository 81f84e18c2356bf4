"""α* for drafts without replacement on real next-token laws: every row proven, and in what CPU time.

The rows: ``mdtheory lm-pairs`` on the bundled char-LSTM (V = 465), seed 0, at target temperatures
0.7 and 1.0 with the 3-gram, the tempered (T = 1.2), the quantized (int8) and a tempered T = 1.3
top-20 drafter, ``--positions`` positions each (written once to ``--pairs`` and reused), and
n = 2..8 drafts without replacement. Each row runs the front door as a user does,
``optimal_acceptance(p, q, n, "without-replacement")`` with its defaults, in this process after
one warm-up call, and records the CPU seconds (``time.process_time``), the status, the certificate
and the route that proved it. Prints the slowest rows, every row not proven, and per configuration
the rows, the proven ones and the largest CPU time; ``--json FILE`` writes every row.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_wor_rows.py [--positions 32] [--drafts 2-8]
        [--pairs DIR] [--only LABEL] [--json FILE] [--root CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

CONFIGS = [  # (label, lm-pairs options)
    ("T0.7 3-gram", ["--target-temperature", "0.7", "--draft", "ngram"]),
    ("T0.7 tempered1.2", ["--target-temperature", "0.7", "--draft", "tempered",
                          "--draft-temperature", "1.2"]),
    ("T0.7 int8", ["--target-temperature", "0.7", "--draft", "quantized"]),
    ("T0.7 T1.3 top-20", ["--target-temperature", "0.7", "--draft", "tempered",
                          "--draft-temperature", "1.3", "--top-k", "20"]),
    ("T1.0 3-gram", ["--target-temperature", "1.0", "--draft", "ngram"]),
    ("T1.0 tempered1.2", ["--target-temperature", "1.0", "--draft", "tempered",
                          "--draft-temperature", "1.2"]),
    ("T1.0 int8", ["--target-temperature", "1.0", "--draft", "quantized"]),
    ("T1.0 T1.3 top-20", ["--target-temperature", "1.0", "--draft", "tempered",
                          "--draft-temperature", "1.3", "--top-k", "20"]),
]


def _drafts(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def pairs(label: str, options: list[str], positions: int, folder: Path):
    """(P, Q) of one configuration, written by ``mdtheory lm-pairs`` once into ``folder``."""
    from mdtheory.cli import main

    out = folder / f"{label.replace(' ', '_')}_{positions}"
    if not (out / "P.npy").exists():
        argv = ["lm-pairs", "--positions", str(positions), *options, "--seed", "0", "--out", str(out),
                "--quiet", "--max-seconds", "inf"]
        if main(argv) != 0:
            raise SystemExit(f"lm-pairs failed: {' '.join(argv)}")
    return np.load(out / "P.npy", allow_pickle=False), np.load(out / "Q.npy", allow_pickle=False)


def solve_row(p, q, n):
    """One front-door call: a dict of the row's outcome and its CPU seconds."""
    import mdtheory as md
    from mdtheory.errors import OptimalityGapError

    t0 = time.process_time()
    try:
        res = md.optimal_acceptance(p, q, n, "without-replacement")
        row = {"status": res.status, "value": res.value, "certificate": res.certificate,
               "method": res.method}
    except OptimalityGapError as exc:
        row = {"status": "bounds", "lower": exc.lower, "upper": exc.upper, "value": exc.upper}
    row["cpu"] = time.process_time() - t0
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--positions", type=int, default=32, help="positions per configuration (32)")
    ap.add_argument("--drafts", default="2-8", help="numbers of drafts, e.g. 2-8 or 8 (default 2-8)")
    ap.add_argument("--pairs", default=None, help="folder for the lm-pairs files (default: a temporary one)")
    ap.add_argument("--only", default=None, help="run the configurations whose label contains this")
    ap.add_argument("--rows", default=None, help="positions to run, e.g. 3,17 (default all)")
    ap.add_argument("--json", default=None, help="write every row to this file")
    ap.add_argument("--root", default=str(ROOT), help="checkout to run (first on sys.path)")
    ap.add_argument("--slowest", type=int, default=10, help="slowest rows to print (10)")
    args = ap.parse_args()
    sys.path.insert(0, args.root)
    import mdtheory as md

    print(f"mdtheory from {Path(md.__file__).parent}; load average {os.getloadavg()[0]:.2f}")
    folder = Path(args.pairs) if args.pairs else Path(tempfile.mkdtemp(prefix="wor_rows_"))
    folder.mkdir(parents=True, exist_ok=True)
    configs = [c for c in CONFIGS if args.only is None or args.only in c[0]]
    sets = [(label, *pairs(label, options, args.positions, folder)) for label, options in configs]
    solve_row(sets[0][1][0], sets[0][2][0], 2)  # warm-up: compiled kernels, imports
    keep = None if args.rows is None else [int(r) for r in args.rows.split(",")]
    rows = []
    for label, P, Q in sets:
        for n in _drafts(args.drafts):
            for i in range(len(P)) if keep is None else keep:
                row = solve_row(P[i], Q[i], n)
                iid = float(md.alpha_star(P[i], Q[i], n))
                rows.append({"config": label, "position": i, "n": n, "iid": iid, **row})
            done = [r for r in rows if r["config"] == label and r["n"] == n]
            print(f"{label:18s} n = {n}: {sum(r['status'] == 'optimal' for r in done)}/{len(done)} "
                  f"proven, CPU max {max(r['cpu'] for r in done):.3f} s, "
                  f"total {sum(r['cpu'] for r in done):.2f} s", flush=True)
    print(f"\nslowest {args.slowest} rows (CPU seconds):")
    for r in sorted(rows, key=lambda r: -r["cpu"])[:args.slowest]:
        print(f"  {r['config']:18s} position {r['position']:3d} n = {r['n']}: {r['cpu']:.3f} s "
              f"{r['status']} {r.get('certificate', '')} alpha* {r['value']:.12g} (iid {r['iid']:.6g})")
    open_rows = [r for r in rows if r["status"] != "optimal"]
    print(f"\n{len(rows) - len(open_rows)} of {len(rows)} rows proven; over 1 s of CPU: "
          f"{sum(r['cpu'] > 1.0 for r in rows)}; total CPU {sum(r['cpu'] for r in rows):.1f} s; "
          f"load average {os.getloadavg()[0]:.2f}")
    for r in open_rows:
        print(f"  not proven: {r['config']} position {r['position']} n = {r['n']}: {r['status']} "
              f"{r.get('lower', '')} .. {r['value']:.12g} ({r['cpu']:.2f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
