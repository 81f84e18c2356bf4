"""Fuzz the block verifiers' two forms on random and tiny-probability laws.

For random instances (V 2-4, K 1-4, L 1-3; context-dependent target and draft laws drawn from a
mix of Dirichlet(1), Dirichlet(0.1), laws with masses down to 1e-300, p = q and p within 1e-12
of q) and draft arrays drawn from the draft model or uniformly over its support (so that arrays
of tiny draft probability are common), every verifier's ``.law`` is checked to

- sum to one within ``--tol`` (default 1e-9), with finite masses, none negative;
- put mass only on valid blocks (1..L+1 tokens, the first k a prefix of some draft);

and on every ``--chi-every``-th draft array ``.sample`` is drawn ``--draws`` times and its
frequencies tested against ``.law`` (the audits' Pearson test, :func:`mdtheory.audit.statistics.law_test`:
cells pooled until each expects 5 draws, rejected at p < ``--level``, default 1e-4: about one
false rejection in 10,000 tests).

Prints the counts per verifier and the first failures with their instances. Run against another
checkout to compare (verifiers it lacks are skipped):

    PYTHONPATH=. python benchmarks/fuzz_block_verifiers.py --cases 300 --seed 0
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

from mdtheory.audit.statistics import law_test
from mdtheory.blocks import iid_drafts, make_verifier
from mdtheory.blocks.verifiers import VERIFIERS

#: The selection rules a verifier that takes one (its ``takes_rule``) is fuzzed with.
FUZZ_RULES = ("rrs", "optimal")
KINDS = ("dirichlet1", "dirichlet0.1", "tiny", "equal", "near")


def _tiny_row(rng: np.random.Generator, V: int) -> np.ndarray:
    """A law with some masses far below float64's resolution next to 1 (1e-8 .. 1e-300)."""
    row = rng.dirichlet(np.full(V, 0.5))
    small = rng.random(V) < 0.5
    small[rng.integers(V)] = False  # one token keeps the bulk
    row[small] = 10.0 ** -rng.choice([8, 12, 30, 100, 300], size=int(small.sum()))
    big = ~small
    row[big] *= (1 - row[small].sum()) / row[big].sum()
    return row


class FuzzLaws:
    """A seeded pair (target, draft) of context-dependent laws of one kind."""

    def __init__(self, V: int, seed: int, kind: str):
        self.V, self.seed, self.kind = V, seed, kind
        self._cache: dict = {}

    def _pair(self, ctx: tuple) -> tuple[np.ndarray, np.ndarray]:
        got = self._cache.get(ctx)
        if got is None:
            rng = np.random.default_rng([self.seed, len(ctx), *ctx])
            V = self.V
            if self.kind == "dirichlet1":
                p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
            elif self.kind == "dirichlet0.1":
                p, q = rng.dirichlet(np.full(V, 0.1)), rng.dirichlet(np.full(V, 0.1))
            elif self.kind == "tiny":
                p, q = _tiny_row(rng, V), _tiny_row(rng, V)
            elif self.kind == "equal":
                p = _tiny_row(rng, V) if rng.random() < 0.5 else rng.dirichlet(np.ones(V))
                q = p.copy()
            else:  # near: q within 1e-12 of p
                p = rng.dirichlet(np.ones(V))
                q = np.abs(p + rng.normal(0, 1e-12, V))
                q /= q.sum()
            for r in (p, q):
                r /= r.sum()
                r.setflags(write=False)
            got = self._cache[ctx] = (p, q)
        return got

    def target(self, ctx=()):
        return self._pair(tuple(ctx))[0]

    def draft(self, ctx=()):
        return self._pair(tuple(ctx))[1]


def _uniform_support_drafts(laws: FuzzLaws, K: int, L: int, rng: np.random.Generator) -> np.ndarray:
    """K drafts whose every token is uniform over the draft's support there (tiny-probability
    draft arrays are then as likely as likely ones)."""
    out = np.empty((K, L), dtype=np.int64)
    for k in range(K):
        ctx: tuple = ()
        for d in range(L):
            support = np.flatnonzero(laws.draft(ctx) > 0)
            out[k, d] = rng.choice(support)
            ctx += (int(out[k, d]),)
    return out


def _valid(block: tuple, drafts: np.ndarray, V: int) -> bool:
    L = drafts.shape[1]
    if not 1 <= len(block) <= L + 1 or any(not 0 <= b < V for b in block):
        return False
    k = len(block) - 1
    return any(tuple(int(t) for t in row[:k]) == tuple(block[:k]) for row in drafts)


def _chi_square(counts: dict, law: dict, draws: int) -> float:
    """p-value of the sampled blocks against the law: the audits' Pearson test (sparse cells
    pooled until each expects at least 5; a block outside the law gives 0)."""
    keys = sorted(set(law) | set(counts), key=repr)
    probs = np.array([float(law.get(k, 0.0)) for k in keys])
    return law_test(np.array([counts.get(k, 0) for k in keys], dtype=float), probs / probs.sum())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=300, help="random instances (default 300)")
    ap.add_argument("--arrays", type=int, default=4, help="draft arrays per instance (default 4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tol", type=float, default=1e-9, help="|sum - 1| allowed (default 1e-9)")
    ap.add_argument("--chi-every", type=int, default=5, help="chi-square every N-th array")
    ap.add_argument("--draws", type=int, default=2000, help="samples per chi-square test")
    ap.add_argument("--level", type=float, default=1e-4, help="chi-square rejection level")
    ap.add_argument("--seconds", type=float, default=1800.0, help="stop after this long")
    ap.add_argument("--show", type=int, default=8, help="failures printed")
    args = ap.parse_args(argv)

    specs = [(n, {"rule": r} if cls.takes_rule else {}) for n, cls in VERIFIERS.items()
             for r in (FUZZ_RULES if cls.takes_rule else (None,))]
    labels = [n + (":" + kw["rule"] if "rule" in kw else "") for n, kw in specs]
    verifiers = [make_verifier(n, **kw) for n, kw in specs]
    count = defaultdict(lambda: defaultdict(int))
    failures: list[str] = []
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    arrays = 0
    for case in range(args.cases):
        if time.perf_counter() - t0 > args.seconds:
            print(f"stopped after {case} instances (--seconds)")
            break
        V, K, L = int(rng.integers(2, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
        kind = KINDS[case % len(KINDS)]
        laws = FuzzLaws(V, int(rng.integers(1 << 30)), kind)
        target, draft = laws.target, laws.draft  # one callable each: the rules are cached by it
        for a in range(args.arrays):
            drafts = iid_drafts(K, L).sample(laws.draft, rng) if a % 2 == 0 else \
                _uniform_support_drafts(laws, K, L, rng)
            arrays += 1
            chi = arrays % args.chi_every == 0
            for label, v in zip(labels, verifiers, strict=True):
                c = count[label]
                c["law calls"] += 1
                where = f"{label} V={V} K={K} L={L} kind={kind} seed={laws.seed} drafts={drafts.tolist()}"
                try:
                    law = v.law(target, draft, drafts)
                except Exception as exc:  # noqa: BLE001 -- counted and shown
                    c["errors"] += 1
                    failures.append(f"error {type(exc).__name__}: {exc} | {where}")
                    continue
                masses = np.array([float(w) for w in law.values()])
                total = float(masses.sum())
                if not (np.all(np.isfinite(masses)) and abs(total - 1) <= args.tol):
                    c["sum off"] += 1
                    failures.append(f"sum {total!r} | {where}")
                if masses.min(initial=0) < 0:
                    c["negative mass"] += 1
                    failures.append(f"negative mass {masses.min()!r} | {where}")
                if not all(_valid(b, drafts, V) for b in law):
                    c["invalid block"] += 1
                    failures.append(f"invalid block in {sorted(law)} | {where}")
                if chi:
                    c["chi-square tests"] += 1
                    srng = np.random.default_rng([args.seed, arrays])
                    counts: dict = defaultdict(int)
                    try:
                        for _ in range(args.draws):
                            counts[tuple(int(t) for t in v.sample(target, draft, drafts, srng))] += 1
                    except Exception as exc:  # noqa: BLE001
                        c["errors"] += 1
                        failures.append(f"sample error {type(exc).__name__}: {exc} | {where}")
                        continue
                    pv = _chi_square(counts, law, args.draws)
                    if not pv >= args.level:
                        c["chi-square rejected"] += 1
                        failures.append(f"chi-square p = {pv:.3g} | {where}")
    seconds = time.perf_counter() - t0
    cols = ["law calls", "sum off", "negative mass", "invalid block", "errors", "chi-square tests",
            "chi-square rejected"]
    print(f"{arrays} draft arrays over {min(case + 1, args.cases)} instances, {seconds:.0f} s; "
          f"sum tolerance {args.tol:g}, chi-square level {args.level:g} with {args.draws} draws")
    print("verifier".ljust(18) + "".join(c.rjust(21) for c in cols))
    for label in labels:
        print(label.ljust(18) + "".join(str(count[label][c]).rjust(21) for c in cols))
    total_bad = sum(count[lb][c] for lb in labels for c in ("sum off", "negative mass", "invalid block",
                                                            "errors", "chi-square rejected"))
    print(f"failures: {total_bad}")
    for line in failures[:args.show]:
        print("  " + (line if len(line) < 400 else line[:397] + "..."))
    return 0 if total_bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
