"""alpha* for drafts without replacement: the one-pass prefix containment against the old path (issue 13).

    .venv/bin/python benchmarks/bench_containment.py            # new path; old path where it is cheap
    .venv/bin/python benchmarks/bench_containment.py --before   # also the old successive-sampling
                                                                # path at V = 465 (about 1-2 min a row)

For each (V, n) in (465, 4), (465, 8), (32000, 8) and each model (successive sampling
``without-replacement``, ``conditional-poisson``) it times one row of alpha* by the sorted-prefix scan,

    alpha* = 1 - max(0, max_k [Q(T_k) - p(T_k)]),   T_k = the first k tokens by q/p decreasing,

with ``model.prefix_containment`` (the new one-pass code, :mod:`mdtheory.containment`) against the
generic ``DraftModel.prefix_containment`` (one per-set containment per prefix: the old path), minimum
of repeats in one process, and writes ``benchmarks/results/containment.json`` with machine facts.
The successive-sampling rows also time ``optimal_acceptance(p, q, n, "without-replacement")``, the
front door, whose certificate recomputes Q of the cut with the per-set containment.
The pair (p, q) is ``bench_core.llm_pair``: Zipf-like target, perturbed tempered draft.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

import mdtheory as md
from mdtheory.drafts import DraftModel
from mdtheory.subsets import prefix_order

sys.path.insert(0, str(Path(__file__).parent))
from bench_core import llm_pair  # noqa: E402

ROWS = [(465, 4), (465, 8), (32_000, 8)]
MODELS = {"without-replacement": md.WithoutReplacement, "conditional-poisson": md.ConditionalPoisson}


def best_time(fn, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def alpha_by_prefix(p, order, contained) -> float:
    return 1.0 - max(float(np.max(contained - np.cumsum(p[order]))), 0.0)


def machine() -> dict:
    import numba

    return {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
            "machine": platform.machine(), "processor": platform.processor(),
            "cpus": os.cpu_count(), "load_average": os.getloadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", action="store_true",
                    help="also time the old successive-sampling path at V = 465 (minutes)")
    ap.add_argument("--front-door", action="store_true",
                    help="also time optimal_acceptance at V = 32,000 (its certificate's per-set "
                         "quadrature takes minutes there)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rows = []
    for V, n in ROWS:
        p, q = llm_pair(V)
        order = prefix_order(p, q)
        for name, cls in MODELS.items():
            model = cls(q, n)
            model.prefix_containment(order)  # numba's first-call load, untimed
            t_new, new = best_time(
                lambda model=model, p=p, order=order: alpha_by_prefix(
                    p, order, model.prefix_containment(order)), args.repeats)
            row = {"V": V, "n": n, "model": name, "alpha": new, "new_ms": t_new * 1e3}
            old_cheap = name == "conditional-poisson" and V <= 465
            if old_cheap or (args.before and V <= 465):
                t_old, old = best_time(
                    lambda model=model, p=p, order=order: alpha_by_prefix(
                        p, order, DraftModel.prefix_containment(model, order)),
                    args.repeats if old_cheap else 1)
                row.update(old_ms=t_old * 1e3, speedup=t_old / t_new, alpha_old=old,
                           alpha_diff=abs(old - new))
            if name == "without-replacement" and (V <= 465 or args.front_door):
                t_door, res = best_time(
                    lambda p=p, q=q, n=n, name=name: md.optimal_acceptance(p, q, n, name), 1)
                row.update(front_door_ms=t_door * 1e3, front_door_alpha=res.value)
            rows.append(row)
            extra = ""
            if "old_ms" in row:
                extra = (f"   old {row['old_ms']:10.1f} ms   speed-up {row['speedup']:8.0f}x   "
                         f"|alpha diff| {row['alpha_diff']:.1e}")
            if "front_door_ms" in row:
                extra += f"   optimal_acceptance {row['front_door_ms']:9.1f} ms"
            print(f"{name:20s} V = {V:6d} n = {n}: alpha* = {new:.12f}   new {t_new * 1e3:8.2f} ms"
                  + extra, flush=True)
    out = Path(__file__).parent / "results" / "containment.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"benchmark": "containment", "machine": machine(), "rows": rows},
                              indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
