"""Draft models in the CLI: independent drafts' shapes in ``check-acceptance``, the draft-model table of
``compare-selectors --sampling``, and the size estimate of the ``mnp`` route. Cheap: V <= 60."""

import dataclasses
import json
import re

import numpy as np
import pytest

import mdtheory as md
from mdtheory.models.registry import sampling_names

from .cli_helpers import one_line_error, run_main


@pytest.fixture
def files(npy):
    rng = np.random.default_rng(3)
    return {"p": npy("p.npy", rng.dirichlet(np.ones(20))), "q": npy("q.npy", rng.dirichlet(np.ones(20))),
            "Q3": npy("Q3.npy", rng.dirichlet(np.ones(20), size=3)),
            "Q3_21": npy("Q3_21.npy", rng.dirichlet(np.ones(21), size=3))}


# --------------------------------------------------------------- check-acceptance --sampling independent
@pytest.mark.parametrize("drafts", [None, 3])
def test_independent_refuses_one_law(capsys, files, drafts):
    """A q of shape (V,) is one draft: refused unless --drafts 1 says so."""
    extra = [] if drafts is None else ["--drafts", drafts]
    code, out, err = run_main(capsys, "check-acceptance", files["p"], files["q"], "--sampling",
                              "independent", *extra)
    one_line_error(code, err, r"q\.npy: --sampling independent takes one law per draft",
                   r"shape \(20,\)", "--sampling iid", "--drafts 1")
    assert out == ""


def test_independent_one_law_with_drafts_one_is_one_draft(capsys, files):
    code, out, _ = run_main(capsys, "check-acceptance", files["p"], files["q"], "--sampling",
                            "independent", "--drafts", "1", "--json")
    row = json.loads(out)
    p, q = np.load(files["p"]), np.load(files["q"])
    assert code == 0 and row["drafts"] == 1
    assert abs(row["alpha_star"] - np.minimum(p, q).sum()) <= 1e-12  # one draft: 1 - TV


def test_independent_rows_against_drafts(capsys, files):
    code, _, err = run_main(capsys, "check-acceptance", files["p"], files["Q3"], "--sampling",
                            "independent", "--drafts", "2")
    one_line_error(code, err, r"Q3\.npy: --drafts 2 contradicts the independent draft table, "
                              r"which has 3 row\(s\)")
    code, out, _ = run_main(capsys, "check-acceptance", files["p"], files["Q3"], "--sampling",
                            "independent", "--drafts", "3", "--json")
    assert code == 0 and json.loads(out)["drafts"] == 3


def test_independent_vocabulary_mismatch(capsys, files):
    code, _, err = run_main(capsys, "check-acceptance", files["p"], files["Q3_21"], "--sampling",
                            "independent")
    one_line_error(code, err, r"p has 20 tokens \(.*p\.npy\) but q has 21 \(.*Q3_21\.npy\)")


def test_check_acceptance_greedy(capsys, files):
    """Hu et al.'s greedy draft set is a --sampling choice, with the front door's value."""
    code, out, _ = run_main(capsys, "check-acceptance", files["p"], files["q"], "--sampling",
                            "greedy", "-n", "3", "--json")
    row = json.loads(out)
    expected = md.optimal_acceptance(np.load(files["p"]), np.load(files["q"]), 3, "greedy")
    assert code == 0 and row["sampling"] == "greedy" and row["status"] == "optimal"
    assert abs(row["alpha_star"] - expected.value) <= 1e-12


# --------------------------------------------------------------- compare-selectors --sampling
ONE_LAW = list(sampling_names(lambda cls: cls.single_q))


@pytest.fixture
def small(npy):
    """A pair on V = 8 tokens, where every draft model's alpha* is checked on all 2^V sets."""
    rng = np.random.default_rng(5)
    p, q = rng.dirichlet(np.ones(8)), rng.dirichlet(np.full(8, 0.5))
    return p, q, npy("p8.npy", p), npy("q8.npy", q)


def json_rows(out):
    return [json.loads(line) for line in out.splitlines()]


def test_sampling_all_against_exhaustive(capsys, small):
    p, q, pf, qf = small
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "-n", "3", "--sampling", "all",
                            "--json")
    rows = json_rows(out)
    assert code == 0 and [r["sampling"] for r in rows] == ONE_LAW
    for r in rows:
        exact = md.optimal_acceptance(p, q, 3, r["sampling"], method="subsets").value
        assert abs(r["alpha_star"] - exact) <= 1e-9, r["sampling"]
        assert r["proven"] and r["status"] == "optimal" and r["drafts"] == 3 and r["vocab"] == 8
        assert r["certificate"] and r["method"] in md.METHODS


def test_draft_temperatures_add_independent_drafts(capsys, small):
    from mdtheory.language.logits import tempered

    p, q, pf, qf = small
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "--sampling", "all",
                            "--draft-temperatures", "0.5,1,2", "--json")
    rows = json_rows(out)
    assert code == 0 and [r["sampling"] for r in rows] == [*ONE_LAW, "independent"]
    assert all(r["drafts"] == 3 for r in rows)  # n is the number of temperatures
    ind = rows[-1]
    qs = np.array([q ** 2 / (q ** 2).sum(), q, np.sqrt(q) / np.sqrt(q).sum()])
    assert np.allclose(np.array([tempered(q, t) for t in (0.5, 1, 2)]), qs, atol=1e-15)
    exact = md.optimal_acceptance(p, md.Independent(qs), method="subsets").value
    assert ind["temperatures"] == [0.5, 1.0, 2.0] and abs(ind["alpha_star"] - exact) <= 1e-9
    # temperature one for every draft: independent drafts are iid drafts
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "--sampling", "iid,independent",
                            "--draft-temperatures", "1,1,1", "--json")
    iid, same = json_rows(out)
    assert code == 0 and abs(iid["alpha_star"] - same["alpha_star"]) <= 1e-9


def test_sampling_text_table(capsys, small):
    _, _, pf, qf = small
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "-n", "3", "--sampling", "wor,greedy")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("V = 8, n = 3 drafts: alpha*")
    assert re.match(r"draft model +alpha\* +status +route +certificate +gap +ms", lines[1])
    assert re.match(r"without-replacement +0\.\d{10} +proven +\w+ +\w+", lines[2])
    assert re.match(r"greedy +0\.\d{10} +proven +closed-form +greedy-flow", lines[3])
    assert lines[4].startswith("highest alpha*: ") and "1 - TV(p, q)" in lines[4]


def test_upper_bound_is_proved_by_mnp_or_named(capsys, monkeypatch, small):
    """Successive sampling beyond the flow certificate's size: the prefix route only bounds alpha*;
    the table proves it by method 'mnp', or says 'upper bound' when mnp's estimate is over the limit."""
    import mdtheory.certify as certify

    p, q, pf, qf = small
    monkeypatch.setattr(certify, "MAX_CERT_SETS", 0)
    monkeypatch.setattr(certify, "_successive_bounds", lambda *args: None)  # no majorant either
    exact = md.optimal_acceptance(p, q, 3, "without-replacement", method="subsets").value
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "-n", "3", "--sampling", "wor",
                            "--json")
    (row,) = json_rows(out)
    assert code == 0 and row["proven"] and row["method"] == "mnp"
    assert row["certificate"] == "order-mixture" and abs(row["alpha_star"] - exact) <= 1e-9
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "-n", "3", "--sampling", "wor",
                            "--max-seconds", "1e-4")
    assert code == 0 and re.search(r"without-replacement +0\.\d+ +upper bound +prefix +cut", out)
    assert re.search(r"upper bound only, not proved by method 'mnp': .*estimated", out)
    assert abs(float(out.splitlines()[2].split()[1]) - exact) <= 1e-9  # the bound is alpha* here


def test_independent_table_from_rows(capsys, npy, small):
    p, _, pf, _ = small
    qs = np.random.default_rng(6).dirichlet(np.ones(8), size=2)
    qf = npy("qs.npy", qs)
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "--sampling", "independent", "--json")
    (row,) = json_rows(out)
    exact = md.optimal_acceptance(p, md.Independent(qs), method="subsets").value
    assert code == 0 and row["drafts"] == 2 and abs(row["alpha_star"] - exact) <= 1e-9
    code, _, err = run_main(capsys, "compare-selectors", pf, qf, "--sampling", "all")
    one_line_error(code, err, r"qs\.npy: q has shape \(2, 8\), one law per draft, which only "
                              "--sampling independent reads")


@pytest.mark.parametrize("argv, pattern", [
    (["--sampling", "independent"], "needs one law per draft: a q of shape \\(n, V\\), or "
                                    "--draft-temperatures"),
    (["--sampling", "iid,tree"], "unknown draft model 'tree' in --sampling; valid choices: all, iid"),
    (["--sampling", "all", "--draft-temperatures", "1,2", "-n", "3"],
     "--drafts 3 contradicts --draft-temperatures, which gives 2 drafts"),
    (["--sampling", "iid", "--draft-temperatures", "1,2"], "add independent \\(or all\\)"),
    (["--draft-temperatures", "1,2"], "--draft-temperatures builds independent drafts for --sampling"),
    (["--sampling", "all", "--rules", "rrs"], "--rules and --truncation apply to the table of "
                                              "selection rules"),
])
def test_sampling_bad_input(capsys, small, argv, pattern):
    _, _, pf, qf = small
    code, out, err = run_main(capsys, "compare-selectors", pf, qf, *argv)
    one_line_error(code, err, pattern)
    assert out == ""


@pytest.mark.parametrize("temps", ["0,1", "1,nan", "a,b"])
def test_bad_temperatures_are_usage_errors(capsys, small, temps):
    _, _, pf, qf = small
    code, _, err = run_main(capsys, "compare-selectors", pf, qf, "--sampling", "all",
                            "--draft-temperatures", temps)
    assert code == 2 and "--draft-temperatures" in err


# --------------------------------------------------------------- the mnp route's estimate
def test_mnp_estimate_grows_and_refuses_a_huge_vocabulary(capsys, npy):
    from mdtheory.solve import route_estimate

    rng = np.random.default_rng(7)
    est = [route_estimate(md.Independent(rng.dirichlet(np.ones(V), size=2)), "mnp")
           for V in (100, 1000, 10_000)]
    assert 0 < est[0].seconds < est[1].seconds < est[2].seconds and "Wolfe" in est[0].what
    V = 50_000  # refused before any allocation of the solver's (V + 2) x V arrays
    pf, qf = npy("pbig.npy", rng.dirichlet(np.ones(V))), npy("qbig.npy", rng.dirichlet(np.ones(V), size=2))
    code, _, err = run_main(capsys, "check-acceptance", pf, qf, "--sampling", "independent")
    one_line_error(code, err, r"method 'mnp' on independent drafts, V = 50000, n = 2: about .* "
                              r"iterations .*estimated [0-9.e+]+ (s|min|h)", "--max-seconds")


def test_mnp_estimate_per_model():
    """Successive sampling's iteration costs a one-pass containment per order; greedy's a
    containment per prefix (quadratic in V): the estimates order them so."""
    from mdtheory import _budget

    q = np.full(1000, 1e-3)
    secs = {s: _budget.min_norm_point(md.make_draft_model(q, 4, s)).seconds
            for s in ("iid", "without-replacement", "conditional-poisson", "greedy")}
    assert secs["iid"] < secs["conditional-poisson"] < secs["without-replacement"]
    assert all(0 < s < 60 for s in secs.values())  # V = 1000, n = 4 runs by default (seconds)


def test_memory_error_is_one_line(capsys, monkeypatch, files):
    from mdtheory.cli import check_acceptance

    def boom(*args, **kwargs):
        raise MemoryError("Unable to allocate 74.5 GiB for an array")
    monkeypatch.setattr(check_acceptance, "acceptance_rows", boom)
    code, _, err = run_main(capsys, "check-acceptance", files["p"], files["q"])
    one_line_error(code, err, "out of memory: Unable to allocate 74.5 GiB", "too large for this machine")


def test_model_that_cannot_be_built_is_a_row(capsys, npy):
    """Two tokens with q > 0 and n = 3: successive sampling, conditional Poisson and greedy sets
    cannot be drawn; their rows say why, iid still runs (alpha* = p of q's support = 1/2), and so
    does the top set (tokens 0, 1 and, of mass 0, 2: alpha* = 3/4)."""
    pf, qf = npy("p4.npy", np.full(4, 0.25)), npy("q4.npy", [0.5, 0.5, 0.0, 0.0])
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "-n", "3", "--sampling", "all",
                            "--json")
    rows = {r["sampling"]: r for r in json_rows(out)}
    assert code == 0 and abs(rows["iid"]["alpha_star"] - 0.5) <= 1e-12
    assert abs(rows["top"]["alpha_star"] - 0.75) <= 1e-12
    for name in ("without-replacement", "conditional-poisson", "greedy"):
        assert rows[name]["alpha_star"] is None and "n <= the number of tokens with q > 0 (2)" in \
            rows[name]["error"]


def test_rules_table_names_an_unproven_optimum(capsys, monkeypatch, small):
    """The rules table's alpha* of successive sampling is proved by mnp too, or marked a bound."""
    import mdtheory.certify as certify

    p, q, pf, qf = small
    monkeypatch.setattr(certify, "MAX_CERT_SETS", 0)
    monkeypatch.setattr(certify, "_successive_bounds", lambda *args: None)  # no majorant either
    exact = md.optimal_acceptance(p, q, 3, "without-replacement", method="subsets").value
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "-n", "3", "--rules", "rrs-wor",
                            "--json")
    (row,) = json_rows(out)
    assert code == 0 and row["alpha_star_status"] == "optimal"
    assert abs(row["alpha_star"] - exact) <= 1e-9
    monkeypatch.setattr(md._budget, "_MNP_STEP", 1.0)  # mnp estimated over the limit, the rest not
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "-n", "3", "--rules", "rrs-wor",
                            "--max-seconds", "0.01")
    assert code == 0 and re.search(r"without-replacement drafts: alpha\* is an upper bound, not "
                                   r"proved by method 'mnp': .*estimated", out), out


def test_sampling_all_reads_the_registry_when_it_runs(capsys, small):
    """A one-law model registered after the CLI was imported is in ``--sampling all``."""
    from mdtheory.models.registry import SAMPLINGS, register_sampling

    class IIDAgain(md.IID):
        sampling = "iid-again"

    register_sampling(IIDAgain)
    try:
        code, out, _ = run_main(capsys, "compare-selectors", small[2], small[3], "--sampling", "all",
                                "--json")
    finally:
        SAMPLINGS.pop("iid-again")
    rows = {r["sampling"]: r for r in json_rows(out)}
    assert code == 0 and rows["iid-again"]["alpha_star"] == rows["iid"]["alpha_star"]
    assert list(rows)[-1] == "iid-again"  # registry order: after the built-in models


@pytest.fixture
def bracketing(monkeypatch):
    """The flow certificate off (successive sampling's prefix route gives an upper bound, so the
    front door escalates to the minimum-norm point) and Wolfe's method replaced by a run that
    proves only [0.5, 0.99] (as a time-bounded run on a loaded machine may)."""
    import mdtheory.certify as certify
    from mdtheory.routes import mnp

    def route(p, model, deadline=None):
        raise md.OptimalityGapError("the minimum-norm-point method left a gap of 0.49", 0.5, 0.99)

    monkeypatch.setattr(certify, "MAX_CERT_SETS", 0)
    monkeypatch.setattr(certify, "_successive_bounds", lambda *args: None)  # no majorant either
    monkeypatch.setattr(mnp, "mnp_route", route)


def test_sampling_all_prints_a_bracket_with_exit_code_4(capsys, small, bracketing):
    """A draft model whose alpha* is only bracketed is a row with both bounds and exit code 4 (as
    check-acceptance), the other rows as usual: never exit code 3 with an empty table."""
    p, q, pf, qf = small
    bound = md.optimal_acceptance(p, q, 2, "without-replacement", method="prefix").value
    code, out, err = run_main(capsys, "compare-selectors", pf, qf, "--sampling", "all")
    assert code == 4 and err == ""
    lines = {line.split()[0]: line for line in out.splitlines()[2:6]}
    assert f"0.5000000000 <= alpha* <= {min(bound, 0.99):.10f}" in lines["without-replacement"]
    assert "proven" in lines["iid"] and "greedy-flow" in lines["greedy"]
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "--sampling", "all", "--json")
    rows = {r["sampling"]: r for r in json_rows(out)}
    assert code == 4 and rows["without-replacement"]["status"] == "bounds"
    assert (rows["without-replacement"]["lower"], rows["without-replacement"]["upper"]) == \
        (0.5, min(bound, 0.99))
    assert rows["iid"]["proven"] and rows["conditional-poisson"]["proven"]


def test_rules_table_names_a_bracketed_optimum(capsys, small, bracketing):
    _, _, pf, qf = small
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "-n", "2", "--rules", "rrs,rrs-wor")
    assert code == 4
    assert re.search(r"without-replacement drafts: alpha\* is proven only in \[0\.5, ", out), out


def test_check_acceptance_prints_the_escalation_bracket(capsys, small, bracketing):
    p, q, pf, qf = small
    code, out, _ = run_main(capsys, "check-acceptance", pf, qf, "--sampling", "wor", "--json")
    row = json.loads(out)
    assert code == 4 and row["status"] == "upper-bound" and row["lower"] == 0.5
    assert row["alpha_star"] == md.optimal_acceptance(p, q, 2, "wor", method="prefix").value


@pytest.fixture
def failing_escalation(monkeypatch):
    """The flow and majorant certificates off (successive sampling's prefix route gives an upper
    bound, so the front door escalates to the minimum-norm point) and Wolfe's method replaced by a
    run that fails (a solver error)."""
    import mdtheory.certify as certify
    from mdtheory.routes import mnp

    def route(p, model, deadline=None):
        raise md.SolverError("Wolfe's method failed")

    monkeypatch.setattr(certify, "MAX_CERT_SETS", 0)
    monkeypatch.setattr(certify, "_successive_bounds", lambda *args: None)  # no majorant either
    monkeypatch.setattr(mnp, "mnp_route", route)


def test_a_failed_escalation_keeps_the_upper_bound_and_the_table(capsys, small, failing_escalation):
    """One model's minimum-norm point failing costs that row its proof, not the whole table: the
    checked upper bound stands with the failure named, the other rows are proven."""
    p, q, pf, qf = small
    bound = md.optimal_acceptance(p, q, 2, "without-replacement", method="prefix").value
    code, out, err = run_main(capsys, "compare-selectors", pf, qf, "--sampling", "all", "--json")
    rows = {r["sampling"]: r for r in json_rows(out)}
    assert code == 0 and err == "" and list(rows) == ONE_LAW
    assert rows["without-replacement"]["alpha_star"] == bound
    wor = rows["without-replacement"]
    assert not wor["proven"] and "Wolfe's method failed" in wor["note"]
    assert rows["iid"]["proven"] and rows["top"]["proven"]
    code, out, _ = run_main(capsys, "check-acceptance", pf, qf, "--sampling", "wor", "--json")
    row = json.loads(out)
    assert code == 0 and row["status"] == "upper-bound" and row["alpha_star"] == bound


def test_a_model_whose_run_fails_is_its_own_row(capsys, small, monkeypatch):
    """A draft model whose route raises (here the top set's) is a row naming the error; the table
    stands with the others."""
    from mdtheory import solve

    def broken(p, model):
        raise md.SolverError("the route broke")

    route = dataclasses.replace(solve.METHODS["fixed-set"], run=broken)
    monkeypatch.setitem(solve.METHODS, "fixed-set", route)
    _, _, pf, qf = small
    code, out, _ = run_main(capsys, "compare-selectors", pf, qf, "--sampling", "all", "--json")
    rows = {r["sampling"]: r for r in json_rows(out)}
    assert code == 0 and "the route broke" in rows["top"]["error"] and rows["iid"]["proven"]


def test_check_acceptance_json_has_the_result_shape(capsys, small, bracketing):
    """Every --json object carries status, success and message (the one result base), the bounds
    row of a bracketed alpha* too."""
    _, _, pf, qf = small
    for sampling in ("iid", "top", "wor"):
        code, out, _ = run_main(capsys, "check-acceptance", pf, qf, "--sampling", sampling, "--json")
        row = json.loads(out)
        assert {"status", "success", "message"} <= set(row), (sampling, row)
        assert row["success"] is (row["status"] == "optimal")


def test_the_single_draft_baseline_is_one_draft_from_q(capsys, small):
    """The line labelled 1 - TV(p, q) is that, for every one-law model (the top set's first draft is
    its argmax, whose acceptance p(argmax) is no single-draft baseline)."""
    p, q, pf, qf = small
    want = f"single-draft baseline 1 - TV(p, q) = {np.minimum(p, q).sum():.12g}"
    for sampling in ONE_LAW:
        code, out, _ = run_main(capsys, "check-acceptance", pf, qf, "--sampling", sampling, "-n", "2")
        assert code == 0 and want in out, (sampling, out)


def test_compare_selectors_help_lists_every_model_of_all(capsys):
    code, out, _ = run_main(capsys, "compare-selectors", "--help")
    text = " ".join(out.split())
    assert code == 0
    for name in ONE_LAW:
        assert name in text.split("'all'")[1][:300], name
