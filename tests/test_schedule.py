"""Time schedules: any base of the iid coverage polymatroid realised exactly; the optimal rule at scale."""

import numpy as np
import pytest
from scipy import stats

import mdtheory as md
from mdtheory._synthetic import SERVING, llm_pairs
from mdtheory.models.polymatroid import lex_optimal_base_iid, priority_marginal, stable_ties
from mdtheory.rules import make_rule
from mdtheory.rules.schedule import Schedule, _realise, realise_iid


def check_tiling(s, q):
    """The pieces tile [0, 1] without gap or overlap, and each token's pieces have length q."""
    o = np.argsort(s.start, kind="stable")
    start, end = s.start[o], s.end[o]
    assert np.all(end > start)
    assert start[0] == 0.0 and end[-1] == pytest.approx(1.0, abs=1e-12)
    assert np.abs(start[1:] - end[:-1]).max(initial=0.0) <= 1e-12
    assert np.abs(s.lengths - q).max() <= 1e-12


def prefix_violation(mu, q, n):
    """max over prefixes S of the mu/q-decreasing order of mu(S) - g(S): <= 0 for mu in B(g)."""
    live = np.flatnonzero(q > 0)
    o = live[np.argsort(-(mu[live] / q[live]), kind="stable")]
    return float((np.cumsum(mu[o]) - (1 - (1 - np.cumsum(q[o])) ** n)).max())


def adversarial(rng):
    """Random pairs with ties, zeros, point masses, p = q and masses down to 1e-40."""
    V = int(rng.choice([2, 3, 5, 10, 50, 300, 2000]))
    n = int(rng.choice([1, 2, 3, 4, 8, 16, 64]))
    c = float(rng.choice([0.05, 0.3, 1.0, 3.0]))
    p, q = rng.dirichlet(np.full(V, c)), rng.dirichlet(np.full(V, c))
    kind = int(rng.integers(6))
    if kind == 1:
        q = p.copy()
    elif kind == 2:
        p = np.eye(V)[rng.integers(V)]
    elif kind == 3:
        q = np.eye(V)[rng.integers(V)]
    elif kind == 4:
        p[rng.random(V) < 0.3] = 0.0
        q[rng.random(V) < 0.3] = 0.0
        p[0] += p.sum() == 0
        q[-1] += q.sum() == 0
    elif kind == 5:  # ties
        p, q = np.round(8 * p) + 1, np.round(8 * q) + 1
    return p / p.sum(), q / q.sum(), n


def test_realises_random_points_of_the_base_polytope():
    rng = np.random.default_rng(0)
    for _ in range(60):
        V, n = int(rng.integers(2, 9)), int(rng.integers(1, 6))
        q = rng.dirichlet(np.full(V, float(rng.choice([0.3, 1.0, 3.0]))))
        model = md.IID(q, n)
        k = int(rng.integers(1, 5))
        mu = rng.dirichlet(np.ones(k)) @ np.array([priority_marginal(model, rng.permutation(V))
                                                   for _ in range(k)])
        s = realise_iid(mu, q, n)
        assert np.abs(s.marginal - mu).max() <= 1e-12
        check_tiling(s, q)


def test_a_priority_order_is_a_schedule_of_intervals():
    q = np.array([0.2, 0.5, 0.3])
    mu = priority_marginal(md.IID(q, 3), [1, 2, 0])
    s = realise_iid(mu, q, 3)
    assert s.pieces(1).tolist() == [[0.0, 0.5]]
    assert s.pieces(2) == pytest.approx(np.array([[0.5, 0.8]]))
    assert s.pieces(0) == pytest.approx(np.array([[0.8, 1.0]]))


def test_candidate_law_averages_to_the_marginal():
    """The exact per-tuple law (closed form on each interval) against the marginal of the pieces."""
    rng = np.random.default_rng(1)
    for _ in range(15):
        V, n = int(rng.integers(2, 6)), int(rng.integers(1, 4))
        p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
        s = realise_iid(lex_optimal_base_iid(p, q, n).mu, q, n)
        law = md.IID(q, n).tuple_law()
        total = sum(w * s.candidate_law(x) for x, w in zip(law.tuples, law.probs, strict=True))
        assert np.abs(total - s.marginal).max() <= 1e-12
        for x in law.tuples[:10]:
            c = s.candidate_law(x)
            assert c.sum() == pytest.approx(1.0, abs=1e-12)
            assert np.all(c[~np.isin(np.arange(V), x)] == 0)


def test_sampled_candidates_follow_the_marginal():
    rng = np.random.default_rng(2)
    p, q = rng.dirichlet(np.ones(40)), rng.dirichlet(np.ones(40))
    s = realise_iid(lex_optimal_base_iid(p, q, 4).mu, q, 4)
    drafts = md.IID(q, 4).sample(rng, 200_000)
    counts = np.bincount(s.candidates(drafts, rng), minlength=40)
    expected = s.marginal * counts.sum()
    keep = expected > 5
    chi2 = (((counts - expected) ** 2)[keep] / expected[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4


def test_lex_base_and_schedule_on_adversarial_pairs():
    rng = np.random.default_rng(3)
    for _ in range(400):
        p, q, n = adversarial(rng)
        base = lex_optimal_base_iid(p, q, n)
        assert prefix_violation(base.mu, q, n) <= 1e-12
        assert base.mu.sum() == pytest.approx(1.0, abs=1e-12)
        s = realise_iid(base.mu, q, n)
        assert np.abs(s.marginal - base.mu).max() <= 1e-9
        check_tiling(s, q)
        assert np.minimum(p, s.marginal).sum() == pytest.approx(md.alpha_star(p, q, n), abs=1e-9)


def test_lex_base_keeps_tiny_masses_apart():
    """p spans 1 to 1e-39: block sums, not differences of prefix sums (which gave mu = (.5, .5, 0))."""
    p, q = np.array([1.0, 1e-39, 0.0]), np.array([0.5, 0.3, 0.2])
    assert lex_optimal_base_iid(p, q, 1).mu.tolist() == q.tolist()  # one draft: B(g) = {q}
    rng = np.random.default_rng(5)
    for _ in range(50):
        p = rng.dirichlet(np.full(30, 0.02))
        q = rng.dirichlet(np.ones(30))
        assert np.abs(lex_optimal_base_iid(p, q, 1).mu - q).max() <= 1e-15


def test_optimal_rule_at_llm_scale():
    rng = np.random.default_rng(6)
    for V, n in [(1000, 2), (1000, 8), (5000, 4)]:
        (p,), (q,) = llm_pairs(rng, 1, V, noise=SERVING[0], temperature=SERVING[1])
        rule = make_rule("optimal", p, q, n)
        assert rule.exact_acceptance() == pytest.approx(md.alpha_star(rule.p, rule.q, n), abs=1e-9)
        assert rule.closed_form_acceptance() < 1.0


def test_optimal_rule_at_a_million_drafts():
    """The window's fast Newton stops relative to the powers' curvature (n - 1)/u (a stop at 2^-20
    of the free time for every n would leave the schedule 6e-3 short of the base at n = 10^6,
    V = 1000, and 5.8e-9 at V = 3). alpha* here is 1 - p(q = 0) (the other tokens are all but
    surely drafted); 1e-9 absorbs the float64 sum of q, one only within a few 2^-53, raised to the
    power n = 10^6 (about 1e-10: the prefix route's own distance from 1 - p(q = 0))."""
    rng = np.random.default_rng(11)
    for V in (3, 1000):
        p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
        q[0] = 0.0
        q /= q.sum()
        rule = make_rule("optimal", p, q, 10**6)
        alpha = md.alpha_star(rule.p, rule.q, 10**6, method="prefix")
        for reference in (alpha, 1.0 - rule.p[0]):
            assert abs(rule.closed_form_acceptance() - reference) <= 1e-9
        assert np.abs(rule.marginal - rule.base.mu).max() <= 1e-9


def test_schedule_refuses_more_drafts_than_its_precision_allows():
    """At n = 2^62 the marginal summed to 103 (acceptance 0.97 below alpha*): the G-masses are
    powers of degree n, exact to about n 2^-53, so the schedule stops at MAX_DRAFTS."""
    from mdtheory.rules.schedule import MAX_DRAFTS

    p, q = np.array([0.2, 0.5, 0.3]), np.array([0.5, 0.1, 0.4])
    assert make_rule("optimal", p, q, MAX_DRAFTS).marginal.sum() == pytest.approx(1.0, abs=1e-9)
    for n in (MAX_DRAFTS + 1, 2**40):
        with pytest.raises(md.ProblemTooLargeError, match="at most 1048576"):
            make_rule("optimal", p, q, n)
        with pytest.raises(md.ProblemTooLargeError):
            realise_iid(q, q, n)


def test_optimal_rule_monte_carlo():
    rng = np.random.default_rng(7)
    p, q = rng.dirichlet(np.full(200, 0.5)), rng.dirichlet(np.full(200, 0.5))
    rule = make_rule("optimal", p, q, 3)
    mc = rule.monte_carlo(40_000, rng)
    alpha = md.alpha_star(p, q, 3)
    sd = np.sqrt(alpha * (1 - alpha) / 40_000)
    assert abs(mc["acceptance"] - alpha) <= 4.5 * sd
    expected = p * 40_000
    keep = expected > 5
    chi2 = (((mc["counts"] - expected) ** 2)[keep] / expected[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4
    assert mc["counts"][~keep].sum() <= max(50, 3 * expected[~keep].sum())


def test_realise_rejects_bad_input():
    with pytest.raises(md.InvalidInputError, match="shape"):
        realise_iid([1.0], [0.5, 0.5], 2)
    with pytest.raises(md.InvalidInputError, match="positive integer"):
        realise_iid([0.5, 0.5], [0.5, 0.5], 0)
    with pytest.raises(md.InvalidDistributionError):
        realise_iid([0.5, 0.5], [0.5, -0.5], 2)


def test_stable_ties_gives_the_stable_sort():
    """numpy's SIMD argsort plus stable_ties against the stable sort: ties, NaN, inf, -0.0."""
    rng = np.random.default_rng(8)
    for _ in range(200):
        V = int(rng.integers(1, 300))
        keys = rng.choice([0.0, -0.0, 0.5, 1.0, 2.0, np.inf, np.nan, 1e-300], V)
        if rng.random() < 0.5:
            keys = np.where(rng.random(V) < 0.5, rng.random(V), keys)
        order = np.argsort(keys)
        assert stable_ties(order, keys[order]).tolist() == np.argsort(keys, kind="stable").tolist()


def test_fast_paths_give_the_same_schedule_and_candidates():
    """The schedule built along the base's order (linear sort) is the one built from token order,
    bit for bit; the G-masses the construction hands to Schedule are the ones it would compute;
    Schedule's compiled indexing matches numpy's cumsum and bincount; the one-tuple
    candidate matches candidates() on the same uniforms, tokens with q = 0 included."""
    rng = np.random.default_rng(9)
    for _ in range(150):
        p, q, n = adversarial(rng)
        base = lex_optimal_base_iid(p, q, n)
        plain, fast = _realise(base.mu, q, n), _realise(base.mu, q, n, base.order)
        for name in ("owner", "start", "end", "marginal", "cumulative", "first", "count"):
            assert np.array_equal(getattr(plain, name), getattr(fast, name)), name
        s = fast
        assert np.array_equal(Schedule(q, n, s.owner, s.start, s.end).marginal, s.marginal)
        assert np.array_equal(s.cumulative, np.concatenate([[0.0], np.cumsum(s.end - s.start)]))
        assert np.array_equal(s.lengths, np.bincount(s.owner, s.end - s.start, minlength=q.size))
        for x in np.concatenate([md.IID(q, n).sample(rng, 20), rng.integers(0, q.size, (5, n))]):
            state = rng.bit_generator.state
            y = int(s.candidates(x, rng))
            rng.bit_generator.state = state
            assert s.candidate(x, rng) == y
    with pytest.raises(md.InvalidInputError, match="tokens"):
        s.candidate(np.array([0, q.size]), rng)
