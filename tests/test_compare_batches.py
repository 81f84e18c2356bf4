"""compare-selectors on batches of positions (P, Q of shape (B, V)) and progress lines off a
terminal."""

import json

import numpy as np
import pytest

from mdtheory import _progress
from mdtheory.cli import main

from .tolerances import ROUNDING

RULES = "rrs,k-seq,optimal"


@pytest.fixture
def batch(tmp_path):
    rng = np.random.default_rng(4)
    P, Q = rng.dirichlet(np.ones(6), size=4), rng.dirichlet(np.ones(6), size=4)
    np.save(tmp_path / "P.npy", P)
    np.save(tmp_path / "Q.npy", Q)
    for i in range(4):
        np.save(tmp_path / f"p{i}.npy", P[i])
        np.save(tmp_path / f"q{i}.npy", Q[i])
    return tmp_path


def _json(capsys, *argv) -> list[dict]:
    assert main([*map(str, argv)]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_one_row_per_rule_with_the_mean_over_positions(batch, capsys):
    single = {i: {r["rule"]: r for r in _json(capsys, "compare-selectors", batch / f"p{i}.npy",
                                               batch / f"q{i}.npy", "-n", 3, "--rules", RULES,
                                               "--json")}
              for i in range(4)}
    rows = _json(capsys, "compare-selectors", batch / "P.npy", batch / "Q.npy", "-n", 3, "--rules",
                 RULES, "--json")
    assert [r["rule"] for r in rows] == RULES.split(",")
    for r in rows:
        acc = np.array([single[i][r["rule"]]["acceptance"] for i in range(4)])
        alpha = np.mean([single[i][r["rule"]]["alpha_star"] for i in range(4)])
        half = 1.96 * acc.std(ddof=1) / 2  # sqrt(4) positions
        assert r["positions"] == 4 and r["exact"] and r["alpha_star_status"] == "optimal"
        assert abs(r["acceptance"] - acc.mean()) < ROUNDING
        assert np.abs(np.array(r["ci95"]) - [acc.mean() - half, acc.mean() + half]).max() < ROUNDING
        assert abs(r["alpha_star"] - alpha) < ROUNDING and abs(r["gap"] - (alpha - acc.mean())) < ROUNDING
    optimal = next(r for r in rows if r["rule"] == "optimal")
    assert abs(optimal["gap"]) < ROUNDING  # the optimal rule reaches alpha* at every position


def test_per_position_rows_are_the_single_pair_rows(batch, capsys):
    rows = _json(capsys, "compare-selectors", batch / "P.npy", batch / "Q.npy", "--rules", "rrs",
                 "--per-position", "--json")
    per, means = rows[:4], rows[4:]
    assert [r["position"] for r in per] == [0, 1, 2, 3] and len(means) == 1
    for r in per:
        (alone,) = _json(capsys, "compare-selectors", batch / f"p{r['position']}.npy",
                         batch / f"q{r['position']}.npy", "--rules", "rrs", "--json")
        assert r["acceptance"] == alone["acceptance"] and r["alpha_star"] == alone["alpha_star"]
    assert abs(means[0]["acceptance"] - np.mean([r["acceptance"] for r in per])) < ROUNDING


def test_the_table_names_positions_and_means(batch, capsys):
    assert main(["compare-selectors", str(batch / "P.npy"), str(batch / "Q.npy"), "--rules", "rrs",
                 "--per-position"]) == 0
    out = capsys.readouterr().out
    assert "each of 4 positions" in out and "means over 4 positions" in out
    assert "mean of 4, 95% [" in out


@pytest.mark.parametrize("argv, culprit", [
    (["P.npy", "q0.npy"], "4 row(s) of p and 1 of q"),
    (["p0.npy", "q0.npy", "--sampling", "all", "--per-position"], "--per-position"),
])
def test_bad_batches_exit_2_with_one_line(batch, capsys, argv, culprit):
    argv = [str(batch / a) if a.endswith(".npy") else a for a in argv]
    assert main(["compare-selectors", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and culprit in err


def test_progress_lines_off_a_terminal_and_quiet(batch, capsys, monkeypatch):
    monkeypatch.setattr(_progress, "INTERVAL", 0.0)  # a line at every update
    argv = ["compare-selectors", str(batch / "P.npy"), str(batch / "Q.npy"), "--rules", "rrs,k-seq",
            "--json"]
    assert main(argv) == 0  # pytest's captured stderr is not a terminal
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1].startswith("mdtheory: compare-selectors: 8/8 (100%) [k-seq], ")
    assert len(lines) == 8
    assert main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
