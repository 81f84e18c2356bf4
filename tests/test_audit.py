"""mdtheory audit: statistics (level, power, coverage), the example verifiers, exact mode, CLI."""

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import mdtheory as md
from mdtheory.audit.statistics import (
    DEFAULT_LEVEL,
    TARGET_TV,
    _tv_upper,
    detectable_tv,
    law_test,
    pool_cells,
    samples_for,
)
from mdtheory.audit.verifier import EXIT_INCONCLUSIVE, load_target
from mdtheory.cli import main
from mdtheory.rules import RULES

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "verifiers"
P3, Q3 = np.array([0.2, 0.4, 0.4]), np.array([0.6, 0.3, 0.1])
ZIPF = 1 / np.arange(1, 51) ** 1.5
ZIPF /= ZIPF.sum()
LOSSY = ["rrs_skip_repeat", "argmax_accept", "lenient_threshold", "wrong_draft_law"]
CORRECT = ["rrs", "kseq", "optimal"]


def example(name, attr="verify"):
    return load_target(f"{EXAMPLES / name}.py:{attr}")


def two_sided_deviation(p, tv):
    """The worst shape for the test: r = p (1 + e) on the likelier half of p's mass, p (1 - e') on
    the rest, with TV(r, p) = tv."""
    order = np.argsort(-p)
    plus = np.zeros(p.size, dtype=bool)
    plus[order[np.cumsum(p[order]) <= 0.5 + 1e-12]] = True
    r = p.copy()
    r[plus] *= 1 + tv / p[plus].sum()
    r[~plus] *= 1 - tv / p[~plus].sum()
    return r


def binomial_ok(hits, trials, rate, sds=4.0):
    return abs(hits - trials * rate) <= sds * np.sqrt(trials * rate * (1 - rate))


# ------------------------------------------------------------------------------------- statistics
def test_pooled_cells_reach_the_minimum_expected_count():
    for samples in (50, 300, 5000):
        cell, k, pool = pool_cells(ZIPF, samples)
        expected = samples * np.bincount(cell, weights=ZIPF, minlength=k)
        assert expected.min() >= 10 and (cell >= 0).all()
        sizes = np.bincount(cell, minlength=k)
        assert pool == pytest.approx(ZIPF[sizes[cell] > 1].sum())
    cell, k, pool = pool_cells(np.array([0.0, 0.5, 0.5]), 100)
    assert cell.tolist() == [-1, 0, 1] and k == 2 and pool == 0.0


@pytest.mark.parametrize("p,samples", [(P3, 300), (ZIPF, 400), (np.full(50, 0.02), 2000)])
def test_false_rejection_rate_equals_the_level(p, samples):
    """Multinomial draws from p itself: the rejection rate at each level is the level."""
    rng = np.random.default_rng(7)
    pv = np.array([law_test(c, p) for c in rng.multinomial(samples, p, size=2000)])
    for level in (0.01, 0.05, 0.1):
        assert binomial_ok((pv < level).sum(), pv.size, level), (level, (pv < level).mean())


@pytest.mark.parametrize("p,tv", [(P3, 0.05), (ZIPF, 0.05), (np.full(50, 0.02), 0.08)])
def test_documented_power_and_tv_upper_coverage(p, tv):
    """At N = samples_for(tv), a deviation of that TV (worst shape) is rejected with probability at
    least 0.9, and tv_upper covers the true TV at least 95% of the time."""
    samples = samples_for(tv, p)
    assert detectable_tv(p, samples) <= tv < detectable_tv(p, int(samples * 0.9))
    r = two_sided_deviation(p, tv)
    rng = np.random.default_rng(3)
    counts = rng.multinomial(samples, r, size=500)
    power = np.mean([law_test(c, p) < DEFAULT_LEVEL for c in counts])
    coverage = np.mean([_tv_upper(c, p, 0.05) >= tv - 1e-12 for c in counts[:200]])
    assert power >= 0.9 - 3 * np.sqrt(0.09 / 500), power
    assert coverage >= 0.95 - 3 * np.sqrt(0.0475 / 200), coverage


def test_sample_size_rule_worked_number():
    """The module's worked number: V = 50 uniform, level 0.01, TV 0.02 -> 32,623 samples."""
    assert samples_for(0.02, np.full(50, 0.02)) == 32_623
    assert samples_for(0.02, P3) == 11_089
    assert samples_for(0.02, P3, positions=8) > samples_for(0.02, P3)  # Bonferroni costs samples


def test_law_test_edges():
    assert law_test([0, 30, 0], [0.0, 1.0, 0.0]) == 1.0  # a point mass: nothing to test
    assert law_test([1, 29, 0], [0.0, 1.0, 0.0]) == 0.0  # a token of zero target mass came out
    assert law_test([100, 0], [0.5, 0.5]) < 1e-20


# ------------------------------------------------------------------------------------- examples
def test_skip_repeat_emits_the_published_law_exactly():
    law = example("rrs_skip_repeat", "law")
    model = md.IID(Q3, 2)
    tuples = model.tuple_law()
    out = sum(w * np.add(*law(P3, Q3, x)) for x, w in zip(tuples.tuples, tuples.probs, strict=True))
    assert np.abs(out - [0.2, 0.46, 0.34]).max() < 1e-15
    res = md.audit(law, P3, Q3, 2, exact=True)
    assert res.mode == "exact" and not res.lossless and res.tv == pytest.approx(0.06, abs=1e-15)
    assert res.worst_tokens[0]["token"] in (1, 2)


@pytest.mark.parametrize("name", ["rrs", "optimal"])
def test_exact_mode_passes_correct_laws(name):
    res = md.audit(example(name, "law"), P3, Q3, 3, exact=True)
    assert res.lossless and res.tv < 1e-12 and res.pvalue is None
    ref = RULES["rrs" if name == "rrs" else "optimal"](P3, Q3, 3).exact_acceptance()
    assert res.acceptance == pytest.approx(ref, abs=1e-12)
    if name == "optimal":
        assert res.acceptance == pytest.approx(res.alpha_star, abs=1e-9)


def test_exact_mode_of_a_selection_rule_class():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
    for name in ("rrs", "k-seq", "optimal", "rrs-wor"):
        res = md.audit(RULES[name], p, q, 2)
        assert res.mode == "exact" and res.lossless, name
        assert res.sampling == RULES[name].sampling
        assert res.acceptance <= res.alpha_star + 1e-9


@pytest.mark.parametrize("name", CORRECT)
def test_audit_passes_correct_verifiers(name):
    rng = np.random.default_rng(1)
    p, q = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
    # no time limit: the pilot's pace on a loaded machine is not what this test is about
    res = md.audit(example(name), p, q, 3, samples=4000, seed=2, detect_tv=0.1, max_seconds=None)
    assert res.lossless and res.verdict == "lossless" and res.pvalue >= DEFAULT_LEVEL, res
    assert res.acceptance_ci95[0] <= res.alpha_star + 1e-9
    assert res.optimum_pvalue > DEFAULT_LEVEL


@pytest.mark.parametrize("name", LOSSY)
def test_audit_rejects_lossy_verifiers_at_the_documented_power(name):
    """The exact TV of each lossy example, then a sampled audit at the sample size the rule gives for
    that TV (power >= 0.9 by the module's bound): rejected, and the exact TV within tv_upper."""
    exact = md.audit(example(name, "law"), P3, Q3, 2, exact=True)
    assert not exact.lossless and exact.tv > 0.04
    samples = samples_for(exact.tv, P3)
    res = md.audit(example(name), P3, Q3, 2, samples=samples, seed=4)
    assert not res.lossless and res.pvalue < DEFAULT_LEVEL, res
    assert res.tv_upper >= exact.tv
    # four binomial standard deviations (a fixed 0.03 would be below one at argmax_accept's 57 samples)
    assert binomial_ok(round(res.acceptance * samples), samples, exact.acceptance)


def test_false_rejection_rate_of_a_correct_verifier_end_to_end():
    """The RRS example audited over many seeds at a small sample size: rejections ~ the level."""
    rrs = example("rrs")
    seeds, level = 120, 0.1
    rejected = sum(md.audit(rrs, P3, Q3, 2, samples=100, seed=s, level=level).verdict == "lossy"
                   for s in range(seeds))
    assert binomial_ok(rejected, seeds, level), rejected


def test_batched_positions_bonferroni():
    p = np.stack([P3, [0.5, 0.25, 0.25]])
    res = md.audit(example("rrs"), p, Q3, 2, samples=500, seed=0, detect_tv=0.3)
    assert res.positions == 2 and len(res.per_position) == 2 and res.lossless
    assert res.pvalue == pytest.approx(min(1.0, 2 * min(r["pvalue"] for r in res.per_position)))
    d = res.to_dict()
    assert json.loads(json.dumps(d))["positions"] == 2
    for key in ("lossless", "pvalue", "tv", "tv_upper", "acceptance", "acceptance_ci95",
                "alpha_star", "samples", "worst_tokens"):
        assert key in d


def test_without_replacement_drafts():
    res = md.audit(RULES["rrs-wor"], P3, Q3, 2, samples=3000, seed=1, detect_tv=0.1)
    assert res.mode == "sampled" and res.sampling == "without-replacement" and res.lossless
    with pytest.raises(md.InvalidInputError, match="contradicts"):
        md.audit(RULES["rrs-wor"], P3, Q3, 2, sampling="iid")


def test_torch_form():
    pytest.importorskip("torch")
    res = md.audit(example("torch_rrs"), P3, Q3, 2, torch=True, samples=4000, seed=0, detect_tv=0.1)
    assert res.mode == "torch" and res.lossless
    bad = [md.audit(example("torch_rrs_skip_repeat"), P3, Q3, 2, torch=True,
                    samples=samples_for(0.06, P3), seed=s) for s in range(20)]
    assert sum(b.verdict == "lossy" for b in bad) >= 15  # power >= 0.9 each: P(<= 14 of 20) < 0.05
    assert all(b.mode == "torch" and b.samples == samples_for(0.06, P3) for b in bad)


# ------------------------------------------------------------------------------------- CLI
@pytest.fixture
def pq(tmp_path):
    np.save(tmp_path / "p.npy", P3)
    np.save(tmp_path / "q.npy", Q3)
    return str(tmp_path / "p.npy"), str(tmp_path / "q.npy")


def run(capsys, *argv):
    code = main(["audit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_exit_codes(capsys, pq):
    code, out, _ = run(capsys, f"{EXAMPLES}/rrs.py:verify", *pq, "-n", "2", "--samples", "2000",
                       "--detect-tv", "0.1", "--json")
    res = json.loads(out)
    assert code == 0 and res["lossless"] and res["samples"] == 2000 and res["mode"] == "sampled"
    code, out, _ = run(capsys, f"{EXAMPLES}/rrs_skip_repeat.py:law", *pq, "-n", "2", "--exact")
    assert code == 1 and "exact TV(output, p) = 0.06 -> LOSSY" in out
    code, out, _ = run(capsys, "mdtheory.rules.optimal:Optimal", *pq, "-n", "2")
    assert code == 0 and "lossless" in out


def write(tmp_path, body):
    path = tmp_path / "target.py"
    path.write_text(body)
    return str(path)


@pytest.mark.parametrize("body,spec,message", [
    (None, "no_colon", "must be FILE.py:NAME or MODULE:NAME"),
    (None, "/nonexistent/v.py:f", "no such file"),
    (None, "no_such_module_xyz:f", "cannot import no_such_module_xyz: ModuleNotFoundError"),
    ("raise RuntimeError('at import')\n", ":f", "cannot import .*RuntimeError: at import"),
    ("x = 1\n", ":f", "has no 'f'"),
    ("f = 3\n", ":f", "'f' is a int, not callable"),
    ("def f(p, q, d, rng):\n    if d[0] == 1:\n        raise ValueError('bad\\ndraft')\n"
     "    return int(d[0])\n", ":f", r"raised ValueError: bad draft on drafts \(1, \d\)"),
    ("def f(p, q, d, rng):\n    return 7\n", ":f", r"returned 7 on drafts \(\d, \d\)"),
    ("def f(p, q, d, rng):\n    return 0.5\n", ":f", "returned 0.5"),
    # sys.exit in the target is a bad verifier, not the audit's exit code with no verdict
    ("import sys\nsys.exit(0)\n", ":f", "cannot import .*SystemExit: 0"),
    ("import sys\ndef f(p, q, d, rng):\n    sys.exit(0)\n", ":f", "raised SystemExit: 0 on drafts"),
    ("def f(p, q, d, rng):\n    return (int(d[0]), 'yes')\n", ":f", "accepted must be a bool"),
])
def test_cli_bad_target_exits_2_with_one_line(capsys, pq, tmp_path, body, spec, message):
    if body is not None:
        spec = write(tmp_path, body) + spec
    code, out, err = run(capsys, spec, *pq, "-n", "2", "--samples", "200")
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("mdtheory: error: ")
    assert re.search(message, err), err


def test_cli_target_prints_go_to_stderr(capsys, pq, tmp_path):
    """A target printing to stdout does not break --json: its prints go to stderr."""
    spec = write(tmp_path, "def f(p, q, d, rng):\n    print('hello')\n"
                           "    return int(rng.choice(len(p), p=p))\n") + ":f"
    code, out, err = run(capsys, spec, *pq, "-n", "2", "--samples", "50", "--json")
    assert code in (0, 1, 5) and json.loads(out)["samples"] == 50 and "hello" in err


def test_cli_refuses_an_audit_over_max_seconds(capsys, pq):
    """The target is timed on its first calls and an audit estimated over --max-seconds is refused
    with the estimate."""
    code, out, err = run(capsys, f"{EXAMPLES}/rrs.py:verify", *pq, "-n", "2", "--samples", "5000",
                         "--max-seconds", "1e-9")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert re.search(r"5,000 verifier calls .* estimated [0-9.e+-]+ (s|min|h), over the limit", err)


def test_cli_unknown_torch_device_exits_2(capsys, pq):
    """--torch --device nope is exit 2 with one line, not torch's RuntimeError."""
    pytest.importorskip("torch")
    code, out, err = run(capsys, f"{EXAMPLES}/rrs.py:verify", *pq, "-n", "2", "--torch",
                         "--device", "nope")
    assert code == 2 and "unknown device 'nope'" in err and err.count("\n") == 1


def test_cli_bad_input_exits_2(capsys, pq, tmp_path):
    np.save(tmp_path / "bad.npy", np.array([0.5, 0.6, 0.1]))
    rrs = f"{EXAMPLES}/rrs.py:verify"
    for argv, message in [
        ((rrs, str(tmp_path / "bad.npy"), pq[1], "-n", "2"), "p sums to"),
        ((rrs, *pq, "-n", "0"), "at least 1"),
        ((rrs, *pq, "-n", "2", "--samples", "3"), "samples must be"),
        ((rrs, *pq, "-n", "2", "--level", "1.5"), "level must be"),
        ((rrs, *pq, "-n", "2", "--exact", "--torch"), "one of exact and torch"),
        ((f"{EXAMPLES}/rrs.py:law", *pq, "-n", "2", "--samples", "50"), "VERIFIER law raised"),
    ]:
        code, _, err = run(capsys, *argv)
        assert code == 2 and message in err and err.count("\n") == 1, (argv, err)


def test_load_target_keeps_the_module_importable_for_dataclasses(tmp_path):
    spec = write(tmp_path, "from dataclasses import dataclass\n@dataclass\nclass A:\n    x: int = 1\n"
                           "def f(p, q, d, rng):\n    return A().x - 1 + int(d[0])\n") + ":f"
    assert load_target(spec)(P3, Q3, np.array([2, 0]), None) == 2
    assert any(name.startswith("_mdtheory_audit_") for name in sys.modules)


def test_a_run_too_small_to_detect_the_target_tv_is_inconclusive(capsys, pq):
    """A lossy verifier on 10 samples is not rejected: that is no evidence of losslessness."""
    code, out, _ = run(capsys, f"{EXAMPLES}/rrs_skip_repeat.py:verify", *pq, "-n", "2",
                       "--samples", "10", "--json")
    res = json.loads(out)
    assert code == EXIT_INCONCLUSIVE and res["verdict"] == "inconclusive" and not res["lossless"]
    assert res["detectable_tv"] > res["detect_tv"] == TARGET_TV
    code, out, _ = run(capsys, f"{EXAMPLES}/rrs_skip_repeat.py:verify", *pq, "-n", "2",
                       "--samples", "10")
    assert code == EXIT_INCONCLUSIVE and "INCONCLUSIVE" in out and "lossless" not in out


def test_detect_tv_sizes_the_run():
    res = md.audit(example("rrs"), P3, Q3, 2, detect_tv=0.1, seed=0)
    assert res.samples == samples_for(0.1, P3) and res.detect_tv == 0.1
    assert res.detectable_tv <= 0.1 and res.verdict in ("lossless", "lossy")
    assert res.lossless == (res.verdict == "lossless")
    with pytest.raises(md.InvalidInputError, match="TV to detect"):
        md.audit(example("rrs"), P3, Q3, 2, detect_tv=0.0)


def test_a_verifier_that_slows_down_after_the_pilot_is_stopped(capsys, pq, tmp_path):
    """Fast for its first 200 calls, then 20 ms a call: the 60 s audit is stopped by the pace
    re-check (30,000 calls would take 10 minutes), not after it."""
    spec = write(tmp_path, "import time\ncalls = [0]\ndef f(p, q, d, rng):\n    calls[0] += 1\n"
                           "    if calls[0] > 200:\n        time.sleep(0.02)\n    return int(d[0])\n")
    code, out, err = run(capsys, spec + ":f", *pq, "-n", "2", "--samples", "30000",
                         "--max-seconds", "1")
    assert code == 2 and out == "" and "stopped after" in err and "Traceback" not in err
    assert int(re.search(r"after ([\d,]+) of", err).group(1).replace(",", "")) < 1000


def test_batches_of_different_lengths_are_refused():
    """p and q batches broadcast only from one row: 2 rows against 3 is refused before any run."""
    P = np.tile(P3, (2, 1))
    with pytest.raises(md.InvalidDistributionError, match="p has 2 rows but q has 3; give equal"):
        md.audit(lambda p, q, d, rng: int(d[0]), P, np.tile(Q3, (3, 1)), 2, samples=10)
