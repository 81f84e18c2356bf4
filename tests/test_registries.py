"""One registration idiom for every kind of plug-in: ``register_sampling`` (draft models),
``register_route``, ``register_rule``, ``register_torch_rule`` and ``register_verifier`` each add a
class (or route) under its own name, return it, and refuse a wrong kind or a name taken by another."""

from __future__ import annotations

import pytest

import mdtheory as md
from mdtheory.blocks import VERIFIERS, BlockVerification, DraftTree, register_verifier
from mdtheory.errors import InvalidInputError
from mdtheory.routes.proofs import Route
from mdtheory.rules import RULES, register_rule
from mdtheory.rules.baselines import RecursiveRejection
from mdtheory.solve import register_route

from .block_registry import variants


def test_register_rule_adds_returns_and_refuses():
    class Again(RecursiveRejection):
        name = "rrs-again"

    try:
        assert register_rule(Again) is Again and RULES["rrs-again"] is Again
        assert register_rule(Again) is Again  # the same class again: no change
    finally:
        RULES.pop("rrs-again", None)
    with pytest.raises(InvalidInputError, match="rule 'rrs' is already RecursiveRejection"):
        register_rule(type("Other", (RecursiveRejection,), {"name": "rrs"}))
    with pytest.raises(InvalidInputError, match="SelectionRule subclass with a name"):
        register_rule(dict)


def test_register_route_adds_returns_and_refuses():
    route = Route("prefix-again", md.METHODS["prefix"].run, md.METHODS["prefix"].estimate)
    try:
        assert register_route(route) is route and md.METHODS["prefix-again"] is route
        res = md.optimal_acceptance([0.5, 0.5], [0.9, 0.1], 2, method="prefix-again")
        assert res.method == "prefix-again" and res.success
    finally:
        md.METHODS.pop("prefix-again", None)
    with pytest.raises(InvalidInputError, match="route 'prefix' is already registered"):
        register_route(Route("prefix", route.run, route.estimate))
    with pytest.raises(InvalidInputError, match="other than 'auto'"):
        register_route(Route("auto", route.run, route.estimate))


def test_torch_rules_are_tied_to_their_numpy_rules_by_the_registry():
    pytest.importorskip("torch")
    from mdtheory.torch_bridge import TORCH_RULES, TorchRRS, register_torch_rule

    assert TORCH_RULES and all(RULES[name] is cls.rule for name, cls in TORCH_RULES.items())

    class Unregistered(RecursiveRejection):
        name = "rrs-unregistered"

    with pytest.raises(InvalidInputError, match="whose rule is a registered numpy rule"):
        register_torch_rule(type("TorchUnregistered", (TorchRRS,), {"rule": Unregistered}))
    assert register_torch_rule(TorchRRS) is TorchRRS


def test_register_verifier_adds_a_covered_verifier_and_refuses_bad_declarations():
    class Again(BlockVerification):
        name = "block-again"

    try:
        assert register_verifier(Again) is Again and VERIFIERS["block-again"] is Again
        assert "block-again" in {v.name for v in variants(DraftTree((2, 1)))}  # the tests reach it
    finally:
        VERIFIERS.pop("block-again", None)
    with pytest.raises(InvalidInputError, match="verifier 'block' is already BlockVerification"):
        register_verifier(type("Other", (BlockVerification,), {"name": "block"}))
    with pytest.raises(InvalidInputError, match="takes_rule must be one of"):
        register_verifier(type("Bad", (BlockVerification,), {"name": "bad", "takes_rule": "pick"}))
    with pytest.raises(InvalidInputError, match="tree_samplings must be tree samplings"):
        register_verifier(type("Bad", (BlockVerification,), {"name": "bad", "tree_samplings": ("greedy",)}))
    with pytest.raises(InvalidInputError, match="BlockVerifier subclass with a name"):
        register_verifier(RecursiveRejection)
    assert "bad" not in VERIFIERS
