"""The torch bridge on CPU: agreement with numpy, dtype/device, gradients, and the harness."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import mdtheory as md
from mdtheory._synthetic import llm_pairs
from mdtheory.cli import main

from .tolerances import FLOAT32, ROUNDING, SOLVER

torch = pytest.importorskip("torch")
tb = pytest.importorskip("mdtheory.torch_bridge")
from mdtheory.audit.crossval import cross_validate  # noqa: E402 - after torch is known present

# benchmarks/gpu_check.py names its device; otherwise CUDA joins the CPU where it is available
DEVICES = ["cpu"] + ([os.environ["MDTHEORY_TEST_DEVICE"]] if os.environ.get("MDTHEORY_TEST_DEVICE", "cpu")
                     != "cpu" else ["cuda"] if torch.cuda.is_available() else [])


def test_importing_mdtheory_does_not_import_torch():
    code = "import sys, mdtheory, mdtheory.cli, mdtheory.rules; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", ["sort", "select"])
@pytest.mark.parametrize("dtype,tol", [("float64", ROUNDING), ("float32", FLOAT32)])
def test_alpha_star_matches_numpy(device, dtype, tol, method):
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
                            torch.tensor(Q, dtype=dt, device=device), n, method)
        assert got.dtype == dt and got.device.type == device and got.shape == (32,)
        ref = np.array([md.alpha_star(p, q, n) for p, q in zip(P, Q, strict=True)])
        assert np.abs(got.cpu().double().numpy() - ref).max() <= tol
    single = tb.alpha_star(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]), 3, method)
    assert single.shape == () and single.item() == 0.0


@pytest.mark.parametrize("device", DEVICES)
def test_alpha_star_by_selection_is_the_sort_route(device, monkeypatch):
    """The selection route gives the sort route's value on LLM-like and softmax pairs up to V = 20000,
    p = q (every ratio in one bin), ratios beyond n and q = 0, n = 1..16; on the LLM-like pairs it
    sorts a small part of each row only."""
    rng = np.random.default_rng(17)
    P, Q = llm_pairs(rng, 6, 20_000)
    z = rng.normal(size=(4, 20_000)) * 2
    S, T = (np.exp(x) / np.exp(x).sum(1, keepdims=True) for x in (z, z + rng.normal(size=z.shape)))
    P, Q = np.vstack([P, S, P[:1]]), np.vstack([Q, T, P[:1]])
    Q[7, :5000] = 0.0
    Q[7] /= Q[7].sum()
    Pt, Qt = torch.tensor(P, device=device), torch.tensor(Q, device=device)
    for n in (1, 2, 4, 16):
        ref = tb.alpha_star(Pt, Qt, n, "sort").cpu().numpy()
        got = tb.alpha_star(Pt, Qt, n, "select").cpu().numpy()
        assert np.abs(got - ref).max() <= ROUNDING
        numpy_ref = [md.alpha_star(p, q, n) for p, q in zip(P, Q, strict=True)]
        assert np.abs(got - numpy_ref).max() <= ROUNDING
    sizes = []
    real_sort = torch.sort

    def sort(x, *args, **kw):
        sizes.append(x.shape[-1])
        return real_sort(x, *args, **kw)

    monkeypatch.setattr(torch, "sort", sort)
    assert tb.alpha_star(Pt[:6], Qt[:6], 4, "select").shape == (6,)
    assert sizes and max(sizes) < 20_000 // 10  # the LLM-like rows: a tenth of the row at most
    with pytest.raises(md.InvalidInputError, match="method must be one of"):
        tb.alpha_star(Pt, Qt, 4, "heap")


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


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("drafts", [2, 3])
def test_torch_rules_agree_with_exact_theory(drafts, device):
    report = cross_validate(batch=6, vocab=5, drafts=drafts, samples=3000, seed=drafts,
                               device=device)
    assert report["passed"], report
    assert {r["rule"] for r in report["rules"]} == set(tb.TORCH_RULES)


def test_torch_optimal_at_a_larger_vocabulary():
    """The schedule lookup on the device has no vocabulary limit (the set bitmask it replaced had 62)."""
    report = cross_validate(["optimal"], batch=4, vocab=300, drafts=4, samples=4000, seed=5)
    assert report["passed"], report


def test_torch_rules_in_float32():
    report = cross_validate(["rrs", "k-seq"], batch=4, vocab=5, samples=3000, seed=3,
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
    report = cross_validate([("rrs", cls)], batch=6, vocab=5, drafts=2, samples=4000, seed=11)
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
    report = cross_validate(["rrs"], batch=3, vocab=5, samples=2000, seed=9)
    p, q = llm_pairs(np.random.default_rng(9), 3, 5)
    res = md.audit(tb.TorchRRS, p, q, 2, torch=True, samples=2000, seed=9, level=1e-4)
    row = report["rules"][0]
    assert row["law_pvalue"] == res.pvalue and row["tv_upper"] == res.tv_upper
    assert row["acceptance_empirical"] == res.acceptance and row["optimum_pvalue"] == res.optimum_pvalue


# ------------------------------------------------------------------ khisti-lp and k-seq on the device
def _pairs(rng, B, V, conc=0.3):
    return (rng.dirichlet(np.full(V, conc), B) for _ in range(3))


@pytest.mark.parametrize("device", DEVICES)
def test_batched_flow_is_the_maximum_flow(device):
    """The batched simplex's flow value equals the numpy rule's max flow (numba); its flow is
    feasible."""
    from mdtheory.rules import khisti as K
    from mdtheory.torch_bridge.khisti import batched_max_flow

    rng = np.random.default_rng(0)
    for s in (2, 3, 5):
        a, b = K._pairs(s)
        B = 200
        d = rng.dirichlet(np.ones(s + 1), B)[:, :s] * rng.random((B, 1))
        d[rng.random((B, s)) < 0.2] = 0.0
        m = rng.dirichlet(np.full(a.size, 0.5), B) * rng.random((B, 1))
        w, value, done = batched_max_flow(*(torch.tensor(x, device=device) for x in (d, m, a, b)))
        w, value = w.cpu().numpy(), value.cpu().numpy()
        assert done.all() and (w >= 0).all() and (w <= m).all()
        for i in range(B):
            fb, _ = K._stage_flow(d[i], m[i], a, b, 1e-300, 64 * (s * s + 1))
            fa = m[i] - fb  # the numpy flow's delivery: min(d, received) summed
            got = np.minimum(d[i], np.bincount(a, fa, s) + np.bincount(b, fb, s)).sum()
            assert abs(value[i] - got) <= ROUNDING


def test_stage_flow_is_the_lp_optimum():
    """The numpy rule's max flow (numba) reaches the stage LP's optimum (HiGHS) on every instance."""
    pytest.importorskip("highspy", reason="the stage LP is solved by HiGHS")
    from mdtheory.rules import khisti as K

    rng = np.random.default_rng(3)
    for _ in range(300):
        s = int(rng.integers(1, 8))
        a, b = K._pairs(s)
        pt, lt, rt = (rng.dirichlet(np.full(s + 2, c))[:s] for c in rng.choice([0.1, 0.5, 2.0], 3))
        pt[rng.random(s) < 0.2] = 0.0
        m, mu0 = lt[a] * rt[b] + lt[b] * rt[a], lt * rt + 0.01 * rng.random(s)
        fb, paths = K._stage_flow(np.maximum(pt - mu0, 0.0), m, a, b, 1e-300, 64 * (s * s + 1))
        assert paths < 64 * (s * s + 1)
        y = K.stage_lp(pt, mu0, m, a, b)
        got, ref = (np.minimum(pt, mu0 + np.bincount(a, ya, s) + np.bincount(b, m - ya, s)).sum()
                    for ya in (m - fb, y))
        assert got >= ref - SOLVER


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rest", ["bucket", "rank"])
def test_truncated_stage_matches_numpy(device, rest):
    """Same stage on the device and in numpy: the same top tokens, the same optimum
    sum min(p, mu), and mu the exact law of the stored stage (its V x V keep matrix, built here)."""
    from mdtheory.rules import khisti as K
    from mdtheory.torch_bridge.khisti import truncated_stage

    rng = np.random.default_rng(1)
    B, V = 24, 12
    for S in (1, 3, 5):
        P, L, Q = _pairs(rng, B, V)
        s = torch.as_tensor(rng.integers(1, S + 1, B), device=device)
        st, mu = truncated_stage(*(torch.tensor(x, device=device) for x in (P, L, Q)), s, S, rest)
        mu = mu.cpu().numpy()
        for i in range(B):
            k = int(s[i])
            stage, mu_np = K.truncated_stage(P[i], L[i], Q[i], k, rest)
            assert sorted(stage.top.tolist()) == sorted(st["top"][i, :k].tolist())
            assert abs(np.minimum(P[i], mu[i]).sum() - np.minimum(P[i], mu_np).sum()) <= ROUNDING
            top = st["top"][i, :k].cpu().numpy()
            torch_stage = K.Stage(top, st["block"][i, :k, :k].cpu().numpy(),
                                  st["score"][i].cpu().numpy().astype(np.int64), V)
            v = np.stack([torch_stage.keep_column(x) for x in range(V)], axis=1)
            joint = L[i][:, None] * Q[i][None, :]
            law = (joint * v).sum(1) + (joint * (1 - v)).sum(0)
            assert np.abs(law - mu[i]).max() <= ROUNDING


def test_rank_stage_is_the_dense_program():
    """rest="rank" is the third-party reading's program: the dense V x V stage (HiGHS) reaches the
    same optimum."""
    pytest.importorskip("highspy", reason="the dense reference stage solves its LP with HiGHS")
    from mdtheory.rules import khisti as K

    rng = np.random.default_rng(2)
    for _ in range(40):
        V = int(rng.integers(2, 12))
        s = int(rng.integers(1, V + 1))
        p, left, q = (rng.dirichlet(np.full(V, 0.5)) for _ in range(3))
        _, mu = K.truncated_stage(p, left, q, s, "rank")
        _, mu_dense = K.tournament_stage(p, left, q, s)
        assert abs(np.minimum(p, mu).sum() - np.minimum(p, mu_dense).sum()) <= SOLVER


@pytest.mark.parametrize("device", DEVICES)
def test_torch_khisti_is_the_numpy_program(device):
    """The device rule's default truncation is the numpy rule's on the CPU and at most DEVICE_S on
    a GPU; its final marginal is the exact law of its own stages (the numpy rule's enumeration over
    every draft tuple, run on the device's stages), which is lossless with acceptance sum min(p, mu).
    On the CPU each row's flow is the numpy rule's: the same marginal at V = 60 (s = 45)."""
    from mdtheory.rules import khisti as K
    from mdtheory.rules import make_rule
    from mdtheory.torch_bridge.khisti import DEVICE_S, default_size

    assert default_size(60, "cpu") == K.default_size(60) == 45
    assert default_size(60, "cuda") == DEVICE_S
    if device == "cpu":
        p_np, q_np = llm_pairs(np.random.default_rng(5), 6, 60)
        rule = tb.TorchKhisti(*(torch.tensor(x) for x in (p_np, q_np)), 3)
        for i in range(6):
            ref = make_rule("khisti-lp", p_np[i], q_np[i], 3)
            assert ref.s == 45 and np.abs(rule.mu[i].numpy() - ref.mu).max() <= ROUNDING
    p_np, q_np = llm_pairs(np.random.default_rng(4), 8, 6)
    p, q = (torch.tensor(x, device=device) for x in (p_np, q_np))
    rule = tb.TorchKhisti(p, q, 3)
    assert rule.unsolved == 0
    for i in range(8):
        ref = make_rule("khisti-lp", p_np[i], q_np[i], 3)
        stages = [K.Stage(st["top"][i][st["active"][i]].cpu().numpy(),
                          st["block"][i][st["active"][i]][:, st["active"][i]].cpu().numpy(),
                          st["score"][i].cpu().numpy().astype(np.int64), 6) for st in rule.stages]
        if bool(rule.first[i]):
            stages = [K.keep_first(6)] * 2
        ref.stages, ref.mu = stages, rule.mu[i].cpu().numpy()
        ref.accept_ratio, ref.res = K.speculative_step(ref.p, ref.mu)
        acceptance, law = ref.enumerate()
        assert np.abs(law - p_np[i]).max() <= ROUNDING
        assert abs(acceptance - np.minimum(p_np[i], ref.mu).sum()) <= ROUNDING
        assert acceptance >= 1 - 0.5 * np.abs(p_np[i] - q_np[i]).sum() - ROUNDING  # the guard


@pytest.mark.parametrize("device", DEVICES)
def test_torch_khisti_at_a_larger_vocabulary(device):
    """Chi-square of the output law at V = 300, n = 4, and a fixed s with the ranked rest."""
    report = cross_validate(["khisti-lp"], batch=4, vocab=300, drafts=4, samples=4000, seed=6,
                               device=device)
    assert report["passed"], report

    class Ranked(tb.TorchKhisti):
        s, rest = 4, "rank"

    report = cross_validate([("khisti-lp", Ranked)], batch=4, vocab=8, drafts=3, samples=4000,
                               seed=7, device=device)
    assert report["passed"], report  # against the numpy rule running the same program


def test_the_cross_validation_reference_runs_the_devices_truncation(monkeypatch):
    """On a GPU the default truncation is DEVICE_S, below the numpy rule's default: the exact
    acceptance the sampled one is tested against is the numpy rule's at that truncation, with the
    guard (run here on the CPU with the device's default size patched in)."""
    from mdtheory.torch_bridge import khisti

    monkeypatch.setattr(khisti, "default_size", lambda V, device: min(khisti.DEVICE_S, V))
    assert tb.TorchKhisti.numpy_keywords(300, "cpu") == {"s": khisti.DEVICE_S, "rest": "bucket",
                                                          "guard": True}
    report = cross_validate(["khisti-lp"], batch=4, vocab=300, drafts=4, samples=4000, seed=6)
    assert report["passed"], report


@pytest.mark.parametrize("device", DEVICES)
def test_torch_kseq_acceptance_is_the_numpy_rules(device):
    from mdtheory.rules import make_rule

    rng = np.random.default_rng(8)
    for V in (2, 7, 200):
        P, Q, _ = _pairs(rng, 16, V, 0.5)
        P[0] = Q[0]
        for n in (1, 2, 4, 8):
            rule = tb.TorchKSeq(torch.tensor(P, device=device), torch.tensor(Q, device=device), n)
            got = (1 - (1 - rule._beta(rule.rho)) ** n).cpu().numpy()
            ref = [make_rule("k-seq", p, q, n).exact_acceptance() for p, q in zip(P, Q, strict=True)]
            assert np.abs(got - ref).max() <= ROUNDING
            assert ((rule.rho >= 1) & (rule.rho <= n)).all()


def test_stage_bins_spread_over_lanes(monkeypatch):
    """The GPU's lane-spread bin sums give the same stage as plain bins (checked here on the CPU)."""
    from mdtheory.torch_bridge import khisti as TK

    P, L, Q = (torch.tensor(x) for x in _pairs(np.random.default_rng(9), 16, 40))
    s = torch.full((16,), 4)
    plain = TK.truncated_stage(P, L, Q, s, 4)[1]
    monkeypatch.setattr(TK, "_CPU_LANES", 16)
    assert (TK.truncated_stage(P, L, Q, s, 4)[1] - plain).abs().max() <= ROUNDING


@pytest.mark.parametrize("device", DEVICES)
def test_bucket_scores_agree_everywhere(device):
    """The sort-free score: numpy's exponent arithmetic, torch's (CPU) and torch.bucketize (GPU, and
    here on the CPU too) all count the edges below the key, edges themselves included."""
    from mdtheory.rules.khisti import BUCKET_EDGES, bucket_score
    from mdtheory.torch_bridge.khisti import bucket_score as torch_score

    rng = np.random.default_rng(10)
    keys = np.concatenate([rng.normal(size=5000) * np.exp(rng.normal(size=5000) * 20), BUCKET_EDGES,
                           np.nextafter(BUCKET_EDGES, 5), np.nextafter(BUCKET_EDGES, -5),
                           [0.0, -0.0, 5e-324, -5e-324, 1e-310, -1e-310, 2.0 ** -1022, -(2.0 ** -1022),
                            3.0, -3.0, 1e300, -1e300]])
    ref = np.searchsorted(BUCKET_EDGES, keys, side="left")
    assert (bucket_score(keys) == ref).all()
    t = torch.tensor(keys, device=device)
    assert (torch_score(t).cpu().numpy() == ref).all()
    edges = torch.tensor(BUCKET_EDGES, device=device)
    assert (torch.bucketize(t, edges).cpu().numpy() == ref).all()


def test_large_truncation_goes_to_highs(monkeypatch):
    """Beyond FLOW_S the stage is solved by HiGHS: the same optimum as the augmenting paths."""
    pytest.importorskip("highspy", reason="large truncations are solved by HiGHS")
    from mdtheory.rules import khisti as K

    rng = np.random.default_rng(11)
    p, left, q = (rng.dirichlet(np.ones(30)) for _ in range(3))
    for rest in ("bucket", "rank"):
        monkeypatch.setattr(K, "FLOW_S", 100)
        by_paths = np.minimum(p, K.truncated_stage(p, left, q, 20, rest)[1]).sum()
        monkeypatch.setattr(K, "FLOW_S", 8)
        by_highs = np.minimum(p, K.truncated_stage(p, left, q, 20, rest)[1]).sum()
        assert abs(by_paths - by_highs) <= SOLVER


# ------------------------------------------------------------------------ optimal, batched on the device
def _plan_cells(plan, b):
    """Row b of an optimal plan as {token: {cell position: length}}, read from the stored pieces."""
    t = {k: v[b].cpu().numpy() for k, v in vars(plan).items()}
    cells = {}
    for k, tok in enumerate(t["order"]):
        got = {k: t["keep"][k]} if t["keep"][k] > 0 else {}
        for j in range(t["first"][k], t["stop"][k]):
            c = (t["down_cell"] if t["up"][k] else t["up_cell"])[j]
            length = t["cum"][j + 1] - t["cum"][j]
            if length > 0:
                got[c] = got.get(c, 0.0) + length
        cells[int(tok)] = got
    return cells, t["rest"], t["length"]


def _candidate_law(cells, rest, length, drafts):
    """Exact law of the earliest draft of the tuple: on each stretch between cell ends every draft's
    time has a constant density, so the integrand is a polynomial of degree < n and Gauss-Legendre
    with n nodes integrates it exactly."""
    nodes, weights = np.polynomial.legendre.leggauss(len(drafts))
    ends = np.unique(np.concatenate([rest, rest - length, [0.0, 1.0]]))

    def density_and_cdf(tok, s):  # of 1 - time, in the cells' coordinates
        total = sum(cells[tok].values())
        dens, cdf = np.zeros_like(s), np.zeros_like(s)
        for c, ell in cells[tok].items():
            lo = rest[c] - length[c]
            dens += ell * ((s >= lo) & (s < rest[c])) / length[c]
            cdf += ell * np.clip((s - lo) / length[c], 0.0, 1.0)
        return dens / total, cdf / total

    law = {}
    for lo, hi in zip(ends[:-1], ends[1:], strict=True):
        s = 0.5 * (lo + hi) + 0.5 * (hi - lo) * nodes
        parts = [density_and_cdf(x, s) for x in drafts]
        for i, x in enumerate(drafts):
            f = parts[i][0].copy()
            for j in range(len(drafts)):
                if j != i:
                    f *= parts[j][1]
            law[x] = law.get(x, 0.0) + 0.5 * (hi - lo) * weights @ f
    return law


def _optimal_instances(rng):
    for V, n in [(2, 1), (2, 3), (3, 2), (3, 4), (4, 3), (5, 2), (5, 4), (4, 1)]:
        for case in range(4):
            p, q = rng.dirichlet(np.full(V, 0.6)), rng.dirichlet(np.full(V, 0.6))
            if case == 1:
                q = p.copy()  # alpha* = 1: the marginal must be p
            elif case == 2:
                p[0] = 0.0  # a token only the drafter proposes
                p /= p.sum()
            elif case == 3 and V > 2:
                q[1] = 0.0  # a token never drafted
                q /= q.sum()
            yield p, q, n


@pytest.mark.parametrize("device", DEVICES)
def test_optimal_plan_is_exact_by_enumeration(device):
    """The batched optimal rule on every draft tuple: the candidate's law (integrated exactly) sums to
    the plan's marginal mu over the tuples, the cells tile time and each token's pieces have total q,
    the speculative step then outputs p exactly, and its acceptance sum min(p, mu) is alpha*, the
    numpy optimal rule's exact acceptance."""
    from itertools import product

    from mdtheory.rules import make_rule
    from mdtheory.torch_bridge.optimal import optimal_plan

    for p, q, n in _optimal_instances(np.random.default_rng(12)):
        rule = tb.TorchOptimal(torch.tensor(p[None], device=device), torch.tensor(q[None], device=device), n)
        cells, rest, length = _plan_cells(rule.plan, 0)
        for tok in range(p.size):
            assert abs(sum(cells[tok].values()) - q[tok]) <= ROUNDING
        tiled = np.zeros(p.size)
        for got in cells.values():
            for c, ell in got.items():
                tiled[c] += ell
        assert np.abs(tiled - length).max() <= ROUNDING
        mu = rule.plan.mu[0].cpu().numpy()
        ratio, res = rule.ratio[0].cpu().numpy(), rule.res[0].cpu().numpy()
        marginal, output = np.zeros(p.size), np.zeros(p.size)
        for drafts in product(np.flatnonzero(q > 0), repeat=n):
            law = _candidate_law(cells, rest, length, [int(x) for x in drafts])
            weight = np.prod(q[list(drafts)])
            accept = np.zeros(p.size)
            for x, v in law.items():
                marginal[x] += weight * v
                accept[x] = v * ratio[x]
            output += weight * (accept + (1.0 - accept.sum()) * res)
        assert np.abs(marginal - mu).max() <= ROUNDING
        assert np.abs(output - p).max() <= ROUNDING
        acceptance = np.minimum(p, mu).sum()
        assert abs(acceptance - md.alpha_star(p, q, n)) <= ROUNDING
        assert abs(acceptance - make_rule("optimal", p, q, n).exact_acceptance()) <= ROUNDING
        direct = optimal_plan(torch.tensor(p[None]), torch.tensor(q[None]), n)
        # the same plan on the CPU: equal bits there, and within rounding from a GPU's sums
        assert (direct.mu - rule.plan.mu.cpu()).abs().max().item() <= (0.0 if device == "cpu" else ROUNDING)


@pytest.mark.parametrize("device", DEVICES)
def test_optimal_plan_has_the_numpy_cell_rules_law_given_the_drafts(device):
    """The device plan and the numpy optimal rule's cells (``realise="cells"``) are one construction:
    on every draft tuple the candidate's law integrated from the plan's pieces is the numpy rule's
    ``candidate_law``, so the numpy rule is the exact reference of the engine verifiers' laws (ties
    of q/p aside: instances without them)."""
    from itertools import product

    from mdtheory.rules.optimal import Optimal
    from mdtheory.torch_bridge.optimal import optimal_plan

    worst = 0.0
    for p, q, n in _optimal_instances(np.random.default_rng(16)):
        ratio = np.where(q > 0, q / np.where(p > 0, p, 1.0), 0.0)[q > 0]
        if np.unique(ratio).size < ratio.size:
            continue  # tied q/p: the two sorts may order the tied tokens' cells differently
        plan = optimal_plan(torch.tensor(p[None], device=device), torch.tensor(q[None], device=device), n)
        cells, rest, length = _plan_cells(plan, 0)
        rule = Optimal(p, q, n, normalize=True)
        assert np.abs(rule.marginal - plan.mu[0].cpu().numpy()).max() <= ROUNDING
        for drafts in product(np.flatnonzero(q > 0), repeat=n):
            law = _candidate_law(cells, rest, length, [int(x) for x in drafts])
            ref = rule.schedule.candidate_law(np.array(drafts))
            worst = max(worst, max(abs(law.get(x, 0.0) - ref[x]) for x in range(p.size)))
    assert worst <= 1e-11


@pytest.mark.parametrize("device", DEVICES)
def test_optimal_plan_at_large_vocabularies(device):
    """At V = 2000: every token's pieces have total q, no cell swaps more than its length, mu is a
    distribution and its acceptance is alpha* on LLM-like pairs, softmax pairs, p = q, tiny masses."""
    from mdtheory.torch_bridge.optimal import optimal_plan

    rng = np.random.default_rng(13)
    P, Q = llm_pairs(rng, 4, 2000)
    z = rng.normal(size=(4, 2000)) * 3
    S, T = (np.exp(x) / np.exp(x).sum(1, keepdims=True) for x in (z, z + rng.normal(size=z.shape)))
    P, Q = np.vstack([P, S, P[:1]]), np.vstack([Q, T, P[:1]])
    P[1, :500] *= 1e-290  # masses far below the rounding of a running sum
    Q[2, 1000:] = 0.0
    P, Q = P / P.sum(1, keepdims=True), Q / Q.sum(1, keepdims=True)
    for n in (1, 2, 4, 16):
        plan = optimal_plan(torch.tensor(P, device=device), torch.tensor(Q, device=device), n)
        mu = plan.mu.cpu().numpy()
        assert np.isfinite(mu).all() and (mu >= 0).all()
        assert np.abs(mu.sum(1) - 1).max() <= ROUNDING
        given = (plan.length - plan.keep).cpu().numpy()
        assert (given >= 0).all() and (plan.keep >= 0).all()
        pieces = (plan.cum[:, 1:] - plan.cum[:, :-1]).cpu().numpy()
        assert (pieces >= 0).all()
        np.testing.assert_allclose(pieces.sum(1) * 2, given.sum(1), rtol=0, atol=ROUNDING)
        got = np.minimum(P, mu).sum(1)
        ref = [md.alpha_star(p, q, n) for p, q in zip(P, Q, strict=True)]
        assert np.abs(got - ref).max() <= ROUNDING


@pytest.mark.parametrize("device", DEVICES)
def test_optimal_candidates_follow_the_plan(device):
    """The device sampler: the earliest draft's token, over 200,000 steps, has the plan's law mu
    (chi-square), on a row with swapped pieces."""
    from scipy.stats import chisquare

    from mdtheory.torch_bridge.optimal import optimal_plan

    p, q = llm_pairs(np.random.default_rng(14), 1, 12)
    n, steps = 4, 200_000
    plan = optimal_plan(torch.tensor(p, device=device), torch.tensor(q, device=device), n)
    assert int((plan.cum[0, 1:] > plan.cum[0, :-1]).sum()) > 0  # some pieces are swapped
    gen = torch.Generator(device=device).manual_seed(14)
    big = plan.repeat_rows(steps)
    drafts = tb.sample_drafts(torch.tensor(q, device=device).expand(steps, -1), n, gen)
    cand = drafts.gather(1, big.times(drafts, gen).argmax(1, keepdim=True)).squeeze(-1)
    counts = np.bincount(cand.cpu().numpy(), minlength=12)
    mu = plan.mu[0].cpu().numpy()
    assert (mu * steps >= 5).all()  # no sparse cell to pool
    expected, observed = mu * steps, counts
    assert chisquare(observed, expected * observed.sum() / expected.sum()).pvalue >= 1e-4


def test_optimal_plan_in_row_blocks_is_the_same(monkeypatch):
    """On the CPU the plan is built a block of rows at a time: the same tensors as in one piece."""
    from mdtheory.torch_bridge import optimal as TO

    P, Q = (torch.tensor(x) for x in llm_pairs(np.random.default_rng(15), 7, 50))
    whole = TO.optimal_plan(P, Q, 3)
    monkeypatch.setattr(TO, "CPU_CHUNK", 100)  # two rows a block
    blocks = TO.optimal_plan(P, Q, 3)
    assert vars(whole).keys() == vars(blocks).keys()
    assert all(torch.equal(vars(whole)[k], vars(blocks)[k]) for k in vars(whole))


def test_optimal_plan_with_torch_sorts_is_the_same(monkeypatch):
    """The device's route (torch.sort, as on a GPU) gives the plan of the CPU's numpy sorts (no ties
    in q/p here, so the orders agree)."""
    from mdtheory.torch_bridge import optimal as TO

    P, Q = (torch.tensor(x) for x in llm_pairs(np.random.default_rng(16), 5, 300))
    ref = TO.optimal_plan(P, Q, 4)
    monkeypatch.setattr(TO, "_NUMPY_SORT_ON_CPU", False)
    got = TO.optimal_plan(P, Q, 4)
    assert all(torch.equal(vars(ref)[k], vars(got)[k]) for k in vars(ref))


def _sampler_law(plan, b, n):
    """Exact law (mpmath, 40 digits) of the candidate as :meth:`OptimalPlan.times` samples row b:
    a draft keeps its own cell with probability keep / q, else takes a piece in proportion to its span
    of ``cum``; its time is uniform on the chosen cell; the earliest of n iid drafts is the candidate.
    Between cell ends every draft's time has a constant density g, so the survival S falls linearly
    and a stretch gives the earliest draft to token x with probability q_x f_x / g (S_a^n - S_b^n)."""
    import mpmath as mp

    mp.mp.dps = 40
    t = {k: v[b].cpu().tolist() for k, v in vars(plan).items()}
    V = len(t["order"])
    start = [1 - mp.mpf(r) for r in t["rest"]]  # time at which each cell starts
    share = []  # (position, cell, probability of the cell given the position's token)
    for k in range(V):
        qk = mp.mpf(t["length"][k])
        if qk == 0:
            continue
        lo, hi = t["first"][k], t["stop"][k]
        own = mp.mpf(1) if hi <= lo else min(mp.mpf(t["keep"][k]) / qk, 1)
        share.append((k, k, own))
        spans = [(j, mp.mpf(t["cum"][j + 1]) - mp.mpf(t["cum"][j])) for j in range(lo, hi)]
        total = sum(s for _, s in spans)
        if spans and total == 0:  # pieces of no length: the search lands on the last one
            spans, total = [(spans[-1][0], mp.mpf(1))], mp.mpf(1)
        for j, s in spans:
            cell = (t["down_cell"] if t["up"][k] else t["up_cell"])[j]
            share.append((k, cell, (1 - own) * s / total))
    ends = sorted({mp.mpf(0), mp.mpf(1)} | set(start)
                  | {start[c] + mp.mpf(t["length"][c]) for c in range(V)})
    law, S = [mp.mpf(0)] * V, mp.mpf(1)
    for a, z in zip(ends[:-1], ends[1:], strict=True):
        mid, f = (a + z) / 2, [mp.mpf(0)] * V
        for k, c, w in share:
            width = mp.mpf(t["length"][c])
            if width > 0 and start[c] <= mid < start[c] + width:
                f[k] += mp.mpf(t["length"][k]) * w / width
        g = sum(f)
        if g > 0:
            drop = S ** n - max(S - g * (z - a), 0) ** n
            for k in range(V):
                law[t["order"][k]] += f[k] / g * drop
        S -= g * (z - a)
    return law


def test_optimal_rule_is_exact_at_huge_draft_counts():
    """At n up to 10^9 the cells' G-masses add up to one (the first cell starts at time 0 exactly and
    the plan's mu sums to one), and the rule's output law, integrated exactly from the plan as the
    sampler reads it, is p: a start off by one rounding would move the law by n times that."""
    rng = np.random.default_rng(4)
    p, q = rng.dirichlet(np.full(40, 0.5)), rng.dirichlet(np.full(40, 0.5))
    for n in (10 ** 4, 10 ** 6, 10 ** 9):
        rule = tb.TorchOptimal(torch.tensor(p[None]), torch.tensor(q[None]), n)
        assert rule.plan.rest[0, 0].item() == 1.0
        assert abs(rule.plan.mu.sum().item() - 1.0) <= ROUNDING
        law = _sampler_law(rule.plan, 0, n)
        ratio, res = rule.ratio[0].tolist(), rule.res[0].tolist()
        accept = sum(law[x] * ratio[x] for x in range(40))
        output = np.array([float(law[x] * ratio[x] + (1 - accept) * res[x]) for x in range(40)])
        assert abs(float(sum(law)) - 1.0) <= ROUNDING
        assert np.abs(output - p).sum() / 2 <= SOLVER
        assert abs(float(accept) - md.alpha_star(p, q, n)) <= ROUNDING


BAD_PAIRS = {
    "no drafts": ((0.2, 0.3, 0.5), (0.5, 0.25, 0.25), 0, md.InvalidInputError, "at least 1"),
    "drafts not an integer": ((0.2, 0.3, 0.5), (0.5, 0.25, 0.25), 2.0, md.InvalidInputError,
                              "must be an integer"),
    "q all zero": ((0.2, 0.3, 0.5), (0.0, 0.0, 0.0), 2, md.InvalidDistributionError,
                   "a row of q sums"),
    "NaN in p": ((float("nan"), 0.5, 0.5), (0.5, 0.25, 0.25), 2, md.InvalidDistributionError,
                 "p has a non-finite entry"),
    "negative q": ((0.2, 0.3, 0.5), (0.75, -0.25, 0.5), 2, md.InvalidDistributionError,
                   "q has a negative entry"),
    "shapes differ": ((0.2, 0.3, 0.5), (0.5, 0.5), 2, md.InvalidDistributionError,
                      r"p has shape \(1, 3\) but q has \(1, 2\)"),
}


@pytest.mark.parametrize("rule", sorted(tb.TORCH_RULES))
@pytest.mark.parametrize("case", sorted(BAD_PAIRS))
def test_torch_rules_refuse_bad_input_in_one_line(rule, case):
    """Every batched rule refuses what alpha_star refuses, with the same named error, at
    construction (nothing silently NaN)."""
    p, q, n, error, message = BAD_PAIRS[case]
    P, Q = torch.tensor([p], dtype=torch.float64), torch.tensor([q], dtype=torch.float64)
    with pytest.raises(error, match=message) as got:
        tb.TORCH_RULES[rule](P, Q, n)
    assert "\n" not in str(got.value)
    with pytest.raises(error, match=message.replace(r"\(1, 3\)", r"\(3,\)").replace(r"\(1, 2\)", r"\(2,\)")):
        tb.alpha_star(P[0], Q[0], n)


@pytest.mark.parametrize("rule", sorted(tb.TORCH_RULES))
def test_torch_rules_check_their_drafts(rule):
    """Every batched rule's step refuses drafts of another shape or dtype, or an id out of range,
    with InvalidInputError naming it (never a raw torch error, never extra drafts silently used), and
    takes int32 ids as the same int64 ones."""
    P = torch.tensor([[0.2, 0.3, 0.5], [0.5, 0.25, 0.25]], dtype=torch.float64)
    Q = torch.tensor([[0.3, 0.3, 0.4], [0.2, 0.4, 0.4]], dtype=torch.float64)
    prepared = tb.TORCH_RULES[rule](P, Q, 2)
    good = torch.tensor([[0, 1], [2, 2]])
    cases = {
        r"drafts\[1, 1\] = 3 is not a token id in 0 \.\. 2": torch.tensor([[0, 1], [2, 3]]),
        r"drafts\[0, 0\] = -1 is not a token id": torch.tensor([[-1, 1], [2, 2]]),
        rf"{rule} takes drafts of shape \(B, n\) = \(2, 2\); got shape \(2, 3\)":
            torch.tensor([[0, 1, 1], [2, 2, 2]]),
        r"got shape \(1, 2\)": good[:1],
        r"got shape \(2,\)": good[:, 0],
        "integer torch tensor of token ids, got a tensor of dtype torch.float64": good.double(),
        "got a tensor of dtype torch.bool": good > 0,
        "got list": good.tolist(),
    }
    for message, drafts in cases.items():
        with pytest.raises(md.InvalidInputError, match=message):
            prepared.step(drafts, torch.Generator().manual_seed(0))
    wide = prepared.step(good, torch.Generator().manual_seed(1))
    narrow = prepared.step(good.int(), torch.Generator().manual_seed(1))
    assert all(torch.equal(a, b) for a, b in zip(wide, narrow, strict=True))


@pytest.mark.parametrize("rule", sorted(tb.TORCH_RULES))
def test_torch_rules_take_rows_only(rule):
    p = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    with pytest.raises(md.InvalidDistributionError, match=r"p has shape \(3,\); a batched rule"):
        tb.TORCH_RULES[rule](p, p, 2)
    with pytest.raises(md.InvalidDistributionError, match="p must be a floating-point torch tensor"):
        tb.TORCH_RULES[rule]([[0.2, 0.3, 0.5]], p[None], 2)


@pytest.mark.parametrize("method", ["auto", "sort", "select"])
def test_mixed_dtypes_work_as_the_wider_one(method):
    """float32 p with float64 q: every method of alpha_star and every rule works in float64, with
    the values of the float64 pair."""
    rng = np.random.default_rng(22)
    P, Q = (torch.tensor(rng.dirichlet(np.full(6, 0.7), size=3)) for _ in range(2))
    P32 = P.float()
    wide = P32.double()
    got = tb.alpha_star(P32, Q, 3, method)
    assert got.dtype == torch.float64
    assert torch.equal(got, tb.alpha_star(wide, Q, 3, method))
    assert torch.equal(tb.alpha_star(Q, P32, 3, method), tb.alpha_star(Q, wide, 3, method))
    if method == "auto":
        for name, cls in tb.TORCH_RULES.items():
            mixed, same = cls(P32, Q, 3), cls(wide, Q, 3)
            assert mixed.p.dtype == mixed.q.dtype == torch.float64, name
            gen_a, gen_b = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
            drafts = tb.sample_drafts(Q, 3, torch.Generator().manual_seed(2))
            for a, b in zip(mixed.step(drafts, gen_a), same.step(drafts, gen_b), strict=True):
                assert torch.equal(a, b), name
