"""Polymatroid view: the closed-form lexicographic base, priority orders, and the two set-plan rules."""

import numpy as np
import pytest

import mdtheory as md
from mdtheory.models.polymatroid import base_polytope_violation, lex_optimal_base_iid, priority_marginal
from mdtheory.rules import make_rule

from .reference_lex_base import lex_optimal_base_cvxpy, lex_optimal_base_mnp


def pairs(seed, count, vmax=7):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        V, n = int(rng.integers(2, vmax + 1)), int(rng.integers(1, 5))
        c = float(rng.choice([0.3, 1.0, 3.0]))
        yield rng.dirichlet(np.full(V, c)), rng.dirichlet(np.full(V, c)), n


def test_lex_base_attains_alpha_and_lies_in_base_polytope():
    for p, q, n in pairs(1, 60):
        base = lex_optimal_base_iid(p, q, n)
        res = md.optimal_acceptance(p, q, n, method="subsets")
        assert np.minimum(p, base.mu).sum() == pytest.approx(res.value, abs=1e-12)
        assert base_polytope_violation(base.mu, md.IID(q, n)) <= 1e-12
        assert np.all(np.diff(base.slopes) > 0)
        if res.value < 1 - 1e-9:
            assert base.cut.tolist() == res.cut.tolist()  # slope > 1 blocks = the minimal cut


def test_lex_base_matches_cvxpy_program():
    for p, q, n in pairs(2, 15, vmax=6):
        if p.min() < 1e-4:
            continue
        mu = lex_optimal_base_cvxpy(p, md.IID(q, n))
        assert np.abs(mu - lex_optimal_base_iid(p, q, n).mu).max() <= 1e-6


@pytest.mark.parametrize("sampling", ["iid", "without-replacement", "conditional-poisson"])
def test_minimum_norm_point_base(sampling):
    """Wolfe's method on any draft model: the closed form for iid, cvxpy otherwise, and alpha*."""
    for p, q, n in pairs(6, 12, vmax=6):
        if np.count_nonzero(q) <= n or p.min() < 1e-4:
            continue
        model = md.make_draft_model(q, n, sampling)
        mix = lex_optimal_base_mnp(p, model)
        # the gap lives in the coordinates mu / sqrt(p): a rounding of 1e-16 in one Q(T), which a prefix
        # pass makes depend on the order of T's tokens, moves it by about 1e-16 / min(p)
        assert mix.gap <= max(1e-12, 1e-15 / p.min())
        assert mix.weights.min() > 0 and mix.weights.sum() == pytest.approx(1.0, abs=1e-14)
        exact = sum(w * priority_marginal(model, o) for w, o in zip(mix.weights, mix.orders, strict=True))
        assert np.abs(exact - mix.mu).max() <= 1e-14  # the mixture's marginal, kept exactly
        reference = (lex_optimal_base_iid(p, q, n).mu if sampling == "iid"
                     else lex_optimal_base_cvxpy(p, model))
        assert np.abs(mix.mu - reference).max() <= (1e-9 if sampling == "iid" else 1e-6)
        assert np.minimum(p, mix.mu).sum() == pytest.approx(md.alpha_star(p, q, n, sampling), abs=1e-9)
    with pytest.raises(md.InvalidInputError, match="p > 0"):
        lex_optimal_base_mnp(np.array([1.0, 0.0]), md.IID([0.5, 0.5], 2))


def test_lex_base_degenerate():
    base = lex_optimal_base_iid(np.array([0.0, 0.5, 0.5]), np.array([0.2, 0.4, 0.4]), 2)
    assert base.mu.sum() == pytest.approx(1.0)
    assert base.mu[0] == pytest.approx(0.2**2)  # p = 0 token keeps only what it must: Q({0})
    same = lex_optimal_base_iid(np.array([0.3, 0.7]), np.array([0.3, 0.7]), 3)
    assert same.mu == pytest.approx([0.3, 0.7]) and same.cut.size == 0


def test_priority_orders_are_vertices():
    rng = np.random.default_rng(3)
    for _p, q, n in pairs(3, 20, vmax=6):
        for model in (md.IID(q, n), md.Independent(rng.dirichlet(np.ones(q.size), size=n))):
            v = priority_marginal(model, rng.permutation(q.size))
            assert base_polytope_violation(v, model) <= 1e-12
            assert v.sum() == pytest.approx(1.0)
    assert priority_marginal(md.IID([0.5, 0.5], 2), [1, 0]).tolist() == [0.25, 0.75]
    with pytest.raises(md.InvalidInputError, match="permutation"):
        priority_marginal(md.IID([0.5, 0.5], 2), [0, 0])


@pytest.mark.parametrize("sampling", ["iid", "without-replacement", "conditional-poisson"])
def test_optimal_rule_reaches_alpha_star(sampling):
    for p, q, n in pairs(4, 12, vmax=6):
        if np.count_nonzero(q) < n:
            continue
        rule = make_rule("optimal", p, q, n, sampling=sampling)
        acc, law = rule.enumerate()
        assert acc == pytest.approx(md.alpha_star(p, q, n, sampling), abs=1e-9)
        assert 0.5 * np.abs(law - p).sum() <= 1e-12


@pytest.mark.slow
def test_gr_softmax_within_ten_tau():
    for tau in (1e-3, 1e-6):
        for p, q, n in pairs(5, 10, vmax=6):
            rule = make_rule("gr-softmax", p, q, n, tau=tau)
            gap = md.alpha_star(p, q, n) - rule.exact_acceptance()
            assert -1e-12 <= gap <= 10 * tau + 1e-9
            assert all(f["max_marginal_error"] <= tau for f in rule.fit.values())
    with pytest.raises(md.InvalidInputError, match="tolerance tau > 0"):
        make_rule("gr-softmax", [0.5, 0.5], [0.5, 0.5], 2, tau=0)


def test_lex_base_kernels_interpreted_and_compiled_agree(monkeypatch):
    """The base's kernels (mdtheory._jit) give the same bits interpreted and compiled, on pairs with
    zeros both ways, ties and masses below TINY."""
    from mdtheory import _jit

    rng = np.random.default_rng(12)
    for _ in range(5):
        p, q = rng.dirichlet(np.full(60, 0.3)), rng.dirichlet(np.full(60, 0.3))
        p[:4], q[4:8], p[8:10], q[8:10] = 0.0, 0.0, 1e-200, 1e-300  # p = 0 < q, q = 0 < p, ...
        p[10:20] = q[10:20] = 0.01  # ties
        p, q = p / p.sum(), q / q.sum()
        runs = []
        for mode in ("python", "numba"):
            monkeypatch.setattr(_jit, "FORCE", mode)
            runs.append(lex_optimal_base_iid(p, q, 3))
        a, b = runs
        for name in ("mu", "order", "bounds", "slopes"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
