"""alpha* by the subset formula over all 2^V token sets, in exact rationals: a reference for the tests."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

from mdtheory._validate import as_fractions
from mdtheory.claims.exact import exact_containment


def exact_subset_formula(p, law: dict[frozenset, Fraction]) -> Fraction:
    """alpha* = 1 + min_T [p(T) - Q(T)] over all 2^V token sets, exactly."""
    p = as_fractions(p)
    best = Fraction(0)
    for k in range(1, len(p) + 1):
        for T in combinations(range(len(p)), k):
            best = min(best, sum(p[i] for i in T) - exact_containment(law, T))
    return 1 + best
