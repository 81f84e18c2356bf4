"""alpha* for drafts without replacement: the one-pass prefix containment against the old path.

    .venv/bin/python benchmarks/bench_containment.py            # new path; old path where it is cheap
    .venv/bin/python benchmarks/bench_containment.py --before   # also the old successive-sampling
                                                                # path at V = 465 (about 1-2 min a row)

For each (V, n) in (465, 4), (465, 8), (32000, 8) and each model (successive sampling
``without-replacement``, ``conditional-poisson``) it times one row of alpha* by the sorted-prefix scan,

    alpha* = 1 - max(0, max_k [Q(T_k) - p(T_k)]),   T_k = the first k tokens by q/p decreasing,

with the one-pass prefix containment (:mod:`mdtheory.models.containment`, called directly) against the
generic ``DraftModel.prefix_containment`` (one per-set containment per prefix: the old path), minimum
of repeats in one process, and writes ``benchmarks/results/containment.json`` with machine facts.
The successive-sampling rows also time ``optimal_acceptance(p, q, n, "without-replacement")``, the
front door, whose certificate recomputes Q of the cut with the per-set containment.
The pair (p, q) is ``bench_core.llm_pair``: Zipf-like target, perturbed tempered draft.

    .venv/bin/python benchmarks/bench_containment.py --mnp      # the passes of one optimal-rule run

``--mnp``: the orders whose prefix containments the optimal rule's preparation asks for
(``make_rule("optimal", p, q, 4, sampling=...)``, V = 1000, the pair "softmax T=1/0" of
``bench_draft_models.prep_pairs``), recorded at the models' ``prefix_containment``: how many are
repeats, how long a prefix each shares with the order before it and with
any earlier one; then the one-pass time per order on those orders for n = 4 and 8, and at
V = 32,000 on orders of the same kind (the gradient's order, slightly perturbed), minimum of
repeats, CPU time. Writes nothing.
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
from mdtheory.models.base import DraftModel
from mdtheory.models.containment import conditional_poisson_prefix_containment, successive_prefix_containment
from mdtheory.routes.subsets import prefix_order

sys.path.insert(0, str(Path(__file__).parent))
from bench_core import llm_pair  # noqa: E402

ROWS = [(465, 4), (465, 8), (32_000, 8)]
ONE_PASS = {"without-replacement": successive_prefix_containment,
            "conditional-poisson": conditional_poisson_prefix_containment}
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


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    differ = np.flatnonzero(a != b)
    return a.size if differ.size == 0 else int(differ[0])


def recorded_orders(sampling: str) -> tuple[np.ndarray, np.ndarray, list]:
    """(p, q, the orders asked of the model's prefix_containment) in one optimal-rule preparation."""
    from bench_draft_models import prep_pairs

    from mdtheory.rules import make_rule

    _, p, q, _ = [pair for pair in prep_pairs(1) if pair[0] == "softmax T=1/0"][0]
    cls = MODELS[sampling]
    asked, plain = [], cls.prefix_containment

    def recording(self, order):
        asked.append(np.array(order, dtype=np.int64))
        return plain(self, order)

    cls.prefix_containment = recording
    try:
        make_rule("optimal", p, q, 4, sampling=sampling)
    finally:
        cls.prefix_containment = plain
    return p, q, asked


def per_pass(fn, q, orders, n, repeats) -> float:
    fn(q, orders[0], n)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        for order in orders:
            fn(q, order, n)
        best = min(best, (time.process_time() - t0) / len(orders))
    return best


def mnp_passes(repeats: int) -> None:
    from bench_draft_models import tempered

    for sampling, fn in ONE_PASS.items():
        p, q, asked = recorded_orders(sampling)
        seen, repeat = set(), 0
        for order in asked:
            repeat += order.tobytes() in seen
            seen.add(order.tobytes())
        prev = [common_prefix(asked[i], asked[i - 1]) for i in range(1, len(asked))]
        best = [max(common_prefix(asked[i], asked[j]) for j in range(i)) for i in range(1, len(asked))]
        print(f"{sampling}, V = {q.size}: {len(asked)} orders asked, {repeat} repeats; common prefix "
              f"with the previous order: mean {np.mean(prev):.1f} tokens (median {np.median(prev):.0f}); "
              f"with the best earlier one: mean {np.mean(best):.1f}", flush=True)
        sample = asked[:: max(1, len(asked) // 60)]
        for n in (4, 8):
            print(f"  one pass, V = {q.size}, n = {n}: {1e3 * per_pass(fn, q, sample, n, repeats):.3f} ms",
                  flush=True)
    V = 32_000
    rng = np.random.default_rng(1000)
    z = 2.5 * rng.standard_normal(V)
    zq = z + 0.8 * rng.standard_normal(V)
    p, q = tempered(np.exp(z - z.max()), 1.0), tempered(np.exp(zq - zq.max()), 1.0)
    grad = q - p
    orders = [np.argsort(grad + 1e-4 * np.abs(grad).max() * rng.standard_normal(V))[::-1].copy()
              for _ in range(4)]
    for sampling, fn in ONE_PASS.items():
        for n in (4, 8):
            print(f"  {sampling}, one pass, V = {V}, n = {n}: "
                  f"{1e3 * per_pass(fn, q, orders, n, max(1, repeats // 2)):.2f} ms", flush=True)


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
    ap.add_argument("--mnp", action="store_true", help="only the passes of one optimal-rule run")
    args = ap.parse_args()
    if args.mnp:
        mnp_passes(args.repeats)
        return
    rows = []
    for V, n in ROWS:
        p, q = llm_pair(V)
        order = prefix_order(p, q)
        for name, cls in MODELS.items():
            model = cls(q, n)
            fn = ONE_PASS[name]
            fn(q, order, n)  # numba's first-call load, untimed
            t_new, new = best_time(
                lambda fn=fn, p=p, q=q, n=n, order=order: alpha_by_prefix(p, order, fn(q, order, n)),
                args.repeats)
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
