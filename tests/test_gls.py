"""Gumbel-max list sampling: exact law against exact rationals, lossless, below alpha*, above the list
matching lemma's bound, Monte Carlo against the exact law, the paper's coupled procedure, drafter
invariance, torch against numpy, the audit."""

from fractions import Fraction
from itertools import product

import numpy as np
import pytest
from scipy import stats

import mdtheory as md
from mdtheory.rules import RULES, make_rule
from mdtheory.rules.gls import GumbelListSampling

from .reference_gls import acceptance_and_law, law_given
from .tolerances import ROUNDING

#: The quadrature in ln t against the exact rational integrals: measured at most 2e-15 on every
#: instance below; the margin absorbs rounding of O(V) terms per node.
QUADRATURE = 1e-13


def rational_instances():
    """Random small (p, q, n) in exact rationals, plus ties, zeros, p = q and a 1e-12 ratio."""
    rng = np.random.default_rng(2025)
    out = []
    while len(out) < 12:
        V, n = int(rng.integers(2, 5)), int(rng.integers(1, 4))
        a, b = rng.integers(0, 7, V), rng.integers(0, 7, V)
        if a.sum() and b.sum():
            out.append(([Fraction(int(v), int(a.sum())) for v in a],
                        [Fraction(int(v), int(b.sum())) for v in b], n))
    F = Fraction
    out += [
        ([F(1, 3)] * 3, [F(1, 3)] * 3, 3),                                   # p = q: acceptance one
        ([F(1, 4)] * 4, [F(1, 2), F(1, 2), F(0), F(0)], 2),                  # ties, zeros in q
        ([F(1), F(0), F(0)], [F(1, 5), F(3, 10), F(1, 2)], 3),               # target point mass
        ([F(1, 5), F(3, 10), F(1, 2)], [F(0), F(1), F(0)], 2),               # draft point mass
        ([F(1, 2), F(1, 2) - F(1, 10**12), F(1, 10**12)],
         [F(1, 10**9), F(1, 2), F(1, 2) - F(1, 10**9)], 2),                  # ratios 5e8 and 2e-12
    ]
    return out


def floats(values):
    return np.array([float(v) for v in values])


@pytest.mark.parametrize("case", range(len(rational_instances())))
def test_exact_law_matches_exact_rationals(case):
    pf, qf, n = rational_instances()[case]
    rule = make_rule("gls", floats(pf), floats(qf), n)
    for x in product(np.flatnonzero(floats(qf) > 0), repeat=n):
        exact = law_given(pf, qf, tuple(int(i) for i in x))
        assert sum(exact) == 1  # the reference: the law given the drafts sums to one exactly
        assert np.abs(rule.law(np.array(x)) - floats(exact)).max() <= QUADRATURE, x
    accepted, law = acceptance_and_law(pf, qf, n)
    assert law == pf  # lossless, in exact arithmetic
    assert rule.exact_acceptance() == pytest.approx(float(accepted), abs=QUADRATURE)
    acc, out = rule.enumerate()
    assert acc == pytest.approx(float(accepted), abs=QUADRATURE)
    assert np.abs(out - rule.p).max() <= QUADRATURE


def test_many_drafts_against_exact_rationals():
    """n up to 32: the law given drafts at the lowest ratio grows like t^(n-1) before e^{-nt} wins,
    so the quadrature must reach t = (45 + ln 1/Q(x)) / n; the acceptance and the output law at
    n = 10, summed over the draft multisets."""
    F = Fraction
    pf, qf = [F(1, 1000), F(999, 1000), F(0)], [F(1, 100), F(98, 100), F(1, 100)]
    p, q = floats(pf), floats(qf)
    for n, x in ((16, (0,) * 16), (32, (0,) * 32), (32, (0,) * 31 + (2,))):
        rule = make_rule("gls", p, q, n)
        assert np.abs(rule.law(np.array(x)) - floats(law_given(pf, qf, x))).max() <= QUADRATURE
    accepted, law = acceptance_and_law(pf, qf, 10)
    assert law == pf
    rule = make_rule("gls", p, q, 10)
    assert rule.exact_acceptance() == pytest.approx(float(accepted), abs=QUADRATURE)


def test_known_values():
    # n = 1: P(X = Y) = sum_y 1 / sum_i max(p_i/p_y, q_i/q_y) (Daliri et al.'s coupling)
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.2, 0.6])
    exact = sum(1 / np.maximum(p / p[y], q / q[y]).sum() for y in range(3))
    assert make_rule("gls", p, q, 1).exact_acceptance() == pytest.approx(exact, abs=ROUNDING)
    # p = q: the target's winning race drafts the same token
    assert make_rule("gls", p, p, 4).exact_acceptance() == pytest.approx(1.0, abs=ROUNDING)
    # disjoint supports: never accepted
    assert make_rule("gls", [0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5], 3).exact_acceptance() == \
        pytest.approx(0.0, abs=ROUNDING)


def random_floats(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        V, n = int(rng.integers(2, 9)), int(rng.integers(1, 9))
        a = float(rng.choice([0.1, 0.5, 1.0, 4.0]))
        yield rng.dirichlet(np.full(V, a)), rng.dirichlet(np.full(V, a)), n


def test_acceptance_between_list_matching_bound_and_alpha_star():
    """The list matching lemma (Rowan et al., Theorem 1) holds against the exact acceptance, with
    equality at n = 1; the acceptance never exceeds alpha*."""
    for p, q, n in random_floats(7, 60):
        rule = make_rule("gls", p, q, n)
        acc, bound = rule.exact_acceptance(), rule.list_matching_bound()
        assert bound <= acc + QUADRATURE
        if n == 1:
            assert bound == pytest.approx(acc, abs=QUADRATURE)
        assert acc <= md.alpha_star(p, q, n) + ROUNDING


def test_closed_form_agrees_with_enumeration_on_large_ratios_and_subnormal_masses():
    p = np.array([0.6, 0.2, 0.2 - 1e-300, 1e-300])
    q = np.array([1e-300, 0.5, 0.25, 0.25 - 1e-300])
    for n in (1, 2, 3):
        rule = make_rule("gls", p, q, n)
        acc, law = rule.enumerate()
        assert rule.exact_acceptance() == pytest.approx(acc, abs=QUADRATURE)
        assert np.abs(law - p).max() <= QUADRATURE
    # p/q past float64 (5e-324 against 0.5): a draft there is an unconditioned race, still a law
    rule = make_rule("gls", [0.5, 0.5, 0.0], [5e-324, 0.5, 0.5 - 5e-324], 2)
    assert rule.free[0]
    a, r = rule.conditional(np.array([0, 1]))
    assert a.sum() + r.sum() == pytest.approx(1.0, abs=QUADRATURE)
    assert 0.0 <= rule.exact_acceptance() <= 1.0
    # drafts of probability 1e-300 (their law's integrand would reach 1e319) condition no race: law p
    rule = make_rule("gls", [0.5, 0.5], [1e-150, 1 - 1e-150], 2)
    assert np.array_equal(rule.law([0, 0]), rule.p)
    assert not rule.law([0, 1])[0] == rule.p[0]  # 1e-150 alone still conditions


def test_acceptance_kernel_interpreted_and_compiled_agree(monkeypatch):
    from mdtheory import _jit

    p, q, _ = next(random_floats(3, 1))
    values = []
    for mode in ("python", "numba"):
        monkeypatch.setattr(_jit, "FORCE", mode)
        values.append(make_rule("gls", p, q, 5).exact_acceptance())
    assert values[0] == pytest.approx(values[1], abs=ROUNDING)


def test_step_frequencies_match_the_exact_law_given_fixed_drafts():
    """Chi-square of select's outputs on one draft tuple against the exact conditional law. Given
    drafts (0, 5, 2), token 3 has probability zero: its ratio p/q is below every draft's (the race
    that Y wins drafts a token of smaller ratio, or Y itself)."""
    p = np.array([0.35, 0.25, 0.2, 0.1, 0.06, 0.04])
    q = np.array([0.1, 0.3, 0.1, 0.3, 0.1, 0.1])
    rule = make_rule("gls", p, q, 3)
    rng = np.random.default_rng(11)
    N = 20_000
    for x in ([1, 3, 3], [0, 5, 2]):
        law = rule.law(x)
        counts = np.bincount([rule.select(x, rng)[0] for _ in range(N)], minlength=6)
        live = law > 0
        assert np.all(counts[~live] == 0) and live.sum() == (5 if x == [0, 5, 2] else 6)
        assert stats.chisquare(counts[live], N * law[live] / law[live].sum()).pvalue > 1e-4, x


def test_the_papers_coupled_procedure_has_the_exact_acceptance():
    """Algorithm 1 itself (drafts drawn from the shared races) against the exact acceptance: the
    verifier that redraws the races from the drafts has the same law."""
    p = np.array([0.35, 0.25, 0.2, 0.1, 0.06, 0.04])
    q = np.array([0.1, 0.3, 0.1, 0.3, 0.1, 0.1])
    rule = make_rule("gls", p, q, 3)
    rng = np.random.default_rng(12)
    N = 20_000
    runs = [rule.couple(rng.standard_exponential((3, 6))) for _ in range(N)]
    hits = np.mean([ok for _, _, ok in runs])
    exact = rule.exact_acceptance()
    assert abs(hits - exact) <= 4.5 * np.sqrt(exact * (1 - exact) / N)
    drafts = np.array([x for x, _, _ in runs])
    assert stats.chisquare(np.bincount(drafts.ravel(), minlength=6), 3 * N * q).pvalue > 1e-4


def test_drafter_invariance():
    """Given the races, the output depends on p alone (Rowan et al., Definition 2 at one token): two
    drafters, the same races, the same output; the drafts and the acceptance differ."""
    rng = np.random.default_rng(13)
    p = rng.dirichlet(np.ones(20))
    first = make_rule("gls", p, rng.dirichlet(np.ones(20)), 4)
    second = make_rule("gls", p, rng.dirichlet(np.full(20, 0.2)), 4)
    changed = 0
    for _ in range(500):
        races = rng.standard_exponential((4, 20))
        x1, y1, _ = first.couple(races)
        x2, y2, _ = second.couple(races)
        assert y1 == y2
        changed += not np.array_equal(x1, x2)
    assert changed > 250  # the drafters do differ on these races


def test_couple_refuses_bad_races():
    rule = make_rule("gls", [0.5, 0.5], [0.5, 0.5], 2)
    with pytest.raises(md.InvalidInputError, match=r"races must be positive finite times of shape \(2, 2\)"):
        rule.couple(np.ones((3, 2)))
    with pytest.raises(md.InvalidInputError, match="races must be positive"):
        rule.couple([[1.0, 0.0], [1.0, 1.0]])


def test_the_audit_passes_it():
    p = np.array([0.35, 0.25, 0.2, 0.1, 0.06, 0.04])
    q = np.array([0.1, 0.3, 0.1, 0.3, 0.1, 0.1])
    exact = md.audit(GumbelListSampling, p, q, 3, exact=True)
    assert exact.lossless and exact.mode == "exact"
    assert exact.acceptance == pytest.approx(make_rule("gls", p, q, 3).exact_acceptance(), abs=ROUNDING)
    sampled = md.audit(GumbelListSampling, p, q, 3, exact=False, samples=20_000, seed=3)
    assert sampled.verdict == "lossless", sampled


def test_torch_rule_agrees_with_numpy():
    torch = pytest.importorskip("torch")
    from mdtheory.audit.crossval import cross_validate
    from mdtheory.torch_bridge import TORCH_RULES, TorchGLS

    assert TORCH_RULES["gls"] is TorchGLS and TorchGLS.rule is RULES["gls"]
    res = cross_validate(["gls"], batch=4, vocab=6, drafts=3, samples=20_000, seed=1)
    assert res["passed"], res
    row = res["rules"][0]
    assert row["acceptance_empirical"] == pytest.approx(row["acceptance_exact"], abs=0.01)
    # a draft of zero draft mass leaves its race unconditioned: the step still outputs from p's support
    p = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
    q = torch.tensor([[0.0, 0.5, 0.5]], dtype=torch.float64)
    token, _ = TorchGLS(p, q, 2).step(torch.tensor([[0, 2]]), torch.Generator().manual_seed(0))
    assert token.item() in (0, 1)
