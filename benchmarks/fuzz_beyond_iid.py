"""Adversarial sweep of the optimal rule beyond iid drafts: no failure on valid input.

    PYTHONPATH=. .venv/bin/python benchmarks/fuzz_beyond_iid.py 0 1500        # about 8 min
    PYTHONPATH=. .venv/bin/python benchmarks/fuzz_beyond_iid.py 0 300 --no-equal

Seeded cases (:func:`case`): V = 100-300, n = 3-12, the three models of the minimum-norm-point
route by ``seed % 3`` (independent drafts, successive sampling, conditional Poisson); laws from
Dirichlet, softmax with rounded logits (exact ties), blocks of equal masses, masses spanning
1e-300..1, zeros and float32 rounding; draft rows sometimes equal to p, to the previous row or to
a permutation of p (``--no-equal``: never equal to p or a permutation of it; ``--near``: p perturbed
by a relative 1e-9..1e-3 or rounded through float32 instead of equal). Each case runs
``make_rule("optimal", ...)`` in a worker process with a time guard, and is counted as closed
(``ok``), built from the minimum-norm run's proven bounds (``fallback``:
:class:`~mdtheory.errors.OptimalityGapWarning`, the gap recorded) or an exception; every rule's
output law (its exact marginal, one speculative step) is compared with p.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
import warnings

import numpy as np

from mdtheory.rules import make_rule

MODELS = ("independent", "without-replacement", "conditional-poisson")
def _law(rng, V):
    """One adversarial law on V tokens (float64, sums to 1 up to float32 rounding)."""
    kind = rng.choice(["dirichlet", "softmax", "blocks", "span", "mixed"])
    if kind == "dirichlet":
        x = rng.dirichlet(np.full(V, 10.0 ** rng.uniform(-1.5, 0.5)))
    elif kind == "softmax":
        z = rng.standard_normal(V) * rng.uniform(1, 8)
        if rng.random() < 0.5:
            z = np.round(z)  # exact ties among logits
        x = np.exp(z - z.max())
    elif kind == "blocks":
        levels = 10.0 ** -rng.uniform(0, 300, int(rng.integers(2, 6)))
        x = rng.choice(levels, V)
    elif kind == "span":
        x = 10.0 ** -rng.uniform(0, 300, V)
    else:
        x = rng.dirichlet(np.full(V, 0.3))
        k = rng.random(V) < 0.3
        x[k] = 10.0 ** -rng.uniform(10, 300, k.sum())
        b = rng.random(V) < 0.2  # a block of equal masses
        x[b] = x[b][0] if b.any() else 0
    if rng.random() < 0.4:
        x[rng.random(V) < rng.uniform(0, 0.5)] = 0.0
    if not x.any():
        x[rng.integers(V)] = 1.0
    x = x / x.sum()
    if rng.random() < 0.5:
        y = x.astype(np.float32).astype(np.float64)
        if y.any():
            x = y
            if abs(x.sum() - 1) > 1e-7:
                x = x / x.sum()
    return x


def case(seed: int, no_equal: bool = False, near: bool = False):
    """(p, q, n, sampling, description); q is (n, V) for independent drafts, else (V,)."""
    rng = np.random.default_rng(seed)
    V = int(rng.integers(100, 301))
    n = int(rng.integers(3, 13))
    sampling = MODELS[seed % 3]
    p = _law(rng, V)
    rows = n if sampling == "independent" else 1
    q = np.empty((rows, V))
    for i in range(rows):
        r = rng.random()
        if no_equal and r < 0.4:
            q[i] = _law(rng, V)
        elif r < 0.15 and near:
            k = rng.integers(4)
            x = p.astype(np.float32).astype(np.float64) if k == 3 else \
                p * (1 + 10.0 ** -(3 * k + 3) * rng.random(V))
            q[i] = x / x.sum() if x.any() else p
        elif r < 0.15:
            q[i] = p  # exact ties between p and q
        elif r < 0.3 and i > 0:
            q[i] = q[i - 1]
        elif r < 0.4:
            q[i] = p[rng.permutation(V)]
        else:
            q[i] = _law(rng, V)
    if sampling != "independent":
        q = q[0]
        if np.count_nonzero(q) < n:  # these models need n tokens with q > 0
            z = np.flatnonzero(q == 0)[:n]
            q[z] = 1e-300
            q = q / q.sum()
    return p, q, n, sampling, f"seed={seed} V={V} n={n} {sampling}"


def _work(conn, no_equal: bool, near: bool) -> None:
    for _ in range(10**9):  # until the parent sends None
        seed = conn.recv()
        if seed is None:
            return
        p, q, n, sampling, _ = case(seed, no_equal, near)
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                rule = make_rule("optimal", p, q, n, sampling=sampling, normalize=True)
            lo, up = rule.alpha_bounds or (0.0, 0.0)  # None: not the order-mixture route
            acc = np.minimum(rule.p, rule.marginal)
            law = float(np.abs(acc + (1 - acc.sum()) * rule.res - rule.p).max())
            kinds = sorted({w.category.__name__ for w in caught})
            conn.send(("fallback" if "OptimalityGapWarning" in kinds else "ok", up - lo, law, kinds,
                       time.perf_counter() - t0))
        except Exception as exc:  # noqa: BLE001 - every exception on valid input is a finding
            conn.send((f"{type(exc).__name__}: {str(exc)[:160]}", None, None, [],
                       time.perf_counter() - t0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=int)
    parser.add_argument("stop", type=int)
    parser.add_argument("--budget", type=float, default=120.0, help="seconds a case")
    parser.add_argument("--no-equal", action="store_true")
    parser.add_argument("--near", action="store_true")
    args = parser.parse_args()
    ctx = mp.get_context("fork")

    def start():
        conn, child = ctx.Pipe()
        proc = ctx.Process(target=_work, args=(child, args.no_equal, args.near), daemon=True)
        proc.start()
        return conn, proc

    conn, proc = start()
    counts, gaps, laws, t0 = {}, [], [], time.perf_counter()
    for seed in range(args.first, args.stop):
        conn.send(seed)
        if conn.poll(args.budget):
            status, gap, law, kinds, dt = conn.recv()
        else:
            proc.kill()
            proc.join()
            conn, proc = start()
            status, gap, law, kinds, dt = f"timeout {args.budget:g} s", None, None, [], args.budget
        key = status if status in ("ok", "fallback") else "exception"
        counts[key] = counts.get(key, 0) + 1
        if key == "fallback":
            gaps.append(gap)
        if law is not None:
            laws.append(law)
        if key != "ok" or (kinds and kinds != ["OptimalityGapWarning"]):
            print(f"{case(seed, args.no_equal, args.near)[4]}: {status} gap {gap} law {law} "
                  f"warnings {kinds} ({dt:.1f} s)", flush=True)
    conn.send(None)
    proc.join(5)
    print(f"seeds [{args.first}, {args.stop}): {counts}; fallback gaps: max {max(gaps, default=0):.3g}, "
          f"median {np.median(gaps) if gaps else 0:.3g}; max |output law - p| "
          f"{max(laws, default=0):.3g}; wall {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
