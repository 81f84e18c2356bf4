"""Khisti et al.'s importance-sampling rule with the truncated LP (ICLR 2025, §4 and Appendix G).

Details follow a third-party implementation of the paper's appendix as papers/theory.md §6 records them, not
the paper text itself. The truncated program is stored compactly (papers/theory.md, "The truncated LP
without a V x V state"): a stage is its s tokens with LP variables, an s x s block of keep-probabilities and
a fixed rule for every pair that touches the rest, so preparation is O(V) per stage plus an LP whose size
depends on s only.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import sparse

from .._jit import njit
from ..errors import InvalidInputError
from .base import SelectionRule, speculative_step

__all__ = ["KhistiLP", "Stage", "truncated_stage", "tournament_stage", "nucleus_truncation",
           "default_size", "stage_lp", "bucket_score", "keep_first", "MAX_S", "FLOW_S",
           "NUCLEUS_TOP_P", "RESTS", "BUCKET_EDGES", "BUCKETS"]

#: Largest truncation of the default: its stage flow has s(s - 1)/2 = 2,016 pairs.
MAX_S = 64
#: Largest truncation whose stage flow runs by augmenting paths (numba); larger explicit ones go to
#: HiGHS.
FLOW_S = MAX_S
#: The default's cost model (:func:`default_size`): seconds per pair of one stage's flow (the
#: augmenting paths and the s x s block; at most 1.5e-7 measured, s = 16..64), and the flow's budget
#: per stage: this share of the stage's passes over V, and at least the floor.
FLOW_PAIR_SECONDS, FLOW_SHARE, FLOW_FLOOR_SECONDS = 1.5e-7, 0.1, 1.5e-4
#: Nucleus of the default truncation: Khisti et al.'s experiments sample with top-p, p = 0.95, and
#: run the truncated LP on the tokens that survive it.
NUCLEUS_TOP_P = 0.95
#: How a pair of two tokens outside the truncation is settled: the token with the higher score keeps,
#: the left one (the previous winner) on a tie. ``"bucket"``: the score is :math:`p - \ell r`'s bucket
#: (:func:`bucket_score`: no sort, the sort-free variant); ``"rank"``: the rank of :math:`p - \ell r`
#: (a full sort, the third-party reading).
RESTS = ("bucket", "rank")
#: Bucket edges of the sort-free score: 0 and ±m 2^e for m in {1, 1.25, 1.5, 1.75}, e = -126..0, all
#: exact in float32 and float64 (so a key scores the same in either).
BUCKET_EDGES = np.sort(np.concatenate([[0.0], *[
    s * m * np.ldexp(1.0, np.arange(-126, 1)) for s in (-1.0, 1.0) for m in (1.0, 1.25, 1.5, 1.75)]]))
#: Levels of the bucket score.
BUCKETS = BUCKET_EDGES.size + 1


def nucleus_truncation(p: np.ndarray, q: np.ndarray, top_p: float = NUCLEUS_TOP_P) -> int:
    """The tokens of the union of the top-p nuclei of p and q (a full sort of each).

    The nucleus of a law is the smallest set of its most likely tokens whose mass reaches top_p.

    >>> nucleus_truncation(np.array([0.6, 0.3, 0.1]), np.array([0.1, 0.3, 0.6]), 0.8)
    3
    """
    keep = np.zeros(p.size, dtype=bool)
    for law in (p, q):
        order = np.argsort(-law, kind="stable")
        inside = np.searchsorted(np.cumsum(law[order]), top_p * law.sum()) + 1
        keep[order[:inside]] = True
    return int(keep.sum())


def _top(key: np.ndarray, k: int) -> np.ndarray:
    """The k largest entries of key, by value descending, ties by index (no full sort for k < V)."""
    if k >= key.size:
        return np.argsort(-key, kind="stable")
    if k <= 8:  # a few argmax passes beat a partition; argmax keeps the first of ties
        work, out = key.astype(float), np.empty(k, dtype=np.int64)
        for i in range(k):
            out[i] = np.argmax(work)
            work[out[i]] = -np.inf
        return out
    cand = np.argpartition(-key, k - 1)[:k]
    return cand[np.lexsort((cand, -key[cand]))]


def default_size(V: int) -> int:
    """The default truncation: as many tokens as the stage flow's estimated cost allows, at most V.

    The largest s <= :data:`MAX_S` whose flow (s(s - 1)/2 pairs at :data:`FLOW_PAIR_SECONDS`) stays
    within :data:`FLOW_SHARE` of the stage's passes over V (:attr:`KhistiLP.STAGE_TOKEN_SECONDS` a
    token), and at least :data:`FLOW_FLOOR_SECONDS`: 45 up to V = 30,000, growing to 64 at
    V = 60,000 (papers/theory.md, "Default truncation and its guard").

    >>> default_size(50), default_size(32_000), default_size(128_000)
    (45, 46, 64)
    """
    budget = max(FLOW_FLOOR_SECONDS, FLOW_SHARE * KhistiLP.STAGE_TOKEN_SECONDS * V)
    s = 1
    while s < MAX_S and FLOW_PAIR_SECONDS * (s + 1) * s / 2 <= budget:
        s += 1
    return min(s, V)


def bucket_score(key: np.ndarray) -> np.ndarray:
    """A monotone integer score of key in [0, :data:`BUCKETS`): the number of
    :data:`BUCKET_EDGES` below key, so equal scores mean keys within a factor 1.25 of each other (or
    both below 2^-126 in magnitude): ``np.searchsorted(BUCKET_EDGES, key)``, from the binary exponent
    and mantissa in a few passes; ``torch.bucketize`` gives the same scores on the device.

    >>> bucket_score(np.array([-0.5, 0.0, 1e-30, 0.3, 0.5, 0.6])).tolist()
    [7, 508, 615, 1006, 1009, 1010]
    """
    key = np.ascontiguousarray(key, dtype=float)
    return _bucket_kernel(key, (BUCKET_EDGES.size - 1) // 2)


@njit(cache=True, error_model="numpy")
def _bucket_kernel(key, half):
    """Edges below each key from the bits of its binary exponent and mantissa (``half`` edges of each
    sign). A normal |x| = (1 + f) 2^(E - 1023), f = mantissa / 2^52: the magnitude edges m 2^k below
    or at |x| number t = (top two mantissa bits) + 4 (E - 897), and x is an edge exactly when its other
    50 mantissa bits are 0; subnormals lie below every nonzero edge."""
    bits = key.view(np.int64)
    low = (np.int64(1) << 50) - 1
    out = np.empty(key.size, dtype=np.int64)
    for k in range(key.size):
        mag = bits[k] & 0x7FFFFFFFFFFFFFFF
        if mag == 0:
            out[k] = half
            continue
        e = mag >> 52
        t = ((mag >> 50) & 3) + 4 * (e - 897) if e > 0 else -1
        if bits[k] > 0:
            out[k] = half + 1 + min(max(t + (1 if mag & low else 0), 0), half)
        else:
            out[k] = half - min(max(t + 1, 0), half)
    return out


class Stage(NamedTuple):
    """One tournament stage, stored without a V x V matrix.

    The keep-left probability of a pair (left i, right j), :meth:`keep_column`: ``block`` inside
    ``top``; 1 for i in ``top`` and j outside, 0 the other way round; both outside:
    ``score[i] >= score[j]`` (1 where ``score`` is None: keep the previous winner).
    """

    top: np.ndarray    #: (s,) tokens with LP variables
    block: np.ndarray  #: (s, s) keep-left probabilities among them, diagonal 1
    score: np.ndarray | None  #: (V,) non-negative integer scores of all tokens, or None
    V: int

    def keep_column(self, x: int) -> np.ndarray:
        """Keep-left probabilities v(i, x) of every left token i against the right token x."""
        pos = np.flatnonzero(self.top == x)
        if pos.size:
            col = np.zeros(self.V)
            col[self.top] = self.block[:, pos[0]]
            return col
        col = np.ones(self.V) if self.score is None else (self.score >= self.score[x]).astype(float)
        col[self.top] = 1.0
        return col


def keep_first(V: int) -> Stage:
    """The stage that always keeps the previous winner (the tournament's winner is the first draft)."""
    return Stage(np.zeros(0, dtype=np.int64), np.ones((0, 0)), None, V)


def stage_lp(pt: np.ndarray, mu0: np.ndarray, m: np.ndarray, a: np.ndarray, b: np.ndarray
             ) -> np.ndarray:
    """The truncated stage's LP as a flow (HiGHS): how much of each pair's mass goes to its first token.

    Pair e of tokens (a_e, b_e) carries mass m_e; the amount y_e in [0, m_e] goes to a_e and the rest to
    b_e. Maximise :math:`\\sum_k \\min(p_k, \\mu^0_k + \\sum_{a_e = k} y_e + \\sum_{b_e = k} (m_e - y_e))`.

    Returns
    -------
    y : ndarray, shape (E,)
    """
    from .._highs import solve_lp  # HiGHS is a reference here, not a need of the rule

    s, E = pt.size, m.size
    if E == 0:
        return np.zeros(0)
    rows = np.concatenate([a, b])
    vals = np.concatenate([-np.ones(E), np.ones(E)])
    cols = np.concatenate([np.arange(E), np.arange(E)])
    A = sparse.hstack([sparse.coo_matrix((vals, (rows, cols)), shape=(s, E)), sparse.eye(s)]).tocsc()
    upper = mu0 + np.bincount(b, weights=m, minlength=s)
    cost = np.concatenate([np.zeros(E), np.ones(s)])
    sol = solve_lp(cost, A, np.full(s, -np.inf), upper, maximize=True,
                   col_upper=np.concatenate([m, pt]))
    return sol.x[:E]


@njit(cache=True, error_model="numpy")
def _stage_flow(d, m, a, b, tol, max_paths):
    """Maximum flow from the pairs (supply m) to the tokens (capacity d) of a truncated stage: a
    greedy start (each pair fills its first token, then its second), then shortest augmenting paths
    (Edmonds-Karp) over the tokens, each token's pairs listed once (O(E) a path). Returns the flow of
    each pair to its second token b_e and the number of augmentations (``max_paths`` only if it
    stopped early: still a feasible flow)."""
    s, E = d.size, m.size
    start = np.zeros(s + 1, dtype=np.int64)  # the pairs of each token (both ends), CSR
    for e in range(E):
        start[a[e] + 1] += 1
        start[b[e] + 1] += 1
    for k in range(s):
        start[k + 1] += start[k]
    incident = np.empty(2 * E, dtype=np.int64)
    fill = start[:-1].copy()
    for e in range(E):
        incident[fill[a[e]]] = e
        fill[a[e]] += 1
        incident[fill[b[e]]] = e
        fill[b[e]] += 1
    fa, fb = np.zeros(E), np.zeros(E)
    supply, room = m.copy(), d.copy()
    for e in range(E):  # greedy start: a feasible flow the paths then improve
        x = min(supply[e], room[a[e]])
        if x > 0.0:
            fa[e] += x
            supply[e] -= x
            room[a[e]] -= x
        x = min(supply[e], room[b[e]])
        if x > 0.0:
            fb[e] += x
            supply[e] -= x
            room[b[e]] -= x
    via = np.empty(s, dtype=np.int64)      # the pair a token was reached from
    back = np.empty(E, dtype=np.int64)     # the token a pair was reached from (-1: the source)
    queue = np.empty(s, dtype=np.int64)
    for it in range(max_paths):
        via[:] = -1
        back[:] = -2
        head, tail, end = 0, 0, -1
        for e in range(E):  # the source's pairs, then tokens, then back along flows into a token
            if supply[e] > tol:
                back[e] = -1
                for k in (a[e], b[e]):
                    if via[k] < 0:
                        via[k] = e
                        queue[tail] = k
                        tail += 1
        while head < tail and end < 0:
            k = queue[head]
            head += 1
            if room[k] > tol:
                end = k
                break
            for j in range(start[k], start[k + 1]):
                e = incident[j]
                if back[e] == -2 and ((a[e] == k and fa[e] > tol) or (b[e] == k and fb[e] > tol)):
                    back[e] = k
                    other = b[e] if a[e] == k else a[e]
                    if via[other] < 0:
                        via[other] = e
                        queue[tail] = other
                        tail += 1
        if end < 0:
            return fb, it
        amount, k = room[end], end  # the bottleneck, walking back to the source
        while True:
            e = via[k]
            if back[e] == -1:
                amount = min(amount, supply[e])
                break
            prev = back[e]
            amount = min(amount, fa[e] if a[e] == prev else fb[e])
            k = prev
        room[end] -= amount
        k = end
        while True:
            e = via[k]
            if a[e] == k:
                fa[e] += amount
            else:
                fb[e] += amount
            if back[e] == -1:
                supply[e] -= amount
                break
            prev = back[e]
            if a[e] == prev:
                fa[e] -= amount
            else:
                fb[e] -= amount
            k = prev
    return fb, max_paths


@njit(cache=True, error_model="numpy")
def _stage_blocks(pt, lt, rt, lo, ro, count, a, b, tol, max_paths):
    """The pairs of a stage's top for every row at once: :func:`truncated_stage`'s flow
    (:func:`_stage_flow`), keep-left block and law on the top (:func:`_block_law`), row i's top
    tokens at p ``pt[i]``, left ``lt[i]`` and right ``rt[i]`` masses (0 beyond its first
    ``count[i]``, which take no flow), outside masses ``lo[i]``, ``ro[i]``. Returns the blocks
    (B, S, S) and the laws on the top (B, S)."""
    B, S = pt.shape
    E = a.size
    block = np.ones((B, S, S))
    law = np.empty((B, S))
    mass, d = np.empty(E), np.empty(S)
    for i in range(B):
        for e in range(E):
            mass[e] = lt[i, a[e]] * rt[i, b[e]] + lt[i, b[e]] * rt[i, a[e]]
        for k in range(S):
            mu0 = lt[i, k] * rt[i, k] + lt[i, k] * ro[i] + rt[i, k] * lo[i]
            d[k] = max(pt[i, k] - mu0, 0.0) if k < count[i] else 0.0
        to_b, _ = _stage_flow(d, mass, a, b, tol, max_paths)
        for e in range(E):
            frac = min(max((mass[e] - to_b[e]) / mass[e], 0.0), 1.0) if mass[e] > 0 else 1.0
            block[i, a[e], b[e]] = frac
            block[i, b[e], a[e]] = 1.0 - frac
        for k in range(S):  # the sums of _block_law: row k of joint * block, column k of the rest
            kept = 0.0
            for j in range(S):
                kept += lt[i, k] * rt[i, j] * block[i, k, j]
            for j in range(S):
                kept += lt[i, j] * rt[i, k] * (1.0 - block[i, j, k])
            law[i, k] = kept + lt[i, k] * ro[i] + rt[i, k] * lo[i]
    return block, law


def _pairs(s: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.triu_indices(s, 1)
    return a.astype(np.int64), b.astype(np.int64)


def truncated_stage(p: np.ndarray, left: np.ndarray, right: np.ndarray, s: int, rest: str = "bucket"
                    ) -> tuple[Stage, np.ndarray]:
    """One importance-sampling stage: keep the left token i or the right token j of an independent pair.

    Tokens are ranked by :math:`p_k - \\ell_k r_k` (descending, ties by index); pairs inside the top s
    get LP variables, which maximise :math:`\\sum_k \\min(p_k, \\mu_k)` of the kept token's law μ (a
    maximum flow: augmenting paths up to :data:`FLOW_S`, HiGHS on :func:`stage_lp` beyond); a pair with
    one token in the top keeps it; a pair of two tokens outside keeps the one of higher score, the
    left one on a tie (:data:`RESTS`: ``"bucket"``, no sort; ``"rank"``, a full sort). O(V) memory; the
    LP has s(s - 1)/2 pair variables.

    Returns
    -------
    stage : Stage
    mu : ndarray, shape (V,)
        The exact law of the kept token under the stage's keep-probabilities (as stored, after
        clipping to [0, 1]).
    """
    if rest not in RESTS:
        raise InvalidInputError(f"khisti-lp's rest rule must be one of {', '.join(RESTS)}, got {rest!r}")
    V = p.size
    s = min(int(s), V)
    key = p - left * right
    if rest == "rank":
        order = np.argsort(-key, kind="stable")
        top = order[:s]
        score = np.empty(V, dtype=np.int64)
        score[order] = np.arange(V - 1, -1, -1)
    else:
        top = _top(key, s)
        score = bucket_score(key)
    lt, rt = left[top], right[top]
    lo, ro = max(left.sum() - lt.sum(), 0.0), max(right.sum() - rt.sum(), 0.0)
    mu = _outside_law(left, right, score, top)
    a, b = _pairs(s)
    mass = lt[a] * rt[b] + lt[b] * rt[a]
    mu0 = lt * rt + lt * ro + rt * lo
    if s <= FLOW_S:
        to_b, _ = _stage_flow(np.maximum(p[top] - mu0, 0.0), mass, a, b, 1e-300, 64 * (s * s + 1))
    else:  # a large explicit truncation: HiGHS's simplex
        live = mass > 0
        to_b = mass.copy()
        to_b[live] = mass[live] - stage_lp(p[top], mu0, mass[live], a[live], b[live])
    frac = np.clip(np.divide(mass - to_b, mass, out=np.ones(a.size), where=mass > 0), 0.0, 1.0)
    block = np.ones((s, s))
    block[a, b], block[b, a] = frac, 1.0 - frac
    mu[top] = _block_law(lt, rt, lo, ro, block)
    return Stage(top, block, score, V), mu


def _outside_law(left, right, score, top) -> np.ndarray:
    """Law of the kept token outside the top (0 on the top): an outside token k keeps against every
    outside right token of score at most its own (itself included) as left, and against every
    outside left token of a lower score as right: l_k R(<= score_k) + r_k L(< score_k)."""
    inside = np.zeros(left.size, dtype=np.bool_)
    inside[top] = True
    return _outside_kernel(left, right, score, inside, int(score.max()) + 1)


@njit(cache=True, error_model="numpy")
def _outside_kernel(left, right, score, inside, nb):
    R, L = np.zeros(nb), np.zeros(nb + 1)
    for k in range(left.size):  # per-score sums over the outside tokens
        if not inside[k]:
            R[score[k]] += right[k]
            L[score[k] + 1] += left[k]
    for c in range(1, nb):
        R[c] += R[c - 1]
        L[c + 1] += L[c]
    mu = np.zeros(left.size)
    for k in range(left.size):
        if not inside[k]:
            mu[k] = left[k] * R[score[k]] + right[k] * L[score[k]]
    return mu


@njit(cache=True, error_model="numpy")
def _outside_rows(left, right, key, top, count, half):
    """The scores (:func:`bucket_score`, ``half`` edges of each sign) and the law outside the top
    (:func:`_outside_law`, 0 on the top) of every row at once, row i's top its first ``count[i]``
    tokens of ``top[i]``."""
    B, V = left.shape
    score = np.empty((B, V), dtype=np.int16)  # BUCKETS < 2^15
    mu = np.empty((B, V))
    inside = np.zeros(V, dtype=np.bool_)
    for i in range(B):
        score[i] = _bucket_kernel(key[i], half)
        for k in range(count[i]):
            inside[top[i, k]] = True
        mu[i] = _outside_kernel(left[i], right[i], score[i], inside, BUCKETS)
        for k in range(count[i]):
            inside[top[i, k]] = False
    return score, mu


def _block_law(lt, rt, lo, ro, block) -> np.ndarray:
    """Law of the kept token on the top tokens: mu_k = l_k r_k + l_k r(out) + r_k l(out) + the pairs."""
    joint = lt[:, None] * rt[None, :]
    np.fill_diagonal(block, 1.0)
    return (joint * block).sum(axis=1) + (joint * (1.0 - block)).sum(axis=0) + lt * ro + rt * lo


def tournament_stage(p: np.ndarray, left: np.ndarray, right: np.ndarray, s: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The same stage with ``rest="rank"`` written densely: a V x V keep matrix and the LP on every
    token (HiGHS). A reference for small V (tests): it costs O(V^2).

    Returns
    -------
    v : ndarray, shape (V, V)
        Keep-left probabilities (diagonal 1).
    mu : ndarray, shape (V,)
        The exact law of the kept token under v.
    """
    from .._highs import solve_lp

    V = p.size
    rank = np.empty(V, dtype=np.int64)
    rank[np.argsort(-(p - left * right), kind="stable")] = np.arange(V)
    v = (rank[:, None] < rank[None, :]).astype(float)  # keep the better-ranked token
    np.fill_diagonal(v, 1.0)
    top = np.flatnonzero(rank < s)
    pairs = [(i, j) for i in top for j in top if i != j and left[i] * right[j] > 0]
    if pairs:
        for i, j in pairs:
            v[i, j] = 0.0
        mu0 = _kept_law(left, right, v)
        P = len(pairs)
        rows, cols, vals = [], [], []
        for c, (i, j) in enumerate(pairs):
            w = left[i] * right[j]
            rows += [i, j]
            cols += [c, c]
            vals += [-w, w]
        A = sparse.hstack([sparse.coo_matrix((vals, (rows, cols)), shape=(V, P)), sparse.eye(V)]).tocsc()
        cost = np.concatenate([np.zeros(P), np.ones(V)])
        sol = solve_lp(cost, A, np.full(V, -np.inf), mu0, maximize=True,
                       col_upper=np.concatenate([np.ones(P), p]))
        for c, (i, j) in enumerate(pairs):
            v[i, j] = min(max(sol.x[c], 0.0), 1.0)
    return v, _kept_law(left, right, v)


def _kept_law(left: np.ndarray, right: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Law of the kept token: mu_k = sum_j l_k r_j v_kj + sum_i l_i r_k (1 - v_ik) (v_kk = 1)."""
    joint = left[:, None] * right[None, :]
    return (joint * v).sum(axis=1) + (joint * (1.0 - v)).sum(axis=0)


class KhistiLP(SelectionRule):
    """Importance sampling by a pairwise tournament of truncated LPs, then one speculative step.

    Stage 1 keeps one of :math:`(X_1, X_2)`; stage t keeps the previous winner or :math:`X_{t+1}`,
    each stage's keep-probabilities from :func:`truncated_stage` against the previous stage's
    winner law. The final winner Y' has the exact law μ of the probabilities actually used; accept
    it with probability :math:`\\min(1, p(Y')/\\mu(Y'))`, else sample :math:`\\mathrm{norm}((p - \\mu)^+)`.
    Output law p for any keep-probabilities; acceptance :math:`\\sum_y \\min(p(y), \\mu(y))`.

    Parameters
    ----------
    s : int, optional
        Truncation size. A fixed s runs the tournament as described above (Khisti et al. report
        s = 5 best on a 40-token alphabet). Default (None): s from :func:`default_size`, as many
        tokens as the stage flow's estimated cost allows (45 at V <= 30,000; acceptance rises with s
        on every pair set measured), and a guard: where the tournament's
        acceptance :math:`\\sum_y \\min(p, \\mu)` is below single-draft speculative sampling's
        :math:`\\sum_y \\min(p, q)`, every stage keeps the previous winner instead (μ = q, the first
        draft). The choice depends on (p, q) only, so the rule stays lossless, and the default is
        never below single-draft. ``benchmarks/bench_khisti_truncation.py`` has the evidence on the
        pretrained char-LSTM's pairs.
    rest : {"bucket", "rank"}
        How a pair of two tokens outside the top s is settled (:data:`RESTS`): ``"bucket"``
        (default, sort-free) or ``"rank"`` (the third-party reading, a full sort per stage).
    guard : bool, optional
        Apply the single-draft guard described under ``s`` (default: where ``s`` is the default).
        The torch form on a GPU runs a smaller truncation with the guard: ``s=8, guard=True`` is
        its exact reference.

    Attributes
    ----------
    s : int
        The truncation used.
    fallback : bool
        The default's guard replaced the tournament by the first draft.
    stages : list of Stage

    References
    ----------
    Khisti et al., ICLR 2025, Theorem 1 (canonical decomposition), §4 (truncated LP).
    """

    name = "khisti-lp"
    #: Seconds per token of one stage (a partition and a few passes over V; 7e-9 measured at
    #: V = 32,000 on a 2-core AMD EPYC with AVX-512, this with room for slower machines), and per
    #: stage whatever V (the calls that set it up: 3e-5 - 5e-5 measured at V <= 64).
    STAGE_TOKEN_SECONDS, STAGE_SECONDS = 5e-8, 1e-4

    @classmethod
    def estimate(cls, model):
        """n - 1 truncated stages, each O(V) passes and the default truncation's flow."""
        from .._budget import Estimate

        n, V = model.n, model.V
        s = default_size(V)
        flow = FLOW_PAIR_SECONDS * s * (s - 1) / 2
        return Estimate(f"khisti-lp: {n - 1} truncated stages over {V} tokens",
                        (n - 1) * (cls.STAGE_SECONDS + cls.STAGE_TOKEN_SECONDS * V + flow),
                        8.0 * (n + 8) * V + 8.0 * s * s * n)

    def _prepare(self, s: int | None = None, rest: str = "bucket", guard: bool | None = None):
        guard = s is None if guard is None else bool(guard)
        if s is None:
            s = default_size(self.V)
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
            raise InvalidInputError(f"khisti-lp needs an integer truncation s >= 1, got {s!r}")
        self.s, self.rest = int(min(s, self.V)), rest
        self.stages = []
        law = self.q
        for _ in range(self.n - 1):
            stage, law = truncated_stage(self.p, law, self.q, self.s, rest)
            self.stages.append(stage)
        self.fallback = guard and np.minimum(self.p, law).sum() < np.minimum(self.p, self.q).sum()
        if self.fallback:  # keep the previous winner at every stage: the first draft, law q
            self.stages = [keep_first(self.V)] * (self.n - 1)
            law = self.q
        self.mu = law
        self.accept_ratio, self.res = speculative_step(self.p, law)

    def winner_law(self, drafts) -> np.ndarray:
        """Exact law of the tournament winner Y' given the drafts."""
        cur = np.zeros(self.V)
        cur[drafts[0]] = 1.0
        for stage, x in zip(self.stages, drafts[1:], strict=True):
            col = stage.keep_column(int(x))
            moved = cur @ (1.0 - col)
            cur = cur * col
            cur[x] += moved
        return cur

    def conditional(self, drafts):
        accept = self.winner_law(drafts) * self.accept_ratio
        return accept, max(1.0 - accept.sum(), 0.0) * self.res  # 1 - (1 + ulp) is not a mass

    def closed_form_acceptance(self):
        return float(np.minimum(self.p, self.mu).sum())
