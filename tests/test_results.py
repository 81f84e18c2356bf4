"""One result base: every result class of the package is a :class:`mdtheory.result.Result` with a
status, a success flag, a message and ``to_dict(keys)``, so that every ``--json`` has one shape. A
result class of any module of the package without an instance here fails
``test_every_result_class_is_covered``."""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import mdtheory as md
from mdtheory.blocks import (
    BlockVerification,
    audit_block,
    block_efficiency_bound,
    iid_drafts,
    simulation,
    sun_toy,
)
from mdtheory.blocks.deterministic import deterministic_trees
from mdtheory.result import Result

from .test_block_verifiers import _markov_pair


def _package_results() -> set:
    """Every Result subclass defined in the package (each module imported first; a module that needs
    an optional dependency that is absent is left out)."""
    for info in pkgutil.walk_packages(md.__path__, "mdtheory."):
        if info.name.endswith("__main__"):  # importing it runs the command line
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:
            continue
    return {cls for cls in _subclasses(Result) if cls.__module__.startswith("mdtheory.")}


def _subclasses(cls) -> set:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out


def _instances() -> dict:
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])
    toy = sun_toy()
    target, drafter = _markov_pair()
    verifier = BlockVerification()
    return {
        "AcceptanceResult": md.optimal_acceptance(p, q, 2),
        "AuditResult": md.audit(lambda p_, q_, drafts, rng: int(drafts[0]), p, q, 2, samples=200),
        "BlockAuditResult": audit_block(lambda t, d, drafts: verifier.law(t, d, drafts), *toy, 1, 2,
                                        exact=True),
        "BlockOptimumResult": md.optimal_block_efficiency(*toy, 1, 2),
        "BlockBoundResult": block_efficiency_bound(*toy, 1, 2),
        "BlockResult": simulation.simulate(target, drafter, verifier, iid_drafts(2, 2), 20,
                                           np.random.default_rng(0), replicates=2, start=(0,)),
        "EngineAuditResult": _engine_audit(toy),
        "DeterministicTreesResult": deterministic_trees(*toy, 2, 2),
    }


def _engine_audit(toy):
    """A chain-contract audit (it runs the verifier on torch tensors), or None without torch."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    from mdtheory.audit.verifier import load_target

    example = Path(__file__).resolve().parents[1] / "examples/verifiers/engines/chain_rejection.py"
    return md.audit_chain(load_target(f"{example}:verify"), *toy, 2, samples=2000)


INSTANCES = {name: res for name, res in _instances().items() if res is not None}


def test_every_result_class_is_covered():
    names = {cls.__name__ for cls in _package_results()}
    if "EngineAuditResult" not in INSTANCES:
        pytest.importorskip("torch", reason="the engine audit's instance runs torch")
    assert names == set(INSTANCES)


@pytest.mark.parametrize("name", list(INSTANCES))
def test_every_result_has_the_one_shape(name):
    res = INSTANCES[name]
    assert isinstance(res, Result) and type(res).__name__ == name
    full = json.loads(json.dumps(res.to_dict()))  # JSON-ready as it is
    assert {"status", "success", "message"} <= full.keys()
    assert isinstance(res.success, bool) and res.message.startswith(res.status)
    head = res.to_dict(["status", "success", "message"])
    assert list(head) == ["status", "success", "message"] and head["status"] == full["status"]
    with pytest.raises(md.InvalidInputError, match=f"{name} has no field 'nope'"):
        res.to_dict(["nope"])


def test_statuses_say_what_each_result_is():
    assert INSTANCES["AcceptanceResult"].status == "optimal"
    assert INSTANCES["AuditResult"].status == INSTANCES["AuditResult"].verdict == "lossy"
    assert not INSTANCES["AuditResult"].success
    assert INSTANCES["BlockAuditResult"].status == "lossless" and INSTANCES["BlockAuditResult"].success
    assert INSTANCES["BlockOptimumResult"].status == "optimal"
    assert INSTANCES["BlockBoundResult"].status == "upper-bound"
    assert INSTANCES["BlockResult"].status == "estimate"
    assert INSTANCES["BlockResult"].row() == INSTANCES["BlockResult"].to_dict()
