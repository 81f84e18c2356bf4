"""alpha* of iid drafts in decimals: the tests' reference beside the library's routes."""

from __future__ import annotations

from decimal import Decimal, localcontext
from fractions import Fraction


def decimal_alpha(p, q, n: int, digits: int = 60) -> float:
    """alpha* of n iid drafts in ``digits``-digit decimals: the best prefix of the exact p/q order
    (Hu et al.'s prefix property), every mass and power from the floats' exact values, no log1p, no
    power rounded. The draft law is q divided by its exact sum (a float vector divided by its float
    sum is off one by a few 2^-53, which a power n up to 2^53 would otherwise raise to e^(±1))."""
    def ratio(i):
        return Fraction(float(p[i])) / Fraction(float(q[i])) if q[i] > 0 else Fraction(10**400)

    with localcontext() as ctx:
        ctx.prec = digits
        total = sum(Decimal(float(x)) for x in q)
        sp, sq, best = Decimal(0), Decimal(0), Decimal(0)
        for i in sorted(range(len(p)), key=ratio):
            sp += Decimal(float(p[i]))
            sq += Decimal(float(q[i]))
            best = max(best, min(sq / total, Decimal(1)) ** n - sp)
        return float(1 - best)
