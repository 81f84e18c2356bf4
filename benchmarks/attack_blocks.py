"""Adversarial check of the sequence-level layer (draft trees, the ``top`` draft model, the block
optimum and bound, the block verifiers, their declarations, the results' JSON) against independent
reference code written from the definitions.

The reference shares no code with ``mdtheory/blocks``: draft trees are enumerated from their
definition (children iid, successively without replacement, or the top b tokens of q with ties to the
lower index) in exact fractions; a verifier's validity is the completed law on V^(L+1) computed here;
the optimum is a linear program over the enumerated tree draws written here (scipy's HiGHS); a tree
of top children is deterministic, so its optimum is 1 + the sum over its nodes of p(path to the node)
(the verifier that emits the target's own tokens attains it; nesting forbids more).

Usage: ``python benchmarks/attack_blocks.py [section ...]`` with sections among
``trees top optimum verifiers declarations results``; none: all (a few minutes on 2 shared cores).
Fixed seeds; prints every number it checks and ends with the list of failures (exit status 1 when
there is one).
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from fractions import Fraction

import numpy as np
from scipy import sparse, stats
from scipy.optimize import linprog

import mdtheory as md
from mdtheory import rules
from mdtheory.blocks import (
    VERIFIERS,
    ConstantLaw,
    DraftTree,
    RandomLaw,
    audit_block,
    block_efficiency_bound,
    exact_block_law,
    make_verifier,
    random_instance,
)
from mdtheory.errors import MdtheoryError

FAILURES: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("  ok   " if ok else "  FAIL ") + what)
    if not ok:
        FAILURES.append(what)


# ----------------------------------------------------------------------------- the reference
def fractions_of(law):
    """``law`` returning exact fractions of its float64 entries, rescaled to sum exactly one."""
    def f(ctx):
        row = [Fraction(float(v)) for v in np.asarray(law(ctx), dtype=np.float64)]
        s = sum(row)
        return np.array([v / s for v in row], dtype=object)
    return f


def ref_children(q, b: int, sampling: str) -> dict:
    """The law of a node's ordered children tuple, from the definition, in q's arithmetic."""
    V = len(q)
    out = {}
    if sampling == "iid":
        for x in itertools.product(range(V), repeat=b):
            w = math.prod((q[y] for y in x), start=Fraction(1))
            if w:
                out[x] = w
    elif sampling == "without-replacement":
        for x in itertools.permutations(range(V), b):
            w, left = Fraction(1), Fraction(1)
            for y in x:
                if left == 0:
                    w = 0
                    break
                w, left = w * q[y] / left, left - q[y]
            if w:
                out[x] = w
    else:  # top: the b largest, ties to the lower index
        out[tuple(sorted(range(V), key=lambda y: (-q[y], y))[:b])] = Fraction(1)
    return out


def ref_trees(branching, sampling: str, law) -> dict:
    """``{(K, L) array as a tuple of rows: probability}``, the rows depth-first (the j-th child's
    subtree is the j-th block of its parent's rows)."""
    L = len(branching)

    def grow(depth, prefix):
        if depth == L:
            return {((),): Fraction(1)}
        res: dict = {}
        for kids, w in ref_children(law(prefix), branching[depth], sampling).items():
            subs = [list(grow(depth + 1, prefix + (y,)).items()) for y in kids]
            for combo in itertools.product(*subs):
                rows, pw = [], w
                for y, (sub, sw) in zip(kids, combo, strict=True):
                    rows += [(y,) + r for r in sub]
                    pw *= sw
                res[tuple(rows)] = res.get(tuple(rows), 0) + pw
        return res

    return grow(0, ())


def as_key(drafts) -> tuple:
    return tuple(tuple(int(t) for t in row) for row in drafts)


def seq_prob(target, y) -> float:
    return math.prod(float(target(tuple(y[:j]))[y[j]]) for j in range(len(y)))


def completion_tv(target, law: dict, V: int, L: int) -> float:
    """TV between "block + fresh target tokens" and the target's law on V^(L+1)."""
    tv = 0.0
    for y in itertools.product(range(V), repeat=L + 1):
        lhs = sum(law.get(y[:k + 1], 0.0) * math.prod(float(target(y[:j])[y[j]]) for j in range(k + 1, L + 1))
                  for k in range(L + 1))
        tv += abs(lhs - seq_prob(target, y))
    return tv / 2


def ref_optimum(target, draws: list, V: int, L: int) -> float:
    """max E|B| over couplings pi(X, B) with b_{1:k} a prefix of a draft of X and valid, by LP."""
    cols = []
    for i, (x, _) in enumerate(draws):
        prefixes = {()} | {tuple(int(t) for t in row[:k]) for row in x for k in range(1, L + 1)}
        cols += [(i, pre + (v,)) for pre in prefixes for v in range(V)]
    ys = list(itertools.product(range(V), repeat=L + 1))
    where = {y: r for r, y in enumerate(ys)}
    rows, cs, vals = [i for i, _ in cols], list(range(len(cols))), [1.0] * len(cols)
    for c, (_, b) in enumerate(cols):
        k = len(b) - 1
        for rest in itertools.product(range(V), repeat=L - k):
            y = b + rest
            cont = math.prod(float(target(y[:j])[y[j]]) for j in range(k + 1, L + 1))
            if cont:
                rows.append(len(draws) + where[y])
                cs.append(c)
                vals.append(cont)
    A = sparse.csr_matrix((vals, (rows, cs)), shape=(len(draws) + len(ys), len(cols)))
    rhs = np.array([w for _, w in draws] + [seq_prob(target, y) for y in ys])
    res = linprog(-np.array([len(b) for _, b in cols], float), A_eq=A, b_eq=rhs, bounds=(0, None),
                  method="highs")
    if res.status != 0:
        raise RuntimeError(res.message)
    return -res.fun


def top_tree_value(target, draft, branching) -> float:
    """1 + sum over the nodes of a top tree of p(path to the node)."""
    total = 1.0

    def rec(prefix, mass, d):
        nonlocal total
        if d == len(branching):
            return
        q = np.asarray(draft(prefix), dtype=np.float64)
        p = np.asarray(target(prefix), dtype=np.float64)
        for y in sorted(range(q.size), key=lambda y: (-q[y], y))[:branching[d]]:
            total += mass * p[y] / p.sum()
            rec(prefix + (y,), mass * p[y] / p.sum(), d + 1)

    rec((), 1.0, 0)
    return total


def chi2_pvalue(counts: dict, law: dict, N: int) -> tuple[float, int]:
    """Pearson's p-value of ``counts`` against ``law`` (cells under 5 expected pooled) and the
    number of draws outside the law's support."""
    outside = sum(v for k, v in counts.items() if k not in law)
    keys = list(law)
    e = np.array([float(law[k]) * N for k in keys])
    o = np.array([counts.get(k, 0) for k in keys], dtype=float)
    big = e >= 5
    if big.sum() < 2:
        return 1.0, outside
    o, e = np.append(o[big], o[~big].sum()), np.append(e[big], e[~big].sum())
    if e[-1] < 1e-12:
        o, e = o[:-1], e[:-1]
    return float(stats.chisquare(o, e * o.sum() / e.sum()).pvalue), outside


# ----------------------------------------------------------------------------- sections
BRANCHINGS = [(1,), (3,), (2, 2), (3, 1), (2, 2, 2), (1, 2, 1)]


def section_trees() -> None:
    print("DraftTree.enumerate against the definition (exact fractions)")
    cases = mismatches = 0
    for sampling in md.blocks.tree_samplings():
        for br in BRANCHINGS:
            for V in (2, 3, 4, 5):
                tree = DraftTree(br, sampling)
                law = fractions_of(RandomLaw(V, seed=V, concentration=0.5, stream=1))
                if tree.count_draws(V) > 20_000:
                    continue
                if sampling != "iid" and max(br) > V:
                    try:
                        list(tree.enumerate(law))
                        check(False, f"{tree!r} over V = {V} refuses (too few tokens)")
                    except MdtheoryError:
                        pass
                    continue
                lib: dict = {}
                for x, w in tree.enumerate(law):
                    lib[as_key(x)] = lib.get(as_key(x), 0) + w
                ref = ref_trees(br, sampling, law)
                cases += 1
                if lib != ref:
                    mismatches += 1
                    check(False, f"{tree!r} V = {V}: {len(lib)} draws vs {len(ref)} by the definition")
    check(not mismatches, f"{cases} (tree, V) cases equal exactly")
    print("DraftTree.sample / sample_batch against the definition (chi-square, fixed seeds)")
    pmin, tests = 1.0, 0
    for sampling in ("iid", "without-replacement"):
        for br in BRANCHINGS:
            for V in (3, 4):
                tree = DraftTree(br, sampling)
                if (sampling != "iid" and max(br) > V) or tree.count_draws(V) > 20_000:
                    continue
                base = RandomLaw(V, seed=3, concentration=0.7, stream=1)
                ref = ref_trees(br, sampling, fractions_of(base))
                for form, N in (("sample_batch", 20_000), ("sample", 2_000)):
                    rng = np.random.default_rng(12345)
                    arr = tree.sample_batch(base, rng, N) if form == "sample_batch" else \
                        np.stack([tree.sample(base, rng) for _ in range(N)])
                    counts: dict = {}
                    for a in arr:
                        counts[as_key(a)] = counts.get(as_key(a), 0) + 1
                    p, outside = chi2_pvalue(counts, ref, N)
                    tests, pmin = tests + 1, min(pmin, p)
                    if outside or p < 1e-4:
                        check(False, f"{tree!r} V = {V} {form}: p = {p:.2g}, {outside} impossible draws")
    check(pmin >= 1e-4, f"{tests} chi-square tests, smallest p-value {pmin:.3g}")
    print("near-degenerate, zero and tied laws")
    for q in ([1 - 2e-16, 1e-16, 1e-16], [0.5, 0.5, 1e-300], [0.25, 0.25, 0.5]):
        for sampling in md.blocks.tree_samplings():
            tree = DraftTree((2, 2), sampling)
            lib: dict = {}
            for x, w in tree.enumerate(ConstantLaw(q)):
                lib[as_key(x)] = lib.get(as_key(x), 0.0) + float(w)
            ref = ref_trees((2, 2), sampling, fractions_of(ConstantLaw(q)))
            err = max(abs(lib.get(k, 0.0) - float(ref.get(k, 0))) / max(float(ref.get(k, 0)), 1e-300)
                      for k in set(lib) | set(ref))
            check(err < 1e-12, f"{tree!r} q = {q}: largest relative error {err:.2g}")
    for sampling in ("without-replacement", "top"):
        for law in (ConstantLaw([0.5, 0.5]), ConstantLaw([1.0, 0.0, 0.0])):
            tree = DraftTree((3,), sampling)
            rng = np.random.default_rng(0)
            for form, run in (("enumerate", lambda t=tree, lw=law: list(t.enumerate(lw))),
                              ("sample_batch", lambda t=tree, lw=law, r=rng: t.sample_batch(lw, r, 3))):
                try:
                    run()
                    ok = sampling == "top" and law(()).size >= 3  # top drafts zero-mass tokens by index
                    check(ok, f"{tree!r} on {law!r} {form}: {'handled' if ok else 'not refused'}")
                except MdtheoryError as exc:
                    check(True, f"{tree!r} on {law!r} {form} refused: {exc}")
    print("exact fractions with a near tie (below float resolution): top children")
    d = Fraction(1, 10**30)
    q = np.array([Fraction(1, 3) - d, Fraction(1, 3) + d, Fraction(1, 3)], dtype=object)
    tree = DraftTree((1,), "top")
    enum = [int(x[0, 0]) for x, _ in tree.enumerate(lambda c: q)]
    drawn = int(tree.sample(lambda c: q, np.random.default_rng(0))[0, 0])
    check(enum == [1] and drawn == 1, f"enumerate draws {enum}, sample draws {drawn}, the top token is 1")
    print("public methods on bad input")
    tree, law, rng = DraftTree((2, 1), "iid"), ConstantLaw([0.5, 0.5]), np.random.default_rng(0)
    for label, run in (("sample_batch(size=0)", lambda: tree.sample_batch(law, rng, 0)),
                       ("sample_batch(size=-1)", lambda: tree.sample_batch(law, rng, -1)),
                       ("sample(rng=None)", lambda: tree.sample(law, None))):
        try:
            run()
            check(True, f"{label} handled")
        except MdtheoryError as exc:
            check(True, f"{label} refused: {exc}")
        except Exception as exc:  # noqa: BLE001 -- what is checked is that it is not a named error
            check(False, f"{label} raises {type(exc).__name__}: {exc}")
    def growing(c):
        return np.array([0.5, 0.5]) if not c else np.array([0.2, 0.3, 0.5])

    for label, run in (("enumerate", lambda: list(tree.enumerate(growing))),
                       ("sample_batch", lambda: tree.sample_batch(growing, rng, 5)),
                       ("sample", lambda: tree.sample(growing, rng))):
        try:
            out = run()
            tokens = [x for x, _ in out] if label == "enumerate" else [out]
            check(max(int(np.max(x)) for x in tokens) < 2,
                  f"{label}: a law whose V changes with the context is refused or stays in the root's V")
        except MdtheoryError as exc:
            check(True, f"{label}: a law whose V changes with the context is refused: {exc}")


def section_top() -> None:
    print("alpha* of the top set: every method against p(top) computed here")
    methods = ["auto", "subsets", "otlp", "otlp-literal", "dual", "maxflow", "mnp"]
    rng = np.random.default_rng(5)
    worst = dict.fromkeys(methods, 0.0)
    for V in (3, 4, 6, 8):
        for n in range(1, min(3, V) + 1):
            for kind in ("random", "ties", "zeros", "float32", "degenerate"):
                p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
                if kind == "ties":
                    q = np.round(q * 4) + 1
                    q /= q.sum()
                elif kind == "zeros":
                    q[: V // 2] = 0
                    q /= q.sum()
                elif kind == "float32":
                    p, q = p.astype(np.float32), q.astype(np.float32)
                elif kind == "degenerate":
                    q = np.full(V, 1e-16)
                    q[-1] = 1 - (V - 1) * 1e-16
                q64 = np.asarray(q, np.float64) / np.sum(q, dtype=np.float64)
                p64 = np.asarray(p, np.float64) / np.sum(p, dtype=np.float64)
                want = float(p64[sorted(range(V), key=lambda y: (-q64[y], y))[:n]].sum())
                for m in methods:
                    got = md.optimal_acceptance(p, q, n, "top", method=m, normalize=True).value
                    worst[m] = max(worst[m], abs(got - want))
    for m in methods:
        check(worst[m] < 1e-12, f"method {m}: largest error {worst[m]:.2g} over 60 cases")
    for V in (20_000,):
        p, q = np.random.default_rng(1).dirichlet(np.ones(V)), np.random.default_rng(2).dirichlet(np.ones(V))
        try:
            r = md.optimal_acceptance(p, q, 3, "top")
            check(abs(r.value - p[np.argsort(-q, kind="stable")[:3]].sum()) < 1e-12, f"V = {V}: {r.method}")
        except MdtheoryError as exc:
            check(False, f"V = {V}: the top set's alpha* (an O(V) sum) refused: {exc}")


def section_optimum() -> None:
    print("trees of top children: optimum, bound, token:optimal against 1 + sum_nodes p(path)")
    for br in [(1,), (2,), (3,), (2, 2), (3, 1), (1, 2, 1), (2, 1, 1)]:
        for V in (2, 3, 4):
            if max(br) > V:
                continue
            instances = [("random", *random_instance(V, seed=0, concentration=0.5)),
                         ("uniform draft", RandomLaw(V, seed=9), ConstantLaw(np.full(V, 1 / V)))]
            for name, target, draft in instances:
                tree = DraftTree(br, "top")
                want = top_tree_value(target, draft, br)
                opt = md.optimal_block_efficiency(target, draft, tree=tree).value
                bnd = block_efficiency_bound(target, draft, tree=tree).value
                tok = float(make_verifier("token", rule="optimal", tree=tree).block_efficiency(
                    target, draft, tree.n, tree.length))
                check(abs(opt - want) < 1e-8 and abs(tok - want) < 1e-9 and bnd >= want - 1e-9,
                      f"{tree!r} V = {V} {name}: here {want:.10f}, optimum {opt:.10f}, token:optimal "
                      f"{tok:.10f}, bound {bnd:.10f}")
    target, draft = ConstantLaw([0.9, 0.1]), ConstantLaw([0.6, 0.4])
    tree = DraftTree((1,), "top")
    bnd = block_efficiency_bound(target, draft, tree=tree).value
    check(bnd >= 1.9 - 1e-12,
          f"minimal case p = (0.9, 0.1), q = (0.6, 0.4), {tree!r}: optimum 1.9, bound {bnd}")
    print("exact fractions with a near tie: the top tree's optimum and token:optimal's law")
    d = Fraction(1, 10**30)
    q = np.array([Fraction(1, 3) - d, Fraction(1, 3) + d, Fraction(1, 3)], dtype=object)
    p = np.array([Fraction(1, 10), Fraction(8, 10), Fraction(1, 10)], dtype=object)
    opt = md.optimal_block_efficiency(lambda c: p, lambda c: q, tree=tree).value
    v = make_verifier("token", rule="optimal", tree=tree)
    law = {k: float(w) for k, w in exact_block_law(v, lambda c: p, lambda c: q, 1, 1).items()}
    tv = completion_tv(lambda c: p, law, 3, 1)
    check(abs(opt - 1.8) < 1e-9, f"optimum {opt} (exact top token 1: 1.8)")
    check(tv < 1e-9, f"token:optimal's exact block law {law}: completion TV {tv:.3g}")
    print("the optimum's size estimate on top trees (one prefix set)")
    target, draft = random_instance(4, seed=1)
    try:
        md.optimal_block_efficiency(target, draft, tree=DraftTree((2, 2, 2), "top"))
        check(True, "DraftTree((2, 2, 2), 'top') over V = 4 solved within the default limits")
    except MdtheoryError as exc:
        check(False, f"DraftTree((2, 2, 2), 'top') over V = 4 refused: {exc}")


def section_verifiers() -> None:
    print("every registered verifier: exact law vs its samples, validity, E|B| <= an LP written here")
    configs = [(V, L, br + (1,) * (L - 1), s) for V in (2, 3) for L in (1, 2)
               for br, s in [((1,), "iid"), ((2,), "iid"), ((2,), "without-replacement"), ((2,), "top"),
                             ((1,), "top")]]
    configs += [(V, 2, (1, 2), s) for V in (2, 3) for s in ("iid", "without-replacement", "top")]
    stats_ = {"lp": 0, "verifiers": 0, "chi2": 0, "pmin": 1.0, "tv": 0.0}
    for V, L, br, sampling in configs:
        target, draft = random_instance(V, seed=V * 10 + L, concentration=0.7)
        tree = DraftTree(br, sampling)
        draws = [(np.array(k, dtype=np.int64), float(w)) for k, w in
                 ref_trees(br, sampling, fractions_of(draft)).items()]
        lp = ref_optimum(target, draws, V, L)
        stats_["lp"] += 1
        opt = md.optimal_block_efficiency(target, draft, tree=tree).value
        bnd = block_efficiency_bound(target, draft, tree=tree).value
        check(abs(opt - lp) < 1e-7, f"{tree!r} V = {V}: optimum {opt:.10f}, LP here {lp:.10f}")
        check(bnd >= lp - 1e-9, f"{tree!r} V = {V}: bound {bnd:.10f} >= LP here {lp:.10f}")
        for name in VERIFIERS:
            for rule in [None, *rules.RULES]:
                try:
                    v = make_verifier(name, rule=rule, tree=tree)
                except MdtheoryError:
                    continue
                stats_["verifiers"] += 1
                total: dict = {}
                for x, w in draws:
                    for b, pb in v.law(target, draft, x).items():
                        total[b] = total.get(b, 0.0) + w * float(pb)
                eff = sum(len(b) * pb for b, pb in total.items())
                tv = completion_tv(target, total, V, L)
                stats_["tv"] = max(stats_["tv"], tv)
                tag = f"{v.label} on {tree!r} V = {V}"
                if abs(sum(total.values()) - 1) > 1e-9 or tv > 1e-9 or eff > lp + 1e-8:
                    check(False, f"{tag}: sum {sum(total.values())}, TV {tv:.3g}, E|B| {eff} vs LP {lp}")
                rng = np.random.default_rng(7)
                for i in (max(range(len(draws)), key=lambda i: draws[i][1]), int(rng.integers(len(draws)))):
                    x = draws[i][0]
                    law = v.law(target, draft, x)
                    counts: dict = {}
                    r2 = np.random.default_rng(1000 + i)
                    for _ in range(1500):
                        b = tuple(int(t) for t in v.sample(target, draft, x, r2))
                        counts[b] = counts.get(b, 0) + 1
                    p, outside = chi2_pvalue(counts, law, 1500)
                    stats_["chi2"] += 1
                    stats_["pmin"] = min(stats_["pmin"], p)
                    if outside or p < 1e-4:
                        check(False, f"{tag} drafts {x.tolist()}: p = {p:.2g}, {outside} blocks "
                                     "outside the law")
    check(True, f"{stats_['lp']} LPs, {stats_['verifiers']} verifier laws (worst completion TV "
                f"{stats_['tv']:.2g}), {stats_['chi2']} chi-square tests (smallest p {stats_['pmin']:.3g})")


def section_declarations() -> None:
    print("make_verifier over (verifier, tree, rule): accepted ones run, refused ones are named")
    trees = [None] + [DraftTree(b, s) for s in md.blocks.tree_samplings() for b in [(2,), (2, 1), (2, 2)]]
    target, draft = random_instance(3, seed=4)
    accepted = refused = 0
    for name in [*VERIFIERS, "nope"]:
        for tree in trees:
            for rule in [None, *rules.RULES, "bogus"]:
                try:
                    v = make_verifier(name, rule=rule, tree=tree)
                except MdtheoryError:
                    refused += 1
                    continue
                except Exception as exc:  # noqa: BLE001 -- a crash is the finding
                    check(False, f"make_verifier({name!r}, rule={rule!r}, tree={tree!r}) crashes: {exc!r}")
                    continue
                accepted += 1
                t = tree or DraftTree((2, 1), "iid")
                try:
                    v.block_efficiency(target, draft, t.n, t.length)
                    v.estimate(3, t, 10)
                except Exception as exc:  # noqa: BLE001 -- an accepted combination must run
                    check(False, f"{v.label} on {t!r} accepted, then raises {type(exc).__name__}: {exc}")
    check(True, f"{accepted} combinations accepted, {refused} refused by a named error")
    tree = DraftTree((2,), "top")
    try:
        v = make_verifier("token", rule="optimal", tree=tree, sampling="iid")
        law = {k: float(w) for k, w in exact_block_law(v, target, draft, 2, 1).items()}
        check(False, f"token:optimal on {tree!r} with sampling='iid' accepted: completion TV "
                     f"{completion_tv(target, law, 3, 1):.3g}")
    except MdtheoryError as exc:
        check(True, f"a sampling keyword contradicting the tree is refused: {exc}")


def section_results() -> None:
    print("every result class: strict JSON with status, success, message")
    target, draft = random_instance(3, seed=2)
    tree = DraftTree((2, 1), "without-replacement")
    v = make_verifier("traversal", tree=tree)
    results = {
        "AcceptanceResult": md.optimal_acceptance([0.2, 0.3, 0.5], [0.5, 0.3, 0.2], 2, "top"),
        "BlockOptimumResult": md.optimal_block_efficiency(target, draft, tree=tree),
        "BlockBoundResult": block_efficiency_bound(target, draft, tree=tree),
        "BlockAuditResult": audit_block(v.law, target, draft, tree=tree, exact=True),
    }
    for name, res in results.items():
        d = res.to_dict()
        json.dumps(d, allow_nan=False)
        check(all(k in d for k in ("status", "success", "message")),
              f"{name}: {d['status']!r}, {d['message']!r}")


SECTIONS = {"trees": section_trees, "top": section_top, "optimum": section_optimum,
            "verifiers": section_verifiers, "declarations": section_declarations, "results": section_results}


def main(argv: list[str]) -> int:
    unknown = [s for s in argv if s not in SECTIONS]
    if unknown:
        print(f"unknown section(s) {unknown}; valid: {' '.join(SECTIONS)}")
        return 2
    for name in argv or SECTIONS:
        SECTIONS[name]()
    print(f"\n{len(FAILURES)} failure(s)")
    for f in FAILURES:
        print("  -", f)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
