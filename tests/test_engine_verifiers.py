"""The engine verifiers (mdtheory.engines.VERIFIERS) against the numpy verifiers' exact laws.

Every registered verifier has a case here (a coverage test fails otherwise): the draft model it is
lossless for, and the numpy verifier of :mod:`mdtheory.blocks` whose law it must have. Small
instances (V = 2, 3) enumerate every draw of the drafts; a verifier with an exact law form
(``.stops``) must match the numpy law to rounding for every draw, and every verifier's samples, a
batch holding every draw many times, must pass a chi-square test against the numpy law, stratified
by draw, at a fixed seed. The optimal-rule verifiers are compared with the numpy verifiers running
the numpy optimal rule (its cell schedule, the device's construction: papers/blocks_verifiers.md §10).
"""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from mdtheory.blocks import DraftTree, make_verifier, random_instance, sun_toy
from mdtheory.blocks.deterministic import DeterministicTree, target_only_law
from mdtheory.blocks.trees import iid_drafts
from mdtheory.engines import VERIFIERS
from mdtheory.errors import InvalidInputError
from tests.engine_reference import chain_tensors, stratified_pvalue, tree_tensors

# the device a GPU run names (benchmarks' MDTHEORY_TEST_DEVICE); otherwise CUDA joins the CPU where it is
DEVICES = ["cpu"] + ([os.environ["MDTHEORY_TEST_DEVICE"]] if os.environ.get("MDTHEORY_TEST_DEVICE", "cpu")
                     != "cpu" else ["cuda"] if torch.cuda.is_available() else [])
#: p-value below which a sampling test fails (fixed seeds: each test is deterministic)
LEVEL = 1e-4
#: replicates of every draw of the drafts in a sampling test
REPLICATES = 1500


def _instances():
    return {"toy": sun_toy(), "r3": random_instance(3, seed=2), "r2": random_instance(2, seed=5)}


def _onehot_draft(chain, V):
    """The deterministic draft law along one chain: one-hot at its next token."""
    def law(ctx):
        v = np.zeros(V)
        v[chain[len(ctx)] if len(ctx) < len(chain) else 0] = 1.0
        return v
    return law


def _top_children(tree, draft, V):
    """The deterministic tree: each node's children are the draft's top tokens there (ties by token)."""
    x = np.zeros((tree.n, tree.length), dtype=np.int64)

    def grow(depth, start, ctx):
        if depth == tree.length:
            return
        order = np.lexsort((np.arange(V), -np.asarray(draft(ctx))))
        for (lo, hi), y in zip(tree.children_rows(depth, start), order, strict=False):
            x[lo:hi, depth] = y
            grow(depth + 1, lo, ctx + (int(y),))

    grow(0, 0, ())
    return x


# ------------------------------------------------------------------ the cases: (draws, tensors, numpy law)
def _chain_case(name, target, draft, k, deterministic):
    """Every chain of k tokens: sampled (weight: its draft probability) or deterministic (each chain
    on its own, weight 1/V^k), with the numpy verifier's law per chain."""
    V = np.asarray(target(())).size
    nv = make_verifier("token", rule="rrs") if name == "standard" else make_verifier("block")
    chains = list(itertools.product(range(V), repeat=k))
    x, q, p = chain_tensors(chains, target, draft)
    laws, weights = [], []
    for c in chains:
        d = _onehot_draft(c, V) if deterministic else draft
        laws.append(nv.law(target, d, np.array([c])))
        weights.append(1.0 if deterministic else float(np.prod([draft(c[:i])[c[i]] for i in range(k)])))
    return (x, None if deterministic else q, p), laws, np.array(weights) / sum(weights)


def _tree_case(name, target, draft, branching):
    """Every draw of the tree (iid children; n chains for the ``chains`` verifiers; the top-token
    tree for target-only) with the numpy verifier's law per draw."""
    V = np.asarray(target(())).size
    v = VERIFIERS[name]
    if v.drafts == "deterministic":
        tree = DraftTree(branching)
        x = _top_children(tree, draft, V)
        law = target_only_law(target, DeterministicTree.from_drafts(x))
        return tree_tensors(tree, [x], target, draft), [law], np.ones(1)
    if v.drafts == "chains":
        tree = iid_drafts(*branching)
        nv = {"gbv": make_verifier("gbv"), "chains-optimal": make_verifier("token", rule="optimal"),
              "multipath-optimal": make_verifier("multipath", rule="optimal")}[name]
    else:
        tree = DraftTree(branching, "iid")
        nv = {"traversal": make_verifier("traversal", tree=tree),
              "tree-optimal": make_verifier("token", rule="optimal", tree=tree)}[name]
    draws = list(tree.enumerate(draft))
    xs = [d for d, _ in draws]
    return tree_tensors(tree, xs, target, draft), [nv.law(target, draft, d) for d in xs], \
        np.array([w for _, w in draws])


def _cases():
    out = []
    for inst in ("toy", "r3"):
        for name in ("standard", "block"):
            for k, det in ((1, False), (2, False), (3, False), (2, True)):
                out.append((name, inst, ("chain", k, det)))
        out += [("target-only", inst, ("tree", b)) for b in ((2,), (2, 1), (1, 2), (2, 2), (3, 2))]
        out += [(name, inst, ("tree", b)) for name in ("traversal", "tree-optimal")
                for b in ((2,), (2, 1), (1, 2), (3,))]
        out += [(name, inst, ("tree", (n, L))) for name in ("gbv", "chains-optimal", "multipath-optimal")
                for n, L in ((1, 2), (2, 1), (2, 2), (3, 1))]
    out += [(name, "r2", ("tree", b)) for name in ("traversal", "tree-optimal") for b in ((2, 2), (2, 1, 2))]
    out += [(name, "r2", ("tree", (n, L))) for name in ("gbv", "chains-optimal", "multipath-optimal")
            for n, L in ((2, 3), (3, 2))]
    return out


CASES = _cases()
#: the verifiers that run compiled kernels on CPU tensors (another route on a device)
KERNELS = ("block", "gbv", "tree-optimal", "chains-optimal", "multipath-optimal")
#: the sampling tests of the fast tier (one or two per verifier); the rest are marked slow
FAST = {("standard", "r3", ("chain", 2, False)), ("standard", "r3", ("chain", 2, True)),
        ("block", "r3", ("chain", 2, False)), ("block", "r3", ("chain", 2, True)),
        ("target-only", "r3", ("tree", (2, 2))), ("traversal", "r3", ("tree", (2, 1))),
        ("tree-optimal", "toy", ("tree", (2, 1))), ("chains-optimal", "toy", ("tree", (2, 2))),
        ("gbv", "toy", ("tree", (2, 2))), ("multipath-optimal", "toy", ("tree", (2, 2)))}


def _build(name, inst, shape):
    target, draft = _instances()[inst]
    if shape[0] == "chain":
        return _chain_case(name, target, draft, shape[1], shape[2])
    return _tree_case(name, target, draft, shape[1])


def _blocks(out, contract):
    """Emitted token tuples of a verifier's output."""
    tokens = (out[0] if contract == "chain" else out).tolist()
    return [tuple(t for t in row if t >= 0) for row in tokens]


def test_every_registered_verifier_has_a_case():
    assert {name for name, _, _ in CASES} == set(VERIFIERS)
    for v in VERIFIERS.values():
        assert v.contract in ("chain", "tree") and v.drafts in ("any", "sampled", "deterministic", "chains")


def _to(tensors, device):
    return [None if t is None else t.to(device) for t in tensors]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, inst, shape", [c for c in CASES if VERIFIERS[c[0]].exact],
                         ids=lambda v: str(v))
def test_exact_law_matches_the_numpy_verifier_draw_by_draw(name, inst, shape, device):
    tensors, laws, weights = _build(name, inst, shape)
    law = VERIFIERS[name].stops(*_to(tensors, device))
    assert torch.allclose(law.prob.sum(-1).cpu(), torch.ones(len(laws), dtype=torch.float64), atol=1e-13)
    for b, ref in enumerate(laws):
        got = law.blocks(b)
        assert set(got) <= set(ref) | {k for k, v in got.items() if v < 1e-15}
        assert max(abs(got.get(k, 0.0) - ref.get(k, 0.0)) for k in set(got) | set(ref)) < 1e-13, b
    # the exact block efficiency, averaged over the draws, is the numpy verifier's
    ours = float((law.block_efficiency().cpu().numpy() * weights).sum())
    ref = sum(w * sum(len(k) * v for k, v in r.items()) for w, r in zip(weights, laws, strict=True))
    assert abs(ours - ref) < 1e-13


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, inst, shape", [c if c in FAST else pytest.param(*c, marks=pytest.mark.slow)
                                               for c in CASES], ids=lambda v: str(v))
def test_samples_follow_the_numpy_law_draw_by_draw(name, inst, shape, device):
    tensors, laws, _ = _build(name, inst, shape)
    v = VERIFIERS[name]
    reps = REPLICATES if len(laws) > 1 else 10 * REPLICATES
    big = [t.repeat_interleave(reps, 0) if t is not None else None for t in _to(tensors, device)]
    gen = torch.Generator(device=device).manual_seed(sum(map(ord, name + inst + str(shape))))
    out = v(*big, gen) if v.contract == "chain" else v(*big[:5], gen)
    seen = _blocks(out, v.contract)
    groups = [(law, seen[i * reps:(i + 1) * reps]) for i, law in enumerate(laws)]
    assert stratified_pvalue(groups) > LEVEL


@pytest.mark.parametrize("name, inst, shape", sorted(c for c in FAST if c[0] in KERNELS), ids=str)
def test_the_device_route_samples_the_same_law_on_the_cpu(name, inst, shape, monkeypatch):
    # on a CPU tensor these verifiers run compiled kernels (the numpy optimal rule's cells, the
    # residual masses of block verification); the device's route must sample the same law
    monkeypatch.setattr("mdtheory.engines.stops.CPU_KERNELS", False)
    test_samples_follow_the_numpy_law_draw_by_draw(name, inst, shape, "cpu")


def test_the_sampling_test_tells_the_optimal_marginals_apart():
    # the window schedule's lexicographically optimal marginal and the cells' (the device's) are both
    # optimal, yet the block laws of token-by-token verification differ: the test must see it (and
    # it does not see the cells' own law, test above)
    target, draft = random_instance(3, seed=5)
    tree = iid_drafts(3, 1)
    draws = list(tree.enumerate(draft))
    tensors = tree_tensors(tree, [d for d, _ in draws], target, draft)
    lex = make_verifier("token", rule="optimal", realise="windows")
    reps = REPLICATES
    big = [t.repeat_interleave(reps, 0) for t in tensors]
    seen = _blocks(VERIFIERS["chains-optimal"](*big, torch.Generator().manual_seed(3)), "tree")
    groups = [(lex.law(target, draft, d), seen[i * reps:(i + 1) * reps]) for i, (d, _) in enumerate(draws)]
    assert stratified_pvalue(groups) < 1e-6


# ------------------------------------------------------------------ no host synchronisation
SYNCING = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "cpu", "numpy", "nonzero",
           "masked_select", "unique", "argwhere"}


class _NoSync(TorchFunctionMode):
    """Fails on any torch call that reads a tensor's value on the host (a synchronisation on a
    device), or indexes by a boolean tensor (whose result size needs one)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in SYNCING or (name in ("__getitem__", "__setitem__") and len(args) > 1 and any(
                isinstance(a, torch.Tensor) and a.dtype == torch.bool
                for a in (args[1] if isinstance(args[1], tuple) else (args[1],)))):
            raise AssertionError(f"host synchronisation: {name}")
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", sorted(VERIFIERS))
def test_a_call_never_reads_a_tensor_on_the_host(name, monkeypatch):
    monkeypatch.setattr("mdtheory.torch_bridge.optimal._NUMPY_SORT_ON_CPU", False)  # the device's sort
    monkeypatch.setattr("mdtheory.engines.stops.CPU_KERNELS", False)  # and the device's kernels
    target, draft = random_instance(4, seed=1)
    v = VERIFIERS[name]
    gen = torch.Generator().manual_seed(0)
    if v.contract == "chain":
        x, q, p = chain_tensors([(0, 1, 2), (3, 3, 1)], target, draft, dtype=torch.float32)
        with _NoSync():
            out, n = v(x, q, p, gen)
        assert out.shape == (2, 4) and n.shape == (2,)
        return
    tree = iid_drafts(2, 3) if v.drafts == "chains" else DraftTree((2, 1, 2))
    rng = np.random.default_rng(0)
    tensors = tree_tensors(tree, [tree.sample(draft, rng) for _ in range(3)], target, draft,
                           dtype=torch.float32)
    with _NoSync():
        out = v(*tensors, gen, depth=3)
    assert out.shape == (3, 4) and out.dtype == torch.int64
    with pytest.raises(AssertionError, match="host synchronisation"), _NoSync():
        v(*tensors, gen)  # the depth read off the links is the one synchronisation


def test_the_no_sync_guard_catches_a_read():
    with pytest.raises(AssertionError, match="item"), _NoSync():
        torch.ones(2).sum().item()


# ------------------------------------------------------------------ contracts and refusals
def test_outputs_pass_the_contract_checks():
    from mdtheory.engines.contracts import (
        check_chain_inputs,
        check_chain_output,
        check_tree_inputs,
        check_tree_output,
    )

    target, draft = random_instance(5, seed=4)
    rng = np.random.default_rng(1)
    gen = torch.Generator().manual_seed(1)
    chains = rng.integers(0, 5, size=(64, 3))
    x, q, p = chain_tensors(chains, target, draft)
    for name in ("standard", "block"):
        for dq in (q, None):
            out = VERIFIERS[name](x, dq, p, gen)
            check_chain_output(out, check_chain_inputs(x, dq, p, gen))
    for v in VERIFIERS.values():
        if v.contract != "tree":
            continue
        tree = iid_drafts(2, 2) if v.drafts == "chains" else DraftTree((2, 2))
        t = tree_tensors(tree, [tree.sample(draft, rng) for _ in range(64)], target, draft)
        emitted = v(*t, gen, validate=True)
        check_tree_output(emitted, check_tree_inputs(*t, gen))


def test_refusals_name_the_problem():
    target, draft = random_instance(3, seed=0)
    x, q, p = chain_tensors([(0, 1)], target, draft)
    with pytest.raises(InvalidInputError, match="draft_token_ids"):
        VERIFIERS["block"](x[:, :1], q, p, None)
    with pytest.raises(InvalidInputError, match="draft_probs"):
        VERIFIERS["block"](x, q.float(), p, None)
    t = tree_tensors(DraftTree((2,)), [np.array([[0], [1]])], target, draft)
    with pytest.raises(InvalidInputError, match="needs draft_probs"):
        VERIFIERS["traversal"](*t[:4], None, None)
    with pytest.raises(InvalidInputError, match="depth"):
        VERIFIERS["traversal"](*t, None, depth=-1)
    with pytest.raises(InvalidInputError, match="N = 1 \\+ n L"):
        VERIFIERS["gbv"](*tree_tensors(DraftTree((3,)), [np.array([[0], [1], [2]])], target, draft),
                         None, depth=2)
    with pytest.raises(InvalidInputError, match="not n chains"):
        VERIFIERS["gbv"](*t, None, depth=2, validate=True)


# ------------------------------------------------------------------ draws from long rows
def test_categorical_draws_long_rows_by_their_law():
    from mdtheory.audit.statistics import law_test
    from mdtheory.engines.stops import BLOCK, categorical

    rng = np.random.default_rng(0)
    V = 3 * BLOCK + 17  # blocks and a padded last block
    w = rng.dirichlet(np.full(V, 0.5))
    w[rng.random(V) < 0.3] = 0.0
    w /= w.sum()
    row = torch.tensor(w, dtype=torch.float32)
    gen = torch.Generator().manual_seed(0)
    counts = np.zeros(V)
    for _ in range(5):
        idx = categorical(row.expand(20_000, V), torch.rand(20_000, generator=gen, dtype=torch.float64))
        counts += np.bincount(idx.numpy(), minlength=V)
    assert counts[w == 0].sum() == 0
    assert law_test(counts, w) > LEVEL
    # mass on one token only: at either end of a block, and the very last
    for y in (0, BLOCK - 1, BLOCK, V - 1):
        one = torch.zeros(3, V, dtype=torch.float64)
        one[:, y] = 1.0
        u = torch.tensor([0.0, 0.5, 1.0 - 2.0 ** -53], dtype=torch.float64)
        assert categorical(one, u).tolist() == [y, y, y]


# ------------------------------------------------------------------ the engine audits
SLOW_AUDITS = ("tree-optimal", "chains-optimal")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_AUDITS else n
                                  for n in sorted(VERIFIERS)])
def test_every_verifier_passes_the_engine_audit(name):
    from mdtheory.engines import audit_chain, audit_tree

    v = VERIFIERS[name]
    target, draft = random_instance(3, seed=2)
    if v.contract == "chain":
        for deterministic in (False, True):
            r = audit_chain(v, target, draft, 2, deterministic=deterministic, seed=1)
            assert r.verdict == "passed", (deterministic, r.message)
        return
    shape = {"chains": (2, 1), "deterministic": (2, 2), "sampled": (2, 2)}[v.drafts]
    r = audit_tree(v, target, draft, shape, deterministic=v.drafts == "deterministic", seed=1)
    assert r.verdict == "passed", r.message
    assert r.optimum is None or r.block_efficiency_ci95[0] <= r.optimum


#: The command line's drafts for each kind of registered verifier (a small instance).
CLI_DRAFTS = {"any": ["-L", "2"], "chains": ["--tree", "2,1"], "sampled": ["--tree", "2,2"],
              "deterministic": ["--tree", "2,2", "--deterministic"]}


@pytest.mark.parametrize("name", sorted(VERIFIERS))
def test_every_registered_verifier_passes_its_audit_by_name_on_the_command_line(name, capsys):
    from tests.cli_helpers import run_main

    v = VERIFIERS[name]
    code, out, err = run_main(capsys, "audit", "--engine", v.contract, name, *CLI_DRAFTS[v.drafts],
                              "--instance", "random:3:2", "--detect-tv", "0.1", "--json")
    row = json.loads(out)
    assert code == 0 and row["verdict"] == "passed" and row["target"] == name, (out, err)
    assert row["contract"] == v.contract and row["deterministic"] == (v.drafts == "deterministic")


def test_the_command_line_lists_the_registry_by_contract(capsys):
    from tests.cli_helpers import run_main

    code, text, _ = run_main(capsys, "audit", "--help")
    assert code == 0
    for contract in ("chain", "tree"):
        names = ", ".join(n for n, v in VERIFIERS.items() if v.contract == contract)
        assert f"{contract}: {names}" in " ".join(text.split())


@pytest.mark.parametrize("argv,match", [
    (["--engine", "tree", "block", "--tree", "2"], "'block' is in the chain contract: use --engine chain"),
    (["--engine", "tree", "gbv", "--tree", "2,2"], "n chains of L tokens: --tree n,1,...,1"),
    (["--engine", "tree", "traversal", "--tree", "2,2", "--deterministic"], "drawn iid from the draft"),
    (["--engine", "chain", "blocks", "-L", "2"], "'blocks' is neither FILE.py:f, MODULE:f nor a registered "
                                                 "chain verifier \\(standard, block\\)"),
])
def test_a_registered_name_in_the_wrong_place_is_one_line(argv, match, capsys):
    from tests.cli_helpers import one_line_error, run_main

    code, _, err = run_main(capsys, "audit", *argv, "--instance", "toy")
    one_line_error(code, err, match)
