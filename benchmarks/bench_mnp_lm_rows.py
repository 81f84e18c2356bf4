"""The minimum-norm-point route on real next-token laws where α* = 1: time and iterations per row.

The rows: the bundled char-LSTM (V = 465) at target temperature 0.7 and the same network at 1.0 as
the drafter, 27 positions of one text sampled with seed 0 (``mdtheory lm-pairs --positions 27
--target-temperature 0.7 --draft tempered --draft-temperature 1.0``); two drafts without
replacement, where α* = 1 (up to 1e-15) on every row. Each row runs
``optimal_acceptance(p, q, 2, "without-replacement", method="mnp", max_seconds=S)`` in this process
(the kernels compiled first) and prints its wall time, Wolfe iterations and status; then the total
and the largest. ``--root`` runs another checkout (first on ``sys.path``) for the before/after.

    python benchmarks/bench_mnp_lm_rows.py [--root /path/to/checkout] [--max-seconds 60]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(ROOT), help="checkout to run (first on sys.path)")
    ap.add_argument("--max-seconds", type=float, default=60.0, help="limit per row (default 60)")
    ap.add_argument("--rows", type=int, default=27, help="positions (default 27)")
    args = ap.parse_args()
    sys.path.insert(0, args.root)
    import mdtheory as md
    from mdtheory import _jit
    from mdtheory.errors import MdtheoryError

    try:
        from mdtheory.language import drafters
    except ImportError:  # a checkout from before the package layout
        from mdtheory import drafters
    _jit.use_compiled()
    print(f"mdtheory from {Path(md.__file__).parent}")
    target = drafters.load_model("char-lstm", 0.7)
    drafter = drafters.make_drafter("tempered", target, np.random.default_rng(0), temperature=1.0)
    P, Q = drafters.lm_pairs(args.rows, target, drafter, np.random.default_rng(0))
    md.optimal_acceptance(P[0], Q[0], 2, "without-replacement", method="mnp")  # compile
    times, iterations = [], []
    print(f"{'row':>4} {'seconds':>8} {'iterations':>10}  status")
    for i in range(len(P)):
        t0 = time.perf_counter()
        try:
            res = md.optimal_acceptance(P[i], Q[i], 2, "without-replacement", method="mnp",
                                        max_seconds=args.max_seconds)
            status, its = f"{res.status} {res.value:.15f}", res.iterations
        except MdtheoryError as exc:
            status, its = f"{type(exc).__name__}: {str(exc)[:90]}", -1
        times.append(time.perf_counter() - t0)
        iterations.append(its)
        print(f"{i:4d} {times[-1]:8.2f} {its:10d}  {status}", flush=True)
    print(f"total {sum(times):.1f} s, largest {max(times):.1f} s (row {int(np.argmax(times))}); "
          f"iterations {sum(i for i in iterations if i > 0)} in all, largest {max(iterations)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
