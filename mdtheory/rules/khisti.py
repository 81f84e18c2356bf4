"""Khisti et al.'s importance-sampling rule with the truncated LP (ICLR 2025, §4 and Appendix G).

Details follow a third-party implementation of the paper's appendix as papers/theory.md §6 records them, not
the paper text itself.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from .. import _budget
from .._highs import solve_lp
from ..errors import InvalidInputError, ProblemTooLargeError
from .base import SelectionRule, speculative_step

__all__ = ["KhistiLP", "tournament_stage", "nucleus_truncation", "MAX_KHISTI_V", "NUCLEUS_TOP_P"]

#: Largest alphabet for the tournament, which stores a dense V x V keep-probability matrix per stage.
MAX_KHISTI_V = 5000
#: Nucleus of the default truncation: Khisti et al.'s experiments sample with top-p, p = 0.95, and
#: run the truncated LP on the tokens that survive it.
NUCLEUS_TOP_P = 0.95


def nucleus_truncation(p: np.ndarray, q: np.ndarray, top_p: float = NUCLEUS_TOP_P) -> int:
    """The default truncation size: the tokens of the union of the top-p nuclei of p and q.

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


def tournament_stage(p: np.ndarray, left: np.ndarray, right: np.ndarray, s: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """One importance-sampling stage: keep the left token i or the right token j of an independent pair.

    Chooses keep-probabilities :math:`v_{ij}` (i ≠ j) maximising :math:`\\sum_k \\min(p_k, \\mu_k)` of
    the kept token's law

    .. math:: \\mu_k = \\ell_k r_k + \\sum_{j \\ne k} \\ell_k r_j v_{kj}
                     + \\sum_{i \\ne k} \\ell_i r_k (1 - v_{ik}),

    as the LP :math:`\\max \\sum_k z_k`, :math:`z_k \\le p_k`, :math:`z_k \\le \\mu_k(v)`,
    :math:`0 \\le v \\le 1` (HiGHS). Truncation: tokens ranked by :math:`p_k - \\ell_k r_k` (descending);
    only pairs inside the top s get LP variables, any other pair keeps its better-ranked token.

    Parameters
    ----------
    p, left, right : ndarray, shape (V,)
        Target, law of the left (previous winner) token, law of the right (new draft) token.
    s : int
        Truncation size.

    Returns
    -------
    v : ndarray, shape (V, V)
        Keep-left probabilities (diagonal 1).
    mu : ndarray, shape (V,)
        The exact law of the kept token under v.
    """
    V = p.size
    rank = np.empty(V, dtype=np.int64)
    rank[np.argsort(-(p - left * right), kind="stable")] = np.arange(V)
    v = (rank[:, None] < rank[None, :]).astype(float)  # keep the better-ranked token
    np.fill_diagonal(v, 1.0)
    top = np.flatnonzero(rank < s)
    pairs = [(i, j) for i in top for j in top if i != j and left[i] * right[j] > 0]
    if pairs:
        for i, j in pairs:
            v[i, j] = 0.0  # LP variables enter mu below; their constant part is zero
        # with v_ij = 0 the pair's mass l_i r_j goes to j; v_ij moves that fraction to i, so
        # z_k <= mu_k reads z_k + sum_c (-w_c on k = i, +w_c on k = j) v_c <= mu0_k
        mu0 = _kept_law(left, right, v)
        P = len(pairs)
        rows, cols, vals = [], [], []
        for c, (i, j) in enumerate(pairs):
            w = left[i] * right[j]
            rows += [i, j]
            cols += [c, c]
            vals += [-w, w]
        A_mu = sparse.coo_matrix((vals, (rows, cols)), shape=(V, P))
        A = sparse.hstack([A_mu, sparse.eye(V)]).tocsc()
        cost = np.concatenate([np.zeros(P), np.ones(V)])
        upper = np.concatenate([np.ones(P), p])
        sol = solve_lp(cost, A, np.full(V, -np.inf), mu0, maximize=True, col_upper=upper)
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
    each stage's keep-probabilities from :func:`tournament_stage` against the previous stage's
    winner law. The final winner Y' has the exact law μ of the probabilities actually used; accept
    it with probability :math:`\\min(1, p(Y')/\\mu(Y'))`, else sample :math:`\\mathrm{norm}((p - \\mu)^+)`.
    Output law p for any keep-probabilities; acceptance :math:`\\sum_y \\min(p(y), \\mu(y))`.

    Parameters
    ----------
    s : int, optional
        Truncation size. A fixed s runs the tournament as described above (Khisti et al. report
        s = 5 best on a 40-token alphabet). Default (None): s from :func:`nucleus_truncation`, the
        union of the top-0.95 nuclei of p and q (their experiments run the LP on the tokens of a
        top-p = 0.95 nucleus), and a guard: where the tournament's acceptance
        :math:`\\sum_y \\min(p, \\mu)` is below single-draft speculative sampling's
        :math:`\\sum_y \\min(p, q)`, every stage keeps the previous winner instead (μ = q, the first
        draft). The choice depends on (p, q) only, so the rule stays lossless, and the default is
        never below single-draft. On the pretrained char-LSTM's pairs (V = 465) s = 5 fell below
        single-draft on up to 59 of 80 positions and the nucleus alone on up to 62 (an int8 drafter,
        q close to p); ``benchmarks/bench_khisti_truncation.py`` has the evidence.

    Attributes
    ----------
    s : int
        The truncation used.
    fallback : bool
        The default's guard replaced the tournament by the first draft.

    References
    ----------
    Khisti et al., ICLR 2025, Theorem 1 (canonical decomposition), §4 (truncated LP).
    """

    name = "khisti-lp"

    def _prepare(self, s: int | None = None):
        guard = s is None
        if guard:
            s = nucleus_truncation(self.p, self.q)
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
            raise InvalidInputError(f"khisti-lp needs an integer truncation s >= 1, got {s!r}")
        self.s = int(s)
        if self.V > MAX_KHISTI_V:
            raise ProblemTooLargeError(
                f"khisti-lp stores a {self.V} x {self.V} keep matrix per stage; V is over the limit "
                f"{MAX_KHISTI_V}"
            )
        _budget.require(_budget.stored_floats(
            f"khisti-lp keeps n - 1 = {self.n - 1} stages of a {self.V} x {self.V} keep matrix",
            (self.n - 1) * self.V**2))
        self.stages = []
        law = self.q
        for _ in range(self.n - 1):
            v, law = tournament_stage(self.p, law, self.q, self.s)
            self.stages.append(v)
        self.fallback = guard and np.minimum(self.p, law).sum() < np.minimum(self.p, self.q).sum()
        if self.fallback:  # keep the previous winner at every stage: the first draft, law q
            self.stages = [np.ones((self.V, self.V)) for _ in self.stages]
            law = self.q
        self.mu = law
        self.accept_ratio, self.res = speculative_step(self.p, law)

    def winner_law(self, drafts) -> np.ndarray:
        """Exact law of the tournament winner Y' given the drafts."""
        cur = np.zeros(self.V)
        cur[drafts[0]] = 1.0
        for v, x in zip(self.stages, drafts[1:], strict=True):
            moved = cur @ (1.0 - v[:, x])
            cur = cur * v[:, x]
            cur[x] += moved
        return cur

    def conditional(self, drafts):
        accept = self.winner_law(drafts) * self.accept_ratio
        return accept, max(1.0 - accept.sum(), 0.0) * self.res  # 1 - (1 + ulp) is not a mass

    def closed_form_acceptance(self):
        return float(np.minimum(self.p, self.mu).sum())
