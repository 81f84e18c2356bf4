"""mdtheory: the theory of multi-draft speculative sampling, computed exactly.

Headline names only; formulations live in their own modules (``drafts``, ``otlp``, ``dual``,
``maxflow``, ``subsets``). The torch bridge is never imported here, and ``audit`` / ``AuditResult``
are loaded on first access (module ``__getattr__``), as are the solvers behind the LP and flow routes
and numba's compiled kernels (:mod:`mdtheory._jit`): ``import mdtheory`` costs little more than
``import numpy``.
"""

from .drafts import (
                     IID,
                     ConditionalPoisson,
                     DraftModel,
                     Greedy,
                     Independent,
                     Joint,
                     WithoutReplacement,
                     make_draft_model,
)
from .errors import (
                     InvalidDistributionError,
                     InvalidInputError,
                     MdtheoryError,
                     ProblemTooLargeError,
                     SolverError,
)
from .result import AcceptanceResult
from .solve import METHODS, alpha_star, optimal_acceptance

__version__ = "0.1.0"

#: Public names loaded on first access: name -> module.
_LAZY = {"audit": ".audit", "AuditResult": ".audit"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "optimal_acceptance",
    "alpha_star",
    "audit",
    "AuditResult",
    "AcceptanceResult",
    "METHODS",
    "DraftModel",
    "IID",
    "WithoutReplacement",
    "ConditionalPoisson",
    "Independent",
    "Joint",
    "Greedy",
    "make_draft_model",
    "MdtheoryError",
    "InvalidInputError",
    "InvalidDistributionError",
    "ProblemTooLargeError",
    "SolverError",
]
