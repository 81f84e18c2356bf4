"""Published statements checked against the independent LP routes."""

import math

import numpy as np
import pytest

import mdtheory as md


def theorem3(p, q):
    """Khisti et al. Thm 3 (n = 2 iid): min_S p(S) + q(S^c)^2 + 2 q(S) q(S^c)."""
    V = len(p)
    best = math.inf
    for code in range(2**V):
        S = np.array([(code >> i) & 1 for i in range(V)], dtype=bool)
        qs, qc = q[S].sum(), q[~S].sum()
        best = min(best, p[S].sum() + qc**2 + 2 * qs * qc)
    return best


def test_khisti_theorem3_matches_lp():
    rng = np.random.default_rng(42)
    for _ in range(40):
        V = int(rng.integers(2, 8))
        p, q = rng.dirichlet(np.ones(V) * 0.6), rng.dirichlet(np.ones(V) * 0.6)
        assert theorem3(p, q) == pytest.approx(md.alpha_star(p, q, 2, method="otlp"), abs=1e-9)


def test_khisti_theorem2_example_interval():
    """p uniform on 3 tokens, q = (1/3, q2, 2/3 - q2): alpha* = 1 iff q2 in [1 - √(2/3), √(2/3) - 1/3]."""
    lo, hi = 1 - math.sqrt(2 / 3), math.sqrt(2 / 3) - 1 / 3
    p = np.full(3, 1 / 3)
    for q2 in np.linspace(0.0, 2 / 3, 41):
        q = np.array([1 / 3, q2, 2 / 3 - q2])
        one = md.optimal_acceptance(p, q, 2, method="dual").value >= 1 - 1e-10
        if lo + 1e-6 < q2 < hi - 1e-6:
            assert one, q2
        elif q2 < lo - 1e-6 or q2 > hi + 1e-6:
            assert not one, q2


def test_khisti_theorem2_condition_is_hall():
    """alpha* = 1 iff p(S) >= q(S)^2 for all S (n = 2 iid), on random near-boundary instances."""
    rng = np.random.default_rng(8)
    for _ in range(60):
        q = rng.dirichlet(np.ones(4))
        p = 0.7 * q + 0.3 * rng.dirichlet(np.ones(4))
        codes = [np.array([(c >> i) & 1 for i in range(4)], bool) for c in range(16)]
        hall = all(p[S].sum() >= q[S].sum() ** 2 - 1e-13 for S in codes)
        assert (md.alpha_star(p, q, 2, method="maxflow") >= 1 - 1e-10) == hall


def test_without_replacement_is_not_the_elementary_symmetric_ratio():
    """papers/theory.md §3: q = (0.5, 0.3, 0.2), n = 2, T = first two tokens."""
    q, T = [0.5, 0.3, 0.2], [True, True, False]
    assert float(md.WithoutReplacement(q, 2).containment(T)) == pytest.approx(0.8 * 0 + 0.3 + 0.3 * 0.5 / 0.7)
    assert float(md.WithoutReplacement(q, 2).containment(T)) == pytest.approx(0.5143, abs=5e-5)
    assert float(md.ConditionalPoisson(q, 2).containment(T)) == pytest.approx(0.4839, abs=5e-5)
