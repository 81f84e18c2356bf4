"""The language-model functions' size estimates against their measured time and memory.

``lm_pairs``, ``distill_ngram`` (and ``make_drafter``, which distils the n-gram) refuse work whose
estimate is over ``max_seconds`` / ``max_bytes`` before starting it. Here, on a small grid with the
bundled char-LSTM (V = 465), each case's estimate (what the function compares with its limits) is
printed beside the measured wall time (one run) and the peak of memory allocated through Python
and numpy during a second run (``tracemalloc``), with their ratios: an honest estimate is within a
factor of 10 either way (a refusal of work that would have fitted counts as a failure).

With ``--hf`` (needs the hf extra), two tiny random GPT-2 checkpoints (V = 2,000; d = 64 and 32;
two layers) are built into a temporary directory and, each case in a fresh process (torch's memory
is not traced: its peak is the process's resident set, ``ru_maxrss``), one ``laws`` call's peak
memory is set beside :meth:`~mdtheory.language.hf.HFModel.laws_bytes`, and ``block_efficiency``
(token by token with rrs, K = 4, L = 4) beside its estimate from the models' measured calls
(:func:`mdtheory.blocks.simulation.model_estimate`).

    python benchmarks/bench_lm_estimates.py
    python benchmarks/bench_lm_estimates.py --hf
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
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


#: Builds the two checkpoints into argv[1] (no download).
_HF_BUILD = """
import sys, torch, transformers
transformers.logging.set_verbosity_error()
for name, seed, width in (("target", 0, 64), ("draft", 1, 32)):
    torch.manual_seed(seed)
    transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=2000, n_positions=1024, n_embd=width, n_layer=2, n_head=2, bos_token_id=0,
        eos_token_id=0, pad_token_id=0)).save_pretrained(sys.argv[1] + "/" + name)
"""
#: One case in a fresh process: argv = [folder, kind, a, b]; prints a JSON row.
_HF_CASE = """
import json, resource, sys, time
import numpy as np, torch
torch.set_num_threads(1)
from mdtheory.language.hf import load_hf
folder, kind, a, b = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
T, D = load_hf("hf:" + folder + "/target"), load_hf("hf:" + folder + "/draft")
T.laws([(0,)] * 2)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.perf_counter()
if kind == "laws":
    est = T.laws_bytes(a, b), T.laws_seconds(a, b)
    t0 = time.perf_counter()
    T.laws([(0,) * b] * a)
else:
    from mdtheory.blocks import iid_drafts, simulation
    models = simulation.model_estimate(T, D, iid_drafts(4, 4), a)
    own = simulation.estimate("rrs", T.V, 4, 4, a, models.seconds)
    est = max(own.bytes, models.bytes), own.seconds
    t0 = time.perf_counter()
    simulation.block_efficiency(T, D, "rrs", 4, 4, a, np.random.default_rng(0), start=(0,), max_seconds=1e9)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
print(json.dumps([est[1], time.perf_counter() - t0, est[0], peak]))
"""


def hf_rows() -> list:
    rows = []
    root = str(Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([sys.executable, "-c", _HF_BUILD, folder], check=True, capture_output=True)
        cases = [("laws", B, L) for B, L in ((4, 100), (17, 300), (4, 1000), (17, 1000), (64, 100))]
        cases += [("block_efficiency", steps, 0) for steps in (40, 200)]
        for kind, a, b in cases:
            out = subprocess.run([sys.executable, "-c", _HF_CASE, folder, kind, str(a), str(b)],
                                 check=True, capture_output=True, text=True,
                                 env=dict(os.environ, PYTHONPATH=root))
            est_s, seconds, est_b, peak = json.loads(out.stdout.splitlines()[-1])
            what = (f"hf laws B={a} T={b}" if kind == "laws" else f"hf block_efficiency {a} steps")
            rows.append((what, _budget.Estimate(what, est_s, est_b), seconds, max(peak, 1.0)))
    return rows


def main() -> int:
    if "--hf" in sys.argv[1:]:
        return report(hf_rows())
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
    return report(rows)


def report(rows: list) -> int:
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
