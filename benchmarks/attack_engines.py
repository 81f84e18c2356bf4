"""An adversarial check of the engine-contract audit (``md.audit_chain``, ``md.audit_tree``,
``mdtheory audit --engine``) and of the contracts' validators, against reference code written here
independently of the library and of ``examples/verifiers/engines``.

    .venv/bin/python benchmarks/attack_engines.py            # every section
    .venv/bin/python benchmarks/attack_engines.py --only verdicts,lossy

Sections:

- ``laws``: the exact law of each verifier below given fixed drafts (its uniforms integrated by hand)
  against 200,000 calls of its torch code on those drafts (chi-square), and the exact TV of the
  completed law from the target, every draft draw enumerated here (not by ``DraftTree``);
- ``verdicts``: correct verifiers (standard chain rejection, block verification, one-hot chains,
  target-only trees, recursive rejection sampling on sampled trees, iid and without replacement)
  audited on many instances, and their false-rejection rate over seeds against the level;
- ``lossy``: subtly lossy verifiers, each with its exact TV, and the audit's verdict against its
  ``detect_tv`` promise (power over seeds where the TV is near the threshold);
- ``malformed``: outputs that break the contract (a verdict, never a crash), hangs and slow verifiers;
- ``inputs``: bad options and laws through the command line (exit 2, one line);
- ``validators``: the contracts' checks on broken links, and DraftTree <-> links round trips;
- ``claims``: the claims of papers/engines.md recomputed;
- ``registry``: the package's own engine verifiers against the laws here, and audited.

Each failed check prints ``FAIL`` and is listed at the end; the exit status is 1 when any failed.
About 8 minutes on the project's 2-core machine at load average 10 (``--only`` for a part).

The verifiers are module-level functions, so the command line can audit them, e.g.
``mdtheory audit --engine chain benchmarks/attack_engines.py:chain_standard -L 2 --instance toy``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
HERE = "benchmarks/attack_engines.py"


# =============================================================================================
# exact reference machinery (numpy; nothing from mdtheory)
# =============================================================================================
def relu(x):
    return np.clip(x, 0.0, None)


def normalised(x, fallback):
    s = x.sum()
    return x / s if s > 0 else fallback


def target_sequence_law(P, V: int, L1: int) -> np.ndarray:
    """p over V^L1, first token most significant."""
    out = np.zeros(V ** L1)
    for seq in itertools.product(range(V), repeat=L1):
        w = 1.0
        for t in range(L1):
            w *= P(seq[:t])[seq[t]]
        out[code(seq, V)] = w
    return out


def code(seq, V: int) -> int:
    c = 0
    for t in seq:
        c = c * V + int(t)
    return c


def completed_tv(block_law: dict, P, V: int, L: int, p_full: np.ndarray | None = None) -> float:
    """TV between (emitted block, then fresh target tokens up to L + 1) and the target's law; mass of
    blocks that are too long or empty counts as lost."""
    L1 = L + 1
    p_full = target_sequence_law(P, V, L1) if p_full is None else p_full
    lhs = np.zeros(V ** L1)
    lost = 0.0
    for block, w in block_law.items():
        if not 1 <= len(block) <= L1:
            lost += w
            continue
        m = len(block)
        for tail in itertools.product(range(V), repeat=L1 - m):
            seq = tuple(block) + tail
            x = w
            for t in range(m, L1):
                x *= P(seq[:t])[seq[t]]
            lhs[code(seq, V)] += x
    return 0.5 * (float(np.abs(lhs - p_full).sum()) + lost + max(0.0, 1 - sum(block_law.values()) - lost))


def mean_length(block_law: dict) -> float:
    return float(sum(len(b) * w for b, w in block_law.items()))


# ------------------------------------------------------------------------------------- drafts
def node_children(q: np.ndarray, b: int, sampling: str):
    """[(tokens, prob)] of a node's b children drawn from q."""
    V = q.size
    if sampling == "iid":
        for toks in itertools.product(range(V), repeat=b):
            w = float(np.prod([q[t] for t in toks]))
            if w > 0:
                yield toks, w
    elif sampling == "without-replacement":
        for toks in itertools.permutations(range(V), b):
            w, left = 1.0, 1.0
            for t in toks:
                if left <= 0:
                    w = 0.0
                    break
                w *= q[t] / left
                left -= q[t]
            if w > 0:
                yield toks, w
    elif sampling == "top":
        order = sorted(range(V), key=lambda t: (-q[t], t))
        yield tuple(order[:b]), 1.0
    else:
        raise ValueError(sampling)


def enumerate_trees(Q, branching, sampling: str, ctx=()):
    """[(tree, prob)]: a tree is a tuple of (token, subtree) children of the root."""
    if not branching:
        yield (), 1.0
        return
    b, rest = branching[0], branching[1:]
    for toks, w in node_children(Q(ctx), b, sampling):
        subs = [list(enumerate_trees(Q, rest, sampling, ctx + (t,))) for t in toks]
        for combo in itertools.product(*subs):
            ww = w
            for _, x in combo:
                ww *= x
            yield tuple((t, s) for t, (s, _) in zip(toks, combo, strict=True)), ww


def chain_of(tree) -> tuple:
    out = []
    while tree:
        (t, tree), = tree
        out.append(t)
    return tuple(out)


def mixture(P, Q, branching, sampling, law_of) -> dict:
    """The law of the emitted block mixed over every draft draw: law_of(P, Q, tree) -> dict."""
    out: dict = {}
    for tree, w in enumerate_trees(Q, tuple(branching), sampling):
        for blk, x in law_of(P, Q, tree).items():
            out[blk] = out.get(blk, 0.0) + w * x
    return out


# ------------------------------------------------------------------------------------- chain laws
def chain_law(P, Q, x, *, accept=None, residual=None, bonus_row=None, q_row=None, p_row=None) -> dict:
    """Exact law of a step-by-step chain rule on drafts x: at step i accept x_i with accept(p, q, x_i)
    else emit from residual(p, q); all accepted -> bonus from P row bonus_row(k). Hooks default to the
    standard rule."""
    k = len(x)
    accept = accept or (lambda p, q, t: min(1.0, p[t] / q[t]))
    residual = residual or (lambda p, q: normalised(relu(p - q), p))
    prow = p_row or (lambda i: P(x[:i]))
    qrow = q_row or (lambda i: Q(x[:i]))
    out, w = {}, 1.0
    for i in range(k):
        p, q = prow(i), qrow(i)
        a = accept(p, q, x[i])
        r = residual(p, q)
        for y in np.flatnonzero(r):
            out[(*x[:i], int(y))] = out.get((*x[:i], int(y)), 0.0) + w * (1 - a) * r[y]
        w *= a
    bonus = P(x[:k]) if bonus_row is None else P(x[:bonus_row(k)])
    for y in np.flatnonzero(bonus):
        out[(*x, int(y))] = out.get((*x, int(y)), 0.0) + w * bonus[y]
    return out


def block_verification_law(P, Q, x) -> dict:
    """Sun et al. (ICLR 2025) Algorithm 2, exact: tau = max{i : eta_i <= h_i}, h_0 = 1."""
    k = len(x)
    pw = [1.0]
    for i in range(k):
        pw.append(min(1.0, pw[-1] * P(x[:i])[x[i]] / Q(x[:i])[x[i]]))
    h, emit = [], []
    for i in range(k + 1):
        p = P(x[:i])
        if i == k:
            h.append(pw[k])
            emit.append(p)
            continue
        r = relu(pw[i] * p - Q(x[:i]))
        s = r.sum()
        h.append(1.0 if i == 0 else (s / (s + 1 - pw[i]) if s + 1 - pw[i] > 0 else 1.0))
        emit.append(normalised(r, p))
    out = {}
    for i in range(k + 1):
        w = h[i] * math.prod(1 - h[j] for j in range(i + 1, k + 1))
        for y in np.flatnonzero(emit[i]):
            out[(*x[:i], int(y))] = out.get((*x[:i], int(y)), 0.0) + w * emit[i][y]
    return out


def one_hot(V, t):
    e = np.zeros(V)
    e[t] = 1.0
    return e


# ------------------------------------------------------------------------------------- tree laws
def tree_law(P, Q, tree, rule: str) -> dict:
    """Exact law of a tree rule on a fixed tree: "target-only" (remove tried tokens), "rrs" (iid
    recursive rejection), "rrs-wor" (q renormalised off tried tokens), "sibling-row" (target-only,
    every node's row read from its next sibling's, leaves' bonus rows included)."""
    out: dict = {}

    def emit(ctx, r, w):
        for y in np.flatnonzero(r):
            out[ctx + (int(y),)] = out.get(ctx + (int(y),), 0.0) + w * r[y]

    def walk(ctx, sub, w, sib_ctx=None):
        p = P(ctx)
        base = P(sib_ctx) if (rule == "sibling-row" and sib_ctx is not None) else p
        if not sub:
            emit(ctx, base, w)
            return
        if rule in ("target-only", "sibling-row"):
            left = base.copy()
            for j, (y, s) in enumerate(sub):
                nxt = ctx + (sub[j + 1][0],) if j + 1 < len(sub) else None
                tot = left.sum()
                a = left[y] / tot if tot > 0 else 0.0
                if a > 0:
                    walk(ctx + (y,), s, w * a, nxt)
                w *= 1 - a
                left[y] = 0.0
            emit(ctx, normalised(left, base), w)
            return
        q = Q(ctx).copy()
        cur = p.copy()
        for y, s in sub:
            a = min(1.0, cur[y] / q[y]) if q[y] > 0 else 0.0
            if a > 0:
                walk(ctx + (y,), s, w * a)
            w *= 1 - a
            if w == 0:
                return
            cur = normalised(relu(cur - q), cur)
            if rule == "rrs-wor":
                q[y] = 0.0
                q = normalised(q, q)
        emit(ctx, cur, w)

    walk((), tree, 1.0)
    return out


# =============================================================================================
# torch verifiers written here (module level: the command line can load them)
# =============================================================================================
def _q_or_one_hot(draft_token_ids, draft_probs, target_probs):
    if draft_probs is not None:
        return draft_probs
    return torch.nn.functional.one_hot(draft_token_ids, target_probs.shape[-1]).to(target_probs.dtype)


def _chain_rule(ids, q, p, gen, *, ratio=None, residual=None, bonus_row=None, q_shift=False):
    B, k = ids.shape
    dev = p.device
    rows = torch.arange(B, device=dev)
    if q_shift:  # draft row i+1 read for draft i (the last reads its own)
        q = q[:, [min(i + 1, k - 1) for i in range(k)]]
    x = ids[..., None]
    pk, qk = p[:, :k], q
    a = (ratio or (lambda pp, qq: pp / qq))(pk.gather(2, x)[..., 0], qk.gather(2, x)[..., 0]).clamp(max=1)
    u = torch.rand(B, k, generator=gen, device=dev, dtype=p.dtype)
    acc = (u < a).long().cumprod(1)
    m = acc.sum(1)
    res = (residual or (lambda pp, qq: (pp - qq).clamp(min=0)))(pk, qk)
    bonus = p[:, k if bonus_row is None else bonus_row(k)]
    rowm = torch.cat([res, bonus[:, None]], 1)[rows, m]
    rowm = torch.where(rowm.sum(1, keepdim=True) > 0, rowm, p[rows, m])
    tok = torch.multinomial(rowm, 1, generator=gen)[:, 0]
    out = torch.cat([ids, torch.full((B, 1), -1, device=dev, dtype=torch.long)], 1)
    out = torch.where(torch.arange(k + 1, device=dev) < m[:, None], out, -1)
    out[rows, m] = tok
    return out, m


def chain_standard(draft_token_ids, draft_probs, target_probs, generator):
    """Standard chain rejection (lossless); q one-hot when draft_probs is None."""
    q = _q_or_one_hot(draft_token_ids, draft_probs, target_probs)
    return _chain_rule(draft_token_ids, q, target_probs, generator)


def chain_block(draft_token_ids, draft_probs, target_probs, generator):
    """Block verification, Sun et al. Algorithm 2 (lossless), written here."""
    ids, p = draft_token_ids, target_probs
    q = _q_or_one_hot(ids, draft_probs, p)
    B, k = ids.shape
    dev, dt = p.device, p.dtype
    rows = torch.arange(B, device=dev)
    x = ids[..., None]
    r = p[:, :k].gather(2, x)[..., 0] / q.gather(2, x)[..., 0]
    pw = torch.ones(B, k + 1, device=dev, dtype=dt)
    for i in range(k):
        pw[:, i + 1] = torch.minimum(pw[:, i] * r[:, i], torch.ones_like(r[:, i]))
    resid = (pw[:, :k, None] * p[:, :k] - q).clamp(min=0)  # (B, k, V)
    s = resid.sum(-1)
    den = s + 1 - pw[:, :k]
    h = torch.where(den > 0, s / torch.where(den > 0, den, torch.ones_like(den)), torch.ones_like(den))
    h[:, 0] = 1.0
    h = torch.cat([h, pw[:, k:]], 1)
    eta = torch.rand(B, k + 1, generator=generator, device=dev, dtype=dt)
    hit = eta <= h
    idx = torch.arange(k + 1, device=dev).expand(B, -1)
    tau = torch.where(hit, idx, torch.full_like(idx, -1)).max(1).values.clamp(min=0)
    dist = torch.cat([resid, p[:, k:]], 1)[rows, tau]
    dist = torch.where(dist.sum(1, keepdim=True) > 0, dist, p[rows, tau])
    y = torch.multinomial(dist, 1, generator=generator)[:, 0]
    out = torch.where(torch.arange(k + 1, device=dev) < tau[:, None],
                      torch.cat([ids, ids[:, :1]], 1), torch.full((B, k + 1), -1, device=dev))
    out[rows, tau] = y
    return out, tau


# --- lossy chains
def chain_bonus_off_by_one(draft_token_ids, draft_probs, target_probs, generator):
    """LOSSY: the bonus token from row k-1."""
    q = _q_or_one_hot(draft_token_ids, draft_probs, target_probs)
    return _chain_rule(draft_token_ids, q, target_probs, generator, bonus_row=lambda k: k - 1)


def chain_unnormalised_residual(draft_token_ids, draft_probs, target_probs, generator):
    """LOSSY: the correction by inverse CDF on relu(p - q) without dividing by its mass (u past the
    mass falls on the last token)."""
    ids, p = draft_token_ids, target_probs
    q = _q_or_one_hot(ids, draft_probs, p)
    B, k = ids.shape
    V = p.shape[-1]
    rows = torch.arange(B, device=p.device)
    out, m = _chain_rule(ids, q, p, generator)
    res = (p[:, :k] - q).clamp(min=0)
    cdf = torch.cat([res, p[:, k:]], 1)[rows, m].cumsum(1)
    u = torch.rand(B, 1, generator=generator, device=p.device, dtype=p.dtype)
    tok = (cdf <= u).sum(1).clamp(max=V - 1)
    out[rows, m] = tok
    return out, m


def chain_wrong_q_row(draft_token_ids, draft_probs, target_probs, generator):
    """LOSSY: draft i read against draft_probs row i+1."""
    q = _q_or_one_hot(draft_token_ids, draft_probs, target_probs)
    return _chain_rule(draft_token_ids, q, target_probs, generator, q_shift=True)


TEMPERATURE = 0.8


def _tempered(p):
    t = p ** (1 / TEMPERATURE)
    return t / t.sum(-1, keepdim=True)


def chain_target_temperature(draft_token_ids, draft_probs, target_probs, generator):
    """LOSSY: temperature 0.8 applied to the target's rows in acceptance and residual only."""
    q = _q_or_one_hot(draft_token_ids, draft_probs, target_probs)
    k = draft_token_ids.shape[1]
    p = torch.cat([_tempered(target_probs[:, :k]), target_probs[:, k:]], 1)
    return _chain_rule(draft_token_ids, q, p, generator)


def chain_correction_from_target(draft_token_ids, draft_probs, target_probs, generator):
    """LOSSY: accept with min(1, p/q) but on rejection emit a target token (a "bonus") from row i."""
    q = _q_or_one_hot(draft_token_ids, draft_probs, target_probs)
    return _chain_rule(draft_token_ids, q, target_probs, generator, residual=lambda pp, qq: pp)


def chain_extra_token_after_rejection(draft_token_ids, draft_probs, target_probs, generator):
    """INVALID: after a rejection, also append a bonus token (count disagrees with the tokens)."""
    out, m = chain_standard(draft_token_ids, draft_probs, target_probs, generator)
    k = draft_token_ids.shape[1]
    rows = torch.arange(out.shape[0], device=out.device)
    rej = m < k
    extra = torch.multinomial(target_probs[:, k], 1, generator=generator)[:, 0]
    out[rows[rej], (m + 1)[rej]] = extra[rej]
    return out, m


THRESHOLD = 0.95


def chain_threshold(draft_token_ids, draft_probs, target_probs, generator):
    """LOSSY (slightly): accept with min(1, p / (THRESHOLD q)), the standard residual."""
    q = _q_or_one_hot(draft_token_ids, draft_probs, target_probs)
    return _chain_rule(draft_token_ids, q, target_probs, generator,
                       ratio=lambda pp, qq: pp / (THRESHOLD * qq))


# --- trees
def _tree_depth(next_token, next_sibling):
    nt, ns = next_token[0].tolist(), next_sibling[0].tolist()
    best, stack = 0, [(0, 0)]
    while stack:
        j, d = stack.pop()
        best = max(best, d)
        c = nt[j]
        while c >= 0:
            stack.append((c, d + 1))
            c = ns[c]
    return best


def _tree_rule(cand, nt, ns, p, q, gen, rule):
    B, N, V = p.shape
    D = _tree_depth(nt, ns)
    dev, dt = p.device, p.dtype
    rows = torch.arange(B, device=dev)
    node = torch.zeros(B, dtype=torch.long, device=dev)
    out = torch.full((B, D + 1), -1, dtype=torch.long, device=dev)
    walking = torch.ones(B, dtype=torch.bool, device=dev)
    count = torch.zeros(B, dtype=torch.long, device=dev)

    def base_row(n):
        if rule == "sibling-row":
            s = ns[rows, n]
            return p[rows, torch.where(s >= 0, s, n)]
        return p[rows, n]

    cur = base_row(node).clone()
    for depth in range(D):
        child = torch.where(walking, nt[rows, node], -1)
        qq = None if q is None else q[rows, node].clone()
        taken = torch.full((B,), -1, dtype=torch.long, device=dev)
        for _ in range(N):
            trying = (child >= 0) & (taken < 0)
            if not bool(trying.any()):
                break
            c = child.clamp(min=0)
            y = cand[rows, c]
            u = torch.rand(B, generator=gen, device=dev, dtype=dt)
            if rule in ("target-only", "sibling-row"):
                tot = cur.sum(1)
                a = torch.where(tot > 0, cur[rows, y] / tot.clamp(min=1e-300), torch.zeros_like(tot))
            else:  # rrs, rrs-wor
                a = (cur[rows, y] / qq[rows, y]).clamp(max=1).nan_to_num(0.0)
            hit = trying & (u < a)
            miss = trying & ~hit
            taken = torch.where(hit, c, taken)
            if rule in ("target-only", "sibling-row"):
                cur[rows[miss], y[miss]] = 0.0
            else:
                nr = (cur - qq).clamp(min=0)
                mass = nr.sum(1, keepdim=True)
                nr = torch.where(mass > 0, nr / mass.clamp(min=1e-300), cur)
                cur = torch.where(miss[:, None], nr, cur)
                if rule == "rrs-wor":
                    q2 = qq.clone()
                    q2[rows, y] = 0.0
                    q2 = q2 / q2.sum(1, keepdim=True).clamp(min=1e-300)
                    qq = torch.where(miss[:, None], q2, qq)
            child = torch.where(miss, ns[rows, c], -1)
        moved = taken >= 0
        out[rows[moved], depth] = cand[rows[moved], taken[moved]]
        count += moved.long()
        node = torch.where(moved, taken, node)
        cur = torch.where(moved[:, None], base_row(node), cur)
        walking = moved
    cur = torch.where(cur.sum(1, keepdim=True) > 0, cur, p[rows, node])
    out[rows, count] = torch.multinomial(cur, 1, generator=gen)[:, 0]
    return out


def tree_target_only(candidates, next_token, next_sibling, target_probs, draft_probs, generator):
    """Target-only tree verification with tried tokens removed (lossless), written here."""
    return _tree_rule(candidates, next_token, next_sibling, target_probs, None, generator, "target-only")


def tree_rrs(candidates, next_token, next_sibling, target_probs, draft_probs, generator):
    """Recursive rejection sampling at every node, iid children (SpecInfer; lossless)."""
    return _tree_rule(candidates, next_token, next_sibling, target_probs, draft_probs, generator, "rrs")


def tree_rrs_wor(candidates, next_token, next_sibling, target_probs, draft_probs, generator):
    """Recursive rejection sampling for children drawn without replacement (lossless for them)."""
    return _tree_rule(candidates, next_token, next_sibling, target_probs, draft_probs, generator, "rrs-wor")


def tree_sibling_row(candidates, next_token, next_sibling, target_probs, draft_probs, generator):
    """LOSSY: target-only, but a node's children tested against its next sibling's target row."""
    return _tree_rule(candidates, next_token, next_sibling, target_probs, None, generator, "sibling-row")


# =============================================================================================
# contract inputs built here (breadth-first numbering written independently of tree_layout)
# =============================================================================================
def chain_args(P, Q, x, B: int, with_q: bool = True, dtype=torch.float64):
    k = len(x)
    ids = torch.tensor([list(x)] * B, dtype=torch.long)
    p = torch.tensor(np.stack([P(x[:i]) for i in range(k + 1)]), dtype=dtype).expand(B, -1, -1).clone()
    q = torch.tensor(np.stack([Q(x[:i]) for i in range(k)]), dtype=dtype).expand(B, -1, -1).clone() \
        if with_q else None
    return ids, q, p


def tree_args(P, Q, tree, B: int, with_q: bool = True, dtype=torch.float64, perm=None):
    """Breadth-first numbering; ``perm`` (a permutation of 1..N-1) renumbers the non-root nodes."""
    nodes = [((), -1, tree)]  # (context, token, subtree)
    links = []  # (parent index, child index)
    i = 0
    while i < len(nodes):
        ctx, _, sub = nodes[i]
        for t, s in sub:
            links.append((i, len(nodes)))
            nodes.append((ctx + (t,), t, s))
        i += 1
    N = len(nodes)
    new = list(range(N)) if perm is None else [0] + [1 + int(v) for v in perm]
    cand, nt, ns = [-1] * N, [-1] * N, [-1] * N
    cand[0] = 0
    ctxs = [None] * N
    for old, (ctx, t, _) in enumerate(nodes):
        ctxs[new[old]] = ctx
        if old:
            cand[new[old]] = t
    for parent in range(N):
        kids = [c for pa, c in links if pa == parent]
        if kids:
            nt[new[parent]] = new[kids[0]]
            for a, b in zip(kids, kids[1:], strict=False):
                ns[new[a]] = new[b]
    V = P(()).size

    def rep(v):
        return torch.tensor([v] * B, dtype=torch.long)

    p = torch.tensor(np.stack([P(c) for c in ctxs]), dtype=dtype).expand(B, -1, -1).clone()
    q = torch.tensor(np.stack([Q(c) for c in ctxs]), dtype=dtype).expand(B, -1, -1).clone() \
        if with_q else None
    assert p.shape == (B, N, V)
    return rep(cand), rep(nt), rep(ns), p, q


def blocks_of(out) -> dict:
    """{block: count} of output rows (tokens before the -1 padding)."""
    arr = out.cpu().numpy()
    uniq, counts = np.unique(arr, axis=0, return_counts=True)
    return {tuple(int(t) for t in row[row >= 0]): int(c) for row, c in zip(uniq, counts, strict=True)}


def law_pvalue(counts: dict, law: dict) -> tuple[float, float]:
    """(chi-square p-value, sampled TV) of block counts against an exact law; cells under 5 expected
    pooled, a block outside the law's support gives p-value 0."""
    from scipy import stats

    n = sum(counts.values())
    if any(b not in law or law[b] <= 0 for b in counts):
        return 0.0, 1.0
    keys = sorted(law, key=lambda b: -law[b])
    obs, exp, ro, re = [], [], 0.0, 0.0
    for b in keys:
        e = n * law[b]
        if e >= 5:
            obs.append(counts.get(b, 0))
            exp.append(e)
        else:
            ro += counts.get(b, 0)
            re += e
    if re > 0:
        obs.append(ro)
        exp.append(re)
    exp = np.array(exp) * n / sum(exp)
    tv = 0.5 * sum(abs(counts.get(b, 0) / n - law[b]) for b in law)
    if len(obs) < 2:
        return 1.0, tv
    return float(stats.chisquare(obs, exp).pvalue), tv


# =============================================================================================
# the verifiers' registry: torch code, exact law (P, Q, tree) -> dict, contract, lossless?
# =============================================================================================
def _unnormalised(p, q):
    r = relu(p - q)
    r[-1] += 1 - r.sum()
    return r


def _tempered_np(p):
    t = p ** (1 / TEMPERATURE)
    return t / t.sum()


def _chain(rule):
    return lambda P, Q, tree: rule(P, Q, chain_of(tree))


CHAIN = {
    "chain_standard": (chain_standard, _chain(lambda P, Q, x: chain_law(P, Q, x)), True),
    "chain_block": (chain_block, _chain(block_verification_law), True),
    "chain_bonus_off_by_one": (chain_bonus_off_by_one,
                               _chain(lambda P, Q, x: chain_law(P, Q, x, bonus_row=lambda k: k - 1)), False),
    "chain_unnormalised_residual": (chain_unnormalised_residual,
                                    _chain(lambda P, Q, x: chain_law(P, Q, x, residual=_unnormalised)),
                                    False),
    "chain_wrong_q_row": (chain_wrong_q_row, _chain(lambda P, Q, x: chain_law(
        P, Q, x, q_row=lambda i: Q(x[:min(i + 1, len(x) - 1)]))), False),
    "chain_target_temperature": (chain_target_temperature, _chain(lambda P, Q, x: chain_law(
        P, Q, x, p_row=lambda i: _tempered_np(P(x[:i])))), False),
    "chain_correction_from_target": (chain_correction_from_target, _chain(lambda P, Q, x: chain_law(
        P, Q, x, residual=lambda p, q: p)), False),
    "chain_threshold": (chain_threshold, _chain(lambda P, Q, x: chain_law(
        P, Q, x, accept=lambda p, q, t: min(1.0, p[t] / (THRESHOLD * q[t])))), False),
}
TREE = {
    "tree_target_only": (tree_target_only, lambda P, Q, t: tree_law(P, Q, t, "target-only"), True),
    "tree_rrs": (tree_rrs, lambda P, Q, t: tree_law(P, Q, t, "rrs"), True),
    "tree_rrs_wor": (tree_rrs_wor, lambda P, Q, t: tree_law(P, Q, t, "rrs-wor"), True),
    "tree_sibling_row": (tree_sibling_row, lambda P, Q, t: tree_law(P, Q, t, "sibling-row"), False),
}


def point_mass_draft(Q):
    """The draft law of top drafts: one-hot at Q's most likely token (ties to the lower index)."""
    def law(ctx):
        q = Q(ctx)
        return one_hot(q.size, sorted(range(q.size), key=lambda t: (-q[t], t))[0])
    return law


def exact(P, Q, name: str, branching, sampling: str) -> tuple[float, float]:
    """(exact TV of the completed law from the target, exact E|B|) of a registered verifier."""
    f, law, _ = {**CHAIN, **TREE}[name]
    Qr = point_mass_draft(Q) if sampling == "top" and name in CHAIN else Q
    mix = mixture(P, Qr, branching, "top" if sampling == "top" else sampling, law)
    return completed_tv(mix, P, P(()).size, len(branching)), mean_length(mix)


# =============================================================================================
# malformed chain and tree verifiers (module level, for the command line too)
# =============================================================================================
def _ok(ids, q, p, gen):
    return chain_standard(ids, q, p, gen)


def bad_short_output(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return out[:, :-1], m


def bad_float_output(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return out.double(), m


def int32_output(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return out.int(), m.int()


def bad_pad_in_middle(ids, q, p, gen):
    """Rows with no draft accepted become [token, -1, token]."""
    out, m = _ok(ids, q, p, gen)
    out = out.clone()
    out[:, -1] = torch.where(m == 0, out[:, 0], out[:, -1])
    return out, m


def bad_off_path(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    V = p.shape[-1]
    out = out.clone()
    out[:, 0] = torch.where(m > 0, (ids[:, 0] + 1) % V, out[:, 0])
    return out, m


def bad_count(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return out, torch.clamp(m + 1, max=ids.shape[1])


def bad_list(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return [out.tolist(), m.tolist()]


def bad_none(ids, q, p, gen):
    return None


def bad_raises(ids, q, p, gen):
    raise RuntimeError("kernel launch failed\nsecond line")


def bad_system_exit(ids, q, p, gen):
    raise SystemExit(0)


def bad_meta_device(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return out.to("meta"), m.to("meta")


def bad_token_too_large(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    out = out.clone()
    out[torch.arange(out.shape[0]), m] = p.shape[-1] + 10 ** 9
    return out, m


def bad_token_minus_two(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    out = out.clone()
    out[out == -1] = -2
    return out, m


def bad_three_tuple(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return out, m, m


def bad_float_count(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return out, m.double()


def bad_count_column(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return out, m[:, None]


def bad_numpy(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return out.numpy(), m.numpy()


def bad_all_padding(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return torch.full_like(out, -1), torch.full_like(m, -1)


def bad_wrong_batch(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return out[1:], m[1:]


def bad_grad_noncontiguous(ids, q, p, gen):
    out, m = _ok(ids, q, p, gen)
    return out.t().contiguous().t(), m  # a non-contiguous view of the same values


def mutate_drafts_to_match(ids, q, p, gen):
    """Accept everything, after overwriting the drafts in place with the target's own tokens (the
    emitted path is then "the drafts" as the verifier left them)."""
    B, k = ids.shape
    rows = torch.arange(B)
    toks = []
    for i in range(k + 1):
        toks.append(torch.multinomial(p[:, i], 1, generator=gen)[:, 0])
    new = torch.stack(toks[:k], 1)
    ids.copy_(new)  # in place
    return torch.cat([new, toks[k][:, None]], 1), torch.full((B,), k, dtype=torch.long)[rows]


def mutate_target_probs(ids, q, p, gen):
    """Lossless output, but the verifier scribbles on target_probs afterwards."""
    out = _ok(ids, q, p, gen)
    p.fill_(0.0)
    return out


def slow_verifier(ids, q, p, gen):
    time.sleep(2.0)
    return _ok(ids, q, p, gen)


def hang_verifier(ids, q, p, gen):
    while True:
        time.sleep(0.05)


def hang_swallowing(ids, q, p, gen):
    """Catches the watchdog's interrupt and keeps waiting (documented as defeating it)."""
    while True:
        try:
            time.sleep(0.05)
        except BaseException:  # noqa: BLE001
            pass


def tree_bad_other_branch(cand, nt, ns, p, q, gen):
    """INVALID: emits first-child token then a token of a grandchild under the OTHER first-level node
    (never spelled by a path when the two first-level tokens differ)."""
    out = tree_target_only(cand, nt, ns, p, q, gen).clone()
    rows = torch.arange(cand.shape[0])
    a = nt[rows, 0]
    b = ns[rows, a]
    gb = nt[rows, b.clamp(min=0)]
    out[:, 0] = cand[rows, a]
    out[:, 1] = cand[rows, gb.clamp(min=0)]
    out[:, 2:] = -1
    out[:, 2] = 0
    return out


def tree_wide_output(cand, nt, ns, p, q, gen):
    out = tree_target_only(cand, nt, ns, p, q, gen)
    return torch.cat([out, torch.full((out.shape[0], 1), -1)], 1)


def tree_mutate_candidates(cand, nt, ns, p, q, gen):
    """Writes the target's own tokens into candidates (in place), then emits a path of them."""
    B, N = cand.shape
    rows = torch.arange(B)
    node = torch.zeros(B, dtype=torch.long)
    D = _tree_depth(nt, ns)
    out = torch.full((B, D + 1), -1, dtype=torch.long)
    for d in range(D):
        child = nt[rows, node]
        y = torch.multinomial(p[rows, node], 1, generator=gen)[:, 0]
        cand[rows, child] = y
        out[:, d] = y
        node = child
    out[:, D] = torch.multinomial(p[rows, node], 1, generator=gen)[:, 0]
    return out


def tree_mutate_links(cand, nt, ns, p, q, gen):
    """Rewires the links in place (every node its parent's only child), then emits target tokens."""
    D = _tree_depth(nt, ns)
    nt.fill_(-1)
    ns.fill_(-1)
    out = torch.full((cand.shape[0], D + 1), -1, dtype=torch.long)
    out[:, 0] = torch.multinomial(p[:, 0], 1, generator=gen)[:, 0]
    return out


# =============================================================================================
# the sections
# =============================================================================================
FAILS: list[str] = []


def say(text: str) -> None:
    print(text, flush=True)


def fail(text: str) -> None:
    FAILS.append(text)
    say("  FAIL " + text)


def instance(spec: str):
    from mdtheory.blocks import random_instance, sun_toy

    if spec == "toy":
        return sun_toy()
    _, V, seed = spec.split(":")
    return random_instance(int(V), int(seed))


def run_audit(name: str, spec: str, branching, sampling: str = "iid", **kw):
    import mdtheory as md

    f = {**CHAIN, **TREE}[name][0] if isinstance(name, str) and name in {**CHAIN, **TREE} else globals()[name]
    P, Q = instance(spec)
    kw.setdefault("max_seconds", None)
    if name.startswith("chain") or name.startswith("bad_") or name in CHAIN_LIKE:
        return md.audit_chain(f, P, Q, len(branching), deterministic=sampling == "top", **kw)
    return md.audit_tree(f, P, Q, tuple(branching), sampling=sampling, **kw)


CHAIN_LIKE = {"int32_output", "mutate_drafts_to_match", "mutate_target_probs", "slow_verifier",
              "hang_verifier", "hang_swallowing"}


def section_laws() -> None:
    """Torch code vs exact law on fixed drafts (200,000 calls each)."""
    say("== laws: each torch verifier against its exact law on fixed drafts (B = 200,000)")
    rng = np.random.default_rng(7)
    P, Q = instance("random:4:2")
    gen = torch.Generator().manual_seed(11)
    worst = 1.0
    for name, (f, law, _) in CHAIN.items():
        for x in [(0, 1, 2), (3, 3, 1), (2,)]:
            ids, q, p = chain_args(P, Q, x, 200_000)
            pv, tv = law_pvalue(blocks_of(f(ids, q, p, gen)[0]), law(P, Q, _as_tree(x)))
            worst = min(worst, pv)
            say(f"  {name:30s} drafts {x}: chi-square p {pv:.3f}, sampled TV {tv:.4f}")
    for name, (f, law, _) in TREE.items():
        for tree in [((1, ((2, ()), (2, ()))), (1, ((0, ()), (3, ())))),
                     ((0, ((1, ((3, ()), (0, ()))), (1, ((1, ()), (2, ()))))),
                      (0, ((2, ((0, ()), (1, ()))), (3, ((2, ()), (2, ())))))),
                     ((3, ((2, ()),)), (2, ((1, ()),)), (1, ((0, ()),)))]:
            if name == "tree_rrs_wor" and _repeats(tree):
                tree = ((1, ((2, ()), (0, ()))), (3, ((0, ()), (3, ()))))
            N = _nodes(tree)
            out = f(*tree_args(P, Q, tree, 200_000, perm=rng.permutation(N - 1)), gen)
            pv, tv = law_pvalue(blocks_of(out), law(P, Q, tree))
            worst = min(worst, pv)
            say(f"  {name:30s} tree of {N} nodes (shuffled numbering): chi-square p {pv:.3f}, TV {tv:.4f}")
    n_tests = 3 * len(CHAIN) + 3 * len(TREE)
    if worst < 1e-3:
        fail(f"laws: smallest p-value {worst:.2g} over {n_tests} tests")
    say(f"  smallest p-value over {n_tests} tests: {worst:.3f}")


def _as_tree(x):
    t = ()
    for tok in reversed(x):
        t = ((tok, t),)
    return t


def _nodes(tree) -> int:
    return 1 + sum(_nodes(s) for _, s in tree)


def _repeats(tree) -> bool:
    toks = [t for t, _ in tree]
    return len(set(toks)) < len(toks) or any(_repeats(s) for _, s in tree)


def section_verdicts(seeds: int) -> None:
    """Correct verifiers: exact TV 0 here, audit passes; false rejections over seeds."""
    say("== verdicts: correct verifiers (exact TV here; audit verdict, p-value, E|B| vs exact, optimum)")
    cases = []
    for V in (2, 3, 4, 5, 6):
        spec = "toy" if V == 2 else f"random:{V}:{V}"
        for L in range(1, 5):
            if V ** (L + 1) > 1300:
                continue
            for name in ("chain_standard", "chain_block"):
                cases.append((name, spec, (1,) * L, "iid"))
            if L == 2:
                cases += [("chain_standard", spec, (1,) * L, "top"), ("chain_block", spec, (1,) * L, "top")]
    cases += [("chain_standard", "random:2:5", (1, 1, 1, 1), "iid"),
              ("chain_block", "random:2:5", (1, 1, 1), "iid")]
    for spec in ("toy", "random:3:1", "random:4:2"):
        for br in ((2, 2), (3, 1)):
            cases += [("tree_target_only", spec, br, "iid"), ("tree_target_only", spec, br, "top"),
                      ("tree_target_only", spec, br, "without-replacement"), ("tree_rrs", spec, br, "iid"),
                      ("tree_rrs_wor", spec, br, "without-replacement")]
    for spec in ("toy", "random:3:4"):
        cases += [("tree_target_only", spec, (2, 2, 2), "iid"), ("tree_rrs", spec, (2, 2, 2), "iid"),
                  ("tree_rrs_wor", spec, (2, 2, 2), "without-replacement"),
                  ("tree_target_only", spec, (2, 2, 2), "top")]
    rejected = 0
    for name, spec, br, sampling in cases:
        P, Q = instance(spec)
        V = P(()).size
        if sampling in ("without-replacement", "top") and max(br) > V:
            continue  # (refused as bad input: checked in section_inputs)
        small = (V ** sum(math.prod(br[:d + 1]) for d in range(len(br))) <= 50_000) or sampling == "top"
        tv, eb = exact(P, Q, name, br, sampling) if small else (float("nan"), float("nan"))
        t0 = time.perf_counter()
        try:
            r = run_audit(name, spec, br, sampling)
        except Exception as exc:  # noqa: BLE001
            fail(f"verdicts: {name} {spec} {br} {sampling} raised {type(exc).__name__}: {exc}")
            continue
        line = (f"  {name:17s} {spec:11s} {'x'.join(map(str, br)):6s} {sampling[:7]:7s}: exact TV {tv:.1e}, "
                f"{r.verdict} p={r.pvalue:.3f} n={r.samples:,} E|B| {r.block_efficiency:.4f} "
                f"(exact {eb:.4f}, opt {r.optimum if r.optimum is None else round(r.optimum, 4)}) "
                f"{time.perf_counter() - t0:.1f}s")
        say(line)
        if small and tv > 1e-9:
            fail(f"verdicts: my correct {name} has exact TV {tv:.3g} on {spec} {br} {sampling}")
        if r.verdict != "passed":
            rejected += 1
            if r.verdict in ("invalid",) or r.pvalue < 1e-4:
                fail(f"verdicts: correct {name} {spec} {br} {sampling} -> {r.verdict} (p {r.pvalue:.3g})")
        if small and r.optimum is not None and eb > r.optimum + 1e-9:
            fail(f"verdicts: exact E|B| {eb:.6f} of lossless {name} above the reported optimum "
                 f"{r.optimum:.6f}")
        lo, hi = r.block_efficiency_ci95
        if small and not lo - 0.01 <= eb <= hi + 0.01:
            fail(f"verdicts: exact E|B| {eb:.4f} of {name} outside the audit's interval [{lo:.4f}, {hi:.4f}]")
    say(f"  {rejected} of {len(cases)} correct-verifier audits not 'passed' (expected about 1% by chance)")
    # false rejections over seeds (smaller sample sizes: the level does not depend on them)
    say(f"== false rejections over {seeds} seeds (level 0.01)")
    for name, spec, br, sampling, n in [("chain_standard", "toy", (1, 1), "iid", 4000),
                                         ("chain_block", "random:3:1", (1, 1), "iid", 4000),
                                         ("chain_block", "random:4:2", (1, 1, 1), "iid", 20000),
                                         ("chain_standard", "random:3:1", (1, 1), "top", 4000),
                                         ("tree_rrs", "random:3:1", (2, 2), "iid", 4000),
                                         ("tree_target_only", "random:4:2", (2, 2), "top", 8000)]:
        ps = np.array([run_audit(name, spec, br, sampling, samples=n, seed=s).pvalue for s in range(seeds)])
        k1, k10 = int((ps < 0.01).sum()), int((ps < 0.1).sum())
        # one-sided binomial tail: P(X >= k1) for X ~ Bin(seeds, 0.01)
        from scipy import stats
        tail = float(stats.binom.sf(k1 - 1, seeds, 0.01))
        say(f"  {name} {spec} {'x'.join(map(str, br))} {sampling} n={n}: p<0.01 in {k1}/{seeds} "
            f"(binomial tail {tail:.3g}), p<0.1 in {k10}/{seeds}, KS vs uniform p "
            f"{stats.kstest(ps, 'uniform').pvalue:.3f}")
        if tail < 1e-3:
            fail(f"false rejections: {name} {spec} {br} {sampling}: {k1}/{seeds} at level 0.01")


def make_threshold(thr: float):
    def verify(ids, q, p, gen):
        q = _q_or_one_hot(ids, q, p)
        return _chain_rule(ids, q, p, gen, ratio=lambda pp, qq: pp / (thr * qq))
    return verify


def make_rare(xs):
    """Standard chain rejection, except that drafts equal to xs are accepted whole (LOSSY)."""
    want = torch.tensor(xs)

    def verify(ids, q, p, gen):
        out, m = chain_standard(ids, q, p, gen)
        hit = (ids == want).all(1)
        k = ids.shape[1]
        full = torch.cat([ids, torch.multinomial(p[:, k], 1, generator=gen)], 1)
        return torch.where(hit[:, None], full, out), torch.where(hit, torch.full_like(m, k), m)
    return verify


def section_lossy(seeds: int) -> None:
    """Lossy verifiers: exact TV here, and the audit's verdict against its promise."""
    import mdtheory as md

    say("== lossy: exact TV (here) vs the audit's verdict at detect_tv 0.02 (power 0.9 promised)")
    cases = []
    for name in CHAIN:
        if CHAIN[name][2]:
            continue
        for spec, L in (("toy", 2), ("random:3:1", 2), ("random:4:2", 2), ("random:3:1", 3),
                        ("random:5:3", 2)):
            cases += [(name, spec, (1,) * L, "iid")]
        cases += [(name, "random:4:2", (1, 1), "top")]
    for spec in ("toy", "random:3:1", "random:4:2"):
        for br, s in (((2, 2), "iid"), ((3, 1), "iid"), ((2, 2), "without-replacement"), ((2, 2), "top")):
            cases.append(("tree_sibling_row", spec, br, s))
    missed = 0
    for name, spec, br, sampling in cases:
        P, Q = instance(spec)
        tv, eb = exact(P, Q, name, br, sampling)
        r = run_audit(name, spec, br, sampling)
        ok = (r.verdict == "lossy") if tv >= r.detectable_tv else True
        say(f"  {name:28s} {spec:10s} {'x'.join(map(str, br)):5s} {sampling[:7]:7s}: exact TV {tv:.4f} -> "
            f"{r.verdict} (p {r.pvalue:.2g}, TV est {r.tv:.4f}, detectable {r.detectable_tv:.4f}, "
            f"n {r.samples:,})")
        if tv < 1e-9 and r.verdict == "lossy":
            fail(f"lossy: {name} on {spec} {br} {sampling} has exact TV 0 here but the audit says lossy")
        if not ok:
            missed += 1
        if r.verdict == "passed" and tv > r.tv_upper + 0.005:
            fail(f"lossy: {name} {spec} {br} {sampling}: passed with exact TV {tv:.4f} above its 95% bound "
                 f"{r.tv_upper:.4f}")
    say(f"  missed (TV >= detectable, verdict not lossy): {missed} of {len(cases)} "
        "(each allowed with prob. 0.1)")
    if missed > max(2, len(cases) // 10):
        fail(f"lossy: {missed} misses")
    # lossy on one rare draft sequence only (accepts it whole): the loss sits in a few cells
    P, Q = instance("random:5:3")
    for xs in ((4, 1), (0, 0)):
        def law(P_, Q_, tree, xs=xs):
            x = chain_of(tree)
            return chain_law(P_, Q_, x, accept=(lambda p, q, t: 1.0) if x == xs else None)
        tv = completed_tv(mixture(P, Q, (1, 1), "iid", law), P, 5, 2)
        f = make_rare(xs)
        res = [md.audit_chain(f, P, Q, 2, seed=s) for s in range(seeds)]
        rej = sum(r.verdict == "lossy" for r in res)
        say(f"  accepts drafts {xs} whole (q-mass {Q(())[xs[0]] * Q((xs[0],))[xs[1]]:.4f}) on random:5:3: "
            f"exact TV {tv:.4f}, detectable {res[0].detectable_tv:.4f}: rejected {rej}/{seeds}")
        if tv >= res[0].detectable_tv and rej < 0.8 * seeds:
            fail(f"power: rare-draft loss {xs}: {rej}/{seeds}")
    # power at the threshold
    say(f"== power near the threshold ({seeds} seeds each)")
    for thr, spec, L, n in ((0.965, "random:4:2", 2, None), (0.95, "random:4:2", 2, None),
                            (0.97, "random:4:2", 2, None)):
        global THRESHOLD
        old, THRESHOLD = THRESHOLD, thr
        P, Q = instance(spec)
        tv, _ = exact(P, Q, "chain_threshold", (1,) * L, "iid")
        THRESHOLD = old
        f = make_threshold(thr)
        res = [md.audit_chain(f, P, Q, L, seed=s, samples=n, max_seconds=None) for s in range(seeds)]
        rej = sum(r.verdict == "lossy" for r in res)
        det = res[0].detectable_tv
        say(f"  threshold {thr} on {spec} L={L}: exact TV {tv:.4f}, detectable {det:.4f}, "
            f"n {res[0].samples:,}: "
            f"rejected {rej}/{seeds}")
        if tv >= det:
            from scipy import stats
            if stats.binom.cdf(rej, seeds, 0.9) < 1e-3:
                fail(f"power: threshold {thr} on {spec}: {rej}/{seeds} rejections at TV {tv:.4f} >= "
                     f"{det:.4f}")


def _links(N, edges, cand=None, B=1):
    """next_token / next_sibling of a tree given as {parent: [children in order]}."""
    nt, ns = [-1] * N, [-1] * N
    for parent, kids in edges.items():
        nt[parent] = kids[0]
        for a, b in zip(kids, kids[1:], strict=False):
            ns[a] = b
    cand = [0] + [1] * (N - 1) if cand is None else cand
    return [torch.tensor([v] * B) for v in (cand, nt, ns)]


def section_validators() -> None:
    """The contracts' input and output checks, and DraftTree <-> links round trips."""
    from mdtheory.blocks import DraftTree
    from mdtheory.engines.contracts import (
        EngineContractError,
        chain_output_faults,
        check_chain_inputs,
        check_tree_inputs,
        links_to_drafts,
        tree_candidates,
        tree_layout,
        tree_output_faults,
    )

    say("== validators: broken inputs must raise one named EngineContractError")
    g = torch.Generator()

    def p(N, dtype=torch.float64, V=3):
        return torch.full((1, N, V), 1 / V, dtype=dtype)

    def nan_at(x, node):
        return x.index_fill(1, torch.tensor([node]), float("nan"))

    def T(*v):
        return torch.tensor([list(v)])

    tree_cases = {
        "self loop next_token": (T(0, 1, 1), T(1, 1, -1), T(-1, 2, -1)),
        "self loop next_sibling": (T(0, 1, 1), T(1, -1, -1), T(-1, 1, -1)),
        "sibling cycle 1->2->1": (T(0, 1, 1), T(1, -1, -1), T(-1, 2, 1)),
        "child links back to root": (T(0, 1, 1), T(1, 0, -1), T(-1, 2, -1)),
        "unreachable cycle 3<->4": (T(0, 1, 1, 1, 1), T(1, -1, -1, 4, 3), T(-1, 2, -1, -1, -1)),
        "unreachable cycle via siblings": (T(0, 1, 1, 1, 1), T(1, -1, -1, -1, -1), T(-1, 2, -1, 4, 3)),
        "dangling next_token N": (T(0, 1, 1), T(3, -1, -1), T(-1, 2, -1)),
        "dangling next_token -2": (T(0, 1, 1), T(-2, -1, -1), T(-1, 2, -1)),
        "dangling next_sibling huge": (T(0, 1, 1), T(1, -1, -1), T(-1, 2 ** 40, -1)),
        "two parents": (T(0, 1, 1, 1), T(1, 3, 3, -1), T(-1, 2, -1, -1)),
        "root with a sibling": (T(0, 1, 1), T(1, -1, -1), T(2, -1, -1)),
        "candidate -1 inside the tree": (T(0, -1, 1), T(1, -1, -1), T(-1, 2, -1)),
        "candidate V inside the tree": (T(0, 3, 1), T(1, -1, -1), T(-1, 2, -1)),
        "padding node with a candidate": (T(0, 1, 1, 2), T(1, -1, -1, -1), T(-1, 2, -1, -1)),
        "padding node with a link out": (T(0, 1, 1, -1), T(1, -1, -1, 1), T(-1, 2, -1, -1)),
        "root candidate -2": (T(-2, 1, 1), T(1, -1, -1), T(-1, 2, -1)),
    }
    cti, cci = check_tree_inputs, check_chain_inputs
    for name, (cand, nt, ns) in tree_cases.items():
        N = cand.shape[1]
        try:
            cti(cand, nt, ns, p(N), None, g)
            fail(f"validators: tree '{name}' accepted")
        except EngineContractError as exc:
            say(f"  tree {name:32s} -> {str(exc)[:120]}")
        except Exception as exc:  # noqa: BLE001
            fail(f"validators: tree '{name}' raised {type(exc).__name__}: {exc}")
    # deeper than the tree, and the other fields
    cand, nt, ns = T(0, 1, 1, 1), T(1, 3, -1, -1), T(-1, 2, -1, -1)
    more = {
        "depth 1 with a depth-2 node": lambda: cti(cand, nt, ns, p(4), None, g, depth=1),
        "depth -1": lambda: cti(cand, nt, ns, p(4), None, g, depth=-1),
        "depth 1.5": lambda: cti(cand, nt, ns, p(4), None, g, depth=1.5),
        "float links": lambda: check_tree_inputs(cand, nt.double(), ns, p(4), None, g),
        "links of another shape": lambda: check_tree_inputs(cand, nt[:, :3], ns, p(4), None, g),
        "float16 target": lambda: cti(cand, nt, ns, p(4, torch.float16), None, g),
        "float32 draft, float64 target": lambda: cti(cand, nt, ns, p(4), p(4, torch.float32), g),
        "NaN target row of a node": lambda: cti(cand, nt, ns, nan_at(p(4), 3), None, g),
        "unnormalised draft row of a parent": lambda: cti(cand, nt, ns, p(4), p(4) * 1.1, g),
        "negative target": lambda: cti(cand, nt, ns, p(4) * torch.tensor([-1.0, 1, 1]), None, g),
        "generator not a Generator": lambda: cti(cand, nt, ns, p(4), None, np.random.default_rng()),
        "numpy candidates": lambda: check_tree_inputs(cand.numpy(), nt, ns, p(4), None, g),
        "empty batch": lambda: check_tree_inputs(cand[:0], nt[:0], ns[:0], p(4)[:0], None, g),
        "V = 0": lambda: cti(cand, nt, ns, p(4)[..., :0], None, g),
        "chain k = 0": lambda: check_chain_inputs(torch.zeros((1, 0), dtype=torch.long), None, p(1), g),
        "chain id -1": lambda: cci(T(0, -1), None, p(3), g),
        "chain float ids": lambda: cci(T(0, 1).double(), None, p(3), g),
        "chain draft_probs [B, k+1, V]": lambda: cci(T(0, 1), p(3), p(3), g),
        "chain unnormalised float32 row": lambda: cci(T(0, 1), None, p(3, torch.float32) * 1.001, g),
        "chain int target": lambda: cci(T(0, 1), None, torch.ones((1, 3, 3), dtype=torch.long), g),
    }
    for name, call in more.items():
        try:
            call()
            fail(f"validators: '{name}' accepted")
        except EngineContractError as exc:
            say(f"  {name:37s} -> {str(exc)[:110]}")
        except Exception as exc:  # noqa: BLE001
            from mdtheory.errors import MdtheoryError
            if isinstance(exc, MdtheoryError):
                say(f"  {name:37s} -> {type(exc).__name__}: {str(exc)[:100]}")
            else:
                fail(f"validators: '{name}' raised {type(exc).__name__}: {exc}")
    # valid edge cases that must be accepted
    ok_cases = {
        "int32 everything": lambda: check_tree_inputs(cand.int(), nt.int(), ns.int(), p(4), None, g),
        "padding node, NaN rows there": lambda: check_tree_inputs(
            T(0, 1, 1, -1), T(1, -1, -1, -1), T(-1, 2, -1, -1),
            nan_at(p(4), 3), None, g),
        "root-only tree": lambda: check_tree_inputs(T(0), T(-1), T(-1), p(1), None, g),
        "leaf draft row NaN": lambda: cti(cand, nt, ns, p(4), nan_at(p(4), 2), g),
        "float32 row with float32 rounding": lambda: cci(T(0, 1), None, p(3, torch.float32), g),
    }
    for name, call in ok_cases.items():
        try:
            call()
            say(f"  {name:37s} -> accepted")
        except Exception as exc:  # noqa: BLE001
            fail(f"validators: valid '{name}' refused: {type(exc).__name__}: {exc}")
    # fuzz: random links, judged by an independent walk
    fuzz_rng = np.random.default_rng(3)
    agree = accepted = 0
    for _ in range(4000):
        N = int(fuzz_rng.integers(1, 8))
        nt = np.where(fuzz_rng.random(N) < 0.5, -1, fuzz_rng.integers(-1, N, N))
        ns = np.where(fuzz_rng.random(N) < 0.6, -1, fuzz_rng.integers(-1, N, N))
        ca = np.where(fuzz_rng.random(N) < 0.2, -1, fuzz_rng.integers(0, 3, N))
        mine = _my_tree(nt, ns, ca, 3)
        try:
            got = check_tree_inputs(*(torch.tensor(x[None]) for x in (ca, nt, ns)), p(N), None, g)
            ok = True
        except EngineContractError:
            ok = False
        except Exception as exc:  # noqa: BLE001
            fail(f"validators: links {nt.tolist()} / {ns.tolist()} / {ca.tolist()} raised "
                 f"{type(exc).__name__}: {exc}")
            continue
        accepted += ok
        if ok != (mine is not None):
            fail(f"validators: links nt={nt.tolist()} ns={ns.tolist()} cand={ca.tolist()}: contract says "
                 f"{'valid' if ok else 'invalid'}, the independent walk {'valid' if mine else 'invalid'}")
        elif ok and (got.parent[0].tolist(), got.depth[0].tolist()) != mine:
            fail(f"validators: links {nt.tolist()} / {ns.tolist()}: parent/depth {got.parent[0].tolist()} "
                 f"{got.depth[0].tolist()} vs {mine}")
        else:
            agree += 1
    say(f"  fuzz: 4000 random link arrays, {accepted} valid; contract and independent walk agree on {agree}")
    # output checks: paths through repeated siblings
    say("== output checks on a tree with repeated sibling tokens")
    # root -> 1(a=0), 2(a=0); 1 -> 3(b=1), 4(c=2); 2 -> 5(d=0), 6(e=1)... V = 3
    cand, nt, ns = _links(7, {0: [1, 2], 1: [3, 4], 2: [5, 6]}, cand=[0, 0, 0, 1, 2, 0, 1])
    inp = cti(cand, nt, ns, p(7), None, g)
    expect = {(0, 1, 2): True, (0, 2, 0): True, (0, 0, 0): True, (1, 0, -1): False, (0, 1, -1): True,
              (2, -1, -1): True, (0, -1, 1): False, (-1, -1, -1): False, (0, 3, 1): False, (1, -1, -1): True}
    for row, good in expect.items():
        f = tree_output_faults(torch.tensor([list(row)]), inp)
        got = not bool(f.bad[0])
        say(f"  emitted {row}: {'good' if got else 'bad (' + str(f.reason[0]) + ')'}")
        if got != good:
            fail(f"validators: tree output {row} judged {'good' if got else 'bad'}, should be "
                 f"{'good' if good else 'bad'}")
    # chain outputs
    chain_in = check_chain_inputs(T(1, 2), None, p(3), g)
    cexp = {((1, 2, 0), 2): True, ((1, 0, -1), 1): True, ((0, -1, -1), 0): True, ((1, 2, 0), 1): False,
            ((2, -1, -1), 1): False, ((1, -1, 0), 1): False, ((1, 1, -1), 1): True, ((1, 2, -1), 2): False,
            ((1, 2, 0), 3): False}
    for (row, m), good in cexp.items():
        f = chain_output_faults((torch.tensor([list(row)]), torch.tensor([m])), chain_in)
        got = not bool(f.bad[0])
        if got != good:
            fail(f"validators: chain output {row}, m={m} judged {'good' if got else 'bad'}")
    if not any("chain output" in x for x in FAILS):
        say(f"  {len(cexp)} chain outputs judged as expected")
    # round trips
    say("== DraftTree <-> links round trips (random branchings, drafts and renumberings)")
    rng = np.random.default_rng(5)
    trips = 0
    for _ in range(60):
        L = int(rng.integers(1, 5))
        br = tuple(int(b) for b in rng.integers(1, 4, size=L))
        tree = DraftTree(br)
        lay = tree_layout(tree)
        nested = [_random_tree(rng, br, 5) for _ in range(4)]
        drafts = np.stack([_flatten(t) for t in nested])
        if not all(_nested(d, br) == t for d, t in zip(drafts, nested, strict=True)):
            fail("validators: my own flatten/nest disagree")
        cand = tree_candidates(lay, drafts)
        # my own breadth-first numbering from the drafts must give the same candidates
        mine = tree_args(lambda c: np.full(5, 0.2), lambda c: np.full(5, 0.2), nested[0], 1)[0]
        if not np.array_equal(mine[0].numpy()[1:], cand[0, 1:]):
            fail(f"validators: tree_layout numbering differs from breadth-first order on {br}")
        N = lay.nodes
        perm = np.concatenate([[0], 1 + rng.permutation(N - 1)])  # old -> new
        inv = np.argsort(perm)
        relink = [np.where(x[inv] >= 0, perm[np.maximum(x[inv], 0)], -1)
                  for x in (lay.next_token, lay.next_sibling)]
        for nt_, ns_, c_ in ((lay.next_token, lay.next_sibling, cand), (relink[0], relink[1], cand[:, inv])):
            back_tree, back = links_to_drafts(
                torch.tensor(c_), *(torch.tensor(np.broadcast_to(x, c_.shape).copy()) for x in (nt_, ns_)))
            trips += 1
            if tuple(back_tree.branching) != br or not np.array_equal(back, drafts):
                fail(f"validators: round trip of {br} failed")
    say(f"  {trips} round trips (half with shuffled node numbers) checked")
    # links that no DraftTree describes
    for name, (c_, nt_, ns_) in {"unequal children": _links(5, {0: [1, 2], 1: [3, 4]}),
                                 "leaf at two depths": _links(4, {0: [1, 2], 1: [3]}),
                                 "root only": _links(1, {})}.items():
        try:
            links_to_drafts(c_, nt_, ns_)
            fail(f"validators: links_to_drafts accepted {name}")
        except EngineContractError as exc:
            say(f"  links_to_drafts {name:20s} -> {str(exc)[:100]}")
        except Exception as exc:  # noqa: BLE001
            fail(f"validators: links_to_drafts {name} raised {type(exc).__name__}: {exc}")


def _my_tree(nt, ns, cand, V):
    """(parent, depth) lists of valid links (every reachable node reached once, no link to the root,
    unreachable nodes are padding, tree tokens in range), or None."""
    N = len(nt)
    parent, depth = [-1] * N, [-1] * N
    depth[0] = 0
    seen = {0}
    stack = [0]
    if ns[0] != -1:
        return None
    while stack:
        j = stack.pop()
        c = nt[j]
        hops = 0
        while c != -1:
            if c in seen or hops > N:
                return None
            seen.add(c)
            parent[c], depth[c] = j, depth[j] + 1
            stack.append(c)
            c = ns[c]
            hops += 1
    for j in range(N):
        if j not in seen and (cand[j] != -1 or nt[j] != -1 or ns[j] != -1
                              or any(nt[i] == j or ns[i] == j for i in range(N))):
            return None
        if j in seen and j > 0 and not 0 <= cand[j] < V:
            return None
    if not -1 <= cand[0] < V:
        return None
    return parent, depth


def _random_tree(rng, br, V):
    if not br:
        return ()
    return tuple((int(rng.integers(V)), _random_tree(rng, br[1:], V)) for _ in range(br[0]))


def _flatten(tree) -> np.ndarray:
    """(K, L) root-to-leaf paths of a nested tree, depth first."""
    if not tree:
        return np.zeros((1, 0), dtype=np.int64)
    return np.concatenate([np.concatenate([np.full((len(sub := _flatten(s)), 1), t), sub], 1)
                           for t, s in tree])


def _nested(drafts, br):
    """Nested (token, subtree) tree of one (K, L) draft array in DraftTree's row order."""
    def build(rows, d):
        if d == len(br):
            return ()
        width = len(rows) // br[d]
        return tuple((int(drafts[rows[j * width], d]), build(rows[j * width:(j + 1) * width], d + 1))
                     for j in range(br[d]))
    return build(list(range(drafts.shape[0])), 0)



_CALLS = {"n": 0}


def slow_after_first(ids, q, p, gen):
    """Fast on its first call, 3 s on every later one (the pace check after the pilot)."""
    _CALLS["n"] += 1
    if _CALLS["n"] > 1:
        time.sleep(3.0)
    return _ok(ids, q, p, gen)


def section_malformed() -> None:
    """Malformed outputs are an 'invalid' verdict (library) and exit 1 (command line); hangs and slow
    verifiers are refused with a named error."""
    import mdtheory as md
    from mdtheory.errors import MdtheoryError

    say("== malformed outputs (library: verdict; 2,000 problems on random:3:1, L = 2 or tree 2x2)")
    P, Q = instance("random:3:1")
    expect_invalid = [n for n in sorted(globals()) if n.startswith("bad_") and n != "bad_grad_noncontiguous"]
    expect_invalid += ["mutate_drafts_to_match", "tree_bad_other_branch", "tree_wide_output",
                       "tree_mutate_candidates", "chain_extra_token_after_rejection"]
    for name in expect_invalid + ["bad_grad_noncontiguous", "int32_output", "mutate_target_probs",
                                  "tree_mutate_links"]:
        f = globals()[name]
        try:
            if name.startswith("tree_"):
                r = md.audit_tree(f, P, Q, (2, 2), samples=2000)
            else:
                r = md.audit_chain(f, P, Q, 2, samples=2000)
        except BaseException as exc:  # noqa: BLE001
            fail(f"malformed: {name} crashed the audit: {type(exc).__name__}: {exc}")
            continue
        reason = next(iter(r.violations), "")
        say(f"  {name:34s} -> {r.verdict:12s} {reason[:80]}")
        if (name in expect_invalid) != (r.verdict == "invalid"):
            fail(f"malformed: {name} -> {r.verdict}")
    say("== hangs and slow verifiers")
    big = {"samples": 200_000, "batch": 10_000}
    for name, kw in (("hang_verifier", {"max_seconds": 3}), ("slow_verifier", {"max_seconds": 10, **big}),
                     ("slow_after_first", {"max_seconds": 8, **big})):
        t0 = time.perf_counter()
        try:
            r = md.audit_chain(globals()[name], P, Q, 2, **kw)
            fail(f"malformed: {name} ran to a verdict {r.verdict}")
        except MdtheoryError as exc:
            say(f"  {name:18s} -> {type(exc).__name__} after {time.perf_counter() - t0:.1f} s: "
                f"{str(exc)[:110]}")
        except BaseException as exc:  # noqa: BLE001
            fail(f"malformed: {name} raised {type(exc).__name__}: {exc}")
    say("== the same through the command line (exit 1, 'INVALID')")
    chain_len = ["-L", "2"]
    for name, extra in (("bad_none", chain_len), ("bad_raises", chain_len), ("bad_system_exit", chain_len),
                        ("bad_meta_device", chain_len), ("bad_off_path", chain_len),
                        ("tree_bad_other_branch", ["--tree", "2,2"])):
        contract = "tree" if name.startswith("tree_") else "chain"
        rc, out, err = cli("--engine", contract, f"{HERE}:{name}", *extra, "--instance", "random:3:1",
                           "--samples", "2000")
        ok = rc == 1 and "INVALID" in out and "Traceback" not in err
        shown = out.splitlines()[1].strip()[-50:] if len(out.splitlines()) > 1 else err[:80]
        say(f"  {name:22s} rc {rc}: {shown}")
        if not ok:
            fail(f"malformed (cli): {name} rc {rc}, stderr {err[:200]}")


def cli(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "mdtheory", "audit", *args], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


LAWS = """
import numpy as np, torch
def good(ctx): return np.array([0.2, 0.3, 0.5])
def wrong_shape(ctx): return np.ones((3, 1)) / 3
def short_at_depth(ctx): return np.array([0.5, 0.5]) if len(ctx) == 1 else np.array([0.2, 0.3, 0.5])
def nan(ctx): return np.array([np.nan, 0.5, 0.5])
def negative(ctx): return np.array([-0.1, 0.6, 0.5])
def unnormalised(ctx): return np.array([0.2, 0.3, 0.6])
def raising(ctx): raise ValueError("no law\\nhere")
def none(ctx): return None
def string(ctx): return "abc"
def empty(ctx): return np.array([])
def inf(ctx): return np.array([np.inf, 0.0, 0.0])
def exits(ctx): raise SystemExit(0)
def float16(ctx): return np.array([0.2, 0.3, 0.5], dtype=np.float16)
def as_torch32(ctx): return torch.tensor([0.2, 0.3, 0.5], dtype=torch.float32)
def p64(ctx): return np.array([0.1, 0.2, 0.7])
def p32(ctx): return np.array([0.1, 0.2, 0.7], dtype=np.float32)
not_callable = 3
"""


def section_inputs() -> None:
    """Bad options and laws: exit 2 and one line naming the problem."""
    import tempfile

    say("== inputs: bad options and laws through the command line")
    chain = ["--engine", "chain", f"{HERE}:chain_standard"]
    tree = ["--engine", "tree", f"{HERE}:tree_target_only"]
    toy = ["--instance", "toy", "--samples", "1000"]
    with tempfile.TemporaryDirectory() as tmp:
        laws = Path(tmp) / "laws.py"
        laws.write_text(LAWS)
        cases = [(tree + ["--tree", t] + toy) for t in ("0", "-1", "2,x", "", "2,,2", "1.5", "100,100,100",
                                                          "99999999999999999999", "20000000",
                                                          ",".join(["2"] * 40))]
        cases += [(chain + ["-L", "2", "--instance", i, "--samples", "1000"])
                  for i in ("random:0:1", "random:1:1", "random:9:1", "random:99999999:1", "random:3:-1",
                            "random:3:x", "toy2")]
        cases += [(chain + o.split() + (["-L", "2"] if not o.startswith("-L") else []) + toy)
                  for o in ("-L 0", "-L -1", "-L 5000", "-L 1000000", "-L 99999999999999999999",
                            "--detect-tv 0", "--detect-tv 2", "--detect-tv nan", "--batch 0", "--level 1",
                            "--device cuda", "--device foo", "--seed -1", "--dtype float16",
                            "--max-seconds 0")]
        cases += [(chain + ["-L", "2", "--instance", "toy", "--samples", s])
                  for s in ("0", "-1", "9", "1000000000000")]
        for law in ("wrong_shape", "short_at_depth", "nan", "negative", "unnormalised", "raising", "none",
                    "string", "empty", "inf", "exits", "not_callable", "missing"):
            cases.append(chain + ["-L", "2", "--target", f"{laws}:{law}", "--draft", f"{laws}:good",
                                  "--samples", "1000"])
            cases.append(tree + ["--tree", "2,2", "--target", f"{laws}:good", "--draft", f"{laws}:{law}",
                                 "--samples", "1000"])
        cases += [tree + ["--tree", "3,1", "--deterministic"] + toy,
                  tree + ["--tree", "3,1", "--sampling", "without-replacement"] + toy,
                  chain + ["-L", "2", "--tree", "1,1"] + toy,
                  chain + ["-L", "2", "--sampling", "without-replacement"] + toy]
        for args in cases:
            t0 = time.perf_counter()
            try:
                rc, out, err = cli(*args, timeout=120)
            except subprocess.TimeoutExpired:
                fail(f"inputs: {' '.join(args[3:])}: no answer within 120 s")
                continue
            lines = [x for x in err.strip().splitlines() if x.strip()]
            shown = " ".join(a for a in args[3:] if a not in ("--samples", "1000", "--instance", "toy"))
            shown = shown.replace(str(laws), "LAWS")
            msg = (lines[-1] if lines else out.splitlines()[1] if out else "")[:150]
            say(f"  [{shown[:60]}] rc {rc} ({time.perf_counter() - t0:.1f} s): {msg}")
            if "Traceback" in err:
                fail(f"inputs: [{shown}] traceback: {lines[-1][:200]}")
            elif rc != 2 and not (rc in (0, 5) and "problems" in out):
                fail(f"inputs: [{shown}] rc {rc}")
            elif rc == 2 and len(lines) != 1 and not lines[0].startswith("usage:"):
                fail(f"inputs: [{shown}] {len(lines)} lines on stderr")
        # a lossless verifier told "impossible for a lossless verifier"
        rc, out, err = cli("--engine", "chain", "examples/verifiers/engines/chain_rejection.py:verify",
                           "-L", "2", "--target", f"{laws}:p32", "--draft", f"{laws}:p64")
        say("  chain_rejection.py with a float32-rounded target and its float64 draft:")
        for line in out.splitlines()[1:5]:
            say("    " + line.strip())
        if "passed" in out and "impossible for a lossless verifier" in out:
            fail("inputs: a lossless verifier that passed is reported 'E|B| exceeds the optimum (p-value 0): "
                 "impossible for a lossless verifier' (a zero standard deviation in optimum_pvalue)")



# =============================================================================================
# claims of papers/engines.md, recomputed from the examples' documented rules (laws written here)
# =============================================================================================
def law_ignores_q(P, Q, x) -> dict:
    """Block verification with q(x_i) = 1 in the weights and no q in the residuals: h_i = w_i =
    prod_{j<i} p_j(x_{j+1}) (h_0 = 1), the correction drawn from the full target row."""
    k = len(x)
    w = [1.0]
    for i in range(k):
        w.append(w[-1] * P(x[:i])[x[i]])
    h = [1.0] + w[1:]
    out = {}
    for i in range(k + 1):
        mass = h[i] * math.prod(1 - h[j] for j in range(i + 1, k + 1))
        row = P(x[:i])
        for y in np.flatnonzero(row):
            out[(*x[:i], int(y))] = out.get((*x[:i], int(y)), 0.0) + mass * row[y]
    return out


def law_ensemble(P, Q, x, weight=0.5) -> dict:
    def mix(i):
        return weight * P(x[:i]) + (1 - weight) * Q(x[:i])
    return chain_law(P, Q, x, p_row=lambda i: mix(i) if i < len(x) else P(x[:i]),
                     residual=lambda v, q: normalised(relu(v - q), v))


def law_one_hot(P, Q, x) -> dict:
    V = P(()).size
    return chain_law(P, Q, x, q_row=lambda i: one_hot(V, x[i]))


def tree_law_variant(P, Q, tree, rule: str, acc: float = 0.5) -> dict:
    """"threshold" (one coin per node, child j taken when u <= (slices so far)/acc, tried tokens
    removed), "unchanged" (each sibling its own coin against min(1, p/q) of the parent's unchanged
    rows; all failing: relu(p - q) of the original rows; a leaf: its target row), "no-removal"
    (target-only slices laid end to end from the unchanged row; the final draw with the tried
    tokens removed)."""
    out: dict = {}

    def emit(ctx, r, w):
        r = normalised(r, r)
        for y in np.flatnonzero(r):
            out[ctx + (int(y),)] = out.get(ctx + (int(y),), 0.0) + w * r[y]

    def walk(ctx, sub, w):
        p = P(ctx)
        if not sub:
            emit(ctx, p, w)
            return
        if rule == "unchanged":
            q = Q(ctx)
            for y, s in sub:
                a = min(1.0, p[y] / q[y]) if q[y] > 0 else 1.0
                if a > 0:
                    walk(ctx + (y,), s, w * a)
                w *= 1 - a
            if w > 0:
                r = relu(p - q)
                emit(ctx, r if r.sum() > 0 else p, w)
            return
        left, ends, prev = p.copy(), [], 0.0
        for y, _ in sub:
            if rule == "threshold":
                prev += left[y]
                ends.append(min(1.0, prev / acc))
                left[y] = 0.0
            else:  # no-removal: the slice of y is p(y) from the unchanged row
                prev += p[y]
                ends.append(min(1.0, prev))
                left[y] = 0.0
        top = 0.0
        for (y, s), e in zip(sub, ends, strict=True):
            a = max(0.0, e - top)
            top = max(top, e)
            if a > 0:
                walk(ctx + (y,), s, w * a)
        if 1 - top > 1e-15:
            emit(ctx, left if left.sum() > 0 else p, w * (1 - top))

    walk((), tree, 1.0)
    return out


EXAMPLE_LAWS = {
    "chain_rejection": lambda P, Q, t: chain_law(P, Q, chain_of(t)),
    "chain_block_verification": lambda P, Q, t: block_verification_law(P, Q, chain_of(t)),
    "chain_deterministic_drafts": lambda P, Q, t: law_one_hot(P, Q, chain_of(t)),
    "chain_block_ignores_draft_probs": lambda P, Q, t: law_ignores_q(P, Q, chain_of(t)),
    "chain_ensemble": lambda P, Q, t: law_ensemble(P, Q, chain_of(t)),
    "tree_target_only": lambda P, Q, t: tree_law(P, Q, t, "target-only"),
    "tree_target_only_threshold": lambda P, Q, t: tree_law_variant(P, Q, t, "threshold"),
    "tree_siblings_unchanged_parent": lambda P, Q, t: tree_law_variant(P, Q, t, "unchanged"),
}


def _paper_table() -> list[tuple]:
    """Rows of the table of papers/engines.md: (example, L, drafts, instance, verdict, tv, eb, opt)."""
    rows = []
    insts = ("toy", "random:3:1", "random:4:2")
    for line in (ROOT / "papers" / "engines.md").read_text().splitlines():
        if not line.startswith("| chain_") and not line.startswith("| tree_"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        name, drafts = cells[0], cells[1]
        shape = 1 if ", L = 1" in name else 2
        name = name.split(",")[0]
        for inst, cell in zip(insts, cells[2:], strict=True):
            verdict, nums = cell.split(";")
            tv, eb, opt = (float(v) for v in nums.split("/"))
            rows.append((name, shape, drafts, inst, verdict.strip("* "), tv, eb, opt))
    return rows


def top_optimum(P, Q, branching) -> float:
    """1 + sum over the nodes of a top tree of p(path to the node)."""
    total = 1.0
    for tree, _ in enumerate_trees(Q, tuple(branching), "top"):
        def walk(ctx, sub, w):
            nonlocal total
            for y, s in sub:
                total += w * P(ctx)[y]
                walk(ctx + (y,), s, w * P(ctx)[y])
        walk((), tree, 1.0)
    return total


def section_claims() -> None:
    say("== claims: the table of papers/engines.md recomputed (laws from the examples' documented rules)")
    worst_tv = worst_eb = 0.0
    above = lossy = 0
    for name, shape, drafts, spec, verdict, tv_paper, eb_paper, opt in _paper_table():
        P, Q = instance(spec)
        tree_shape = (1,) * shape if name.startswith("chain") else (2, 2)
        sampling = {"sampled": "iid", "w/o repl.": "without-replacement", "top": "top"}[drafts]
        Qr = point_mass_draft(Q) if sampling == "top" and name.startswith("chain") else Q
        mix = mixture(P, Qr, tree_shape, sampling, EXAMPLE_LAWS[name])
        tv, eb = completed_tv(mix, P, P(()).size, len(tree_shape)), mean_length(mix)
        worst_tv, worst_eb = max(worst_tv, abs(tv - tv_paper)), max(worst_eb, abs(eb - eb_paper))
        lossy += tv > 1e-9
        above += tv > 1e-9 and eb > opt + 1e-9
        bad = abs(tv - tv_paper) > 1e-6 or abs(eb - eb_paper) > 1e-4 or (verdict == "lossy") != (tv > 1e-9)
        if sampling == "top":
            best = top_optimum(P, Q, tree_shape)
            bad |= abs(best - opt) > 1e-4
        if bad:
            fail(f"claims: {name} {drafts} {spec}: here TV {tv:.6f} E|B| {eb:.4f}; paper {tv_paper} / "
                 f"{eb_paper} / {opt}")
    say(f"  48 cells: largest |TV here - paper| {worst_tv:.1e}, |E|B| here - paper| {worst_eb:.1e}; "
        f"{lossy} lossy cells, {above} with E|B| above the paper's optimum (paper: 23 and 15)")
    if (lossy, above) != (23, 15):
        fail(f"claims: lossy cells {lossy}, above the optimum {above} (paper: 23, 15)")
    # F1: one-hot q is lossless on ANY drafts: every fixed chain, completed law = target
    say("== F1: q one-hot (and block verification given one-hot q) on every fixed chain")
    worst = 0.0
    for spec, L in (("toy", 3), ("random:3:1", 3), ("random:4:2", 2), ("random:5:3", 2)):
        P, Q = instance(spec)
        V = P(()).size
        p_full = target_sequence_law(P, V, L + 1)
        for x in itertools.product(range(V), repeat=L):
            for law in (law_one_hot(P, Q, x),
                        block_verification_law(P, lambda c, x=x, V=V: one_hot(V, x[len(c)]), x)):
                worst = max(worst, completed_tv(law, P, V, L, p_full))
    say(f"  largest completed TV over every fixed chain (4 instances, L <= 3): {worst:.1e}")
    if worst > 1e-9:
        fail(f"claims F1: a fixed chain with completed TV {worst:.3g}")
    # F4: target-only with removal lossless on every fixed tree (repeats included), and optimal on top trees
    say("== F4: target-only trees on every fixed tree; the no-removal kernel of the remark")
    worst = worst_nr_distinct = 0.0
    worst_nr = 0.0
    for spec, br in (("random:3:1", (2, 2)), ("random:3:1", (3, 1)), ("toy", (2, 2, 1)),
                     ("random:4:2", (2, 1))):
        P, Q = instance(spec)
        V = P(()).size
        p_full = target_sequence_law(P, V, len(br) + 1)
        for tree, _ in enumerate_trees(lambda c, V=V: np.full(V, 1 / V), br, "iid"):
            worst = max(worst, completed_tv(tree_law(P, Q, tree, "target-only"), P, V, len(br), p_full))
            tv_nr = completed_tv(tree_law_variant(P, Q, tree, "no-removal"), P, V, len(br), p_full)
            if _repeats(tree):
                worst_nr = max(worst_nr, tv_nr)
            else:
                worst_nr_distinct = max(worst_nr_distinct, tv_nr)
    say(f"  target-only with removal: largest completed TV over every fixed tree {worst:.1e}")
    say(f"  no-removal kernel: trees with distinct siblings {worst_nr_distinct:.1e}, trees with a repeated "
        f"sibling up to {worst_nr:.4f}")
    if worst > 1e-9 or worst_nr_distinct > 1e-9 or worst_nr < 1e-3:
        fail("claims F4: target-only / no-removal remark not as stated")
    P, Q = instance("random:3:1")
    p = P(())
    tree = ((0, ()), (0, ()))
    acc = sum(w for b, w in tree_law_variant(P, Q, tree, "no-removal").items() if len(b) == 2)
    say(f"  two children both x = 0 under the no-removal kernel: accepted with {acc:.6f}, min(1, 2 p(x)) = "
        f"{min(1.0, 2 * p[0]):.6f}, p(x) = {p[0]:.6f}")
    if abs(acc - min(1.0, 2 * p[0])) > 1e-12:
        fail("claims F4 remark: the repeated token's acceptance is not min(1, 2 p(x))")
    # F3: ensemble at L = 1 loses (1 - w) TV(p, q)
    for spec in ("toy", "random:3:1", "random:4:2"):
        P, Q = instance(spec)
        tv = completed_tv(mixture(P, Q, (1,), "iid", EXAMPLE_LAWS["chain_ensemble"]), P, P(()).size, 1)
        ref = 0.5 * 0.5 * float(np.abs(P(()) - Q(())).sum())
        say(f"  F3 ensemble L = 1 on {spec}: TV {tv:.6f}, (1 - w) TV(p, q) = {ref:.6f}")
        if abs(tv - ref) > 1e-9:
            fail(f"claims F3 on {spec}: {tv} vs {ref}")
    # F6: unchanged-parent siblings are lossless with one child per node and on the toy w/o replacement
    for spec, br, s in (("random:3:1", (1, 1), "iid"), ("random:4:2", (1, 1, 1), "iid"),
                        ("toy", (2, 2), "without-replacement"),
                        ("random:3:1", (2, 2), "without-replacement")):
        P, Q = instance(spec)
        mix = mixture(P, Q, br, s, EXAMPLE_LAWS["tree_siblings_unchanged_parent"])
        tv = completed_tv(mix, P, P(()).size, len(br))
        say(f"  F6 unchanged-parent siblings {spec} {br} {s}: exact TV {tv:.2e}")
        if (tv > 1e-9) != (spec == "random:3:1" and br == (2, 2)):
            fail(f"claims F6: {spec} {br} {s} TV {tv}")



def section_registry() -> None:
    """The package's own engine verifiers (mdtheory.engines.VERIFIERS): the chain rules and the
    target-only tree against the laws written here; every entry audited on the drafts it is for."""
    import mdtheory as md
    from mdtheory.engines.registry import VERIFIERS

    say("== registry: mdtheory.engines.VERIFIERS against the laws here (B = 200,000) and audited")
    P, Q = instance("random:4:2")
    g = torch.Generator().manual_seed(2)
    worst = 1.0
    for name, law in (("standard", CHAIN["chain_standard"][1]), ("block", CHAIN["chain_block"][1])):
        for x in ((0, 1, 2), (3, 3, 1)):
            for with_q in (True, False):
                ids, q, p = chain_args(P, Q, x, 200_000, with_q=with_q)
                def Qx(c, x=x, with_q=with_q):  # one-hot rows at the drafts when draft_probs is None
                    return Q(c) if with_q else one_hot(4, x[len(c)]) if len(c) < len(x) else np.full(4, .25)

                pv, tv = law_pvalue(blocks_of(VERIFIERS[name](ids, q, p, g)[0]), law(P, Qx, _as_tree(x)))
                worst = min(worst, pv)
                given = "given" if with_q else "None "
                say(f"  {name:8s} drafts {x} draft_probs {given}: p {pv:.3f}, TV {tv:.4f}")
    for tree in (((1, ((2, ()), (0, ()))), (3, ((0, ()), (3, ())))),
                 ((0, ((1, ()), (1, ()))), (0, ((2, ()), (1, ()))))):
        out = VERIFIERS["target-only"](*tree_args(P, Q, tree, 200_000, with_q=False), g)
        pv, tv = law_pvalue(blocks_of(out), tree_law(P, Q, tree, "target-only"))
        worst = min(worst, pv)
        say(f"  target-only tree (repeated siblings: {_repeats(tree)}): p {pv:.3f}, TV {tv:.4f}")
    if worst < 1e-3:
        fail(f"registry: a verifier's law differs from the reference (p {worst:.2g})")
    for name, v in VERIFIERS.items():
        for spec in ("toy", "random:3:1"):
            Pi, Qi = instance(spec)
            if v.contract == "chain":
                runs = [md.audit_chain(v, Pi, Qi, 2, deterministic=d) for d in (False, True)]
            elif v.drafts == "deterministic":
                runs = [md.audit_tree(v, Pi, Qi, (2, 2), deterministic=True)]
            elif v.drafts == "chains":
                runs = [md.audit_tree(v, Pi, Qi, (2, 1, 1))]
            else:
                runs = [md.audit_tree(v, Pi, Qi, (2, 2))]
            for r in runs:
                say(f"  {name:17s} {spec:10s} {r.verdict} p {r.pvalue:.3f} E|B| {r.block_efficiency:.4f} "
                    f"(optimum {r.optimum:.4f})")
                if r.verdict != "passed" and (r.verdict == "invalid" or r.pvalue < 1e-4):
                    fail(f"registry: {name} on {spec} -> {r.verdict}")


SECTIONS = ("laws", "verdicts", "lossy", "malformed", "inputs", "validators", "claims", "registry")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--seeds", type=int, default=100, help="seeds of the rate checks")
    args = parser.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    for name in args.only.split(","):
        fn = globals()[f"section_{name}"]
        if name in ("verdicts", "lossy"):
            fn(args.seeds if name == "verdicts" else max(10, args.seeds // 3))
        else:
            fn()
    say(f"\n{len(FAILS)} failures in {time.perf_counter() - t0:.0f} s "
        f"(load average {os.getloadavg()[0]:.1f})")
    for f in FAILS:
        say("  " + f)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
