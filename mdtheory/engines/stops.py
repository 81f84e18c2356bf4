"""What the verifiers of :mod:`mdtheory.engines` share: their randomness, draws by running sums, and
the law of ``emitted`` as a list of stops.

Every verifier here is written in two steps. The first computes, from the contract's tensors and
without randomness, where a row may stop (after how many drafted tokens, or at which tree node) with
what probability, and the law of the token emitted there (a correction or bonus token); the second
draws the stop and the token, each by one float64 uniform from the contract's generator and the
inverse of running sums (:func:`categorical`), computing the token's law at the drawn stop only.
The same first step, evaluated at every stop, is the exact law of ``emitted`` given the inputs
(:class:`StopLaw`, a verifier's ``stops`` method): the tests compare it with the numpy verifiers'
exact laws (:mod:`mdtheory.blocks`), and a chi-square test of large batches checks the second step.

Verifiers that draw a token-level rule's candidate (the optimal rule's earliest draft,
:mod:`mdtheory.engines.optimal`) walk the tree instead, one depth at a time; their ``stops`` walk it
on the host with the numpy rule's law given the drafts.
"""

from __future__ import annotations

from .._jit import njit
from ..errors import InvalidInputError

__all__ = ["StopLaw", "EngineVerifier", "uniforms", "categorical", "residual", "excess_masses", "rows_at",
           "put_rows", "at", "tree_inputs", "chain_inputs"]


def _torch():
    """torch (:func:`mdtheory.torch_bridge.tensors._torch`), the torch bridge loaded on first use:
    the registry of verifiers loads neither (``mdtheory audit --help`` lists it)."""
    from ..torch_bridge.tensors import _torch as load

    return load()


def uniforms(rows: int, count: int, generator, device):
    """``count`` float64 uniforms on [0, 1) per row, from ``generator`` (None: torch's default)."""
    torch = _torch()
    return torch.rand(rows, count, generator=generator, device=device, dtype=torch.float64)


#: :func:`categorical` sums the weights in blocks of this many, then searches one block.
BLOCK = 128
#: Run the compiled kernels (:func:`excess_masses`, :func:`mdtheory.engines.optimal.candidates`) on
#: CPU tensors (the tests turn it off to run the device's route on the CPU).
CPU_KERNELS = True


def _search(weights, u=None, t=None):
    """Per row, the first index whose float64 running sum exceeds ``t`` (B,) (default ``u`` times the
    row's total), moved back to the last index of positive weight where rounding puts ``t`` at or
    past the total; returns it and the running sum before it."""
    torch = _torch()
    c = weights.to(torch.float64).cumsum(-1)
    if t is None:
        t = u * c[:, -1]
    idx = torch.searchsorted(c, t[:, None].contiguous(), right=True)
    idx = torch.minimum(idx, torch.searchsorted(c, c[:, -1:].contiguous(), right=False))
    before = torch.cat([torch.zeros_like(c[:, :1]), c], 1).gather(1, idx)
    return idx.squeeze(1), before.squeeze(1)


def categorical(weights, u):
    """One index per row of ``weights`` (B, K), non-negative and not all zero, drawn with probability
    proportional to the weights by the inverse of their running sums at ``u`` (B,) uniforms.

    Rows longer than :data:`BLOCK` are summed in blocks (in their own dtype), the block found by the
    float64 running sums of the block sums, then the index within it by the block's float64 running
    sums: one read of the row, and the draw's law is the row's up to the rows' own rounding. The
    index is never one of weight zero (:func:`_search`)."""
    torch = _torch()
    B, K = weights.shape
    if K <= BLOCK:
        return _search(weights, u)[0]
    nb = -(-K // BLOCK)
    w = weights.contiguous() if nb * BLOCK == K else torch.nn.functional.pad(weights, (0, nb * BLOCK - K))
    blocks = w.view(B, nb, BLOCK)
    sums = blocks.sum(-1).to(torch.float64)
    t = u * sums.sum(-1)
    j, before = _search(sums, t=t)
    i, _ = _search(blocks[torch.arange(B, device=w.device), j], t=t - before)
    return j * BLOCK + i


def excess_masses(p, u, w):
    """:math:`\\rho_i = \\sum_v (w_i p_i(v) - u_i(v))^+` for i = 1..L-1 (column 0 is 0): (B, L)
    float64, from rows ``p``, ``u`` (B, L, V) (views are fine) and weights ``w`` (B, >= L).

    On a CPU tensor one compiled pass reads each row once, in float64 sums; elsewhere three tensor
    operations a row in the rows' dtype, reusing one buffer."""
    torch = _torch()
    B, L, V = u.shape
    if p.device.type == "cpu" and CPU_KERNELS:
        out = torch.zeros(B, L, dtype=torch.float64)
        _excess(p.detach().numpy(), u.detach().numpy(), w.detach().to(torch.float64).numpy(), out.numpy())
        return out
    rho = [torch.zeros(B, dtype=torch.float64, device=p.device)]
    buf = torch.empty(B, V, dtype=p.dtype, device=p.device)
    for i in range(1, L):
        torch.mul(p[:, i], w[:, i, None].to(p.dtype), out=buf)
        rho.append(buf.sub_(u[:, i]).clamp_(min=0).sum(-1).to(torch.float64))
    return torch.stack(rho, 1)


@njit(cache=True, fastmath={"reassoc", "nsz"})  # a vectorised sum; NaN and inf as IEEE
def _excess(p, u, w, out):
    """:func:`excess_masses` for numpy arrays, into ``out`` (B, L)."""
    B, L, V = u.shape
    for b in range(B):
        for i in range(1, L):
            wi = w[b, i]
            s = 0.0
            for v in range(V):
                x = wi * p[b, i, v] - u[b, i, v]
                s += max(x, 0.0)
            out[b, i] = s


def residual(pr, u, w=None, keep=None):
    """:math:`(w p_r - u)^+` row by row (w None: 1), computed in place in ``u``; the target row
    ``pr`` itself on the rows of ``keep`` (B,) and on those where that positive part is empty (a
    stop of probability zero, or one that rounding gave a probability of order the rows' error), so
    that a drawn row always has mass."""
    torch = _torch()
    if w is None:
        torch.sub(pr, u, out=u)
    else:
        u.neg_().addcmul_(pr, w[:, None].to(pr.dtype))
    u.clamp_(min=0)
    fall = u.sum(-1) <= 0
    if keep is not None:
        fall |= keep
    return u.lerp_(pr, fall[:, None].to(pr.dtype))


def rows_at(t, index):
    """Rows ``t[b, index[b]]`` of a (B, N, V) tensor: (B, V), a new tensor (one copy of each row:
    ``index_select`` on the flattened rows where the tensor is contiguous)."""
    torch = _torch()
    B, N, V = t.shape
    rows = torch.arange(B, device=t.device)
    if t.is_contiguous():
        return t.view(B * N, V).index_select(0, rows * N + index)
    return t[rows, index]


def put_rows(t, index, rows) -> None:
    """``t[b, index[b]] = rows[b]`` in place, for a contiguous (B, N, V) tensor."""
    torch = _torch()
    B, N, V = t.shape
    t.view(B * N, V).index_copy_(0, torch.arange(B, device=t.device) * N + index, rows)


def at(t, index):
    """Entries ``t[b, index[b]]`` of a (B, K) tensor: (B,)."""
    return t.gather(1, index[:, None]).squeeze(1)


class StopLaw:
    """The exact law of ``emitted`` given a verifier's inputs, row by row, as stops.

    Stop s of row b emits the tokens ``prefix[b, s, :length[b, s]]`` followed by one token drawn from
    ``correction[b, s]`` (normalised), with probability ``prob[b, s]``; the probabilities of a row sum
    to one (up to rounding). The law of ``emitted`` is the mixture of these (stops may share a
    prefix: a random selection's paths).

    Attributes
    ----------
    prob : (B, S) float64
    prefix : (B, S, D) int64
        Accepted tokens of each stop, padded with -1.
    length : (B, S) int64
    correction : (B, S, V)
        The emitted token's law at each stop, up to a positive factor (any row where ``prob`` is 0).
    """

    def __init__(self, prob, prefix, length, correction):
        self.prob, self.prefix, self.length, self.correction = prob, prefix, length, correction

    def block_efficiency(self):
        """E|emitted| per row (B,) float64: accepted tokens plus the emitted one."""
        return (self.prob * (self.length + 1).to(self.prob.dtype)).sum(-1)

    def blocks(self, row: int = 0) -> dict[tuple, float]:
        """The law of row ``row``'s ``emitted`` as ``{token tuple: probability}`` (small V)."""
        torch = _torch()
        out: dict[tuple, float] = {}
        corr = self.correction[row].to(torch.float64)
        corr = corr / corr.sum(-1, keepdim=True).clamp(min=1e-300)
        for s in range(self.prob.shape[1]):
            w = float(self.prob[row, s])
            if w == 0:
                continue
            head = tuple(int(v) for v in self.prefix[row, s, :int(self.length[row, s])])
            for y in torch.nonzero(corr[s] > 0).flatten().tolist():
                key = head + (int(y),)
                out[key] = out.get(key, 0.0) + w * float(corr[s, y])
        return out


class EngineVerifier:
    """A verifier in one of the engines' contracts (:mod:`mdtheory.engines`).

    Attributes
    ----------
    name : str
        Registry name (:data:`mdtheory.engines.registry.VERIFIERS`).
    contract : str
        ``"chain"`` or ``"tree"``.
    drafts : str
        What the drafts must be for the verifier to be lossless: ``"sampled"`` (each node's children
        drawn iid from ``draft_probs`` at the node, or the chain's tokens drawn from its rows),
        ``"deterministic"`` (fixed children, e.g. the draft's top tokens; ``draft_probs`` unused),
        ``"chains"`` (n chains of L tokens drawn iid: a tree whose root has n children and every
        other node at most one) or ``"any"`` (chain verifiers: sampled, or ``draft_probs=None``).
    exact : bool
        Whether :meth:`stops` gives the exact law of ``emitted``.
    """

    name = ""
    contract = ""
    drafts = ""
    exact = True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def tree_inputs(what: str, candidates, next_token, next_sibling, target_probs, draft_probs, generator,
                depth, validate: bool, needs_draft: bool):
    """The tree contract's tensors checked: shapes, dtypes, devices and the generator always (no
    host synchronisation); with ``validate`` also the links, token ranges and law rows on the host
    (:func:`mdtheory.engines.contracts.check_tree_inputs`), whose depth then sizes the output.

    Returns (candidates clamped to 0..V-1, next_token, next_sibling, target_probs, draft_probs,
    depth or None)."""
    from .contracts import _check_generator, _ids, _laws, check_tree_inputs

    torch = _torch()
    if draft_probs is None and needs_draft:
        raise InvalidInputError(f"{what} verifies sampled children: it needs draft_probs, got None")
    if validate:
        if generator is None and isinstance(target_probs, torch.Tensor):
            generator = torch.Generator(device=target_probs.device)
        t = check_tree_inputs(candidates, next_token, next_sibling, target_probs, draft_probs, generator,
                              depth=depth)
        cand, nxt, sib, p, q, depth = (t.candidates, t.next_token, t.next_sibling, t.target_probs,
                                       t.draft_probs, t.depth_bound)
    else:
        c = "tree"
        p = _laws(torch, target_probs, "target_probs", (None, None, None), c)
        B, N, V = p.shape
        dev = p.device
        cand = _ids(torch, candidates, "candidates", (B, N), c, dev)
        nxt = _ids(torch, next_token, "next_token", (B, N), c, dev)
        sib = _ids(torch, next_sibling, "next_sibling", (B, N), c, dev)
        q = None if draft_probs is None else _laws(torch, draft_probs, "draft_probs", (B, N, V), c,
                                                   p.dtype, dev)
        if generator is not None:
            _check_generator(torch, generator, dev, c)
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
            raise InvalidInputError(f"{what}: depth must be an integer >= 0, got {depth!r}")
    return cand.clamp(0, p.shape[2] - 1), nxt, sib, p, q, depth


def chain_inputs(what: str, draft_token_ids, draft_probs, target_probs, generator, validate: bool):
    """The chain contract's tensors checked (:func:`mdtheory.engines.contracts.check_chain_inputs`;
    token ranges and law rows only with ``validate``, which reads them on the host): (x, q, p)."""
    from .contracts import check_chain_inputs

    torch = _torch()
    gen = torch.Generator(device=target_probs.device) if generator is None and isinstance(
        target_probs, torch.Tensor) else generator
    t = check_chain_inputs(draft_token_ids, draft_probs, target_probs, gen, check_values=validate)
    return t.draft_token_ids, t.draft_probs, t.target_probs
