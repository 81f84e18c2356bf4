"""The optimal rule (iid drafts) on every kind of valid input: it returns, accepts with probability
alpha*, and its exact per-tuple law is finite and sums to one.

alpha* comes from routes independent of the rule: the sorted-prefix route, the exhaustive subset
route at small V, and at large V·n the sorted-prefix formula in extended precision
(:func:`alpha_extended`), since the float64 prefix route itself loses about V·n·2^-53 there.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mdtheory as md
from mdtheory.errors import InvalidInputError, SolverError
from mdtheory.models.polymatroid import lex_optimal_base_iid
from mdtheory.rules import make_rule
from mdtheory.rules.schedule import realise_iid

# |acceptance - alpha*|, and sum-to-one, non-negativity and output law of the exact law API
from .tolerances import ROUNDING as LAW_TOL
from .tolerances import ROUNDING as TOL


def alpha_extended(p: np.ndarray, q: np.ndarray, n: int) -> float:
    """1 - max_j [Q_j^n - P_j] over the prefixes by p/q increasing, in numpy's longdouble."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        order = np.argsort(p / q, kind="stable")
    Q = np.cumsum(q[order].astype(np.longdouble))
    P = np.cumsum(p[order].astype(np.longdouble))
    return float(1 - max(np.max(np.minimum(Q, 1) ** n - P), 0))


def softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    z = logits / temperature
    e = np.exp(z - z.max())
    return e / e.sum()


def renorm(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x / x.sum()


def check_law(rule, tuples) -> None:
    """The exact per-tuple law of each tuple is finite, non-negative and sums to one."""
    for x in tuples:
        a, r = rule.conditional(np.asarray(x))
        assert np.all(np.isfinite(a)) and np.all(np.isfinite(r)), f"non-finite law for {x}"
        assert a.min() >= 0 and r.min() >= 0, f"negative law for {x}: {a.min()}, {r.min()}"
        assert abs(a.sum() + r.sum() - 1) <= LAW_TOL, f"law of {x} sums to {a.sum() + r.sum()!r}"


def check_rule(p, q, n: int, *, tuples: int = 3, seed: int = 0, realise: str = "cells"):
    """Prepare the rule under warnings-as-errors and check acceptance and the per-tuple law."""
    p, q = renorm(p), renorm(q)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow or 0/0 may leak
        rule = make_rule("optimal", p, q, n, realise=realise)
    alpha = alpha_extended(p, q, n)
    acc = rule.closed_form_acceptance()
    assert abs(acc - alpha) <= TOL, f"acceptance {acc!r} vs alpha* {alpha!r} (V={p.size}, n={n})"
    if p.size * n <= 10**6:  # the float64 route is exact to TOL at this size
        assert abs(md.optimal_acceptance(p, q, n, method="prefix").value - alpha) <= TOL
    rng = np.random.default_rng(seed)
    live = np.flatnonzero(q > 0)
    picks = [rule.model.sample(rng, 1)[0] for _ in range(tuples)]
    picks.append(np.full(n, live[np.argmin(q[live])]))  # the rarest token, n times
    check_law(rule, picks if n <= 64 else [])
    return rule, alpha


def check_enumerated(rule, p) -> None:
    """At small sizes: the output law by enumeration is p, finite, summing to one."""
    _, law = rule.enumerate()
    assert np.all(np.isfinite(law)) and abs(law.sum() - 1) <= LAW_TOL
    assert np.abs(law - renorm(p)).max() <= 1e-9, f"output law off p by {np.abs(law - p).max():g}"


# ------------------------------------------------- temperature, subnormals, overflow, drift, law
@pytest.mark.parametrize("temperature", [0.01, 0.003])
def test_low_temperature_target_returns(temperature):
    rng = np.random.default_rng(1000)
    p = softmax(2 * rng.standard_normal(1000), temperature)
    q = softmax(2 * rng.standard_normal(1000), 1.0)
    check_rule(p, q, 2)


def test_subnormal_target_mass_returns():
    q = renorm([6.5674017161776066e-02, 9.8108457273202955e-07, 6.8537843805975555e-06,
                1.2658213388272264e-05, 2.1222016914623543e-06, 2.4426641975585176e-05])
    for tiny in (1.9e-315, 1e-300):
        rule, alpha = check_rule([1, 0, 0, 0, tiny, 0], q, 2)
        assert abs(alpha - md.optimal_acceptance(renorm([1, 0, 0, 0, tiny, 0]), q, 2,
                                                 method="subsets").value) <= TOL
        check_enumerated(rule, renorm([1, 0, 0, 0, tiny, 0]))


def test_no_overflow_no_acceptance_loss():
    p, q = np.array([1e-320, 0.5, 0.5]), np.array([0.9, 0.05, 0.05])
    base = lex_optimal_base_iid(p, q, 2)
    assert np.all(np.isfinite(base.mu)) and np.all(np.isfinite(base.slopes[:-1]))
    rule, alpha = check_rule(p, q, 2)
    assert abs(alpha - 0.19) <= TOL and abs(rule.closed_form_acceptance() - 0.19) <= TOL
    check_enumerated(rule, p)


@pytest.mark.parametrize("V, n", [(32_000, 8), (128_000, 128)])
def test_no_drift_at_large_v_times_n(V, n):
    rng = np.random.default_rng(3)
    check_rule(softmax(2 * rng.standard_normal(V), 1.0), softmax(2 * rng.standard_normal(V), 1.0),
               n, tuples=1)


@pytest.mark.parametrize("realise", ["cells", "windows"])
@pytest.mark.parametrize("p, q, n", [((1e-30, 1), (1, 1e-30), 1), ((1, 1e-300), (1, 1e-300), 1),
                                     ((0.5, 0.5), (1e-16, 1 - 1e-16), 3)])
def test_law_api_finite_and_exact(p, q, n, realise):
    rule, _ = check_rule(p, q, n, realise=realise)
    for x in range(2):  # every token with q > 0 has time of its own: drafted alone, it is the candidate
        assert rule.strategy.candidate_law(np.full(n, x))[x] == pytest.approx(1.0, abs=1e-15)
    if realise == "windows":
        assert rule.schedule.count.min() >= 1  # every token with q > 0 owns a piece
    check_law(rule, [np.full(n, x) for x in range(2)])
    check_enumerated(rule, p)


@pytest.mark.parametrize("realise", ["cells", "windows"])
def test_very_short_piece_tuple(realise):
    rule = make_rule("optimal", [0.5, 0.5], [1e-16, 1 - 1e-16], 3, realise=realise)
    a, r = rule.conditional(np.array([0, 0, 0]))
    assert abs(rule.strategy.candidate_law([0, 0, 0])[0] - 1) <= 1e-15  # token 0 is the candidate
    assert r.min() >= 0 and abs(a.sum() + r.sum() - 1) <= LAW_TOL


# ------------------------------------------------------------------ sweeps
def _variant(kind: str, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    x = x.copy()
    if kind == "subnormal":
        k = rng.random(x.size) < 0.4
        x[k] *= 10.0 ** -rng.uniform(250, 330, k.sum())
        x[rng.integers(x.size)] = 5e-324
    elif kind == "float32":
        x = x.astype(np.float32).astype(float)
    elif kind == "zeros":
        x[rng.random(x.size) < 0.5] = 0.0
    elif kind == "ties":
        x = rng.choice([0.0, 1e-300, 1e-30, 1.0, 1.0, 2.0], x.size)
    if not x.any():
        x[0] = 1.0
    return renorm(x)


@pytest.mark.parametrize("kind", ["plain", "subnormal", "float32", "zeros", "ties"])
def test_seeded_sweep_temperatures(kind):
    """Temperatures 10^-3..10^3 on either side, V up to 1000, n up to 1024."""
    rng = np.random.default_rng(["plain", "subnormal", "float32", "zeros", "ties"].index(kind))
    for log_tp in (-3, -1, 0, 1, 3):
        for log_tq in (-3, 0, 3):
            V = int(rng.choice([7, 60, 1000]))
            n = int(rng.choice([1, 2, 8, 128, 1024]))
            p = _variant(kind, softmax(2 * rng.standard_normal(V), 10.0 ** log_tp), rng)
            q = _variant(kind, softmax(2 * rng.standard_normal(V), 10.0 ** log_tq), rng)
            check_rule(p, q, n, tuples=1)


def test_point_masses_and_equal_pairs():
    rng = np.random.default_rng(5)
    for V, n in [(2, 1), (5, 3), (300, 16), (1000, 1024)]:
        p = softmax(2 * rng.standard_normal(V), 1.0)
        point = np.zeros(V)
        point[V - 1] = 1.0
        for a, b in [(p, p), (point, p), (p, point), (point, point)]:
            rule, alpha = check_rule(a, b, n, tuples=1)
            if a is b:
                assert abs(alpha - 1) <= TOL


def test_largest_vocabulary():
    rng = np.random.default_rng(7)
    V = 128_000
    check_rule(softmax(2 * rng.standard_normal(V), 10.0), softmax(2 * rng.standard_normal(V), 0.1),
               8, tuples=1)


_masses = st.one_of(st.just(0.0), st.just(5e-324), st.floats(1e-320, 1e-300),
                    st.floats(1e-30, 1.0), st.just(1.0))


@given(st.integers(2, 7).flatmap(lambda V: st.tuples(st.lists(_masses, min_size=V, max_size=V),
                                                     st.lists(_masses, min_size=V, max_size=V))),
       st.integers(1, 4), st.booleans())
def test_hypothesis_small_pairs_against_the_subset_route(pair, n, through_float32):
    p, q = (np.array(x) for x in pair)
    if through_float32:
        p, q = p.astype(np.float32).astype(float), q.astype(np.float32).astype(float)
    if not p.any() or not q.any():
        return
    p, q = renorm(p), renorm(q)
    rule, alpha = check_rule(p, q, n, tuples=2)
    assert abs(md.optimal_acceptance(p, q, n, method="subsets").value - alpha) <= TOL
    if np.count_nonzero(q) ** n <= 500:
        check_enumerated(rule, p)


# ------------------------------------------------------------------ errors instead of hangs
def test_schedule_refuses_non_finite_targets():
    with pytest.raises(InvalidInputError, match="finite"):
        realise_iid([np.nan, 1.0], [0.5, 0.5], 2)
    with pytest.raises(InvalidInputError, match="finite"):
        realise_iid([np.inf, 0.0], [0.5, 0.5], 2)


def test_kernel_status_becomes_solver_error(monkeypatch):
    import mdtheory.rules.schedule as schedule

    def stuck(qs, mus, n, nfront, *work):
        return 1, 0

    monkeypatch.setattr(schedule, "_build", stuck)
    with pytest.raises(SolverError, match="impossible state"):
        realise_iid([0.5, 0.5], [0.5, 0.5], 2)


def test_candidate_law_refuses_undrafted_tokens():
    rule = make_rule("optimal", [0.5, 0.5], [1.0, 0.0], 2)
    with pytest.raises(InvalidInputError, match="q = 0"):
        rule.conditional(np.array([0, 1]))


@pytest.mark.parametrize("n", [128, 1024])
def test_prefix_route_accurate_at_large_v_times_n(n):
    """The front door's prefix scan sums p and q with compensation: plain running sums lost about
    V n 2^-53 (1.3e-10 at V = 128k, n = 128; 1.9e-9 at n = 1024 on a float32-rounded pair)."""
    rng = np.random.default_rng(3)
    p = renorm(softmax(2 * rng.standard_normal(128_000), 1.0).astype(np.float32))
    q = softmax(2 * rng.standard_normal(128_000), 1.0)
    assert abs(md.optimal_acceptance(p, q, n).value - alpha_extended(p, q, n)) <= 1e-12
