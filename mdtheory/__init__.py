"""mdtheory: the theory of multi-draft speculative sampling, computed exactly.

Headline names only; draft models live in :mod:`mdtheory.models`, the routes in :mod:`mdtheory.routes`
(one module each). Every name below is imported when first used (PEP 562), so ``import mdtheory``
costs little more than ``import numpy`` and a command loads only what it runs: the torch bridge is
never imported here, the solvers behind the LP and flow routes (scipy, HiGHS, networkx, pycddlib) by
the routes that run them, and numba by the first kernel call on a large input (:mod:`mdtheory._jit`).
"""

from __future__ import annotations

import importlib
import sys
import types

__version__ = "0.4.0.dev0"

#: Each public name and the module it is imported from when first used.
_ORIGIN = {
    "optimal_acceptance": "solve",
    "alpha_star": "solve",
    "optimal_block_efficiency": "blocks.optimum",
    "BlockOptimumResult": "blocks.optimum",
    "audit": "audit.verifier",
    "AuditResult": "audit.verifier",
    "audit_block": "blocks.audit",
    "BlockAuditResult": "blocks.audit",
    "audit_chain": "engines.audit",  # loads torch
    "audit_tree": "engines.audit",
    "AcceptanceResult": "result",
    "METHODS": "solve",
    "DraftModel": "models.base",
    "IID": "models.iid",
    "WithoutReplacement": "models.without_replacement",
    "ConditionalPoisson": "models.conditional_poisson",
    "Independent": "models.independent",
    "Joint": "models.joint",
    "Greedy": "models.greedy",
    "make_draft_model": "models.registry",
    "MdtheoryError": "errors",
    "InvalidInputError": "errors",
    "InvalidDistributionError": "errors",
    "ProblemTooLargeError": "errors",
    "SolverError": "errors",
    "OptimalityGapError": "errors",
    "OptimalityGapWarning": "errors",
    "VerifierTimeoutError": "errors",
}

__all__ = list(_ORIGIN)


def __getattr__(name: str):
    """A public name, imported from its module on first use (and kept as a module attribute), or a
    subpackage or module of the package (``mdtheory.models``), imported as ``import`` would."""
    if name not in _ORIGIN:
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
        raise AttributeError(f"module 'mdtheory' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_ORIGIN[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """The package's own module type: the import system binds a subpackage on its parent when it is
    first loaded, and the subpackage ``mdtheory.audit`` must not hide the function ``audit``."""

    def __setattr__(self, name: str, value) -> None:
        if name in _ORIGIN and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
