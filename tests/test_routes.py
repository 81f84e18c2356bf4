"""Every route to alpha* agrees with every other, with certificates, on each draft model.

The routes, draft models and proof types come from the package's registries (``md.METHODS``,
``mdtheory.models.registry.SAMPLINGS``, ``mdtheory.certify.CHECKS``) through tests/registry.py; an entry that
no test instance or agreement run reaches fails ``test_every_registry_entry_is_covered``.
"""

from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

import mdtheory as md
from mdtheory import certify
from mdtheory.models.registry import SAMPLINGS

from .certificates import check_all
from .instances import CANONICAL, canonical, random_pair
from .registry import CERTIFICATES, MODEL_INSTANCES, admitted_routes, brute_force_alpha, registered_models
from .tolerances import ROUNDING, SOLVER

AGREE = SOLVER  # routes through HiGHS and the max-flow agree to the solvers' tolerance
MODELS = registered_models()


def model_for(sampling, rng, V, n, concentration=1.0):
    p, _ = random_pair(rng, V, concentration)
    return p, MODEL_INSTANCES[sampling](rng, V, n, concentration)


def run_all(p, model):
    """Every registered route that admits the model, each result's certificates checked."""
    results = admitted_routes(p, model)
    for res in results.values():
        check_all(res, p, model)
    return results


def assert_agree(results, reference=None):
    ref = reference if reference is not None else results["subsets"].value
    for method, res in results.items():
        assert abs(res.value - ref) <= AGREE, f"{method}: {res.value} vs reference {ref}"


SIZES = [(2, 1), (3, 2), (4, 2), (4, 3), (5, 2), (5, 3), (6, 4)]


@pytest.mark.parametrize("sampling", MODELS)
@pytest.mark.parametrize("V,n", SIZES)
def test_routes_agree_random(sampling, V, n):
    rng = np.random.default_rng(1000 * V + 10 * n + MODELS.index(sampling))
    for concentration in (0.1, 1.0, 5.0):
        p, model = model_for(sampling, rng, V, n, concentration)
        results = run_all(p, model)
        assert {"subsets", "dual"} <= set(results)  # every model has the general routes
        assert abs(results["subsets"].value - brute_force_alpha(p, model)) <= ROUNDING
        assert_agree(results)
        if concentration == 1.0:  # well-separated masses: the minimal cut is unambiguous
            # the routes that return the inclusion-minimal cut: read off a maximum flow or plan
            # (cut_from_flow), or the minimal minimiser of all 2^V sets
            minimal = {m: r for m, r in results.items()
                       if r.plan is not None or r.flow is not None or r.certificate == "exhaustive"}
            assert len(minimal) >= 5
            cuts = {m: tuple(r.cut.tolist()) for m, r in minimal.items()}
            assert len(set(cuts.values())) == 1, f"routes disagree on the minimal cut: {cuts}"


@pytest.mark.parametrize("name", sorted(CANONICAL))
def test_canonical_instances(name):
    p, q, n, alpha = canonical(name)
    results = run_all(p, md.IID(q, n))
    assert_agree(results, reference=alpha)


@pytest.mark.parametrize("sampling", MODELS)
def test_degenerate_instances_all_models(sampling):
    """p = q, point masses and zeros, for every draft model (those built from one law from a q
    with a zero; the others from their test instance)."""
    rng = np.random.default_rng(7)
    n = 2
    q = np.array([0.4, 0.3, 0.2, 0.1, 0.0])
    cases = [q.copy(), np.array([0.0, 0.0, 0.0, 0.0, 1.0]), np.array([1.0, 0, 0, 0, 0]),
             np.array([0.0, 0.5, 0.0, 0.5, 0.0])]
    if sampling == "independent":  # a zero in each law, not at the same token
        model = md.Independent(np.vstack([q, rng.permutation(q)]))
    elif SAMPLINGS[sampling].single_q:
        model = md.make_draft_model(q, n, sampling)
    else:
        model = MODEL_INSTANCES[sampling](rng, 5, n)
    drafted = model.coverage(np.eye(5, dtype=bool))  # P(token y is among the drafts)
    for p in cases:
        results = run_all(p, model)
        assert_agree(results)
        # each token is output as an accepted draft at most as often as it is drafted (p = e_4:
        # token 4 is never drafted unless the permuted independent row gives it mass)
        assert results["subsets"].value <= np.minimum(p, drafted).sum() + ROUNDING
    # p the first draft's law: accepting the first draft is lossless, so alpha* = 1
    assert md.alpha_star(model.first_draft_law(), model) == pytest.approx(1.0, abs=ROUNDING)


def test_joint_table_matches_iid():
    rng = np.random.default_rng(3)
    p, q = random_pair(rng, 4)
    table = np.einsum("i,j,k->ijk", q, q, q)
    joint = md.Joint(table)
    for method, res in admitted_routes(p, joint).items():
        assert res.value == pytest.approx(md.alpha_star(p, q, 3), abs=AGREE), method


def test_single_draft_is_one_minus_tv():
    rng = np.random.default_rng(11)
    for _ in range(20):
        p, q = random_pair(rng, 6, 0.5)
        tv = 0.5 * np.abs(p - q).sum()
        for sampling in ("iid", "without-replacement", "conditional-poisson"):
            for method in ("auto", "dual", "otlp"):
                assert md.alpha_star(p, q, 1, sampling, method=method) == pytest.approx(
                    1 - tv, abs=AGREE), (sampling, method)


def exact_iid_alpha(p, q, n):
    """alpha* = 1 + min_T [p(T) - q(T)^n] in exact rationals, by enumeration."""
    V = len(p)
    best = Fraction(0)
    for k in range(1, V + 1):
        for T in combinations(range(V), k):
            best = min(best, sum(p[i] for i in T) - sum(q[i] for i in T) ** n)
    return 1 + best


def test_float_routes_match_exact_rational_value():
    rng = np.random.default_rng(5)
    for _ in range(15):
        V, n = int(rng.integers(2, 7)), int(rng.integers(1, 5))
        pn, qn = rng.integers(0, 20, V) + 1, rng.integers(0, 20, V)
        qn[0] += 1
        p = [Fraction(int(x), int(pn.sum())) for x in pn]
        q = [Fraction(int(x), int(qn.sum())) for x in qn]
        exact = exact_iid_alpha(p, q, n)
        pf, qf = np.array(p, dtype=float), np.array(q, dtype=float)
        results = admitted_routes(pf, md.IID(qf, n))
        for method, res in results.items():
            assert abs(res.value - float(exact)) <= ROUNDING if method in ("subsets", "prefix") \
                else abs(res.value - float(exact)) <= AGREE, (method, res.value, exact)
        assert {"subsets", "prefix", "otlp", "dual", "maxflow", "mnp"} <= set(results)


def test_prefix_matches_exhaustive_without_replacement_with_ties():
    """Hu et al.'s prefix claim for successive sampling, on instances built with ties in q/p."""
    rng = np.random.default_rng(2024)
    for _ in range(300):
        V = int(rng.integers(2, 8))
        n = int(rng.integers(2, min(V, 5) + 1))
        q = rng.dirichlet(np.full(V, rng.choice([0.2, 1.0, 4.0])))
        p = rng.dirichlet(np.ones(V))
        block = rng.random(V) < 0.5
        p[block] = q[block] / rng.uniform(0.3, 3.0)  # equal q/p on the block, unequal q
        p /= p.sum()
        model = md.WithoutReplacement(q, n)
        exhaustive = md.alpha_star(p, model, method="subsets")
        assert md.alpha_star(p, model, method="prefix") == pytest.approx(exhaustive, abs=1e-11)


def test_plan_depends_on_set_only_in_symmetry_reduction():
    """Literal and set-reduced OTLP: same optimum, and the set plan lifted to tuples is feasible."""
    rng = np.random.default_rng(9)
    p, q = random_pair(rng, 4)
    model = md.IID(q, 3)
    sets = md.optimal_acceptance(p, model, method="otlp")
    lit = md.optimal_acceptance(p, model, method="otlp-literal")
    assert sets.value == pytest.approx(lit.value, abs=AGREE)
    assert len(sets.support) < len(lit.support)


def test_declarations_drive_the_routes():
    """The solvers read a draft model's declarations, not its class or name: an iid law under a new
    name, declaring no prefix property, is routed to 'subsets' and refused by 'prefix'; declaring a
    proved one (but no closed-form base) it takes the prefix route with the flow certificate."""

    class Plain(md.IID):
        sampling = "plain"
        prefix_property = None
        lex_base_closed_form = False

    class Prefixed(Plain):
        prefix_property = "proved"

    p, q, n = np.array([0.4, 0.3, 0.2, 0.1]), np.array([0.1, 0.2, 0.3, 0.4]), 2
    expected = md.alpha_star(p, q, n, method="subsets")
    res = md.optimal_acceptance(p, Plain(q, n))
    assert (res.method, res.certificate) == ("subsets", "exhaustive")
    assert abs(res.value - expected) <= AGREE
    with pytest.raises(md.InvalidInputError, match="method 'prefix' is exact only for"):
        md.optimal_acceptance(p, Plain(q, n), method="prefix")
    res = md.optimal_acceptance(p, Prefixed(q, n))
    assert (res.method, res.certificate, res.status) == ("prefix", "flow", "optimal")
    assert abs(res.value - expected) <= AGREE


def test_enumeration_limit_is_the_models():
    """The exhaustive route refuses V over the model's own limit: 16 for successive sampling with
    n > 2 (a quadrature per set), 22 with a closed-form containment."""
    q = np.full(17, 1 / 17)
    assert md.WithoutReplacement(q, 3).enumeration_limit == 16
    assert md.WithoutReplacement(q, 2).enumeration_limit == md.IID(q, 3).enumeration_limit == 22
    with pytest.raises(md.ProblemTooLargeError, match="over the limit 2\\^16"):
        md.optimal_acceptance(q, md.WithoutReplacement(q, 3), method="subsets", max_seconds=1e6)


def exact_cp_alpha(p, q, n):
    """alpha* = 1 + min_T [p(T) - e_n(q|T) / e_n(q)] over all 2^V sets, in exact rationals."""
    p, q = [Fraction(x) for x in p], [Fraction(x) for x in q]

    def esp(ws):
        return sum((np.prod(c) for c in combinations(ws, n)), Fraction(0))

    total, V = esp(q), len(q)
    return 1 + min(sum(p[i] for i in T) - esp([q[i] for i in T]) / total
                   for k in range(V + 1) for T in combinations(range(V), k))


@pytest.mark.parametrize("tiny", [1e-200, 1e-310])  # below polymatroid.TINY = 2^-600; subnormal
def test_prefix_with_masses_below_tiny_renormalised_laws(monkeypatch, tiny):
    """Conditional Poisson with one dominant token and the rest below TINY: every draft set is
    {0, j}, so the tiny tokens are drafted with probability 1/7 each; reading them as zero put them
    last and 'proved' alpha* = 1. The prefix route (theorem certificate) meets the exact rational
    1 + 1/2 - 6/7; without replacement (same sets, up to 1e-200) its upper bound meets it too."""
    from mdtheory import certify

    monkeypatch.setattr(certify, "MAX_CERT_SETS", 0)
    V = 8
    q = np.full(V, tiny)
    q[0] = 1.0
    p = np.zeros(V)
    p[:2] = 0.5
    exact = exact_cp_alpha(p, q, 2)
    assert abs(exact - Fraction(9, 14)) < Fraction(1, 10**100)
    res = md.optimal_acceptance(p, q, 2, "conditional-poisson", method="prefix")
    assert (res.status, res.certificate) == ("optimal", "prefix-theorem")
    assert abs(res.value - float(exact)) <= ROUNDING
    wr = md.optimal_acceptance(p, q, 2, "without-replacement", method="prefix")
    assert abs(wr.value - float(exact)) <= 1e-9


@pytest.mark.parametrize("n", [2, 3])
def test_conditional_poisson_when_e_n_underflows(n):
    """One dominant token and four of mass 1e-200: e_n(q) ~ 1e-200 (n = 2) or 1e-400 (n = 3,
    below the float range) gave 0/0 in the set law and the vectorised containment (SolverError,
    nan). Every route meets the exact rational alpha*, and the set law the exact one."""
    p = np.array([0.4, 0.3, 0.2, 0.05, 0.05])
    q = np.array([1.0, 1e-200, 1e-200, 1e-200, 1e-200])
    exact = float(exact_cp_alpha(p, q, n))
    for method in ("auto", "subsets", "dual", "mnp"):
        value = md.alpha_star(p, q, n, "conditional-poisson", method=method)
        assert abs(value - exact) <= SOLVER, (method, value, exact)
    law = md.make_draft_model(q, n, "conditional-poisson").set_law()
    weights = [np.prod([Fraction(x) for x in q[row]]) for row in law.members]
    assert np.allclose(law.probs, [float(w / sum(weights)) for w in weights], rtol=1e-12, atol=0)


def test_every_registry_entry_is_covered():
    """Every registered draft model has a test instance, every proof type with a registered check
    an expected certificate, and every registered route is admitted by some model's instance, so the
    agreement runs above reach it (a new entry without coverage fails here)."""
    assert set(MODELS) <= set(MODEL_INSTANCES), set(MODELS) - set(MODEL_INSTANCES)
    assert set(certify.CHECKS) <= set(CERTIFICATES), set(certify.CHECKS) - set(CERTIFICATES)
    rng = np.random.default_rng(0)
    reached = set()
    for sampling in MODELS:
        p, model = model_for(sampling, rng, 4, 2)
        reached |= set(admitted_routes(p, model))
    assert reached == set(md.METHODS), set(md.METHODS) - reached
