"""Reusable optimality certificates (after networkx's validate_flows and POT's check_duality_gap).

Each helper raises AssertionError with a message naming what failed; tests call them on the output of
every route. Which checks apply is read off the result's fields (plan, flow, duals, duality gap) and
the certificate off the type of the proof the route returns (tests/registry.py), not off route names.
"""

from __future__ import annotations

import numpy as np

from mdtheory.certify import CERT_TOL
from mdtheory.models.polymatroid import MAX_EXHAUSTIVE_V, base_polytope_violation

from .registry import certificate_for
from .tolerances import FEASIBILITY as TOL  # feasibility and objective of float solutions


def support_members(result, V: int) -> np.ndarray:
    """Indicator (M, V) of the tokens of each support entry (tuples or sets) of a result."""
    sup = result.support
    if sup.dtype == bool:
        return sup
    members = np.zeros((len(sup), V), dtype=bool)
    for j in range(sup.shape[1]):
        members[np.arange(len(sup)), sup[:, j]] = True
    return members


def check_plan(result, p: np.ndarray, tol: float = TOL) -> None:
    """An OTLP plan pi(y | x) is a feasible selection rule with output law p and acceptance = value."""
    plan, mass = result.plan, result.support_probs
    members = support_members(result, p.size)
    assert plan.min() >= -tol, f"{result.method}: negative plan entry {plan.min():g}"
    assert np.abs(plan.sum(axis=1) - 1).max() <= tol, f"{result.method}: a row of pi does not sum to 1"
    out_law = mass @ plan
    assert np.abs(out_law - p).max() <= tol, f"{result.method}: output law differs from p by " \
        f"{np.abs(out_law - p).max():g}"
    acc = float(np.sum(mass[:, None] * plan * members))
    assert abs(acc - result.value) <= tol, f"{result.method}: plan accepts {acc} != value {result.value}"


def check_flow(result, p: np.ndarray, tol: float = TOL) -> None:
    """A relaxed plan S(U, y) is a feasible flow (capacities p and w) whose value is the result's."""
    flow, mass = result.flow, result.support_probs
    members = support_members(result, p.size)
    assert flow.min() >= -tol, f"{result.method}: negative flow"
    assert np.all(flow[~members] <= tol), f"{result.method}: flow on a token outside its draft set"
    assert np.all(flow.sum(axis=0) <= p + tol), f"{result.method}: a token receives more than p(y)"
    assert np.all(flow.sum(axis=1) <= mass + tol), f"{result.method}: a draft set sends more than w_U"
    assert abs(flow.sum() - result.value) <= tol, f"{result.method}: flow {flow.sum()} != {result.value}"


def check_dual(result, p: np.ndarray, tol: float = TOL) -> None:
    """The min-cut LP solution is 0/1, feasible (a_y + b_U >= 1 for y in U) and attains the value."""
    a, b = result.duals["token"], result.duals["set"]
    members = support_members(result, p.size)
    assert set(np.unique(a)) <= {0.0, 1.0} and set(np.unique(b)) <= {0.0, 1.0}, "dual is not 0/1"
    slack = a[None, :] + b[:, None] - 1.0
    assert np.all(slack[members] >= -tol), "dual infeasible: some a_y + b_U < 1 with y in U"
    obj = float(p @ a + result.support_probs @ b)
    assert abs(obj - result.value) <= tol, f"dual objective {obj} != value {result.value}"


def check_zero_gap(result, tol: float = TOL) -> None:
    """The solve's primal and dual objectives agree."""
    assert result.duality_gap is not None, f"{result.method} reports no duality gap"
    assert abs(result.duality_gap) <= tol, f"{result.method}: duality gap {result.duality_gap:g}"


def check_cut(result, p: np.ndarray, model, tol: float = TOL) -> None:
    """The cut set T satisfies 1 + p(T) - Q(T) = value (cut capacity = flow value)."""
    T = np.zeros(p.size, dtype=bool)
    T[result.cut] = True
    cut_value = 1.0 + float(p[T].sum()) - float(model.containment(T))
    assert abs(cut_value - result.value) <= tol, \
        f"{result.method}: cut {result.cut} has value {cut_value}, result says {result.value}"


def check_proof(result, p: np.ndarray, model, tol: float = TOL) -> None:
    """The front door's own proof is reported: which primal object, and a gap within CERT_TOL; the
    iid prefix route's base attains the value and lies in B(g) (all 2^V sets, small V)."""
    expected = certificate_for(p, model, result.method)
    assert result.certificate == expected, (result.method, result.certificate, expected)
    assert result.status == "optimal", f"{result.method}: status {result.status}"
    assert abs(result.certificate_gap) <= CERT_TOL, f"{result.method}: gap {result.certificate_gap}"
    if result.certificate == "base":
        assert abs(np.minimum(p, result.base).sum() - result.value) <= tol, "base misses the value"
        if model.V <= MAX_EXHAUSTIVE_V:
            assert base_polytope_violation(result.base, model) <= tol, "base outside B(g)"


def check_all(result, p: np.ndarray, model, tol: float = TOL) -> None:
    """Every certificate that applies to the result: its cut and proof always, its plan, flow and
    duals where it has them, a zero duality gap where it reports one."""
    check_cut(result, p, model, tol)
    check_proof(result, p, model, tol)
    if result.plan is not None:
        check_plan(result, p, tol)
    if result.flow is not None:
        check_flow(result, p, tol)
    if result.duals is not None:
        check_dual(result, p, tol)
    if result.duality_gap is not None:
        check_zero_gap(result, tol)
