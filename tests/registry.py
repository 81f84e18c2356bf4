"""What the registry-driven tests iterate over: one test instance per registered draft model, the
certificate each proof type earns, and the routes a model admits.

A draft model registered in :data:`mdtheory.models.registry.SAMPLINGS` without an entry in
:data:`MODEL_INSTANCES`, or a proof type with a registered check but no entry in
:data:`CERTIFICATES`, fails ``test_every_registry_entry_is_covered`` (tests/test_routes.py).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

import mdtheory as md
from mdtheory.models.registry import sampling_names
from mdtheory.routes.proofs import (
    Exhaustive,
    PrefixBuckets,
    PrefixOrder,
    PriorityOrders,
    SetFlow,
    TopAndDraw,
    TransportPlan,
)


def _one_law(sampling):
    def make(rng, V, n, concentration=1.0):
        q = rng.dirichlet(np.full(V, concentration))
        q[q == 0] = 1e-3  # models that need n tokens with q > 0
        return md.make_draft_model(q / q.sum(), n, sampling)
    return make


def _independent(rng, V, n, concentration=1.0):
    return md.Independent(rng.dirichlet(np.full(V, concentration), size=n))


def _joint(rng, V, n, concentration=1.0):
    """A correlated table: a Dirichlet mixture of a product law and its diagonal."""
    q = rng.dirichlet(np.full(V, concentration))
    table = q
    for _ in range(n - 1):
        table = np.multiply.outer(table, q)
    diagonal = np.zeros((V,) * n)
    diagonal[(np.arange(V),) * n] = q
    return md.Joint(0.7 * table + 0.3 * diagonal)


#: One test instance factory ``make(rng, V, n, concentration)`` per registered draft model name.
MODEL_INSTANCES = {
    "iid": _one_law("iid"),
    "without-replacement": _one_law("without-replacement"),
    "conditional-poisson": _one_law("conditional-poisson"),
    "greedy": _one_law("greedy"),
    "top": _one_law("top"),
    "independent": _independent,
    "joint": _joint,
}


def registered_models() -> tuple[str, ...]:
    """The registered draft models by name (no aliases)."""
    return sampling_names()


def certificate_for(p, model, method: str, mode: str = "fast") -> str:
    """The certificate the front door must report for route ``method`` on a small model (at most
    :data:`mdtheory.certify.MAX_CERT_SETS` draft sets), from the type of the proof the route
    returns."""
    kind = type(md.METHODS[method](p, model).proof)
    if kind is PrefixBuckets:
        return "lex-base" if mode == "full" else "bracket"
    if kind is PrefixOrder:
        if model.lex_base_closed_form:
            return "lex-base" if mode == "full" else "base"
        return "flow"
    return CERTIFICATES[kind]


#: The certificate of each proof type (PrefixOrder, PrefixBuckets: see :func:`certificate_for`).
CERTIFICATES = {
    TransportPlan: "plan",
    SetFlow: "flow",
    PrefixOrder: None,
    PrefixBuckets: None,
    PriorityOrders: "order-mixture",
    TopAndDraw: "greedy-flow",
    Exhaustive: "exhaustive",
}


def admitted_routes(p, model) -> dict:
    """{route name: result} for every registered route that serves the model by its declaration
    (:meth:`mdtheory.routes.proofs.Route.admits`); a route that declares it does not is checked to
    refuse it with InvalidInputError."""
    out = {}
    for name, route in md.METHODS.items():
        if route.admits(model):
            out[name] = md.optimal_acceptance(p, model, method=name)
            continue
        with pytest.raises(md.InvalidInputError, match=f"method '{name}'"):
            md.optimal_acceptance(p, model, method=name)
    return out


def brute_force_alpha(p, model) -> float:
    """1 + min over all 2^V token sets of p(T) - Q(T), one containment per set (small V)."""
    V = p.size
    best = 0.0
    for k in range(1, V + 1):
        for T in combinations(range(V), k):
            mask = np.zeros(V, dtype=bool)
            mask[list(T)] = True
            best = min(best, float(p[mask].sum()) - float(model.containment(mask)))
    return 1.0 + best
