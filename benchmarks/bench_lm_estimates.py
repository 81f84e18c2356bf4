"""The language-model functions' size estimates against their measured time and memory.

``lm_pairs``, ``distill_ngram`` (and ``make_drafter``, which distils the n-gram) refuse work whose
estimate is over ``max_seconds`` / ``max_bytes`` before starting it. Here, on a small grid with the
bundled char-LSTM (V = 465), each case's estimate (what the function compares with its limits) is
printed beside the measured wall time (one run) and the peak of memory allocated through Python
and numpy during a second run (``tracemalloc``), with their ratios: an honest estimate is within a
factor of 10 either way (a refusal of work that would have fitted counts as a failure).

    python benchmarks/bench_lm_estimates.py
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mdtheory import _budget  # noqa: E402
from mdtheory.language import drafters  # noqa: E402


def measured(call) -> tuple[float, float]:
    """(wall seconds of one run, peak bytes traced during another)."""
    t0 = time.perf_counter()
    call()
    seconds = time.perf_counter() - t0
    tracemalloc.start()
    call()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak


def main() -> int:
    target = drafters.load_model("char-lstm", 1.0)
    hot = drafters.make_drafter("tempered", target, None, temperature=1.3)
    quantized = drafters.make_drafter("quantized", target, None)
    rows = []
    for positions, drafter, name in ((16, hot, "tempered"), (256, hot, "tempered"),
                                     (2048, hot, "tempered"), (256, quantized, "quantized")):
        length = min(drafters.PAIRS_LENGTH, positions)
        streams = -(-positions // length)
        est = _budget.lm_pairs(positions, target.V, (target.step_seconds(streams)
                                                    + drafter.step_seconds(streams)) * length)
        seconds, peak = measured(lambda d=drafter, n=positions: drafters.lm_pairs(
            n, target, d, np.random.default_rng(0)))
        rows.append((f"lm_pairs {positions} positions, {name}", est, seconds, peak))
    for order, streams, length in ((1, 8, 100), (3, 8, 100), (6, 8, 100), (3, 16, 300),
                                   (3, 64, 300)):
        est = _budget.ngram_distillation(order, target.V, streams, length,
                                         len(drafters.NGRAM_STRENGTHS),
                                         target.step_seconds(streams) * length)
        seconds, peak = measured(lambda o=order, s=streams, t=length: drafters.distill_ngram(
            target, np.random.default_rng(0), o, s, t))
        rows.append((f"distill_ngram order {order}, {streams} x {length}", est, seconds, peak))
    print(f"{'case':<42} {'est s':>7} {'meas s':>7} {'ratio':>6} {'est MB':>8} {'meas MB':>8} "
          f"{'ratio':>6}")
    worst = 1.0
    for what, est, seconds, peak in rows:
        rt, rb = est.seconds / seconds, est.bytes / peak
        worst = max(worst, rt, 1 / rt, rb, 1 / rb)
        print(f"{what:<42} {est.seconds:7.2f} {seconds:7.2f} {rt:6.2f} {est.bytes / 2**20:8.1f} "
              f"{peak / 2**20:8.1f} {rb:6.2f}")
    print(f"largest factor between an estimate and its measurement: {worst:.1f} (goal <= 10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
