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
]


class MdtheoryError(Exception):
    """Base class of every error raised on purpose by mdtheory."""


class InvalidInputError(MdtheoryError, ValueError):
    """An argument has the wrong type, shape or value (other than a bad distribution)."""


class InvalidDistributionError(InvalidInputError):
    """A probability vector is negative, non-finite, empty, mis-shaped or does not sum to one."""


class ProblemTooLargeError(MdtheoryError, ValueError):
    """The requested method would need more memory or time than it is allowed; another route fits."""


class SolverError(MdtheoryError, RuntimeError):
    """An LP or flow solver did not return a proven optimum."""
