"""The torch bridge on CPU: agreement with numpy, dtype/device, gradients, and the harness."""

import json
import subprocess
import sys

import numpy as np
import pytest

import mdtheory as md
from mdtheory._synthetic import llm_pairs
from mdtheory.cli import main

from .tolerances import FLOAT32, ROUNDING

torch = pytest.importorskip("torch")
tb = pytest.importorskip("mdtheory.torch_bridge")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def test_importing_mdtheory_does_not_import_torch():
    code = "import sys, mdtheory, mdtheory.cli, mdtheory.rules; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,tol", [("float64", ROUNDING), ("float32", FLOAT32)])
def test_alpha_star_matches_numpy(device, dtype, tol):
    rng = np.random.default_rng(0)
    P, Q = rng.dirichlet(np.full(40, 0.5), size=32), rng.dirichlet(np.full(40, 0.5), size=32)
    P[0, :3] = 0
    P[0] /= P[0].sum()
    Q[1, 5:9] = 0
    Q[1] /= Q[1].sum()
    Q[2] = P[2]  # p = q
    dt = getattr(torch, dtype)
    for n in (1, 2, 5):
        got = tb.alpha_star(torch.tensor(P, dtype=dt, device=device),
                            torch.tensor(Q, dtype=dt, device=device), n)
        assert got.dtype == dt and got.device.type == device and got.shape == (32,)
        ref = np.array([md.alpha_star(p, q, n) for p, q in zip(P, Q, strict=True)])
        assert np.abs(got.cpu().double().numpy() - ref).max() <= tol
    single = tb.alpha_star(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]), 3)
    assert single.shape == () and single.item() == 0.0


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_alpha_star_gradients_are_the_closed_form(n):
    """alpha* = 1 + p(T*) - q(T*)^n at the optimal cut T* (from the numpy route, not from torch), so
    d alpha*/dp_i = 1 and d alpha*/dq_i = -n q(T*)^(n-1) for i in T*, and both are 0 elsewhere."""
    rng = np.random.default_rng(n)
    checked = 0
    for _ in range(20):
        p0, q0 = rng.dirichlet(np.ones(12)), rng.dirichlet(np.ones(12))
        res = md.optimal_acceptance(p0, q0, n)
        if res.cut.size == 0:  # alpha* = 1: nothing to differentiate through
            continue
        p = torch.tensor(p0, requires_grad=True)
        q = torch.tensor(q0, requires_grad=True)
        tb.alpha_star(p, q, n).backward()
        in_cut = np.zeros(12, dtype=bool)
        in_cut[res.cut] = True
        dq = -n * q0[in_cut].sum() ** (n - 1)
        assert np.abs(p.grad.numpy() - in_cut).max() <= ROUNDING
        assert np.abs(q.grad.numpy() - np.where(in_cut, dq, 0.0)).max() <= ROUNDING
        checked += 1
    assert checked >= 10


def test_to_probs_like_llm_stacks():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, 0.0]], dtype=torch.float64)
    base = torch.softmax(logits / 0.7, -1)
    assert torch.allclose(tb.to_probs(logits, 0.7), base)
    top2 = tb.to_probs(logits, top_k=2)
    assert (top2[0, 2:] == 0).all() and top2.sum().item() == pytest.approx(1.0)
    nucleus = tb.to_probs(logits, top_p=0.6)  # sorted probs .48, .18, ... : keep 2 tokens
    assert (nucleus[0] > 0).tolist() == [True, True, False, False, False]
    assert tb.to_probs(logits.float(), top_p=1.0).dtype == torch.float32
    with pytest.raises(md.InvalidInputError, match="temperature must be finite and > 0"):
        tb.to_probs(logits, 0.0)
    with pytest.raises(md.InvalidInputError, match=r"top_p must be in \(0, 1\]"):
        tb.to_probs(logits, top_p=1.5)


@pytest.mark.parametrize("drafts", [2, 3])
def test_torch_rules_agree_with_exact_theory(drafts):
    report = tb.cross_validate(batch=6, vocab=5, drafts=drafts, samples=3000, seed=drafts)
    assert report["passed"], report
    assert {r["rule"] for r in report["rules"]} == set(tb.TORCH_RULES)


def test_torch_optimal_at_a_larger_vocabulary():
    """The schedule lookup on the device has no vocabulary limit (the set bitmask it replaced had 62)."""
    report = tb.cross_validate(["optimal"], batch=4, vocab=300, drafts=4, samples=4000, seed=5)
    assert report["passed"], report


def test_torch_rules_in_float32():
    report = tb.cross_validate(["rrs", "k-seq"], batch=4, vocab=5, samples=3000, seed=3,
                               dtype=torch.float32)
    assert report["passed"], report


class NaiveResample(tb.TorchRRS):
    """Deliberately biased: after a rejection it resamples p instead of the residual."""

    def prepare(self):
        self.r = [self.p] * (self.n + 1)


class AlwaysAccept(tb.TorchRule):
    """Deliberately wrong: always outputs the first draft."""

    def step(self, drafts, generator=None):
        return drafts[:, 0], torch.ones(drafts.shape[0], dtype=torch.bool)


@pytest.mark.parametrize("cls", [NaiveResample, AlwaysAccept])
def test_harness_fails_a_biased_rule(cls):
    report = tb.cross_validate([("rrs", cls)], batch=6, vocab=5, drafts=2, samples=4000, seed=11)
    assert not report["passed"] and not report["rules"][0]["passed"]
    assert report["rules"][0]["law_pvalue"] < 1e-3


def test_cli_cross_validate(capsys):
    code = main(["cross-validate", "--batch", "3", "--vocab", "5", "--samples", "2000",
                 "--rules", "rrs,optimal", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["passed"] and report["device"] == "cpu"
    keys = {"rule", "acceptance_empirical", "acceptance_exact", "alpha_star", "law_pvalue", "passed"}
    assert all(keys <= r.keys() for r in report["rules"])
    assert main(["cross-validate", "--rules", "single"]) == 2
    assert main(["cross-validate", "--samples", "1"]) == 2


def test_cross_validate_is_the_audit_of_the_torch_rules():
    """One harness: cross_validate's law test and TV bound are mdtheory.audit's, same seed, same
    numbers."""
    report = tb.cross_validate(["rrs"], batch=3, vocab=5, samples=2000, seed=9)
    p, q = llm_pairs(np.random.default_rng(9), 3, 5)
    res = md.audit(tb.TorchRRS, p, q, 2, torch=True, samples=2000, seed=9, level=1e-4)
    row = report["rules"][0]
    assert row["law_pvalue"] == res.pvalue and row["tv_upper"] == res.tv_upper
    assert row["acceptance_empirical"] == res.acceptance and row["optimum_pvalue"] == res.optimum_pvalue
