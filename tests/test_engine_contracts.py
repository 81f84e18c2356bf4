"""The engines' chain and tree contracts: validation (one named error per violation), output checks
row by row, and DraftTree <-> linked lists."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mdtheory.blocks.trees import DraftTree  # noqa: E402
from mdtheory.engines import contracts as C  # noqa: E402
from mdtheory.errors import InvalidInputError  # noqa: E402


def test_importing_the_engines_loads_no_torch():
    code = "import sys, mdtheory, mdtheory.engines; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_registry_and_the_audits_help_load_no_heavy_library():
    """The command line lists the registry's names in ``mdtheory audit --help``: neither the
    registry nor the parser loads torch, the torch bridge, numba or scipy."""
    code = ("import sys, contextlib, io\nfrom mdtheory.cli import main\nimport mdtheory.engines.registry\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main(['audit', '--help'])\n"
            "print([m for m in ('torch', 'numba', 'scipy', 'mdtheory.torch_bridge') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_error_is_an_input_error():
    assert issubclass(C.EngineContractError, InvalidInputError)


def _laws(B, rows, V, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(B, rows, V, generator=g, dtype=dtype).softmax(-1)


# ---------------------------------------------------------------------------------------- chain inputs
def _chain(B=3, k=2, V=4, dtype=torch.float64):
    ids = torch.randint(0, V, (B, k), generator=torch.Generator().manual_seed(1), dtype=torch.int32)
    return ids, _laws(B, k, V, dtype), _laws(B, k + 1, V, dtype, 2), torch.Generator()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_chain_inputs_are_widened(dtype):
    ids, q, p, g = _chain(dtype=dtype)
    ok = C.check_chain_inputs(ids, q, p, g)
    assert ok.draft_token_ids.dtype == torch.int64 and torch.equal(ok.draft_token_ids, ids.long())
    assert (ok.batch, ok.length, ok.vocab) == (3, 2, 4)
    assert C.check_chain_inputs(ids, None, p, g).draft_probs is None


def _bad_rows(x, b, j, how):
    x = x.clone()
    if how == "sum":
        x[b, j] *= 1.5
    elif how == "nan":
        x[b, j, 0] = float("nan")
    else:
        x[b, j, 0] = -x[b, j, 0]
    return x


@pytest.mark.parametrize("case,match", [
    ("ids_float", r"draft_token_ids must be torch.int64 \(or int32\), got torch.float64"),
    ("ids_shape", r"draft_token_ids must have shape \[3, 2\], got \[3, 3\]"),
    ("ids_range", r"draft_token_ids\[1, 0\] = 4 is outside 0..3"),
    ("ids_negative", r"draft_token_ids\[0, 1\] = -1 is outside 0..3"),
    ("q_shape", r"draft_probs must have shape \[3, 2, 4\], got \[3, 3, 4\]"),
    ("q_dtype", r"draft_probs is torch.float32, target_probs torch.float64: the laws share one dtype"),
    ("p_int", r"target_probs must be float32 or float64, got torch.int64"),
    ("p_sum", r"target_probs\[2, 1\] \(after draft 1\) is not a probability vector: it sums to"),
    ("p_nan", r"target_probs\[0, 2\] \(after draft 2\) is not a probability vector: it has a NaN"),
    ("q_negative", r"draft_probs\[1, 0\] \(drawing draft 0\) is not a probability vector: it has a negative"),
    ("generator", r"generator must be a torch.Generator, got int"),
    ("not_tensor", r"target_probs must be a torch tensor, got list"),
    ("no_drafts", r"target_probs must be \[B, k\+1, V\] with B >= 1, k >= 1"),
])
def test_chain_input_errors_are_named(case, match):
    ids, q, p, g = _chain()
    if case == "ids_float":
        ids = ids.double()
    elif case == "ids_shape":
        ids = torch.zeros(3, 3, dtype=torch.int64)
    elif case == "ids_range":
        ids = ids.clone()
        ids[1, 0] = 4
    elif case == "ids_negative":
        ids = ids.clone()
        ids[0, 1] = -1
    elif case == "q_shape":
        q = _laws(3, 3, 4)
    elif case == "q_dtype":
        q = q.float()
    elif case == "p_int":
        p = torch.ones(3, 3, 4, dtype=torch.int64)
    elif case == "p_sum":
        p = _bad_rows(p, 2, 1, "sum")
    elif case == "p_nan":
        p = _bad_rows(p, 0, 2, "nan")
    elif case == "q_negative":
        q = _bad_rows(q, 1, 0, "negative")
    elif case == "generator":
        g = 0
    elif case == "not_tensor":
        p = p.tolist()
    elif case == "no_drafts":
        p = p[:, :1]
    with pytest.raises(C.EngineContractError, match="^chain contract: " + match):
        C.check_chain_inputs(ids, q, p, g)


def test_float32_rows_get_float32_tolerance():
    ids, q, p, g = _chain(dtype=torch.float32)
    p = p.clone()
    p[0, 0] *= 1 + 1e-4  # within float32's sum rule (3.5e-4), outside float64's (1e-6)
    C.check_chain_inputs(ids, q, p, g)
    with pytest.raises(C.EngineContractError, match=r"target_probs\[0, 0\]"):
        C.check_chain_inputs(ids, q.double(), p.double(), g)


# ---------------------------------------------------------------------------------------- tree inputs
def _tree(branching=(2, 2), B=2, V=3, seed=0):
    tree = DraftTree(branching)
    lay = C.tree_layout(tree)
    rng = np.random.default_rng(seed)
    drafts = np.stack([tree.sample(lambda c: np.full(V, 1 / V), rng) for _ in range(B)])
    cand = torch.as_tensor(C.tree_candidates(lay, drafts))
    nt = torch.as_tensor(np.tile(lay.next_token, (B, 1)))
    ns = torch.as_tensor(np.tile(lay.next_sibling, (B, 1)))
    N = lay.nodes
    return [cand, nt, ns, _laws(B, N, V), _laws(B, N, V, seed=3), torch.Generator()], drafts


def test_tree_inputs_read_the_tree():
    args, _ = _tree()
    ok = C.check_tree_inputs(*args)
    assert ok.depth_bound == 2 and ok.nodes == 7
    assert ok.parent[0].tolist() == [-1, 0, 0, 1, 1, 2, 2]
    assert ok.depth[1].tolist() == [0, 1, 1, 2, 2, 2, 2]
    assert C.check_tree_inputs(*args, depth=3).depth_bound == 3
    args[4] = None
    assert C.check_tree_inputs(*args).draft_probs is None


def _edit(args, field, b, j, value):
    x = args[field].clone()
    x[b, j] = value
    args[field] = x


CAND, NT, NS, P, Q = range(5)


@pytest.mark.parametrize("case,match", [
    ("dangling", r"next_token\[1, 3\] = 7 is a dangling index \(nodes 0..6, -1 for none\)"),
    ("dangling_negative", r"next_sibling\[0, 2\] = -2 is a dangling index"),
    ("self", r"next_sibling\[0, 4\] = 4 links node 4 to itself: a cycle"),
    ("root_cycle", r"next_token\[1, 5\] = 0 links back to the root: a cycle"),
    ("root_sibling", r"next_sibling\[0, 0\] = 3: the root \(node 0\) has no siblings"),
    ("two_parents", r"node 5 of row 0 has two parents: next_token\[0, 2\] and next_token\[0, 3\] both link"),
    ("cycle", r"nodes \[5, 6\] of row 1 link to each other in a cycle, apart from the root"),
    ("detached", r"node 6 of row 0 is not reachable from the root \(node 0\) but is not padding"),
    ("deep", r"node 3 of row 0 is at depth 2, deeper than the tree's depth 1"),
    ("token", r"candidates\[1, 4\] = 3 is outside 0..2 at a node of the tree"),
    ("padding_in_tree", r"candidates\[0, 1\] = -1 is outside 0..2 at a node of the tree"),
    ("root_token", r"candidates\[0, 0\] = 5 \(the root\) is outside -1..2"),
    ("target_row", r"target_probs\[1, 3\] \(after node 3\) is not a probability vector"),
    ("draft_row", r"draft_probs\[0, 2\] \(drawing the children of node 2\) is not a probability vector"),
    ("links_dtype", r"next_sibling must be torch.int64 \(or int32\), got torch.int16"),
    ("links_shape", r"next_token must have shape \[2, 7\], got \[2, 6\]"),
])
def test_tree_input_errors_are_named(case, match):
    args, _ = _tree()
    depth = None
    if case == "dangling":
        _edit(args, NT, 1, 3, 7)
    elif case == "dangling_negative":
        _edit(args, NS, 0, 2, -2)
    elif case == "self":
        _edit(args, NS, 0, 4, 4)
    elif case == "root_cycle":
        _edit(args, NT, 1, 5, 0)
    elif case == "root_sibling":
        _edit(args, NS, 0, 0, 3)
    elif case == "two_parents":
        _edit(args, NT, 0, 3, 5)
    elif case == "cycle":  # 5 -> 6 -> 5, cut from node 2
        _edit(args, NT, 1, 2, -1)
        _edit(args, NS, 1, 6, 5)
    elif case == "detached":  # node 6 loses its link from node 5
        _edit(args, NS, 0, 5, -1)
    elif case == "deep":
        depth = 1
    elif case == "token":
        _edit(args, CAND, 1, 4, 3)
    elif case == "padding_in_tree":
        _edit(args, CAND, 0, 1, -1)
    elif case == "root_token":
        _edit(args, CAND, 0, 0, 5)
    elif case == "target_row":
        args[P] = _bad_rows(args[P], 1, 3, "sum")
    elif case == "draft_row":
        args[Q] = _bad_rows(args[Q], 0, 2, "nan")
    elif case == "links_dtype":
        args[NS] = args[NS].to(torch.int16)
    elif case == "links_shape":
        args[NT] = args[NT][:, :6]
    with pytest.raises(C.EngineContractError, match="^tree contract: " + match):
        C.check_tree_inputs(*args, depth=depth)


def test_padding_nodes_and_unused_rows_pass():
    """A row whose tree is smaller than N: its spare nodes are padding, their rows unread; a
    leaf's draft row is unused."""
    args, _ = _tree()
    _edit(args, NS, 0, 5, -1)  # row 0: node 6 leaves the tree ...
    _edit(args, CAND, 0, 6, -1)  # ... as padding
    args[P] = _bad_rows(args[P], 0, 6, "nan")
    args[Q] = _bad_rows(_bad_rows(args[Q], 0, 6, "nan"), 1, 4, "sum")  # node 4 is a leaf
    ok = C.check_tree_inputs(*args)
    assert ok.depth[0].tolist() == [0, 1, 1, 2, 2, 2, -1] and ok.parent[0, 6] == -1


# ---------------------------------------------------------------------------------------- outputs
def test_chain_output_faults_name_each_row():
    ids = torch.tensor([[0, 1]] * 8)
    p = _laws(8, 3, 3)
    inp = C.check_chain_inputs(ids, None, p, torch.Generator())
    out = torch.tensor([[0, 1, 2], [2, -1, -1], [0, 2, -1], [1, 2, -1], [0, -1, 2], [0, 1, -1],
                        [0, 1, 7], [-1, -1, -1]])
    num = torch.tensor([2, 0, 1, 1, 1, 3, 2, 0])
    f = C.chain_output_faults((out, num), inp)
    assert f.reason.tolist() == [
        None, None, None,
        "a token not on the accepted path: output 0 is not draft 0",
        "padding in the middle: a token after a -1",
        "emitted_draft_token_num 3 is outside 0..2",
        "a token outside 0..2 that is not the -1 padding",
        "no token emitted"]
    assert f.bad.tolist() == [False] * 3 + [True] * 5 and f.first() == 3
    assert f.count.tolist() == [3, 1, 2, 0, 0, 0, 0, 0]
    assert f.tokens[:3].tolist() == out[:3].tolist() and (f.tokens[3:] == -1).all()
    wrong = C.chain_output_faults((out, torch.tensor([1, 0, 1, 1, 1, 2, 2, 0])), inp)
    assert wrong.reason[0] == "emitted_draft_token_num 1 with 3 tokens before the padding (wrong length)"
    with pytest.raises(C.EngineContractError, match=r"chain contract: output row 3 \[1, 2, -1\]: a token"):
        C.check_chain_output((out, num), inp)


@pytest.mark.parametrize("output,reason", [
    ("tuple", "returned Tensor, not the pair (output_token_ids, emitted_draft_token_num)"),
    ("float", "output_token_ids is torch.float32, not torch.int64"),
    ("shape", "output_token_ids has shape [2, 2], not [2, 3]"),
    ("num", "emitted_draft_token_num has shape [2, 1], not [2]"),
    ("list", "emitted_draft_token_num is a list, not a torch tensor"),
])
def test_a_malformed_chain_output_fails_every_row(output, reason):
    inp = C.check_chain_inputs(torch.tensor([[0, 1]] * 2), None, _laws(2, 3, 3), torch.Generator())
    good = torch.tensor([[0, 1, 2]] * 2), torch.tensor([2, 2])
    value = {"tuple": good[0], "float": (good[0].float(), good[1]), "shape": (good[0][:, :2], good[1]),
             "num": (good[0], good[1][:, None]), "list": (good[0], [2, 2])}[output]
    f = C.chain_output_faults(value, inp)
    assert f.bad.all() and set(f.reason.tolist()) == {reason}
    assert C.chain_output_faults((good[0].int(), good[1].int()), inp).first() is None  # int32 is fine


def test_tree_output_faults_follow_repeated_siblings():
    """Siblings may repeat a token: the path 1 -> 0 is valid when the second node labelled 1 has
    a child 0, though the first does not."""
    tree = DraftTree((2, 2))
    lay = C.tree_layout(tree)
    drafts = np.array([[1, 2], [1, 2], [1, 0], [1, 1]])  # depth-1 nodes 1 and 2 both hold token 1
    cand = torch.as_tensor(C.tree_candidates(lay, drafts)).repeat(6, 1)
    nt = torch.as_tensor(lay.next_token).repeat(6, 1)
    ns = torch.as_tensor(lay.next_sibling).repeat(6, 1)
    inp = C.check_tree_inputs(cand, nt, ns, _laws(6, 7, 3), None, torch.Generator())
    emitted = torch.tensor([[1, 0, 2], [1, 2, 0], [0, -1, -1], [2, 0, -1], [1, -1, 1], [-1, -1, -1]])
    f = C.tree_output_faults(emitted, inp)
    assert f.reason.tolist() == [
        None, None, None,
        "a token not on the accepted path: no path of nodes spells the first token",
        "padding in the middle: a token after a -1", "no token emitted"]
    assert f.count.tolist() == [3, 3, 1, 0, 0, 0]
    emitted[0, 1] = 2
    emitted[0, 2] = 1
    assert C.tree_output_faults(emitted[:1].repeat(6, 1), inp).first() is None  # 1 -> 2: node 1's child
    bad = C.tree_output_faults(torch.tensor([[0, 2, 1]] * 6), inp)
    assert bad.reason[0].endswith("first token")
    assert C.tree_output_faults(emitted[:, :2], inp).reason[0] == "emitted has shape [6, 2], not [6, 3]"


# ---------------------------------------------------------------------------------------- layouts
@pytest.mark.parametrize("branching", [(1,), (3,), (1, 1, 1), (2, 2), (2, 1, 3), (1, 2)])
def test_draft_trees_round_trip(branching):
    tree = DraftTree(branching)
    lay = C.tree_layout(tree)
    assert lay.nodes == 1 + sum(int(np.prod(branching[:d + 1])) for d in range(len(branching)))
    rng = np.random.default_rng(0)
    drafts = np.stack([tree.sample(lambda c: np.full(5, 0.2), rng) for _ in range(4)])
    cand = C.tree_candidates(lay, drafts, root_token=-1)
    B = drafts.shape[0]
    links = [torch.as_tensor(np.tile(x, (B, 1))) for x in (lay.next_token, lay.next_sibling)]
    inp = C.check_tree_inputs(torch.as_tensor(cand), *links, _laws(B, lay.nodes, 5), None, torch.Generator())
    assert (inp.parent == lay.parent).all() and (inp.depth == lay.depth).all()
    back_tree, back = C.links_to_drafts(torch.as_tensor(cand), *links, sampling="without-replacement")
    assert back_tree == DraftTree(branching, "without-replacement") and (back == drafts).all()


def test_links_read_in_any_node_order():
    """The same trees with their nodes renumbered (a different permutation per row) give the same
    drafts: the layout is read by links, not by position."""
    tree = DraftTree((2, 2))
    lay = C.tree_layout(tree)
    rng = np.random.default_rng(4)
    drafts = np.stack([tree.sample(lambda c: np.full(3, 1 / 3), rng) for _ in range(3)])
    cand = C.tree_candidates(lay, drafts)
    rows = []
    for b in range(3):
        perm = np.concatenate([[0], 1 + rng.permutation(lay.nodes - 1)])  # new index of old node
        inv = np.argsort(perm)
        nt, ns = (np.where(x[inv] >= 0, perm[np.maximum(x[inv], 0)], -1)
                  for x in (lay.next_token, lay.next_sibling))
        rows.append((cand[b][inv], nt, ns))
    cand2, nt2, ns2 = (torch.as_tensor(np.stack(x)) for x in zip(*rows, strict=True))
    C.check_tree_inputs(cand2, nt2, ns2, _laws(3, lay.nodes, 3), None, torch.Generator())
    assert (C.links_to_drafts(cand2, nt2, ns2)[1] == drafts).all()


def test_links_that_no_draft_tree_describes_are_named():
    # root -> 1, 2; node 1 -> 3; node 2 a leaf
    nt = torch.tensor([[1, 3, -1, -1]])
    ns = torch.tensor([[-1, 2, -1, -1]])
    cand = torch.tensor([[0, 1, 1, 0]])
    with pytest.raises(C.EngineContractError, match=r"node 2 of row 0 is a leaf at depth 1 where other"):
        C.links_to_drafts(cand, nt, ns)
    nt = torch.tensor([[1, 3, 5, -1, -1, -1]])  # node 1: children 3, 4; node 2: child 5
    ns = torch.tensor([[-1, 2, -1, 4, -1, -1]])
    with pytest.raises(C.EngineContractError, match=r"node 2 of row 0 has 1 children where node 1 of row 0"):
        C.links_to_drafts(torch.zeros(1, 6, dtype=torch.int64), nt, ns)
    with pytest.raises(C.EngineContractError, match=r"no node below the root"):
        C.links_to_drafts(torch.zeros(1, 1, dtype=torch.int64), torch.tensor([[-1]]), torch.tensor([[-1]]))
    with pytest.raises(InvalidInputError, match=r"drafts must be integer tokens \(B, 4, 2\)"):
        C.tree_candidates(C.tree_layout(DraftTree((2, 2))), np.zeros((3, 2)))
