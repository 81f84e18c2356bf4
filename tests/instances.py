"""Named canonical instances with known optimal acceptance (iid drafts unless noted)."""

from __future__ import annotations

import numpy as np

# name: (p, q, n, known alpha* or None)
CANONICAL = {
    "p_equals_q": ([0.5, 0.3, 0.2], [0.5, 0.3, 0.2], 2, 1.0),
    "disjoint_supports": ([0.6, 0.4, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5], 3, 0.0),
    "point_mass_same": ([1.0, 0.0, 0.0], [1.0, 0.0, 0.0], 2, 1.0),
    "point_mass_target": ([1.0, 0.0, 0.0], [0.2, 0.3, 0.5], 2, 1 - 0.8**2),  # 1 - P(no draft is 0)
    "point_mass_draft": ([0.2, 0.3, 0.5], [0.0, 1.0, 0.0], 3, 0.3),
    "zeros_in_p": ([0.0, 0.5, 0.5], [0.2, 0.4, 0.4], 2, 1 - 0.2**2),  # T = {0}: p(T) - q(T)^2
    "zeros_in_q": ([0.2, 0.4, 0.4], [0.0, 0.5, 0.5], 1, 0.8),
    "ties_uniform_vs_half": ([0.25] * 4, [0.5, 0.5, 0.0, 0.0], 2, 0.5),
    "two_tokens_one_draft": ([0.7, 0.3], [0.4, 0.6], 1, 0.7),
    # Khisti Thm 2 example, q2 inside [1 - sqrt(2/3), sqrt(2/3) - 1/3] = [0.1835, 0.4832]
    "khisti_thm2_inside": ([1 / 3] * 3, [1 / 3, 0.3, 1 / 3 - 0.3 + 1 / 3], 2, 1.0),
}


def canonical(name):
    p, q, n, alpha = CANONICAL[name]
    return np.asarray(p, float), np.asarray(q, float), n, alpha


def random_pair(rng: np.random.Generator, V: int, concentration: float = 1.0):
    """A random (p, q) pair from a symmetric Dirichlet."""
    return rng.dirichlet(np.full(V, concentration)), rng.dirichlet(np.full(V, concentration))
