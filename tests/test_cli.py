"""The CLI: results, JSON schema, and every bad input (exit code 2, one line, no traceback)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mdtheory as md
from mdtheory.cli import main

from .cli_helpers import run_main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
KEYS = {"alpha_star", "acceptance_one", "witness", "cut", "single_draft", "drafts", "sampling",
        "method"}


@pytest.fixture
def npy(tmp_path):
    def save(name, arr, **kw):
        path = tmp_path / name
        np.save(path, np.asarray(arr, **kw), allow_pickle=True)
        return str(path)
    return save


def test_example_human_output(capsys):
    code, out, err = run_main(capsys, "check-acceptance", str(EXAMPLES / "p.npy"),
                              str(EXAMPLES / "q.npy"), "--drafts", "4")
    p, q = np.load(EXAMPLES / "p.npy"), np.load(EXAMPLES / "q.npy")
    alpha = md.alpha_star(p, q, 4)
    assert code == 0 and err == ""
    assert f"optimal acceptance alpha* = {alpha:.12g}" in out
    assert "acceptance one: no; T* is a witness" in out
    assert f"1 - TV(p, q) = {1 - 0.5 * np.abs(p - q).sum():.12g}" in out


def test_json_batch_rows(capsys):
    code, out, _ = run_main(capsys, "check-acceptance", str(EXAMPLES / "p_batch.npy"),
                            str(EXAMPLES / "q.npy"), "--drafts", "3", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    P, q = np.load(EXAMPLES / "p_batch.npy"), np.load(EXAMPLES / "q.npy")
    assert code == 0 and len(rows) == len(P)
    for i, row in enumerate(rows):
        assert KEYS <= row.keys()
        res = md.optimal_acceptance(P[i], q, 3)
        assert row["alpha_star"] == pytest.approx(res.value, abs=1e-15)
        assert row["cut"] == res.cut.tolist()
        assert row["acceptance_one"] == res.acceptance_one
        assert (row["witness"] is None) == res.acceptance_one
        assert row["drafts"] == 3 and row["sampling"] == "iid" and row["method"] == "prefix"
    assert rows[1]["acceptance_one"] and rows[1]["witness"] is None and rows[1]["cut"] == []


def test_acceptance_one_statement(capsys, npy):
    p = npy("p.npy", [1 / 3] * 3)
    q = npy("q.npy", [1 / 3, 0.3, 1 / 3 - 0.3 + 1 / 3])
    code, out, _ = run_main(capsys, "check-acceptance", p, q)
    assert code == 0 and "acceptance one: yes" in out and "Khisti et al. Thm 2" in out


@pytest.mark.parametrize("method", ["auto", "prefix", "subsets", "otlp", "dual", "maxflow"])
@pytest.mark.parametrize("sampling", ["iid", "without-replacement"])
def test_methods_agree_through_cli(capsys, npy, method, sampling):
    rng = np.random.default_rng(3)
    p, q = npy("p.npy", rng.dirichlet(np.ones(6))), npy("q.npy", rng.dirichlet(np.ones(6)))
    code, out, _ = run_main(capsys, "check-acceptance", p, q, "-n", "3", "--sampling", sampling,
                            "--method", method, "--json")
    ref = md.alpha_star(np.load(p), np.load(q), 3, sampling, method="subsets")
    assert code == 0 and json.loads(out)["alpha_star"] == pytest.approx(ref, abs=1e-9)


def test_normalize_flag(capsys, npy):
    p, q = npy("p.npy", [2.0, 2.0]), npy("q.npy", [1.0, 3.0])
    code, _, err = run_main(capsys, "check-acceptance", p, q, "-n", "1")
    assert code == 2 and "sums to 4, not 1" in err and "--normalize" in err
    code, out, _ = run_main(capsys, "check-acceptance", p, q, "-n", "1", "--normalize", "--json")
    assert code == 0 and json.loads(out)["alpha_star"] == pytest.approx(0.75)


BAD = {
    "negative": ([0.5, 0.5, 0.0], [0.7, -0.2, 0.5], {}, r"q\[1\] = -0.2 is negative"),
    "nan": ([0.5, np.nan, 0.5], [0.3, 0.3, 0.4], {}, r"p\[1\] = nan is not finite"),
    "infinite": ([0.5, 0.5, 0.0], [np.inf, 0.3, 0.4], {}, r"q\[0\] = inf is not finite"),
    "length": ([0.5, 0.5], [0.3, 0.3, 0.4], {}, "p has 2 tokens .* but q has 3"),
    "ndim": (np.full((2, 2, 2), 0.25), [0.5, 0.5], {},
             r"p has shape \(2, 2, 2\); expected \(V,\) or \(B, V\)"),
    "all_zero": ([0.0, 0.0], [0.5, 0.5], {}, "p is all zeros"),
    "row_zero": ([[0.5, 0.5], [0.0, 0.0]], [0.5, 0.5], {}, r"p\[1\] is all zeros"),
    "sum": ([0.5, 0.3, 0.13], [0.3, 0.3, 0.4], {}, "p sums to 0.93, not 1 .*--normalize"),
    "strings": (["a", "b"], [0.5, 0.5], {}, "p has dtype <U1; expected real numbers"),
    "bools": ([True, False], [0.5, 0.5], {}, "p has dtype bool; expected real numbers"),
    "object": ([0.5, 0.5], [0.5, 0.5], {"p": object}, "is not a plain numeric .npy array"),
    "batch": ([[0.5, 0.5]] * 2, [[0.5, 0.5]] * 3, {}, "p has 2 rows but q has 3"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exit_2(capsys, npy, case):
    p, q, dtypes, msg = BAD[case]
    pp = npy("p.npy", p, dtype=dtypes.get("p"))
    qq = npy("q.npy", q, dtype=dtypes.get("q"))
    code, out, err = run_main(capsys, "check-acceptance", pp, qq)
    assert code == 2 and out == ""
    assert err.startswith("mdtheory: error: ") and err.count("\n") == 1
    assert __import__("re").search(msg, err), err


def test_unreadable_and_odd_files(capsys, tmp_path, npy):
    q = npy("q.npy", [0.5, 0.5])
    cases = {
        str(tmp_path / "missing.npy"): "p: no such file",
        str(tmp_path): "is a directory",
    }
    text = tmp_path / "text.npy"
    text.write_text("0.5 0.5\n")
    cases[str(text)] = "is not a valid .npy file"
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    cases[str(empty)] = "is not a valid .npy file"
    pickled = tmp_path / "pickled.npy"
    import pickle
    pickled.write_bytes(pickle.dumps([0.5, 0.5]))
    cases[str(pickled)] = "is not a valid .npy file"
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([0.5, None], dtype=object), allow_pickle=True)
    cases[str(objects)] = "holds Python objects, which are not loaded"
    truncated = tmp_path / "truncated.npy"
    np.save(truncated, np.full(100, 0.01))
    truncated.write_bytes(truncated.read_bytes()[:140])
    cases[str(truncated)] = "a damaged .npy file"
    npz = tmp_path / "arch.npz"
    np.savez(npz, p=np.array([0.5, 0.5]))
    cases[str(npz)] = "is an .npz archive"
    for path, msg in cases.items():
        code, _, err = run_main(capsys, "check-acceptance", path, q)
        assert code == 2 and msg in err and err.count("\n") == 1, (path, err)


@pytest.mark.parametrize("argv,msg", [
    (["-n", "0"], "at least 1, got 0"),
    (["--sampling", "without-replacement", "-n", "3"], r"n <= the number of tokens with q > 0 \(2\)"),
    (["--method", "otlp-literal", "-n", "9"], r"5.9e\+14 variables.*method 'otlp' works over draft sets"),
    (["--method", "subsets"], r"2\^30"),
])
def test_refusals(capsys, npy, argv, msg):
    V = 30
    p = npy("p.npy", np.full(V, 1 / V))
    q = np.zeros(V)
    q[:2] = 0.5 if "without-replacement" in argv else 0.0
    if "without-replacement" not in argv:
        q[:] = 1 / V
    code, _, err = run_main(capsys, "check-acceptance", p, npy("q.npy", q), *argv)
    assert code == 2 and __import__("re").search(msg, err), err


def test_batch_error_names_the_row(capsys, npy):
    # every row's draft model is built (and its work estimated) before any row is solved
    p = npy("p.npy", [[0.5, 0.5, 0.0]] * 3)
    q = npy("q.npy", [[0.4, 0.3, 0.3], [0.4, 0.3, 0.3], [1.0, 0.0, 0.0]])
    code, out, err = run_main(capsys, "check-acceptance", p, q, "--sampling",
                              "without-replacement", "--json")
    assert code == 2 and out == ""
    assert err.startswith("mdtheory: error: row 2: without replacement needs n <= the number")


def test_usage_errors_exit_2(capsys):
    assert main(["check-acceptance"]) == 2
    assert main(["check-acceptance", "a.npy", "b.npy", "--drafts", "two"]) == 2
    assert main(["no-such-command"]) == 2
    assert "usage:" in capsys.readouterr().err


def test_subprocess_no_traceback(tmp_path):
    bad = tmp_path / "bad.npy"
    np.save(bad, np.array([0.5, -0.5, 1.0]))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "mdtheory", "check-acceptance", str(bad),
                           str(EXAMPLES / "q.npy")], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"mdtheory: error: {bad}: p[1] = -0.5 is negative"
    ok = subprocess.run([sys.executable, "-m", "mdtheory", "check-acceptance",
                         str(EXAMPLES / "p.npy"), str(EXAMPLES / "q.npy"), "--json"],
                        capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and KEYS <= json.loads(ok.stdout).keys()
