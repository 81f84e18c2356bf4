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
    The candidate marginals that uniform-time schedules reach are exactly the base polytope of
    :math:`\\bar g(S) = \\frac1n \\sum_i [1 - (1 - q_i(S))^n] \\le g(S)`; the bound equals α* for iid
    drafts and can fall far below it otherwise (:math:`q_1 = \\delta_a`, :math:`q_2 = \\delta_b`,
    :math:`p = \\delta_a`: α* = 1, the bound 1/2), which is why the optimal rule for independent drafts
    is an order mixture (:class:`~mdtheory.models.mixture.OrderMixture`). Proof: papers/theory.md,
    section "Uniform-time schedules for independent drafts".

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
