"""The exact optimum of block verification, the upper bound, and the verifiers against both.

    .venv/bin/python benchmarks/bench_blocks.py optimum     # optimum / bound table, LP sizes and times
    .venv/bin/python benchmarks/bench_blocks.py verifiers   # exact E|B| of each verifier vs the optimum
    .venv/bin/python benchmarks/bench_blocks.py sizes       # LP times at the sizes the issue names
    .venv/bin/python benchmarks/bench_blocks.py lstm        # char-LSTM: bound vs measured verifiers
    .venv/bin/python benchmarks/bench_blocks.py trees       # draft trees: optimum, traversal, bound
    .venv/bin/python benchmarks/bench_blocks.py bound-estimate  # the bound's cost vs its estimate
    .venv/bin/python benchmarks/bench_blocks.py lstm-trees  # char-LSTM: the bound for trees of 8 leaves
    .venv/bin/python benchmarks/bench_blocks.py sparse      # sparse laws: which solve proves each optimum

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


TREES = ((2, 2), (3, 1), (2, 1, 1), (4,))


def trees(args) -> None:
    """Draft trees: the exact tree optimum (prefix-set LP), traversal verification and token-level
    optimal verification on the same tree, the K-iid-drafts optimum with the same number of leaves,
    and the bound with the tree's cap."""
    from mdtheory.blocks import DraftTree

    rows = []
    print("| instance | tree | rule | tree optimum | traversal | token:optimal | K iid optimum | "
          "bound | bound slack | prefix sets | LP variables | LP s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, make in INSTANCES.items():
        target, draft = make()
        V = target(()).size
        for branching in TREES:
            for sampling in ("iid", "without-replacement"):
                tree = DraftTree(branching, sampling)
                row = {"instance": name, "V": V, "tree": list(branching), "sampling": sampling}
                if sampling == "without-replacement" and max(branching) > V:
                    row["refused"] = f"{max(branching)} children without replacement from V = {V}"
                    rows.append(row)
                    print(f"| {name} | {branching} | wor | - ({row['refused']}) |||||||||")
                    continue
                res = md.optimal_block_efficiency(target, draft, tree=tree)
                iid = md.optimal_block_efficiency(target, draft, n=tree.n, length=tree.length,
                                                  max_seconds=600)
                bound = block_efficiency_bound(target, draft, tree=tree)
                rule = "optimal"
                row.update(optimum=res.value, lp=res.lp, seconds=res.timings["total"],
                           certificate_gap=res.certificate_gap, validity_tv=res.validity_tv,
                           iid_optimum=iid.value, bound=bound.value, bound_exact=bound.presence_exact,
                           traversal=float(make_verifier("traversal", tree=tree).block_efficiency(
                               target, draft, tree.n, tree.length)),
                           token_optimal=float(make_verifier("token", rule=rule, tree=tree).block_efficiency(
                               target, draft, tree.n, tree.length)))
                rows.append(row)
                print(f"| {name} | {branching} | {sampling} | {res.value:.4f} | {row['traversal']:.4f} | "
                      f"{row['token_optimal']:.4f} | {iid.value:.4f} (K = {tree.n}) | {bound.value:.4f} | "
                      f"{bound.value - res.value:.4f} | {res.lp['multisets']} | {res.lp['variables']} | "
                      f"{res.timings['total']:.2f} |")
    solved = [r for r in rows if "optimum" in r]
    slack = [r["bound"] - r["optimum"] for r in solved]
    below = max(r["optimum"] - r["traversal"] for r in solved)
    print(f"\nbound slack over {len(solved)} trees: max {max(slack):.4f}, mean {np.mean(slack):.4f}; "
          f"traversal below the tree optimum by up to {below:.4f}"
          f"; the tree optimum above the K-iid optimum in "
          f"{sum(r['optimum'] > r['iid_optimum'] + 1e-9 for r in solved)} of {len(solved)}")
    _save("trees", rows)


def bound_estimate(args) -> None:
    """The bound's CPU time (its laws are constant: their rows cost a copy each) against its
    estimate, on a grid of V, L, expansions and laws (Dirichlet(1) spreads the mass: a shallow tree;
    Dirichlet(0.05) concentrates it: a deep one), for K = 4 iid drafts and two trees; peak memory by
    tracemalloc in a second run. Sizes estimated over 10 s or 1 GB are left out."""
    import tracemalloc

    from mdtheory.blocks import ConstantLaw, DraftTree
    from mdtheory.blocks.bound import estimate as bound_estimate_of

    rows = []
    print("| V | L | drafts | law | expansions | expanded | CPU s | estimate s | ratio | peak MB | "
          "estimate MB | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    shapes = [("K=4", {"n": 4}), ("tree 2x2 iid", {"tree": DraftTree((2, 2))}),
              ("tree 4x1 wor", {"tree": DraftTree((4, 1), "wor")})]
    for V in (2, 20, 465, 4000, 32000):
        for alpha in (1.0, 0.05):
            rng = np.random.default_rng(V)
            p, q = (ConstantLaw(rng.dirichlet(np.full(V, alpha))) for _ in range(2))
            for shape, kw in shapes:
                lengths = (1, 2, 4, 10**3, 10**6) if "n" in kw else (2,)
                for L in lengths:
                    kwargs = dict(kw, length=L) if "n" in kw else kw
                    tree = kw.get("tree")
                    for e in (16, 256, 1024):
                        est = bound_estimate_of(V, L if tree is None else tree.length, e, tree)
                        if est.seconds > 10 or est.bytes > 1e9:
                            continue
                        res = block_efficiency_bound(p, q, expansions=e, max_seconds=None, max_bytes=None,
                                                     **kwargs)
                        s = time.process_time()
                        res = block_efficiency_bound(p, q, expansions=e, max_seconds=None, max_bytes=None,
                                                     **kwargs)
                        t = time.process_time() - s
                        tracemalloc.start()
                        block_efficiency_bound(p, q, expansions=e, max_seconds=None, max_bytes=None, **kwargs)
                        peak = tracemalloc.get_traced_memory()[1]
                        tracemalloc.stop()
                        rows.append({"V": V, "L": res.length, "drafts": shape, "alpha": alpha,
                                     "expansions": e, "expanded": res.expansions, "seconds": t,
                                     "estimate_s": est.seconds, "peak_bytes": peak,
                                     "estimate_bytes": est.bytes})
                        print(f"| {V} | {res.length:.0e} | {shape} | Dir({alpha:g}) | {e} | "
                              f"{res.expansions} | {t:.4f} | {est.seconds:.4f} | "
                              f"{est.seconds / max(t, 1e-9):.2f} | "
                              f"{peak / 1e6:.1f} | {est.bytes / 1e6:.1f} | {est.bytes / peak:.2f} |",
                              flush=True)
    timed = [r for r in rows if max(r["seconds"], r["estimate_s"]) > 0.05]
    ratios = [r["estimate_s"] / r["seconds"] for r in timed]
    mem = [r["estimate_bytes"] / r["peak_bytes"] for r in rows]
    print(f"\nestimate / measured over {len(timed)} runs of over 0.05 s: seconds {min(ratios):.2f} .. "
          f"{max(ratios):.2f} (median {np.median(ratios):.2f}); bytes over {len(rows)} runs "
          f"{min(mem):.2f} .. {max(mem):.2f}; load average {os.getloadavg()[0]:.2f}")
    _save("bound_estimate", rows)


def sparse(args) -> None:
    """Sparse laws (Dirichlet(0.1): masses down to 1e-38): which solve proves each optimum (the primal
    LP by simplex or interior point, or the dual LP solved on its own) and which potentials bound it."""
    from collections import Counter

    from mdtheory.blocks import DraftTree

    cases = [(f"V={V} L={L} K={K}", V, {"n": K, "length": L}) for V, L, K in
             ((3, 3, 1), (4, 2, 1), (2, 3, 1), (3, 2, 2), (2, 3, 2), (4, 2, 2), (3, 2, 3))]
    cases += [(f"V=3 tree {b} {smp}", 3, {"tree": DraftTree(b, smp)}) for b, smp in
              (((2, 2), "iid"), ((2, 2), "without-replacement"), ((2, 1, 1), "without-replacement"),
               ((3, 1), "without-replacement"))]
    rows = []
    print("| instances (20 seeds each) | proven | plan: simplex / ipm / dual LP | bound: primal duals / "
          "dual LP | raised |")
    print("|---|---|---|---|---|")
    for label, V, kw in cases:
        plan, bound, raised = Counter(), Counter(), []
        for seed in range(20):
            target, draft = random_instance(V, seed, 0.1)
            try:
                res = md.optimal_block_efficiency(target, draft, **kw)
            except md.MdtheoryError as err:
                raised.append((seed, type(err).__name__))
                continue
            plan[res.plan_from] += 1
            bound[res.dual_from] += 1
        rows.append({"case": label, "plan": dict(plan), "bound": dict(bound), "raised": raised})
        print(f"| {label} | {sum(plan.values())} | {plan['simplex']} / {plan['ipm']} / {plan['dual LP']} | "
              f"{bound['primal duals']} / {bound['dual LP']} | {raised or '-'} |")
    _save("sparse", rows)


def lstm_trees(args) -> None:
    """The bound for draft trees of K = 8 leaves and L = 4 on the char-LSTM (the lstm section's target,
    drafter and contexts), 1024 expanded nodes per (context, tree)."""
    from mdtheory.blocks import DraftTree
    from mdtheory.language.drafters import LSTMLaw, make_drafter, sample_texts
    from mdtheory.language.lm import META, load_char_lstm

    model = load_char_lstm()
    target = LSTMLaw(model, 1.0)
    drafter = make_drafter("ngram", target, np.random.default_rng([0, 1]), temperature=1.2)
    text = sample_texts(target, 1, 20 + 10 * args.contexts, np.random.default_rng(1), model.vocab[META])[0]
    shapes = ((8, 1, 1, 1), (4, 2, 1, 1), (2, 2, 2, 1))
    trees = [DraftTree(b, s) for b in shapes for s in ("iid", "without-replacement")]
    rows = []
    print("| context | " + " | ".join(f"{t.branching} {t.sampling}" for t in trees) + " |")
    print("|---|" + "---|" * len(trees))
    for c in range(args.contexts):
        root = tuple(text[:20 + 10 * c].tolist())
        row = {"context": c}
        for tree in trees:
            b = block_efficiency_bound(target, drafter, tree=tree, context=root, expansions=args.expansions)
            row[repr(tree)] = {"bound": b.value, "exact_caps": b.presence_exact,
                               "seconds": b.timings["total"]}
        rows.append(row)
        print(f"| {c} | " + " | ".join(f"{row[repr(t)]['bound']:.3f}" for t in trees) + " |")
    means = [f"{t.branching} {t.sampling} {np.mean([r[repr(t)]['bound'] for r in rows]):.3f}" for t in trees]
    print("\nmeans: " + ", ".join(means))
    _save("lstm_trees", rows, expansions=args.expansions, drafter="ngram T=1.2", target="char-LSTM T=1.0")


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
    ap.add_argument("section", choices=("optimum", "verifiers", "sizes", "lstm", "trees", "bound-estimate",
                                               "lstm-trees", "sparse"))
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
    {"optimum": optimum, "verifiers": verifiers, "sizes": sizes, "lstm": lstm, "trees": trees,
     "bound-estimate": bound_estimate, "lstm-trees": lstm_trees, "sparse": sparse}[args.section](args)


if __name__ == "__main__":
    main()
