"""Property-based invariants of alpha* (hypothesis, derandomised, small sizes)."""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import mdtheory as md

from .tolerances import ROUNDING, SOLVER


@st.composite
def pairs(draw, max_v=6):
    V = draw(st.integers(1, max_v))
    weights = st.lists(st.floats(0, 1, allow_nan=False, allow_infinity=False), min_size=V,
                       max_size=V)
    p, q = np.array(draw(weights)), np.array(draw(weights))
    assume(p.sum() > 1e-3 and q.sum() > 1e-3)
    return p / p.sum(), q / q.sum()


@given(pairs(), st.integers(1, 4))
def test_alpha_between_single_draft_and_per_token_coverage(pq, n):
    """No clamp hides a value: alpha* lies between the single-draft acceptance 1 - TV(p, q) (more iid
    drafts never hurt) and sum_y min(p(y), P(y is drafted)) = sum_y min(p, 1 - (1 - q)^n) (each
    token is output as an accepted draft at most as often as it is drafted), two bounds inside
    [0, 1] computed here without the package."""
    p, q = pq
    lower = float(np.minimum(p, q).sum())
    upper = float(np.minimum(p, 1.0 - (1.0 - q) ** n).sum())
    for method in ("prefix", "subsets", "dual"):
        res = md.optimal_acceptance(p, q, n, method=method)
        assert lower - SOLVER <= res.value <= upper + SOLVER, method
        assert res.status == "optimal", method


@given(pairs(), st.integers(1, 4))
def test_nondecreasing_in_drafts_iid(pq, n):
    p, q = pq
    assert md.alpha_star(p, q, n + 1) >= md.alpha_star(p, q, n) - ROUNDING


@given(pairs(max_v=5), st.integers(1, 3))
def test_nondecreasing_in_drafts_without_replacement(pq, n):
    p, q = pq
    assume(np.count_nonzero(q) > n)
    a_n = md.alpha_star(p, q, n, "without-replacement")
    assert md.alpha_star(p, q, n + 1, "without-replacement") >= a_n - ROUNDING


@given(pairs(max_v=5), st.integers(1, 3))
def test_without_replacement_at_least_iid(pq, n):
    """Distinct drafts cover at least as much: P(set ⊆ T) is smaller without replacement."""
    p, q = pq
    assume(np.count_nonzero(q) >= n)
    assert md.alpha_star(p, q, n, "without-replacement") >= md.alpha_star(p, q, n) - ROUNDING


@given(pairs(), st.integers(1, 3), st.randoms(use_true_random=False))
def test_invariant_under_relabelling(pq, n, rnd):
    p, q = pq
    perm = list(range(len(p)))
    rnd.shuffle(perm)
    for method in ("prefix", "subsets", "dual"):
        a = md.alpha_star(p, q, n, method=method)
        b = md.alpha_star(p[perm], q[perm], n, method=method)
        assert a == pytest.approx(b, abs=SOLVER), method


@given(pairs(), st.integers(1, 5))
def test_p_equals_q_gives_one(pq, n):
    _, q = pq
    assert md.alpha_star(q, q, n) == pytest.approx(1.0, abs=ROUNDING)


@given(pairs())
def test_one_draft_is_one_minus_tv(pq):
    p, q = pq
    assert md.alpha_star(p, q, 1) == pytest.approx(1 - 0.5 * np.abs(p - q).sum(), abs=ROUNDING)


@given(pairs(max_v=5), st.integers(1, 3))
def test_prefix_agrees_with_dual(pq, n):
    p, q = pq
    assert md.alpha_star(p, q, n, method="prefix") == pytest.approx(
        md.alpha_star(p, q, n, method="dual"), abs=SOLVER)
