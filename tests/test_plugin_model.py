"""A draft model defined here, outside the package, runs through every route, the rules, the audit
and the command line's check-acceptance: the package reads declared capabilities, not model names.

Two models: ``TwoOfAKind`` (one law q and n: the first draft from q, each later one a copy of it
with probability r, else a fresh draw from q; correlated drafts with repeats) and ``PairTable`` (an
explicit joint table of two correlated drafts, given as a table, not built from q). Their alpha* is
checked against a brute-force LP written here (scipy's linprog over the ordered draft tuples, from
the models' own tuple laws) and an exact enumeration of all token sets in rationals.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations, product

import numpy as np
import pytest
from scipy.optimize import linprog

import mdtheory as md
from mdtheory.models.base import TupleLaw
from mdtheory.models.registry import SAMPLINGS, register_sampling
from mdtheory.rules import RULES, make_rule

from .tolerances import SOLVER

R = Fraction(1, 2)  # TwoOfAKind: probability that a later draft copies the first


class TwoOfAKind(md.DraftModel):
    """X_1 ~ q; X_k = X_1 with probability r, else an independent draw from q (k >= 2)."""

    sampling = "two-of-a-kind"  # single_q: built from (q, n); every other capability the default

    def __init__(self, q, n, *, normalize=False, r=float(R)):
        self._init_from_q(q, n, normalize)
        self.r = r

    def containment(self, T):
        T, single = self._masks(T)
        qT = np.minimum(T @ self.q, 1.0)
        out = qT * (self.r + (1 - self.r) * qT) ** (self.n - 1)
        return out[0] if single else out

    def tuple_law(self):
        tuples = np.array(list(product(range(self.V), repeat=self.n)), dtype=np.int64).reshape(-1, self.n)
        first = tuples[:, :1]
        later = self.r * (tuples[:, 1:] == first) + (1 - self.r) * self.q[tuples[:, 1:]]
        probs = self.q[tuples[:, 0]] * later.prod(axis=1)
        keep = probs > 0
        return TupleLaw(tuples[keep], probs[keep])

    def set_law(self):
        return self.tuple_law().sets(self.V)

    def count_tuples(self):
        return int(np.count_nonzero(self.q)) ** self.n

    def count_sets(self):
        return self.count_tuples()

    def first_draft_law(self):
        return self.q


class PairTable(md.DraftModel):
    """Two drafts with an explicit joint table (V, V), correlated; not a product, not built from q."""

    sampling = "pair-table"
    single_q = False
    order_vertices = False  # no pass faster than a containment per prefix: no mnp route

    def __init__(self, table, *, normalize=False):
        self.table = np.asarray(table, dtype=float)
        self.n, self.V = 2, self.table.shape[0]

    def containment(self, T):
        T, single = self._masks(T)
        out = np.einsum("mi,ij,mj->m", T.astype(float), self.table, T.astype(float))
        return out[0] if single else out

    def tuple_law(self):
        idx = np.argwhere(self.table > 0)
        return TupleLaw(idx.astype(np.int64), self.table[tuple(idx.T)])

    def set_law(self):
        return self.tuple_law().sets(self.V)

    def count_tuples(self):
        return int(np.count_nonzero(self.table))

    count_sets = count_tuples

    def first_draft_law(self):
        return self.table.sum(axis=1)


@pytest.fixture
def registered():
    """TwoOfAKind and PairTable registered by name for one test, then removed."""
    register_sampling(TwoOfAKind)
    register_sampling(PairTable)
    yield
    for name in (TwoOfAKind.sampling, PairTable.sampling):
        SAMPLINGS.pop(name)


def brute_force_lp(p, model):
    """alpha* by the literal OT LP over the model's ordered tuples, with scipy's linprog (HiGHS)."""
    law = model.tuple_law()
    M, V = len(law.probs), model.V
    accept = np.zeros((M, V))
    for j in range(law.tuples.shape[1]):
        accept[np.arange(M), law.tuples[:, j]] = 1.0
    rows = np.zeros((M + V, M * V))
    for k in range(M):
        rows[k, k * V:(k + 1) * V] = 1.0  # sum_y C(x, y) = Q(x)
    for y in range(V):
        rows[M + y, y::V] = 1.0  # sum_x C(x, y) = p(y)
    res = linprog(-accept.ravel(), A_eq=rows, b_eq=np.concatenate([law.probs, p]), bounds=(0, None),
                  method="highs")
    assert res.status == 0, res.message
    return -res.fun


def exact_alpha(p, containment, V):
    """1 + min_T [p(T) - Q(T)] over all 2^V token sets, p and Q(T) in rationals."""
    return 1 + min(sum(p[i] for i in T) - containment(T)
                   for k in range(V + 1) for T in combinations(range(V), k))


def two_of_a_kind_exact(p, q, n):
    def containment(T):
        qT = sum((q[i] for i in T), Fraction(0))
        return qT * (R + (1 - R) * qT) ** (n - 1)
    return exact_alpha(p, containment, len(p))


def rational_pair(rng, V):
    pn, qn = rng.integers(1, 12, V), rng.integers(1, 12, V)
    qn[rng.integers(V)] = 0  # a zero in q
    p = [Fraction(int(x), int(pn.sum())) for x in pn]
    q = [Fraction(int(x), int(qn.sum())) for x in qn]
    return p, q, np.array(p, dtype=float), np.array(q, dtype=float)


def admitted(model):
    """The registered routes that accept the model: the others refuse it by name of the capability
    it lacks (not by a crash)."""
    out = []
    for name in md.METHODS:
        try:
            res = md.optimal_acceptance(np.full(model.V, 1.0 / model.V), model, method=name)
        except md.InvalidInputError as exc:
            assert any(word in str(exc) for word in ("exact only for", "greedy draft set only",
                                                     "fixed draft set only", "prefix containments")), (
                name, str(exc))
            continue
        assert res.status == "optimal", (name, res.status)
        out.append(name)
    return out


@pytest.mark.parametrize("V,n", [(3, 2), (4, 2), (4, 3), (5, 2)])
def test_two_of_a_kind_every_route_agrees_with_brute_force(registered, V, n):
    rng = np.random.default_rng(10 * V + n)
    p, q, pf, qf = rational_pair(rng, V)
    model = TwoOfAKind(qf, n)
    exact = float(two_of_a_kind_exact(p, q, n))
    lp = brute_force_lp(pf, model)
    assert abs(lp - exact) <= SOLVER
    routes = admitted(model)
    assert set(routes) == {"subsets", "otlp", "otlp-literal", "dual", "maxflow", "mnp"}
    for name in routes:
        res = md.optimal_acceptance(pf, model, method=name)
        assert res.status == "optimal" and res.method == name
        assert abs(res.value - exact) <= SOLVER, (name, res.value, exact)
    auto = md.optimal_acceptance(pf, model)  # by capabilities: V <= 16, no prefix property
    assert auto.method == "subsets" and abs(auto.value - exact) <= SOLVER
    # by name, through the registry, as a batch of two q rows (one-law models batch)
    values = md.alpha_star(pf, np.vstack([qf, qf]), n, "two-of-a-kind")
    assert np.abs(values - exact).max() <= SOLVER


def test_pair_table_every_route_agrees_with_brute_force(registered):
    table = np.array([[0.20, 0.10, 0.00, 0.05],
                      [0.00, 0.15, 0.05, 0.00],
                      [0.05, 0.00, 0.10, 0.10],
                      [0.00, 0.05, 0.05, 0.10]])
    p = np.array([0.1, 0.4, 0.3, 0.2])
    model = PairTable(table)
    exact = float(exact_alpha([Fraction(x) for x in p],
                              lambda T: sum((Fraction(table[i, j]) for i in T for j in T), Fraction(0)),
                              4))
    assert abs(brute_force_lp(p, model) - exact) <= SOLVER
    routes = admitted(model)
    assert set(routes) == {"subsets", "otlp", "otlp-literal", "dual", "maxflow"}  # mnp refused
    for name in routes:
        assert abs(md.alpha_star(p, model, method=name) - exact) <= SOLVER, name
    res = md.optimal_acceptance(p, table, sampling="pair-table")  # by name, built from its table
    assert res.method == "subsets" and abs(res.value - exact) <= SOLVER


def test_two_of_a_kind_rules_and_audit(registered):
    """The optimal rule (any model) is lossless and attains alpha*; the audit finds it lossless
    exactly and by sampling, and finds a lossy rule lossy; the size estimates are the model's."""
    rng = np.random.default_rng(3)
    p, q, pf, qf = rational_pair(rng, 4)
    n = 2
    alpha = md.alpha_star(pf, qf, n, "two-of-a-kind")
    rule = make_rule("optimal", pf, qf, n, sampling="two-of-a-kind")
    assert abs(rule.exact_acceptance() - alpha) <= SOLVER
    assert np.abs(rule.exact_output_law() - pf).max() <= SOLVER
    for name, cls in RULES.items():  # the rules written for one draft model refuse this one
        if name != "optimal":
            with pytest.raises(md.InvalidInputError, match=f"{cls.sampling}.*two-of-a-kind"):
                make_rule(name, pf, TwoOfAKind(qf, n), n)

    def optimal(p, q, drafts):  # the exact form: (acceptance law, residual law) given the drafts
        return rule.conditional(drafts)

    exact = md.audit(optimal, pf, qf, n, sampling="two-of-a-kind", exact=True)
    assert exact.lossless and abs(exact.acceptance - alpha) <= SOLVER
    assert abs(exact.alpha_star - alpha) <= SOLVER

    def first(p, q, drafts, rng):  # always output the first draft: its law is q, not p
        return int(drafts[0])

    sampled = md.audit(first, pf, qf, n, sampling="two-of-a-kind", samples=4000, seed=1)
    assert not sampled.lossless  # TV(p, q) is large on this pair
    assert 0.5 * np.abs(pf - qf).sum() > 0.2
    model = TwoOfAKind(qf, n)
    for name, route in md.METHODS.items():
        est = route.estimate(model)
        assert est.seconds >= 0 and est.bytes >= 0 and name in est.what


def test_two_of_a_kind_check_acceptance_command(registered, tmp_path, capsys):
    """The command line's check-acceptance runs a model registered here by name: its --sampling
    choices and its route's estimate come from the registries."""
    import json

    from mdtheory.cli import main

    rng = np.random.default_rng(8)
    p, q, pf, qf = rational_pair(rng, 5)
    np.save(tmp_path / "p.npy", pf)
    np.save(tmp_path / "q.npy", qf)
    code = main(["check-acceptance", str(tmp_path / "p.npy"), str(tmp_path / "q.npy"), "-n", "3",
                 "--sampling", "two-of-a-kind", "--json"])
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert code == 0 and row["sampling"] == "two-of-a-kind" and row["method"] == "subsets"
    assert row["status"] == "optimal"
    assert abs(row["alpha_star"] - float(two_of_a_kind_exact(p, q, 3))) <= SOLVER
    code = main(["check-acceptance", str(tmp_path / "p.npy"), str(tmp_path / "q.npy"), "-n", "3",
                 "--sampling", "two-of-a-kind", "--method", "mnp", "--json"])
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert code == 0 and row["method"] == "mnp" and row["certificate"] == "order-mixture"
    assert abs(row["alpha_star"] - float(two_of_a_kind_exact(p, q, 3))) <= SOLVER


def test_a_route_defined_here(registered, monkeypatch):
    """A new route is a function and one registry entry: an exhaustive scan written here (one
    containment per token set) is certified by the proof type it returns, estimated by its own
    estimator, and picked by method="auto" when its capability test and rank say so."""
    from mdtheory import _budget
    from mdtheory.routes.proofs import Exhaustive, Route, RouteOutput
    from mdtheory.solve import route_estimate

    def scan(p, model):
        best, cut = 0.0, ()
        for k in range(1, model.V + 1):
            for T in combinations(range(model.V), k):
                mask = np.zeros(model.V, dtype=bool)
                mask[list(T)] = True
                gap = float(p[mask].sum()) - float(model.containment(mask))
                if gap < best:
                    best, cut = gap, T
        return RouteOutput(value=1.0 + best, cut=np.array(cut, dtype=np.int64),
                           proof=Exhaustive(2 ** model.V))

    def estimate(model):
        return _budget.Estimate(f"method 'scan': 2^{model.V} containments", 1e-5 * 2.0 ** model.V)

    route = Route("scan", scan, estimate, auto=lambda model: model.V <= 6, rank=-1)
    monkeypatch.setitem(md.METHODS, "scan", route)
    rng = np.random.default_rng(21)
    p, q, pf, qf = rational_pair(rng, 5)
    model = TwoOfAKind(qf, 2)
    res = md.optimal_acceptance(pf, model)  # auto: the lowest rank that admits the model
    assert (res.method, res.certificate, res.status) == ("scan", "exhaustive", "optimal")
    assert abs(res.value - float(two_of_a_kind_exact(p, q, 2))) <= SOLVER
    assert route_estimate(model, "scan").seconds == pytest.approx(32e-5)
    with pytest.raises(md.ProblemTooLargeError, match="method 'scan'"):
        _budget.require(route_estimate(TwoOfAKind(np.full(30, 1 / 30), 2), "scan"))
    assert md.optimal_acceptance(pf, md.IID(qf, 2), method="scan").value == pytest.approx(
        md.alpha_star(pf, qf, 2), abs=SOLVER)
