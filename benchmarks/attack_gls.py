"""Adversarial check of the ``gls`` rule against an independent reference written from its definition.

The definition (Rowan, Phan and Khisti 2025, Algorithm 1 at one token): n races of V iid Exp(1) times
S[k, i]; draft k is argmin_i S[k, i]/q_i; the output is argmin_i min_k S[k, i]/p_i; accepted when the
output is a draft. The reference here is (a) a vectorised Monte Carlo of exactly that, and (b) the joint
law P(X = x, Y = y) by high-precision integration (mpmath) of single-race quantities derived directly
from the races' densities (inner integrals in closed form per linear piece, outer by mpmath.quad); it
shares no code with ``mdtheory/rules/gls.py`` or ``tests/reference_gls.py``.

Usage: ``python benchmarks/attack_gls.py [section ...]`` with sections among
``law mc select bounds edges rare torch``; none: all. Fixed seeds; prints every number it checks
and ends with the list of failures (exit status 1 when there is one).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from itertools import combinations_with_replacement, product

import mpmath as mp
import numpy as np
from scipy import stats

import mdtheory as md
from mdtheory.errors import MdtheoryError
from mdtheory.rules import make_rule

FAILURES: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("  ok   " if ok else "  FAIL ") + what)
    if not ok:
        FAILURES.append(what)


# ----------------------------------------------------------------------------- the reference
def definition_mc(p, q, n, N, rng, chunk=20_000):
    """(drafts (N, n), output (N,)) of the definition on fresh races."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    V = p.size
    xs, ys = [], []
    with np.errstate(divide="ignore", invalid="ignore"):
        for start in range(0, N, chunk):
            m = min(chunk, N - start)
            S = rng.standard_exponential((m, n, V))
            xs.append(np.argmin(np.where(q > 0, S / q, np.inf), axis=2))
            ys.append(np.argmin(np.where(p > 0, S.min(axis=1) / p, np.inf), axis=1))
    return np.concatenate(xs), np.concatenate(ys)


def _piece_integral(p, q, t, x, lo, hi, skip):
    """int_lo^hi q_x e^{-q_x m} prod_{i not in {x} u skip} e^{-max(q_i m, p_i t)} dm (mpmath, exact per
    linear piece; hi may be inf)."""
    V = len(p)
    others = [i for i in range(V) if i != x and i not in skip]
    cuts = sorted({p[i] * t / q[i] for i in others if q[i] > 0 and lo < p[i] * t / q[i] < hi})
    edges = [lo] + cuts + [hi]
    total = mp.mpf(0)
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        mid = (a + 1) if b == mp.inf else (a + b) / 2
        A, B = q[x], mp.mpf(0)  # exponent -(A m + B) on the piece
        for i in others:
            if q[i] * mid > p[i] * t:
                A += q[i]
            else:
                B += p[i] * t
        ea = mp.exp(-A * a - B)
        eb = mp.mpf(0) if b == mp.inf else mp.exp(-A * b - B)
        total += q[x] * (ea - eb) / A
    return total


def survive(p, q, t, x):
    """P(race drafts x and every S_i > p_i t)."""
    if q[x] == 0:
        return mp.mpf(0)
    rx = p[x] / q[x]
    return _piece_integral(p, q, t, x, rx * t, mp.inf, ())


def win_density(p, q, t, x, y):
    """Density in t of: the race's target minimum is at time t, won by y, and the race drafts x."""
    if p[y] == 0:
        return mp.mpf(0)
    own = p[y] * mp.exp(-p[y] * t)
    if x == y:
        if q[y] == 0:
            return mp.mpf(0)
        ry = p[y] / q[y]
        rest = sum(max(p[i] * t, q[i] * ry * t) for i in range(len(p)) if i != y)
        return own * mp.exp(-rest)
    if q[x] == 0:
        return mp.mpf(0)
    rx = p[x] / q[x]
    ry = mp.inf if q[y] == 0 else p[y] / q[y]
    if not ry > rx:
        return mp.mpf(0)
    return own * _piece_integral(p, q, t, x, rx * t, ry * t, (y,))


def joint(p, q, x, dps=25):
    """P(X = x, Y = y) for every y, X the ordered draft tuple, by mpmath integration over t."""
    mp.mp.dps = dps
    p = [mp.mpf(float(v)) for v in p]
    q = [mp.mpf(float(v)) for v in q]
    n, V = len(x), len(p)
    out = []
    for y in range(V):
        def f(t, y=y):
            s = mp.mpf(0)
            for k in range(n):
                term = win_density(p, q, t, x[k], y)
                if term == 0:
                    continue
                for j in range(n):
                    if j != k:
                        term *= survive(p, q, t, x[j])
                s += term
            return s
        # break the t axis at the time scales of every rate in play: n, and n Phi at the largest ratio
        fast = n * (1 + sum(max(q[i] * max(p[j] / q[j] for j in range(V) if q[j] > 0), p[i])
                            for i in range(V)))
        scales = sorted({mp.mpf(c) / lam for lam in (mp.mpf(n), fast)
                         for c in (0.01, 0.1, 0.5, 1, 2, 4, 8, 16, 32)})
        pts = [mp.mpf(0)] + scales + [mp.inf]
        out.append(mp.quad(f, pts))
    return out


def acceptance_ref(p, q, n, dps=25):
    """1 - sum_y n int (density of a race winning y at t, not drafting y) (P(race drafts another token
    and survives t))^(n-1) dt, by mpmath."""
    mp.mp.dps = dps
    p = [mp.mpf(float(v)) for v in p]
    q = [mp.mpf(float(v)) for v in q]
    V = len(p)
    finite = [p[j] / q[j] for j in range(V) if q[j] > 0]
    fast = n * (1 + sum(max(q[i] * max(finite), p[i]) for i in range(V)))
    scales = sorted({mp.mpf(c) / lam for lam in (mp.mpf(n), fast) for c in (0.01, 0.1, 0.5, 1, 2, 4, 8, 16,
                                                                           32, 64)})
    lost = mp.mpf(0)
    for y in range(V):
        def f(t, y=y):
            win = sum(win_density(p, q, t, x, y) for x in range(V) if x != y)
            if win == 0:
                return win
            return n * win * sum(survive(p, q, t, x) for x in range(V) if x != y) ** (n - 1)
        lost += mp.quad(f, [mp.mpf(0)] + scales + [mp.inf])
    return 1 - lost


def law_identical(p, q, x, n, dps=30):
    """P(Y = y | n drafts all equal to x) for every y: n f(t; x, y) G_x(t)^(n-1) / q_x^n, by mpmath."""
    mp.mp.dps = dps
    p = [mp.mpf(float(v)) for v in p]
    q = [mp.mpf(float(v)) for v in q]
    V = len(p)
    fast = n * (1 + sum(max(q[i] * max(p[j] / q[j] for j in range(V) if q[j] > 0), p[i]) for i in range(V)))
    pts = [mp.mpf(0)] + sorted({mp.mpf(c) / lam for lam in (mp.mpf(n), fast)
                                for c in (0.01, 0.1, 0.5, 1, 2, 4, 8, 16, 32, 64, 128)}) + [mp.inf]
    out = []
    for y in range(V):
        def f(t, y=y):
            return n * win_density(p, q, t, x, y) * survive(p, q, t, x) ** (n - 1)
        out.append(mp.quad(f, pts) / q[x] ** n)
    return np.array([float(v) for v in out])


# ----------------------------------------------------------------------------- instances
def small_instances():
    rng = np.random.default_rng(7)
    out = []
    for _ in range(8):
        V, n = int(rng.integers(2, 5)), int(rng.integers(1, 4))
        out.append((rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V) * 0.5), n))
    out += [
        (np.array([0.2, 0.3, 0.5]), np.array([0.2, 0.3, 0.5]), 2),            # p = q
        (np.array([0.5, 0.5, 0.0]), np.array([0.0, 0.0, 1.0]), 2),            # disjoint supports
        (np.array([0.6, 0.0, 0.4]), np.array([0.3, 0.5, 0.2]), 2),            # p_i = 0 < q_i
        (np.array([0.3, 0.5, 0.2]), np.array([0.6, 0.0, 0.4]), 3),            # q_i = 0 < p_i
        (np.array([0.25, 0.25, 0.25, 0.25]), np.array([0.4, 0.1, 0.4, 0.1]), 2),  # ties in ratios
        (np.array([1.0, 0.0, 0.0]), np.array([0.2, 0.3, 0.5]), 2),            # target point mass
        (np.array([0.2, 0.3, 0.5]), np.array([0.0, 1.0, 0.0]), 2),            # draft point mass
        (np.array([0.5, 0.5 - 1e-9, 1e-9]), np.array([1e-6, 0.5, 0.5 - 1e-6]), 2),  # large ratios
    ]
    return out


def section_law():
    """rule.law(x) against the mpmath joint / Q(x) on every draft multiset of the small instances."""
    print("[law] rule.law(x) vs independent mpmath integration, every draft tuple")
    worst = 0.0
    for idx, (p, q, n) in enumerate(small_instances()):
        r = make_rule("gls", p, q, n)
        V = p.size
        inst = 0.0
        acc = mp.mpf(0)
        out_law = [mp.mpf(0)] * V
        for x in product(range(V), repeat=n):
            if any(q[i] == 0 for i in x):
                continue
            jt = joint(p, q, x)
            Q = math.prod(float(q[i]) for i in x)
            mine = np.array([float(v) / Q for v in jt])
            err = float(np.abs(r.law(np.array(x)) - mine).max())
            inst = max(inst, err)
            acc += sum(jt[i] for i in set(x))
            out_law = [a + b for a, b in zip(out_law, jt, strict=True)]
        worst = max(worst, inst)
        e_acc = abs(r.exact_acceptance() - float(acc))
        e_out = float(np.abs(np.array([float(v) for v in out_law]) - p).max())
        e_enum = abs(r.enumerate()[0] - float(acc))
        print(f"  instance {idx:2d} V={V} n={n}: max|law - ref| {inst:.2e}, |exact_acceptance - ref| "
              f"{e_acc:.2e}, |enumerate - ref| {e_enum:.2e}, |ref output law - p| {e_out:.2e}")
        check(inst < 1e-10 and e_acc < 1e-10 and e_enum < 1e-10 and e_out < 1e-10,
              f"law/acceptance instance {idx}")
    print(f"  worst law error {worst:.2e}")
    print("[law] exact_acceptance vs mpmath acceptance integral, many drafts and extreme ratios")
    rng = np.random.default_rng(13)
    cases = [(rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4)), n) for n in (8, 32, 200, 1000)]
    cases += [(np.array([0.5, 0.5 - 1e-300, 1e-300]), np.array([0.5e-300, 0.5, 0.5 - 0.5e-300]), 16),
              (np.array([0.5, 0.5 - 1e-12, 1e-12]), np.array([1e-9, 0.5, 0.5 - 1e-9]), 64),
              (np.array([0.25, 0.25, 0.25, 0.25]), np.array([0.97, 0.01, 0.01, 0.01]), 500)]
    for p, q, n in cases:
        ref = float(acceptance_ref(p, q, n))
        acc = make_rule("gls", p, q, n).exact_acceptance()
        print(f"  V={p.size} n={n:4d}: exact_acceptance {acc:.15f} reference {ref:.15f} diff {acc - ref:.1e}")
        check(abs(acc - ref) < 1e-10, f"acceptance at n={n}")


def section_mc():
    """Definition Monte Carlo against the rule's exact joint law (chi-square over (multiset, y))."""
    print("[mc] definition MC vs rule's Q(x) * conditional, chi-square over (draft multiset, output)")
    rng = np.random.default_rng(11)
    for idx, (p, q, n) in enumerate(small_instances()):
        V = p.size
        N = 200_000
        xs, ys = definition_mc(p, q, n, N, rng)
        r = make_rule("gls", p, q, n)
        counts = Counter(zip(map(tuple, np.sort(xs, axis=1).tolist()), ys.tolist(), strict=True))
        cells, obs, exp = [], [], []
        for ms in combinations_with_replacement(range(V), n):
            if any(q[i] == 0 for i in ms):
                continue
            mult = math.factorial(n) / math.prod(math.factorial(c) for c in Counter(ms).values())
            Q = mult * math.prod(q[i] for i in ms)
            law = r.law(np.array(ms))
            for y in range(V):
                cells.append((ms, y))
                obs.append(counts.get((ms, y), 0))
                exp.append(N * Q * law[y])
        obs, exp = np.array(obs, float), np.array(exp)
        assert obs.sum() == N
        zero = exp < 1e-9
        stray = obs[zero].sum()  # outcomes the rule says are impossible
        big = exp >= 5
        o = np.append(obs[big], obs[~big & ~zero].sum())
        e = np.append(exp[big], exp[~big & ~zero].sum())
        keep = e > 0
        chi = float(((o[keep] - e[keep]) ** 2 / e[keep]).sum())
        dof = int(keep.sum()) - 1
        pval = float(stats.chi2.sf(chi, max(dof, 1)))
        acc_mc = float(np.mean((xs == ys[:, None]).any(axis=1)))
        acc = r.exact_acceptance()
        se = math.sqrt(max(acc * (1 - acc), 1e-12) / N)
        z = (acc_mc - acc) / se if se > 1e-6 else 0.0
        print(f"  instance {idx:2d}: chi2 {chi:8.1f} dof {dof:3d} p {pval:.3f}; stray {int(stray)}; "
              f"acceptance MC {acc_mc:.5f} exact {acc:.5f} z {z:+.2f}")
        check(pval > 1e-4 and stray == 0 and abs(z) < 4.5, f"definition MC instance {idx}")


def section_select():
    """select on iid drafts vs the definition, and select vs conditional for fixed drafts."""
    print("[select] rule.select: (drafts iid q, select) vs definition; fixed drafts vs conditional")
    rng = np.random.default_rng(3)
    for idx in (0, 3, 9, 11, 12):
        p, q, n = small_instances()[idx]
        V = p.size
        r = make_rule("gls", p, q, n)
        N = 40_000
        xs_def, ys_def = definition_mc(p, q, n, N, rng)
        xs = rng.choice(V, size=(N, n), p=q)
        ys = np.array([r.select(x, rng)[0] for x in xs])
        def key(a, b):
            return [(tuple(sorted(u)), v) for u, v in zip(a.tolist(), b.tolist(), strict=True)]
        ka, kb = Counter(key(xs_def, ys_def)), Counter(key(xs, ys))
        cells = sorted(set(ka) | set(kb))
        table = np.array([[ka.get(c, 0) for c in cells], [kb.get(c, 0) for c in cells]])
        table = table[:, table.sum(0) >= 10]
        chi, pval, dof, _ = stats.chi2_contingency(table)
        print(f"  instance {idx:2d}: two-sample chi2 {chi:.1f} dof {dof} p {pval:.3f}")
        check(pval > 1e-4, f"select joint law instance {idx}")
        x = xs[0]
        law = r.law(x)
        M = 30_000
        got = np.bincount([r.select(x, rng)[0] for _ in range(M)], minlength=V)
        ok = law > 0
        chi = float(((got[ok] - M * law[ok]) ** 2 / (M * law[ok])).sum())
        pval = float(stats.chi2.sf(chi, max(int(ok.sum()) - 1, 1)))
        print(f"    drafts {x.tolist()}: select vs conditional chi2 {chi:.1f} p {pval:.3f}, "
              f"impossible outputs drawn {int(got[~ok].sum())}")
        check(pval > 1e-4 and got[~ok].sum() == 0, f"select vs conditional instance {idx}")


def section_bounds():
    """list_matching_bound <= exact_acceptance <= alpha*, random and structured instances."""
    print("[bounds] LML <= acceptance <= alpha*")
    rng = np.random.default_rng(5)
    worst_hi, worst_lo, cnt = 1.0, 1.0, 0
    for _ in range(150):
        V = int(rng.choice([2, 3, 5, 10, 50, 300]))
        n = int(rng.choice([1, 2, 3, 4, 8, 16, 64]))
        a = float(rng.choice([0.05, 0.3, 1.0, 5.0]))
        p, q = rng.dirichlet(np.full(V, a)), rng.dirichlet(np.full(V, a))
        if rng.random() < 0.3:
            q[rng.random(V) < 0.3] = 0
            q = q / q.sum() if q.sum() > 0 else np.full(V, 1 / V)
        r = make_rule("gls", p, q, n)
        acc, lml, star = r.exact_acceptance(), r.list_matching_bound(), md.alpha_star(p, q, n)
        worst_hi = min(worst_hi, star - acc)
        worst_lo = min(worst_lo, acc - lml)
        cnt += 1
        if not (lml <= acc + 1e-12 and acc <= star + 1e-12):
            check(False, f"bounds V={V} n={n}: lml {lml} acc {acc} alpha* {star}")
        if n == 1 and abs(acc - lml) > 1e-12:
            check(False, f"n = 1 acceptance {acc} != LML {lml}")
    print(f"  {cnt} instances: min(alpha* - acc) {worst_hi:.3e}, min(acc - LML) {worst_lo:.3e}")
    check(worst_hi >= -1e-12 and worst_lo >= -1e-12, "bounds on random instances")


def section_edges():
    """Edge cases: the exact acceptance and law by definition MC or known values; bad input named."""
    print("[edges]")
    rng = np.random.default_rng(9)

    def mc_acc(p, q, n, N=100_000):
        xs, ys = definition_mc(p, q, n, N, rng, chunk=max(1, 4_000_000 // (n * p.size)))
        return float(np.mean((xs == ys[:, None]).any(axis=1)))

    def compare(label, p, q, n, N=100_000, **kw):
        try:
            r = make_rule("gls", p, q, n, **kw)
            acc = r.exact_acceptance()
        except MdtheoryError as e:
            print(f"  {label}: refused: {type(e).__name__}: {e}")
            return None
        m = mc_acc(np.asarray(p, float), np.asarray(q, float), n, N)
        se = math.sqrt(max(acc * (1 - acc), 1 / N) / N)
        z = (m - acc) / se
        print(f"  {label}: exact {acc:.6f} MC {m:.6f} z {z:+.2f} (LML {r.list_matching_bound():.6f})")
        check(abs(z) < 4.5 and np.isfinite(acc), label)
        return r

    u = np.full(5, 0.2)
    compare("p = q, n=3", u, u, 3)
    compare("disjoint supports", np.array([0.5, 0.5, 0, 0]), np.array([0, 0, 0.5, 0.5]), 3)
    compare("ties (equal ratios)", np.array([0.1, 0.1, 0.4, 0.4]), np.array([0.2, 0.2, 0.3, 0.3]), 2)
    compare("V = 1", np.array([1.0]), np.array([1.0]), 4)
    compare("V = 2, n = 1", np.array([0.9, 0.1]), np.array([0.2, 0.8]), 1)
    compare("subnormal q (1e-310)", np.array([0.5, 0.5 - 1e-310, 1e-310]),
            np.array([1e-310, 0.5, 0.5 - 1e-310]), 2)
    compare("subnormal p and q", np.array([0.5, 0.5, 1e-310]), np.array([0.5, 0.5, 1e-310]), 2,
            normalize=True)
    compare("huge ratio p/q = 1e300", np.array([0.5, 0.5 - 1e-300, 1e-300]),
            np.array([0.5e-300, 0.5, 0.5 - 0.5e-300]), 3)
    compare("float32 inputs", np.array([0.1, 0.2, 0.7], np.float32), np.array([0.3, 0.3, 0.4], np.float32),
            2, normalize=True)
    V = 200
    p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
    compare("n = 64, V = 200", p, q, 64, N=20_000)
    # subnormal draft: the law given that draft, by the reference
    p3, q3 = np.array([0.5, 0.25, 0.25]), np.array([1e-310, 0.5, 0.5 - 1e-310])
    r = make_rule("gls", p3, q3, 1)
    jt = joint(p3, q3, (0,))
    mine = [float(v / mp.mpf(1e-310)) for v in jt]
    print(f"  law given a draft of q = 1e-310: rule {r.law(np.array([0])).round(6).tolist()}, "
          f"reference {np.round(mine, 6).tolist()}")
    check(np.abs(r.law(np.array([0])) - mine).max() < 1e-6, "law given a subnormal-probability draft")
    # large n, large V: cost and refusal
    import time
    for V, n in ((32_000, 8), (32_000, 64), (1000, 1000)):
        p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
        t0 = time.perf_counter()
        try:
            r = make_rule("gls", p, q, n)
            acc = r.exact_acceptance()
            t1 = time.perf_counter()
            x = rng.choice(V, size=n, p=q)
            r.select(x, rng)
            t2 = time.perf_counter()
            print(f"  V={V} n={n}: acceptance {acc:.6f} LML {r.list_matching_bound():.6f} alpha* "
                  f"{md.alpha_star(p, q, n):.6f}; prepare+acceptance {t1 - t0:.2f}s, one select "
                  f"{t2 - t1:.3f}s")
            check(r.list_matching_bound() <= acc + 1e-12, f"bound at V={V} n={n}")
        except MdtheoryError as e:
            print(f"  V={V} n={n}: refused: {type(e).__name__}: {e}")
    # bad input
    bad = {
        "NaN in p": (np.array([np.nan, 0.5, 0.5]), np.array([0.2, 0.3, 0.5]), 2),
        "negative q": (np.array([0.2, 0.3, 0.5]), np.array([-0.1, 0.6, 0.5]), 2),
        "wrong shape": (np.ones((2, 2)) / 4, np.ones((2, 2)) / 4, 2),
        "length mismatch": (np.array([0.5, 0.5]), np.array([0.2, 0.3, 0.5]), 2),
        "n = 0": (np.array([0.5, 0.5]), np.array([0.5, 0.5]), 0),
        "n = 2.5": (np.array([0.5, 0.5]), np.array([0.5, 0.5]), 2.5),
        "inf in q": (np.array([0.5, 0.5]), np.array([np.inf, 0.5]), 2),
        "empty": (np.array([]), np.array([]), 2),
    }
    for label, (p, q, n) in bad.items():
        try:
            make_rule("gls", p, q, n)
            check(False, f"bad input {label} accepted")
        except MdtheoryError as e:
            print(f"  {label}: {type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - the point is to catch the wrong kind
            check(False, f"bad input {label}: {type(e).__name__}: {e}")
    r = make_rule("gls", [0.5, 0.5, 0.0], [0.5, 0.5, 0.0], 2)
    for label, x in {"draft out of range": [0, 3], "negative draft": [-1, 0], "float drafts": [0.0, 1.0],
                     "wrong count": [0, 1, 1], "draft of q = 0": [0, 2]}.items():
        for meth in ("select", "conditional"):
            try:
                getattr(r, meth)(np.array(x))
                check(False, f"{meth}({label}) accepted")
            except MdtheoryError as e:
                print(f"  {meth}({label}): {type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001
                check(False, f"{meth}({label}): {type(e).__name__}: {e}")
    r = make_rule("gls", [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], 2)
    for races in (np.ones((2, 2)), -np.ones((2, 3)), np.full((2, 3), np.nan)):
        try:
            r.couple(races)
            check(False, "couple accepted bad races")
        except MdtheoryError as e:
            print(f"  couple: {type(e).__name__}: {e}")


def ignored_acceptance(p, q, n):
    """Acceptance when the output is drawn from p independently of iid q drafts:
    sum_y p_y (1 - (1 - q_y)^n)."""
    return float(np.sum(p * -np.expm1(n * np.log1p(-np.minimum(q, 1.0)))))


def section_rare():
    """Draft tuples of joint probability below 1e-280: the law and the steps still condition on them."""
    print("[rare]")
    from mdtheory._synthetic import SERVING, llm_pairs
    rng = np.random.default_rng(1)
    for label, V, n in (("Dirichlet(1)", 1000, 64), ("Dirichlet(1)", 1000, 100),
                        ("Dirichlet(1)", 32000, 64), ("LLM-like serving", 32000, 64),
                        ("LLM-like serving", 32000, 256), ("LLM-like serving", 1000, 256)):
        if label.startswith("Dirichlet"):
            p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
        else:
            p, q = (a[0] for a in llm_pairs(rng, 1, V, noise=SERVING[0], temperature=SERVING[1]))
        r = make_rule("gls", p, q, n)
        xs = rng.choice(V, size=(2000, n), p=q)
        below = float(np.mean(np.log(q[xs]).sum(1) < math.log(1e-280)))
        print(f"  {label} V={V} n={n}: share of iid drafts below 1e-280 {below:.3f}; exact_acceptance "
              f"{r.exact_acceptance():.4f}; acceptance if drafts ignored {ignored_acceptance(p, q, n):.4f}")
    r = make_rule("gls", [0.5, 0.5], [0.5, 0.5], 1000)
    law = r.law(np.zeros(1000, dtype=int))
    print(f"  p = q = (1/2, 1/2), n = 1000, drafts all 0: law {law.tolist()} (exact: [1, 0]; acceptance "
          f"is {r.exact_acceptance()})")
    check(abs(law[0] - 1) < 1e-9, "law given drafts all 0 at p = q, n = 1000")
    p, q = np.array([5e-4, 0.2, 0.7995]), np.array([1e-3, 0.4995, 0.4995])
    for n in (90, 95):
        got, ref = make_rule("gls", p, q, n).law(np.zeros(n, dtype=int)), law_identical(p, q, 0, n)
        print(f"  p {p.tolist()}, q {q.tolist()}, n = {n} drafts of token 0 (Q = 1e-{3 * n}): law "
              f"{got.round(6).tolist()}, reference {ref.round(6).tolist()}")
        check(np.abs(got - ref).max() < 1e-9, f"law given {n} drafts of token 0")
    rng = np.random.default_rng(0)
    V, n = 1000, 128
    p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
    r = make_rule("gls", p, q, n)
    mc = r.monte_carlo(1000, 0)
    lo, hi = (float(v) for v in mc["ci95"])
    print(f"  V={V} n={n}: rule.monte_carlo(1000) {mc['acceptance']:.4f} 95% [{lo:.4f}, {hi:.4f}] vs "
          f"exact_acceptance {r.exact_acceptance():.4f}")
    check(lo <= r.exact_acceptance() <= hi, "rule.monte_carlo's CI holds exact_acceptance at V=1000 n=128")
    N = 1500
    xs = rng.choice(V, size=(N, n), p=q)
    below = float(np.mean(np.log(q[xs]).sum(1) < math.log(1e-280)))
    sel = float(np.mean([r.select(x, rng)[1] for x in xs]))
    xd, yd = definition_mc(p, q, n, N, rng, chunk=200)
    dfn = float(np.mean((xd == yd[:, None]).any(axis=1)))
    acc = r.exact_acceptance()
    print(f"  Dirichlet(1) V={V} n={n}: share of drafts below 1e-280 {below:.2f}; exact_acceptance "
          f"{acc:.4f}; select's acceptance {sel:.4f}; definition MC {dfn:.4f} (N={N})")
    check(abs(sel - acc) < 5 * math.sqrt(0.25 / N), "select's acceptance at V=1000 n=128")


def section_torch():
    """TorchGLS (CPU) against the numpy rule's law given fixed drafts, float32 and float64."""
    print("[torch]")
    import torch

    from mdtheory.torch_bridge.rules import TorchGLS
    rng = np.random.default_rng(2)
    for dtype in (torch.float64, torch.float32):
        for idx in (0, 3, 11, 12, 13):
            p, q, n = small_instances()[idx]
            V = p.size
            r = make_rule("gls", p, q, n)
            x = rng.choice(V, size=n, p=q)
            B = 100_000
            P = torch.tensor(np.tile(p, (B, 1)), dtype=dtype)
            Qt = torch.tensor(np.tile(q, (B, 1)), dtype=dtype)
            g = torch.Generator().manual_seed(idx)
            tok, acc = TorchGLS(P, Qt, n).step(torch.tensor(np.tile(x, (B, 1))), g)
            got = np.bincount(tok.numpy(), minlength=V)
            law = r.law(x)
            ok = law > 0
            chi = float(((got[ok] - B * law[ok]) ** 2 / (B * law[ok])).sum())
            pval = float(stats.chi2.sf(chi, max(int(ok.sum()) - 1, 1)))
            acc_ok = bool((acc.numpy() == np.isin(tok.numpy(), x)).all())
            print(f"  {str(dtype):13s} instance {idx:2d} drafts {x.tolist()}: chi2 {chi:.1f} p {pval:.3f}, "
                  f"impossible {int(got[~ok].sum())}, accepted flag consistent {acc_ok}")
            check(pval > 1e-4 and got[~ok].sum() == 0 and acc_ok, f"torch {dtype} instance {idx}")
    # rows of different (p, q), iid drafts: acceptance against exact
    B, V, n = 4, 6, 3
    ps, qs = rng.dirichlet(np.ones(V), B), rng.dirichlet(np.ones(V), B)
    R = 50_000
    P = torch.tensor(np.repeat(ps, R, 0))
    Qt = torch.tensor(np.repeat(qs, R, 0))
    xs = torch.multinomial(Qt, n, replacement=True, generator=torch.Generator().manual_seed(1))
    _, acc = TorchGLS(P, Qt, n).step(xs, torch.Generator().manual_seed(2))
    for b in range(B):
        ex = make_rule("gls", ps[b], qs[b], n).exact_acceptance()
        m = float(acc[b * R:(b + 1) * R].double().mean())
        z = (m - ex) / math.sqrt(ex * (1 - ex) / R)
        print(f"  batched row {b}: acceptance {m:.4f} exact {ex:.4f} z {z:+.2f}")
        check(abs(z) < 4.5, f"torch batched row {b}")
    for label, (pp, qq) in {
        "NaN": (torch.tensor([[np.nan, 0.5, 0.5]]), torch.tensor([[0.2, 0.3, 0.5]])),
        "negative": (torch.tensor([[0.2, 0.3, 0.5]]), torch.tensor([[-0.1, 0.6, 0.5]])),
        "1-D": (torch.tensor([0.5, 0.5]), torch.tensor([0.5, 0.5])),
        "shape mismatch": (torch.tensor([[0.5, 0.5]]), torch.tensor([[0.2, 0.3, 0.5]])),
        "not normalised": (torch.tensor([[0.5, 0.6]]), torch.tensor([[0.5, 0.5]])),
    }.items():
        try:
            TorchGLS(pp, qq, 2)
            check(False, f"TorchGLS accepted {label}")
        except MdtheoryError as e:
            print(f"  TorchGLS {label}: {type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001
            check(False, f"TorchGLS {label}: {type(e).__name__}: {e}")
    # every batched rule's step checks its drafts (TorchRule.check_drafts)
    from mdtheory.torch_bridge import TORCH_RULES
    for name, cls in TORCH_RULES.items():
        half = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
        t = cls(half, half, 2)
        for label, d in {"out of range": torch.tensor([[0, 5]]), "wrong n": torch.tensor([[0, 1, 1]]),
                         "negative": torch.tensor([[-1, 0]])}.items():
            try:
                out = t.step(d)
                check(False, f"Torch {name}.step drafts {label}: returned {tuple(v.tolist() for v in out)}")
            except MdtheoryError as e:
                print(f"  {name}.step drafts {label}: {type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001
                check(False, f"Torch {name}.step drafts {label}: raw {type(e).__name__}: {str(e)[:60]}")
    # draft tuples of joint probability below 1e-280: torch and numpy both condition on them
    rng = np.random.default_rng(0)
    V, n, B = 1000, 128, 400
    p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
    r = make_rule("gls", p, q, n)
    xs = rng.choice(V, size=(B, n), p=q)
    P, Qt = torch.tensor(np.tile(p, (B, 1))), torch.tensor(np.tile(q, (B, 1)))
    _, acc = TorchGLS(P, Qt, n).step(torch.tensor(xs), torch.Generator().manual_seed(0))
    ta = float(acc.double().mean())
    na = float(np.mean([r.select(x, rng)[1] for x in xs]))
    ex = r.exact_acceptance()
    print(f"  V={V} n={n} (every tuple below 1e-280), {B} steps: torch acceptance {ta:.4f}, numpy select "
          f"{na:.4f}, exact_acceptance {ex:.4f}")
    check(abs(ta - na) < 5 * math.sqrt(0.5 / B), "torch and numpy select agree at V=1000 n=128")


SECTIONS = {"law": section_law, "mc": section_mc, "select": section_select, "bounds": section_bounds,
            "edges": section_edges, "rare": section_rare, "torch": section_torch}

if __name__ == "__main__":
    for name in sys.argv[1:] or list(SECTIONS):
        SECTIONS[name]()
    print("failures:", FAILURES or "none")
    sys.exit(1 if FAILURES else 0)
