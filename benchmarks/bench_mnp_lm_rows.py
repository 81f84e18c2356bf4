"""The minimum-norm-point route on real next-token laws where α* = 1: time and iterations per row.

The rows: the bundled char-LSTM (V = 465) at target temperature 0.7 and the same network at 1.0 as
the drafter, 27 positions of one text sampled with seed 0 (``mdtheory lm-pairs --positions 27
--target-temperature 0.7 --draft tempered --draft-temperature 1.0``); two drafts without
replacement, where α* = 1 (up to 1e-15) on every row. Each row runs the ``"mnp"`` route's
``min_norm_base(p, model, deadline=now + S, strict=False)`` in this process (the kernels compiled
first) and prints its wall time, Wolfe iterations and the gap between its proven bounds (closed:
at most ``MNP_TOL`` = 1e-12; the route accepts a stalled run up to 1e-9); then the totals.
``--root`` runs another checkout (first on ``sys.path``) for the before/after.

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
    from mdtheory.language import drafters
    from mdtheory.models.registry import make_draft_model
    from mdtheory.routes.mnp import MNP_TOL, min_norm_base

    _jit.use_compiled()
    print(f"mdtheory from {Path(md.__file__).parent}")
    target = drafters.load_model("char-lstm", 0.7)
    drafter = drafters.make_drafter("tempered", target, np.random.default_rng(0), temperature=1.0)
    P, Q = drafters.lm_pairs(args.rows, target, drafter, np.random.default_rng(0))
    models = [make_draft_model(q, 2, "without-replacement") for q in Q]
    min_norm_base(P[0], models[0], max_iter=3, strict=False)  # compile
    times, iterations, open_rows = [], [], 0
    print(f"{'row':>4} {'seconds':>8} {'iterations':>10} {'gap':>9}")
    for i in range(len(P)):
        t0 = time.perf_counter()
        base = min_norm_base(P[i], models[i], strict=False,
                             deadline=time.perf_counter() + args.max_seconds)
        times.append(time.perf_counter() - t0)
        iterations.append(base.iterations)
        gap = base.upper - base.lower
        open_rows += gap > MNP_TOL
        print(f"{i:4d} {times[-1]:8.2f} {base.iterations:10d} {gap:9.2e}", flush=True)
    print(f"total {sum(times):.1f} s, largest {max(times):.1f} s (row {int(np.argmax(times))}); "
          f"iterations {sum(iterations)} in all, largest {max(iterations)}; "
          f"{open_rows} of {len(P)} rows not closed to {MNP_TOL:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
