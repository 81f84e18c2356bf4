"""khisti-lp's truncation on real pairs: fixed s (the paper's program, sort-free) against the default.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_khisti_truncation.py [--positions N]
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_khisti_truncation.py --speed
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_khisti_truncation.py --sizes 8,16,32,45,64

``--speed``: the default's numpy preparation at V = 32,000, n = 4 (LLM-like pairs) against one
``np.argsort`` of p, minima of 40 interleaved repeats, and nothing else.

``--sizes``: for every pair set below, the bundled example pair (examples/p.npy, q.npy) and each n,
the mean acceptance of the rule at each fixed truncation s (with the default's guard: never below
single-draft) and of the default (:func:`mdtheory.rules.khisti.default_size`); then each s's costs:
the numpy preparation at V = 32,000, n = 4 against one ``np.argsort`` (minima of 40 interleaved
repeats), and the torch rule's positions per second on the CPU, one thread, B = 256, V = 1,000,
n = 4 (prepare + one step, minimum of 3), with one stage of the device's batched simplex for s <= 16.

Pairs: the pretrained char-LSTM (``mdtheory.language.lm``, V = 465) as target and each drafter of
``mdtheory.language.drafters``, at N positions of texts sampled from the target (``lm_pairs``, seed 0), and
LLM-like pairs (``mdtheory._synthetic.llm_pairs``, V = 1000). For each truncation ("5 rank": the
paper's s = 5 program as the third-party reading has it, pairs outside the top ranked by a full sort;
"5", "10", "20": the sort-free stage, pairs outside settled by bucketed keys; "nucleus": s = the union
of the top-0.95 nuclei of p and q, sort-free, no guard; "default": s = ``default_size(V)``, with the
guard, which falls back to the first draft where the tournament is below single-draft) and each number
of drafts n, prints the mean exact acceptance of ``khisti-lp`` (its closed form sum_y min(p, mu)), the
number of positions where it falls below single-draft speculative sampling (1 - TV(p, q), by more than
1e-9), the worst shortfall, the mean alpha*, the mean single-draft acceptance, the mean truncation size,
the number of positions where the default's guard fell back to the first draft, and the mean
preparation time. Writes no files.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import mdtheory as md
from mdtheory._synthetic import llm_pairs
from mdtheory.language.drafters import LSTMLaw, lm_pairs, make_drafter
from mdtheory.language.lm import load_char_lstm
from mdtheory.rules import make_rule
from mdtheory.rules.khisti import nucleus_truncation

CONFIGS = [  # (target temperature, drafter kind, drafter keyword arguments, label)
    (1.0, "ngram", {}, "3-gram"),
    (1.0, "tempered", {"temperature": 1.2}, "LSTM T=1.2"),
    (1.0, "quantized", {}, "LSTM int8"),
    (0.7, "ngram", {}, "3-gram"),
]
TRUNCATIONS = [(5, "rank"), (5, "bucket"), (10, "bucket"), (20, "bucket"), ("nucleus", "bucket"),
               (None, "bucket")]


def speed() -> None:
    P, Q = llm_pairs(np.random.default_rng(0), 4, 32_000)
    make_rule("khisti-lp", P[0], Q[0], 4)  # warm-up (numba)
    sort, prep = [], []
    for i in range(40):
        p, q = P[i % 4], Q[i % 4]
        t = time.perf_counter()
        np.argsort(p)
        sort.append(time.perf_counter() - t)
        t = time.perf_counter()
        make_rule("khisti-lp", p, q, 4)
        prep.append(time.perf_counter() - t)
    print(f"V = 32000, n = 4: np.argsort {min(sort) * 1e3:.3f} ms, khisti-lp preparation "
          f"{min(prep) * 1e3:.3f} ms ({min(prep) / min(sort):.2f}x)")


def _pair_sets(positions: int, seed: int):
    """(label, P, Q) for each char-LSTM configuration, LLM-like pairs and the bundled example."""
    import pathlib

    model = load_char_lstm()
    for T, kind, kw, label in CONFIGS:
        target = LSTMLaw(model, T)
        drafter = make_drafter(kind, target, np.random.default_rng(seed), **kw)
        P, Q = lm_pairs(positions, target, drafter, np.random.default_rng(seed))
        yield f"T={T} {label}", P, Q
    yield "llm-like V=1000", *llm_pairs(np.random.default_rng(seed), positions, 1000)
    ex = pathlib.Path(__file__).resolve().parents[1] / "examples"
    yield "example p, q", np.load(ex / "p.npy")[None], np.load(ex / "q.npy")[None]


def sizes(values, positions: int, seed: int, drafts) -> None:
    """Acceptance and cost against the truncation s (papers/theory.md, "Default truncation and its
    guard")."""
    import torch

    from mdtheory import torch_bridge as tb
    from mdtheory.rules import khisti as K
    from mdtheory.torch_bridge.khisti import batched_max_flow

    make_rule("khisti-lp", [0.5, 0.5], [0.5, 0.5], 2)  # warm-up
    print(f"{'pairs':22s} {'n':>2s} " + " ".join(f"{'s = ' + str(c):>8s}" for c in values)
          + f" {'default':>8s} {'s':>3s} {'guard':>5s} {'single':>7s} {'alpha*':>7s}")
    for label, P, Q in _pair_sets(positions, seed):
        single = np.minimum(P, Q).sum(1)
        for n in drafts:
            cells = []
            for c in values:  # the fixed truncation with the default's guard
                acc = [make_rule("khisti-lp", p, q, n, s=c).exact_acceptance()
                       for p, q in zip(P, Q, strict=True)]
                cells.append(f"{np.maximum(acc, single).mean():8.4f}")
            rules = [make_rule("khisti-lp", p, q, n) for p, q in zip(P, Q, strict=True)]
            acc = np.array([r.exact_acceptance() for r in rules])
            assert (acc >= single - 1e-12).all()
            alpha = np.mean([md.alpha_star(p, q, n) for p, q in zip(P, Q, strict=True)])
            print(f"{label:22s} {n:2d} " + " ".join(cells) + f" {acc.mean():8.4f} {rules[0].s:3d} "
                  f"{sum(r.fallback for r in rules):5d} {single.mean():7.4f} {alpha:7.4f}  "
                  f"({len(P)} positions)", flush=True)
    P, Q = llm_pairs(np.random.default_rng(seed), 4, 32_000)
    for c in values:
        sort, prep = [], []
        for i in range(40):
            p, q = P[i % 4], Q[i % 4]
            t = time.perf_counter()
            np.argsort(p)
            sort.append(time.perf_counter() - t)
            t = time.perf_counter()
            make_rule("khisti-lp", p, q, 4, s=c)
            prep.append(time.perf_counter() - t)
        print(f"s = {c}: numpy preparation at V = 32000, n = 4: {min(prep) * 1e3:.3f} ms = "
              f"{min(prep) / min(sort):.2f}x one np.argsort ({min(sort) * 1e3:.3f} ms)", flush=True)
    torch.set_num_threads(1)
    Pt, Qt = (torch.as_tensor(x) for x in llm_pairs(np.random.default_rng(seed), 256, 1000))
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    for c in values:
        class Fixed(tb.TorchKhisti):
            s = c

        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            Fixed(Pt, Qt, 4).step(tb.sample_drafts(Qt, 4, gen), gen)
            best = min(best, time.perf_counter() - t)
        line = (f"s = {c}: torch CPU one thread, B = 256, V = 1000, n = 4: {256 / best:,.0f} positions/s "
                "(the numpy flow per row)")
        if c <= 16:  # the device's batched simplex on the same sizes (B = 256 random stages)
            a, b = K._pairs(c)
            d = torch.as_tensor(rng.dirichlet(np.ones(c + 1), 256)[:, :c] * 0.5)
            m = torch.as_tensor(rng.dirichlet(np.ones(a.size), 256) * 0.5)
            t = time.perf_counter()
            batched_max_flow(d, m, torch.as_tensor(a), torch.as_tensor(b))
            line += f"; one stage by the batched simplex: {(time.perf_counter() - t) * 1e3:,.0f} ms"
        print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--positions", type=int, default=80)
    ap.add_argument("--drafts", default="2,4,8")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--speed", action="store_true", help="only the preparation time at V = 32000")
    ap.add_argument("--sizes", help="acceptance and cost at these truncations (e.g. 8,16,32,45,64)")
    args = ap.parse_args()
    if args.speed:
        speed()
        return
    if args.sizes:
        sizes([int(c) for c in args.sizes.split(",")], args.positions, args.seed,
              [int(x) for x in args.drafts.split(",")])
        return
    model = load_char_lstm()
    make_rule("khisti-lp", [0.5, 0.5], [0.5, 0.5], 2)  # warm-up
    print(f"{'target':>6s} {'drafter':11s} {'n':>2s} {'s':>8s} {'accept':>7s} {'below':>6s} "
          f"{'worst':>7s} {'alpha*':>7s} {'single':>7s} {'mean s':>7s} {'guard':>8s} {'ms':>6s}")
    for T, kind, kw, label in CONFIGS + [(None, "llm-like", {}, "llm-like")]:
        if T is None:
            P, Q = llm_pairs(np.random.default_rng(args.seed), args.positions, 1000)
            T = 1.0
        else:
            rng = np.random.default_rng(args.seed)
            target = LSTMLaw(model, T)
            drafter = make_drafter(kind, target, rng, **kw)
            P, Q = lm_pairs(args.positions, target, drafter, np.random.default_rng(args.seed))
        single = 1 - 0.5 * np.abs(P - Q).sum(axis=1)
        for n in (int(x) for x in args.drafts.split(",")):
            alpha = np.array([md.alpha_star(p, q, n) for p, q in zip(P, Q, strict=True)])
            for s, rest in TRUNCATIONS:
                if s == "nucleus" and label == "llm-like":  # s in the hundreds: an LP of 10^5 pairs
                    continue
                rules = [make_rule("khisti-lp", p, q, n, rest=rest,
                                   s=nucleus_truncation(p, q) if s == "nucleus" else s)
                         for p, q in zip(P, Q, strict=True)]
                acc = np.array([r.exact_acceptance() for r in rules])
                short = single - acc
                name = "default" if s is None else f"{s} rank" if rest == "rank" else str(s)
                print(f"{T:6.1f} {label:11s} {n:2d} {name:>8s} "
                      f"{acc.mean():7.4f} {int((short > 1e-9).sum()):6d} {max(short.max(), 0):7.4f} "
                      f"{alpha.mean():7.4f} {single.mean():7.4f} "
                      f"{np.mean([r.s for r in rules]):7.1f} "
                      f"{sum(getattr(r, 'fallback', False) for r in rules):8d} "
                      f"{1e3 * np.mean([r.prepare_seconds for r in rules]):6.2f}", flush=True)


if __name__ == "__main__":
    main()
