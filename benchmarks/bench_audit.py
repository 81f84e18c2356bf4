"""Audit benchmark: default-run time at V <= 50, power, false-rejection rate, exact TVs.

    .venv/bin/python benchmarks/bench_audit.py [--seeds 40]

1. Time of a default ``mdtheory.audit`` run (the sample size that detects TV 0.02 with probability
   0.9) of the example verifiers on examples/p.npy, q.npy (V = 50), n = 4 iid drafts; the process's
   first audit is preceded by an untimed warm-up (imports, numba kernels).
2. Power at the default size against the worst shape of deviation (r = p(1 + e) on the likelier
   half of p's mass, p(1 - e') on the rest, TV exactly 0.02): multinomial draws of the output counts
   (2,000 seeds), and end to end with a "verifier" that outputs draws of r (--seeds runs).
3. False-rejection rate at level 0.01: multinomial draws from p (20,000 seeds), and end to end with
   the RRS example at 500 samples (--seeds x 5 runs).
4. Exact TV and acceptance of every example (exact mode, p = (.2, .4, .4), q = (.6, .3, .1), n = 2,
   and examples/p.npy, q.npy with n = 2).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import mdtheory as md
from mdtheory.audit.statistics import DEFAULT_LEVEL, law_test, samples_for
from mdtheory.audit.verifier import load_target

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "verifiers"


def worst_deviation(p, tv):
    order = np.argsort(-p)
    plus = np.zeros(p.size, dtype=bool)
    plus[order[np.cumsum(p[order]) <= 0.5 + 1e-12]] = True
    r = p.copy()
    r[plus] *= 1 + tv / p[plus].sum()
    r[~plus] *= 1 - tv / p[~plus].sum()
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seeds", type=int, default=40, help="end-to-end runs per measurement")
    args = ap.parse_args()
    p, q = np.load(ROOT / "examples" / "p.npy"), np.load(ROOT / "examples" / "q.npy")
    p3, q3 = np.array([0.2, 0.4, 0.4]), np.array([0.6, 0.3, 0.1])

    md.audit(load_target(f"{EX}/rrs.py:verify"), p3, q3, 2, samples=100)  # warm-up
    print(f"1. default run, V = {p.size}, n = 4 iid drafts, level {DEFAULT_LEVEL}")
    print(f"   {'verifier':<28s} {'samples':>8s} {'seconds':>8s} {'p-value':>8s} {'tv_upper':>8s} "
          f"{'accept':>7s} {'alpha*':>7s}")
    targets = [("rrs.py:verify", {}), ("kseq.py:verify", {}), ("optimal.py:verify", {}),
               ("rrs_skip_repeat.py:verify", {})]
    try:
        import torch  # noqa: F401
        targets += [("torch_rrs.py:verify", {"torch": True})]
    except ImportError:
        print("   (torch not installed: the torch form is skipped)")
    for spec, kw in targets:
        f = load_target(f"{EX}/{spec}")
        t0 = time.perf_counter()
        r = md.audit(f, p, q, 4, **kw)
        secs = time.perf_counter() - t0
        print(f"   {spec:<28s} {r.samples:8d} {secs:8.2f} {r.pvalue:8.3g} {r.tv_upper:8.4f} "
              f"{r.acceptance:7.4f} {r.alpha_star:7.4f}")

    rng = np.random.default_rng(0)
    print("2. power against the worst shape of deviation, TV = 0.02, at the default size")
    for name, pp in (("examples/p.npy", p), ("uniform, V = 50", np.full(50, 0.02)),
                     ("(.2, .4, .4)", p3)):
        n = samples_for(0.02, pp)
        r = worst_deviation(pp, 0.02)
        power = np.mean([law_test(c, pp) < DEFAULT_LEVEL for c in rng.multinomial(n, r, 2000)])
        print(f"   {name:<18s} N = {n:6d}: multinomial power {power:.3f} (2,000 seeds)", end="")
        if pp is p:
            def emit(p_, q_, drafts, g, _r=r):
                return int(g.choice(_r.size, p=_r))
            hits = sum(not md.audit(emit, pp, q, 4, seed=s).lossless for s in range(args.seeds))
            print(f"; end to end {hits}/{args.seeds}", end="")
        print()

    print(f"3. false-rejection rate at level {DEFAULT_LEVEL}")
    for name, pp in (("examples/p.npy", p), ("(.2, .4, .4)", p3)):
        n = samples_for(0.02, pp)
        frr = np.mean([law_test(c, pp) < DEFAULT_LEVEL for c in rng.multinomial(n, pp, 20_000)])
        print(f"   {name:<18s} N = {n:6d}: multinomial {frr:.4f} (20,000 seeds)")
    rrs = load_target(f"{EX}/rrs.py:verify")
    runs = 5 * args.seeds
    rejected = sum(not md.audit(rrs, p, q, 4, samples=500, seed=s).lossless for s in range(runs))
    print(f"   RRS example end to end, V = 50, 500 samples: {rejected}/{runs} rejected")

    print("4. exact mode: TV(output law, p) and acceptance, n = 2")
    for name in ("rrs", "optimal", "rrs_skip_repeat", "argmax_accept", "lenient_threshold",
                 "wrong_draft_law"):
        law = load_target(f"{EX}/{name}.py:law")
        a = md.audit(law, p3, q3, 2, exact=True)
        b = md.audit(law, p, q, 2, exact=True)
        print(f"   {name:<18s} p=(.2,.4,.4): TV {a.tv:.6f} acceptance {a.acceptance:.4f} "
              f"(alpha* {a.alpha_star:.4f}) | V = 50: TV {b.tv:.6f} acceptance {b.acceptance:.4f} "
              f"(alpha* {b.alpha_star:.4f}) [{b.seconds:.2f} s]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
