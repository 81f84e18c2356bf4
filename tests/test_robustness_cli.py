"""Every CLI case ends in exit 2 with one line (a refusal states its estimate before
any work), or runs with a progress bar; rules refuse what they do not support. Each test is cheap: the
refusals come from size estimates, nothing large is allocated."""

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mdtheory as md
from mdtheory import _budget, cli
from mdtheory._validate import as_distribution
from mdtheory.cli import main
from mdtheory.models.base import COUNT_CAP
from mdtheory.models.conditional_poisson import ConditionalPoisson
from mdtheory.models.without_replacement import WithoutReplacement
from mdtheory.rules import make_rule

from .cli_helpers import one_line_error, run_main

ROOT = Path(__file__).resolve().parents[1]
ESTIMATE = re.compile(r"estimated (over )?[0-9.e+]+ (s|min|h|days|B|KiB|MiB|GiB|TiB)")


@pytest.fixture
def pair(npy):
    """Random (p, q) .npy files of V tokens."""
    def make(V, seed=0):
        rng = np.random.default_rng(seed)
        return npy(f"p{V}.npy", rng.dirichlet(np.ones(V))), npy(f"q{V}.npy", rng.dirichlet(np.ones(V)))
    return make


def run_cli(*argv):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "mdtheory", *map(str, argv)], capture_output=True,
                          text=True, env=env, timeout=120)


# ----------------------------------------------------------------------------- check-acceptance
def test_empty_batch_exit_2(capsys, npy):
    """p of shape (0, V) is a one-line error, not a ZeroDivisionError (integer modulo by zero)."""
    code, out, err = run_main(capsys, "check-acceptance", npy("p.npy", np.zeros((0, 5))),
                              npy("q.npy", np.full(5, 0.2)))
    one_line_error(code, err, r"p is empty \(shape \(0, 5\)\)")
    assert out == ""
    with pytest.raises(md.InvalidDistributionError, match=r"q is empty \(shape \(3, 0\)\)"):
        as_distribution(np.zeros((3, 0)), "q", ndim=2)


@pytest.mark.parametrize("method,size", [("otlp", r"2.3e\+07 variables"),
                                         ("dual", r"4.61e\+06 rows"),
                                         ("maxflow", r"4.61e\+06 edges")])
def test_set_routes_refused_with_estimate(capsys, pair, method, size):
    """-n 6 --method otlp|dual|maxflow at V = 30 (minutes of work) is refused with its estimate."""
    p, q = pair(30)
    code, out, err = run_main(capsys, "check-acceptance", p, q, "-n", 6, "--method", method)
    one_line_error(code, err, r"7.68e\+05 draft sets", size, ESTIMATE, "method 'prefix'")
    assert out == ""


def test_conditional_poisson_refused_with_estimate(capsys, pair):
    """The default route is the (proved) prefix scan and answers at once; the dual LP over the
    C(30, 6) draft sets is refused with its estimate."""
    p, q = pair(30)
    code, out, _ = run_main(capsys, "check-acceptance", p, q, "-n", 6, "--sampling",
                            "conditional-poisson", "--json")
    assert code == 0 and json.loads(out)["certificate"] == "prefix-theorem"
    code, _, err = run_main(capsys, "check-acceptance", p, q, "-n", 6, "--sampling",
                            "conditional-poisson", "--method", "dual")
    one_line_error(code, err, r"method 'dual' on conditional-poisson drafts, V = 30, n = 6",
                   r"5.94e\+05 draft sets", ESTIMATE, "--max-seconds")


def test_conditional_poisson_single_draft_baseline_needs_no_set_law():
    """check-acceptance prints 1 - TV(p, first-draft law); for conditional Poisson that law is
    computed from elementary symmetric polynomials, without enumerating C(V, n) sets."""
    rng = np.random.default_rng(4)
    for V, n in [(6, 2), (7, 3), (5, 5), (8, 1)]:
        q = rng.dirichlet(np.ones(V))
        q[0] = 0.0 if V > n else q[0]
        model = ConditionalPoisson(q / q.sum(), n)
        law = model.set_law()
        ref = law.members.T.astype(float) @ law.probs / n
        assert np.abs(model.first_draft_law() - ref).max() < 1e-15
    big = ConditionalPoisson(rng.dirichlet(np.ones(2000)), 50)  # C(2000, 50) sets: never enumerated
    assert big.first_draft_law().sum() == pytest.approx(1.0, abs=1e-12)


def test_without_replacement_large_vocabulary(capsys, npy):
    """V = 10^5 without replacement runs by the one-pass containment (one quadrature per prefix would
    not finish), and the estimate refuses it under a tiny --max-seconds before any work."""
    V = 10**5
    p = npy("p.npy", np.full(V, 1.0 / V))
    code, out, _ = run_main(capsys, "check-acceptance", p, p, "--sampling", "without-replacement",
                            "-n", 3, "--json")
    assert code == 0 and json.loads(out)["alpha_star"] == pytest.approx(1.0)
    code, _, err = run_main(capsys, "check-acceptance", p, p, "--sampling", "without-replacement",
                            "-n", 3, "--max-seconds", 1e-6)
    one_line_error(code, err, r"method 'prefix' on without-replacement drafts, V = 100000, n = 3",
                   ESTIMATE, "--max-seconds")


def test_max_seconds_lets_a_refused_run_start(capsys, pair):
    p, q = pair(12)
    code, _, err = run_main(capsys, "check-acceptance", p, q, "-n", 3, "--method", "otlp",
                            "--max-seconds", 1e-9)
    one_line_error(code, err, "over the limit of 1e-09 s", "--max-seconds")
    code, out, _ = run_main(capsys, "check-acceptance", p, q, "-n", 3, "--method", "otlp", "--json")
    assert code == 0
    assert json.loads(out)["alpha_star"] == pytest.approx(md.alpha_star(np.load(p), np.load(q), 3),
                                                          abs=1e-9)


# ----------------------------------------------------------------------------- compare-selectors
def test_monte_carlo_samples_refused_before_allocating(pair):
    """10^9 Monte Carlo samples at V = 1000 (7.28 TiB of Gumbel keys at once) are refused up front."""
    p, q = pair(1000)
    proc = run_cli("compare-selectors", p, q, "--rules", "rrs-wor", "--samples", 10**9)
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line
    assert line.startswith("mdtheory: error: no selection rule could be prepared within the limits: "
                           "rrs-wor: Monte Carlo over 1e+09 samples of n = 2 drafts, V = 1000")
    assert ESTIMATE.search(line) and "--max-seconds" in line


def test_monte_carlo_runs_in_bounded_chunks(monkeypatch):
    V, samples = 8, 10
    monkeypatch.setattr(_budget, "CHUNK_BYTES", 8 * V * 3)  # 3 draft tuples per chunk
    rule = make_rule("rrs-wor", np.full(V, 1 / V), np.arange(1, V + 1) / (V * (V + 1) / 2), 3)
    sizes, done = [], []
    real = rule.model.sample
    monkeypatch.setattr(rule.model, "sample", lambda rng, size: sizes.append(size) or real(rng, size))
    mc = rule.monte_carlo(samples, np.random.default_rng(0), progress=done.append)
    assert sizes == [3, 3, 3, 1] and done == sizes
    assert mc["counts"].sum() == samples
    with pytest.raises(md.InvalidInputError, match="samples >= 1, got 0"):
        rule.monte_carlo(0, np.random.default_rng(0))


def test_large_vocabulary_default_rules(capsys, pair):
    """V = 32,000, n = 4 with the default rules: the exact rules run, and rrs-wor (a Monte Carlo over
    20,000 samples of 32,000 Gumbel keys, then V quadratures of V tokens for its alpha*) and
    gr-softmax are refused with their estimates."""
    p, q = pair(32_000)
    code, out, err = run_main(capsys, "compare-selectors", p, q, "-n", 4, "--json")
    assert code == 0 and err == ""
    rows = {r["rule"]: r for r in map(json.loads, out.splitlines())}  # JSON Lines
    assert ESTIMATE.search(rows["rrs-wor"]["error"]) and "--max-seconds" in rows["rrs-wor"]["error"]
    assert "Monte Carlo over 2e+04 samples" in rows["rrs-wor"]["error"]
    assert "fits over 4.37e+16 draft sets x 32000 tokens" in rows["gr-softmax"]["error"]
    for name in ("single", "rrs", "k-seq", "khisti-lp", "optimal", "greedy"):  # greedy: closed-form alpha*
        assert rows[name]["exact"] and rows[name]["gap"] >= -1e-12, name


def test_slow_preparation_refused_up_front(capsys, pair):
    """gr-softmax fits over every draft set: at V = 30, n = 6 that is 768,211 sets (minutes)."""
    p, q = pair(30)
    code, out, err = run_main(capsys, "compare-selectors", p, q, "-n", 6, "--rules",
                              "gr-softmax,single", "--json")
    assert code == 0 and err == ""
    rows = {r["rule"]: r for r in map(json.loads, out.splitlines())}  # JSON Lines
    assert rows["gr-softmax"]["error"].startswith("gr-softmax: fits over 7.68e+05 draft sets x 30 "
                                                  "tokens: estimated ")
    assert "--max-seconds" in rows["gr-softmax"]["error"] and rows["single"]["exact"]


def test_many_drafts_refused_by_memory(capsys, pair):
    """-n 1000000 (khisti-lp: 999,999 stages, each an s x s block and V-sized laws; rrs: 10^6
    residuals) is refused."""
    p, q = pair(1000)
    code, out, err = run_main(capsys, "compare-selectors", p, q, "-n", 10**6, "--rules",
                              "rrs,khisti-lp,k-seq,greedy,gr-softmax", "--json")
    assert code == 0 and err == ""
    rows = {r["rule"]: r for r in map(json.loads, out.splitlines())}  # JSON Lines
    assert re.search(r"rrs keeps n \+ 1 = 1000001 residuals.*estimated 7.45 GiB of memory",
                     rows["rrs"]["error"])
    assert re.search(r"999999 truncated stages over 1000 tokens: estimated 22.5 GiB",
                     rows["khisti-lp"]["error"])
    assert "n <= the number of tokens with q > 0 (1000)" in rows["greedy"]["error"]
    assert "fits over 1e+300 draft sets" in rows["gr-softmax"]["error"]  # a saturated count
    assert rows["k-seq"]["acceptance"] is not None


def test_progress_bar_on_a_terminal_only(capsys, monkeypatch, pair):
    p, q = pair(500)  # 249,500 ordered pairs: rrs-wor goes to Monte Carlo
    argv = ["compare-selectors", p, q, "--rules", "rrs-wor", "--samples", 300]
    code, _, err = run_main(capsys, *argv)
    assert code == 0 and err == ""  # stderr is not a terminal here: no bar

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for quiet in (False, True):
        term = Terminal()
        monkeypatch.setattr(sys, "stderr", term)
        assert main([str(a) for a in argv] + (["--quiet"] if quiet else [])) == 0
        monkeypatch.undo()
        shown = term.getvalue()
        assert ("rrs-wor Monte Carlo" in shown and "/300" in shown) != quiet, shown


# ----------------------------------------------------------------------------- verify, dd
@pytest.mark.parametrize("argv,pattern", [
    (["theorem3", "--alphabet", 50], r"verify theorem3, V = 50: 20 instances, each 2\^50"),
    (["hu-wor", "--alphabet", 30, "--drafts", 6], r"verify hu-wor, V = 30, n = 6"),
    (["hu-wor", "--alphabet", 10**9, "--drafts", 10**9 - 1], r"V = 1000000000, n = 999999999"),
])
def test_verify_refused_with_estimate(capsys, argv, pattern):
    code, out, err = run_main(capsys, "verify", *argv)
    one_line_error(code, err, pattern, ESTIMATE, "--max-(seconds|bytes)")
    assert out == ""


@pytest.mark.parametrize("argv,pattern", [
    (["hu-wor", "--alphabet", 0], r"hu-wor needs V >= n \+ 1 = 3 tokens.*got 0"),
    (["hu-wor", "--drafts", 0], "the number of drafts must be at least 1, got 0"),
    (["hu-wor", "--alphabet", 2, "--drafts", 2], r"hu-wor needs V >= n \+ 1 .* got 2"),
    (["theorem2", "--alphabet", 0], "the number of tokens V must be at least 2, got 0"),
    (["theorem3", "--alphabet", 0], "the number of tokens V must be at least 2, got 0"),
    (["theorem3", "--instances", 0], "the number of instances must be at least 1, got 0"),
])
def test_vacuous_claims_do_not_verify(capsys, argv, pattern):
    """A claim on a vacuous size (an alphabet or instance count of 0) says there is nothing to verify:
    not VERIFIED, not a traceback."""
    code, out, err = run_main(capsys, "verify", *argv)
    one_line_error(code, err, "nothing to verify: " + pattern)
    assert "VERIFIED" not in out


@pytest.mark.parametrize("argv,pattern", [
    (["all", "--alphabet", 50], "verify all runs its fixed grid; --vocab applies to one claim"),
    (["symbolic", "--drafts", 3], "verify symbolic takes no -n"),
    (["theorem3", "--drafts", 3], "verify theorem3 takes no -n"),
])
def test_verify_flags_that_do_not_apply(capsys, argv, pattern):
    code, _, err = run_main(capsys, "verify", *argv)
    one_line_error(code, err, pattern)


def test_verify_refuted_says_so_on_stderr(capsys):
    code, out, err = run_main(capsys, "verify", "hu-wor")
    assert code == 1 and out.startswith("REFUTED")
    assert err == "mdtheory: refuted: hu-wor (as papers/ records; counterexample on stdout)\n"


@pytest.mark.parametrize("argv", [["--alphabet", 10**9, "--drafts", 10**9],
                                  ["--alphabet", 1, "--drafts", 10**9, "--model", "tuples"],
                                  ["--alphabet", 2, "--drafts", 10**9, "--model", "tuples"]])
def test_dd_huge_sizes_refused_before_enumerating(argv):
    """Huge sizes are refused by the number of supports, counted before any is listed."""
    proc = run_cli("dd", *argv)
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "over the limit 90 of the exact DD routes" in proc.stderr


@pytest.mark.parametrize("argv", [["dd", "-m", 8, "-K", 2], ["verify", "theorem2", "-m", 8]])
def test_hall_comparison_refused_with_estimate(capsys, argv):
    """m = 8 is within the DD dimension limit (44) but comparing with Hall's 254 inequalities solves
    an exact LP per row: minutes."""
    code, out, err = run_main(capsys, *argv)
    one_line_error(code, err, r"the iid acceptance-one cone for V = 8, n = 2 \(dimension 44\) and "
                   r"its comparison with 298 Hall and non-negativity inequalities", ESTIMATE,
                   "--max-seconds")
    assert out == ""


# ----------------------------------------------------------------------------- torch bridge
@pytest.mark.parametrize("device,pattern", [("tpu", "unknown device 'tpu'; use cpu, cuda or cuda:N"),
                                            ("mps", "device 'mps' is not available here")])
def test_cross_validate_bad_device(capsys, device, pattern):
    pytest.importorskip("torch")
    code, _, err = run_main(capsys, "cross-validate", "--device", device)
    one_line_error(code, err, pattern)


def test_torch_alpha_star_validates_rows():
    torch = pytest.importorskip("torch")
    from mdtheory.torch_bridge import alpha_star

    half = torch.tensor([0.5, 0.5], dtype=torch.float64)
    with pytest.raises(md.InvalidDistributionError, match=r"p has a negative entry \(-0.5\)"):
        alpha_star(torch.tensor([1.5, -0.5], dtype=torch.float64), half, 2)
    with pytest.raises(md.InvalidDistributionError, match="a row of q sums 0.1 away from 1"):
        alpha_star(half, torch.tensor([0.5, 0.6], dtype=torch.float64), 2)
    with pytest.raises(md.InvalidDistributionError, match="p has a non-finite entry"):
        alpha_star(torch.tensor([float("nan"), 1.0]), torch.tensor([0.5, 0.5]), 2)
    with pytest.raises(md.InvalidDistributionError, match="p has shape"):
        alpha_star(half, torch.full((2, 1), 1.0, dtype=torch.float64), 2)
    logits = torch.randn(4, 50_000, generator=torch.Generator().manual_seed(0))
    p32, q32 = torch.softmax(logits, -1), torch.softmax(logits.flip(-1), -1)  # float32 rows pass
    ref = [md.alpha_star(a.double().numpy(), b.double().numpy(), 3, normalize=True)
           for a, b in zip(p32, q32, strict=True)]
    assert alpha_star(p32, q32, 3).double().numpy() == pytest.approx(ref, abs=1e-5)


# ----------------------------------------------------------------------------- rules, Ctrl-C
def test_make_rule_unknown_keyword_names_the_valid_ones():
    with pytest.raises(md.InvalidInputError,
                       match=r"rule 'khisti-lp' takes no keyword 'tau'; valid keywords: normalize, s, rest, guard$"):
        make_rule("khisti-lp", [0.5, 0.5], [0.5, 0.5], 2, tau=1e-3)
    with pytest.raises(md.InvalidInputError, match="rule 'rrs' takes no keyword 'sampling'; valid "
                                                   "keywords: normalize$"):
        make_rule("rrs", [0.5, 0.5], [0.5, 0.5], 2, sampling="without-replacement")


@pytest.mark.parametrize("sampling", ["independent", "joint"])
def test_optimal_rule_on_draft_models_without_one_q(sampling):
    """The optimal rule on models given by several laws (no single q) is built and lossless."""
    p = np.array([0.3, 0.3, 0.4])
    qs = np.array([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])
    q = qs if sampling == "independent" else np.outer(qs[0], qs[1])
    rule = make_rule("optimal", p, q, 2, sampling=sampling)
    assert rule.model.q is None and rule.sampling == sampling
    acceptance, law = rule.enumerate()
    assert acceptance == pytest.approx(md.alpha_star(p, q, 2, sampling), abs=1e-9)
    assert law == pytest.approx(p, abs=1e-12)


def test_counts_saturate_instead_of_building_huge_integers():
    """Sizes are compared with limits before anything runs; at n = 10^6 the exact counts would be
    integers of millions of digits (seconds to build, and float() overflows)."""
    q = np.full(1000, 1e-3)
    assert md.IID(q, 10**6).count_tuples() == COUNT_CAP
    assert md.IID(q, 10**6).count_sets() == COUNT_CAP
    assert md.IID(q, 3).count_sets() == 1000 + 499_500 + 166_167_000
    assert ConditionalPoisson(q, 500).count_tuples() == COUNT_CAP
    assert WithoutReplacement(q, 3).count_tuples() == 1000 * 999 * 998
    with pytest.raises(md.ProblemTooLargeError, match=r"the set law has over 1e\+300 sets"):
        md.IID(q, 10**6).set_law()


def test_rule_refuses_a_draft_model_of_another_kind():
    q = [0.5, 0.3, 0.2]
    with pytest.raises(md.InvalidInputError, match="rrs is a rule for iid drafts; got a "
                                                   "without-replacement draft model"):
        make_rule("rrs", q, WithoutReplacement(q, 2), 2)
    with pytest.raises(md.InvalidInputError, match="unknown sampling 'bogus'"):
        make_rule("optimal", q, q, 2, sampling="bogus")


def test_keyboard_interrupt_exits_130_with_one_line(capsys, monkeypatch, pair):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.check_acceptance, "run", interrupted)
    p, q = pair(4)
    code, out, err = run_main(capsys, "check-acceptance", p, q)
    assert code == 130 and out == "" and err == "mdtheory: interrupted\n"


def test_prefix_route_refuses_models_without_a_prefix_property():
    qs = np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]])
    with pytest.raises(md.InvalidInputError, match="exact only for iid, without-replacement, "
                                                   "conditional-poisson"):
        md.optimal_acceptance(np.full(3, 1 / 3), qs, 2, sampling="independent", method="prefix")


@pytest.mark.parametrize("argv", [
    ["compare-selectors", "P", "Q"], ["cross-validate"], ["block-efficiency", "--drafts", "2"],
    ["lm-pairs", "--positions", "2", "--draft", "tempered", "--out", "OUT"],
    ["audit", "examples/verifiers/rrs.py:verify", "P", "Q"],
])
def test_negative_seed_is_a_usage_error(capsys, pair, tmp_path, argv):
    """--seed -1 is refused by the parser, before numpy's generator sees it."""
    p, q = pair(4)
    argv = [{"P": p, "Q": q, "OUT": tmp_path / "o"}.get(a, a) for a in argv]
    code, out, err = run_main(capsys, *argv, "--seed", "-1")
    assert code == 2 and "--seed: must be a non-negative integer" in err and "Traceback" not in err


def fake_models(target):
    """A stand-in for ``cli.lm_pairs.models_from_args``: ``target`` and no drafter, after the
    command's own check of the target (``before_drafter``), as the real one runs it."""
    def models_from_args(args, rng, before_drafter=None):
        if before_drafter is not None:
            before_drafter(target)
        return target, None
    return models_from_args


def test_unwritable_output_path_is_one_line(capsys, monkeypatch, tmp_path):
    """An output path that cannot be written is exit 2 with one line naming it."""
    from mdtheory.cli import lm_pairs as drafters

    def refuse(*_args, **_kw):
        raise FileNotFoundError(2, "No such file or directory", "/proc/nope")
    law = type("Law", (), {"V": 2, "step_seconds": staticmethod(lambda batch: 0.0)})
    monkeypatch.setattr(drafters, "models_from_args", fake_models(law))
    monkeypatch.setattr(drafters, "lm_pairs", lambda *a, **k: (np.ones((1, 2)), np.ones((1, 2))))
    monkeypatch.setattr(Path, "mkdir", refuse)
    code, out, err = run_main(capsys, "lm-pairs", "--positions", "1", "--draft", "tempered",
                              "--out", tmp_path / "x")
    one_line_error(code, err, "/proc/nope", "No such file")


def test_cross_validate_memory_estimate_counts_the_drafts(capsys):
    """The estimate counts the drafts: --drafts 100000 is refused up front with it."""
    code, out, err = run_main(capsys, "cross-validate", "--drafts", "100000")
    one_line_error(code, err, ESTIMATE, "n = 100000")


def test_torch_allocation_failure_is_one_line(monkeypatch):
    """An allocation torch refuses is a ProblemTooLargeError, not a RuntimeError."""
    torch = pytest.importorskip("torch")
    from mdtheory.audit.verifier import audit

    def refuse(*_a, **_k):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes")
    monkeypatch.setattr(torch, "multinomial", refuse)
    p = np.array([0.5, 0.5])
    with pytest.raises(md.errors.ProblemTooLargeError, match="out of memory on cpu"):
        audit(lambda P, Q, d, g: d[:, 0], p, p, 2, torch=True, samples=10)


def test_make_rule_refuses_an_over_budget_preparation():
    """make_rule refuses a preparation estimated over max_seconds (khisti-lp at n = 1e6: hours)."""
    p, q = np.array([0.2, 0.3, 0.5]), np.array([0.5, 0.3, 0.2])
    with pytest.raises(md.errors.ProblemTooLargeError, match=ESTIMATE):
        make_rule("khisti-lp", p, q, 10**6)
    assert make_rule("khisti-lp", p, q, 3, max_seconds=1.0).n == 3


def test_lm_pairs_refuses_positions_beyond_memory(capsys, monkeypatch, tmp_path):
    """--positions 100000000 is over the memory limit: refused up front, nothing written."""
    from types import SimpleNamespace

    from mdtheory.cli import lm_pairs as drafters

    monkeypatch.setattr(drafters, "models_from_args", fake_models(SimpleNamespace(V=465)))
    code, out, err = run_main(capsys, "lm-pairs", "--positions", "100000000", "--draft", "tempered",
                              "--out", tmp_path / "x")
    one_line_error(code, err, ESTIMATE, "100000000 positions")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv, pattern", [
    (["--drafts", "2", "--length", "2", "--steps", "3", "--rules", "gr-softmax"], "gr-softmax"),
    (["--drafts", "2", "--length", "100000", "--steps", "3", "--rules", "rrs"], "L = 100000"),
])
def test_block_efficiency_refuses_long_runs_up_front(capsys, monkeypatch, argv, pattern):
    """gr-softmax at V = 465 (minutes a preparation) or --length 100000 is refused before any
    drafting, the refusal naming the estimate and --max-seconds."""
    from types import SimpleNamespace

    from mdtheory.blocks.trees import DraftTree
    from mdtheory.cli import block_efficiency as command

    def never(*_a, **_k):
        raise AssertionError("the run must be refused before any drafting")
    monkeypatch.setattr(command, "models_from_args",
                        lambda args, rng: (SimpleNamespace(V=465, bos=0), None))
    monkeypatch.setattr(DraftTree, "sample", never)  # every draft is drawn by DraftTree.sample
    code, out, err = run_main(capsys, "block-efficiency", *argv)
    one_line_error(code, err, ESTIMATE, pattern, "--max-seconds")


def test_cross_validate_time_estimate_counts_the_drafts(capsys):
    """cross-validate --drafts 3000 ran for minutes with no estimate (the steps were modelled as
    free); it is refused up front, the estimate naming the rules it would run."""
    from mdtheory.torch_bridge import TORCH_RULES

    code, out, err = run_main(capsys, "cross-validate", "--drafts", "3000")
    one_line_error(code, err, ESTIMATE, "n = 3000", f"{len(TORCH_RULES)} rules", "--max-seconds")
    assert md._budget.batched_steps(8, 4000, 6, 3000, 4).seconds > 10 * md._budget.batched_steps(
        8, 4000, 6, 2, 4).seconds


def test_audit_draws_the_drafts_in_bounded_chunks(monkeypatch):
    """audit --drafts 1000000 draws a position's draft tuples in chunks of at most CHUNK_BYTES (not
    all at once), the same draws in order."""
    from mdtheory.audit.verifier import audit
    from mdtheory.models.iid import IID

    sizes = []
    real = IID.sample

    def spy(self, rng, size=1):
        sizes.append(size)
        return real(self, rng, size)
    monkeypatch.setattr(IID, "sample", spy)
    monkeypatch.setattr(md._budget, "CHUNK_BYTES", 8 * 3 * 100)  # 100 tuples of n = 3
    p = np.array([0.2, 0.3, 0.5])
    res = audit(lambda p, q, d, rng: int(d[0]), p, p, 3, samples=250, seed=1)
    assert sizes == [100, 100, 50] and res.samples == 250 and res.verdict != "lossy"
