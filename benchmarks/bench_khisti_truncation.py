"""khisti-lp's truncation on real pairs: fixed s against the nucleus default.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_khisti_truncation.py [--positions N]

Pairs: the pretrained char-LSTM (``mdtheory.lm``, V = 465) as target and each drafter of
``mdtheory.drafters``, at N positions of texts sampled from the target (``lm_pairs``, seed 0). For each
truncation (s = 5, 10, 20; "nucleus": s = the union of the top-0.95 nuclei of p and q, no guard;
"default": the same with the default's guard, which falls back to the first draft where the
tournament is below single-draft) and each
number of drafts n, prints the mean exact acceptance of ``khisti-lp`` (its closed form
sum_y min(p, mu)), the number of positions where it falls below single-draft speculative sampling
(1 - TV(p, q), by more than 1e-9), the worst shortfall, the mean alpha*, the mean truncation size and
the number of positions where the default's guard fell back to the first draft, and the mean
preparation time. Writes no files.
"""

from __future__ import annotations

import argparse

import numpy as np

import mdtheory as md
from mdtheory.drafters import LSTMLaw, lm_pairs, make_drafter
from mdtheory.lm import load_char_lstm
from mdtheory.rules import make_rule
from mdtheory.rules.khisti import nucleus_truncation

CONFIGS = [  # (target temperature, drafter kind, drafter keyword arguments, label)
    (1.0, "ngram", {}, "3-gram"),
    (1.0, "tempered", {"temperature": 1.2}, "LSTM T=1.2"),
    (1.0, "quantized", {}, "LSTM int8"),
    (0.7, "ngram", {}, "3-gram"),
]
TRUNCATIONS = [5, 10, 20, "nucleus", None]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--positions", type=int, default=80)
    ap.add_argument("--drafts", default="2,4,8")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    model = load_char_lstm()
    make_rule("khisti-lp", [0.5, 0.5], [0.5, 0.5], 2)  # warm-up
    print(f"{'target':>6s} {'drafter':11s} {'n':>2s} {'s':>8s} {'accept':>7s} {'below':>6s} "
          f"{'worst':>7s} {'alpha*':>7s} {'single':>7s} {'mean s':>7s} {'ms':>6s}")
    for T, kind, kw, label in CONFIGS:
        rng = np.random.default_rng(args.seed)
        target = LSTMLaw(model, T)
        drafter = make_drafter(kind, target, rng, **kw)
        P, Q = lm_pairs(args.positions, target, drafter, np.random.default_rng(args.seed))
        single = 1 - 0.5 * np.abs(P - Q).sum(axis=1)
        for n in (int(x) for x in args.drafts.split(",")):
            alpha = np.array([md.alpha_star(p, q, n) for p, q in zip(P, Q, strict=True)])
            for s in TRUNCATIONS:
                rules = [make_rule("khisti-lp", p, q, n,
                                   s=nucleus_truncation(p, q) if s == "nucleus" else s)
                         for p, q in zip(P, Q, strict=True)]
                acc = np.array([r.exact_acceptance() for r in rules])
                short = single - acc
                print(f"{T:6.1f} {label:11s} {n:2d} {('default' if s is None else str(s)):>8s} "
                      f"{acc.mean():7.4f} {int((short > 1e-9).sum()):6d} {max(short.max(), 0):7.4f} "
                      f"{alpha.mean():7.4f} {single.mean():7.4f} "
                      f"{np.mean([r.s for r in rules]):7.1f} "
                      f"{sum(getattr(r, 'fallback', False) for r in rules):8d} "
                      f"{1e3 * np.mean([r.prepare_seconds for r in rules]):6.2f}", flush=True)


if __name__ == "__main__":
    main()
