"""The exact optimum of sequence-level (block) verification: a linear program over couplings.

K drafts of L tokens each are drawn iid from the draft model at the root context; a verifier sees them
(and the target's laws along them) and emits a block B = (b_1..b_{k+1}) whose first k tokens are the
first k tokens of some draft. Among *valid* verifiers (B followed by fresh target tokens has the
target's law on V^(L+1), :func:`~mdtheory.blocks.markov.block_law_tv`) the largest block efficiency
E|B| is the value of the LP

.. math:: \\max \\sum_{X, B} \\pi(X, B)\\,|B| \\quad\\text{s.t.}\\quad \\sum_B \\pi(X, B) = Q(X),\\;
          \\sum_k \\beta(y_{1:k+1})\\, p(y_{k+2:L+1} \\mid y_{1:k+1}) = p(y)\\ \\forall y,\\;
          \\beta(B) = \\sum_X \\pi(X, B),\\; \\pi \\ge 0,

with π(X, B) present only when b_{1:k} is a prefix of a draft in X. The drafts are exchangeable, so X
runs over multisets of draft sequences (a plan for ordered tuples is obtained by giving every ordering
of a multiset the multiset's conditional law). For a draft tree X runs over the tree's prefix sets
(its distinct root-to-leaf paths, :mod:`mdtheory.blocks.prefixsets`), which determine the allowed
blocks. Feasibility (token-by-token verification is a feasible
point), weak duality and the certificate are in papers/blocks.md.

The value is proven as at the front door: the plan is checked for validity, non-negativity, its
marginals and its prefix constraint independently of the LP's matrix, and the LP's validity duals w are
turned into an upper bound by weak duality (any w gives one; the check recomputes it from the laws);
both must meet within :data:`~mdtheory.certify.CERT_TOL`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .. import _budget
from ..audit.watchdog import CALLS
from ..certify import CERT_TOL
from ..errors import InvalidInputError, OptimalityGapError, SolverError
from ..result import Result
from .markov import (
    Law,
    _check_length,
    all_sequences,
    block_law_tv,
    conditional_tables,
    context_law,
    continuation_probs,
    draft_multisets,
    sequence_probs,
    vocabulary_size,
    watched,
)
from .prefixsets import count_prefix_sets, estimate_law, prefix_set_law
from .trees import DraftTree, draft_shape

__all__ = ["BlockOptimumResult", "optimal_block_efficiency", "estimate", "tree_estimate", "lp_size",
           "tree_lp_size", "dual_bound"]

# Measured on a 2-core x86 machine (HiGHS 1.x, dual simplex), fitted by a power law; a factor of a
# few either way (see mdtheory._budget).
_LP_COLUMN = 1.3e-6     # seconds = _LP_COLUMN * columns ** 1.32 (interior point + crossover)
_BUILD_COLUMN = 4e-6    # Python-side construction and certificate, per column
_COLUMN_BYTES = 400.0   # plan, matrix and HiGHS working set, per column
_BLOCK_COLUMN = 8e-6    # a tree LP's block columns (an aggregate and a validity row each), linear:
                        # fitted on deterministic trees (one prefix set) up to 9e6 columns


@dataclass
class BlockOptimumResult(Result):
    """The optimal block efficiency of K iid drafts of length L (or of a draft tree), with its certificates.

    Attributes
    ----------
    value : float
        The optimal E|B| (tokens per target call, the correction or bonus token included):
        ``1 + acceptance.sum()``.
    acceptance : ndarray, (L,)
        ``acceptance[m - 1]`` = P(k >= m): the probability that the optimal verifier accepts at least
        m draft tokens, m = 1..L.
    drafts, length, V : int
        K (a tree's number of root-to-leaf paths), L and the vocabulary size.
    tree : DraftTree or None
        The draft tree, or None for K iid drafts (the multiset route).
    status : str
        ``"optimal"``: the plan is valid (``validity_tv``) and meets the dual bound within
        :data:`~mdtheory.certify.CERT_TOL`. A solve that cannot be proven raises instead.
    upper_bound : float
        The weak-duality bound recomputed from potentials w (:func:`dual_bound`): the LP's duals, or
        the dual LP's solution where those do not prove the plan (``dual_from``).
    certificate_gap : float
        ``upper_bound - value``.
    validity_tv : float
        :func:`~mdtheory.blocks.markov.block_law_tv` of the plan's block law: its distance from
        losslessness (zero up to the solver's feasibility tolerance).
    marginal_error, min_mass : float
        The plan's largest deviation from the draft marginals Q(X), and its smallest entry.
    support : ndarray of int, (M, K, L)
        The draft multisets with positive probability (each as K sorted draft sequences); for a tree,
        its prefix sets (each as its sorted distinct root-to-leaf paths, the last repeated up to K).
    support_probs : ndarray, (M,)
        Their probabilities Q(X) (with the multiplicity of their orderings; for a tree the
        probability of drawing that prefix set).
    blocks : list of tuple
        Every block the plan can emit, indexing the columns of ``plan``.
    plan : scipy.sparse.csr_matrix, (M, len(blocks))
        The optimal coupling π(X, B): row X sums to Q(X). The verifier emits B with probability
        π(X, B) / Q(X) given the drafts X (in any order).
    block_law : dict
        The law of the emitted block, ``{block: probability}`` (positive entries).
    lp : dict
        The LP's size: ``multisets`` (for a tree: its prefix sets), ``variables``, ``rows``,
        ``nonzeros``.
    presolve : str
        ``"on"``, or ``"off"`` when the LP that gave the plan had to be re-solved without presolve
        because HiGHS's presolve did not return an optimum (it declares some of these feasible LPs
        infeasible).
    plan_from : str
        Which solve gave the plan: ``"simplex"``, ``"ipm"`` (the primal LP) or ``"dual LP"`` (the row
        duals of :func:`_dual_lp`, solved when the primal LP did not prove its answer).
    dual_from : str
        Where the bound's potentials came from: ``"primal duals"`` (the primal LP's row duals) or
        ``"dual LP"``.
    timings : dict
        Seconds by phase (``build``, ``solve and certify``, ``total``).
    """

    value: float
    acceptance: np.ndarray
    drafts: int
    length: int
    V: int
    tree: DraftTree | None
    status: str
    upper_bound: float
    certificate_gap: float
    validity_tv: float
    marginal_error: float
    min_mass: float
    support: np.ndarray
    support_probs: np.ndarray
    blocks: list
    plan: object
    block_law: dict
    lp: dict
    presolve: str
    plan_from: str = "simplex"
    dual_from: str = "primal duals"
    timings: dict = field(default_factory=dict)

    @property
    def success(self) -> bool:
        """Whether the value is proven (``status == "optimal"``)."""
        return self.status == "optimal"

    @property
    def message(self) -> str:
        return (f"{self.status}: E|B| = {self.value:.12g} proven by a valid plan (TV {self.validity_tv:.1e}) "
                f"and a dual bound {self.upper_bound:.12g} (gap {self.certificate_gap:.1e})")

    def _items(self) -> dict:
        """The fields for :meth:`~mdtheory.result.Result.to_dict`: the plan as ``{"rows", "cols",
        "mass"}`` triplets, the block law as a list of ``{"block", "probability"}``, the tree as
        ``{"branching", "sampling"}`` or None."""
        out = super()._items()
        coo = self.plan.tocoo()
        out["plan"] = {"rows": coo.row, "cols": coo.col, "mass": coo.data}
        out["block_law"] = [{"block": list(b), "probability": p} for b, p in self.block_law.items()]
        out["tree"] = None if self.tree is None else self.tree.to_dict()
        return out

    def __float__(self) -> float:
        return float(self.value)


def lp_size(V: int, n: int, length: int) -> dict:
    """Upper bounds on the LP's size from (V, K, L) alone: multisets C(V^L + K - 1, K), variables
    (each multiset has at most min(K, V^k) distinct k-prefixes, each followed by V tokens, plus one
    aggregate per block), rows and nonzeros."""
    S = V ** length
    M = math.comb(S + n - 1, n)
    prefixes = 1 + sum(min(n, V ** k) for k in range(1, length + 1))
    blocks = sum(V ** j for j in range(1, length + 2))
    pi = M * V * prefixes
    rows = M + blocks + V ** (length + 1)
    nonzeros = 2 * pi + blocks + (length + 1) * V ** (length + 1)
    return {"multisets": M, "variables": pi + blocks, "rows": rows, "nonzeros": nonzeros}


#: log2 of a multiset count past which :func:`estimate` does not count exactly (no such LP is solvable)
_LOG2_CAP = 48.0


def estimate(V: int, n: int, length: int) -> _budget.Estimate:
    """Seconds and bytes of :func:`optimal_block_efficiency` from sizes alone; sizes whose multiset
    count is over 2**48 (judged by logarithms, before any exact count) are estimated as infinite."""
    S_log = length * math.log(V)
    # log C(S + n - 1, n) <= min(n log S, S log(n + 1)), S = V^L: cheap in logs, for any n and L
    M_log = min(n * S_log, math.exp(min(S_log, 700.0)) * math.log(n + 1)) if V > 1 else 0.0
    if M_log > _LOG2_CAP * math.log(2):
        return _budget.Estimate(
            f"the block-efficiency LP (V = {V}, K = {n}, L = {length}: up to 2^{M_log / math.log(2):.3g} "
            "draft multisets)", math.inf, math.inf,
            "the bound mdtheory.blocks.bound.block_efficiency_bound fits any size")
    size = lp_size(V, n, length)
    cols = float(size["variables"])
    seconds = _LP_COLUMN * cols ** 1.32 + _BUILD_COLUMN * cols
    return _budget.Estimate(
        f"the block-efficiency LP (V = {V}, K = {n}, L = {length}: {size['multisets']} draft multisets, "
        f"{cols} variables, {size['nonzeros']} nonzeros)", seconds, _COLUMN_BYTES * cols,
        "the bound mdtheory.blocks.bound.block_efficiency_bound fits any size")


def tree_lp_size(V: int, tree: DraftTree) -> dict:
    """Upper bounds on the LP's size for a draft tree, from (V, tree) alone: prefix sets
    (:func:`~mdtheory.blocks.prefixsets.count_prefix_sets`, as a float: it may be astronomically
    large), variables (each prefix set has at most min(b_1 ... b_k, V^k) nodes of depth k, each
    followed by V tokens, plus one aggregate per block: ``blocks``), rows and nonzeros."""
    length = tree.length
    M = math.exp(min(count_prefix_sets(V, tree)[0], 700.0))
    nodes, width = 1, 1
    for k in range(1, length + 1):
        width *= tree.branching[k - 1]
        nodes += min(width, V ** k)
    blocks = sum(V ** j for j in range(1, length + 2))
    pi = M * V * nodes
    return {"prefix_sets": M, "variables": pi + blocks, "blocks": blocks,
            "rows": M + blocks + V ** (length + 1),
            "nonzeros": 2 * pi + blocks + (length + 1) * V ** (length + 1)}


def tree_estimate(V: int, tree: DraftTree) -> _budget.Estimate:
    """Seconds and bytes of :func:`optimal_block_efficiency` on a draft tree: the prefix-set law
    (:func:`~mdtheory.blocks.prefixsets.estimate_law`) plus the LP (columns as :func:`estimate`)."""
    law_seconds, log_sets = estimate_law(V, tree)
    what = f"the block-efficiency LP of {tree!r} (V = {V}"
    hint = "the bound mdtheory.blocks.bound.block_efficiency_bound(..., tree=) fits any size"
    if log_sets > _LOG2_CAP * math.log(2):
        return _budget.Estimate(f"{what}: up to 2^{log_sets / math.log(2):.3g} prefix sets)", math.inf,
                                math.inf, hint)
    size = tree_lp_size(V, tree)
    cols, blocks = float(size["variables"]), float(size["blocks"])
    seconds = (law_seconds + _LP_COLUMN * (cols - blocks) ** 1.32 + (_BLOCK_COLUMN + _BUILD_COLUMN) * blocks
               + _BUILD_COLUMN * (cols - blocks))
    return _budget.Estimate(f"{what}: up to {size['prefix_sets']:.4g} prefix sets, {cols:.4g} variables)",
                            seconds, _COLUMN_BYTES * cols + 200.0 * size["prefix_sets"] * tree.n, hint)


def _tree_members(draft, tree: DraftTree, V: int) -> tuple[np.ndarray, np.ndarray]:
    """The prefix sets of the tree's draws as (M, K) sorted path indices (a set of j < K paths padded
    by repeating its last path) and their probabilities."""
    law = prefix_set_law(draft, tree, V)
    base = V ** np.arange(tree.length - 1, -1, -1)
    members = np.zeros((len(law), tree.n), dtype=np.int64)
    probs = np.zeros(len(law))
    for i, (paths, w) in enumerate(law.items()):
        idx = sorted(int(np.dot(path, base)) for path in paths)
        members[i, :len(idx)] = idx
        members[i, len(idx):] = idx[-1]
        probs[i] = w
    order = np.lexsort(members.T[::-1])
    return members[order], probs[order]


def _check_laws(target, draft) -> tuple[int, Law, Law]:
    """V and the two laws as per-context callables, each call watched
    (:func:`~mdtheory.blocks.markov.watched`)."""
    target, draft = context_law(target), context_law(draft)
    for name, law in (("target", target), ("draft", draft)):
        if not callable(law):
            raise InvalidInputError(
                f"{name} must be a callable law(context) -> (V,), got {type(law).__name__}")
    target, draft = watched(target, "target"), watched(draft, "draft")
    V = vocabulary_size(target)
    if vocabulary_size(draft) != V:
        raise InvalidInputError(
            f"target and draft have different vocabularies: {V} and {vocabulary_size(draft)}")
    return V, target, draft


def _columns(members: np.ndarray, V: int, length: int):
    """The allowed (multiset, block) pairs: for each depth k, each distinct k-prefix a of the multiset,
    and each token v, the block a + v. Returns (row, block id, block length) arrays and the offsets of
    each block length in the block ids."""
    offsets = np.concatenate([[0], np.cumsum([V ** j for j in range(1, length + 2)])])
    rows, ids, lens = [], [], []
    M, n = members.shape
    for k in range(length + 1):
        prefix = np.sort(members // V ** (length - k), axis=1)
        keep = np.ones_like(prefix, dtype=bool)
        keep[:, 1:] = prefix[:, 1:] != prefix[:, :-1]
        x, j = np.nonzero(keep)
        a = prefix[x, j]
        r = np.repeat(x, V)
        b = (a[:, None] * V + np.arange(V)[None, :]).reshape(-1) + offsets[k]
        rows.append(r)
        ids.append(b)
        lens.append(np.full(r.size, k + 1))
    return np.concatenate(rows), np.concatenate(ids), np.concatenate(lens), offsets


def _block_tuples(V: int, length: int) -> list[tuple]:
    return [tuple(s) for j in range(1, length + 2) for s in all_sequences(V, j).tolist()]


def _scales(A, col_scale: np.ndarray) -> np.ndarray:
    """Row factors r making the largest entry of each row of A diag(col_scale) one in magnitude (1 for
    an empty row)."""
    from scipy import sparse

    B = sparse.csr_matrix(A) @ sparse.diags(col_scale)
    big = np.asarray(abs(B).max(axis=1).todense()).ravel()
    return np.where(big > 0, 1.0 / np.where(big > 0, big, 1.0), 1.0)


def _solve(cost, A, rhs, col_scale=None,
           method: str = "ipm") -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """min cost @ x s.t. A x = rhs, x >= 0 with HiGHS's ``method`` ("ipm" with crossover, or
    "simplex"); presolve on,
    and the LP solved again with presolve off if presolve did not end in an optimum (the LP is always
    feasible, so "infeasible" from presolve is presolve's error). Returns (x, row duals, row factors,
    presolve).

    The LP is solved as the equivalent LP in x = diag(col_scale) x', rows multiplied by positive
    factors r (:func:`_scales`); x and the duals are mapped back (row dual = r * scaled dual). The
    laws' probabilities reach 1e-38 and below, under the threshold at which HiGHS drops a matrix
    entry; with the plan entries scaled by Q(X) and the block aggregates by p(B) the marginal and
    validity rows become rows of ones."""
    import highspy
    from scipy import sparse

    from .._highs import build_lp, solver

    c = np.ones(A.shape[1]) if col_scale is None else np.asarray(col_scale, dtype=np.float64)
    r = _scales(A, c)
    A = sparse.csc_matrix(sparse.diags(r) @ sparse.csr_matrix(A) @ sparse.diags(c))
    cost = np.asarray(cost, dtype=np.float64) * c
    rhs = np.asarray(rhs, dtype=np.float64) * r
    lp = build_lp(cost, A, rhs, rhs)
    statuses = []
    for presolve in ("on", "off"):
        h = solver(presolve, method, small_matrix_value=1e-12)   # the smallest HiGHS accepts
        h.passModel(lp)
        h.run()
        status = h.getModelStatus()
        statuses.append(f"presolve {presolve}: {h.modelStatusToString(status)}")
        if status == highspy.HighsModelStatus.kOptimal:
            sol = h.getSolution()
            return np.asarray(sol.col_value) * c, np.asarray(sol.row_dual) * r, r, presolve
    raise SolverError("HiGHS did not solve the block-efficiency LP, which is always feasible (token-by-token "
                      f"verification is a feasible point): {'; '.join(statuses)}")


def _lp(blen, row, bid, probs, p_full, cont, M: int, nB: int, V: int, length: int, *,
        redundant: bool = False):
    """The LP as (cost, A, rhs) for ``min cost @ x, A x = rhs, x >= 0``.

    Rows: M draft marginals, nB aggregates beta(B) - sum_X pi(X, B) = 0, then the validity rows of
    V^(L+1). Columns: the plan entries (row, bid), then the nB aggregates. The rows are linearly
    dependent (marginals + aggregates - validity rows = 0, right-hand sides sum(Q) - sum(p), zero up to
    rounding); HiGHS's presolve, finding the dependency, declares the LP infeasible from that rounding.
    So the last validity row, implied by the others, is left out unless ``redundant``.
    """
    from scipy import sparse

    L1 = length + 1
    npi = row.size
    y_rows, b_cols, vals = [], [], []
    for k in range(L1):
        span = V ** (L1 - k - 1)
        y_rows.append(np.arange(V ** L1))
        b_cols.append(np.arange(V ** L1) // span + sum(V ** j for j in range(1, k + 1)))
        vals.append(cont[k])
    y_rows, b_cols, vals = map(np.concatenate, (y_rows, b_cols, vals))
    r = np.concatenate([row, M + bid, M + np.arange(nB), M + nB + y_rows])
    c = np.concatenate([np.arange(npi), np.arange(npi), npi + np.arange(nB), npi + b_cols])
    v = np.concatenate([np.ones(2 * npi), -np.ones(nB), vals])
    n_rows = M + nB + V ** L1 - (0 if redundant else 1)
    nz = (v != 0) & (r < n_rows)
    A = sparse.csc_matrix((v[nz], (r[nz], c[nz])), shape=(n_rows, npi + nB))
    rhs = np.concatenate([probs, np.zeros(nB), p_full])[:n_rows]
    cost = np.concatenate([-np.asarray(blen, dtype=np.float64), np.zeros(nB)])
    return cost, A, rhs


def dual_bound(w: np.ndarray, target: Law, drafts: np.ndarray, probs: np.ndarray, V: int,
               length: int) -> float:
    """Weak-duality upper bound on the optimal E|B| from any potentials w on V^(L+1).

    .. math:: E|B| \\le \\sum_y p(y) w_y + \\sum_X Q(X) \\max_{B \\text{ allowed in } X} (|B| - W(B)),
              \\qquad W(B) = E[w(B, \\text{fresh target tokens})]

    (papers/blocks.md). Recomputed from the laws and the draft arrays (K sorted sequences per
    multiset), not from the LP's matrix.
    """
    L1 = length + 1
    tables = conditional_tables(target, V, L1)
    # W on blocks of each length, by backward recursion through the target's laws
    W = [None] * (L1 + 1)
    W[L1] = np.asarray(w, dtype=np.float64)
    for j in range(L1 - 1, 0, -1):
        W[j] = (tables[j] * W[j + 1].reshape(-1, V)).sum(axis=1)
    # best(a) = max_v (|a| + 1 - W(a v)) for each prefix a of length k = 0..L
    best = [(k + 1) - W[k + 1].reshape(-1, V) for k in range(L1)]
    best = [b.max(axis=1) for b in best]
    total = float(sequence_probs(target, V, L1, tables) @ W[L1])
    for X, qx in zip(drafts, probs, strict=True):
        u = best[0][0]
        seen = set()
        for seq in X.tolist():
            index = 0
            for k in range(1, length + 1):
                index = index * V + seq[k - 1]
                if (k, index) not in seen:
                    seen.add((k, index))
                    u = max(u, best[k][index])
        total += float(qx) * u
    return total


def _dual_lp(row, bid, blen, probs, ttables, offsets, M: int, V: int,
            length: int) -> tuple[np.ndarray, np.ndarray, str] | None:
    """Potentials w on V^(L+1) and a plan from the dual LP solved as an LP of its own, in its natural
    variables: ``(w, plan entries, presolve)``, or None if HiGHS does not solve it.

    The dual of the block-efficiency LP is

    .. math:: \\min_{W, u} \\sum_v p(v) W(v) + \\sum_X Q(X) u_X \\quad\\text{s.t.}\\quad
              u_X + W(B) \\ge |B| \\text{ for allowed } (X, B),\\;
              W(a) = \\sum_v p(v \\mid a) W(av) \\text{ for } |a| \\le L,

    with W and u free; w is W on the full-length blocks. Its variables are O(1) (a potential per
    block, tokens to go), where the primal's duals of the scaled validity rows must be divided by
    p(y) down to 1e-38; the coefficients p(v | a) that HiGHS drops (under 1e-12) move W by at most
    that times |W|, and :func:`dual_bound` recomputes W from w with every coefficient anyway. The
    duals of its rows u_X + W(B) >= |B| are a plan pi(X, B) (the primal), checked like any other.
    Used when the primal LP does not prove its answer (HiGHS may fail on the scaled primal where the
    masses span 1e-38..1, or map its duals back inaccurately).
    """
    import highspy
    from scipy import sparse

    from .._highs import build_lp, solver

    nB = int(offsets[-1])
    npi = row.size
    # inequality rows u_X + W(B) >= |B|; columns: W (nB), then u (M)
    r = np.concatenate([np.arange(npi), np.arange(npi)])
    c = np.concatenate([bid, nB + row])
    v = np.ones(2 * npi)
    # equality rows W(a) - sum_v p(v | a) W(av) = 0 for blocks a of length j = 1..L
    eq_r, eq_c, eq_v = [], [], []
    first = npi
    for j in range(1, length + 1):
        count = V ** j
        ids = np.arange(count)
        eq_r.append(first + ids)
        eq_c.append(offsets[j - 1] + ids)
        eq_v.append(np.ones(count))
        eq_r.append(np.repeat(first + ids, V))
        eq_c.append(offsets[j] + np.arange(count * V))
        eq_v.append(-np.asarray(ttables[j], dtype=np.float64).reshape(-1))
        first += count
    r = np.concatenate([r, *eq_r])
    c = np.concatenate([c, *eq_c])
    v = np.concatenate([v, *eq_v])
    keep = v != 0
    A = sparse.csc_matrix((v[keep], (r[keep], c[keep])), shape=(first, nB + M))
    lower = np.concatenate([np.asarray(blen, dtype=np.float64), np.zeros(first - npi)])
    upper = np.concatenate([np.full(npi, highspy.kHighsInf), np.zeros(first - npi)])
    cost = np.zeros(nB + M)
    cost[:V] = np.asarray(ttables[0][0], dtype=np.float64)
    cost[nB:] = probs
    # shifting every W by t and every u by -t changes the objective by t (sum p - sum Q), zero up to
    # rounding, which may make the LP "unbounded": one u is fixed at 0 (no loss in exact arithmetic)
    col_lower = np.full(nB + M, -highspy.kHighsInf)
    col_upper = np.full(nB + M, highspy.kHighsInf)
    col_lower[nB + int(np.argmax(probs))] = col_upper[nB + int(np.argmax(probs))] = 0.0
    lp = build_lp(cost, A, lower, upper, col_lower=col_lower, col_upper=col_upper)
    for presolve in ("on", "off"):
        h = solver(presolve, "simplex")
        h.passModel(lp)
        h.run()
        if h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
            sol = h.getSolution()
            plan = np.asarray(sol.row_dual)[:npi]
            plan = plan if plan.sum() >= 0 else -plan       # HiGHS's sign convention, either way
            return np.asarray(sol.col_value)[int(offsets[length]):nB], plan, presolve
    return None


def _check_plan(plan, blocks: list, drafts: np.ndarray, probs: np.ndarray):
    """Smallest entry, largest marginal error, and that every positive entry's block starts with a
    prefix of one of the row's drafts (raises SolverError otherwise)."""
    coo = plan.tocoo()
    min_mass = float(coo.data.min()) if coo.nnz else 0.0
    marginal = float(np.abs(np.asarray(plan.sum(axis=1)).ravel() - probs).max())
    for r, c, m in zip(coo.row, coo.col, coo.data, strict=True):
        if m <= 0:
            continue
        b = blocks[c]
        k = len(b) - 1
        if not any(tuple(d[:k]) == b[:k] for d in drafts[r].tolist()):
            raise SolverError(f"the LP's plan emits {b} from drafts {drafts[r].tolist()}, not a draft prefix")
    return min_mass, marginal


def optimal_block_efficiency(target: Law, draft: Law, n: int | None = None, length: int | None = None, *,
                             tree: DraftTree | None = None,
                             max_seconds: float = _budget.MAX_SECONDS,
                             max_bytes: float = _budget.MAX_BYTES) -> BlockOptimumResult:
    """The largest block efficiency E|B| of any valid verifier of ``n`` iid drafts of ``length`` tokens,
    or of a draft tree.

    Parameters
    ----------
    target, draft : callable
        Next-token laws ``law(context: tuple[int, ...]) -> ndarray (V,)`` (the root context is ``()``).
    n : int
        Number of drafts K, each drawn autoregressively from ``draft`` at the root (with ``tree``:
        optional, and if given it must be the tree's number of root-to-leaf paths).
    length : int
        Draft length L (the block has at most L + 1 tokens; with ``tree``: optional, its depth).
    tree : DraftTree, optional
        Draw the drafts as this tree (:class:`~mdtheory.blocks.trees.DraftTree`: at each node the
        children drawn from the draft's law there, iid or without replacement, with branching
        factors per depth; the object the traversal verifier takes). The LP then runs over the
        tree's *prefix sets* (its distinct root-to-leaf paths), which carry everything a verifier may
        use (:mod:`mdtheory.blocks.prefixsets`). ``DraftTree((K, 1, ..., 1), "iid")`` is K iid
        drafts by this second route.
    max_seconds, max_bytes : float or None
        Refuse, before any work, an LP whose estimate (:func:`estimate`, :func:`tree_estimate`)
        exceeds these (None or infinity: no limit); a call of a law that does not return within
        ``max_seconds`` is interrupted (:mod:`mdtheory.audit.watchdog`).

    Returns
    -------
    BlockOptimumResult
        ``value`` the proven optimum (between 1 and 1 + L), the optimal plan and per-depth acceptance.

    Raises
    ------
    ProblemTooLargeError
        The estimate is over a limit (the message states it).
    VerifierTimeoutError
        A law's call did not return within ``max_seconds``.
    InvalidInputError, InvalidDistributionError
        A bad size or limit, or a law that is not a probability vector of real numbers of the
        right length.
    SolverError, OptimalityGapError
        HiGHS failed with presolve on and off, or its answer could not be proven.

    Examples
    --------
    >>> from mdtheory.blocks.markov import sun_toy
    >>> res = optimal_block_efficiency(*sun_toy(), n=1, length=2)
    >>> round(res.value * 9, 9), res.success
    (20.0, True)

    A tree of two tokens then one each, children without replacement (the two first tokens differ):

    >>> res = optimal_block_efficiency(*sun_toy(), tree=DraftTree((2, 1), "without-replacement"))
    >>> res.lp["multisets"], round(res.value, 6)
    (4, 2.888889)
    """
    t0 = time.perf_counter()
    n, length = draft_shape(n, length, tree)
    n = _check_length(n, "n")
    length = _check_length(length)
    max_seconds, max_bytes = _budget.limits(max_seconds, max_bytes)
    with CALLS.armed(max_seconds, "the block-efficiency optimum"):
        V, target, draft = _check_laws(target, draft)
        _budget.require(estimate(V, n, length) if tree is None else tree_estimate(V, tree), max_seconds,
                        max_bytes=max_bytes)
        return _solve_plan(target, draft, n, length, tree, V, t0)


def _solve_plan(target: Law, draft: Law, n: int, length: int, tree: DraftTree | None, V: int,
                t0: float) -> BlockOptimumResult:
    """Build, solve and certify the LP of :func:`optimal_block_efficiency` (checked sizes, the
    laws as watched per-context callables)."""
    from scipy import sparse

    L1 = length + 1
    ttables = conditional_tables(target, V, L1)
    p_full = sequence_probs(target, V, L1, ttables)
    cont = continuation_probs(target, V, L1, ttables)
    if tree is None:
        members, drafts, probs = draft_multisets(draft, n, length, V)
    else:
        members, probs = _tree_members(draft, tree, V)
        drafts = all_sequences(V, length)[members]
    keep = probs > 0
    members, drafts, probs = members[keep], drafts[keep], probs[keep]
    M = members.shape[0]
    row, bid, blen, offsets = _columns(members, V, length)
    nB = int(offsets[-1])
    npi = row.size

    cost, A, rhs = _lp(blen, row, bid, probs, p_full, cont, M, nB, V, length)
    t1 = time.perf_counter()

    p_block = np.concatenate([sequence_probs(target, V, j, ttables[:j]) for j in range(1, L1 + 1)])
    col_scale = np.concatenate([probs[row], np.where(p_block > 0, p_block, 1.0)])
    blocks = _block_tuples(V, length)
    lengths = np.array([len(b) for b in blocks])

    def checked(x_pi: np.ndarray, source: str, presolve: str) -> dict:
        """The plan's own certificate, independent of the LP's matrix."""
        plan = sparse.csr_matrix((x_pi, (row, bid)), shape=(M, nB))
        plan.sum_duplicates()
        min_mass, marginal = _check_plan(plan, blocks, drafts, probs)
        law_of_b = np.asarray(plan.sum(axis=0)).ravel()
        block_law = {blocks[i]: float(law_of_b[i]) for i in np.nonzero(law_of_b)[0]}
        tv = block_law_tv(block_law, target, length, V)
        return {"plan": plan, "min_mass": min_mass, "marginal": marginal, "block_law": block_law, "tv": tv,
                "value": float(law_of_b @ lengths), "from": source, "presolve": presolve,
                "acceptance": np.array([law_of_b[lengths >= m + 1].sum() for m in range(1, L1)]),
                "valid": tv <= CERT_TOL and marginal <= CERT_TOL and min_mass >= -CERT_TOL}

    # Candidates: plans (each checked on its own) and upper bounds (each valid by weak duality, from
    # any potentials). The simplex method first (its duals are basic, hence exact up to rounding), then
    # interior point with crossover, then the dual LP solved on its own (its row duals are a plan);
    # stop once the best valid plan meets the smallest bound.
    plans, uppers, failures = [], [], []

    def proven() -> bool:
        good = [c for c in plans if c["valid"]]
        return bool(good) and min(u for u, _ in uppers) - max(c["value"] for c in good) <= CERT_TOL

    for method in ("simplex", "ipm"):
        try:
            x, row_dual, row_factor, presolve = _solve(cost, A, rhs, col_scale, method)
        except SolverError as err:
            failures.append(err)
            continue
        plans.append(checked(x[:npi], method, presolve))
        # both sign conventions of HiGHS's duals are tried, with w read off two rows of the dual: the
        # validity rows' duals (the dropped, implied row has potential 0), and the aggregate rows'
        # duals of the full-length blocks, which equal -w at a dual optimum and are the accurate ones
        # where p(y) is tiny (w_y is a scaled dual divided by p(y)); and entry by entry the one whose
        # row factor (the factor its scaled dual's error is multiplied by) is smaller
        w_valid = np.append(row_dual[M + nB:], 0.0)
        w_blocks = -row_dual[M + int(offsets[length]):M + nB]
        f_valid = np.append(row_factor[M + nB:], np.inf)
        w_mixed = np.where(row_factor[M + int(offsets[length]):M + nB] < f_valid, w_blocks, w_valid)
        uppers.append((min(dual_bound(sgn * w, target, drafts, probs, V, length)
                           for w in (w_valid, w_blocks, w_mixed) for sgn in (1.0, -1.0)), "primal duals"))
        if proven():
            break
    if not proven():
        # the primal's duals, mapped back from the scaled LP, may not be accurate enough, or HiGHS
        # may fail on the scaled primal where masses span 1e-38..1: the dual LP in its own variables
        dual = _dual_lp(row, bid, blen, probs, ttables, offsets, M, V, length)
        if dual is not None:
            w, x_dual, presolve = dual
            uppers.append((dual_bound(w, target, drafts, probs, V, length), "dual LP"))
            plans.append(checked(x_dual, "dual LP", presolve))
    if not plans:
        raise failures[-1] if failures else SolverError("HiGHS solved neither the block-efficiency LP nor "
                                                        "its dual")
    good = [c for c in plans if c["valid"]]
    best = max(good, key=lambda c: c["value"]) if good else min(plans, key=lambda c: c["tv"] + c["marginal"])
    upper, dual_from = min(uppers) if uppers else (math.inf, "none")
    value, tv, marginal, min_mass = best["value"], best["tv"], best["marginal"], best["min_mass"]
    gap = upper - value
    t3 = time.perf_counter()
    if tv > CERT_TOL or marginal > CERT_TOL or min_mass < -CERT_TOL or abs(gap) > CERT_TOL:
        raise OptimalityGapError(
            f"the block-efficiency LP's answer is not proven: plan TV {tv:.2e}, "
            f"marginal error {marginal:.2e}, "
            f"smallest entry {min_mass:.2e}, dual bound {upper:.12g} vs plan value {value:.12g}",
            lower=value - max(tv, marginal) * L1, upper=upper)
    return BlockOptimumResult(
        value=value, acceptance=best["acceptance"], drafts=n, length=length, V=V, tree=tree, status="optimal",
        upper_bound=upper, certificate_gap=gap, validity_tv=tv, marginal_error=marginal, min_mass=min_mass,
        support=drafts, support_probs=probs, blocks=blocks, plan=best["plan"], block_law=best["block_law"],
        lp={"multisets": int(M), "variables": int(npi + nB), "rows": int(A.shape[0]), "nonzeros": int(A.nnz)},
        presolve=best["presolve"], plan_from=best["from"], dual_from=dual_from,
        timings={"build": t1 - t0, "solve and certify": t3 - t1, "total": t3 - t0})
