"""mdtheory: the theory of multi-draft speculative sampling, computed exactly.

Headline names only; draft models live in :mod:`mdtheory.models`, the routes in :mod:`mdtheory.routes`
(one module each). The torch bridge is never imported here; the solvers behind the LP and
flow routes (scipy, HiGHS, networkx, pycddlib) are imported by the routes that run them, and numba by
the first kernel call on a large input (:mod:`mdtheory._jit`): ``import mdtheory`` costs little more
than ``import numpy``.
"""

from .audit.verifier import AuditResult, audit
from .blocks.audit import BlockAuditResult, audit_block
from .blocks.optimum import BlockOptimumResult, optimal_block_efficiency
from .errors import (
                     InvalidDistributionError,
                     InvalidInputError,
                     MdtheoryError,
                     OptimalityGapError,
                     OptimalityGapWarning,
                     ProblemTooLargeError,
                     SolverError,
                     VerifierTimeoutError,
)
from .models.base import DraftModel
from .models.conditional_poisson import ConditionalPoisson
from .models.greedy import Greedy
from .models.iid import IID
from .models.independent import Independent
from .models.joint import Joint
from .models.registry import make_draft_model
from .models.without_replacement import WithoutReplacement
from .result import AcceptanceResult
from .solve import METHODS, alpha_star, optimal_acceptance

__version__ = "0.1.0"

#: Audits of verifiers in the engines' contracts, loaded (with torch) on first access.
_ENGINE_AUDITS = ("audit_chain", "audit_tree")


def __getattr__(name: str):
    if name in _ENGINE_AUDITS:
        from .engines import audit as _engine_audit

        return getattr(_engine_audit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "optimal_acceptance",
    "alpha_star",
    "optimal_block_efficiency",
    "BlockOptimumResult",
    "audit",
    "AuditResult",
    "audit_block",
    "BlockAuditResult",
    "audit_chain",
    "audit_tree",
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
    "OptimalityGapError",
    "OptimalityGapWarning",
    "VerifierTimeoutError",
]
