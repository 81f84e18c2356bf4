"""The pretrained char-LSTM: forward-pass cost, bits per char, and alpha* on real pairs.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_lm.py [--positions N] [--seed S]

Prints (1) the forward pass's milliseconds per window, one window at a time and in batches of 256,
float32 and float64; (2) bits per char of the target and the drafters on a fixed paragraph; (3) for
each (target temperature, drafter) the mean alpha* over N positions of texts sampled from the target
(``mdtheory.language.drafters.lm_pairs``, the pairs ``mdtheory lm-pairs`` writes) for n = 1, 2, 4, 8 iid
drafts, and the share of positions where acceptance is exactly one. Writes no files.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import mdtheory as md
from mdtheory.language.drafters import LSTMLaw, lm_pairs, make_drafter
from mdtheory.language.lm import load_char_lstm

PARAGRAPH = (
    "The city council met on Tuesday night to discuss the new budget for the coming year. Several "
    "residents spoke about the need for better roads and more money for the public schools, while "
    "others asked the council to keep taxes low."
)
#: (target temperature, drafter kind, drafter keyword arguments, label)
CONFIGS = [
    (1.0, "tempered", {"temperature": 1.2}, "LSTM T=1.2"),
    (1.0, "tempered", {"temperature": 1.0, "top_k": 10}, "LSTM top-10"),
    (1.0, "quantized", {}, "LSTM int8"),
    (1.0, "ngram", {}, "3-gram"),
    (0.7, "tempered", {"temperature": 1.2}, "LSTM T=1.2"),
    (0.7, "quantized", {}, "LSTM int8"),
    (0.7, "ngram", {}, "3-gram"),
]
DRAFTS = (1, 2, 4, 8)


def ms_per_window(model, batch: int, repeats: int) -> float:
    ids = model.encode(PARAGRAPH * 3)
    windows = model.windows([ids[:t] for t in range(1, batch + 1)])
    model.logits(windows)  # warm-up
    t0 = time.perf_counter()
    for _ in range(repeats):
        model.logits(windows)
    return (time.perf_counter() - t0) / repeats / batch * 1e3


def alpha_table(P, Q) -> tuple[list[float], float]:
    """Mean alpha* over rows for each n, and the share of rows with acceptance one at n = 8."""
    means, ones = [], 0
    for n in DRAFTS:
        res = [md.optimal_acceptance(p, q, n) for p, q in zip(P, Q, strict=True)]
        means.append(float(np.mean([r.value for r in res])))
        ones = sum(r.acceptance_one for r in res)
    return means, ones / len(P)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--positions", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    model = load_char_lstm()

    print("forward pass, ms per window (window 40, V = 465)")
    for dtype in (np.float32, np.float64):
        m = model.with_dtype(dtype)
        print(f"  {np.dtype(dtype).name}: single {ms_per_window(m, 1, 50):.2f}   "
              f"batch 256 {ms_per_window(m, 256, 5):.3f}")

    rng = np.random.default_rng(args.seed)
    target = LSTMLaw(model, 1.0)
    print("\nbits per char on the fixed paragraph")
    print(f"  target (T = 1)  {model.bits_per_char(PARAGRAPH):.3f}")
    for kind in ("float16", "int8"):
        print(f"  {kind:15s} {model.quantized(kind).bits_per_char(PARAGRAPH):.3f}")
    ids = model.encode(PARAGRAPH)
    freq = np.bincount(ids) / ids.size
    print(f"  best unigram    {-np.log2(freq[ids]).mean():.3f}")

    print(f"\nmean alpha* over {args.positions} positions of target-sampled text (iid drafts)")
    print(f"{'target T':>8s}  {'drafter':12s} " + " ".join(f"{'n=' + str(n):>7s}" for n in DRAFTS)
          + "  share alpha*=1 (n=8)")
    for T, kind, kw, label in CONFIGS:
        target = LSTMLaw(model, T)
        drafter = make_drafter(kind, target, rng, **kw)
        P, Q = lm_pairs(args.positions, target, drafter, np.random.default_rng(args.seed))
        means, share = alpha_table(P, Q)
        print(f"{T:8.1f}  {label:12s} " + " ".join(f"{a:7.3f}" for a in means) + f"  {share:7.3f}")


if __name__ == "__main__":
    main()
