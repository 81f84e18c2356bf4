"""Gumbel-max list sampling against alpha*, SpecTr's k-seq and SpecInfer's rrs, and the list matching
lemma's bound against GLS's exact acceptance: the tables of papers/rowan2025.md.

Pairs: the bundled example (examples/p.npy, q.npy); random pairs on 10 tokens (p and q from
Dirichlet(1); the paper's toy experiment has 10 tokens); LLM-like pairs (mdtheory/_synthetic.py,
V = 1,000, the harness's and the serving drafts); the pretrained char-LSTM (V = 465) at target temperature 1.0
with the drafter at temperature 1.2, and with the distilled 3-gram (the rows `mdtheory lm-pairs`
writes). Every acceptance is exact (closed forms; GLS by its one-dimensional integral), alpha* is
proven by the certifier.

    python benchmarks/bench_gls.py [--positions 64] [--seed 0] [--drafts 2,4,8]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import mdtheory as md
from mdtheory._synthetic import HARNESS, SERVING, llm_pairs
from mdtheory.language.drafters import CHAR_LSTM, lm_pairs, load_drafter, load_model
from mdtheory.rules import make_rule

ROOT = Path(__file__).resolve().parents[1]
RULES = ("gls", "k-seq", "rrs")


def families(positions: int, seed: int):
    """(name, P, Q) of every family of pairs."""
    yield "bundled example (V = 50)", np.load(ROOT / "examples/p.npy")[None], \
        np.load(ROOT / "examples/q.npy")[None]
    rng = np.random.default_rng(seed)
    yield "random, Dirichlet(1) (V = 10)", rng.dirichlet(np.ones(10), positions), \
        rng.dirichlet(np.ones(10), positions)
    for label, (noise, temperature) in (("harness", HARNESS), ("serving", SERVING)):
        P, Q = llm_pairs(np.random.default_rng(seed), positions, 1000, noise=noise,
                         temperature=temperature)
        yield f"LLM-like {label} (V = 1,000)", P, Q
    target = load_model(CHAR_LSTM, 1.0)
    for label, spec, temp in (("LSTM T = 1.2", "tempered", 1.2), ("3-gram", "ngram", None)):
        rng = np.random.default_rng(seed)
        drafter = load_drafter(spec, target, rng, temperature=temp)
        P, Q = lm_pairs(positions, target, drafter, rng)
        yield f"char-LSTM, {label} drafter (V = 465)", P, Q


def row(P: np.ndarray, Q: np.ndarray, n: int) -> dict:
    """Means over positions of alpha*, each rule's acceptance and the bound; the bound's worst gap."""
    out = {name: [] for name in ("alpha", *RULES, "bound")}
    for p, q in zip(P, Q, strict=True):
        out["alpha"].append(md.alpha_star(p, q, n))
        for name in RULES:
            rule = make_rule(name, p, q, n)
            out[name].append(rule.exact_acceptance())
            if name == "gls":
                out["bound"].append(rule.list_matching_bound())
    arr = {k: np.array(v) for k, v in out.items()}
    slack = arr["gls"] - arr["bound"]
    return {**{k: float(v.mean()) for k, v in arr.items()}, "slack_max": float(slack.max()),
            "slack_min": float(slack.min()), "beats_rrs": float(np.mean(arr["gls"] > arr["rrs"])),
            "beats_kseq": float(np.mean(arr["gls"] > arr["k-seq"]))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--positions", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--drafts", default="2,4,8")
    args = ap.parse_args()
    drafts = [int(v) for v in args.drafts.split(",")]
    t0 = time.perf_counter()
    print("| pairs | n | alpha* | gls | k-seq | rrs | gls / alpha* | LML bound | gls - bound (mean, max) "
          "| gls > rrs | gls > k-seq |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, P, Q in families(args.positions, args.seed):
        for n in drafts:
            r = row(P, Q, n)
            assert r["slack_min"] >= -1e-13, f"{name}, n = {n}: the bound exceeds GLS by {-r['slack_min']}"
            print(f"| {name} | {n} | {r['alpha']:.4f} | {r['gls']:.4f} | {r['k-seq']:.4f} | "
                  f"{r['rrs']:.4f} | {r['gls'] / r['alpha']:.3f} | {r['bound']:.4f} | "
                  f"{r['gls'] - r['bound']:.4f}, {r['slack_max']:.4f} | {r['beats_rrs']:.2f} | "
                  f"{r['beats_kseq']:.2f} |")
    print(f"{len(P)} positions per generated family, seed {args.seed}; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
