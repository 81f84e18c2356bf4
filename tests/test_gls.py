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
    # the mass of the drafted tokens kept to its last digit (1e-100 here), never 1 - (1 - 1e-100)
    tiny = make_rule("gls", [1.0, 1e-100], [0.0, 1.0], 2)
    assert tiny.exact_acceptance() == pytest.approx(1e-100, rel=1e-14)
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
    # p/q past float64 (5e-324 against 0.5): the token keeps its place above every finite ratio
    rule = make_rule("gls", [0.5, 0.5, 0.0], [5e-324, 0.5, 0.5 - 5e-324], 2)
    acc, law = rule.enumerate()
    assert rule.exact_acceptance() == pytest.approx(acc, abs=QUADRATURE)
    assert np.abs(law - rule.p).max() <= QUADRATURE


def exact_pair(head_p, head_q):
    """Rationals of the given floats, the last entry completing each to one."""
    pf, qf = [Fraction(v) for v in head_p], [Fraction(v) for v in head_q]
    return pf + [1 - sum(pf)], qf + [1 - sum(qf)]


SUBNORMAL = [
    ((0.5, 0.25), (1e-310, 0.5), (0,)),               # p/q = 5e309: past float64
    ((0.5, 0.25), (1e-290, 0.5), (0,)),               # one draft of probability 1e-290
    ((0.5, 0.5), (5e-324, 0.5), (0, 1)),              # the smallest subnormal
    ((0.5, 0.5 - 1e-300), (5e-324, 0.5), (0, 2)),     # two ratios past float64's range apart
    ((0.5, 0.5 - 1e-320), (1e-320, 0.5), (0, 2, 2)),  # p and q both subnormal at token 2's side
    ((5e-321, 0.5), (1e-320, 0.5), (0, 0)),           # Φ's first slope subnormal: 1/s overflows
    ((5e-321, 3e-321, 0.5), (1e-320, 1e-320, 0.5), (0, 1)),
    ((0.0, 0.5), (1e-320, 0.5), (0,)),                # p = 0 at a subnormal q
]


@pytest.mark.parametrize("head_p, head_q, x", SUBNORMAL)
def test_laws_at_subnormal_draft_masses_match_exact_rationals(head_p, head_q, x):
    """Drafts whose q is subnormal: p/q past float64, or Φ's slope s so small that 1/s overflows.
    t Φ, the segments of a subnormal slope and the drafted token's own term are formed in logs, so
    the law given such drafts is the exact one; so are the acceptance and the output law."""
    pf, qf = exact_pair(head_p, head_q)
    rule = make_rule("gls", floats(pf), floats(qf), len(x))
    assert np.abs(rule.law(np.array(x)) - floats(law_given(pf, qf, x))).max() <= QUADRATURE
    accepted, _ = acceptance_and_law(pf, qf, len(x))
    assert rule.exact_acceptance() == pytest.approx(float(accepted), abs=QUADRATURE)
    acc, law = rule.enumerate()
    assert acc == pytest.approx(float(accepted), abs=QUADRATURE)
    assert np.abs(law - rule.p).max() <= QUADRATURE


def test_laws_of_improbable_drafts_match_exact_rationals():
    """Drafts of probability 2^-1000 and 1e-285, far below float64's range: every race's factor is
    a probability, so no product over the races overflows and the drafts condition the law."""
    F = Fraction
    cases = [([F(1, 2)] * 2, [F(1, 2)] * 2, (0,) * 1000),  # p = q: Y is always drafted
             ([F(1, 2000), F(1, 5), F(1599, 2000)], [F(1, 1000), F(999, 2000), F(999, 2000)], (0,) * 95),
             ([F(1, 2), F(1, 2)], [F(1, 10**150), 1 - F(1, 10**150)], (0, 0))]
    for pf, qf, x in cases:
        rule = make_rule("gls", floats(pf), floats(qf), len(x))
        exact = floats(law_given(pf, qf, x))
        assert np.abs(rule.law(np.array(x)) - exact).max() <= QUADRATURE, len(x)
    assert exact[0] > 0.99  # two drafts of token 0 make it the likely output


def test_draws_at_many_drafts_follow_the_exact_acceptance():
    """V = 1000, n = 128: every iid draft tuple has probability below 1e-280. The conditional laws'
    accepted mass, averaged over iid drafts, and select's acceptance both estimate the exact
    acceptance (both would be about 0.11, the acceptance of an output ignoring the drafts, were the
    drafts dropped)."""
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(1000)), rng.dirichlet(np.ones(1000))
    rule = make_rule("gls", p, q, 128)
    exact = rule.exact_acceptance()
    xs = rng.choice(1000, size=(300, 128), p=q)
    assert np.log(q[xs]).sum(axis=1).max() < np.log(1e-280)
    se = np.sqrt(exact * (1 - exact) / len(xs))
    assert abs(np.mean([rule.conditional(x)[0].sum() for x in xs[:100]]) - exact) <= 4.5 * se * np.sqrt(3)
    assert abs(np.mean([rule.select(x, rng)[1] for x in xs]) - exact) <= 4.5 * se


def test_impossible_drafts_are_refused():
    rule = make_rule("gls", [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], 2)
    for method in (rule.conditional, rule.law, lambda x: rule.select(x, 0)):
        with pytest.raises(md.InvalidInputError, match=r"drafts\[1\] = 1 has draft probability q = 0"):
            method([0, 1])


def test_the_estimate_covers_a_step_and_a_step_holds_a_block_of_races(monkeypatch):
    """make_rule refuses n V beyond the time limit; a step draws the races RACES at a time (its
    memory does not grow with n) and the blocks are the same draws as one array of them."""
    from mdtheory.rules import gls

    u = np.full(1000, 1e-3)
    with pytest.raises(md.ProblemTooLargeError, match="one step: 1000000000 races of 1000 times"):
        make_rule("gls", u, u, 10**9)

    class Recording:
        def __init__(self, seed):
            self.rng, self.sizes = np.random.default_rng(seed), []

        def standard_exponential(self, size):
            self.sizes.append(int(np.prod(size)))
            return self.rng.standard_exponential(size)

    rng = np.random.default_rng(4)
    p, q = rng.dirichlet(np.ones(16)), rng.dirichlet(np.ones(16))
    rule = make_rule("gls", p, q, 50)
    for seed in range(20):
        x = rng.choice(16, size=50, p=q)
        whole = rule._step(x, np.random.default_rng(seed))
        monkeypatch.setattr(gls, "RACES", 64)
        blocks = Recording(seed)
        assert rule._step(x, blocks) == whole
        assert max(blocks.sizes) == 64 and sum(blocks.sizes) == 50 * 16 + 50
        monkeypatch.undo()


def test_kernels_interpreted_and_compiled_agree(monkeypatch):
    """The acceptance's and the law's kernels, on a random pair and on one with a subnormal slope
    (the segments' log branch)."""
    from mdtheory import _jit

    p, q, _ = next(random_floats(3, 1))
    pf, qf = exact_pair((5e-321, 3e-321, 0.5), (1e-320, 1e-320, 0.5))
    for a, b, x in ((p, q, [0, 1, 1, 2, 0]), (floats(pf), floats(qf), [0, 1, 3, 2, 0])):
        values = []
        for mode in ("python", "numba"):
            monkeypatch.setattr(_jit, "FORCE", mode)
            rule = make_rule("gls", a, b, 5)
            values.append(np.append(rule.law(x), rule.exact_acceptance()))
        assert np.abs(values[0] - values[1]).max() <= ROUNDING


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


def test_monte_carlo_at_many_drafts_holds_a_bounded_block_of_tuples():
    """Monte Carlo draws its draft tuples in blocks of at most CHUNK_BYTES of n drafts each, so at
    n = 10^6 it holds a few tuples, not mc_chunk(V) of them (8 GB at V = 1000)."""
    from mdtheory import _budget

    rule = make_rule("gls", [0.5, 0.5], [0.5, 0.5], 5000)
    sizes, sample = [], rule.model.sample

    def recording(rng, size):
        sizes.append(size)
        return sample(rng, size)

    rule.model.sample = recording
    result = rule.monte_carlo(1000, 0)
    assert result["acceptance"] == 1.0 and sum(sizes) == 1000  # p = q: always accepted
    assert 8 * 5000 * max(sizes) <= _budget.CHUNK_BYTES < 8 * 5000 * 1000


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


@pytest.mark.slow
def test_torch_rule_at_many_drafts():
    """V = 1000, n = 128 (every iid tuple below 1e-280): the batched step's acceptance is the exact
    one, as the numpy rule's (test_draws_at_many_drafts_follow_the_exact_acceptance)."""
    torch = pytest.importorskip("torch")
    from mdtheory.torch_bridge import TorchGLS

    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(1000)), rng.dirichlet(np.ones(1000))
    exact = make_rule("gls", p, q, 128).exact_acceptance()
    B = 300
    drafts = torch.tensor(rng.choice(1000, size=(B, 128), p=q))
    rows = (torch.tensor(np.tile(v, (B, 1))) for v in (p, q))
    _, accepted = TorchGLS(*rows, 128).step(drafts, torch.Generator().manual_seed(0))
    assert abs(accepted.double().mean().item() - exact) <= 4.5 * np.sqrt(exact * (1 - exact) / B)


def test_torch_rule_at_subnormal_masses():
    """A draft of q subnormal in the dtype (p/q past its range) wins its race, as its exact law
    [1, 0, 0] says (test_laws_at_subnormal_draft_masses_match_exact_rationals)."""
    torch = pytest.importorskip("torch")
    from mdtheory.torch_bridge import TorchGLS

    for dtype, tiny in ((torch.float64, 1e-310), (torch.float32, 1e-40)):
        P = torch.tensor([[0.5, 0.25, 0.25]] * 500, dtype=dtype)
        Q = torch.tensor([[tiny, 0.5, 0.5 - tiny]] * 500, dtype=dtype)
        assert Q[0, 0] > 0 and torch.isinf(P[0, 0] / Q[0, 0])
        token, accepted = TorchGLS(P, Q, 1).step(torch.zeros(500, 1, dtype=torch.long),
                                                 torch.Generator().manual_seed(1))
        assert (token == 0).all() and accepted.all(), dtype
