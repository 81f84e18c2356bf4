"""Verification where it runs: the serving engines' tensor contracts, and audits of verifiers in them.

:mod:`~mdtheory.engines.contracts` states the chain and tree contracts (FlashInfer's and SGLang's
layouts) as documented tensor layouts, validates inputs and outputs, and converts a
:class:`~mdtheory.blocks.trees.DraftTree` to the linked-list layout and back;
:mod:`~mdtheory.engines.audit` audits any verifier written in a contract (:func:`audit_chain`,
:func:`audit_tree`, ``mdtheory audit --engine``). The reference semantics of engine-style verifiers,
lossless and lossy, are in ``examples/verifiers/engines/`` and what the audit finds in them in
``papers/engines.md``.

torch is imported only when a contract is used: ``import mdtheory.engines`` loads neither torch nor
its modules, whose names are loaded on first access.
"""

from __future__ import annotations

import importlib

#: Public name -> the module of this package that defines it (loaded on first access).
_LAZY = {
    "EngineContractError": "contracts", "ChainInputs": "contracts", "TreeInputs": "contracts",
    "TreeLayout": "contracts", "OutputFaults": "contracts", "CONTRACTS": "contracts",
    "check_chain_inputs": "contracts", "check_tree_inputs": "contracts",
    "chain_output_faults": "contracts", "tree_output_faults": "contracts",
    "check_chain_output": "contracts", "check_tree_output": "contracts",
    "tree_layout": "contracts", "tree_candidates": "contracts", "links_to_drafts": "contracts",
    "audit_chain": "audit", "audit_tree": "audit", "EngineAuditResult": "audit",
    "VERIFIERS": "registry",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
