"""Exception hierarchy of mdtheory.

Every error the package raises on purpose derives from :class:`MdtheoryError`, so a caller (the CLI
among them) can catch one type and print its message. Input errors are also ``ValueError``.
"""

from __future__ import annotations

__all__ = [
    "MdtheoryError",
    "InvalidDistributionError",
    "InvalidInputError",
    "ProblemTooLargeError",
    "SolverError",
    "OptimalityGapError",
    "OptimalityGapWarning",
    "VerifierTimeoutError",
]


class MdtheoryError(Exception):
    """Base class of every error raised on purpose by mdtheory."""


class InvalidInputError(MdtheoryError, ValueError):
    """An argument has the wrong type, shape or value (other than a bad distribution)."""


class InvalidDistributionError(InvalidInputError):
    """A probability vector is negative, non-finite, empty, mis-shaped or does not sum to one."""


class ProblemTooLargeError(MdtheoryError, ValueError):
    """The requested method would need more memory or time than it is allowed; another route fits."""


class VerifierTimeoutError(ProblemTooLargeError):
    """A verifier call under audit, or a call of a next-token law in the block optimum, bound or
    audit, did not return within the run's time limit and was interrupted
    (:mod:`mdtheory.audit.watchdog`)."""


class SolverError(MdtheoryError, RuntimeError):
    """An LP or flow solver did not return a proven optimum."""


class OptimalityGapError(SolverError):
    """A solver's proven bounds on α* did not meet: α* lies in [``lower``, ``upper``].

    Attributes
    ----------
    lower, upper : float
        The proven bounds (a feasible primal object's value and a cut's value).
    """

    def __init__(self, message: str, lower: float, upper: float):
        super().__init__(message)
        self.lower, self.upper = lower, upper


class OptimalityGapWarning(UserWarning):
    """A rule was built whose acceptance is proven only within a gap of α* (it stays lossless)."""
