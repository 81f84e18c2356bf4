"""Verification records: exact verdicts on the published claims, and the CLI around them."""

import json
from fractions import Fraction

import pytest
import sympy as sp

from mdtheory.claims import verify
from mdtheory.claims.exact import exact_otlp, exact_set_law
from mdtheory.claims.symbolic import symbolic_alpha_star, theorem2_example_interval
from mdtheory.claims.verify import verify_hu_wor, verify_symbolic, verify_theorem2, verify_theorem3
from mdtheory.cli import main

from .reference_subsets import exact_subset_formula
from .test_dd import FAST, SLOW

KEYS = {"claim", "verified", "cases", "counterexample"}


@pytest.mark.parametrize("m", [2, 3, 4])
def test_theorem3_exact(m):
    rec = verify_theorem3(m, instances=15, seed=m)
    assert KEYS <= rec.keys() and rec["verified"] and rec["counterexample"] is None
    assert all(c["closed_form"] == c["exact_lp"] for c in rec["cases"])


@pytest.mark.parametrize("V,n,sampling", [(3, 2, "iid"), (4, 3, "iid"), (3, 3, "tuples")])
def test_theorem2_records(V, n, sampling):
    rec = verify_theorem2(V, n, sampling)
    assert rec["verified"] and rec["cases"] == [{"vocab": V, "drafts": n, "sampling": sampling}]
    assert rec["substitution"] is (True if sampling == "iid" else None)


def test_hu_ratio_is_conditional_poisson_not_successive_sampling():
    rec = verify_hu_wor(3, 2, instances=10, seed=0)
    assert rec["verified"] is False and rec["matches_conditional_poisson"] is True
    ce = rec["counterexample"]
    assert ce["q"] == ["1/2", "3/10", "1/5"] and ce["T"] == [0, 1]
    assert Fraction(ce["ratio"]) == Fraction(15, 31)
    assert Fraction(ce["successive_sampling"]) == Fraction(18, 35)
    assert verify_hu_wor(5, 3, instances=5, seed=1)["matches_conditional_poisson"]


def test_symbolic_records():
    rec = verify_symbolic()
    assert rec["verified"]
    interval = theorem2_example_interval()
    assert sp.simplify(interval.inf - (1 - sp.sqrt(sp.Rational(2, 3)))) == 0
    assert sp.simplify(interval.sup - (sp.sqrt(sp.Rational(2, 3)) - sp.Rational(1, 3))) == 0


def test_symbolic_alpha_star_matches_exact_lp():
    a, b = sp.symbols("a b", nonnegative=True)
    expr = symbolic_alpha_star([a, 1 - a], [b, 1 - b], 2)
    for av, bv in [(Fraction(1, 3), Fraction(1, 2)), (Fraction(9, 10), Fraction(1, 5)),
                   (Fraction(1, 2), Fraction(1, 2)), (Fraction(0), Fraction(1))]:
        value = Fraction(str(expr.subs({a: sp.Rational(str(av)), b: sp.Rational(str(bv))})))
        law = exact_set_law([bv, 1 - bv], 2)
        assert value == exact_otlp([av, 1 - av], law) == exact_subset_formula([av, 1 - av], law)


def test_exact_without_replacement_lp_equals_subset_formula():
    q = [Fraction(1, 2), Fraction(3, 10), Fraction(1, 5)]
    p = [Fraction(1, 5), Fraction(1, 5), Fraction(3, 5)]
    law = exact_set_law(q, 2, "without-replacement")
    assert exact_otlp(p, law) == exact_subset_formula(p, law)


def test_cli_verify_exit_codes(capsys):
    assert main(["verify", "theorem3", "-m", "3", "--instances", "5", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert KEYS <= rec.keys() and rec["verified"]
    assert main(["verify", "hu-wor"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("REFUTED") and "15/31" in out and "18/35" in out


def test_cli_dd_json(capsys):
    assert main(["dd", "--alphabet", "3", "--drafts", "2", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["hall_equal"] and rec["dimension"] == 9 and len(rec["facets"]) == 12
    assert {"p0 >= d00", "d00 + d01 + d02 >= p0"} <= {f["inequality"] for f in rec["facets"]}
    assert main(["dd", "-m", "0", "-K", "2"]) == 2


def test_cli_verify_all(capsys, monkeypatch):
    """``verify all`` over a reduced grid, one entry per claim: the run, the summary and the exit
    code. The full grid's Theorem 2 cones are checked by tests/test_dd.py (see the next test), its
    other claims above at the same or smaller sizes."""
    small = [("symbolic", {}), ("theorem2", {"V": 2, "n": 2, "sampling": "iid"}),
             ("theorem3", {"V": 3, "instances": 5, "seed": 3}),
             ("hu-wor", {"V": 3, "n": 2, "instances": 2, "seed": 3})]
    monkeypatch.setattr(verify, "ALL_GRID", small)
    code = main(["verify", "all"])
    out = capsys.readouterr().out
    # Hu et al.'s ratio is not successive sampling, as papers/hu2025.md records: exit 0
    assert code == 0 and "refuted: hu-wor" in out and "every verdict is the one recorded" in out
    assert "3/4 checks verified" in out


def test_verify_all_grid_is_covered_by_the_dd_tests():
    """Every Theorem 2 cone of ``verify all`` is compared with Hall's family by tests/test_dd.py, so
    the suite need not rerun the whole grid (about a minute) to check it."""
    covered = {(V, n, sampling) for V, n in FAST for sampling in ("iid", "tuples")} | set(SLOW)
    grid = {(kw["V"], kw["n"], kw["sampling"]) for claim, kw in verify.ALL_GRID if claim == "theorem2"}
    assert grid <= covered, sorted(grid - covered)
