"""How much an interval that treats the target calls of one text as independent understates.

The block efficiency of ``mdtheory block-efficiency`` is the mean number of tokens per target call
along a text sampled from the char-LSTM target. Neighbouring calls see similar contexts, so their
counts are correlated and ``1.96 sd / sqrt(m)`` (the iid interval) is too narrow. This script runs R
independent texts of S calls each and compares, per verifier:

- ``spread``: the standard deviation of the R texts' means (the honest standard error of one text's
  mean, estimated from independent replicates);
- ``iid``: the mean over texts of ``sd / sqrt(S)`` within a text;
- ``batch``: the mean over texts of the batch-means standard error (:data:`mdtheory.blocks.simulation.BATCHES`
  batches) within a text.

``spread / iid`` is the factor by which the iid interval understates; ``spread / batch`` near 1 says
batch means repair it. ``acf`` is the same factor from the autocorrelation of the counts along the
texts, sqrt(1 + 2 (rho_1 + ... + rho_20)) (rho_k pooled over the texts), which needs no replicates.

Run:  OMP_NUM_THREADS=1 python benchmarks/block_intervals.py [--texts 24] [--calls 100] [-K 2] [-L 3]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from mdtheory.blocks import iid_drafts, make_verifier
from mdtheory.blocks import simulation as blockeff
from mdtheory.language.drafters import LSTMLaw
from mdtheory.language.lm import META, load_char_lstm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=24)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("-K", type=int, default=2)
    ap.add_argument("-L", type=int, default=3)
    ap.add_argument("--verifiers", default="token,multipath")
    ap.add_argument("--draft-temperature", type=float, default=1.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    model = load_char_lstm()
    target, drafter = LSTMLaw(model, 1.0), LSTMLaw(model, args.draft_temperature)
    start = (model.vocab[META],)
    rows = []
    for name in args.verifiers.split(","):
        t0 = time.perf_counter()
        res = blockeff.simulate(target, drafter, make_verifier(name), iid_drafts(args.K, args.L),
                                args.texts * args.calls, np.random.default_rng(args.seed),
                                replicates=args.texts, start=start)
        texts = res.counts.reshape(args.texts, args.calls).astype(float)
        spread = float(texts.mean(axis=1).std(ddof=1))
        iid = float(np.mean(texts.std(axis=1, ddof=1) / np.sqrt(args.calls)))
        b = blockeff.BATCHES
        batch_means = texts[:, : args.calls - args.calls % b].reshape(args.texts, b, -1).mean(axis=2)
        batch = float(np.mean(batch_means.std(axis=1, ddof=1) / np.sqrt(b)))
        centred = texts - texts.mean()
        var = float((centred ** 2).mean())
        lags = min(20, args.calls - 1)
        rho = [float((centred[:, :-k] * centred[:, k:]).mean()) / var for k in range(1, lags + 1)]
        acf = float(np.sqrt(max(1 + 2 * sum(rho), 0.0)))
        row = {"verifier": res.rule, "acf_factor": acf, "rho_1_to_5": rho[:5],
               "K": args.K, "L": args.L, "texts": args.texts, "calls": args.calls,
               "block_efficiency": float(res.counts.mean()), "spread": spread, "iid": iid,
               "batch": batch, "understatement_iid": spread / iid, "understatement_batch": spread / batch,
               "seconds": time.perf_counter() - t0}
        rows.append(row)
        print(f"{row['verifier']:10s} K={args.K} L={args.L} E|B|={row['block_efficiency']:.3f}  se: "
              f"replicates {spread:.4f}  iid {iid:.4f}  batch means {batch:.4f}  -> iid understates "
              f"x{spread / iid:.2f}, batch means x{spread / batch:.2f}; autocorrelation factor {acf:.2f}, "
              f"rho_1..3 {', '.join(f'{r:+.3f}' for r in rho[:3])}  ({row['seconds']:.0f} s)",
              flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
