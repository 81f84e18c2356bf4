"""alpha* of iid drafts without a sort (mdtheory.routes.select): the buckets' bracket against the sort
route, exact rationals and 50-digit decimals, on random, language-model-like, tied, subnormal, float32,
zero-mass and huge-n instances; the certificate's bounds and its refusals."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

import mdtheory as md
from mdtheory import _jit, certify, solve
from mdtheory._validate import as_distribution
from mdtheory.routes.select import SELECT_MIN_V, bracket, bucket_scheme, select_scan
from mdtheory.routes.subsets import TIE_TOL

from .instances import random_pair
from .reference_decimal import decimal_alpha
from .tolerances import ROUNDING


def llm_pair(V: int, seed: int = 0, temperature: float = 1.3):
    """Zipf-like target logits; the draft's are perturbed and tempered (as benchmarks/bench_speed.py)."""
    rng = np.random.default_rng(seed)
    logits = -1.1 * np.log(np.arange(1, V + 1)) + 0.5 * rng.standard_normal(V)
    p = np.exp(logits - logits.max())
    q = np.exp((logits + 0.8 * rng.standard_normal(V)) / temperature)
    return p / p.sum(), q / q.sum()


def exact_alpha(p, q, n: int) -> Fraction:
    """1 + min over all token sets of p(T) - q(T)^n in exact rationals (the floats' exact values)."""
    P, Q = [Fraction(float(x)) for x in p], [Fraction(float(x)) for x in q]
    best = Fraction(0)
    for k in range(1, len(P) + 1):
        for T in combinations(range(len(P)), k):
            best = min(best, sum(P[i] for i in T) - sum(Q[i] for i in T) ** n)
    return 1 + best


def both(p, q, n, **kw):
    """The select route's and the sort route's results on one instance, each proven."""
    sel = md.optimal_acceptance(p, q, n, method="select", **kw)
    srt = md.optimal_acceptance(p, q, n, method="prefix", **kw)
    assert sel.status == srt.status == "optimal"
    assert sel.certificate == ("lex-base" if kw.get("certify") == "full" else "bracket")
    assert abs(sel.certificate_gap) <= certify.CERT_TOL
    return sel, srt


def check_cut(res, p, q, n, tol=ROUNDING):
    """The cut's value, recomputed here, is the result's value; the cut is a prefix of the ratio
    order: every token outside has a ratio p/q at least that of every token inside."""
    p, q = as_distribution(p, "p"), as_distribution(q, "q")
    inside = np.zeros(p.size, bool)
    inside[res.cut] = True
    value = 1.0 + p[inside].sum() - min(q[inside].sum(), 1.0) ** n
    assert value == pytest.approx(res.value, abs=tol)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.where(q >= 2.0**-600, np.where(p >= 2.0**-600, p, 0.0) / q, np.inf)
    if inside.any() and (~inside).any():
        assert r[inside].max() <= r[~inside].min()


@pytest.mark.parametrize("seed", range(3))
def test_small_instances_match_exact_rationals(seed):
    """Every subset in exact rationals, at V <= 9 with zeros in p and q."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        V, n = int(rng.integers(1, 10)), int(rng.integers(1, 7))
        p, q = random_pair(rng, V, float(rng.choice([0.2, 1.0, 5.0])))
        p[rng.random(V) < 0.2] = 0.0
        q[rng.random(V) < 0.2] = 0.0
        if p.sum() == 0 or q.sum() == 0:
            continue
        p, q = p / p.sum(), q / q.sum()
        res = md.optimal_acceptance(p, q, n, method="select")
        assert res.status == "optimal" and res.certificate == "bracket"
        exact = exact_alpha(as_distribution(p, "p"), as_distribution(q, "q"), n)
        assert res.value == pytest.approx(float(exact), abs=1e-14)
        check_cut(res, p, q, n, 1e-14)


@pytest.mark.parametrize("V", [SELECT_MIN_V, 5000, 40000])
@pytest.mark.parametrize("n", [1, 2, 4, 8, 64, 1000, 2**20])
def test_language_model_pairs_match_the_sort_route(V, n):
    p, q = llm_pair(V, seed=V + n)
    sel, srt = both(p, q, n)
    assert sel.method == "select" and md.optimal_acceptance(p, q, n).method == "select"
    assert sel.value == pytest.approx(srt.value, abs=1e-14)
    check_cut(sel, p, q, n)


@pytest.mark.parametrize("concentration", [0.05, 0.3, 1.0, 10.0])
def test_dirichlet_pairs_match_the_sort_route(concentration):
    rng = np.random.default_rng(int(concentration * 100))
    for V, n in [(3000, 3), (9000, 16), (20000, 2)]:
        p, q = random_pair(rng, V, concentration)
        sel, srt = both(p, q, n)
        assert sel.value == pytest.approx(srt.value, abs=1e-14)
        check_cut(sel, p, q, n)


def test_ties_are_classes_of_equal_ratio():
    """p = q (every ratio 1: alpha* = 1, empty cut); p proportional to q on blocks of 1,000 tokens
    (a few classes, each far larger than a bucket's share); ratios repeated across the opened
    buckets; the cut never splits a class."""
    rng = np.random.default_rng(3)
    q = rng.dirichlet(np.ones(6000))
    sel, srt = both(q, q, 4)
    assert sel.value == srt.value == 1.0 and sel.cut.size == 0
    blocks = np.repeat(rng.uniform(0.2, 3.0, 6), 1000)
    for p in (q * blocks, q * np.round(blocks * 4) / 4, q * rng.choice([0.5, 1.0, 2.0], 6000)):
        p = p / p.sum()
        for n in (1, 2, 5, 40):
            sel, srt = both(p, q, n)
            assert sel.value == pytest.approx(srt.value, abs=1e-14)
            check_cut(sel, p, q, n)
            r = p / q
            inside = np.zeros(q.size, bool)
            inside[sel.cut] = True
            assert not np.isin(r[inside], r[~inside]).any()  # whole classes only


def test_zero_masses_are_exact():
    """p = 0 < q (ratio 0, first), q = 0 < p (ratio inf), p = q = 0 (NaN, last) and masses below
    TINY, against the sort route and the exact rationals."""
    rng = np.random.default_rng(5)
    for _ in range(10):
        V = 4000
        p, q = random_pair(rng, V, 0.5)
        p[rng.random(V) < 0.1] = 0.0
        q[rng.random(V) < 0.1] = 0.0
        both_zero = rng.random(V) < 0.05
        p[both_zero] = q[both_zero] = 0.0
        p[rng.random(V) < 0.02] = 1e-300
        q[rng.random(V) < 0.02] = 5e-324
        p, q = p / p.sum(), q / q.sum()
        for n in (1, 3, 30):
            sel, srt = both(p, q, n)
            assert sel.value == pytest.approx(srt.value, abs=1e-14)
    small = [([0.0, 0.5, 0.5, 0.0], [0.2, 0.0, 0.4, 0.4], 2), ([1e-320, 0.5, 0.5], [0.9, 0.05, 0.05], 2),
             ([1.0, 5e-324], [0.0, 1.0], 1), ([0.25] * 4, [0.5, 0.5, 0.0, 0.0], 2)]
    for p, q, n in small:
        p, q = np.array(p) / np.sum(p), np.array(q) / np.sum(q)
        res = md.optimal_acceptance(p, q, n, method="select")
        assert res.status == "optimal"
        assert res.value == pytest.approx(float(exact_alpha(p, q, n)), abs=1e-15)


def test_subnormal_and_float32_masses():
    """A float32 softmax over 32,000 tokens (each cast to float64 and divided by its sum by the
    validation) and a q whose tail is subnormal."""
    rng = np.random.default_rng(7)
    z = (3.0 * rng.standard_normal(32000)).astype(np.float32)
    p32 = np.exp(z - z.max())
    q32 = np.exp(1.2 * (z + 0.5 * rng.standard_normal(32000).astype(np.float32)))
    p32, q32 = p32 / p32.sum(), (q32 / q32.sum()).astype(np.float32)
    for n in (2, 8):
        sel, srt = both(p32, q32, n)
        assert sel.value == pytest.approx(srt.value, abs=1e-14)
    p, q = llm_pair(8000, seed=9)
    q[::7] *= 1e-310  # subnormal draft masses
    q /= q.sum()
    for n in (1, 4, 100):
        sel, srt = both(p, q, n)
        assert sel.value == pytest.approx(srt.value, abs=1e-14)
        check_cut(sel, p, q, n)


@pytest.mark.parametrize("n", [4, 2**40, 2**53])
def test_subnormal_masses_at_huge_n_alone(n):
    """A fifth of p and of q subnormal (ratios p/q that overflow to infinity, and subnormal ones),
    up to n = 2^53, where q's float sum, an ulp off one, raised to the power n would move alpha*
    by up to e^(±1): the value alone (alpha_star, its threshold measured by the certificate) and
    the full result against 60-digit decimals on the arrays as validated."""
    rng = np.random.default_rng(1)
    p, q = rng.dirichlet(np.full(SELECT_MIN_V, 0.1)), rng.dirichlet(np.full(SELECT_MIN_V, 0.1))
    p[rng.random(p.size) < 0.2] = 5e-320
    q[rng.random(q.size) < 0.2] = 3e-321
    p, q = p / p.sum(), q / q.sum()
    value = md.alpha_star(p, q, n)
    res = md.optimal_acceptance(p, q, n, method="select")
    assert res.status == "optimal" and res.value == value
    assert value == pytest.approx(decimal_alpha(as_distribution(p, "p"), as_distribution(q, "q"), n),
                                  abs=ROUNDING)


@pytest.mark.parametrize("n", [10**6, 10**12, 2**53])
def test_huge_n_keeps_the_distance_from_one(n):
    """Masses within ulps of one at n up to 2^53: the power from the complement's mass, against
    60-digit decimals and the sort route (which keeps the distance by compensated sums)."""
    p, q = [0.5, 0.0, 0.5, 0.0], [1 - 2**-53, 2**-54, 2**-55, 2**-55]
    res = md.optimal_acceptance(p, q, n, method="select")
    assert res.status == "optimal"
    assert res.value == pytest.approx(decimal_alpha(np.array(p), np.array(q), n), abs=ROUNDING)
    rng = np.random.default_rng(1)
    z = 3.0 * rng.standard_normal(SELECT_MIN_V)
    p = np.exp(z - z.max())
    q = np.exp(3 * (z - z.max()))
    p, q = as_distribution(p / p.sum(), "p"), as_distribution(q / q.sum(), "q")
    sel, srt = both(p, q, n)
    assert sel.value == pytest.approx(srt.value, abs=ROUNDING)
    assert sel.value == pytest.approx(decimal_alpha(p, q, n), abs=ROUNDING)


@pytest.mark.parametrize("mode", ["python", "numba"])
def test_interpreted_and_compiled_agree(mode, monkeypatch):
    p, q = llm_pair(3000, seed=11)
    monkeypatch.setattr(_jit, "FORCE", "numba")
    ref = select_scan(p, md.IID(q, 4))
    monkeypatch.setattr(_jit, "FORCE", mode)
    out = select_scan(p, md.IID(q, 4))
    assert out.value == ref.value and np.array_equal(out.cut, ref.cut)
    assert certify.check_buckets_iid(p, md.IID(q, 4), out.proof.scheme) == \
        pytest.approx(ref.value, abs=ROUNDING)


def test_few_tokens_are_opened_on_language_model_pairs():
    """The point of the buckets: on a language-model-like pair at V = 128,000 the tokens sorted
    are a few dozen at n >= 4 and below 2% of them at n = 1 (the gain is linear there), and the
    bracket closes (every other bucket's bound is below the
    best less the tie tolerance)."""
    p, q = llm_pair(128_000)
    for n in (1, 4, 16):
        found = bracket(p, q, n)
        opened_tokens = int(found.opened[found.digit].sum())
        assert 0 < opened_tokens <= (p.size // 50 if n == 1 else 100), (n, opened_tokens)
        assert found.closed < found.best - TIE_TOL


def test_any_monotone_buckets_give_a_lower_bound():
    """Soundness does not depend on the scheme: coarse, fine, shifted and one-bucket schemes all
    prove a lower bound below alpha*, and meet it."""
    rng = np.random.default_rng(13)
    for _ in range(6):
        p, q = random_pair(rng, 3000, float(rng.choice([0.1, 1.0])))
        n = int(rng.integers(1, 12))
        model = md.IID(q, n)
        alpha = md.alpha_star(p, q, n, method="prefix")
        for shift in (40, 46, 50, 52, 60, 63):
            lo = int(np.float64(2.0 ** -int(rng.integers(1, 60))).view(np.int64)) >> shift
            top = int(np.float64(2.0 ** 40).view(np.int64)) >> shift
            scheme = (shift, lo, max(min(top - lo, 60000), 0))
            lower = certify.check_buckets_iid(p, model, scheme)
            assert lower == pytest.approx(alpha, abs=1e-14), scheme
        assert certify.check_buckets_iid(p, model, (63, 0, 0)) == pytest.approx(alpha, abs=1e-14)


def test_bucket_scheme_covers_the_ratios_that_matter():
    for V, n in [(SELECT_MIN_V, 1), (128_000, 4), (10**6, 2**53)]:
        shift, lo, nb = bucket_scheme(V, n)
        top = np.int64((nb + lo) << shift).view(np.float64)
        assert top >= 2 * n and nb + 2 <= 65535
    assert bucket_scheme(SELECT_MIN_V - 1, 4) == (63, 0, 0)


@pytest.mark.parametrize("scheme", [(64, 0, 0), (46, -1, 10), (46, 62912, 70000), (20, 2**44, 10),
                                    (46, 62912), "buckets", (46.5, 62912, 10)])
def test_invalid_schemes_are_refused(scheme):
    p, q = llm_pair(100)
    with pytest.raises(md.SolverError, match="not a valid scheme"):
        certify.check_buckets_iid(p, md.IID(q, 2), scheme)


def _corrupt(monkeypatch, change):
    real = solve.METHODS["select"]

    def route(p, model):
        out = real(p, model)
        return dataclasses.replace(out, **change(out, p))

    monkeypatch.setitem(solve.METHODS, "select", dataclasses.replace(real, run=route))


@pytest.mark.parametrize("change, match", [
    (lambda out, p: {"value": out.value - 1e-6}, "cut set"),
    (lambda out, p: {"value": 1.0, "cut": out.cut[:0]}, "its bracket proves alpha"),
    (lambda out, p: {"cut": out.cut[:-3]}, "cut set"),
])
def test_a_wrong_value_or_cut_is_refused(monkeypatch, change, match):
    p, q = llm_pair(5000, seed=2)
    _corrupt(monkeypatch, change)
    with pytest.raises(md.SolverError, match=match):
        md.optimal_acceptance(p, q, 4, method="select")


def test_the_value_alone_is_the_results_value():
    """alpha_star asks the select route for no cut set (the certificate measures the route's
    threshold instead): the value is the full result's, bit for bit, one row or a batch."""
    for V, n in [(SELECT_MIN_V, 1), (20_000, 4), (20_000, 64), (5000, 2**40)]:
        p, q = llm_pair(V, seed=n % 97)
        assert md.alpha_star(p, q, n) == md.optimal_acceptance(p, q, n).value
    P = np.array([llm_pair(5000, seed)[0] for seed in range(3)])
    q = llm_pair(5000, seed=9)[1]
    assert md.alpha_star(P, q, 3).tolist() == [r.value for r in md.optimal_acceptance(P, q, 3)]


def test_the_certificate_opens_what_its_own_bounds_require():
    """The route's opened buckets only spare the certificate a second pass: claiming none, others or
    all of them proves the same bound; the masses it measures for the route's threshold are those
    of the route's cut set."""
    p, q = llm_pair(20_000, seed=4)
    model = md.IID(q, 4)
    p = as_distribution(p, "p")
    out = select_scan(p, model)
    lower, masses = certify._bucket_bounds(p, model, out.proof, "select")
    assert lower == pytest.approx(out.value, abs=ROUNDING)
    assert masses == pytest.approx(certify.cut_masses(p, model, out.cut), abs=1e-15)
    nb = out.proof.scheme[2]
    for opened in ([], [0, nb + 1], np.arange(nb + 2)):
        proof = dataclasses.replace(out.proof, opened=np.array(opened, np.int64))
        again, measured = certify._bucket_bounds(p, model, proof, "select")
        assert again == pytest.approx(lower, abs=1e-15)
        assert measured == pytest.approx(masses, abs=1e-15)


@pytest.mark.parametrize("change, match", [
    ({"opened": np.array([-1])}, "opened buckets"), ({"opened": np.array([10**6])}, "opened buckets"),
    ({"opened": np.array([1.5])}, "opened buckets"), ({"threshold": (3,)}, "not a threshold"),
    ({"threshold": (10**6, -1)}, "not a threshold"), ({"threshold": ("a", 1)}, "not a threshold"),
    ({"threshold": (3, -2)}, "not a threshold"),
])
def test_invalid_claims_are_refused(change, match):
    p, q = llm_pair(3000)
    model = md.IID(q, 2)
    proof = dataclasses.replace(select_scan(as_distribution(p, "p"), model).proof, **change)
    with pytest.raises(md.SolverError, match=match):
        certify._bucket_bounds(as_distribution(p, "p"), model, proof, "select")


@pytest.mark.parametrize("change, match", [
    (lambda out: {"value": out.value - 1e-6}, "its proof's threshold"),
    (lambda out: {"proof": dataclasses.replace(out.proof, threshold=(0, -1))}, "its proof's threshold"),
    (lambda out: {"value": 1.0, "proof": dataclasses.replace(out.proof, threshold=(0, -1))},
     "its bracket proves alpha"),
    (lambda out: {"proof": dataclasses.replace(out.proof, threshold=None)}, "returned no cut set"),
])
def test_a_wrong_value_or_threshold_is_refused(monkeypatch, change, match):
    """alpha_star's route gives no cut set: its value is checked against the threshold its proof
    describes, measured by the certificate."""
    p, q = llm_pair(5000, seed=2)
    real = solve.METHODS["select"]

    def route(p, model):
        out = real.cutless(p, model)
        return dataclasses.replace(out, **change(out))

    monkeypatch.setitem(solve.METHODS, "select", dataclasses.replace(real, cutless=route))
    with pytest.raises(md.SolverError, match=match):
        md.alpha_star(p, q, 4)


def test_other_draft_models_are_refused():
    p, q = llm_pair(3000)
    with pytest.raises(md.InvalidInputError, match="exact only for iid"):
        md.optimal_acceptance(p, q, 3, "without-replacement", method="select")
    with pytest.raises(md.SolverError, match="iid drafts only"):
        certify.check_buckets_iid(p, md.WithoutReplacement(q, 3), bucket_scheme(3000, 3))


def test_batches_and_full_certificates():
    rng = np.random.default_rng(17)
    P = rng.dirichlet(np.ones(3000), size=3)
    q = rng.dirichlet(np.ones(3000))
    values = md.alpha_star(P, q, 4)
    assert np.allclose(values, [md.alpha_star(p, q, 4, method="prefix") for p in P], atol=1e-14)
    sel, srt = both(P[0], q, 4, certify="full")
    assert sel.value == pytest.approx(srt.value, abs=1e-14)
    assert sel.base is not None
    assert np.minimum(P[0], sel.base).sum() == pytest.approx(sel.value, abs=ROUNDING)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_torch_buckets_match_the_numpy_route(dtype):
    """The torch form (torch_bridge.alpha_star, method "select") on language-model-like rows, ties,
    zeros in p and q and a subnormal draft tail, against the numpy select route (float64: a few
    roundings; float32: the rows' own rounding), n up to 64 (the torch forms take q(H)^n from the
    rounded mass, whose rounding n multiplies)."""
    torch = pytest.importorskip("torch")
    from mdtheory import torch_bridge as tb

    rows = [llm_pair(20_000, seed) for seed in range(3)]
    p, q = llm_pair(20_000, 5)
    rows.append((q, q))  # p = q: every ratio in one bucket
    p0, q0 = p.copy(), q.copy()
    p0[::5], q0[1::7] = 0.0, 0.0
    rows.append((p0 / p0.sum(), q0 / q0.sum()))
    q1 = q.copy()
    q1[::3] *= 1e-300
    rows.append((p, q1 / q1.sum()))
    P, Q = np.array([a for a, _ in rows]), np.array([b for _, b in rows])
    dt = getattr(torch, dtype)
    Pt, Qt = torch.tensor(P, dtype=dt), torch.tensor(Q, dtype=dt)
    tol = ROUNDING if dtype == "float64" else 1e-5
    for n in (1, 2, 4, 64):
        got = tb.alpha_star(Pt, Qt, n, "select").double().numpy()
        ref = np.array([md.alpha_star(a, b, n, normalize=True) for a, b in
                        zip(Pt.double().numpy(), Qt.double().numpy(), strict=True)])
        assert np.abs(got - ref).max() <= tol, n
