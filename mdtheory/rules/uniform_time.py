"""What uniform-time schedules reach for independent drafts (:func:`uniform_time_bound`).

α* for independent drafts (and every model with exact prefix containments) is the minimum-norm-point
route, :mod:`mdtheory.routes.mnp`; its optimal rule is an order mixture
(:class:`mdtheory.models.mixture.OrderMixture`), not a uniform-time schedule: this module says why.
"""

from __future__ import annotations

import numpy as np

from ..errors import ProblemTooLargeError

__all__ = ["uniform_time_bound", "MAX_UNIFORM_V"]


#: Largest alphabet for :func:`uniform_time_bound` (all 2^V token sets).
MAX_UNIFORM_V = 20


def uniform_time_bound(p: np.ndarray, qs: np.ndarray) -> float:
    """Best acceptance of time schedules with uniform times, for independent drafts (all 2^V sets).

    .. math:: \\bar\\alpha = 1 + \\min_T \\Big[p(T) - \\frac1n \\sum_{i=1}^n q_i(T)^n\\Big] \\le \\alpha^*.

    Notes
    -----
    **Theorem.** Let draft i draw its time uniformly from its token's pieces of a tiling
    :math:`(E_i(x))_x` of [0, 1] with :math:`|E_i(x)| = q_i(x)`, and let the earliest draft be the
    candidate. The candidate marginals so reachable are exactly the base polytope :math:`B(\\bar g)`,

    .. math:: \\bar g(S) = \\frac1n \\sum_{i=1}^n \\big[1 - (1 - q_i(S))^n\\big].

    *Proof.* Each draft's time is uniform on [0, 1] whatever its token, and the times are
    independent, so draft i is the earliest at time t with density :math:`w(t) = (1 - t)^{n-1}` and
    :math:`\\mu = \\sum_i \\mu_i`, :math:`\\mu_i(x) = \\int_{E_i(x)} w`. As w decreases,
    :math:`\\mu_i(S) \\le \\int_0^{q_i(S)} w = h_i(S) := (1 - (1 - q_i(S))^n)/n` with equality at
    S = Ω, so :math:`\\mu_i \\in B(h_i)`; conversely every base of :math:`n h_i` has a tiling
    (:mod:`mdtheory.rules.schedule`, the construction for the iid density :math:`n(1-t)^{n-1}`), so the
    reachable :math:`\\mu_i` are all of :math:`B(h_i)`. The tilings are chosen independently per draft,
    so the reachable μ form the Minkowski sum :math:`\\sum_i B(h_i) = B(\\sum_i h_i) = B(\\bar g)`
    (the base polytope of a sum of submodular functions is the Minkowski sum of their base
    polytopes; Fujishige 2005, §3). ∎

    By AM–GM, :math:`\\prod_i (1 - q_i(S)) \\le \\frac1n \\sum_i (1 - q_i(S))^n`, so
    :math:`\\bar g \\le g` and :math:`B(\\bar g) \\subseteq B(g)`; the best acceptance over
    :math:`B(\\bar g)` is the formula above (Edmonds' min-max for :math:`\\bar g`). It equals α* for
    iid drafts and can fall far below it: with :math:`q_1 = \\delta_a`, :math:`q_2 = \\delta_b`,
    :math:`p = \\delta_a`, α* = 1 (draft 1 is always a) while every uniform-time schedule proposes b
    half the time, :math:`\\bar\\alpha = 1/2`. That is why the optimal rule for independent drafts is
    an order mixture (:class:`~mdtheory.models.mixture.OrderMixture`), not a uniform-time schedule.

    Raises
    ------
    ProblemTooLargeError
        V over :data:`MAX_UNIFORM_V`.
    """
    p, qs = np.asarray(p, float), np.asarray(qs, float)
    V, n = p.size, qs.shape[0]
    if V > MAX_UNIFORM_V:
        raise ProblemTooLargeError(f"uniform_time_bound enumerates 2^{V} sets, over 2^{MAX_UNIFORM_V}")
    sets = ((np.arange(2 ** V)[:, None] >> np.arange(V)) & 1).astype(float)
    return float(1.0 + np.min(sets @ p - np.mean((sets @ qs.T) ** n, axis=1)))
