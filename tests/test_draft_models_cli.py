"""Issue 14 in the CLI: independent drafts' shapes in ``check-acceptance``, the draft-model table of
``compare-selectors --sampling``, and the size estimate of the ``mnp`` route. Cheap: V <= 60."""

import json
import re

import numpy as np
import pytest

import mdtheory as md
from mdtheory.cli import main


@pytest.fixture
def npy(tmp_path):
    def save(name, arr):
        path = tmp_path / name
        np.save(path, np.asarray(arr))
        return str(path)
    return save


def run_main(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, *patterns):
    assert code == 2, err
    assert err.startswith("mdtheory: error: ") and err.count("\n") == 1, err
    for pat in patterns:
        assert re.search(pat, err), (pat, err)


@pytest.fixture
def files(npy):
    rng = np.random.default_rng(3)
    return {"p": npy("p.npy", rng.dirichlet(np.ones(20))), "q": npy("q.npy", rng.dirichlet(np.ones(20))),
            "Q3": npy("Q3.npy", rng.dirichlet(np.ones(20), size=3)),
            "Q3_21": npy("Q3_21.npy", rng.dirichlet(np.ones(21), size=3))}


# --------------------------------------------------------------- check-acceptance --sampling independent
@pytest.mark.parametrize("drafts", [None, 3])
def test_independent_refuses_one_law(capsys, files, drafts):
    """A q of shape (V,) is one draft: refused (it used to run silently as n = 1), --drafts or not."""
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
