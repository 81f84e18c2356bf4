"""Precision audit of the draft models (mdtheory.models, mdtheory.models.containment) against rationals.

Every public method of every draft model, and the public functions of :mod:`mdtheory.models.containment`, on
adversarial masses (spanning 1e-320..1, subnormal tails, two heavy tokens and a subnormal rest, masses
near 1e308 whose sum overflows, float32-rounded masses, exact ties, zeros, n = 1, n = V, n above the
support) at V <= 8, compared with references in :class:`fractions.Fraction` over the exact values of
the floats the model stores (draft tuples, draft sets, elementary symmetric polynomials); and the
conditional Poisson inclusion law at V = 50 and 400, n up to 16, against exact rational tables.

Error measure: ``|computed - exact| / max(|exact|, 2^-1022)`` (relative, except below the normal
range, where no float can be relatively accurate), in units of u = 2^-53; the successive-sampling
quadrature is measured against its documented bound ``1e-15 Q + 2e-18`` instead. A non-finite or
negative output, or an error over 1e-12 (over the documented bound for the quadrature), is a failure.

Run:  python benchmarks/audit_draft_precision.py [--seeds 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections import defaultdict
from fractions import Fraction

import numpy as np

import mdtheory as md
from mdtheory.models import containment as cm
from mdtheory.models.conditional_poisson import ConditionalPoisson
from mdtheory.models.independent import Independent
from mdtheory.models.joint import Joint

TINY = Fraction(2) ** -1022
U = 2.0**-53
FAIL = 1e-12
#: Suffix of the rows measured against the quadrature's bound (the worst is a fraction of it).
BOUND = " [error / bound]"


def rel_err(got: float, want: Fraction) -> float:
    if not math.isfinite(got) or got < 0:
        return math.inf
    return float(abs(Fraction(got) - want) / max(abs(want), TINY))


def in_unit(values) -> float:
    """0 when every value is a probability (in [0, 1]), else inf."""
    values = np.asarray(values, dtype=float)
    return 0.0 if values.size == 0 or (values.min() >= 0.0 and values.max() <= 1.0) else math.inf


def bound_err(got: float, want: Fraction) -> float:
    """Error over the quadrature's documented bound 1e-15 Q + 2e-18 (<= 1 passes)."""
    if not math.isfinite(got) or got < 0:
        return math.inf
    return float(abs(Fraction(got) - want) / (Fraction(1e-15) * want + Fraction(2e-18)))


# ----------------------------------------------------------------------------- exact references
def fr(v) -> list[Fraction]:
    return [Fraction(float(x)) for x in v]


def bits(members) -> int:
    return sum(1 << int(i) for i in np.flatnonzero(members))


def esp(w: list[Fraction], n: int) -> Fraction:
    e = [Fraction(1)] + [Fraction(0)] * n
    for x in w:
        for j in range(n, 0, -1):
            e[j] += x * e[j - 1]
    return e[n]


def iid_set_law(w, n):
    V = len(w)
    supp = [i for i in range(V) if w[i]]
    out = {}
    for k in range(1, min(n, len(supp)) + 1):
        for U_ in itertools.combinations(supp, k):
            tot = Fraction(0)
            for r in range(0, k + 1):
                for S in itertools.combinations(U_, r):
                    tot += (-1) ** (k - r) * sum((w[i] for i in S), Fraction(0)) ** n
            if tot:
                out[sum(1 << i for i in U_)] = tot
    return out


def iid_tuples(w, n):
    supp = [i for i in range(len(w)) if w[i]]
    return {t: math.prod((w[i] for i in t), start=Fraction(1)) for t in itertools.product(supp, repeat=n)}


def wor_tuples(w, n):
    total = sum(w)
    out = {}

    def rec(prefix, prob, used_mass):
        if len(prefix) == n:
            out[tuple(prefix)] = prob
            return
        for i in range(len(w)):
            if w[i] and i not in prefix:
                rec(prefix + [i], prob * w[i] / (total - used_mass), used_mass + w[i])

    rec([], Fraction(1), Fraction(0))
    return out


def wor_set_law(w, n):
    total, V = sum(w), len(w)
    f, mass = {0: Fraction(1)}, {0: Fraction(0)}
    for _ in range(n):
        nxt = {}
        for S, prob in f.items():
            for i in range(V):
                if w[i] and not S >> i & 1:
                    nxt[S | 1 << i] = nxt.get(S | 1 << i, 0) + prob * w[i] / (total - mass[S])
                    mass[S | 1 << i] = mass[S] + w[i]
        f = nxt
    return f


def cp_set_law(w, n):
    supp = [i for i in range(len(w)) if w[i]]
    weights = {sum(1 << i for i in A): math.prod((w[i] for i in A), start=Fraction(1))
               for A in itertools.combinations(supp, n)}
    tot = sum(weights.values())
    return {k: v / tot for k, v in weights.items()}


def cp_tuples(w, n):
    out = {}
    for S, p in cp_set_law(w, n).items():
        toks = [i for i in range(len(w)) if S >> i & 1]
        for perm in itertools.permutations(toks):
            out[perm] = p / math.factorial(n)
    return out


def greedy_top(w, n):
    return sorted(range(len(w)), key=lambda i: -w[i])[: n - 1]  # sorted() is stable


def greedy_tuples(w, n):
    top = greedy_top(w, n)
    rest = sum(w[i] for i in range(len(w)) if i not in top)
    return {tuple(top) + (c,): w[c] / rest for c in range(len(w)) if c not in top and w[c]}


def indep_tuples(rows):
    V = len(rows[0])
    out = {}
    for t in itertools.product(range(V), repeat=len(rows)):
        p = math.prod((rows[k][t[k]] for k in range(len(rows))), start=Fraction(1))
        if p:
            out[t] = p
    return out


def sets_of(tuples):
    out = defaultdict(Fraction)
    for t, p in tuples.items():
        out[sum(1 << i for i in set(t))] += p
    return dict(out)


def containment_of(set_law, V):
    """Q(T) for every mask T (bit i of the mask index = token i, as itertools.product's rows)."""
    out = []
    for T in range(1 << V):
        out.append(sum((p for S, p in set_law.items() if S & ~T == 0), Fraction(0)))
    return out


def first_law_of(tuples, V):
    out = [Fraction(0)] * V
    for t, p in tuples.items():
        out[t[0]] += p
    return out


# ----------------------------------------------------------------------------- cases
def mask_matrix(V):
    """Row T is the indicator of the bits of T (token i <-> bit i)."""
    return np.array([[(T >> i) & 1 for i in range(V)] for T in range(1 << V)], dtype=bool)


def families(rng, V):
    """(name, raw q, passed with normalize): adversarial mass vectors of length V."""
    perm = rng.permutation(V)
    yield "dirichlet", rng.dirichlet(np.ones(V)), False
    yield "span-1e-320..1", 10.0 ** rng.uniform(-320, 0, V), True
    sub = rng.integers(1, 2**40, V) * 2.0**-1074
    one = sub.copy()
    one[perm[0]] = 1.0
    yield "one-heavy+subnormal", one, True
    two = rng.integers(1, 5000, V) * 2.0**-1074
    if V >= 2:
        two[perm[0]], two[perm[1]] = 0.6, 0.4
    yield "two-heavy+subnormal", two, True
    yield "two-heavy+denorm-min", np.where(two > 0.1, two, 5e-324), True
    yield "near-1e308", 10.0 ** rng.uniform(306, 308, V), True
    yield "float32", rng.dirichlet(np.full(V, 0.5)).astype(np.float32), False
    ties = np.full(V, 1.0)
    ties[perm[: V // 2]] = 0.5
    yield "ties", ties, True
    yield "uniform", np.full(V, 1.0 / V), False
    z = rng.dirichlet(np.ones(V))
    z[perm[: V // 3]] = 0.0
    yield "zeros", z, True
    yield "1e-300-scale", 10.0 ** rng.uniform(-300, -150, V), True
    yield "mixed-1e-200", np.where(rng.random(V) < 0.5, 1e-200, rng.random(V)), True


class Stats:
    def __init__(self):
        self.count = defaultdict(int)
        self.worst = defaultdict(float)
        self.where = {}
        self.failures = []

    def add(self, key, err, label, limit=FAIL):
        self.count[key] += 1
        if not err <= self.worst[key]:
            self.worst[key] = err
            self.where[key] = label
        if not err <= limit:
            self.failures.append((key, err, label))


def check_model(st, model, name, label, exact_sets, exact_tuples, exact_first, masks, rng):
    V, n = model.V, model.n
    ex_Q = containment_of(exact_sets, V)
    # successive sampling: the quadrature (containment at n >= 3, prefix_containment at n >= 2)
    # is held to its documented bound 1e-15 Q + 2e-18
    wor = name == "without-replacement" and n >= 3
    measure = bound_err if wor else rel_err
    limit = 1.0 + 1e-3 if wor else FAIL
    tag = BOUND if wor else ""
    # containment: each set alone (the few-sets path) and all at once (the many-sets path)
    for T in range(1 << V):
        st.add(f"{name}.containment[one]{tag}", measure(float(model.containment(masks[T])), ex_Q[T]),
               f"{label} T={T}", limit)
    batch = model.containment(masks)
    for T in range(1 << V):
        st.add(f"{name}.containment[all]{tag}", measure(float(batch[T]), ex_Q[T]), f"{label} T={T}", limit)
    cov = model.coverage(masks)
    singles = np.array([model.containment(masks[T]) for T in range(1 << V)])
    for key, values in (("containment", batch), ("containment[one]", singles), ("coverage", cov),
                        ("first_draft_law", model.first_draft_law()), ("set_law", model.set_law().probs)):
        st.add(f"{name}.{key} in [0, 1]", in_unit(values), label)
    full = (1 << V) - 1
    for S in range(1 << V):
        want = 1 - ex_Q[full & ~S]
        err = abs(Fraction(float(cov[S])) - want) if math.isfinite(cov[S]) else math.inf
        st.add(f"{name}.coverage[abs]", float(err), f"{label} S={S}")
        st.add(f"{name}.coverage[relative, not a failure]", rel_err(float(cov[S]), want),
               f"{label} S={S}", math.inf)
    # prefix containment: identity, random, by decreasing q, and a partial order
    q = model.q if model.q is not None else np.ones(V)
    orders = [np.arange(V), rng.permutation(V), np.argsort(-q, kind="stable"),
              rng.permutation(V)[: max(1, V // 2)]]
    if name == "without-replacement" and n >= 2:
        measure, limit, tag = bound_err, 1.0 + 1e-3, BOUND
    for order in orders:
        got = model.prefix_containment(order)
        T = 0
        for k, tok in enumerate(order):
            T |= 1 << int(tok)
            st.add(f"{name}.prefix_containment{tag}", measure(float(got[k]), ex_Q[T]),
                   f"{label} order={order.tolist()} k={k}", limit)
    # set law
    law = model.set_law()
    got = {bits(m): float(p) for m, p in zip(law.members, law.probs, strict=True)}
    for S in set(got) | set(exact_sets):
        st.add(f"{name}.set_law", rel_err(got.get(S, 0.0), exact_sets.get(S, Fraction(0))),
               f"{label} S={S}")
    # tuple law
    if exact_tuples is not None:
        tl = model.tuple_law()
        got = {tuple(t.tolist()): float(p) for t, p in zip(tl.tuples, tl.probs, strict=True)}
        for t in set(got) | set(exact_tuples):
            st.add(f"{name}.tuple_law", rel_err(got.get(t, 0.0), exact_tuples.get(t, Fraction(0))),
                   f"{label} t={t}")
        st.add(f"{name}.count_tuples>=", 0.0 if model.count_tuples() >= len(exact_tuples) else math.inf,
               label)
        draws = model.sample(np.random.default_rng(1), size=64)
        ok = draws.shape == (64, n) and all(tuple(d) in exact_tuples for d in draws.tolist())
        st.add(f"{name}.sample", 0.0 if ok else math.inf, label)
    st.add(f"{name}.count_sets>=", 0.0 if model.count_sets() >= len(exact_sets) else math.inf, label)
    # first draft law
    first = model.first_draft_law()
    for i in range(V):
        st.add(f"{name}.first_draft_law", rel_err(float(first[i]), exact_first[i]), f"{label} i={i}")


def run(seeds: int, Vs=range(1, 9)) -> Stats:
    st = Stats()
    for seed in range(seeds):
        for V in Vs:
            rng = np.random.default_rng(1000 * seed + V)
            masks = mask_matrix(V)
            for fam, raw, normalize in families(rng, V):
                for n in range(1, V + 2):
                    label = f"seed={seed} V={V} n={n} {fam}"
                    audit_case(st, fam, raw, normalize, n, masks, rng, label)
    return st


def audit_case(st, fam, raw, normalize, n, masks, rng, label):
    V = raw.size
    support = int(np.count_nonzero(raw))
    for sampling in ("iid", "without-replacement", "conditional-poisson", "greedy"):
        if sampling != "iid" and n > support:
            try:
                md.make_draft_model(raw, n, sampling, normalize=normalize)
            except md.InvalidInputError as exc:
                ok = "n <=" in str(exc)
            else:
                ok = False
            st.add(f"{sampling}.refuses n>support", 0.0 if ok else math.inf, label)
            continue
        model = md.make_draft_model(raw, n, sampling, normalize=normalize)
        w = fr(model.q)
        if sampling == "iid":
            sets = iid_set_law(w, n)
            tuples = iid_tuples(w, n) if support**n <= 4096 else None
            first = w
        elif sampling == "without-replacement":
            sets = wor_set_law(w, n)
            tuples = wor_tuples(w, n) if math.perm(support, n) <= 5040 else None
            total = sum(w)
            first = [x / total for x in w]
        elif sampling == "conditional-poisson":
            sets = cp_set_law(w, n)
            tuples = cp_tuples(w, n) if math.perm(support, n) <= 5040 else None
            first = [Fraction(0)] * V
            for S, p in sets.items():
                for i in range(V):
                    if S >> i & 1:
                        first[i] += p / n
        else:
            tuples = greedy_tuples(w, n)
            sets = sets_of(tuples)
            first = first_law_of(tuples, V)
            if [int(i) for i in model.top] != greedy_top(w, n):
                st.add("greedy.top", math.inf, label)
        check_model(st, model, sampling, label, sets, tuples, first, masks, rng)
        if sampling in ("without-replacement", "conditional-poisson"):
            audit_prefix_functions(st, sampling, raw, n, rng, label)
        if sampling == "conditional-poisson":
            audit_esp_tables(st, raw, model.q, n, label)
    if V ** n <= 4096 and n <= 4:  # independent drafts (rows of the family, shifted) and a joint table
        rows = np.stack([np.roll(raw, k) for k in range(n)])
        model = Independent(rows, normalize=normalize)
        ws = [fr(r) for r in model.qs]
        tuples = indep_tuples(ws)
        check_model(st, model, "independent", label, sets_of(tuples), tuples, ws[0], masks, rng)
        table = np.zeros((V,) * n)
        for t, p in tuples.items():
            table[t] = float(p)
        model = Joint(table, normalize=True)
        tab = [Fraction(float(x)) for x in model.table.ravel()]
        jt = {t: tab[np.ravel_multi_index(t, (V,) * n)] for t in itertools.product(range(V), repeat=n)}
        jt = {t: p for t, p in jt.items() if p}
        check_model(st, model, "joint", label, sets_of(jt), jt, first_law_of(jt, V), masks, rng)


def audit_prefix_functions(st, sampling, raw, n, rng, label):
    """The public prefix functions on the raw masses (not normalised: near 1e308 their sum overflows)."""
    q = np.asarray(raw, dtype=np.float64)
    w = fr(q)
    V = q.size
    exact_sets = wor_set_law(w, n) if sampling == "without-replacement" else cp_set_law(w, n)
    ex_Q = containment_of(exact_sets, V)
    fn = cm.successive_prefix_containment if sampling == "without-replacement" \
        else cm.conditional_poisson_prefix_containment
    quad = sampling == "without-replacement" and n >= 2
    measure, limit, tag = (bound_err, 1.0 + 1e-3, BOUND) if quad else (rel_err, FAIL, "")
    for order in (np.arange(V), rng.permutation(V), rng.permutation(V)[: max(1, V - 2)]):
        got = fn(q, order, n)
        T = 0
        for k, tok in enumerate(order):
            T |= 1 << int(tok)
            st.add(f"containment.{fn.__name__}{tag}", measure(float(got[k]), ex_Q[T]),
                   f"{label} raw order={order.tolist()} k={k}", limit)


def exact_tables(w: list[Fraction], n: int) -> list[list[Fraction]]:
    """Row i: e_0..e_n of w[:i], exactly."""
    rows = [[Fraction(1)] + [Fraction(0)] * n]
    for x in w:
        prev = rows[-1]
        rows.append([prev[0]] + [prev[j] + x * prev[j - 1] for j in range(1, n + 1)])
    return rows


def exact_inclusion(w: list[Fraction], n: int) -> list[Fraction]:
    """Conditional Poisson inclusion probabilities, exactly, in O(V n) rational operations."""
    pre, suf = exact_tables(w, n), exact_tables(w[::-1], n)[::-1]
    total = pre[-1][n]
    return [w[i] * sum((pre[i][j] * suf[i + 1][n - 1 - j] for j in range(n)), Fraction(0)) / total
            for i in range(len(w))]


def audit_esp_tables(st, raw, q, n, label):
    for name, w in (("model q", q), ("raw", np.asarray(raw, dtype=np.float64))):
        ex = exact_tables(fr(w), n)
        table = cm.esp_table(np.ascontiguousarray(w), n)
        mant, expo = cm.scaled_esp_table(np.ascontiguousarray(w), n)
        for i in range(w.size + 1):
            for j in range(n + 1):
                e = ex[i][j]
                big = e > Fraction(np.finfo(float).max)
                st.add("containment.esp_table" + ("[beyond float range]" if big else ""),
                       rel_err(float(table[i, j]), e) if not big else
                       (0.0 if table[i, j] == np.inf else math.inf), f"{label} {name} i={i} j={j}",
                       FAIL if not big else math.inf)
                got = Fraction(float(mant[i, j])) * Fraction(2) ** int(expo[i, j])
                err = float(abs(got - e) / e) if e else (0.0 if got == 0 else math.inf)
                st.add("containment.scaled_esp_table[relative, unbounded range]", err,
                       f"{label} {name} i={i} j={j}")


def large_families(rng, V):
    perm = rng.permutation(V)
    yield "dirichlet", rng.dirichlet(np.ones(V))
    yield "span-1e-320..1", 10.0 ** rng.uniform(-320, 0, V)
    two = rng.integers(1, 5000, V) * 2.0**-1074
    two[perm[0]], two[perm[1]] = 0.6, 0.4
    yield "two-heavy+subnormal", two
    one = rng.integers(1, 2**40, V) * 2.0**-1074
    one[perm[0]] = 1.0
    yield "one-heavy+subnormal", one
    yield "1e-200-tail", np.where(rng.random(V) < 0.05, rng.random(V), 1e-200 * rng.random(V))
    yield "float32", rng.dirichlet(np.full(V, 0.3)).astype(np.float32)
    yield "near-1e308", 10.0 ** rng.uniform(306, 308, V)


def audit_inclusion_large(st, seeds):
    """ConditionalPoisson.first_draft_law and containment.scaled_inclusion_weights at V = 50, 400."""
    for seed in range(seeds):
        for V in (50, 400):
            rng = np.random.default_rng(77 + seed + V)
            for fam, raw in large_families(rng, V):
                for n in (1, 2, 4, 8, 16):
                    label = f"seed={seed} V={V} n={n} {fam}"
                    model = ConditionalPoisson(raw, n, normalize=True)
                    want = exact_inclusion(fr(model.q), n)
                    got = model.first_draft_law()
                    for i in range(V):
                        st.add("conditional-poisson.first_draft_law[V=50,400]",
                               rel_err(float(got[i]), want[i] / n), f"{label} i={i}")
                    raw64 = np.asarray(raw, dtype=np.float64)
                    weights = cm.scaled_inclusion_weights(raw64, n)
                    law = weights / weights.sum()  # proportional to the inclusion probabilities
                    want = exact_inclusion(fr(raw64), n)
                    for i in range(V):
                        st.add("containment.scaled_inclusion_weights[V=50,400]",
                               rel_err(float(law[i]), want[i] / n), f"{label} raw i={i}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--vmax", type=int, default=8)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    with np.errstate(all="ignore"):
        st = run(args.seeds, range(1, args.vmax + 1))
        audit_inclusion_large(st, args.seeds)
    rows = []
    print(f"{'method':58s} {'cases':>8s} {'worst':>10s} {'worst/u':>10s}  where")
    for key in sorted(st.count):
        worst = st.worst[key]
        rows.append({"method": key, "cases": st.count[key], "worst": worst, "where": st.where.get(key)})
        in_u = "" if key.endswith(BOUND) else f"{worst / U:10.3g}"
        print(f"{key:58s} {st.count[key]:8d} {worst:10.3g} {in_u:>10s}  {st.where.get(key, '')}")
    print(f"\n{len(st.failures)} failures")
    seen = set()
    for key, err, label in st.failures:
        if key not in seen:
            seen.add(key)
            print(f"  {key}: {err:.3g} at {label}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "failures": [list(f) for f in st.failures[:200]]}, fh, indent=1)
    return 1 if st.failures else 0


if __name__ == "__main__":
    sys.exit(main())
