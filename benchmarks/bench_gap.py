"""Accuracy of the optimal rule at large V and n: the gap alpha* - sum_y min(p(y), mu(y)).

    .venv/bin/python benchmarks/bench_gap.py [--seeds 3] [--sizes 1000x2,32000x8]

For each size, pairs p, q = softmax of logits with standard deviation 2 at temperature 1,
one pair per seed. Columns (max over the seeds):

* ``base gap``: alpha* - sum min(p, mu*) for the lexicographically optimal base mu*
  (:func:`mdtheory.models.polymatroid.lex_optimal_base_iid`);
* ``rule gap``: alpha* - acceptance of the optimal rule, sum min(p, mu) with mu the exact marginal
  of its time schedule (:meth:`SelectionRule.closed_form_acceptance`);
* ``|rule gap|``: the same in absolute value (a negative gap would mean a marginal claimed too high);
* ``prefix err``: |float64 sorted-prefix route - reference|, the accuracy of the route itself.

alpha* is the sorted-prefix formula in extended precision (``fuzz_optimal.alpha_reference``).
Prints the table and writes it, with the machine facts, to ``benchmarks/results/gap.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
from pathlib import Path

import numba
import numpy as np
from fuzz_optimal import alpha_reference, softmax

import mdtheory as md
from mdtheory.rules import make_rule

SIZES = [(V, n) for V in (1000, 32_000, 128_000) for n in (2, 8, 128, 1024)]
RESULTS = Path(__file__).resolve().parent / "results" / "gap.json"


def measure(V: int, n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    p = softmax(2 * rng.standard_normal(V), 1.0)
    q = softmax(2 * rng.standard_normal(V), 1.0)
    alpha = alpha_reference(p, q, n)
    rule = make_rule("optimal", p, q, n, realise="windows")
    return {
        "alpha": alpha,
        "base_gap": alpha - math.fsum(np.minimum(p, rule.base.mu)),
        "rule_gap": alpha - math.fsum(np.minimum(p, rule.marginal)),
        "prefix_err": abs(md.optimal_acceptance(p, q, n, method="prefix").value - alpha),
        "prepare_s": rule.prepare_seconds,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--sizes", help="comma list like 1000x2,32000x8 (default: V in 1k, 32k, 128k "
                                    "by n in 2, 8, 128, 1024)")
    args = ap.parse_args()
    sizes = SIZES if not args.sizes else [tuple(map(int, s.split("x"))) for s in args.sizes.split(",")]
    make_rule("optimal", [0.5, 0.5], [0.25, 0.75], 2)  # load the kernels
    rows = []
    print(f"{'V':>7s} {'n':>5s} {'alpha* (seed 0)':>16s} {'base gap':>10s} {'rule gap':>10s} "
          f"{'|rule gap|':>10s} {'prefix err':>10s} {'prepare s':>9s}")
    for V, n in sizes:
        runs = [measure(V, n, seed) for seed in range(args.seeds)]
        row = {"V": V, "n": n, "seeds": args.seeds, "alpha_seed0": runs[0]["alpha"],
               "max_base_gap": max(r["base_gap"] for r in runs),
               "max_rule_gap": max(r["rule_gap"] for r in runs),
               "max_abs_rule_gap": max(abs(r["rule_gap"]) for r in runs),
               "max_prefix_err": max(r["prefix_err"] for r in runs),
               "max_prepare_s": max(r["prepare_s"] for r in runs)}
        rows.append(row)
        print(f"{V:>7d} {n:>5d} {row['alpha_seed0']:>16.12f} {row['max_base_gap']:>10.2e} "
              f"{row['max_rule_gap']:>10.2e} {row['max_abs_rule_gap']:>10.2e} "
              f"{row['max_prefix_err']:>10.2e} {row['max_prepare_s']:>9.3f}", flush=True)
    worst = max(r["max_abs_rule_gap"] for r in rows)
    print(f"max |rule gap| over the table: {worst:.3g}")
    facts = {"platform": platform.platform(), "machine": platform.machine(),
             "python": platform.python_version(), "numpy": np.__version__,
             "numba": numba.__version__, "longdouble_eps": float(np.finfo(np.longdouble).eps)}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": facts, "rows": rows, "max_abs_rule_gap": worst},
                                  indent=1) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
