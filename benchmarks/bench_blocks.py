"""The exact optimum of block verification, the upper bound, and the verifiers against both.

    .venv/bin/python benchmarks/bench_blocks.py optimum     # optimum / bound table, LP sizes and times
    .venv/bin/python benchmarks/bench_blocks.py verifiers   # exact E|B| of each verifier vs the optimum
    .venv/bin/python benchmarks/bench_blocks.py sizes       # LP times at the sizes the issue names
    .venv/bin/python benchmarks/bench_blocks.py lstm        # char-LSTM: bound vs measured verifiers

Instances: Sun et al.'s toy (V = 2, target (1/3, 2/3), draft (2/3, 1/3) at every context) and three
seeded context-dependent instances (V = 3, a Dirichlet(0.8) law per context, seeds 0, 1, 2;
:func:`mdtheory.blocks.markov.random_instance`). K iid drafts of L tokens. ``optimum`` runs the LP
under the library's default 60 s estimate (refusals are printed as such). Each section prints a
markdown table and writes its rows, with the machine facts, to ``benchmarks/results/blocks_<section>.json``.

``lstm``: the char-LSTM (textgenrnn, V = 465, temperature 1.0) as target, the distilled 3-gram at
temperature 1.2 as drafter (papers/real_lm.md's regime), contexts = positions 20, 30, ... of a text
sampled from the target (seed 1); per context and K the bound (1024 expanded nodes, its seconds) for
L = 1..4 from one tree, and the block efficiency at L = 4 of each verifier measured by --steps draws of
the drafts at that very context (mean and its standard error).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from functools import cache
from pathlib import Path

import numpy as np

import mdtheory as md
from mdtheory.blocks import (
    block_efficiency_bound,
    iid_drafts,
    make_verifier,
    random_instance,
    sun_toy,
)
from mdtheory.blocks.optimum import estimate, lp_size

RESULTS = Path(__file__).resolve().parent / "results"
INSTANCES = {"toy": sun_toy, **{f"rand{s}": (lambda s=s: random_instance(3, s, 0.8)) for s in range(3)}}
VERIFIERS = (("token:optimal", "token", {"rule": "optimal"}), ("block", "block", {}),
             ("multipath", "multipath", {}), ("traversal", "traversal", {}))


def _save(section: str, rows: list, **extra) -> None:
    RESULTS.mkdir(exist_ok=True)
    out = {"machine": platform.platform(), "cpus": os.cpu_count(), "load_average": os.getloadavg(),
           "rows": rows, **extra}
    (RESULTS / f"blocks_{section}.json").write_text(json.dumps(out, indent=1) + "\n")


def optimum(args) -> None:
    rows = []
    print("| instance | L | K | optimum E|B| | bound | alpha*-sum bound | LP variables | LP seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for name, make in INSTANCES.items():
        target, draft = make()
        V = target(()).size
        for L in (1, 2, 3):
            for K in (1, 2, 3, 4):
                bound = block_efficiency_bound(target, draft, n=K, length=L)
                row = {"instance": name, "V": V, "L": L, "K": K, "bound": bound.value,
                       "alpha_sum_bound": float(1 + bound.prefix_set.sum()),
                       "estimate_s": estimate(V, K, L).seconds, "size_bound": lp_size(V, K, L)}
                try:
                    res = md.optimal_block_efficiency(target, draft, n=K, length=L)
                except md.ProblemTooLargeError as e:
                    row.update(optimum=None, refused=str(e))
                    print(f"| {name} | {L} | {K} | refused (estimate {row['estimate_s']:.0f} s) | "
                          f"{bound.value:.4f} | {row['alpha_sum_bound']:.4f} | "
                          f"{row['size_bound']['variables']} (bound) | - |")
                    rows.append(row)
                    continue
                row.update(optimum=res.value, acceptance=res.acceptance.tolist(), lp=res.lp,
                           seconds=res.timings["total"], presolve=res.presolve,
                           certificate_gap=res.certificate_gap, validity_tv=res.validity_tv)
                rows.append(row)
                print(f"| {name} | {L} | {K} | {res.value:.4f} | {bound.value:.4f} | "
                      f"{row['alpha_sum_bound']:.4f} | {res.lp['variables']} | {res.timings['total']:.2f} |")
    solved = [r for r in rows if r["optimum"] is not None]
    slack = [r["bound"] - r["optimum"] for r in solved]
    slack_sum = [r["alpha_sum_bound"] - r["optimum"] for r in solved]
    print(f"\nbound slack: max {max(slack):.4f}, mean {np.mean(slack):.4f}; alpha*-sum slack: max "
          f"{max(slack_sum):.4f}, mean {np.mean(slack_sum):.4f} ({len(solved)} solved, "
          f"{len(rows) - len(solved)} refused)")
    _save("optimum", rows)


def verifiers(args) -> None:
    rows = []
    print("| instance | L | K | token:optimal | block | multipath | traversal | optimum | bound |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, make in INSTANCES.items():
        target, draft = make()
        V = target(()).size
        for L in (1, 2, 3):
            for K in (1, 2, 3, 4):
                if V ** (K * L) > args.max_tuples:
                    continue
                row = {"instance": name, "V": V, "L": L, "K": K,
                       "optimum": md.optimal_block_efficiency(target, draft, n=K, length=L,
                                                              max_seconds=600).value,
                       "bound": block_efficiency_bound(target, draft, n=K, length=L).value}
                for label, verifier, kw in VERIFIERS:
                    s = time.perf_counter()
                    row[label] = float(make_verifier(verifier, **kw).block_efficiency(target, draft, K, L))
                    row[label + "_s"] = time.perf_counter() - s
                rows.append(row)
                print(f"| {name} | {L} | {K} | " + " | ".join(f"{row[v[0]]:.4f}" for v in VERIFIERS)
                      + f" | {row['optimum']:.4f} | {row['bound']:.4f} |")
    _save("verifiers", rows, max_tuples=args.max_tuples)


def sizes(args) -> None:
    rows = []
    print("| V | L | K | multisets | variables | nonzeros | estimate s | seconds (min of 3) | presolve |")
    print("|---|---|---|---|---|---|---|---|---|")
    for V, L, K in ((3, 3, 3), (4, 2, 4), (4, 3, 2), (3, 3, 4)):
        target, draft = random_instance(V, 0, 0.8)
        runs = [md.optimal_block_efficiency(target, draft, n=K, length=L, max_seconds=600)
                for _ in range(1 if V ** L * K > 100 else 3)]
        best = min(r.timings["total"] for r in runs)
        r = runs[0]
        rows.append({"V": V, "L": L, "K": K, "lp": r.lp, "seconds": best, "value": r.value,
                     "estimate_s": estimate(V, K, L).seconds, "presolve": r.presolve, "runs": len(runs)})
        print(f"| {V} | {L} | {K} | {r.lp['multisets']} | {r.lp['variables']} | {r.lp['nonzeros']} | "
              f"{estimate(V, K, L).seconds:.1f} | {best:.2f} ({len(runs)} runs) | {r.presolve} |")
    _save("sizes", rows)


def lstm(args) -> None:
    from mdtheory.language.drafters import LSTMLaw, make_drafter, sample_texts
    from mdtheory.language.lm import META, load_char_lstm

    model = load_char_lstm()
    target = LSTMLaw(model, 1.0)
    drafter = make_drafter("ngram", target, np.random.default_rng([0, 1]), temperature=1.2)
    text = sample_texts(target, 1, 20 + 10 * args.contexts, np.random.default_rng(1), model.vocab[META])[0]
    rows = []
    measured = [v for v in VERIFIERS[:3] if v[0] in args.verifiers]
    print("| context | K | bound L=1 | L=2 | L=3 | L=4 | bound s | " +
          " | ".join(f"{v[0]} L=4" for v in measured) + " |")
    print("|---|---|---|---|---|---|---|" + "---|" * len(measured))
    for c in range(args.contexts):
        root = tuple(text[:20 + 10 * c].tolist())

        def relative(law, root=root):
            @cache
            def at(ctx):
                return law([np.array(root + ctx)])[0]
            return at

        T, D = relative(target), relative(drafter)
        for K in args.drafts:
            b = block_efficiency_bound(target, drafter, n=K, length=4, context=root,
                                       expansions=args.expansions)
            row = {"context": c, "K": K, "bound": [float(1 + b.acceptance[:L].sum()) for L in (1, 2, 3, 4)],
                   "bound_s": b.timings["total"], "expansions": b.expansions}
            rng = np.random.default_rng([c, K])
            for label, verifier, kw in measured:
                v = make_verifier(verifier, **kw)
                counts = [len(v.sample(T, D, iid_drafts(K, 4).sample(D, rng), rng))
                          for _ in range(args.steps)]
                row[label] = [float(np.mean(counts)), float(np.std(counts, ddof=1) / np.sqrt(len(counts)))]
            rows.append(row)
            print(f"| {c} | {K} | " + " | ".join(f"{x:.3f}" for x in row["bound"])
                  + f" | {b.timings['total']:.2f} | "
                  + " | ".join(f"{row[v[0]][0]:.3f} ± {row[v[0]][1]:.3f}" for v in measured) + " |")
    print("\nmeans over contexts (L = 4):")
    for K in args.drafts:
        sel = [r for r in rows if r["K"] == K]
        print(f"K = {K}: bound {np.mean([r['bound'][3] for r in sel]):.3f}, " + ", ".join(
            f"{v[0]} {np.mean([r[v[0]][0] for r in sel]):.3f}" for v in measured)
            + f"; bound seconds per context {np.mean([r['bound_s'] for r in sel]):.2f}")
    _save("lstm" + args.tag, rows, steps=args.steps, expansions=args.expansions, drafter="ngram T=1.2",
          target="char-LSTM T=1.0")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("section", choices=("optimum", "verifiers", "sizes", "lstm"))
    ap.add_argument("--max-tuples", type=int, default=5000,
                    help="verifiers: skip sizes with more than this many ordered draft tuples V^(KL)")
    ap.add_argument("--contexts", type=int, default=6, help="lstm: contexts")
    ap.add_argument("--drafts", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4, 8],
                    help="lstm: comma list of K")
    ap.add_argument("--steps", type=int, default=200, help="lstm: draws of the drafts per context")
    ap.add_argument("--expansions", type=int, default=1024, help="lstm: tree nodes of the bound")
    ap.add_argument("--verifiers", type=lambda s: s.split(","), default=[v[0] for v in VERIFIERS[:3]],
                    help="lstm: comma list of the verifiers measured")
    ap.add_argument("--tag", default="", help="lstm: suffix of the results file")
    args = ap.parse_args()
    {"optimum": optimum, "verifiers": verifiers, "sizes": sizes, "lstm": lstm}[args.section](args)


if __name__ == "__main__":
    main()
