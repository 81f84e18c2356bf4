"""Audits of verifiers in the engines' contracts: the reference examples' verdicts, their exact laws
tied to the torch code, malformed outputs as verdicts, limits, the command line and its JSON."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mdtheory as md  # noqa: E402
from mdtheory.audit.statistics import law_test  # noqa: E402
from mdtheory.audit.verifier import load_target  # noqa: E402
from mdtheory.blocks import random_instance, sun_toy  # noqa: E402
from mdtheory.blocks.trees import DraftTree, tree_samplings  # noqa: E402
from mdtheory.engines import audit as A  # noqa: E402
from mdtheory.engines import contracts as C  # noqa: E402
from mdtheory.errors import InvalidInputError, ProblemTooLargeError, VerifierTimeoutError  # noqa: E402

from .cli_helpers import run_main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "verifiers" / "engines"
INSTANCES = {"toy": sun_toy(), "random:3:1": random_instance(3, 1)}


def example(name: str, what: str = "verify"):
    return load_target(f"{EXAMPLES / name}.py:{what}")


# ---------------------------------------------------------------------------------------- verdicts
#: (example, contract, tree or L, sampling, verdict) at seed 0 with the default sample sizes; "top":
#: deterministic drafts, no draft probabilities passed.
CASES = [
    ("chain_rejection", "chain", 2, "iid", "passed"),
    ("chain_block_verification", "chain", 2, "iid", "passed"),
    ("chain_block_verification", "chain", 2, "top", "passed"),
    ("chain_deterministic_drafts", "chain", 2, "iid", "passed"),
    ("chain_deterministic_drafts", "chain", 2, "top", "passed"),
    ("chain_block_ignores_draft_probs", "chain", 2, "iid", "lossy"),
    ("chain_block_ignores_draft_probs", "chain", 2, "top", "lossy"),
    ("chain_ensemble", "chain", 2, "iid", "lossy"),
    ("tree_target_only", "tree", (2, 2), "top", "passed"),
    ("tree_target_only", "tree", (2, 2), "iid", "passed"),
    ("tree_target_only", "tree", (2, 2), "without-replacement", "passed"),
    ("tree_target_only_threshold", "tree", (2, 2), "top", "lossy"),
    ("tree_target_only_threshold", "tree", (2, 2), "iid", "lossy"),
    ("tree_target_only_threshold", "tree", (2, 2), "without-replacement", "lossy"),
    ("tree_siblings_unchanged_parent", "tree", (2, 2), "iid", "lossy"),
]


def _audit(name, contract, shape, sampling, instance, **kw):
    f = example(name)
    if contract == "chain":
        return md.audit_chain(f, *INSTANCES[instance], shape, deterministic=sampling == "top", **kw)
    return md.audit_tree(f, *INSTANCES[instance], shape, sampling=sampling, **kw)


@pytest.mark.parametrize("instance", ["toy", pytest.param("random:3:1", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name,contract,shape,sampling,verdict", CASES)
def test_each_example_gets_its_verdict(name, contract, shape, sampling, verdict, instance):
    r = _audit(name, contract, shape, sampling, instance)
    assert r.verdict == verdict, (r.verdict, r.pvalue, r.tv)
    assert r.lossless == (verdict == "passed") and r.violations == {}
    assert r.deterministic == (sampling == "top") and r.sampling == sampling
    assert r.contract == contract and r.calls >= 1 and r.samples >= 15_000
    lo, hi = r.block_efficiency_ci95
    assert lo <= r.block_efficiency <= hi and 1 <= r.block_efficiency <= r.length + 1
    if verdict == "passed":  # a lossless verifier stays below the optimum for its drafts
        assert r.optimum is not None and lo <= r.optimum + 1e-9


@pytest.mark.parametrize("name,contract", [("chain_rejection", "chain"),
                                           ("tree_siblings_unchanged_parent", "tree")])
def test_a_verifier_that_needs_draft_probabilities_is_invalid_without_them(name, contract):
    r = _audit(name, contract, 2 if contract == "chain" else (2, 2), "top", "toy")
    reason = "raised ValueError: " + ("standard chain rejection needs draft_probs" if contract == "chain"
                                      else "sibling tests need draft_probs")
    assert r.verdict == "invalid" and list(r.violations) == [reason] and r.calls == 1


def test_deterministic_drafts_are_the_top_tokens_and_pass_no_draft_probabilities():
    seen = []

    def spy(ids, q, p, gen):
        seen.append((q, ids.unique(dim=0).tolist()))
        return _chain_ok(ids, q, p, gen)

    target, draft = random_instance(4, 3)
    md.audit_chain(spy, target, draft, 2, deterministic=True, samples=100)
    top1 = int(np.argmax(draft(())))
    assert seen == [(None, [[top1, int(np.argmax(draft((top1,))))]])]
    r = md.audit_tree(_tree_spy(seen), target, draft, (2, 1), deterministic=True, samples=100)
    assert r.sampling == "top" and r.deterministic
    kids = np.argsort(-draft(()), kind="stable")[:2].tolist()
    assert seen[-1] == (None, [0] + kids + [int(np.argmax(draft((y,)))) for y in kids])


def _tree_spy(seen):
    def spy(cand, nt, ns, p, q, gen):
        seen.append((q, cand.unique(dim=0).tolist()[0]))
        out = torch.full((cand.shape[0], 3), -1)
        out[:, 0] = torch.multinomial(p[:, 0], 1, generator=gen)[:, 0]
        return out
    return spy


@pytest.mark.slow
def test_siblings_against_an_unchanged_parent_are_caught_without_replacement_on_random_laws():
    assert _audit("tree_siblings_unchanged_parent", "tree", (2, 2), "without-replacement",
                  "random:3:1").verdict == "lossy"


def test_block_verification_reaches_the_single_draft_optimum():
    """Block verification is optimal for one draft (Sun et al.): its E|B| interval holds the optimum."""
    for laws in INSTANCES.values():
        r = md.audit_chain(example("chain_block_verification"), *laws, 2, samples=60_000, seed=3)
        lo, hi = r.block_efficiency_ci95
        assert lo <= r.optimum <= hi
        exact = md.audit_block(example("chain_block_verification", "law"), *laws, 1, 2, exact=True)
        assert exact.block_efficiency == pytest.approx(r.optimum, abs=1e-9)


# ---------------------------------------------------------------------------------------- exact laws
def _draft_arrays(tree: DraftTree, draft, count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [tree.sample(draft, rng) for _ in range(count)]


#: Tree examples with sampled children are checked in the slow tier (their Python loop over nodes
#: makes 20,000 calls' worth of rows the costliest case); chains and top trees in both.
EXACT = [pytest.param(name, contract, shape, sampling,
                      marks=[pytest.mark.slow] if contract == "tree" and sampling != "top" else [])
         for name, contract, shape, sampling, _ in CASES]


def point_mass(draft):
    """Top chains as a draft law: the point mass at the draft's most likely token, which is what a
    chain verifier without draft probabilities reads (q one-hot at the drafted token)."""
    return lambda ctx: np.eye(len(draft(ctx)))[int(np.argmax(draft(ctx)))]


@pytest.mark.parametrize("name,contract,shape,sampling", EXACT)
def test_the_law_forms_are_the_torch_codes_law(name, contract, shape, sampling):
    """Each example's ``law`` (used for its exact TV) is the law of its torch ``verify``: on fixed
    drafts, 20,000 calls' outputs pass a chi-square test against it (on top chains with the draft
    read as the point mass the verifier sees)."""
    target, draft = INSTANCES["random:3:1"]
    branching = (1,) * shape if contract == "chain" else shape
    tree = DraftTree(branching, sampling)
    layout = C.tree_layout(tree)
    f, law = example(name), example(name, "law")
    det = sampling == "top"
    P = A._Tables(A._Law(target, "target", ()), 3, tree.length)
    Q = None if det else A._Tables(A._Law(draft, "draft", ()), 3, tree.length)
    draws = A._Draws(torch, tree, layout, P, Q, "cpu", torch.float64)
    read = point_mass(draft) if det and contract == "chain" else draft
    gen = torch.Generator().manual_seed(5)
    for drafts in _draft_arrays(tree, draft, 1 if det else 3, seed=len(name)):
        B = 20_000
        args, inputs = draws.inputs(contract, np.broadcast_to(drafts, (B, *drafts.shape)), gen)
        assert (args[1] is None if contract == "chain" else args[4] is None) == det
        out = f(*args)
        faults = (C.chain_output_faults if contract == "chain" else C.tree_output_faults)(out, inputs)
        assert not faults.bad.any()
        blocks = [tuple(row[:c].tolist()) for row, c in zip(faults.tokens, faults.count, strict=True)]
        exact = law(target, read, drafts)
        keys = sorted(exact)
        assert abs(sum(exact.values()) - 1) < 1e-9 and set(blocks) <= set(keys)
        counts = np.array([blocks.count(k) for k in keys])
        assert law_test(counts, np.array([exact[k] for k in keys])) > 1e-3


#: Exact TV of lossy examples (the example's law over every draw of the drafts), papers/engines.md.
EXACT_TV = {
    ("chain_block_ignores_draft_probs", "iid", "toy"): 0.106996,
    ("chain_block_ignores_draft_probs", "top", "toy"): 0.271605,
    ("chain_ensemble", "iid", "toy"): 0.166667,
    ("chain_ensemble", "iid", "random:3:1"): 0.329573,
    ("tree_target_only_threshold", "iid", "toy"): 0.119342,
    ("tree_target_only_threshold", "top", "random:3:1"): 0.204454,
    ("tree_siblings_unchanged_parent", "iid", "toy"): 0.123457,
    ("tree_siblings_unchanged_parent", "without-replacement", "random:3:1"): 0.209181,
}


@pytest.mark.parametrize("name,sampling,instance", [
    pytest.param(*key, marks=[] if key[2] == "toy" else [pytest.mark.slow]) for key in EXACT_TV])
def test_exact_tvs_agree_with_the_sampled_audit(name, sampling, instance):
    contract = "chain" if name.startswith("chain") else "tree"
    shape = 2 if contract == "chain" else (2, 2)
    target, draft = INSTANCES[instance]
    tree = DraftTree((1, 1) if contract == "chain" else shape, sampling)
    read = point_mass(draft) if sampling == "top" and contract == "chain" else draft
    exact = md.audit_block(example(name, "law"), target, read, tree=tree, exact=True)
    assert exact.verdict == "lossy"
    assert exact.tv == pytest.approx(EXACT_TV[name, sampling, instance], abs=5e-7)
    sampled = _audit(name, contract, shape, sampling, instance, samples=30_000, seed=1)
    assert sampled.verdict == "lossy"
    assert abs(sampled.tv - exact.tv) < 0.02 and exact.tv <= sampled.tv_upper
    lo, hi = sampled.block_efficiency_ci95  # a 95% interval, widened to 3.5 standard errors
    assert abs(sampled.block_efficiency - exact.block_efficiency) <= (hi - lo) / 2 * 3.5 / 1.96


@pytest.mark.parametrize("instance", list(INSTANCES))
def test_one_step_of_the_ensemble_rule_loses_one_minus_w_times_the_drafts_distance(instance):
    """At L = 1 the ensemble rule is rejection sampling of v = w p + (1 - w) q, so the first token
    has law v and the completed law's TV from p is TV(v, p) = (1 - w) TV(p, q): an independent check
    of the enumeration."""
    target, draft = INSTANCES[instance]
    law = example("chain_ensemble", "law")
    w = sys.modules[law.__module__].WEIGHT
    exact = md.audit_block(law, target, draft, 1, 1, exact=True)
    p, q = target(()), draft(())
    assert exact.tv == pytest.approx((1 - w) * 0.5 * np.abs(p - q).sum(), abs=1e-12)


# ---------------------------------------------------------------------------------------- malformed outputs
def _chain_ok(ids, q, p, gen):
    B, k = ids.shape
    out = torch.full((B, k + 1), -1, dtype=torch.long)
    out[:, 0] = torch.multinomial(p[:, 0], 1, generator=gen)[:, 0]
    return out, torch.zeros(B, dtype=torch.long)


def off_path(ids, q, p, gen):
    out, m = _chain_ok(ids, q, p, gen)
    out[:, 1] = 1 - ids[:, 0]  # claims one accepted draft, not the drafted token
    out[:, 0], out[:, 1] = out[:, 1].clone(), out[:, 0].clone()
    return out, m + 1


def padding_in_the_middle(ids, q, p, gen):
    out, m = _chain_ok(ids, q, p, gen)
    out[:, 2] = 0
    return out, m


def wrong_length(ids, q, p, gen):
    out, m = _chain_ok(ids, q, p, gen)
    return out, m + 2


def wrong_dtype(ids, q, p, gen):
    out, m = _chain_ok(ids, q, p, gen)
    return out.double(), m


def wrong_shape(ids, q, p, gen):
    out, m = _chain_ok(ids, q, p, gen)
    return out[:, :2], m


def raises(ids, q, p, gen):
    raise IndexError("index 3 is out of bounds")


def some_rows_bad(ids, q, p, gen):
    out, m = _chain_ok(ids, q, p, gen)
    out[5::1000, 2] = 0  # a token after the padding, in a few rows only
    return out, m


@pytest.mark.parametrize("f,reason", [
    (off_path, "a token not on the accepted path: output 0 is not draft 0"),
    (padding_in_the_middle, "padding in the middle: a token after a -1"),
    (wrong_length, "emitted_draft_token_num 2 with 1 token before the padding (wrong length)"),
    (wrong_dtype, "output_token_ids is torch.float64, not torch.int64"),
    (wrong_shape, "output_token_ids has shape [1000, 2], not [1000, 3]"),
    (raises, "raised IndexError: index 3 is out of bounds"),
])
def test_a_malformed_output_is_the_verdict_invalid(f, reason):
    target, draft = sun_toy()
    r = md.audit_chain(f, target, draft, 2, samples=3000, batch=1000)
    assert r.verdict == "invalid" and not r.lossless
    assert list(r.violations) == [reason]
    assert r.violation_examples[0]["reason"] == reason and r.violation_examples[0]["sample"] == 0
    if f is raises:  # a verifier that raises is not called again
        assert r.calls == 1 and r.violations[reason] == 1000 and r.invalid_mass == 1.0
    else:
        assert r.calls == 3 and r.violations[reason] == 3000


def test_the_bad_rows_are_counted_and_shown_with_their_drafts():
    target, draft = sun_toy()
    r = md.audit_chain(some_rows_bad, target, draft, 2, samples=3000, batch=1000)
    assert r.verdict == "invalid" and r.violations == {"padding in the middle: a token after a -1": 3}
    ex = r.violation_examples[0]
    assert ex["sample"] == 5 and len(ex["drafts"]) == 1 and len(ex["drafts"][0]) == 2
    assert ex["output"]["output_token_ids"][1:] == [-1, 0] and ex["output"]["emitted_draft_token_num"] == 0
    assert [e["sample"] for e in r.violation_examples] == [5, 1005, 2005]


def tree_emits_a_root_sibling(cand, nt, ns, p, q, gen):
    out = torch.full((cand.shape[0], 3), -1)
    out[:, 0] = cand[:, 1]
    out[:, 1] = cand[:, 2]  # node 2 is node 1's sibling, not its child
    out[:, 2] = 0
    return out


def test_a_tree_output_off_the_tree_is_invalid():
    target, draft = random_instance(3, 2)
    r = md.audit_tree(tree_emits_a_root_sibling, target, draft, (2, 2), samples=2000)
    assert r.verdict == "invalid"
    (reason, count), = r.violations.items()
    assert reason == "a token not on the accepted path: no path of nodes spells the first 2 tokens"
    assert 0 < count < 2000  # rows whose two root children hold one token are valid


# ---------------------------------------------------------------------------------------- the run
def test_calls_are_large_batches_and_inputs_follow_the_contract():
    seen = []

    def spy(ids, q, p, gen):
        seen.append((tuple(ids.shape), ids.dtype, tuple(q.shape), tuple(p.shape), p.dtype, gen.device.type))
        return _chain_ok(ids, q, p, gen)

    r = md.audit_chain(spy, *random_instance(3, 1), 2, samples=25_000)
    assert r.calls == 2 and r.batch == 16_384
    assert seen == [((16_384, 2), torch.int64, (16_384, 2, 3), (16_384, 3, 3), torch.float64, "cpu"),
                    ((8_616, 2), torch.int64, (8_616, 2, 3), (8_616, 3, 3), torch.float64, "cpu")]
    r = md.audit_chain(spy, *random_instance(3, 1), 2, samples=100, dtype="float32", batch=40)
    assert seen[-1][4] == torch.float32 and r.calls == 3 and r.dtype == "float32"


def test_the_tensors_hold_the_laws_at_every_node():
    target, draft = random_instance(3, 4)
    checked = []

    def spy(cand, nt, ns, p, q, gen):
        inp = C.check_tree_inputs(cand, nt, ns, p, q, gen)
        tree, drafts = C.links_to_drafts(cand, nt, ns)
        assert tree.branching == (2, 1)
        for b in range(3):
            for j in range(inp.nodes):
                path, node = [], j
                while node > 0:
                    path.append(int(cand[b, node]))
                    node = int(inp.parent[b, node])
                ctx = tuple(reversed(path))
                assert torch.allclose(p[b, j], torch.tensor(target(ctx)))
                assert torch.allclose(q[b, j], torch.tensor(draft(ctx)))
        checked.append(drafts.shape)
        out = torch.full((cand.shape[0], 3), -1)
        out[:, 0] = torch.multinomial(p[:, 0], 1, generator=gen)[:, 0]
        return out

    r = md.audit_tree(spy, target, draft, (2, 1), samples=200)
    assert checked == [(200, 2, 2)] and r.violations == {} and r.block_efficiency == 1.0


def test_a_verifier_that_writes_into_its_inputs_cannot_move_the_checks():
    def scribbles(ids, q, p, gen):
        out, m = _chain_ok(ids, q, p, gen)
        out[:, 1] = out[:, 0]
        out[:, 0] = ids[:, 0]
        ids.fill_(0)  # the audit checks against its own copy
        return out, m + 1

    r = md.audit_chain(scribbles, *random_instance(3, 1), 2, samples=2000)
    assert r.verdict in ("lossy", "passed", "inconclusive") and r.violations == {}


@pytest.mark.parametrize("sampling", tree_samplings())
def test_draft_trees_drawn_in_batches_have_the_trees_law(sampling):
    """DraftTree.sample_batch draws each tree with the law DraftTree.enumerate lists, for every
    registered tree sampling (its model's node_sample_batch)."""
    target, draft = random_instance(3, 6)
    for branching in ((2, 2), (2, 1), (1, 2)):
        tree = DraftTree(branching, sampling)
        law = {d.tobytes(): w for d, w in tree.enumerate(draft)}
        got = tree.sample_batch(draft, np.random.default_rng(1), 50_000)
        keys = list(law)
        index = {k: i for i, k in enumerate(keys)}
        counts = np.bincount([index[x.tobytes()] for x in got], minlength=len(keys))
        assert counts.sum() == 50_000 and law_test(counts, np.array([law[k] for k in keys])) > 1e-3


def test_a_hanging_verifier_is_interrupted():
    def hangs(ids, q, p, gen):
        time.sleep(5)

    with pytest.raises(VerifierTimeoutError, match=r"chain audit of .*hangs \(batches of 100 problems\): the "
                                                   r"verifier call on drafts \[\[\d, \d\]\] did not return"):
        md.audit_chain(hangs, *sun_toy(), 2, samples=100, max_seconds=0.5)


def test_limits_are_estimated_before_any_call():
    calls = []

    def counted(ids, q, p, gen):
        calls.append(1)
        return _chain_ok(ids, q, p, gen)

    with pytest.raises(ProblemTooLargeError, match=r"estimated .* of memory, over the limit of 1 KiB; lower"):
        md.audit_chain(counted, *sun_toy(), 2, samples=1000, max_bytes=1024)
    with pytest.raises(ProblemTooLargeError, match=r"problems of 3 nodes over V = 2.*estimated"):
        md.audit_chain(counted, *sun_toy(), 2, samples=1_000_000, max_seconds=0.01)
    with pytest.raises(ProblemTooLargeError, match=r"V\^\(L\+1\) = 2\^17"):
        md.audit_chain(counted, *sun_toy(), 16)
    assert calls == []


@pytest.mark.parametrize("kw,match", [
    ({"length": 0}, "length must be an integer >= 1, got 0"),
    ({"samples": 5}, r"samples must be an integer in 10..20000000, got 5"),
    ({"seed": -1}, "seed must be an integer >= 0"),
    ({"batch": 0}, "batch must be an integer >= 1, got 0"),
    ({"dtype": "float16"}, "dtype must be float64 or float32, got 'float16'"),
    ({"deterministic": 1}, "deterministic must be True or False, got 1"),
    ({"device": "tpu"}, "unknown device 'tpu'"),
    ({"level": 1.5}, r"the level must be in \(0, 1\)"),
])
def test_bad_options_are_named(kw, match):
    args = {"length": 2, **kw}
    with pytest.raises(InvalidInputError, match=match):
        md.audit_chain(_chain_ok, *sun_toy(), **args)


def test_tree_options_are_named():
    with pytest.raises(InvalidInputError, match="unknown sampling 'wor2'"):
        md.audit_tree(_chain_ok, *sun_toy(), (2, 2), sampling="wor2")
    with pytest.raises(InvalidInputError, match="draft's top tokens, not without-replacement children"):
        md.audit_tree(_chain_ok, *sun_toy(), DraftTree((2, 2), "without-replacement"), deterministic=True)
    with pytest.raises(InvalidInputError, match="branching must be integers >= 1"):
        md.audit_tree(_chain_ok, *sun_toy(), (2, 0))


# ---------------------------------------------------------------------------------------- command line
def _cli(capsys, *argv):
    return run_main(capsys, "audit", *map(str, argv))


def test_cli_passes_a_lossless_chain(capsys):
    code, out, _ = _cli(capsys, "--engine", "chain", f"{EXAMPLES}/chain_rejection.py:verify", "-L", 2,
                        "--instance", "toy")
    assert code == 0
    assert "p-value 0.178 at level 0.01 -> passed: no evidence of loss" in out
    assert "optimum for these drafts 2.2222" in out


def test_cli_rejects_a_lossy_tree_and_exits_1(capsys):
    code, out, _ = _cli(capsys, "--engine", "tree", f"{EXAMPLES}/tree_siblings_unchanged_parent.py:verify",
                        "--tree", "2,2", "--instance", "random:3:1")
    assert code == 1 and "REJECTED: the verifier is lossy" in out and "largest deviations" in out


def test_cli_shows_the_first_bad_row_and_exits_1(capsys, tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("import torch\n\n\ndef verify(ids, q, p, gen):\n"
                    "    out = torch.full((ids.shape[0], ids.shape[1] + 1), -1)\n"
                    "    out[:, 0] = 1 - ids[:, 0]\n    out[:, 1] = 0\n"
                    "    return out, torch.ones(ids.shape[0], dtype=torch.long)\n")
    code, out, _ = _cli(capsys, "--engine", "chain", f"{path}:verify", "-L", 2, "--instance", "toy",
                        "--samples", 500, "--seed", 2)
    assert code == 1 and "INVALID output (the contract is broken)" in out
    line = [x for x in out.splitlines() if x.startswith("    problem 0: drafts ")][0]
    assert line.endswith("(a token not on the accepted path: output 0 is not draft 0)")


def test_cli_inconclusive_exits_5(capsys):
    code, out, _ = _cli(capsys, "--engine", "chain", f"{EXAMPLES}/chain_rejection.py:verify", "-L", 2,
                        "--instance", "toy", "--samples", 200)
    assert code == 5 and "INCONCLUSIVE" in out


def test_cli_json_shape(capsys):
    code, out, _ = _cli(capsys, "--engine", "tree", f"{EXAMPLES}/tree_target_only.py:verify", "--tree", "2,2",
                        "--instance", "toy", "--json", "--samples", 20_000, "--batch", 10_000)
    d = json.loads(out)
    assert code == 0 and d["verdict"] == "passed" and d["lossless"] is True
    assert (d["contract"], d["branching"], d["length"]) == ("tree", [2, 2], 2)
    assert (d["calls"], d["batch"]) == (2, 10_000)
    assert d["samples"] == 20_000 and d["deterministic"] is False and d["sampling"] == "iid"
    assert isinstance(d["optimum"], float) and d["optimum_note"] == ""
    assert len(d["block_efficiency_ci95"]) == 2 and d["violations"] == {} and d["cells"] == 8


@pytest.mark.parametrize("argv,match", [
    (["--engine", "chain", "X.py:f", "-L", "2"], "--engine needs either --target and --draft, or --instance"),
    (["--engine", "chain", "--instance", "toy", "-L", "2"], "--engine needs the verifier"),
    (["--engine", "chain", "X.py:f", "--instance", "toy"], "--engine chain needs --length/-L"),
    (["--engine", "tree", "X.py:f", "--instance", "toy"], "--engine tree needs --tree"),
    (["--engine", "tree", "X.py:f", "--instance", "toy", "--tree", "2,x"], "expected integers"),
    (["--engine", "tree", "X.py:f", "--instance", "toy", "--tree", "2,2", "-L", "3"], "does not match"),
    (["--engine", "chain", "X.py:f", "--instance", "toy", "-L", "2", "--tree", "2"], "no --tree"),
    (["--engine", "chain", "X.py:f", "--instance", "toy", "-L", "2", "-n", "2"], "takes no --drafts/-n"),
    (["--engine", "chain", "X.py:f", "--instance", "toy", "-L", "2", "--exact"], "--engine takes no --exact"),
    (["--engine", "chain", f"{EXAMPLES}/chain_rejection.py:verify", "--instance", "bad", "-L", "2"],
     "--instance must be"),
    (["X.py:f", "P", "Q", "-n", "2", "--deterministic"], "--deterministic only applies with --engine"),
    (["--block", "X.py:f", "--instance", "toy", "-n", "1", "-L", "2", "--batch", "9"],
     "--batch only applies with --engine"),
])
def test_cli_bad_input_is_one_line_and_exit_2(capsys, argv, match):
    code, _, err = _cli(capsys, *argv)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1


def _docstring_commands() -> list[tuple[str, list[str]]]:
    out = []
    for path in sorted(EXAMPLES.glob("*.py")):
        doc = re.sub(r"\\+\n\s*", " ", path.read_text().split('"""')[1])  # continued lines
        lossy = doc.startswith("LOSSY")
        for line in doc.splitlines():
            if line.strip().startswith("mdtheory "):
                out.append((path.stem, lossy, line.split()[1:]))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name,lossy,argv", _docstring_commands())
def test_the_examples_commands_run_and_say_what_the_docstring_says(capsys, monkeypatch, name, lossy, argv):
    monkeypatch.chdir(ROOT)
    code, out, err = run_main(capsys, *argv)
    assert code == (1 if lossy else 0), (out, err)
    assert ("LOSSY" in out or "REJECTED" in out) == lossy


def test_every_example_states_its_commands():
    names = {name for name, _, _ in _docstring_commands()}
    assert names == {p.stem for p in EXAMPLES.glob("*.py")}
    assert all(any("--engine" in a for n, _, a in _docstring_commands() if n == name) for name in names)


#: The devices the engine audits run on here: the CPU, and the GPU where one is available (or the one
#: MDTHEORY_TEST_DEVICE names, as the torch bridge's tests read it).
DEVICES = ["cpu"] + ([os.environ["MDTHEORY_TEST_DEVICE"]] if os.environ.get("MDTHEORY_TEST_DEVICE", "cpu")
                     != "cpu" else ["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_the_audit_runs_on_the_device(device):
    """Tensors and generator on the device: a lossless chain and a top tree pass, a lossy tree is
    rejected, and inputs on two devices are a named error."""
    target, draft = random_instance(3, 1)
    r = md.audit_chain(example("chain_block_verification"), target, draft, 2, device=device, dtype="float32")
    assert r.verdict == "passed" and r.device == device and r.dtype == "float32"
    r = md.audit_tree(example("tree_target_only"), target, draft, (2, 2), deterministic=True, device=device)
    assert r.verdict == "passed" and r.block_efficiency_ci95[0] <= r.optimum
    r = md.audit_tree(example("tree_siblings_unchanged_parent"), target, draft, (2, 2), device=device)
    assert r.verdict == "lossy"
    if device != "cpu":
        p = torch.full((1, 3, 2), 0.5, device=device)
        ids = torch.zeros(1, 2, dtype=torch.long)
        with pytest.raises(C.EngineContractError, match="the generator is on cpu, target_probs on cuda"):
            C.check_chain_inputs(ids.to(device), None, p, torch.Generator())
        with pytest.raises(C.EngineContractError, match="draft_token_ids is on cpu, the laws on cuda"):
            C.check_chain_inputs(ids, None, p, torch.Generator(device=device))


# ---------------------------------------------------------------------------------------- the optimum's test
@pytest.mark.parametrize("L", [1, 2, 4])
def test_blocks_of_full_length_under_an_optimum_just_below_them_are_possible(L):
    """Drafts almost the target: every block has full length and the optimum is just below L + 1;
    a run with no spread in |B| is not told that it beat the optimum."""
    def p(ctx):
        return np.array([0.5, 0.5])

    def q(ctx):
        return np.array([0.5 + 1e-7, 0.5 - 1e-7])

    r = md.audit_chain(md.engines.VERIFIERS["standard"], p, q, L, seed=0)
    assert r.verdict == "passed" and r.block_efficiency == L + 1
    assert r.optimum is not None and r.optimum < L + 1
    assert r.optimum_pvalue > r.level


def test_the_ceiling_test_holds_on_every_law_of_the_range_and_detects_an_excess():
    from scipy import stats

    from mdtheory.blocks.audit import _above_ceiling

    # the extreme laws of the null (mass at the two ends, mean at the ceiling): the bound is never
    # below the exact binomial tail
    for n, top in ((10, 0.3), (200, 1.2), (5_000, 1.9)):
        m = (top + 1) / 3  # range -1..2
        for hits in range(int(n * m) + 1, n + 1, max(1, n // 40)):
            mean = -1 + 3 * hits / n
            assert _above_ceiling(mean, n, top, -1.0, 2.0) >= stats.binom.sf(hits - 1, n, m)
    assert _above_ceiling(2.0, 25_000, 2.0 - 1e-7, -1.0, 2.0) > 0.99
    assert _above_ceiling(1.25, 25_000, 1.2, -1.0, 2.0) < 1e-6
    assert _above_ceiling(1.1, 25_000, 1.2, -1.0, 2.0) == 1.0
    assert _above_ceiling(0.5, 100, -1.0, -1.0, 2.0) == 0.0


def test_an_impossible_efficiency_is_flagged():
    """Every draft accepted: E|B| = L + 1, far above the optimum on the toy."""
    def all_accepted(ids, q, p, gen):
        bonus = torch.multinomial(p[:, -1], 1, generator=gen)
        return torch.cat([ids, bonus], 1), torch.full((ids.shape[0],), ids.shape[1])

    r = md.audit_chain(all_accepted, *sun_toy(), 2, samples=5_000)
    assert r.optimum < 2.5 and r.optimum_pvalue < 1e-12


# ---------------------------------------------------------------------------------------- sizes and pace
def _tree_root(cand, nt, ns, p, q, gen):
    out = torch.full((cand.shape[0], 2), -1, dtype=torch.long)
    out[:, 0] = torch.multinomial(p[:, 0], 1, generator=gen)[:, 0]
    return out


@pytest.mark.parametrize("length,match", [
    (10 ** 6, r"V\^\(L\+1\) = 2\^1000001 = about 10\^301,030 sequences, over 65,536"),
    (10 ** 20, r"V\^\(L\+1\) = 2\^100000000000000000001 = about 10\^30,102,999,566,398,119,936 sequences"),
    (16, r"V\^\(L\+1\) = 2\^17 = 131,072 sequences"),
])
def test_a_chain_too_long_to_audit_is_refused_from_its_length(length, match, monkeypatch):
    monkeypatch.setattr(A, "tree_layout", _never)
    with pytest.raises(ProblemTooLargeError, match=match):
        md.audit_chain(_chain_ok, *sun_toy(), length)


def _never(*args):
    raise AssertionError("built before the size was estimated")


@pytest.mark.parametrize("branching,error,match", [
    ((10 ** 20,), InvalidInputError, r"the tree \(~10\^20\) has over .* = 2\^53 root-to-leaf paths"),
    ((20_000_000,), ProblemTooLargeError, r"problems of 20,000,001 nodes .* estimated .* TiB of memory"),
    ((9_999_999_999, 2), ProblemTooLargeError, r"problems of 29,999,999,998 nodes .* TiB of memory"),
])
def test_a_tree_too_large_is_refused_before_anything_of_its_size_is_built(branching, error, match,
                                                                          monkeypatch):
    monkeypatch.setattr(A, "tree_layout", _never)
    with pytest.raises(error, match=match):
        md.audit_tree(_tree_root, *sun_toy(), branching, samples=1000)


@pytest.mark.parametrize("argv", [
    ["chain", f"{EXAMPLES}/chain_rejection.py:verify", "-L", "1000000"],
    ["chain", f"{EXAMPLES}/chain_rejection.py:verify", "-L", "99999999999999999999"],
    ["tree", f"{EXAMPLES}/tree_target_only.py:verify", "--tree", "99999999999999999999"],
    ["tree", f"{EXAMPLES}/tree_target_only.py:verify", "--tree", "9999999999,2"],
])
def test_cli_refuses_huge_sizes_in_one_line(capsys, argv):
    from .cli_helpers import one_line_error

    code, _, err = _cli(capsys, "--engine", *argv, "--instance", "toy", "--samples", 1000)
    one_line_error(code, err, "sequences, over|of memory|2\\^53 root-to-leaf paths")
    assert len(err) < 400


@pytest.fixture
def clock(monkeypatch):
    """A clock that moves only when told (``clock.now += seconds``)."""
    import types

    fake = types.SimpleNamespace(now=0.0)
    fake.perf_counter = lambda: fake.now
    monkeypatch.setattr(A, "time", fake)
    return fake


def _timed_chain(clock, seconds):
    calls = []

    def verify(ids, q, p, gen):
        calls.append(ids.shape[0])
        clock.now += seconds(len(calls))
        return _chain_ok(ids, q, p, gen)
    return verify, calls


def test_a_slow_verifier_is_named_slow_after_its_first_call(clock):
    f, calls = _timed_chain(clock, lambda i: 0.3)
    with pytest.raises(ProblemTooLargeError, match=r"2,000 problems projected at 6 s \(timed on the first of "
                       r"20 calls\), over the limit of 1 s: the verifier's calls take most of it \(1 "
                       r"verifier call: 0.3 s; the audit's own work: 0 s\)"):
        md.audit_chain(f, *sun_toy(), 2, samples=2000, batch=100, max_seconds=1)
    assert calls == [100]


def test_a_verifier_that_slows_down_is_named_after_the_call_that_did(clock):
    f, calls = _timed_chain(clock, lambda i: 0.01 if i < 3 else 0.5)
    with pytest.raises(ProblemTooLargeError, match=r"after 300 of 2,000 problems, slower than on the first "
                       r"call.*the verifier's calls take most of it \(3 verifier calls"):
        md.audit_chain(f, *sun_toy(), 2, samples=2000, batch=100, max_seconds=1)
    assert len(calls) == 3


def test_the_audits_own_work_is_not_blamed_on_the_verifier(clock, monkeypatch):
    draw = A._Draws.inputs

    def slow_inputs(self, *args):
        clock.now += 0.3
        return draw(self, *args)

    monkeypatch.setattr(A._Draws, "inputs", slow_inputs)
    f, calls = _timed_chain(clock, lambda i: 0.001)
    with pytest.raises(ProblemTooLargeError, match=r"the audit's own drawing and checks take most of it "
                       r"\(1 verifier call: 0.001 s; the audit's own work: 0.3 s\)"):
        md.audit_chain(f, *sun_toy(), 2, samples=2000, batch=100, max_seconds=1)
    assert calls == [100]


def test_a_verifier_that_always_raises_has_no_block_efficiency(capsys, tmp_path):
    src = tmp_path / "raises.py"
    src.write_text("def verify(ids, q, p, gen):\n    raise RuntimeError('no kernel')\n")
    code, out, _ = _cli(capsys, "--engine", "chain", f"{src}:verify", "-L", 2, "--instance", "toy",
                        "--samples", 500)
    assert code == 1 and "INVALID" in out
    assert "E|B|" not in out and "none measured, no output row was valid" in out
    assert "invalid rows: 500 of 500 problems: raised RuntimeError: no kernel: 500" in out


def test_a_numpy_generator_is_named_as_one():
    x = torch.zeros(1, 2, dtype=torch.long)
    p = torch.full((1, 3, 2), 0.5, dtype=torch.float64)
    with pytest.raises(InvalidInputError, match=r"generator must be a torch.Generator, got "
                                                r"numpy.random.Generator$"):
        C.check_chain_inputs(x, None, p, np.random.default_rng())
