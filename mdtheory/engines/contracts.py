"""The serving engines' verifier contracts as tensor layouts: validation, and DraftTree <-> linked lists.

Two contracts, in plain torch (no engine package is needed). B is the batch (independent problems),
V the vocabulary. Laws are ``float32`` or ``float64`` tensors on any one device, all of them in one
dtype; token ids, links and outputs are ``torch.int64`` (``int32`` is accepted and widened, as the
engines' kernels use both); the generator is a :class:`torch.Generator` on the target tensor's
device.

**Chain** (k = L drafted tokens; FlashInfer's ``chain_speculative_sampling``,
flashinfer-ai/flashinfer ``flashinfer/sampling.py``, which TensorRT-LLM's one-model sampler wraps, and
SGLang's Triton chain kernels use this layout)::

    f(draft_token_ids [B, k], draft_probs [B, k, V] or None, target_probs [B, k+1, V], generator)
        -> (output_token_ids [B, k+1] padded with -1, emitted_draft_token_num [B])

Row i of ``target_probs`` is the target's law after the first i drafts (row 0 after the context,
row k the bonus row); row i of ``draft_probs`` is the law that drew draft i+1. ``draft_probs=None``
means deterministic drafts (n-gram, EAGLE top-1): q is one-hot at the drafted token. The output row
holds the m = ``emitted_draft_token_num`` accepted drafts (the first m drafts), then one token (the
correction, or the bonus token when m = k), then -1 up to length k+1.

**Tree** (linked lists; SGLang's ``tree_speculative_sampling_target_only``, sgl-project/sglang
``sgl-kernel/python/sgl_kernel/speculative.py``, whose ``retrive_next_token`` and
``retrive_next_sibling`` are ``next_token`` and ``next_sibling`` here; TensorRT-LLM's dynamic-tree
operations use the same layout)::

    f(candidates [B, N], next_token [B, N], next_sibling [B, N], target_probs [B, N, V],
      draft_probs [B, N, V] or None, generator) -> emitted [B, D+1]

Node 0 is the root: ``candidates[:, 0]`` holds the last accepted token, which verifiers ignore.
``next_token[b, j]`` is node j's first child and ``next_sibling[b, j]`` its next sibling (-1: none).
``target_probs[b, j]`` is the target's law after node j's path; ``draft_probs[b, j]`` the law that
drew node j's children (a leaf's row is unused; None: deterministic children, e.g. the draft's top
tokens). ``emitted[b]`` holds the accepted path's tokens (not the root's) and the final token, then
-1 up to length D + 1, D the tree's depth. Siblings may repeat a token when children are sampled: an
emitted prefix is valid when some path of nodes from the root spells it. A node outside the tree
(padding, for rows whose tree is smaller than N) has ``candidates`` -1, no links, and no link to it.

**Rows are independent problems.** In both contracts a verifier's output rows must be independent
given the inputs: each row's randomness its own (the engines draw their uniforms per row from the
generator), never shared between rows. A verifier whose every row has the right law but which reuses
one uniform across rows is not a verifier of B problems: the audit (:mod:`mdtheory.engines.audit`),
which counts the rows of a call as B independent samples, rejects it.

:func:`check_chain_inputs` and :func:`check_tree_inputs` validate the inputs (shapes, dtypes,
devices, token ranges, -1 padding, tree links: a dangling index, a cycle, a node with two parents, a
node deeper than the tree) and return them widened; every violation is one
:class:`EngineContractError` naming the batch row, the node and the field. :func:`chain_output_faults`
and :func:`tree_output_faults` check a verifier's output against its inputs row by row (the audit's
"invalid output" verdict, :mod:`mdtheory.engines.audit`); :func:`check_chain_output` and
:func:`check_tree_output` raise on the first bad row. :func:`tree_layout`, :func:`tree_candidates` and
:func:`links_to_drafts` convert a :class:`~mdtheory.blocks.trees.DraftTree` (branching factors per
depth, drafts as a (K, L) array of root-to-leaf paths) to the linked-list layout and back.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ..blocks.markov import row_tolerance
from ..blocks.trees import DraftTree
from ..errors import InvalidInputError

__all__ = ["EngineContractError", "ChainInputs", "TreeInputs", "TreeLayout", "OutputFaults",
           "check_chain_inputs", "check_tree_inputs", "chain_output_faults", "tree_output_faults",
           "check_chain_output", "check_tree_output", "tree_layout", "tree_candidates",
           "links_to_drafts", "CONTRACTS"]


def _torch():
    """torch, the torch bridge loaded on first use (the registry's help loads neither)."""
    from ..torch_bridge.tensors import _torch as load

    return load()


#: The contracts by name.
CONTRACTS = ("chain", "tree")


class EngineContractError(InvalidInputError):
    """Tensors that break a verifier contract: the message names the field, the batch row and the
    node (or position) at fault."""


class ChainInputs(NamedTuple):
    """Validated chain inputs: ids widened to int64, shapes read off."""

    draft_token_ids: Any
    draft_probs: Any
    target_probs: Any
    generator: Any
    batch: int
    length: int
    vocab: int


class TreeInputs(NamedTuple):
    """Validated tree inputs: ids and links widened to int64, and the tree read off the links.

    ``parent`` and ``depth`` are int64 numpy arrays (B, N): a node's parent (-1 for the root and for
    padding) and depth (0 at the root, -1 for padding); ``depth_bound`` is D, the emitted width less
    one."""

    candidates: Any
    next_token: Any
    next_sibling: Any
    target_probs: Any
    draft_probs: Any
    generator: Any
    batch: int
    nodes: int
    vocab: int
    parent: np.ndarray
    depth: np.ndarray
    depth_bound: int


class TreeLayout(NamedTuple):
    """A :class:`~mdtheory.blocks.trees.DraftTree` as linked lists, nodes numbered breadth first
    (the root 0, then depth 1 in path order, then depth 2, ...). Every array is int64 numpy.

    ``path_nodes[k, d]`` is the node at depth d + 1 on root-to-leaf path k (row k of the drafts)."""

    next_token: np.ndarray
    next_sibling: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    path_nodes: np.ndarray

    @property
    def nodes(self) -> int:
        return int(self.next_token.size)


class OutputFaults(NamedTuple):
    """A verifier output checked row by row.

    ``bad`` is a boolean numpy array (B,) of the rows that break the contract and ``reason`` the
    reason of each (an object array, None on good rows); ``tokens`` (B, width) int64 and
    ``count`` (B,) the emitted tokens of the good rows (count = accepted drafts + 1)."""

    bad: np.ndarray
    reason: np.ndarray
    tokens: np.ndarray
    count: np.ndarray

    def first(self) -> int | None:
        """The first bad row (None when every row is good)."""
        rows = np.flatnonzero(self.bad)
        return int(rows[0]) if rows.size else None


# ---------------------------------------------------------------------------------------- inputs
def _fail(contract: str, text: str):
    raise EngineContractError(f"{contract} contract: {text}")


def _ids(torch, x, name: str, shape: tuple, contract: str, device=None):
    """An int32/int64 tensor of ``shape`` (None: any size there) widened to int64."""
    if not isinstance(x, torch.Tensor):
        _fail(contract, f"{name} must be a torch tensor, got {type(x).__name__}")
    if x.dtype not in (torch.int32, torch.int64):
        _fail(contract, f"{name} must be torch.int64 (or int32), got {x.dtype}")
    if x.ndim != len(shape) or any(s is not None and s != t for s, t in zip(shape, x.shape, strict=True)):
        want = ", ".join("?" if s is None else str(s) for s in shape)
        _fail(contract, f"{name} must have shape [{want}], got {list(x.shape)}")
    if device is not None and x.device != device:
        _fail(contract, f"{name} is on {x.device}, the laws on {device}")
    return x.long()


def _laws(torch, x, name: str, shape: tuple, contract: str, dtype=None, device=None):
    if not isinstance(x, torch.Tensor):
        _fail(contract, f"{name} must be a torch tensor, got {type(x).__name__}")
    if x.dtype not in (torch.float32, torch.float64):
        _fail(contract, f"{name} must be float32 or float64, got {x.dtype}")
    if dtype is not None and x.dtype != dtype:
        _fail(contract, f"{name} is {x.dtype}, target_probs {dtype}: the laws share one dtype")
    if x.ndim != len(shape) or any(s is not None and s != t for s, t in zip(shape, x.shape, strict=True)):
        want = ", ".join("?" if s is None else str(s) for s in shape)
        _fail(contract, f"{name} must have shape [{want}], got {list(x.shape)}")
    if device is not None and x.device != device:
        _fail(contract, f"{name} is on {x.device}, target_probs on {device}")
    return x


def _check_rows(torch, x, name: str, used, contract: str, what: str) -> None:
    """Rows ``x[b, j]`` with ``used[b, j]`` (a bool tensor, or None: all) are probability vectors."""
    tol = row_tolerance(x)
    bad = ~torch.isfinite(x).all(-1) | (x < 0).any(-1) | ((x.sum(-1, dtype=torch.float64) - 1).abs() > tol)
    if used is not None:
        bad &= used
    if bool(bad.any()):
        b, j = (int(v) for v in torch.nonzero(bad)[0])
        row = x[b, j]
        detail = "has a NaN or infinite entry" if not bool(torch.isfinite(row).all()) else \
            "has a negative entry" if bool((row < 0).any()) else \
            f"sums to {float(row.sum(dtype=torch.float64)):.9g}, not 1 within {tol:.2g}"
        _fail(contract, f"{name}[{b}, {j}] ({what} {j}) is not a probability vector: it {detail}")


def _check_generator(torch, generator, device, contract: str) -> None:
    if not isinstance(generator, torch.Generator):
        kind = type(generator)
        where = {"builtins": "", "numpy.random._generator": "numpy.random."}.get(kind.__module__,
                                                                              f"{kind.__module__}.")
        _fail(contract, f"generator must be a torch.Generator, got {where}{kind.__qualname__}")
    gd = torch.device(generator.device)
    if gd.type != device.type or (gd.index or 0) != (device.index or 0):
        _fail(contract, f"the generator is on {gd}, target_probs on {device}")


def check_chain_inputs(draft_token_ids, draft_probs, target_probs, generator, *,
                       check_values: bool = True) -> ChainInputs:
    """Validate the chain contract's inputs (module notes) and return them with ids widened to int64.

    Parameters
    ----------
    draft_token_ids : Tensor [B, k], int64 or int32
        Tokens in 0..V-1 (no padding: every row has k drafts).
    draft_probs : Tensor [B, k, V] or None
        Row i: the law that drew draft i+1; None for deterministic drafts.
    target_probs : Tensor [B, k+1, V], float32 or float64
        Row i: the target's law after the first i drafts; row k the bonus row.
    generator : torch.Generator
        On target_probs' device.
    check_values : bool
        Also check every law row (finite, non-negative, summing to one within the dtype's rule,
        :func:`mdtheory.blocks.markov.row_tolerance`) and the token range: one pass over the tensors.

    Raises
    ------
    EngineContractError
        Naming the field, and the batch row and position at fault.

    Examples
    --------
    >>> import torch
    >>> p = torch.full((1, 3, 2), 0.5, dtype=torch.float64)
    >>> ok = check_chain_inputs(torch.tensor([[0, 1]], dtype=torch.int32), p[:, :2], p, torch.Generator())
    >>> ok.draft_token_ids.dtype, ok.length, ok.vocab
    (torch.int64, 2, 2)
    >>> check_chain_inputs(torch.tensor([[0, 2]]), None, p, torch.Generator())
    Traceback (most recent call last):
    ...
    mdtheory.engines.contracts.EngineContractError: chain contract: draft_token_ids[0, 1] = 2 is outside 0..1
    """
    torch = _torch()
    c = "chain"
    target_probs = _laws(torch, target_probs, "target_probs", (None, None, None), c)
    B, k1, V = target_probs.shape
    if B < 1 or k1 < 2 or V < 1:
        _fail(c, "target_probs must be [B, k+1, V] with B >= 1, k >= 1, V >= 1, got "
                 f"{list(target_probs.shape)}")
    k, device = k1 - 1, target_probs.device
    ids = _ids(torch, draft_token_ids, "draft_token_ids", (B, k), c, device)
    if draft_probs is not None:
        draft_probs = _laws(torch, draft_probs, "draft_probs", (B, k, V), c, target_probs.dtype, device)
    _check_generator(torch, generator, device, c)
    if check_values:
        out = (ids < 0) | (ids >= V)
        if bool(out.any()):
            b, i = (int(v) for v in torch.nonzero(out)[0])
            _fail(c, f"draft_token_ids[{b}, {i}] = {int(ids[b, i])} is outside 0..{V - 1}")
        _check_rows(torch, target_probs, "target_probs", None, c, "after draft")
        if draft_probs is not None:
            _check_rows(torch, draft_probs, "draft_probs", None, c, "drawing draft")
    return ChainInputs(ids, draft_probs, target_probs, generator, B, k, V)


def _tree_structure(nt: np.ndarray, ns: np.ndarray, cand: np.ndarray, c: str):
    """Parent and depth of every node (B, N) from the links, or the named error."""
    B, N = nt.shape
    for name, x in (("next_token", nt), ("next_sibling", ns)):
        bad = (x < -1) | (x >= N)
        if bad.any():
            b, j = np.argwhere(bad)[0]
            _fail(c, f"{name}[{b}, {j}] = {x[b, j]} is a dangling index (nodes 0..{N - 1}, -1 for none)")
        bad = x == np.arange(N)
        if bad.any():
            b, j = np.argwhere(bad)[0]
            _fail(c, f"{name}[{b}, {j}] = {j} links node {j} to itself: a cycle")
    if (ns[:, 0] != -1).any():
        b = int(np.flatnonzero(ns[:, 0] != -1)[0])
        _fail(c, f"next_sibling[{b}, 0] = {ns[b, 0]}: the root (node 0) has no siblings")
    # every link as (field, target) flattened over the rows; the in-degree of each node
    rows = np.repeat(np.arange(B), N)
    links = [(f, x.ravel()) for f, x in (("next_token", nt), ("next_sibling", ns))]
    indeg = np.zeros(B * N, dtype=np.int64)
    for _, x in links:
        hit = x >= 0
        np.add.at(indeg, rows[hit] * N + x[hit], 1)
    indeg = indeg.reshape(B, N)
    if (indeg[:, 0] > 0).any():
        b = int(np.flatnonzero(indeg[:, 0] > 0)[0])
        f, j = next((f, int(s)) for f, x in links for s in np.flatnonzero((x == 0) & (rows == b)) - b * N)
        _fail(c, f"{f}[{b}, {j}] = 0 links back to the root: a cycle")
    if (indeg > 1).any():
        b, j = (int(v) for v in np.argwhere(indeg > 1)[0])
        where = [f"{f}[{b}, {int(s) - b * N}]" for f, x in links
                 for s in np.flatnonzero((x == j) & (rows == b))]
        _fail(c, f"node {j} of row {b} has two parents: {' and '.join(where)} both link to it")
    parent = np.full((B, N), -1, dtype=np.int64)
    depth = np.full((B, N), -1, dtype=np.int64)
    depth[:, 0] = 0
    for _ in range(N):  # each round settles at least one more node of every row's tree
        known = depth >= 0
        changed = False
        for x, child in ((nt, True), (ns, False)):
            hit = known & (x >= 0)
            if not hit.any():
                continue
            bb, jj = np.nonzero(hit)
            tt = x[bb, jj]
            new = depth[bb, tt] < 0
            if new.any():
                bb, jj, tt = bb[new], jj[new], tt[new]
                depth[bb, tt] = depth[bb, jj] + (1 if child else 0)
                parent[bb, tt] = jj if child else parent[bb, jj]
                changed = True
        if not changed:
            break
    # a node outside the tree must be padding: candidate -1, no links, nothing linking to it
    outside = depth < 0
    linked = outside & ((nt >= 0) | (ns >= 0) | (indeg > 0) | (cand != -1))
    if linked.any():
        b, j = (int(v) for v in np.argwhere(linked)[0])
        pred = {int(x[b, s]): s for _, x in ((0, nt), (1, ns)) for s in range(N) if x[b, s] >= 0}
        seen, node = [j], j
        for _ in range(N):
            node = pred.get(node)
            if node is None or node in seen:
                break
            seen.append(node)
        if node is not None and node in seen:
            cycle = seen[seen.index(node):]
            _fail(c, f"nodes {sorted(cycle)} of row {b} link to each other in a cycle, apart from the root")
        _fail(c, f"node {j} of row {b} is not reachable from the root (node 0) but is not padding "
                 "(candidate -1, no links to or from it)")
    return parent, depth


def check_tree_inputs(candidates, next_token, next_sibling, target_probs, draft_probs, generator, *,
                      depth: int | None = None, check_values: bool = True) -> TreeInputs:
    """Validate the tree contract's inputs (module notes) and return them widened, with the tree.

    Parameters
    ----------
    candidates, next_token, next_sibling : Tensor [B, N], int64 or int32
        Node tokens (node 0 the root; -1 for padding nodes), first child and next sibling (-1: none).
    target_probs : Tensor [B, N, V], float32 or float64
        The target's law after each node's path.
    draft_probs : Tensor [B, N, V] or None
        The law that drew each node's children; None for deterministic children.
    generator : torch.Generator
        On target_probs' device.
    depth : int, optional
        D, the tree's depth (the emitted width is D + 1): a node deeper than D is refused. Default:
        the deepest node of the batch.
    check_values : bool
        Also check the token range and the law rows that a verifier reads (target rows of the
        tree's nodes, draft rows of the nodes with children).

    Raises
    ------
    EngineContractError
        A dangling link, a link back to the root or a cycle, a node with two parents, a node outside
        the tree that is not padding, a node deeper than ``depth``, a token out of range, a bad law
        row, or a bad shape, dtype, device or generator; each naming the field, batch row and node.

    Examples
    --------
    >>> import torch
    >>> p = torch.full((1, 3, 2), 0.5, dtype=torch.float64)
    >>> ids = lambda *v: torch.tensor([v])
    >>> t = check_tree_inputs(ids(0, 1, 0), ids(1, -1, -1), ids(-1, 2, -1), p, p, torch.Generator())
    >>> t.depth.tolist(), t.depth_bound
    ([[0, 1, 1]], 1)
    >>> check_tree_inputs(ids(0, 1, 0), ids(1, -1, -1), ids(-1, 2, 1), p, p, torch.Generator())
    Traceback (most recent call last):
    ...
    mdtheory.engines.contracts.EngineContractError: tree contract: node 1 of row 0 has two parents: \
next_token[0, 0] and next_sibling[0, 2] both link to it
    """
    torch = _torch()
    c = "tree"
    target_probs = _laws(torch, target_probs, "target_probs", (None, None, None), c)
    B, N, V = target_probs.shape
    if B < 1 or N < 1 or V < 1:
        _fail(c, f"target_probs must be [B, N, V] with B, N, V >= 1, got {list(target_probs.shape)}")
    device = target_probs.device
    cand = _ids(torch, candidates, "candidates", (B, N), c, device)
    nt = _ids(torch, next_token, "next_token", (B, N), c, device)
    ns = _ids(torch, next_sibling, "next_sibling", (B, N), c, device)
    if draft_probs is not None:
        draft_probs = _laws(torch, draft_probs, "draft_probs", (B, N, V), c, target_probs.dtype, device)
    _check_generator(torch, generator, device, c)
    cand_np = cand.cpu().numpy()
    parent, node_depth = _tree_structure(nt.cpu().numpy(), ns.cpu().numpy(), cand_np, c)
    deepest = int(node_depth.max())
    if depth is None:
        depth = deepest
    elif isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 0:
        raise InvalidInputError(f"depth must be an integer >= 0, got {depth!r}")
    if deepest > depth:
        b, j = (int(v) for v in np.argwhere(node_depth > depth)[0])
        _fail(c, f"node {j} of row {b} is at depth {node_depth[b, j]}, deeper than the tree's depth {depth}")
    if check_values:
        inside = node_depth > 0
        bad = inside & ((cand_np < 0) | (cand_np >= V))
        if bad.any():
            b, j = (int(v) for v in np.argwhere(bad)[0])
            _fail(c, f"candidates[{b}, {j}] = {cand_np[b, j]} is outside 0..{V - 1} at a node of the tree")
        bad = (node_depth == 0) & ((cand_np < -1) | (cand_np >= V))
        if bad.any():
            b = int(np.flatnonzero(bad[:, 0])[0])
            _fail(c, f"candidates[{b}, 0] = {cand_np[b, 0]} (the root) is outside -1..{V - 1}")
        used = torch.as_tensor(node_depth >= 0, device=device)
        _check_rows(torch, target_probs, "target_probs", used, c, "after node")
        if draft_probs is not None:
            has_child = torch.as_tensor(node_depth >= 0, device=device) & (nt >= 0)
            _check_rows(torch, draft_probs, "draft_probs", has_child, c, "drawing the children of node")
    return TreeInputs(cand, nt, ns, target_probs, draft_probs, generator, B, N, V, parent, node_depth,
                      int(depth))


# ---------------------------------------------------------------------------------------- outputs
def _as_ids(torch, x, name: str, shape: tuple, device) -> tuple[np.ndarray | None, str | None]:
    """A verifier's integer output as int64 numpy, or (None, why it breaks the contract)."""
    if not isinstance(x, torch.Tensor):
        return None, f"{name} is a {type(x).__name__}, not a torch tensor"
    if x.dtype not in (torch.int64, torch.int32):
        return None, f"{name} is {x.dtype}, not torch.int64"
    if tuple(x.shape) != shape:
        return None, f"{name} has shape {list(x.shape)}, not {list(shape)}"
    if x.device != device:
        return None, f"{name} is on {x.device}, not on the inputs' {device}"
    return x.detach().cpu().numpy().astype(np.int64), None


def _padded(out: np.ndarray, V: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens before the padding, a reason per row or None) of rows "tokens, then -1"."""
    B, W = out.shape
    reason = np.full(B, None, dtype=object)
    is_tok = (out >= 0) & (out < V)
    is_pad = out == -1
    stray = ~(is_tok | is_pad)
    count = np.where(is_pad.any(1), is_pad.argmax(1), W)
    after = np.arange(W) >= count[:, None]
    for mask, text in ((stray.any(1), f"a token outside 0..{V - 1} that is not the -1 padding"),
                       ((after & is_tok).any(1), "padding in the middle: a token after a -1"),
                       (count == 0, "no token emitted")):
        reason[mask & (reason == None)] = text  # noqa: E711 - elementwise on an object array
    return count, reason


def _faults(reason: np.ndarray, out: np.ndarray | None, count: np.ndarray, W: int) -> OutputFaults:
    bad = reason != None  # noqa: E711 - elementwise on an object array
    tokens = np.full((reason.size, W), -1, dtype=np.int64) if out is None else np.where(bad[:, None], -1, out)
    return OutputFaults(bad, reason, tokens, np.where(bad, 0, count))


def _whole(B: int, W: int, text: str) -> OutputFaults:
    reason = np.full(B, text, dtype=object)
    return _faults(reason, None, np.zeros(B, dtype=np.int64), W)


def chain_output_faults(output, inputs: ChainInputs) -> OutputFaults:
    """Check a chain verifier's output ``(output_token_ids [B, k+1], emitted_draft_token_num [B])``
    against its validated inputs, row by row.

    A row is good when its m = ``emitted_draft_token_num`` is in 0..k, its first m + 1 entries are
    tokens in 0..V-1 followed by -1, and its first m tokens are the first m drafts. A return value
    that is not such a pair of tensors (a wrong dtype, shape or device) makes every row bad.

    Examples
    --------
    >>> import torch
    >>> p = torch.full((2, 3, 2), 0.5, dtype=torch.float64)
    >>> inp = check_chain_inputs(torch.tensor([[0, 1], [1, 1]]), None, p, torch.Generator())
    >>> out = torch.tensor([[0, 0, -1], [0, -1, -1]]), torch.tensor([1, 0])
    >>> chain_output_faults(out, inp).reason.tolist()
    [None, None]
    >>> out = torch.tensor([[1, 0, -1], [0, -1, 1]]), torch.tensor([1, 0])
    >>> chain_output_faults(out, inp).reason.tolist()
    ['a token not on the accepted path: output 0 is not draft 0', 'padding in the middle: a token after a -1']
    """
    torch = _torch()
    B, k, V = inputs.batch, inputs.length, inputs.vocab
    W = k + 1
    if not (isinstance(output, (tuple, list)) and len(output) == 2):
        return _whole(B, W, f"returned {type(output).__name__}, not the pair (output_token_ids, "
                            "emitted_draft_token_num)")
    device = inputs.target_probs.device
    out, why = _as_ids(torch, output[0], "output_token_ids", (B, W), device)
    if why is None:
        num, why = _as_ids(torch, output[1], "emitted_draft_token_num", (B,), device)
    if why is not None:
        return _whole(B, W, why)
    count, reason = _padded(out, V)
    free = reason == None  # noqa: E711
    off = free & ((num < 0) | (num > k))
    reason[off] = [f"emitted_draft_token_num {m} is outside 0..{k}" for m in num[off]]
    free &= ~off
    wrong = free & (count != num + 1)
    reason[wrong] = [f"emitted_draft_token_num {m} with {_tokens(c)} before the padding (wrong length)"
                     for m, c in zip(num[wrong], count[wrong], strict=True)]
    free &= ~wrong
    drafts = inputs.draft_token_ids.cpu().numpy()
    differ = (out[:, :k] != drafts) & (np.arange(k) < num[:, None])
    miss = free & differ.any(1)
    reason[miss] = [f"a token not on the accepted path: output {i} is not draft {i}"
                    for i in differ[miss].argmax(1)]
    return _faults(reason, out, count, W)


def _tokens(c: int) -> str:
    return "1 token" if c == 1 else f"{c} tokens"


def tree_output_faults(emitted, inputs: TreeInputs) -> OutputFaults:
    """Check a tree verifier's ``emitted [B, D+1]`` against its validated inputs, row by row.

    A row is good when it holds c >= 1 tokens in 0..V-1 followed by -1, and its first c - 1 tokens
    are spelled by some path of nodes from the root (siblings may repeat a token). A value that is
    not an int64 (or int32) tensor of shape [B, D+1] on the inputs' device makes every row bad.
    """
    torch = _torch()
    B, V, D = inputs.batch, inputs.vocab, inputs.depth_bound
    W = D + 1
    out, why = _as_ids(torch, emitted, "emitted", (B, W), inputs.target_probs.device)
    if why is not None:
        return _whole(B, W, why)
    count, reason = _padded(out, V)
    cand = inputs.candidates.cpu().numpy()
    parent = inputs.parent
    has_parent = parent >= 0
    rows = np.arange(B)[:, None]
    alive = np.zeros(cand.shape, dtype=bool)
    alive[:, 0] = True
    free = reason == None  # noqa: E711
    for i in range(D):
        need = free & (count > i + 1)  # token i is a drafted token on the path
        if not need.any():
            break
        alive = has_parent & alive[rows, np.maximum(parent, 0)] & (cand == out[:, i:i + 1])
        miss = need & ~alive.any(1)
        first = "first token" if i == 0 else f"first {i + 1} tokens"
        reason[miss] = f"a token not on the accepted path: no path of nodes spells the {first}"
        free &= ~miss
    return _faults(reason, out, count, W)


def _raise_first(faults: OutputFaults, contract: str, out) -> None:
    b = faults.first()
    if b is not None:
        shown = f" {out[b].tolist()}" if getattr(out, "ndim", 0) == 2 and b < out.shape[0] else ""
        _fail(contract, f"output row {b}{shown}: {faults.reason[b]}")


def check_chain_output(output, inputs: ChainInputs) -> OutputFaults:
    """:func:`chain_output_faults`, raising :class:`EngineContractError` on the first bad row."""
    faults = chain_output_faults(output, inputs)
    first = output[0] if isinstance(output, (tuple, list)) and output else None
    _raise_first(faults, "chain", first)
    return faults


def check_tree_output(emitted, inputs: TreeInputs) -> OutputFaults:
    """:func:`tree_output_faults`, raising :class:`EngineContractError` on the first bad row."""
    faults = tree_output_faults(emitted, inputs)
    _raise_first(faults, "tree", emitted)
    return faults


# ---------------------------------------------------------------------------------------- DraftTree <-> links
def tree_layout(tree: DraftTree) -> TreeLayout:
    """The linked lists of a :class:`~mdtheory.blocks.trees.DraftTree`'s shape.

    Nodes are numbered breadth first: the root 0, then the b_1 nodes of depth 1, then the
    b_1 b_2 nodes of depth 2, each depth in the order of the drafts' rows (mixed radix), so that
    ``path_nodes[k, d]`` is node ``offset_d + k // stride_d``.

    >>> lay = tree_layout(DraftTree((2, 1)))
    >>> lay.next_token.tolist(), lay.next_sibling.tolist(), lay.path_nodes.tolist()
    ([1, 3, 4, -1, -1], [-1, 2, -1, -1, -1], [[1, 3], [2, 4]])
    """
    if not isinstance(tree, DraftTree):
        raise InvalidInputError(f"tree must be a DraftTree, got {tree!r}")
    widths = [math.prod(tree.branching[:d + 1]) for d in range(tree.length)]  # nodes at depth d + 1
    offsets = np.cumsum([1] + widths)  # first node of depth d + 1 is offsets[d]
    N = int(offsets[-1])
    nt = np.full(N, -1, dtype=np.int64)
    ns = np.full(N, -1, dtype=np.int64)
    parent = np.full(N, -1, dtype=np.int64)
    depth = np.zeros(N, dtype=np.int64)
    for d, b in enumerate(tree.branching):
        above = np.array([0]) if d == 0 else np.arange(offsets[d - 1], offsets[d])
        kids = offsets[d] + np.arange(above.size * b)
        nt[above] = kids[::b]
        ns[kids] = np.where(np.arange(kids.size) % b == b - 1, -1, kids + 1)
        parent[kids] = np.repeat(above, b)
        depth[kids] = d + 1
    rows = np.arange(tree.n)
    path_nodes = np.stack([offsets[d] + rows // tree.stride[d] for d in range(tree.length)], axis=1)
    return TreeLayout(nt, ns, parent, depth, path_nodes.astype(np.int64))


def tree_candidates(layout: TreeLayout, drafts, root_token: int = 0) -> np.ndarray:
    """``candidates`` (B, N) int64 of drafts (B, K, L) (or one tree (K, L)) laid out as ``layout``:
    node ``path_nodes[k, d]`` holds ``drafts[:, k, d]``, the root ``root_token``."""
    x = np.asarray(drafts)
    if x.ndim == 2:
        x = x[None]
    K, L = layout.path_nodes.shape
    if x.ndim != 3 or x.shape[1:] != (K, L) or x.dtype.kind not in "iu":
        raise InvalidInputError(f"drafts must be integer tokens (B, {K}, {L}) for this tree, got "
                                f"{x.dtype} {x.shape}")
    cand = np.empty((x.shape[0], layout.nodes), dtype=np.int64)
    cand[:, 0] = root_token
    cand[:, layout.path_nodes.ravel()] = x.reshape(x.shape[0], -1)
    return cand


def links_to_drafts(candidates, next_token, next_sibling,
                    sampling: str = "iid") -> tuple[DraftTree, np.ndarray]:
    """The :class:`~mdtheory.blocks.trees.DraftTree` and drafts (B, K, L) of linked-list trees.

    Every row must be one tree of the same shape: at each depth every node has the same number of
    children, and every leaf is at the same depth L (what a DraftTree can describe). A node's
    children are read in sibling order, so the drafts' rows are the root-to-leaf paths in
    depth-first order (the mixed radix of :class:`DraftTree`). ``sampling`` names how the children
    were drawn (the layout does not say).

    Raises
    ------
    EngineContractError
        Links that break the contract (:func:`check_tree_inputs`'s checks) or a tree that no
        DraftTree describes (named: row, node, children found and expected).

    >>> import torch
    >>> lay = tree_layout(DraftTree((2, 2)))
    >>> drafts = np.array([[[0, 1], [0, 2], [3, 1], [3, 0]]])
    >>> cand = tree_candidates(lay, drafts)
    >>> tree, back = links_to_drafts(torch.as_tensor(cand), torch.as_tensor(lay.next_token[None]),
    ...                              torch.as_tensor(lay.next_sibling[None]))
    >>> tree, (back == drafts).all()
    (DraftTree((2, 2), 'iid'), np.True_)
    """
    torch = _torch()
    c = "tree"
    ts = []
    for name, x in (("candidates", candidates), ("next_token", next_token), ("next_sibling", next_sibling)):
        x = torch.as_tensor(x) if isinstance(x, np.ndarray) else x
        if not isinstance(x, torch.Tensor) or x.ndim != 2:
            _fail(c, f"{name} must be an integer tensor [B, N]")
        ts.append(_ids(torch, x, name, (None, None), c).cpu().numpy())
    cand, nt, ns = ts
    if not cand.shape == nt.shape == ns.shape:
        _fail(c, f"candidates, next_token and next_sibling must share one shape, got "
                 f"{[list(x.shape) for x in ts]}")
    _tree_structure(nt, ns, cand, c)
    B = cand.shape[0]
    rows = np.arange(B)[:, None]
    frontier = np.zeros((B, 1), dtype=np.int64)
    branching, levels = [], []
    while True:
        first = nt[rows, frontier]
        if (first < 0).all():
            break
        if (first < 0).any():
            b, i = (int(v) for v in np.argwhere(first < 0)[0])
            _fail(c, f"node {frontier[b, i]} of row {b} is a leaf at depth {len(branching)} where other "
                     "nodes have children: not a DraftTree (every leaf at one depth)")
        kids, node = [first], first
        while True:
            node = np.where(node >= 0, ns[rows, np.maximum(node, 0)], -1)
            if (node < 0).all():
                break
            kids.append(node)
        counts = sum((k >= 0).astype(np.int64) for k in kids)
        want = int(counts[0, 0])
        if (counts != want).any():
            b, i = (int(v) for v in np.argwhere(counts != want)[0])
            _fail(c, f"node {frontier[b, i]} of row {b} has {counts[b, i]} children where node "
                     f"{frontier[0, 0]} of row 0 at the same depth has {want}: not a DraftTree")
        frontier = np.stack(kids[:want], axis=2).reshape(B, -1)
        branching.append(want)
        levels.append(frontier)
    if not branching:
        _fail(c, "the trees have no node below the root")
    tree = DraftTree(branching, sampling)
    drafts = np.stack([cand[rows, lv[:, np.arange(tree.n) // tree.stride[d]]]
                       for d, lv in enumerate(levels)], axis=2)
    return tree, drafts
