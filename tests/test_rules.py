"""Selection rules: exactly lossless, closed forms = enumeration, never above alpha*, Monte Carlo."""

import json

import numpy as np
import pytest
from scipy import stats

import mdtheory as md
from mdtheory.cli import main
from mdtheory.rules import RULES, make_rule

from .tolerances import ROUNDING


def instances():
    rng = np.random.default_rng(123)
    out = []
    for _ in range(12):
        V = int(rng.integers(2, 7))
        n = int(rng.integers(1, 4))
        a = float(rng.choice([0.2, 1.0, 4.0]))
        out.append((rng.dirichlet(np.full(V, a)), rng.dirichlet(np.full(V, a)), n))
    q = np.array([0.4, 0.3, 0.2, 0.1, 0.0])
    out += [
        (q.copy(), q.copy(), 2),                                   # p = q
        (np.array([0, 0, 0, 0, 1.0]), q, 2),                       # target point mass, no draft mass
        (np.array([1.0, 0, 0, 0, 0]), q, 3),                       # target point mass on a draft
        (np.array([0.0, 0.5, 0.0, 0.5, 0.0]), q, 2),               # zeros in p
        (np.array([0.2, 0.2, 0.2, 0.2, 0.2]), q, 3),               # zeros in q
        (np.array([0.0, 0.0, 0.3, 0.7, 0.0]), np.array([0.5, 0.5, 0, 0, 0]), 2),  # disjoint
        (np.array([0.25, 0.25, 0.25, 0.25]), np.array([0.25, 0.25, 0.25, 0.25]), 3),  # ties
    ]
    return out


#: Draft models that draw n distinct tokens: they need n <= the number of tokens with q > 0.
DISTINCT = {"without-replacement", "conditional-poisson", "greedy"}


def build(name, p, q, n):
    """The rule; skipped (after checking that make_rule refuses it, and why) when its draft model
    draws distinct tokens and q has fewer than n tokens with q > 0."""
    assert RULES[name].sampling in DISTINCT | {"iid"}, f"{name}: add its sampling to DISTINCT or iid"
    support = int(np.count_nonzero(q))
    if RULES[name].sampling in DISTINCT and n > support:
        with pytest.raises(md.InvalidInputError, match=rf"needs n <= the number of tokens with "
                                                       rf"q > 0 \({support}\), got n = {n}"):
            make_rule(name, p, q, n)
        pytest.skip(f"{name} draws {n} distinct drafts; q has {support} tokens with q > 0")
    return make_rule(name, p, q, n)


@pytest.mark.parametrize("name", sorted(RULES))
@pytest.mark.parametrize("case", range(len(instances())))
def test_lossless_and_below_optimum(name, case):
    p, q, n = instances()[case]
    rule = build(name, p, q, n)
    acc, law = rule.enumerate()
    assert 0.5 * np.abs(law - rule.p).sum() <= ROUNDING, f"{name} is not lossless"
    alpha = md.alpha_star(rule.p, rule.model)
    assert acc <= alpha + ROUNDING, f"{name}: acceptance {acc} above alpha* {alpha}"
    closed = rule.closed_form_acceptance()
    if closed is not None:
        assert closed == pytest.approx(acc, abs=ROUNDING), f"{name}: closed form != enumeration"


def test_conditionals_are_probability_laws():
    p, q, n = next((p, q, n) for p, q, n in instances() if 2 <= n < np.count_nonzero(q))
    for name in RULES:  # every rule builds on this instance: no skip drops the later ones
        rule = make_rule(name, p, q, n)
        for x in rule.model.tuple_law().tuples[:20]:
            a, r = rule.conditional(x)
            assert a.min() >= 0 and r.min() >= -1e-15
            assert a.sum() + r.sum() == pytest.approx(1.0, abs=ROUNDING), name
            assert np.all(a[~np.isin(np.arange(rule.V), x)] == 0), f"{name} accepts an undrafted token"


def test_greedy_reaches_its_optimum():
    rng = np.random.default_rng(4)
    for _ in range(10):
        p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
        for n in (2, 3):
            rule = make_rule("greedy", p, q, n)
            assert rule.exact_acceptance() == pytest.approx(md.alpha_star(p, rule.model), abs=ROUNDING)


def test_khisti_default_truncation_on_the_bundled_pair():
    """The default truncation, as many tokens as the stage flow's cost allows (45 at V = 50),
    accepts at least 0.92 on the bundled pair at n = 4 (alpha* 0.9500; the nuclei capped at 8 gave
    single-draft's 0.7555), never below single-draft at n = 2..8."""
    from pathlib import Path

    from mdtheory.rules.khisti import default_size

    root = Path(__file__).resolve().parent.parent / "examples"
    p, q = np.load(root / "p.npy"), np.load(root / "q.npy")
    assert default_size(50) == 45 and default_size(5) == 5 and default_size(10**6) == 64
    rule = make_rule("khisti-lp", p, q, 4)
    assert rule.s == 45 and not rule.fallback and rule.exact_acceptance() >= 0.92
    for n in (2, 3, 8):
        assert make_rule("khisti-lp", p, q, n).exact_acceptance() >= np.minimum(p, q).sum() - 1e-12


@pytest.mark.parametrize("s", [16, 32, 45, 64])
def test_khisti_stage_flow_reaches_the_lp_at_large_truncations(s):
    """The greedy start and augmenting paths reach the stage LP's optimum (HiGHS) at the default's
    sizes."""
    pytest.importorskip("highspy", reason="the stage LP is solved by HiGHS")
    from mdtheory.rules import khisti as K

    rng = np.random.default_rng(s)
    for _ in range(4):
        a, b = K._pairs(s)
        pt, lt, rt = (rng.dirichlet(np.full(s + 2, c))[:s] for c in rng.choice([0.1, 0.5, 2.0], 3))
        m, mu0 = lt[a] * rt[b] + lt[b] * rt[a], lt * rt + 0.01 * rng.random(s) / s
        fb, paths = K._stage_flow(np.maximum(pt - mu0, 0.0), m, a, b, 1e-300, 64 * (s * s + 1))
        assert paths < 64 * (s * s + 1)
        y = K.stage_lp(pt, mu0, m, a, b)
        got, ref = (np.minimum(pt, mu0 + np.bincount(a, ya, s) + np.bincount(b, m - ya, s)).sum()
                    for ya in (m - fb, y))
        assert got >= ref - 1e-9


def test_khisti_full_lp_is_optimal_for_two_drafts():
    """Khisti et al. Thm 1: IS + one speculative step reaches alpha*; untruncated (s = V), n = 2."""
    rng = np.random.default_rng(5)
    for _ in range(15):
        V = int(rng.integers(2, 8))
        p, q = rng.dirichlet(np.full(V, 0.7)), rng.dirichlet(np.full(V, 0.7))
        rule = make_rule("khisti-lp", p, q, 2, s=V)
        assert rule.exact_acceptance() == pytest.approx(md.alpha_star(p, q, 2), abs=1e-9)


def test_kseq_rho_solves_its_equation():
    rng = np.random.default_rng(6)
    for _ in range(10):
        p, q = rng.dirichlet(np.ones(8)), rng.dirichlet(np.ones(8))
        for n in (2, 4):
            r = make_rule("k-seq", p, q, n)
            assert 1.0 <= r.rho <= n
            assert 1 - (1 - r.beta) ** n == pytest.approx(r.rho * r.beta, abs=ROUNDING)


def test_rrs_closed_form_known_value():
    # p = (1, 0), q = (1/2, 1/2), n = 2: P(some draft is token 0) = 3/4
    assert make_rule("rrs", [1.0, 0.0], [0.5, 0.5], 2).exact_acceptance() == pytest.approx(0.75)


@pytest.mark.parametrize("name", sorted(RULES))
def test_monte_carlo_agrees_with_exact(name):
    rng = np.random.default_rng(99)
    p = np.array([0.35, 0.25, 0.2, 0.1, 0.06, 0.04])
    q = np.array([0.1, 0.3, 0.1, 0.3, 0.1, 0.1])
    rule = make_rule(name, p, q, 3)
    N = 20_000
    mc = rule.monte_carlo(N, rng)
    exact = rule.exact_acceptance()
    sigma = np.sqrt(exact * (1 - exact) / N)
    assert abs(mc["acceptance"] - exact) <= 4.5 * sigma, (name, mc["acceptance"], exact)
    chi2 = stats.chisquare(mc["counts"], N * rule.p)
    assert chi2.pvalue > 1e-4, f"{name}: output law differs from p (p-value {chi2.pvalue:.2g})"


def test_unknown_rule_and_bad_parameter():
    with pytest.raises(md.InvalidInputError, match="unknown selection rule 'spechub'; valid choices"):
        make_rule("spechub", [0.5, 0.5], [0.5, 0.5], 2)
    with pytest.raises(md.InvalidInputError, match="integer truncation s >= 1, got 0"):
        make_rule("khisti-lp", [0.5, 0.5], [0.5, 0.5], 2, s=0)
    with pytest.raises(md.InvalidDistributionError, match="p has length 2 but q has length 3"):
        make_rule("rrs", [0.5, 0.5], [0.2, 0.3, 0.5], 2)


def test_cli_compare_selectors(capsys):
    code = main(["compare-selectors", "examples/p.npy", "examples/q.npy", "-n", "2", "--json",
                 "--samples", "2000"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0 and [r["rule"] for r in rows] == list(RULES)
    keys = {"rule", "acceptance", "exact", "ci95", "alpha_star", "gap", "prepare_ms"}
    p, q = np.load("examples/p.npy"), np.load("examples/q.npy")
    for r in rows:
        assert keys <= r.keys() and "error" not in r
        assert r["gap"] >= -ROUNDING and r["prepare_ms"] > 0
        assert (r["ci95"] is None) == r["exact"]
        if r["exact"]:
            assert r["acceptance"] == pytest.approx(make_rule(r["rule"], p, q, 2).exact_acceptance())
        else:
            assert r["ci95"][0] <= r["acceptance"] <= r["ci95"][1]


def test_cli_compare_selectors_reports_rules_that_cannot_run(capsys, tmp_path):
    p, q = tmp_path / "p.npy", tmp_path / "q.npy"
    np.save(p, np.array([0.5, 0.3, 0.2]))
    np.save(q, np.array([0.6, 0.4, 0.0]))
    assert main(["compare-selectors", str(p), str(q), "-n", "3", "--json"]) == 0
    rows = {r["rule"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["rrs-wor"]["acceptance"] is None and "n <= the number of tokens" in rows["rrs-wor"]["error"]
    assert rows["rrs"]["acceptance"] == pytest.approx(make_rule("rrs", [0.5, 0.3, 0.2],
                                                                [0.6, 0.4, 0.0], 3).exact_acceptance())
    assert main(["compare-selectors", str(p), str(q), "-n", "3", "--rules", "rrs-wor,greedy"]) == 2
    assert "no selection rule could be prepared" in capsys.readouterr().err


def test_cli_compare_selectors_bad_input(capsys, tmp_path):
    bad = tmp_path / "q.npy"
    np.save(bad, np.array([0.5, np.nan]))
    assert main(["compare-selectors", "examples/p.npy", str(bad)]) == 2
    assert "q[1] = nan is not finite" in capsys.readouterr().err
    assert main(["compare-selectors", "examples/p.npy", "examples/q.npy", "--rules", "x"]) == 2
    assert main(["compare-selectors", "examples/p_batch.npy", "examples/q.npy"]) == 2
    assert "one row per position; got 3 row(s) of p and 1 of q" in capsys.readouterr().err


def test_kseq_within_one_minus_one_over_e_of_optimal():
    """SpecTr (Sun et al. 2023, Thm 3): K-SEQ's acceptance is at least (1 - 1/e) alpha*."""
    rng = np.random.default_rng(7)
    worst = 1.0
    for _ in range(200):
        V, n = int(rng.integers(2, 12)), int(rng.integers(1, 9))
        p, q = rng.dirichlet(np.full(V, 0.3)), rng.dirichlet(np.full(V, 0.3))
        ratio = make_rule("k-seq", p, q, n).exact_acceptance() / max(md.alpha_star(p, q, n), 1e-300)
        worst = min(worst, ratio)
    assert worst >= 1 - np.exp(-1) - ROUNDING


def test_draft_sets_of_underflowed_probability_get_a_valid_step():
    """A draft tuple whose probability underflows to 0 (gr-softmax, and the optimal rule's plan
    path) gets a valid step: it outputs the residual, a law summing to one."""
    p, q = np.array([0.3, 0.7]), np.array([1e-300, 1.0])
    rule = make_rule("gr-softmax", p, q, 2)
    a, r = rule.conditional(np.array([0, 0]))
    assert a.sum() == 0 and abs(r.sum() - 1) < ROUNDING and (r >= 0).all()
    assert rule.select([0, 0], 0)[1] is False
    p = np.array([3.3285536831728026e-79, 1.0, 9.5578396059481524e-224])
    q = np.array([1.2803356755913308e-115, 1.0, 2.5260016416830177e-291])
    rule = make_rule("optimal", p, q, 2, sampling="without-replacement")
    assert np.isfinite(rule.plan).all()
    a, r = rule.conditional(np.array([0, 2]))
    assert abs(a.sum() + r.sum() - 1) < ROUNDING and (a >= 0).all() and (r >= 0).all()


def test_residual_part_is_never_negative():
    """The residual part is non-negative even where the accept part sums to 1 + 2e-16."""
    rule = make_rule("khisti-lp", np.array([3, 2, 2]) / 7, np.ones(3) / 3, 3)
    a, r = rule.conditional(np.array([0, 2, 2]))
    assert (r >= 0).all() and (a >= 0).all()


def test_optimal_plan_rows_capped_at_subnormal_set_probabilities():
    """The LP's plan S(U, y) may exceed a draft set's probability w_U = 2e-322 by its tolerance
    (~1e-10); capped, S/w stays finite and the rule's acceptance is a number, not NaN."""
    rng = np.random.default_rng(6)
    V = 50
    logits = rng.normal(0, 2, V) / rng.choice([0.1, 1, 3])
    p, q = np.exp(logits - logits.max()), rng.dirichlet(np.ones(V))
    q[rng.random(V) < 0.8] = 2.2e-322
    p, q = p / p.sum(), q / q.sum()
    rule = make_rule("optimal", p, q, 1, sampling="without-replacement")
    acceptance, output = rule.enumerate()
    assert abs(acceptance - np.minimum(p, q).sum()) <= ROUNDING  # one draft: alpha* = 1 - TV(p, q)
    assert np.abs(output - p).sum() <= ROUNDING


@pytest.mark.parametrize("name", list(RULES))
def test_every_rule_estimates_its_own_preparation(name):
    """Each rule class states its preparation's cost; none is free, and the ones that enumerate draft
    sets grow with them."""
    cls = RULES[name]
    q = np.full(6, 1 / 6)
    small = cls.estimate(md.make_draft_model(q, 2, cls.sampling))
    large = cls.estimate(md.make_draft_model(np.full(60, 1 / 60), 4, cls.sampling))
    assert small.seconds > 0 and small.bytes > 0 and name in small.what
    assert large.seconds > small.seconds and large.bytes > small.bytes


def test_an_estimate_over_the_limit_refuses_the_rule():
    q = np.full(400, 1 / 400)
    est = RULES["gr-softmax"].estimate(md.IID(q, 4))
    assert est.seconds > 60
    with pytest.raises(md.ProblemTooLargeError, match="gr-softmax: fits over"):
        make_rule("gr-softmax", q, q, 4)


def test_greedy_rule_runs_on_any_model_declaring_fixed_top():
    """The greedy rule reads the declared capability, not the model's name."""

    class TopTwo(md.Greedy):  # the same drafts under another, unregistered name
        sampling = "top-two"

    rng = np.random.default_rng(5)
    p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    own = make_rule("greedy", p, q, 3)
    other = make_rule("greedy", p, TopTwo(q, 3), 3)
    assert other.model.sampling == "top-two"
    assert other.exact_acceptance() == pytest.approx(own.exact_acceptance(), abs=ROUNDING)
    assert np.allclose(other.exact_output_law(), p, atol=ROUNDING)
    with pytest.raises(md.InvalidInputError, match="greedy is a rule for draft models with fixed_top"):
        make_rule("greedy", p, md.IID(q, 3), 3)


def test_make_rule_passes_its_time_limit_to_rules_that_take_one(monkeypatch):
    """A rule whose constructor takes ``max_seconds`` gets make_rule's limit, whatever its name."""
    from mdtheory.rules import SelectionRule, residual

    class Patient(SelectionRule):
        name = "patient"

        def __init__(self, p, q, n, *, normalize=False, max_seconds=None):
            self.limit = max_seconds
            super().__init__(p, q, n, normalize=normalize)

        def _prepare(self):
            self.res = residual(self.p, self.q)

        def conditional(self, drafts):
            return np.zeros(self.V), self.res

    monkeypatch.setitem(RULES, "patient", Patient)
    assert make_rule("patient", [0.5, 0.5], [0.5, 0.5], 2, max_seconds=7.0).limit == 7.0


def test_block_simulation_reads_the_rules_declarations(monkeypatch):
    """Which rules a block simulation runs on without-replacement drafts comes from the rule's
    declarations (its own sampling, first_draft_only, a sampling keyword), not from its name."""
    from mdtheory.blocks.simulation import _check_rule
    from mdtheory.rules import SelectionRule

    class FirstOnly(SelectionRule):
        name, first_draft_only = "first-only", True

        def _prepare(self):
            pass

        def conditional(self, drafts):
            return np.eye(self.V)[drafts[0]], np.zeros(self.V)

    monkeypatch.setitem(RULES, "first-only", FirstOnly)
    for name in ("first-only", "single", "optimal", "rrs-wor"):
        _check_rule(name, "without-replacement")
    with pytest.raises(md.InvalidInputError, match="rule 'rrs' expects iid drafts, not without-replacement"):
        _check_rule("rrs", "without-replacement")
