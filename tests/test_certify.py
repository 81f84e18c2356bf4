"""The front door proves what it returns: every certificate, and every SolverError path.

Routes are replaced (monkeypatch on :data:`mdtheory.solve.METHODS`) by wrappers that corrupt one part
of the real route's output or its proof: a wrong value, cut, plan, flow, order or base must raise
SolverError, and the CLI must exit 3 on it.
"""

import dataclasses
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mdtheory as md
from mdtheory import certify, cli, solve
from mdtheory.claims.exact import exact_otlp
from mdtheory.models.polymatroid import base_polytope_violation, lex_optimal_base_iid, priority_marginal
from mdtheory.routes.proofs import Exhaustive, Proof, RouteOutput, SetFlow, TransportPlan, cut_from_flow

from .instances import random_pair
from .registry import MODEL_INSTANCES, admitted_routes, certificate_for, registered_models
from .tolerances import ROUNDING

P = np.array([0.4, 0.3, 0.2, 0.1])
Q = np.array([0.1, 0.2, 0.3, 0.4])
N = 2


def routes_returning(*kinds, exclude=()):
    """The registered routes whose proof on the iid pair (P, Q, N) is one of ``kinds`` (any proof
    if none given, but not those of ``exclude``), read off what the routes return."""
    model = md.IID(Q, N)
    out = []
    for name, route in md.METHODS.items():
        try:
            kind = type(route(P, model).proof)
        except md.InvalidInputError:  # a route that does not serve iid drafts
            continue
        if (not kinds or kind in kinds) and kind not in exclude:
            out.append(name)
    assert out, f"no registered route returns {kinds}"
    return out


def edited(out, change, *args):
    """A copy of the frozen RouteOutput ``out`` with ``change(fields, *args)`` applied to its fields
    and its proof's, in one dict (``value``, ``cut``, ``plan``, ``flow``, ``order``, ...): fields may be
    updated or popped, a popped one reverting to its default (None for a proof's)."""
    outer = {k: v for k, v in vars(out).items() if k != "proof"}
    inner = dict(vars(out.proof))
    fields = {**outer, **inner}
    change(fields, *args)
    proof = type(out.proof)(**{k: fields.get(k) for k in inner})
    return RouteOutput(**{k: fields[k] for k in outer if k in fields}, proof=proof)


def corrupt(monkeypatch, method, change):
    """Replace route ``method`` by the real route followed by ``change(out, p, model)``."""
    real = solve.METHODS[method]

    def route(p, model):
        return edited(real(p, model), change, p, model)

    monkeypatch.setitem(solve.METHODS, method, dataclasses.replace(real, run=route))


def raises(match, method="prefix", p=P, q=Q, n=N, sampling="iid", **kw):
    with pytest.raises(md.SolverError, match=match):
        md.optimal_acceptance(p, q, n, sampling, method=method, **kw)


# ----------------------------------------------------------------------------- certificates hold
@pytest.mark.parametrize("method", list(md.METHODS))
def test_every_route_is_proven(method):
    """Every registered route, on every registered model's test instance it admits, reports the
    certificate of the proof it returns, status optimal and a gap within CERT_TOL."""
    rng = np.random.default_rng(12)
    proven = 0
    for sampling in registered_models():
        model = MODEL_INSTANCES[sampling](rng, 4, 2, 0.5)
        p = rng.dirichlet(np.full(4, 0.5))
        if method not in admitted_routes(p, model):
            continue
        res = md.optimal_acceptance(p, model, method=method)
        expected = certificate_for(p, model, method)
        assert res.certificate == expected, (sampling, res.certificate, expected)
        assert res.status == "optimal"
        assert abs(res.certificate_gap) <= certify.CERT_TOL
        assert 0.0 < res.value < 1.0 and res.cut.size > 0  # a real cut: the checks are not vacuous
        proven += 1
    assert proven > 0, f"no registered model admits method {method!r}"


def test_base_is_the_lexicographic_base_and_attains_the_value():
    rng = np.random.default_rng(4)
    for _ in range(40):
        V, n = int(rng.integers(2, 9)), int(rng.integers(1, 6))
        p, q = random_pair(rng, V, float(rng.choice([0.2, 1.0, 5.0])))
        p[rng.random(V) < 0.2] = 0.0  # zeros in p
        if p.sum() == 0:
            p[0] = 1.0
        p /= p.sum()
        for mode in ("fast", "full"):
            res = md.optimal_acceptance(p, q, n, certify=mode)
            assert res.certificate == {"fast": "base", "full": "lex-base"}[mode]
            assert abs(np.minimum(p, res.base).sum() - res.value) <= 1e-12
            assert base_polytope_violation(res.base, md.IID(q, n)) <= 1e-12
            assert np.abs(res.base - lex_optimal_base_iid(p, q, n).mu).max() <= 1e-12
            assert res.value == pytest.approx(md.alpha_star(p, q, n, method="subsets"), abs=1e-12)


@given(st.integers(1, 7), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_scan_bound_dominates_the_true_violation(V, n, seed):
    """The one-scan eta is >= max_S [mu(S) - g(S)] (checked on all 2^V sets) for ANY mu and order:
    the proof of check_base_iid does not depend on mu being the lexicographic base."""
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.full(V, 0.5))
    q[rng.random(V) < 0.2] = 0.0
    q = q / q.sum() if q.sum() > 0 else np.eye(V)[0]
    model = md.IID(q, n)
    kind = seed % 3
    if kind == 0:  # a random point of the simplex, usually outside B(g)
        mu = rng.dirichlet(np.ones(V))
    elif kind == 1:  # a vertex of B(g) (priority order): inside
        mu = priority_marginal(model, rng.permutation(V))
    else:  # a mixture of two vertices, slightly pushed off
        mu = 0.5 * (priority_marginal(model, rng.permutation(V))
                    + priority_marginal(model, rng.permutation(V)))
        mu = np.abs(mu + 1e-3 * rng.standard_normal(V))
        mu /= mu.sum()
    order = rng.permutation(V)
    _, eta, _, _, _ = certify._base_bounds(np.full(V, 1.0 / V), model, order, mu, "test")
    assert eta >= base_polytope_violation(mu, model) - 1e-12


def test_wrong_order_is_caught_not_trusted(monkeypatch):
    """A route that gives the right value and cut but a wrong order: its base cannot prove it."""
    corrupt(monkeypatch, "prefix", lambda out, p, model: out.update(order=out["order"][::-1].copy()))
    raises("prefix")


def test_value_is_not_clamped(monkeypatch):
    """A value a rounding above one is returned as is (no clamp), within VALUE_TOL."""
    corrupt(monkeypatch, "subsets",
            lambda out, p, model: out.update(value=1.0 + 5e-10, cut=np.zeros(0, np.int64)))
    p = np.array([0.5, 0.5])
    assert md.optimal_acceptance(p, p, 2, method="subsets").value == 1.0 + 5e-10


def test_without_replacement_beyond_the_set_limit_is_an_upper_bound(monkeypatch):
    """Beyond the flow's size, where no majorant meets the cut (here: none tried), only the cut."""
    monkeypatch.setattr(certify, "MAX_CERT_SETS", 0)
    monkeypatch.setattr(certify, "_successive_bounds", lambda *args: None)
    res = md.optimal_acceptance(P, Q, N, "without-replacement", method="prefix")
    assert (res.status, res.certificate, res.certificate_gap) == ("upper-bound", "cut", None)
    assert res.value == pytest.approx(md.alpha_star(P, Q, N, "without-replacement", method="dual"),
                                      abs=1e-9)
    full = md.optimal_acceptance(P, Q, N, "without-replacement", certify="full")
    assert (full.status, full.certificate) == ("optimal", "flow")


def test_unknown_certify_mode():
    with pytest.raises(md.InvalidInputError, match="certify mode 'some'; valid choices: fast, full"):
        md.optimal_acceptance(P, Q, N, certify="some")


# ----------------------------------------------------------------------------- value and cut
@pytest.mark.parametrize("value", [1.3, -0.2, np.nan, np.inf])
def test_value_outside_unit_interval(monkeypatch, value):
    corrupt(monkeypatch, "prefix", lambda out, p, model: out.update(value=value))
    raises(r"outside \[0, 1\]")


def test_value_above_one_with_a_consistent_cut(monkeypatch):
    """1 + p(T) - Q(T) = 1.3 for T = {0}: the cut agrees, the range check still refuses."""
    corrupt(monkeypatch, "subsets", lambda out, p, model: out.update(value=1.3, cut=np.array([0])))
    raises(r"1\.3, outside \[0, 1\]", "subsets", np.array([0.5, 0.5]), np.array([0.2, 0.8]), 1)


def test_cut_that_does_not_give_the_value(monkeypatch):
    corrupt(monkeypatch, "dual", lambda out, p, model: out.update(cut=np.zeros(0, np.int64)))
    raises("but its cut set .* gives 1", "dual")


def test_cut_index_out_of_range(monkeypatch):
    corrupt(monkeypatch, "maxflow", lambda out, p, model: out.update(cut=np.array([0, 9])))
    raises(r"indices outside 0\.\.3", "maxflow")


@pytest.mark.parametrize("method", routes_returning(exclude=(Exhaustive,)))
def test_non_optimal_cut_with_its_own_value(monkeypatch, method):
    """A cut that is not optimal, with the value it gives: cut and value agree, the primal object
    (base, plan or flow of the real optimum) proves a smaller value."""
    def change(out, p, model):
        T = np.array([2, 3])  # gives 0.81; the optimum is 0.79 at {1, 2, 3}
        out.update(cut=T, value=certify.cut_value(p, model, T))

    corrupt(monkeypatch, method, change)
    raises("proves alpha\\* >= .* but its cut set gives", method)


# ----------------------------------------------------------------------------- plans
def _plan_change(kind):
    def change(out, p, model):
        plan = out["plan"].copy()
        if kind == "negative":
            plan[0, 0] = -1e-3
        elif kind == "row":
            plan[0] *= 1.01
        elif kind == "law":
            plan = plan[:, ::-1].copy()
        elif kind == "suboptimal":  # resample p whatever the drafts: feasible, accepts less
            plan[:] = p
        elif kind == "nan":
            plan[0, 0] = np.nan
        elif kind == "shape":
            plan = plan[:, :-1]
        out["plan"] = plan
    return change


@pytest.mark.parametrize("method", routes_returning(TransportPlan))
@pytest.mark.parametrize("kind,match", [
    ("negative", "a plan entry is negative"), ("row", "a row of the plan misses summing to one"),
    ("law", "the plan's output law differs from p"), ("suboptimal", "its plan proves alpha\\* >="),
    ("nan", "non-finite"), ("shape", "plan has shape")])
def test_wrong_plan(monkeypatch, method, kind, match):
    corrupt(monkeypatch, method, _plan_change(kind))
    raises(match, method)


@pytest.mark.parametrize("method", routes_returning(TransportPlan, SetFlow))
@pytest.mark.parametrize("field", ["support", "support_probs"])
def test_support_must_be_the_model_law(monkeypatch, method, field):
    """A plan or flow over a draft law other than the model's proves nothing about the model."""
    def change(out, p, model):
        out[field] = out[field][::-1].copy()

    corrupt(monkeypatch, method, change)
    raises("differ from the draft model's", method)


def test_missing_plan(monkeypatch):
    corrupt(monkeypatch, "otlp", lambda out, p, model: out.pop("plan"))
    raises("returned no plan to certify", "otlp")


# ----------------------------------------------------------------------------- flows
def _flow_change(kind):
    def change(out, p, model):
        flow, members = out["flow"].copy(), out["support"]
        k, y = np.argwhere(members)[0]
        if kind == "negative":
            flow[k, y] = -1e-3
        elif kind == "stray":
            k2, y2 = np.argwhere(~members)[0]
            flow[k2, y2] = 1e-3
        elif kind == "token":
            flow[k, y] += p[y] + 1e-3
        elif kind == "suboptimal":
            flow *= 0.5
        elif kind == "nan":
            flow[k, y] = np.inf
        elif kind == "shape":
            flow = flow[:-1]
        out["flow"] = flow
    return change


@pytest.mark.parametrize("method", routes_returning(SetFlow))
@pytest.mark.parametrize("kind,match", [
    ("negative", "a flow entry is negative"), ("stray", "flow runs from a token to a draft set"),
    ("token", r"a token sends more than p\(y\)"), ("suboptimal", "its flow proves alpha\\* >="),
    ("nan", "non-finite"), ("shape", "flow has shape")])
def test_wrong_flow(monkeypatch, method, kind, match):
    corrupt(monkeypatch, method, _flow_change(kind))
    raises(match, method)


def test_flow_over_a_draft_set_capacity():
    members = np.array([[True, True]])
    with pytest.raises(md.SolverError, match="a draft set receives more than w_U"):
        certify.check_flow(np.array([0.5, 0.5]), members, np.array([0.5]), np.array([[0.3, 0.3]]))


def test_missing_flow(monkeypatch):
    corrupt(monkeypatch, "maxflow", lambda out, p, model: out.pop("support"))
    raises("returned no flow to certify", "maxflow")


def test_without_replacement_prefix_flow_is_checked(monkeypatch):
    real = certify.dual_lp

    def halved(p, model):
        return edited(real(p, model), lambda out: out.update(flow=out["flow"] * 0.5))

    monkeypatch.setattr(certify, "dual_lp", halved)
    raises("its flow proves alpha\\* >=", "prefix", sampling="without-replacement")


# ----------------------------------------------------------------------------- bases
@pytest.mark.parametrize("order,match", [
    (lambda o: o.astype(float), "order is not a permutation"),
    (lambda o: np.concatenate([o[:1], o[:-1]]), "order is not a permutation"),
    (lambda o: np.where(o == o.max(), 99, o), "order is not a permutation"),
    (lambda o: o[:-1], "order is not a permutation")])
def test_order_not_a_permutation(monkeypatch, order, match):
    corrupt(monkeypatch, "prefix", lambda out, p, model: out.update(order=order(out["order"])))
    raises(match)


def test_missing_order(monkeypatch):
    corrupt(monkeypatch, "prefix", lambda out, p, model: out.pop("order"))
    raises("returned no order to certify")


@pytest.mark.parametrize("mu,match", [
    (np.array([0.5, 0.5, 0.5, np.nan]), "non-finite"),
    (np.array([0.7, 0.4, 0.2, -0.3]), "a base entry is negative"),
    (np.array([0.2, 0.2, 0.2, 0.2]), "the base misses summing to one"),
    (np.array([1.0, 0.0, 0.0, 0.0]), r"exceeds the coverage g\(S\)"),  # mu({0}) = 1 > g({0})
    (np.ones(3) / 3, "the base has shape")])
def test_wrong_base(mu, match):
    model = md.IID(Q, N)
    order = np.argsort(P / Q)
    with pytest.raises(md.SolverError, match=match):
        certify.check_base_iid(P, model, order, mu)


def test_full_certificate_checks_the_lex_base(monkeypatch):
    """certify="full" checks lex_optimal_base_iid's base: a wrong one raises."""
    monkeypatch.setattr(certify, "lex_optimal_base_iid",
                        lambda p, q, n: type("B", (), {"mu": np.eye(q.size)[0]})())
    raises(r"exceeds the coverage g\(S\)", certify="full")


# ----------------------------------------------------------------------------- other routes
def test_exhaustive_route_must_evaluate_every_set(monkeypatch):
    corrupt(monkeypatch, "subsets", lambda out, p, model: out.update(sets=out["sets"] - 1))
    raises(r"reports 15 token sets evaluated, not all 2\^4", "subsets")


def test_exhaustive_route_must_report_the_minimum(monkeypatch):
    """A route that enumerates every set but reports a cut that is not a minimiser (its value agreeing
    with that cut) is refused: the certifier recomputes the minimum over all 2^V sets."""
    def worse(out, p, model):
        T = np.array([3])  # a set whose value misses the minimum
        assert 1.0 + p[T].sum() - model.containment(np.isin(np.arange(4), T)) > out["value"] + 1e-3
        out.update(cut=T, value=1.0 + p[T].sum() - model.containment(np.isin(np.arange(4), T)))

    corrupt(monkeypatch, "subsets", worse)
    raises(r"its exhaustive proves alpha\* >= .* but its cut set gives", "subsets")


def test_exhaustive_minimum_is_the_minimum_over_all_sets():
    rng = np.random.default_rng(3)
    for sampling in registered_models():
        model = MODEL_INSTANCES[sampling](rng, 5, 2, 0.5)
        p = rng.dirichlet(np.ones(5))
        sets = [np.isin(np.arange(5), T) for k in range(6) for T in combinations(range(5), k)]
        brute = min(p[m].sum() - float(model.containment(m)) for m in sets)
        assert certify.exhaustive_minimum(p, model) == pytest.approx(brute, abs=ROUNDING)


def test_route_without_a_certificate(monkeypatch):
    """A route whose proof is of a type no check is registered for, or no proof at all, proves
    nothing; a registered route of an existing proof type is certified like the others."""
    @dataclasses.dataclass(frozen=True)
    class Hunch(Proof):
        pass

    prefix = solve.METHODS["prefix"]
    for proof in (Hunch(), None):
        route = dataclasses.replace(prefix, name="custom", run=lambda p, model, proof=proof:
                                    dataclasses.replace(prefix(p, model), proof=proof))
        monkeypatch.setitem(solve.METHODS, "custom", route)
        raises(f"no certificate is known for method 'custom': its proof is {type(proof).__name__}",
               "custom")
    monkeypatch.setitem(solve.METHODS, "custom", dataclasses.replace(prefix, name="custom"))
    assert md.optimal_acceptance(P, Q, N, method="custom").certificate == "base"


def test_solver_paths_inside_the_routes(monkeypatch):
    """The SolverErrors the routes raise themselves: HiGHS without an optimum, a fractional dual
    vertex, a flow that is not maximum, cdd without an optimum."""
    from scipy import sparse

    from mdtheory import _highs
    from mdtheory.routes import dual

    with pytest.raises(md.SolverError, match="HiGHS did not prove optimality: Infeasible"):
        _highs.solve_lp(np.ones(1), sparse.csc_matrix(np.ones((1, 1))), np.array([2.0]),
                        np.array([2.0]), maximize=True, col_upper=np.ones(1))
    real = dual.solve_lp
    monkeypatch.setattr(dual, "solve_lp", lambda *a, **k: real(*a, **k)._replace(
        x=np.full_like(real(*a, **k).x, 0.5)))
    raises("not 0/1", "dual")
    members = np.array([[True, False], [False, True]])
    with pytest.raises(md.SolverError, match="not maximum"):
        cut_from_flow(np.array([0.5, 0.5]), members, np.array([0.5, 0.5]), np.zeros((2, 2)))
    with pytest.raises(md.SolverError, match="cdd's exact LP ended with status"):
        exact_otlp([Fraction(1, 2)] * 2, {frozenset({0}): Fraction(1, 2)})  # masses 1 vs 1/2


# ----------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("method", ["prefix", "dual"])
def test_cli_exit_code_3_on_an_unproven_result(monkeypatch, tmp_path, capsys, method):
    np.save(tmp_path / "p.npy", P)
    np.save(tmp_path / "q.npy", Q)
    corrupt(monkeypatch, method, lambda out, p, model: out.update(value=out["value"] - 0.01))
    code = cli.main(["check-acceptance", str(tmp_path / "p.npy"), str(tmp_path / "q.npy"),
                     "--drafts", str(N), "--method", method])
    err = capsys.readouterr().err
    assert code == 3
    assert err.startswith("mdtheory: solver error:") and "cut set" in err
    assert len(err.strip().splitlines()) == 1


def test_every_subset_of_a_small_alphabet_is_bounded_by_the_certificate():
    """Weak duality on a full enumeration: every cut value is >= the proven lower bound."""
    res = md.optimal_acceptance(P, Q, N)
    model = md.IID(Q, N)
    lower = res.value - res.certificate_gap
    for k in range(P.size + 1):
        for T in combinations(range(P.size), k):
            assert certify.cut_value(P, model, list(T)) >= lower - 1e-15


SUBNORMAL = [  # subnormal and overflowing masses, and the extremes of the property tests
    ([1e-320, 0.5, 0.5], [0.9, 0.05, 0.05], 2),
    ([1, 0, 0, 0, 1.9e-315, 0], [6.5674017161776066e-02, 9.8108457273202955e-07,
                                 6.8537843805975555e-06, 1.2658213388272264e-05,
                                 2.1222016914623543e-06, 2.4426641975585176e-05], 2),
    ([1.0, 5e-324], [0.0, 1.0], 1),
]


@pytest.mark.parametrize("p,q,n", SUBNORMAL)
def test_subnormal_masses_are_proven(p, q, n):
    """The default base shares each block's rise as (rise / block p) * p, block p >= TINY, or on a
    vertical block as rise * (q / block q): neither overflows."""
    p, q = np.array(p) / np.sum(p), np.array(q) / np.sum(q)
    res = md.optimal_acceptance(p, q, n)
    assert res.certificate == "base" and abs(res.certificate_gap) <= certify.CERT_TOL
    assert np.isfinite(res.base).all()
    assert res.value == pytest.approx(md.alpha_star(p, q, n, method="subsets"), abs=1e-12)


@pytest.mark.parametrize("p,q,n", SUBNORMAL)
def test_subnormal_masses_full_certificate(p, q, n):
    p, q = np.array(p) / np.sum(p), np.array(q) / np.sum(q)
    res = md.optimal_acceptance(p, q, n, certify="full")
    assert res.certificate == "lex-base" and abs(res.certificate_gap) <= certify.CERT_TOL


def test_base_check_needs_iid_drafts():
    with pytest.raises(md.InvalidInputError, match="needs iid drafts, not 'without-replacement'"):
        certify.check_base_iid(P, md.WithoutReplacement(Q, N), np.arange(4))


def test_json_stdout_is_clean_with_an_lp_route(tmp_path):
    """HiGHS writes a banner to fd 1 on its first construction; --json output must stay parseable."""
    import json
    import subprocess
    import sys

    np.save(tmp_path / "p.npy", np.array([0.5, 0.3, 0.2]))
    np.save(tmp_path / "q.npy", np.array([0.2, 0.3, 0.5]))
    out = subprocess.run([sys.executable, "-m", "mdtheory", "check-acceptance", str(tmp_path / "p.npy"),
                          str(tmp_path / "q.npy"), "--drafts", "2", "--method", "dual", "--json"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out.splitlines()[0])["alpha_star"] == pytest.approx(0.86)


@pytest.mark.parametrize("sampling", ["iid", "without-replacement", "conditional-poisson"])
def test_result_carries_its_cut_masses_and_baseline(sampling):
    """margin and the single-draft baseline live on the result (the CLI only prints them)."""
    rng = np.random.default_rng(7)
    p, q = rng.dirichlet(np.ones(8)), rng.dirichlet(np.ones(8))
    res = md.optimal_acceptance(p, q, 3, sampling)
    model = md.make_draft_model(q, 3, sampling)
    in_cut = np.isin(np.arange(8), res.cut)
    assert res.cut_p == pytest.approx(p[in_cut].sum(), abs=1e-15)
    assert res.cut_q == pytest.approx(float(model.containment(in_cut)), abs=1e-15)
    assert res.margin == pytest.approx(1 - res.value, abs=1e-12)
    assert res.single_draft == pytest.approx(np.minimum(p, model.first_draft_law()).sum(), abs=1e-15)


def test_prefix_theorem_checks_the_exact_ratio_order(monkeypatch):
    """Conditional Poisson beyond MAX_CERT_SETS: the theorem proves the best prefix of the exact p/q
    order, so a route scanning another order (here the iid one, which reads masses below TINY as
    zero) is refused even with a value and cut that agree."""
    from mdtheory.routes.subsets import prefix_order

    monkeypatch.setattr(certify, "MAX_CERT_SETS", 0)
    q = np.array([1.0, 1e-200, 1e-200, 1e-200])
    p = np.array([0.5, 0.5, 0.0, 0.0])
    assert md.optimal_acceptance(p, q, 2, "conditional-poisson", method="prefix").certificate \
        == "prefix-theorem"
    corrupt(monkeypatch, "prefix", lambda out, p, model: out.update(order=prefix_order(p, model.q)))
    raises("exact p/q order", p=p, q=q, sampling="conditional-poisson")
    corrupt(monkeypatch, "prefix", lambda out, p, model: out.update(order=np.zeros(4, np.int64)))
    raises("not a permutation", p=p, q=q, sampling="conditional-poisson")
