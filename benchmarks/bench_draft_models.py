"""alpha* under each draft model for the same (p, q, n), and the minimum-norm-point route.

    .venv/bin/python benchmarks/bench_draft_models.py          # all rows (a few minutes: successive
                                                               # sampling's mnp is seconds a row)
    .venv/bin/python benchmarks/bench_draft_models.py --quick  # the bundled example only

Part 1, the draft-model comparison: for the bundled example (``examples/p.npy``, ``examples/q.npy``)
and synthetic pairs (``bench_core.llm_pair``: Zipf-like target, perturbed tempered draft; and
Dirichlet(0.5) pairs), alpha* of n drafts under iid, successive sampling (``without-replacement``),
conditional Poisson and Hu et al.'s greedy set, each by the front door's default route, with its
status; successive sampling also by ``method="mnp"`` (an order-mixture certificate: the prefix
route's value is only an upper bound there). Independent drafts are the draft law at temperatures
0.7, 1.0, 1.4 and 2.0 (n = 4).

Part 2, timings of ``method="mnp"`` for independent drafts at V = 1000, n = 4 (the goal is
50 ms of preparation), five seeds of three families (llm_pair with tempered drafts; Dirichlet(0.5)
target and drafts; peaked softmax of Gaussian logits with a perturbed, tempered drafter): the base
alone, the optimal rule's preparation (``make_rule("optimal", ...)``, base and mixture),
iterations, corral size and the certificate's gap.

Part 3, losslessness at sizes beyond enumeration: the optimal rule's order mixture for independent
drafts (V = 200, n = 4) and for successive sampling (V = 100, n = 3, over 2,000 draft sets), 100,000
Monte Carlo steps each: acceptance against alpha* and a chi-square test of the output counts
against p.

Writes ``benchmarks/results/draft_models.json``.

    .venv/bin/python benchmarks/bench_draft_models.py --prep [--seeds 3] [--out /tmp/prep.json]

``--prep`` only: the optimal rule's preparation (``make_rule("optimal", p, q, 4, sampling=...)``) at
V = 1000, n = 4 for each draft model on a fixed set of pairs (:func:`prep_pairs`: llm_pair with
tempered drafts, Dirichlet(0.5), and softmax of Gaussian logits at target temperatures 0.5, 1 and
2, the drafter perturbed), with the minimum-norm point's iterations and corral size where the rule
uses it, the time of one vertex (a priority order's marginal) and the corral size times it: the
order mixture the solver closes with evaluates each of its orders once, so this is a floor on the
preparation of that mixture (not on every rule: another method might close with fewer orders);
written to ``--out`` if given (never to ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

import mdtheory as md
from mdtheory.language.logits import tempered
from mdtheory.models.vertices import model_vertex
from mdtheory.routes.mnp import min_norm_base
from mdtheory.rules import make_rule

sys.path.insert(0, str(Path(__file__).parent))
from bench_core import llm_pair  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("iid", "without-replacement", "conditional-poisson", "greedy")
TEMPERATURES = (0.7, 1.0, 1.4, 2.0)


def pairs(quick: bool):
    yield "examples (V = 50)", np.load(ROOT / "examples/p.npy"), np.load(ROOT / "examples/q.npy")
    if quick:
        return
    for V in (465, 1000):
        p, q = llm_pair(V)
        yield f"llm_pair V = {V}", p, q
    rng = np.random.default_rng(0)
    yield "dirichlet(0.5) V = 1000", rng.dirichlet(np.full(1000, 0.5)), rng.dirichlet(np.full(1000, 0.5))


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def compare(name: str, p: np.ndarray, q: np.ndarray, n: int = 4) -> dict:
    row = {"pair": name, "V": int(p.size), "n": n}
    for sampling in MODELS:
        res, t = timed(lambda s=sampling: md.optimal_acceptance(p, q, n, s))
        row[sampling] = {"alpha": res.value, "method": res.method, "status": res.status, "seconds": t}
    res, t = timed(lambda: md.optimal_acceptance(p, q, n, "without-replacement", method="mnp"))
    row["without-replacement mnp"] = {"alpha": res.value, "status": res.status,
                                      "gap": res.certificate_gap, "seconds": t}
    qs = np.array([tempered(q, t) for t in TEMPERATURES])
    res, t = timed(lambda: md.optimal_acceptance(p, qs, sampling="independent"))
    row["independent (T = 0.7, 1, 1.4, 2)"] = {"alpha": res.value, "method": res.method,
                                               "status": res.status, "seconds": t}
    return row


def timing_rows(seeds: int = 5) -> list[dict]:
    rows = []
    for seed in range(seeds):
        for kind in ("llm_pair", "dirichlet", "softmax"):
            rng = np.random.default_rng(seed)
            if kind == "llm_pair":
                p, q = llm_pair(1000, seed)
                qs = np.array([tempered(q, t) for t in TEMPERATURES])
            elif kind == "dirichlet":
                p, qs = rng.dirichlet(np.full(1000, 0.5)), rng.dirichlet(np.full(1000, 0.5), size=4)
            else:  # peaked: Gaussian logits of scale 2.5, the drafter's perturbed by 0.8, tempered
                z = 2.5 * rng.standard_normal(1000)
                zq = z + 0.8 * rng.standard_normal(1000)
                p = tempered(np.exp(z - z.max()), 1.0)
                qs = np.array([tempered(np.exp(zq - zq.max()), t) for t in (0.6, 0.8, 1.0, 1.3)])
            try:
                base, t_base = timed(lambda p=p, qs=qs: min_norm_base(p, md.Independent(qs)))
                rule = make_rule("optimal", p, qs, 4, sampling="independent")
                rows.append({"kind": kind, "seed": seed, "iterations": base.iterations,
                             "corral": int(base.weights.size), "gap": base.upper - base.lower,
                             "base_seconds": t_base, "prepare_seconds": rule.prepare_seconds})
            except md.MdtheoryError as exc:  # an open gap is a result too
                rows.append({"kind": kind, "seed": seed, "error": str(exc)})
    return rows


def chi_square_rows(steps: int = 100_000) -> list[dict]:
    from scipy import stats

    rng = np.random.default_rng(0)
    cases = {"independent": (rng.dirichlet(np.ones(200)), rng.dirichlet(np.ones(200), size=4), 4),
             "without-replacement": (rng.dirichlet(np.ones(100)), rng.dirichlet(np.ones(100)), 3)}
    rows = []
    for sampling, (p, q, n) in cases.items():
        rule = make_rule("optimal", p, q, n, sampling=sampling)
        mc = rule.monte_carlo(steps, rng)
        chi = stats.chisquare(mc["counts"], p * steps)
        rows.append({"sampling": sampling, "V": int(p.size), "n": n, "steps": steps,
                     "rule": "order mixture" if rule.mixture is not None else "plan",
                     "prepare_seconds": rule.prepare_seconds, "acceptance_mc": mc["acceptance"],
                     "ci95": list(mc["ci95"]), "acceptance_exact": rule.exact_acceptance(),
                     "alpha_star": md.optimal_acceptance(p, q, n, sampling, method="mnp").value,
                     "chi2_pvalue": float(chi.pvalue)})
    return rows


PREP_MODELS = ("independent", "without-replacement", "conditional-poisson", "greedy")


def prep_pairs(seeds: int, V: int = 1000):
    """(name, p, q, qs): q one draft law (V,), qs four independent drafts (4, V).

    llm_pair: the drafts q at temperatures 0.7, 1, 1.4, 2. Dirichlet(0.5): p and five independent
    laws. Softmax at temperature T: Gaussian logits z of scale 2.5, p = softmax(z / T), the
    drafter's logits z + 0.8 N(0, 1), q at temperature T and the drafts at T (0.6, 0.8, 1, 1.3).
    """
    for seed in range(seeds):
        p, q = llm_pair(V, seed)
        yield f"llm_pair/{seed}", p, q, np.array([tempered(q, t) for t in TEMPERATURES])
        rng = np.random.default_rng(seed)
        p, qs = rng.dirichlet(np.full(V, 0.5)), rng.dirichlet(np.full(V, 0.5), size=5)
        yield f"dirichlet(0.5)/{seed}", p, qs[4], qs[:4]
        for T in (0.5, 1.0, 2.0):
            rng = np.random.default_rng(1000 + seed)
            z = 2.5 * rng.standard_normal(V)
            zq = z + 0.8 * rng.standard_normal(V)
            p = tempered(np.exp(z - z.max()), T)
            qs = np.array([tempered(np.exp(zq - zq.max()), T * t) for t in (0.6, 0.8, 1.0, 1.3)])
            yield f"softmax T={T:g}/{seed}", p, tempered(np.exp(zq - zq.max()), T), qs


def vertex_ms(model, order, repeats: int = 5) -> float:
    """Best of ``repeats`` wall times (ms) of one vertex of the model (one priority order's
    marginal: one containment pass for successive sampling and conditional Poisson)."""
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        model_vertex(model, order)
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


def prep_rows(seeds: int) -> list[dict]:
    """The optimal rule's preparation per draft model and pair (V = 1000, n = 4)."""
    rows = []
    rng = np.random.default_rng(0)
    for sampling in PREP_MODELS:  # compile (or load) the numba kernels outside the timings
        q = rng.dirichlet(np.ones(30), size=4 if sampling == "independent" else None)
        make_rule("optimal", rng.dirichlet(np.ones(30)), q, 4, sampling=sampling)
    for name, p, q, qs in prep_pairs(seeds):
        for sampling in PREP_MODELS:
            drafts = qs if sampling == "independent" else q
            row = {"pair": name, "sampling": sampling}
            try:
                rule = make_rule("optimal", p, drafts, 4, sampling=sampling)
                row["prepare_ms"] = 1e3 * rule.prepare_seconds
                row["rule"] = "order mixture" if rule.mixture is not None else "plan"
                if rule.mixture is not None:  # the same solve again, for its counts
                    base = min_norm_base(p, rule.model)
                    row.update(iterations=base.iterations, corral=int(base.weights.size),
                               gap=base.upper - base.lower, alpha=base.upper,
                               vertex_ms=vertex_ms(rule.model, base.orders[0]))
                    # every order of the mixture is one vertex evaluation: a floor for this rule
                    row["floor_ms"] = row["corral"] * row["vertex_ms"]
                else:
                    row["alpha"] = rule.exact_acceptance()
            except md.MdtheoryError as exc:
                row["error"] = str(exc)
            rows.append(row)
            print(f"  {name:<18s} {sampling:<20s} " + (
                f"error: {row['error']}" if "error" in row else
                f"{row['prepare_ms']:9.1f} ms  {row['rule']:<13s} alpha {row['alpha']:.12f}"
                + (f"  {row['iterations']:5d} iterations, corral {row['corral']:4d}, vertex "
                   f"{row['vertex_ms']:.3f} ms, corral x vertex {row['floor_ms']:6.1f} ms"
                   if "iterations" in row else "")), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--prep", action="store_true", help="only the optimal rule's preparation")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per family (--prep)")
    parser.add_argument("--out", type=Path, help="JSON output of --prep")
    args = parser.parse_args()
    if args.prep:
        rows = prep_rows(args.seeds)
        for sampling in PREP_MODELS:
            ms = [r["prepare_ms"] for r in rows if r["sampling"] == sampling and "prepare_ms" in r]
            if ms:
                print(f"{sampling}: median {np.median(ms):.1f} ms, max {max(ms):.1f} ms, "
                      f"{sum(t <= 50 for t in ms)} of {len(ms)} within 50 ms")
        if args.out:
            args.out.write_text(json.dumps({"machine": platform.platform(), "rows": rows},
                                           indent=1) + "\n")
        return
    table = [compare(*pair) for pair in pairs(args.quick)]
    for row in table:
        print(f"{row['pair']}, n = {row['n']}")
        for key, val in row.items():
            if isinstance(val, dict):
                extra = f" gap {val['gap']:.1e}" if "gap" in val else ""
                print(f"  {key:<36s} alpha* = {val['alpha']:.9f}  {val.get('method', 'mnp'):<8s} "
                      f"{val['status']:<12s} {val['seconds']:7.3f} s{extra}")
    timing = [] if args.quick else timing_rows()
    for r in timing:
        if "error" in r:
            print(f"  mnp {r['kind']} seed {r['seed']}: {r['error']}")
        else:
            print(f"  mnp {r['kind']:<9s} seed {r['seed']}: {r['iterations']:5d} iterations, corral "
                  f"{r['corral']:4d}, gap {r['gap']:.1e}, base {1e3 * r['base_seconds']:7.1f} ms, "
                  f"rule preparation {1e3 * r['prepare_seconds']:7.1f} ms")
    chi = [] if args.quick else chi_square_rows()
    for r in chi:
        print(f"  {r['sampling']} V = {r['V']}, n = {r['n']} ({r['rule']}): Monte Carlo acceptance "
              f"{r['acceptance_mc']:.5f} [{r['ci95'][0]:.5f}, {r['ci95'][1]:.5f}], exact "
              f"{r['acceptance_exact']:.12f}, alpha* {r['alpha_star']:.12f}, chi-square p-value "
              f"{r['chi2_pvalue']:.3f} over {r['steps']} steps")
    out = {"machine": {"python": platform.python_version(), "platform": platform.platform(),
                       "processor": platform.processor()},
           "comparison": table, "mnp_timings_V1000_n4": timing, "lossless_monte_carlo": chi}
    if not args.quick:
        path = ROOT / "benchmarks/results/draft_models.json"
        path.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
