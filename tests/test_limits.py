"""Edges of the promises: huge draft counts, masses within an ulp of one, and work refused up front."""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

import mdtheory as md
from mdtheory import _jit
from mdtheory._validate import as_distribution
from mdtheory.drafts import IID
from mdtheory.errors import InvalidInputError
from tests.tolerances import ROUNDING


def _alpha_reference(p, q, n) -> float:
    """alpha* of iid drafts in 50-digit decimals: the best prefix of the exact p/q order (Hu et al.'s
    prefix property), every mass and power from the floats' exact values, no log1p."""
    def ratio(i):
        return Fraction(p[i]) / Fraction(q[i]) if q[i] > 0 else Fraction(10**400)

    with localcontext() as ctx:
        ctx.prec = 50
        sp, sq, best = Decimal(0), Decimal(0), Decimal(0)
        for i in sorted(range(len(p)), key=ratio):
            sp += Decimal(float(p[i]))
            sq += Decimal(float(q[i]))
            best = max(best, min(sq, Decimal(1)) ** n - sp)
        return float(1 - best)


@pytest.mark.parametrize("mode", ["python", "numba"])
@pytest.mark.parametrize("n", [10**8, 10**12, 10**15])
def test_a_mass_an_ulp_below_one_keeps_its_power(monkeypatch, n, mode):
    # q({0, 1}) = 1 - 2^-54 rounds to 1 in float64; its n-th power is far from 1 at large n
    monkeypatch.setattr(_jit, "FORCE", mode)
    p, q = [0.5, 0.0, 0.5], [1 - 2**-53, 2**-54, 2**-54]
    expected = _alpha_reference(p, q, n)
    assert expected > 0.5 + 1e-9
    for method in ("auto", "subsets"):
        res = md.optimal_acceptance(p, q, n, method=method)
        assert res.status == "optimal"
        assert res.value == pytest.approx(expected, abs=ROUNDING)
        assert 1 + res.cut_p - res.cut_q == pytest.approx(expected, abs=ROUNDING)
    full = md.optimal_acceptance(p, q, n, certify="full")
    assert full.value == pytest.approx(expected, abs=ROUNDING)


@pytest.mark.parametrize("n", [10**6, 10**9, 10**12])
def test_softmax_pair_at_huge_n_matches_decimal_powers(n):
    rng = np.random.default_rng(1)
    z = 3.0 * rng.standard_normal(2000)
    p = np.exp(z - z.max())
    p /= p.sum()
    q = np.exp(3 * (z - z.max()))
    q /= q.sum()
    # the law the package works with: each vector divided by its own float64 sum
    expected = _alpha_reference(as_distribution(p, "p"), as_distribution(q, "q"), n)
    assert expected < 1 - 1e-6  # a pair whose optimum still moves with n
    assert md.alpha_star(p, q, n) == pytest.approx(expected, abs=ROUNDING)


def test_iid_containment_keeps_the_distance_from_one():
    model = IID([1 - 2**-53, 2**-54, 2**-54], 10**15)
    masks = np.array([[True, True, False], [True, False, False], [False, True, True]])
    with localcontext() as ctx:
        ctx.prec = 50
        exact = [float((1 - Decimal(2) ** -54) ** 10**15), float((1 - Decimal(2) ** -53) ** 10**15),
                 0.0]
    np.testing.assert_allclose(model.containment(masks), exact, rtol=ROUNDING, atol=0)
    many = np.tile(masks, (8, 1))  # past the few-sets path: one matrix product
    np.testing.assert_allclose(model.containment(many), np.tile(exact, 8), rtol=ROUNDING, atol=0)


@pytest.mark.parametrize("n", [10**30, 2**53 + 1, np.uint64(2**64 - 1)])
def test_drafts_beyond_two_to_the_53_are_refused_whatever_ran_before(n):
    u = np.full(2000, 1 / 2000)
    for warm in (False, True):
        if warm:  # a large call first loads the compiled kernels
            assert md.alpha_star(u, u, 5) == pytest.approx(1.0, abs=ROUNDING)
        with pytest.raises(InvalidInputError, match="at most 2\\^53"):
            md.alpha_star(u, u, n)
    assert md.alpha_star(u, u, 2**53) == pytest.approx(1.0, abs=ROUNDING)
