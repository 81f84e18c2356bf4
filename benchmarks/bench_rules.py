"""Selection-rule benchmark: preparation and sampling time per position, success, acceptance
and gap to alpha*, on synthetic LLM-like pairs. Prints a table; writes no files.

    .venv/bin/python benchmarks/bench_rules.py [--positions N] [--sizes 10x2,100x2,...]

Pairs: Zipf-like target logits over 32,000 tokens plus noise; the draft is the target perturbed and
tempered (T = 1.3); both are restricted to the draft's top-k tokens and renormalised, so V = k.
Success: the rule prepared without error (a ProblemTooLargeError or a solver error is a failure).
Acceptance is the rule's exact acceptance (closed form or the exact marginal of its plan); sampling
time is one verification step (rule.select) on drafts from the rule's draft model. Each rule is
prepared once on a small pair before the timed runs (numba loads or compiles its kernels on a
process's first call); that first call's time is printed at the end.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import mdtheory as md
from mdtheory._synthetic import SERVING, llm_pairs
from mdtheory.rules import make_rule

RULES = ["optimal", "gr-softmax", "khisti-lp", "k-seq", "rrs"]
SIZES = [(10, 2), (10, 4), (10, 5), (100, 2), (1000, 2), (1000, 8), (32000, 4)]


def llm_pair(k: int, rng: np.random.Generator, vocab: int = 32_000):
    """One LLM-like pair over 32,000 tokens restricted to the draft's top k
    (:func:`mdtheory._synthetic.llm_pairs`, the benchmarks' draft noise)."""
    (p,), (q,) = llm_pairs(rng, 1, vocab, noise=SERVING[0], temperature=SERVING[1], top_k=k)
    return p, q


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--positions", type=int, default=10, help="pairs per size (fewer at k >= 1000)")
    ap.add_argument("--steps", type=int, default=200, help="select() calls timed per position")
    ap.add_argument("--sizes", help="comma list like 10x2,100x2 (default: the benchmark's grid)")
    ap.add_argument("--rules", default=",".join(RULES))
    args = ap.parse_args()
    sizes = SIZES if not args.sizes else [tuple(map(int, s.split("x"))) for s in args.sizes.split(",")]
    rng = np.random.default_rng(0)
    first_call = {}
    for name in args.rules.split(","):
        t0 = time.perf_counter()
        make_rule(name, *llm_pair(10, np.random.default_rng(1)), 2)
        first_call[name] = time.perf_counter() - t0
    print(f"{'k':>6s} {'n':>2s} {'rule':<11s} {'success':>8s} {'prepare ms':>11s} "
          f"{'select us':>10s} {'acceptance':>11s} {'gap':>10s}")
    for k, n in sizes:
        positions = args.positions if k < 1000 else max(2, args.positions // 5)
        pairs = [llm_pair(k, rng) for _ in range(positions)]
        alphas = [md.alpha_star(p, q, n) for p, q in pairs]
        for name in args.rules.split(","):
            ok, prep, sel, acc, gaps = 0, [], [], [], []
            for (p, q), alpha in zip(pairs, alphas, strict=True):
                try:
                    t0 = time.perf_counter()
                    rule = make_rule(name, p, q, n)
                    prep.append(time.perf_counter() - t0)
                except md.MdtheoryError:
                    continue
                ok += 1
                a = rule.exact_acceptance()
                acc.append(a)
                gaps.append(alpha - a)
                drafts = rule.model.sample(rng, args.steps)
                t0 = time.perf_counter()
                for x in drafts:
                    rule.select(x, rng)
                sel.append((time.perf_counter() - t0) / args.steps)
            if ok:
                print(f"{k:6d} {n:2d} {name:<11s} {ok / positions:8.0%} {np.mean(prep) * 1e3:11.3f} "
                      f"{np.mean(sel) * 1e6:10.1f} {np.mean(acc):11.6f} {max(gaps):10.2e}")
            else:
                print(f"{k:6d} {n:2d} {name:<11s} {0:8.0%} {'-':>11s} {'-':>10s} {'-':>11s} {'-':>10s}")
    print("first call in this process (untimed warm-up, k = 10, n = 2): "
          + ", ".join(f"{name} {t * 1e3:.0f} ms" for name, t in first_call.items()))


if __name__ == "__main__":
    main()
