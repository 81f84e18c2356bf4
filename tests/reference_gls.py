"""Gumbel-max list sampling's exact law in exact rationals: the independent reference of test_gls.

Each factor of the integrand (papers/theory.md §GLS) is a finite sum of exponentials c e^{-a t} with
rational a and c, kept as a dict a -> c; products add the exponents and the integral over t of
c e^{-a t} is c / a. No quadrature, no floating point.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from itertools import combinations_with_replacement


def _times(a: dict, b: dict) -> dict:
    out: dict = {}
    for ea, ca in a.items():
        for eb, cb in b.items():
            out[ea + eb] = out.get(ea + eb, 0) + ca * cb
    return out


def law_given(p: list[Fraction], q: list[Fraction], x: tuple[int, ...]) -> list[Fraction]:
    """P(Y = y | X = x) for every y, exactly, for drafts x with q > 0."""
    V = len(p)
    ratio = [p[i] / q[i] if q[i] else None for i in range(V)]
    rho = sorted({r for r in ratio if r is not None})
    L = len(rho)
    slope = [sum((q[i] for i in range(V) if ratio[i] is not None and ratio[i] <= rho[m]), Fraction(0))
             for m in range(L)]
    phi = [Fraction(1)]
    for m in range(L - 1):
        phi.append(phi[-1] + slope[m] * (rho[m + 1] - rho[m]))

    def level(i: int) -> int:
        return rho.index(ratio[i]) if ratio[i] is not None else L

    def segments(a: int, b: int) -> dict:
        """t times the integral of e^{-t Φ(u)} over [ρ_a, ρ_b] (b = L: to infinity)."""
        out: dict = {}
        for m in range(a, b):
            out[phi[m]] = out.get(phi[m], 0) + 1 / slope[m]
            if m + 1 < L:
                out[phi[m + 1]] = out.get(phi[m + 1], 0) - 1 / slope[m]
        return out

    counts = Counter(x)
    others = {}  # per drafted token d: the product of the other n - 1 races' g, one race of d out
    for d in counts:
        term = {Fraction(0): Fraction(1)}
        for e, c in counts.items():
            for _ in range(c - (e == d)):
                term = _times(term, segments(level(e), L))
        others[d] = term
    law = []
    for y in range(V):
        total = Fraction(0)
        for d, c in counts.items():
            if d == y:
                h = {phi[level(y)]: 1 / q[y]}
            else:
                h = segments(level(d), level(y)) if level(y) > level(d) else {}
            total += c * sum((v / e for e, v in _times(h, others[d]).items()), Fraction(0))
        law.append(p[y] * total)
    return law


def acceptance_and_law(p: list[Fraction], q: list[Fraction], n: int) -> tuple[Fraction, list[Fraction]]:
    """Exact acceptance and output law, summed over the draft multisets (the law given the drafts is
    symmetric in their order), each weighted by its probability n!/prod(c!) prod q^c."""
    V = len(p)
    accepted, output = Fraction(0), [Fraction(0)] * V
    for x in combinations_with_replacement([i for i in range(V) if q[i]], n):
        w = Fraction(math.factorial(n))
        for i, c in Counter(x).items():
            w *= q[i] ** c / math.factorial(c)
        law = law_given(p, q, x)
        accepted += w * sum(law[y] for y in set(x))
        output = [o + w * v for o, v in zip(output, law, strict=True)]
    return accepted, output
