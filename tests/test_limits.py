"""Edges of the promises: huge draft counts, masses within an ulp of one, and work refused up front."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal, localcontext
from pathlib import Path

import numpy as np
import pytest

import mdtheory as md
from mdtheory import _budget, _jit, certify
from mdtheory._validate import as_distribution
from mdtheory.certify import CERT_TOL, MAX_CERT_SETS
from mdtheory.errors import InvalidInputError, ProblemTooLargeError
from mdtheory.models.iid import IID
from mdtheory.models.polymatroid import lex_optimal_base_iid
from mdtheory.rules import make_rule
from mdtheory.solve import route_estimate
from tests.reference_decimal import decimal_alpha
from tests.tolerances import ROUNDING, SOLVER


@pytest.mark.parametrize("mode", ["python", "numba"])
@pytest.mark.parametrize("n", [10**8, 10**12, 10**15])
def test_a_mass_an_ulp_below_one_keeps_its_power(monkeypatch, n, mode):
    # q({0, 1}) = 1 - 2^-54 rounds to 1 in float64; its n-th power is far from 1 at large n
    monkeypatch.setattr(_jit, "FORCE", mode)
    p, q = [0.5, 0.0, 0.5], [1 - 2**-53, 2**-54, 2**-54]
    expected = decimal_alpha(p, q, n, digits=50)
    assert expected > 0.5 + 1e-9
    for method in ("auto", "subsets"):
        res = md.optimal_acceptance(p, q, n, method=method)
        assert res.status == "optimal"
        assert res.value == pytest.approx(expected, abs=ROUNDING)
        assert 1 + res.cut_p - res.cut_q == pytest.approx(expected, abs=ROUNDING)
    full = md.optimal_acceptance(p, q, n, certify="full")
    assert full.value == pytest.approx(expected, abs=ROUNDING)


@pytest.mark.parametrize("n", [10**6, 10**9, 10**12])
def test_softmax_pair_at_huge_n_matches_decimal_powers(n):
    rng = np.random.default_rng(1)
    z = 3.0 * rng.standard_normal(2000)
    p = np.exp(z - z.max())
    p /= p.sum()
    q = np.exp(3 * (z - z.max()))
    q /= q.sum()
    # the law the package works with: each vector divided by its own float64 sum
    expected = decimal_alpha(as_distribution(p, "p"), as_distribution(q, "q"), n, digits=50)
    assert expected < 1 - 1e-6  # a pair whose optimum still moves with n
    assert md.alpha_star(p, q, n) == pytest.approx(expected, abs=ROUNDING)


def test_iid_containment_keeps_the_distance_from_one():
    model = IID([1 - 2**-53, 2**-54, 2**-54], 10**15)
    masks = np.array([[True, True, False], [True, False, False], [False, True, True]])
    with localcontext() as ctx:
        ctx.prec = 50
        exact = [float((1 - Decimal(2) ** -54) ** 10**15), float((1 - Decimal(2) ** -53) ** 10**15),
                 0.0]
    np.testing.assert_allclose(model.containment(masks), exact, rtol=ROUNDING, atol=0)
    many = np.tile(masks, (8, 1))  # past the few-sets path: one matrix product
    np.testing.assert_allclose(model.containment(many), np.tile(exact, 8), rtol=ROUNDING, atol=0)


def _subnormal_pair(subnormal_p: bool, dtype):
    """A Dirichlet(0.1) pair on 2048 tokens with a fifth of q (and of p) subnormal: q's float sum
    after normalisation is off one by about 1e-16, which n = 2^40 raises to 1e-4."""
    rng = np.random.default_rng(1)
    p, q = rng.dirichlet(np.full(2048, 0.1)), rng.dirichlet(np.full(2048, 0.1))
    p, q = p.astype(dtype), q.astype(dtype)
    q[rng.random(2048) < 0.2] = 3e-321 if dtype == np.float64 else 3e-44
    if subnormal_p:
        p[rng.random(2048) < 0.2] = 5e-320 if dtype == np.float64 else 5e-43
    return as_distribution(p, "p", normalize=True), as_distribution(q, "q", normalize=True)


@pytest.mark.parametrize("n", [2**30, 2**40, 2**53])
@pytest.mark.parametrize("subnormal_p,dtype", [(False, np.float64), (True, np.float64),
                                               (True, np.float32)])
def test_subnormal_masses_at_huge_n_prove_the_decimal_optimum(n, subnormal_p, dtype):
    p, q = _subnormal_pair(subnormal_p, dtype)
    expected = decimal_alpha(p, q, n, digits=50)
    for method in ("prefix", "select"):
        for mode in ("fast", "full"):
            res = md.optimal_acceptance(p, q, n, method=method, certify=mode)
            assert res.status == "optimal"
            assert res.certificate == ("lex-base" if mode == "full" else
                                       "base" if method == "prefix" else "bracket")
            assert res.value == pytest.approx(expected, abs=ROUNDING)
            assert 1 + res.cut_p - res.cut_q == pytest.approx(expected, abs=ROUNDING)
    # whatever the reading of q's sum: the tokens of subnormal q are drafted with probability at
    # most n q(T) (below 1e-20), so their mass p(T) is mostly lost
    lost = q < 1e-40
    assert p[lost].sum() > 0.05
    assert expected <= 1 - p[lost].sum() + n * q[lost].sum() + ROUNDING


def test_the_lex_base_of_a_subnormal_pair_sums_to_one_at_huge_n():
    p, q = _subnormal_pair(True, np.float64)
    for n in (2**20, 2**40, 2**53):
        mu = lex_optimal_base_iid(p, q, n).mu
        assert np.isfinite(mu).all() and mu.min() >= 0.0
        assert mu.sum() == pytest.approx(1.0, abs=ROUNDING)


@pytest.mark.parametrize("n", [10**30, 2**53 + 1, np.uint64(2**64 - 1)])
def test_drafts_beyond_two_to_the_53_are_refused_whatever_ran_before(n):
    u = np.full(2000, 1 / 2000)
    for warm in (False, True):
        if warm:  # a large call first loads the compiled kernels
            assert md.alpha_star(u, u, 5) == pytest.approx(1.0, abs=ROUNDING)
        with pytest.raises(InvalidInputError, match="at most 2\\^53"):
            md.alpha_star(u, u, n)
    assert md.alpha_star(u, u, 2**53) == pytest.approx(1.0, abs=ROUNDING)


def _dirichlet_pair(V, seed=0):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))


def test_the_library_refuses_the_otlp_the_cli_refuses():
    root = Path(__file__).resolve().parent.parent / "examples"
    p, q = np.load(root / "p.npy"), np.load(root / "q.npy")
    with pytest.raises(ProblemTooLargeError, match="estimated .* GiB of memory"):
        md.optimal_acceptance(p, q, 4, method="otlp")
    with pytest.raises(ProblemTooLargeError, match="estimated"):
        md.alpha_star(p, q, 4, method="otlp", max_bytes=float("inf"))
    with pytest.raises(ProblemTooLargeError, match="over the limit of 1 KiB"):
        md.alpha_star(p, q, 2, method="dual", max_bytes=1024)


@pytest.mark.parametrize("method", ["dual", "maxflow", "otlp"])
def test_set_routes_see_the_forward_pass_over_n_drafts(method):
    p, q = _dirichlet_pair(3)
    with pytest.raises(ProblemTooLargeError, match="10\\^?6|1e\\+06 forward steps"):
        md.alpha_star(p, q, 10**6, method=method)
    est = route_estimate(md.IID(q, 10**6), method)
    assert est.seconds > 60  # measured 1.9e-4 s a step at V = 3: over three minutes
    assert md.alpha_star(p, q, 50, method=method) == pytest.approx(md.alpha_star(p, q, 50), abs=SOLVER)


def test_independent_drafts_at_huge_v_are_refused_before_allocating():
    """V = 100,000: refused up front, by its time; its memory is the corral's capped reservation
    (at most 2 GiB), and a limit below that refuses it for memory."""
    V = 100_000
    p = np.full(V, 1 / V)
    Q = np.stack([p, np.roll(np.linspace(1, 2, V) / np.linspace(1, 2, V).sum(), 1)])
    with pytest.raises(ProblemTooLargeError, match="estimated"):
        md.alpha_star(p, Q, sampling="independent")
    assert route_estimate(md.Independent(Q), "mnp").bytes <= _budget.MNP_RESERVE + 64 * (V + 2)
    with pytest.raises(ProblemTooLargeError, match="memory"):
        md.alpha_star(p, Q, sampling="independent", max_seconds=float("inf"), max_bytes=2**30)


def test_an_unclosed_minimum_norm_point_stops_at_the_limit_with_its_bounds():
    """p one of the drafts' laws: Wolfe's method creeps (a known failure). The route stops at
    max_seconds and raises its proven bounds; the optimal rule is built from them."""
    rng = np.random.default_rng(0)
    Q = rng.dirichlet(np.full(300, 0.3), size=4)
    with pytest.raises(md.OptimalityGapError) as err:
        md.alpha_star(Q[0], Q, sampling="independent", method="mnp", max_seconds=0.5)
    assert 0 <= err.value.lower <= err.value.upper <= 1
    with pytest.warns(md.OptimalityGapWarning):
        rule = make_rule("optimal", Q[0], Q, 4, sampling="independent", max_seconds=0.5)
    lower, upper = rule.alpha_bounds
    assert lower == pytest.approx(rule.exact_acceptance(), abs=ROUNDING) and lower <= upper


def test_auto_proves_without_replacement_beyond_the_flow_certificate(monkeypatch):
    """Where no majorant meets the prefix route's cut (here: none tried), auto proves it by
    Wolfe's method, within the limit or not at all."""
    monkeypatch.setattr(certify, "_successive_bounds", lambda *args: None)
    p, q = _dirichlet_pair(30, seed=3)
    model = md.WithoutReplacement(q, 3)
    assert model.count_sets() > MAX_CERT_SETS
    bound = md.optimal_acceptance(p, model, method="prefix")
    assert bound.status == "upper-bound"
    res = md.optimal_acceptance(p, model)
    assert res.status == "optimal" and res.method == "mnp"
    assert res.value == pytest.approx(bound.value, abs=CERT_TOL)
    # a limit the prefix route's estimate fits and the minimum-norm point's does not (its
    # iterations estimated at 30 sqrt(V)): the checked bound, as stated
    monkeypatch.setattr(md.WithoutReplacement, "mnp_iterations", 30.0)
    limit = route_estimate(model, "prefix").seconds * 1.01
    assert route_estimate(model, "mnp").seconds > limit
    kept = md.optimal_acceptance(p, model, max_seconds=limit)
    assert kept.status == "upper-bound" and kept.value == bound.value


def _command(*argv, close_stdout=False):
    """``python -m mdtheory argv`` in a process of its own (file descriptor 1 closed: ``>&-``)."""
    root = Path(__file__).resolve().parent.parent
    cmd = [sys.executable, "-m", "mdtheory", *map(str, argv)]
    if close_stdout:
        cmd = ["sh", "-c", 'exec "$@" >&-', "sh", *cmd]
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run(cmd, capture_output=not close_stdout, stderr=subprocess.PIPE if
                          close_stdout else None, env=env, text=True, timeout=120)


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_a_command_started_with_stdout_closed_exits_141_quietly(tmp_path, extra):
    np.save(tmp_path / "p.npy", np.array([0.2, 0.3, 0.5]))
    out = _command("check-acceptance", tmp_path / "p.npy", tmp_path / "p.npy", *extra,
                   close_stdout=True)
    assert out.returncode == 141 and "Traceback" not in out.stderr and out.stderr == ""


@pytest.mark.char_lstm
def test_lm_pairs_refuses_a_huge_ngram_order_up_front(capsys):
    from mdtheory.cli import main

    assert main(["lm-pairs", "--positions", "10", "--draft", "ngram", "--order", "100000",
                 "--out", "unused", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "n-gram drafter of order 100000" in err and "GiB of memory" in err
    est = _budget.ngram_distillation(3, 465)
    assert est.bytes < _budget.MAX_BYTES and est.seconds < _budget.MAX_SECONDS


def test_max_bytes_in_the_command_line(tmp_path, capsys):
    from mdtheory.cli import main

    p, q = _dirichlet_pair(12)
    np.save(tmp_path / "p.npy", p)
    np.save(tmp_path / "q.npy", q)
    args = ["check-acceptance", tmp_path / "p.npy", tmp_path / "q.npy", "-n", "3", "--method",
            "dual"]
    assert main([*map(str, args), "--max-bytes", "1K"]) == 2
    assert "over the limit of 1 KiB" in capsys.readouterr().err
    assert main([*map(str, args), "--max-bytes", "1G"]) == 0
    assert main([*map(str, args), "--max-bytes", "-3"]) == 2


def test_compare_selectors_times_the_steady_state(tmp_path, capsys, monkeypatch):
    """prepare_ms is the second preparation at the problem's size, with compiled kernels (the
    first loads the kernels that size needs; a small call alone would run them interpreted)."""
    import mdtheory.rules as rules
    from mdtheory.cli import main

    p, q = _dirichlet_pair(300)
    np.save(tmp_path / "p.npy", p)
    np.save(tmp_path / "q.npy", q)
    calls = []
    real = rules.make_rule

    def spy(name, p, q, n, **kw):
        calls.append((name, len(p), _jit.FORCE or ("numba" in sys.modules)))
        return real(name, p, q, n, **kw)

    monkeypatch.setattr(rules, "make_rule", spy)
    assert main(["compare-selectors", str(tmp_path / "p.npy"), str(tmp_path / "q.npy"), "-n", "8",
                 "--rules", "optimal", "--json"]) == 0
    sized = [c for c in calls if c[1] == 300]
    assert len(sized) == 2 and all(compiled for _, _, compiled in sized)
    assert json.loads(capsys.readouterr().out)["prepare_ms"] > 0


@pytest.mark.parametrize("value", ["1", float("nan"), 0, -1.0, True, [1]])
@pytest.mark.parametrize("limit", ["max_seconds", "max_bytes"])
def test_bad_limit_values_are_named_in_the_front_door(limit, value):
    """A limit that is not a positive number (or None) is an error naming it, before any work; a
    NaN would otherwise switch the limit off and a string reach a comparison."""
    from mdtheory.rules import make_rule

    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.2, 0.6])
    calls = (lambda **kw: md.optimal_acceptance(p, q, 2, **kw),
             lambda **kw: md.alpha_star(p, q, 2, **kw),
             lambda **kw: md.alpha_star(np.stack([p, q]), q, 2, **kw),
             lambda **kw: make_rule("optimal", p, q, 2, **kw))
    for call in calls:
        with pytest.raises(md.InvalidInputError, match=f"{limit} must be a positive number"):
            call(**{limit: value})


def test_none_limits_mean_no_limit_in_the_front_door():
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.2, 0.6])
    assert md.alpha_star(p, q, 2, max_seconds=None, max_bytes=None) == md.alpha_star(p, q, 2)


def test_the_set_law_estimate_counts_what_its_enumeration_passes_through():
    """Successive sampling of n = 29 of 30 tokens has 30 draft sets, but the forward pass that
    enumerates them holds C(30, 15) = 1.6e8 sets halfway: the law routes' estimates and the set
    law's own guard count those, so the law is refused before it is built, the front door's
    flow certificate is not attempted, and alpha* is proven without it (here by the face bound of a
    partial-replacement majorant, papers/theory.md)."""
    from math import comb

    p, q = _dirichlet_pair(30, seed=4)
    model = md.WithoutReplacement(q, 29)
    assert model.count_sets() == 30 and model.set_law_size() == comb(30, 15)
    for method in ("dual", "otlp", "maxflow"):
        assert route_estimate(model, method).bytes > _budget.MAX_BYTES
        with pytest.raises(ProblemTooLargeError, match=r"through up to 1\.55e\+08 sets"):
            md.optimal_acceptance(p, model, method=method)
    with pytest.raises(ProblemTooLargeError, match="the set law has up to 1.55e"):
        model.set_law()
    assert route_estimate(model, certify="fast").seconds < 1.0
    res = md.optimal_acceptance(p, model)
    assert res.status == "optimal" and (res.method, res.certificate) == ("prefix", "majorant")
    assert res.value == pytest.approx(md.optimal_acceptance(p, model, method="prefix").value,
                                      abs=CERT_TOL)
    assert md.WithoutReplacement(q, 3).set_law_size() == comb(30, 3)  # n <= s / 2: the last step


@pytest.mark.parametrize("argv", [
    ["cross-validate"], ["dd", "--vocab", "3", "-n", "2"], ["verify", "theorem2"],
    ["verify", "theorem3"], ["verify", "hu-wor"],
])
def test_max_bytes_is_honoured_by_every_command(capsys, argv):
    """--max-bytes is checked against each command's memory estimate before any work (it was
    accepted and ignored by cross-validate, dd and verify)."""
    from mdtheory.cli import main

    assert main([*argv, "--max-bytes", "1K"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mdtheory: error: ") and "of memory, over the limit of 1 KiB" in err
    assert "--max-bytes) to run it anyway" in err or "raise it with --max-bytes" in err


def test_cross_validate_estimates_the_batched_calls_it_makes():
    """The library's cross-validation refuses its estimate up front (a whole run of the torch rules
    at V = 152,000 was 21 GB resident with one call of all 800 rows), which counts the calls of
    bounded rows it makes."""
    pytest.importorskip("torch")
    from mdtheory.audit.crossval import cross_validate

    with pytest.raises(ProblemTooLargeError, match="cross-validate: 8 positions x 100 steps .* "
                       "V = 152000, \\d rules: estimated .* of memory, over the limit of 256 MiB"):
        cross_validate(vocab=152_000, samples=100, max_bytes=2**28)
    est = _budget.batched_steps(8, 100, 152_000, 2, 4)
    assert est.bytes < _budget.MAX_BYTES / 4  # calls of TORCH_CELLS cells, not of all 800 rows
    assert est.bytes > _budget.TORCH_CELL_BYTES * _budget.TORCH_CELLS / 2


def test_a_batched_verifier_is_called_on_bounded_rows():
    """audit --torch calls the verifier on whole steps of every position, at most TORCH_CELLS
    (row, token or draft) cells a call, and every step is made."""
    torch = pytest.importorskip("torch")
    rows = []

    def first_draft(p, q, drafts, gen):
        rows.append(drafts.shape[0])
        return drafts[:, 0]
    rng = np.random.default_rng(0)
    P, Q = rng.dirichlet(np.ones(3000), size=2), rng.dirichlet(np.ones(3000), size=2)
    md.audit(first_draft, P, Q, 2, torch=True, samples=5000, seed=0)
    assert torch is not None and sum(rows) == 2 * 5000
    assert max(rows) * (3000 + 2) <= _budget.TORCH_CELLS and all(r % 2 == 0 for r in rows)
