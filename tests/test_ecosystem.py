"""How mdtheory meets its ecosystem: model probabilities in any float precision, result
objects as scipy and POT users expect, one vocabulary, CLI conventions, progress, API footguns."""

import dataclasses
import doctest
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mdtheory as md
from mdtheory import certify
from mdtheory._validate import SUM_TOL
from mdtheory.claims.verify import CLAIMS, RECORDED
from mdtheory.cli import EXIT_BROKEN_PIPE, build_parser
from mdtheory.rules import RULES, make_rule

from .cli_helpers import run_main

ROOT = Path(__file__).resolve().parents[1]
P_EX, Q_EX = str(ROOT / "examples" / "p.npy"), str(ROOT / "examples" / "q.npy")


def softmax32(V, seed, scale=4.0):
    """A float32 softmax as numpy computes it: exp of shifted logits over their float32 sum."""
    x = np.random.default_rng(seed).standard_normal(V).astype(np.float32) * np.float32(scale)
    e = np.exp(x - x.max())
    return e / e.sum()


# ------------------------------------------------------------------ 1. probabilities from a model
def test_torch_float32_softmax_is_accepted():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(32000) * 4, -1).numpy()
    assert p.dtype == np.float32 and abs(p.astype(np.float64).sum() - 1) > SUM_TOL  # beyond the float64 rule
    assert md.alpha_star(p, p, 2) == 1.0
    g = torch.Generator().manual_seed(0)
    big = torch.softmax(torch.randn(152_064, generator=g) * 4, -1).numpy()
    assert abs(big.astype(np.float64).sum() - 1) > 10 * SUM_TOL
    assert md.alpha_star(big, big, 2) == 1.0


@pytest.mark.parametrize("V", [32_000, 152_064])
def test_numpy_float32_softmax_is_accepted_and_renormalised_in_float64(V):
    p, q = softmax32(V, 1), softmax32(V, 2)
    p64, q64 = p.astype(np.float64), q.astype(np.float64)
    value = md.alpha_star(p, q, 4)
    assert value == pytest.approx(md.alpha_star(p64 / p64.sum(), q64 / q64.sum(), 4), abs=1e-12)
    assert 0.0 < value < 1.0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_torch_tensors_of_every_float_precision(dtype):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(3)
    p = torch.softmax(torch.randn(32000, generator=g).to(getattr(torch, dtype)) * 4, -1)
    q = torch.softmax(torch.randn(32000, generator=g).to(getattr(torch, dtype)) * 4, -1)
    p64, q64 = p.double().numpy(), q.double().numpy()
    assert md.alpha_star(p, q, 2) == pytest.approx(
        md.alpha_star(p64 / p64.sum(), q64 / q64.sum(), 2), abs=1e-12)


def test_torch_bridge_takes_the_same_rule():
    torch = pytest.importorskip("torch")
    from mdtheory import torch_bridge

    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(2, 152_064, generator=g) * 4, -1)  # off one by about 1.6e-5
    assert torch.equal(torch_bridge.alpha_star(p, p, 2), torch.ones(2))
    with pytest.raises(md.InvalidDistributionError, match="tolerance 0.000345"):
        torch_bridge.alpha_star(p * 0.99, p, 2)


def test_sum_tolerance_follows_precision_and_is_stated():
    off = np.array([0.5, 0.49])
    with pytest.raises(md.InvalidDistributionError,
                       match=r"p sums to 0.99.*tolerance 0.00035 for float32 input"):
        md.alpha_star(off.astype(np.float32), [0.5, 0.5], 2)
    with pytest.raises(md.InvalidDistributionError, match=r"tolerance 1e-06 for float64 input"):
        md.alpha_star(np.array([0.5, 0.5 - 1e-5]), [0.5, 0.5], 2)
    assert md.alpha_star(np.array([0.5, 0.5 - 1e-4], dtype=np.float32), [0.5, 0.5], 2) == 1.0


def test_masked_arrays():
    with pytest.raises(md.InvalidDistributionError, match="masked array with 1 masked entries"):
        md.alpha_star(np.ma.array([0.5, 0.5], mask=[False, True]), [0.5, 0.5], 2)
    assert md.alpha_star(np.ma.array([0.25, 0.75]), np.ma.array([0.75, 0.25]), 1) == 0.5


def test_cli_takes_a_float32_softmax(capsys, tmp_path):
    path = tmp_path / "p32.npy"
    np.save(path, softmax32(32_000, 5))
    code, out, _ = run_main(capsys, "check-acceptance", path, path, "-n", "2", "--json")
    assert code == 0 and json.loads(out)["alpha_star"] == 1.0


def readme_blocks(fence):
    """The README's fenced blocks of one kind, in order."""
    return re.findall(rf"^```{fence}\n(.*?)^```", (ROOT / "README.md").read_text(), flags=re.M | re.S)


def test_readme_sessions_print_what_they_show(monkeypatch):
    """Every ```pycon block of the README is a doctest: its outputs are compared, not just run."""
    sessions = readme_blocks("pycon")
    assert len(sessions) >= 2
    monkeypatch.chdir(ROOT)
    names = {}  # one reader's session: later blocks use earlier imports
    for k, text in sorted(enumerate(sessions), key=lambda s: "import torch" in s[1]):
        if "import torch" in text:  # the torch blocks run last, so a skip drops nothing else
            pytest.importorskip("torch")
        test = doctest.DocTestParser().get_doctest(text, names, f"README session {k}", "README.md", 0)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        report = io.StringIO()
        runner.run(test, out=report.write, clear_globs=False)
        names = test.globs
        assert len(test.examples) >= 3 and runner.failures == 0, report.getvalue()


#: Times in the README's console outputs, masked before comparing: seconds, and a table's last
#: column of milliseconds (compare-selectors' ``prepare ms`` and ``ms``).
TIMES = re.compile(r"\d+\.\d+ s\b|(?<=  ) *\d+\.\d+$", flags=re.M)
#: Every ``$ mdtheory ...`` of the README's console blocks, with the output shown under it.
CONSOLE = [chunk.split("\n", 1) for block in readme_blocks("console")
           for chunk in block.split("$ mdtheory ")[1:]]
#: Commands whose README run takes several seconds (a language model, torch): the slow tier.
SLOW_COMMANDS = ("block-efficiency", "cross-validate")


def test_every_readme_console_command_is_compared():
    commands = [argv.split()[0] for argv, _ in CONSOLE]
    assert {"check-acceptance", "compare-selectors", "audit", "verify", "dd", "cross-validate", "lm-pairs",
            "block-efficiency"} <= set(commands) and len(CONSOLE) >= 9


@pytest.mark.parametrize("argv, expected", [
    pytest.param(argv, expected, id=argv.split()[0] + f"-{k}",
                 marks=[pytest.mark.slow] if argv.split()[0] in SLOW_COMMANDS else [])
    for k, (argv, expected) in enumerate(CONSOLE)])
def test_readme_console_outputs_are_real(capsys, monkeypatch, tmp_path, argv, expected):
    """The README's ``$ mdtheory COMMAND ...`` output is what the command prints (times masked);
    ``lm-pairs`` writes its files in a scratch directory."""
    if argv.startswith("cross-validate"):
        pytest.importorskip("torch")
    if argv.startswith(("lm-pairs", "block-efficiency")):
        from mdtheory.language import lm

        try:
            lm.textgenrnn_files()
        except md.MdtheoryError:
            pytest.skip(f"textgenrnn's data absent: {lm.INSTALL}")
    monkeypatch.chdir(tmp_path if argv.startswith("lm-pairs") else ROOT)
    _, out, _ = run_main(capsys, *argv.split())
    assert TIMES.sub("T", out) == TIMES.sub("T", expected)


# ------------------------------------------------------------------ 3. result objects
P3, Q3 = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.2, 0.6])


@pytest.mark.parametrize("method", list(md.METHODS))
def test_to_dict_is_json_and_fields_have_one_meaning(method):
    # the routes of one draft model only: the greedy set's closed form, the top set's fixed set
    sampling = {"closed-form": "greedy", "fixed-set": "top"}.get(method, "iid")
    res = md.optimal_acceptance(P3, Q3, 2, sampling, method=method)
    d = json.loads(json.dumps(res.to_dict()))  # raises on any ndarray or numpy scalar
    assert d["value"] == res.value and d["cut"] == res.cut.tolist()
    assert d["success"] is True and d["message"].startswith("optimal: alpha* proven by its")
    if method.startswith("otlp"):  # plan = pi(y | x): rows are conditional laws
        assert res.flow is None
        assert np.allclose(res.plan.sum(axis=1), 1.0, atol=1e-9)
    elif method in ("dual", "maxflow", "fixed-set"):  # flow = S(U, y): its total is alpha*
        assert res.plan is None
        assert res.flow.sum() == pytest.approx(res.value, abs=1e-9)
    else:
        assert res.plan is None and res.flow is None


def test_to_dict_of_chosen_keys():
    res = md.optimal_acceptance(P3, Q3, 2, method="dual")
    d = res.to_dict(["cut", "value", "margin"])
    assert list(d) == ["cut", "value", "margin"]
    assert d == {k: v for k, v in res.to_dict().items() if k in d}
    assert list(res.to_dict()) == [f.name for f in dataclasses.fields(res)] + [
        "acceptance_one", "witness", "margin", "success", "message"]
    with pytest.raises(md.InvalidInputError, match="no field 'alpha'"):
        res.to_dict(["alpha"])


def test_duals_named_with_alias_keys():
    res = md.optimal_acceptance(P3, Q3, 2, method="dual")
    assert set(res.duals) == {"token", "set"}
    assert res.duals["a"] is res.duals["token"] and res.duals["b"] is res.duals["set"]
    assert res.duals["token"].shape == (3,) and res.duals["set"].shape == (len(res.support),)
    assert set(np.flatnonzero(res.duals["token"])) >= set(res.cut.tolist())
    assert json.loads(json.dumps(res.to_dict()))["duals"].keys() == {"token", "set"}


def test_upper_bound_is_not_success(monkeypatch):
    monkeypatch.setattr(certify, "MAX_CERT_SETS", 0)
    monkeypatch.setattr(certify, "_successive_bounds", lambda *args: None)  # no majorant either
    res = md.optimal_acceptance(P3, Q3, 2, "without-replacement", method="prefix")
    assert res.status == "upper-bound" and res.success is False
    assert "optimality is not proven" in res.message


# ------------------------------------------------------------------ 4. one vocabulary
def test_old_and_new_spellings_agree(capsys):
    outs = []
    for argv in (["--vocab", 3, "-n", 2], ["--alphabet", 3, "-K", 2], ["-m", 3, "--drafts", 2],
                 ["--vocab", 3, "-n", 2, "--model", "iid"]):
        code, out, _ = run_main(capsys, "dd", *argv, "--json")
        assert code == 0
        rec = json.loads(out)
        rec.pop("seconds")
        outs.append(rec)
    assert outs[0] == outs[1] == outs[2] == outs[3] and outs[0]["vocab"] == 3
    assert outs[0]["drafts"] == 2 and outs[0]["sampling"] == "iid" and "alphabet" not in outs[0]


def test_wor_alias_is_shown_and_works(capsys):
    code, out, _ = run_main(capsys, "check-acceptance", "--help")
    assert code == 0 and "wor" in out.split("--sampling")[1].split("--method")[0]
    code, out, _ = run_main(capsys, "check-acceptance", P_EX, Q_EX, "-n", 3, "--sampling", "wor",
                            "--json")
    assert code == 0 and json.loads(out)["sampling"] == "without-replacement"


# ------------------------------------------------------------------ 5. CLI conventions
def test_version(capsys):
    code, out, _ = run_main(capsys, "--version")
    assert code == 0 and out.strip() == f"mdtheory {md.__version__}"


def subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_option_has_help(name):
    parser = subcommands()[name]
    missing = [a.option_strings or a.dest for a in parser._actions if not a.help]
    assert not missing, f"{name}: no help for {missing}"
    assert any("--quiet" in a.option_strings for a in parser._actions), name


def test_help_lists_rules_and_claims(capsys):
    code, out, _ = run_main(capsys, "compare-selectors", "--help")
    listed = out.split("selection rules (--rules):")[1]
    assert code == 0 and all(f"\n  {name} " in listed for name in RULES)
    code, out, _ = run_main(capsys, "verify", "--help")
    text = " ".join(out.split())
    assert code == 0 and all(" ".join(CLAIMS[c].split()) in text for c in CLAIMS)
    assert "0 every verdict is the one papers/ records" in text


def test_json_lines_everywhere(capsys):
    runs = [["check-acceptance", P_EX, Q_EX, "--json"],
            ["compare-selectors", P_EX, Q_EX, "--rules", "single,rrs", "--json"],
            ["dd", "--vocab", 2, "--drafts", 2, "--json"],
            ["verify", "theorem3", "--vocab", 2, "--instances", 1, "--json"]]
    for argv in runs:
        code, out, _ = run_main(capsys, *argv)
        lines = out.splitlines()
        assert code == 0 and lines, argv
        assert all(isinstance(json.loads(line), dict) for line in lines), argv
    assert len(lines) == 1
    code, out, _ = run_main(capsys, *runs[1])
    assert [json.loads(line)["rule"] for line in out.splitlines()] == ["single", "rrs"]


@pytest.mark.parametrize("argv, message", [
    (["compare-selectors", P_EX, Q_EX, "-n", 0], "the number of drafts must be at least 1, got 0"),
    (["check-acceptance", P_EX, Q_EX, "-n", 0], "the number of drafts must be at least 1, got 0"),
    (["compare-selectors", P_EX, Q_EX, "--rules", ","], "--rules ',' names no selection rule; give "
                                                        "comma-separated names from: single, rrs"),
    (["cross-validate", "--rules", " , "], "--rules ' , ' names no torch rule"),
])
def test_one_clear_line(capsys, argv, message):
    code, out, err = run_main(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err


def test_no_python_syntax_in_size_messages(capsys, tmp_path):
    p = tmp_path / "p.npy"
    np.save(p, np.full(40, 1 / 40))
    code, _, err = run_main(capsys, "check-acceptance", p, p, "--sampling", "conditional-poisson",
                            "-n", 3, "--method", "subsets")
    assert code == 2 and "method='" not in err and "auto" in err
    with pytest.raises(md.ProblemTooLargeError) as info:
        md.alpha_star(np.full(40, 1 / 40), np.full(40, 1 / 40), 3, method="subsets")
    assert "method='" not in str(info.value) and "the prefix method" in str(info.value)
    # conditional Poisson takes the prefix route by default, at any size
    code, out, _ = run_main(capsys, "check-acceptance", p, p, "--sampling", "conditional-poisson",
                            "-n", 3, "--json")
    assert code == 0 and json.loads(out)["method"] == "prefix"


def test_closed_stdout_exits_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "mdtheory", "check-acceptance",
                             str(ROOT / "examples" / "p_batch.npy"), Q_EX, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()  # the reader leaves before the first line is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == EXIT_BROKEN_PIPE and err == "", err


def fake_records(hu_wor_verified):
    return [{"name": name, "claim": CLAIMS[name], "cases": [], "counterexample": None,
             "seconds": 0.0, "verified": name != "hu-wor" or hu_wor_verified}
            for name in CLAIMS]


@pytest.mark.parametrize("hu_wor_verified, code", [(False, 0), (True, 1)])
def test_verify_all_exit_code_is_against_the_record(capsys, monkeypatch, hu_wor_verified, code):
    import mdtheory.claims.verify as verify
    monkeypatch.setattr(verify, "verify_all", lambda progress=None: fake_records(hu_wor_verified))
    got, out, err = run_main(capsys, "verify", "all", "--json")
    assert got == code
    assert [json.loads(line)["recorded"] for line in out.splitlines()] == [RECORDED[c] for c in CLAIMS]
    assert ("verdicts differ from papers/ for: hu-wor" in err) == bool(code)


def test_recorded_verdicts_are_those_of_papers():
    hu = (ROOT / "papers" / "hu2025.md").read_text()
    khisti = (ROOT / "papers" / "khisti2025.md").read_text()
    assert "`mdtheory verify hu-wor` | **refuted" in hu and RECORDED["hu-wor"] is False
    assert "`mdtheory verify symbolic` | **verified**" in khisti and RECORDED["symbolic"]
    assert "mdtheory verify theorem3" in khisti and RECORDED["theorem3"] and RECORDED["theorem2"]


# ------------------------------------------------------------------ 6. progress
def test_no_carriage_returns_when_stderr_is_not_a_terminal(capsys):
    for argv in (["verify", "theorem3", "--vocab", 2, "--instances", 2],
                 ["compare-selectors", P_EX, Q_EX, "--rules", "single,khisti-lp",
                  "--samples", 2000]):
        code, _, err = run_main(capsys, *argv)
        assert code == 0 and "\r" not in err and err == "", (argv, err)


# ------------------------------------------------------------------ 7. notebooks
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebooks_lead_with_their_question_and_plot_inline(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].cell_type == "markdown" and "**Question.**" in nb.cells[0].source
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "matplotlib.use" not in code and "savefig" not in code
    for jargon in ("polymatroid hull", "IS marginal", "mu*(prefix)"):
        assert jargon not in code, jargon  # figure labels in plain words


# ------------------------------------------------------------------ 8. API footguns
U4 = np.full(4, 0.25)


@pytest.mark.parametrize("drafts, message", [
    ([-1, 0], r"drafts\[0\] = -1 is not a token id in 0 .. 3"),
    ([0, 4], r"drafts\[1\] = 4 is not a token id in 0 .. 3"),
    ([0], r"prepared for n = 2 drafts; got drafts of shape \(1,\)"),
    ([0, 1, 2], r"prepared for n = 2 drafts"),
    ([0.0, 1.0], "drafts must be integer token ids, got dtype float64"),
])
@pytest.mark.parametrize("name", ["rrs", "optimal"])
def test_select_checks_its_drafts(name, drafts, message):
    rule = make_rule(name, U4, U4, 2)
    with pytest.raises(md.InvalidInputError, match=message):
        rule.select(drafts, np.random.default_rng(0))


@pytest.mark.parametrize("name", ["rrs", "optimal"])
def test_rng_as_numpy_takes_it(name):
    rule = make_rule(name, [0.4, 0.3, 0.2, 0.1], U4, 2)
    assert rule.select([0, 1], 7) == rule.select([0, 1], np.random.default_rng(7))
    assert rule.select([0, 1]) in {(y, ok) for y in range(4) for ok in (True, False)}
    a, b = rule.monte_carlo(500, 3), rule.monte_carlo(500, np.random.default_rng(3))
    assert a["acceptance"] == b["acceptance"] and (a["counts"] == b["counts"]).all()
    assert rule.monte_carlo(10)["counts"].sum() == 10
    for bad in (np.random.RandomState(0), "seed", 1.5, True, -1):
        with pytest.raises(md.InvalidInputError, match="rng"):
            rule.select([0, 1], bad)


def test_monte_carlo_zero_and_huge_n_refused():
    with pytest.raises(md.InvalidInputError, match="samples >= 1, got 0"):
        make_rule("rrs", U4, U4, 2).monte_carlo(0)
    with pytest.raises(md.ProblemTooLargeError, match="estimated .* over the limit"):
        make_rule("rrs", U4, U4, 10**9)


@pytest.mark.parametrize("func", [md.alpha_star, make_rule])
def test_numpydoc_sections(func):
    doc = func.__doc__
    assert "Parameters\n    ----------" in doc and "Returns\n    -------" in doc
