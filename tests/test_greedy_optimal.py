"""The optimal rule on Hu et al.'s greedy draft set: closed form at any V, acceptance alpha*, law p."""

import math

import numpy as np
import pytest
from scipy import stats

import mdtheory as md
from mdtheory.models.greedy import Greedy
from mdtheory.rules import make_rule, optimal

from .tolerances import ROUNDING, SOLVER

Q5 = np.array([0.4, 0.3, 0.2, 0.1, 0.0])
SUB = 5e-324  # the smallest subnormal


def cases():
    """Random pairs and the edge cases: ties at the top boundary, zeros in p and q, p(top) = 0,
    n = 1, subnormal masses."""
    rng = np.random.default_rng(14)
    out = []
    for _ in range(20):
        V = int(rng.integers(2, 9))
        a = float(rng.choice([0.2, 1.0, 4.0]))
        p, q = rng.dirichlet(np.full(V, a)), rng.dirichlet(np.full(V, a))
        out.append((p, q, int(rng.integers(1, min(np.count_nonzero(q), 4) + 1))))
    out += [
        (np.full(5, 0.2), np.array([0.3, 0.2, 0.2, 0.2, 0.1]), 3),   # tie at the boundary
        (np.array([0.1, 0.0, 0.6, 0.3, 0.0]), np.full(5, 0.2), 3),    # all tied
        (np.array([0.0, 0.5, 0.0, 0.5, 0.0]), Q5, 2),                 # zeros in p
        (np.array([0.0, 0.0, 0.5, 0.5, 0.0]), Q5, 3),                 # p(top) = 0
        (np.array([0.0, 0.0, 0.0, 0.0, 1.0]), Q5, 3),                 # p(top) = 0, p on q = 0
        (np.array([1.0, 0.0, 0.0, 0.0, 0.0]), Q5, 2),                 # point mass on the top
        (np.array([0.1, 0.2, 0.3, 0.4, 0.0]), Q5, 4),                 # q~ on one token
        (np.array([0.3, 0.2, 0.1, 0.4, 0.0]), Q5, 1),                 # n = 1: single draft
        (np.array([SUB, 0.5, 0.5 - SUB, 0.0]), np.array([0.5, 0.5 - 2e-320, 2e-320, 0.0]), 2),
        (np.array([1e-310, 3e-320, 0.5, 0.5]), np.array([0.6, 0.4 - 1e-300, 1e-300, 0.0]), 3),
    ]
    return out


def ratio(num, den):
    """min(1, num / den) without overflow (1 where num >= den)."""
    return 1.0 if num >= den else num / den


def candidate_law(rule, c):
    """The candidate of Optimal's docstring, given the drawn token c: c with probability
    a(c) = min(1, p(c)/q~(c)), else a top token t with probability p(t)/p(top) (none if p(top) = 0)."""
    p, top = rule.p, rule.model.top
    a = ratio(p[c], rule.model.tail[c])
    cand = np.zeros(rule.V)
    cand[c] = a
    if p[top].sum() > 0:
        cand[top] = (1 - a) * (p[top] / p[top].sum())  # the share first: p(top) may be subnormal
    return cand


def candidate_form(rule, drafts):
    """The conditional law of that candidate and one speculative step against mu, from scratch."""
    p, mu = rule.p, rule.marginal
    accept = candidate_law(rule, drafts[-1]) * [ratio(a, b) for a, b in zip(p, mu, strict=True)]
    res = np.clip(p - mu, 0, None)
    res = res / res.sum() if res.sum() > 0 else p
    return accept, (1 - accept.sum()) * res


@pytest.mark.parametrize("case", range(len(cases())))
def test_exact_on_small_instances(case):
    """Enumerated acceptance = alpha* (subset and LP routes), law p, and the candidate form."""
    p, q, n = cases()[case]
    rule = make_rule("optimal", p, q, n, sampling="greedy")
    assert rule.greedy is not None and rule.mixture is None
    acceptance, law = rule.enumerate()
    assert acceptance == pytest.approx(md.alpha_star(p, q, n, "greedy"), abs=ROUNDING)
    assert acceptance == pytest.approx(md.alpha_star(p, q, n, "greedy", method="dual"), abs=SOLVER)
    assert rule.exact_acceptance() == pytest.approx(acceptance, abs=ROUNDING)  # sum min(p, mu)
    assert 0.5 * np.abs(law - p).sum() <= ROUNDING
    assert np.isfinite(rule.marginal).all()
    tuples = rule.model.tuple_law()
    mu = np.zeros(rule.V)
    for x, w in zip(tuples.tuples, tuples.probs, strict=True):
        a, r = rule.conditional(x)
        a_ref, r_ref = candidate_form(rule, x)
        assert np.abs(a - a_ref).max() <= ROUNDING and np.abs(r - r_ref).max() <= ROUNDING
        mu += w * candidate_law(rule, x[-1])
    assert np.abs(mu - rule.marginal).max() <= ROUNDING  # the candidate's exact law


def test_single_draft_when_n_is_one():
    p, q = np.array([0.3, 0.2, 0.1, 0.4]), np.array([0.1, 0.6, 0.2, 0.1])
    rule = make_rule("optimal", p, q, 1, sampling="greedy")
    assert rule.model.top.size == 0
    assert rule.exact_acceptance() == pytest.approx(np.minimum(p, q).sum(), abs=ROUNDING)


def test_no_lp_and_no_enumeration(monkeypatch):
    """Large V: neither the LP nor the minimum-norm point runs, nor any draft-set enumeration;
    the acceptance is alpha* by its closed form, summed in exact float arithmetic."""
    def refuse(*args, **kwargs):
        raise AssertionError("the greedy route must not solve")

    from mdtheory.routes import dual

    monkeypatch.setattr(dual, "dual_lp", refuse)
    monkeypatch.setattr(optimal, "min_norm_base", refuse)
    monkeypatch.setattr(Greedy, "set_law", refuse)
    monkeypatch.setattr(Greedy, "tuple_law", refuse)
    rng = np.random.default_rng(3)
    V, n = 128_000, 4
    p, q = rng.dirichlet(np.full(V, 0.3)), rng.dirichlet(np.full(V, 0.3))
    rule = make_rule("optimal", p, q, n, sampling="greedy")
    top = np.argsort(-q, kind="stable")[: n - 1]
    assert np.array_equal(rule.model.top, top)
    rest = np.setdiff1d(np.arange(V), top)
    alpha = math.fsum(p[top]) + math.fsum(np.minimum(p[rest], q[rest] / math.fsum(q[rest])))
    assert rule.exact_acceptance() == pytest.approx(alpha, abs=ROUNDING)


def test_chi_square_at_v_1000():
    """Monte Carlo at V = 1,000, n = 4: output counts against p, acceptance against alpha*."""
    rng = np.random.default_rng(7)
    V = 1000
    logits = -1.1 * np.log(np.arange(1, V + 1)) + 0.5 * rng.standard_normal(V)
    p = np.exp(logits - logits.max())
    q = np.exp((logits + 0.8 * rng.standard_normal(V)) / 1.3)
    p, q = p / p.sum(), q / q.sum()
    rule = make_rule("optimal", p, q, 4, sampling="greedy")
    N = 100_000
    mc = rule.monte_carlo(N, rng=11)
    expected = N * p
    big = expected >= 5
    observed = np.append(mc["counts"][big], mc["counts"][~big].sum())
    expected = np.append(expected[big], expected[~big].sum())
    assert stats.chisquare(observed, expected).pvalue > 1e-4
    lo, hi = mc["ci95"]
    alpha = md.alpha_star(p, q, 4, "greedy")
    assert lo - 0.005 <= alpha <= hi + 0.005
    assert rule.exact_acceptance() == pytest.approx(alpha, abs=ROUNDING)


def test_agrees_with_the_greedy_rule():
    """The optimal rule runs the greedy rule's verifier: the same conditional laws (its p is
    validated, so renormalised, once more: equal up to rounding) and step draws."""
    rng = np.random.default_rng(5)
    p, q = rng.dirichlet(np.ones(50)), rng.dirichlet(np.ones(50))
    rule, greedy = make_rule("optimal", p, q, 3, sampling="greedy"), make_rule("greedy", p, q, 3)
    x = greedy.model.sample(rng, 1)[0]
    for got, want in zip(rule.conditional(x), greedy.conditional(x), strict=True):
        assert np.abs(got - want).max() <= ROUNDING
    assert [rule.select(x, rng=s) for s in range(20)] == [greedy.select(x, rng=s) for s in range(20)]
    assert rule.exact_acceptance() == pytest.approx(greedy.exact_acceptance(), abs=ROUNDING)


def test_top_by_selection_is_the_stable_sort():
    """The greedy model's top n - 1 tokens (one selection) are the first of a stable sort by -q:
    ties broken by token index, zeros and subnormals included."""
    rng = np.random.default_rng(2)
    for trial in range(300):
        V = int(rng.integers(2, 30))
        values = [rng.random(V), rng.integers(1, 4, V).astype(float),
                  rng.choice([0.0, SUB, 1e-310, 0.25], V)][trial % 3]
        if np.count_nonzero(values) < 1:
            continue
        q = values / values.sum()
        for n in range(1, np.count_nonzero(q) + 1):
            assert np.array_equal(Greedy(q, n).top, np.argsort(-q, kind="stable")[: n - 1])


def test_first_draft_law_at_large_v():
    """The first-draft law is a point mass built in O(V), not a row of np.eye(V) (122 GiB at
    V = 128,000)."""
    q = np.full(128_000, 1 / 128_000)
    law = Greedy(q, 3).first_draft_law()
    assert law.shape == (128_000,) and law[0] == 1.0 and law.sum() == 1.0
    assert np.array_equal(Greedy(q, 1).first_draft_law(), Greedy(q, 1).tail)


# --- the closed-form route (mdtheory.routes.greedy) and its greedy-flow certificate -------------------------


@pytest.mark.parametrize("case", range(len(cases())))
def test_closed_form_route_matches_the_enumerating_routes(case):
    p, q, n = cases()[case]
    res = md.optimal_acceptance(p, q, n, sampling="greedy")
    assert (res.method, res.certificate) == ("closed-form", "greedy-flow")
    for method in ("subsets", "dual"):
        other = md.optimal_acceptance(p, q, n, sampling="greedy", method=method)
        assert res.value == pytest.approx(other.value, abs=SOLVER), method


def test_closed_form_route_enumerates_nothing_at_large_vocab(monkeypatch):
    rng = np.random.default_rng(3)
    V, n = 128_000, 4
    p, q = rng.dirichlet(np.full(V, 0.3)), rng.dirichlet(np.full(V, 0.3))
    for name in ("set_law", "tuple_law"):
        monkeypatch.setattr(Greedy, name, lambda self: pytest.fail("enumerated draft sets"))
    model = Greedy(q, n)
    rest = np.ones(V, dtype=bool)
    rest[model.top] = False
    want = math.fsum(p[model.top]) + math.fsum(np.minimum(p, model.tail)[rest])
    assert md.alpha_star(p, q, n, "greedy") == pytest.approx(want, abs=ROUNDING)


def test_greedy_flow_certificate_refuses_a_suboptimal_cut(monkeypatch):
    """A route that returns every token as its cut, with that cut's value 1, is caught by the flow."""
    import mdtheory.routes.greedy as greedy
    from mdtheory.routes.proofs import RouteOutput, TopAndDraw

    p, q, n = np.array([0.1, 0.2, 0.3, 0.4, 0.0]), Q5, 3
    model = Greedy(q, n)
    cut = np.arange(5)
    value = 1.0 + p[cut].sum() - model.containment(np.ones(5, dtype=bool))
    assert value > md.alpha_star(p, q, n, "greedy") + 1e-3  # a real gap
    monkeypatch.setattr(greedy, "greedy_closed_form", lambda p, model: RouteOutput(value=value, cut=cut,
                                                                              proof=TopAndDraw()))
    with pytest.raises(md.errors.SolverError, match="greedy-flow proves"):
        md.optimal_acceptance(p, q, n, sampling="greedy")


def test_closed_form_route_serves_the_greedy_set_only():
    with pytest.raises(md.errors.InvalidInputError, match="greedy draft set only"):
        md.optimal_acceptance(np.full(4, 0.25), np.full(4, 0.25), 2, method="closed-form")
