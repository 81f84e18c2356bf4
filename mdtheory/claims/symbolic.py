"""Symbolic (sympy) forms of published formulas: identities, exact intervals, piecewise alpha*."""

from __future__ import annotations

from itertools import combinations

import sympy as sp

__all__ = ["theorem3_identity", "theorem2_example_interval", "symbolic_alpha_star",
           "multinomial_substitution"]


def theorem3_identity() -> bool:
    """Khisti et al. Thm 3's three-term form equals p(S) + 1 - q(S)^2 (q(S^c) = 1 - q(S)).

    >>> theorem3_identity()
    True
    """
    p, a = sp.symbols("p a", real=True)  # p = p(S), a = q(S)
    three_term = p + (1 - a) ** 2 + 2 * a * (1 - a)
    return sp.simplify(three_term - (p + 1 - a**2)) == 0


def symbolic_alpha_star(p, q, n: int) -> sp.Expr:
    """alpha* = 1 + Min(0, p(S) - q(S)^n over non-empty S) for iid drafts, as a sympy expression.

    Parameters
    ----------
    p, q : sequences of sympy expressions
        Target and draft masses (symbols allowed).
    n : int

    Examples
    --------
    >>> a, b = sp.symbols("a b", nonnegative=True)
    >>> symbolic_alpha_star([a, 1 - a], [b, 1 - b], 1)
    Min(0, -a + b, a - b) + 1
    """
    V = len(p)
    terms = [sp.Integer(0)]
    for k in range(1, V + 1):
        for S in combinations(range(V), k):
            terms.append(sum(p[i] for i in S) - sum(q[i] for i in S) ** n)
    return sp.expand(1 + sp.Min(*terms))


def theorem2_example_interval() -> sp.Set:
    """The exact set of q2 with alpha* = 1 for p uniform on 3 tokens, q = (1/3, q2, 2/3 - q2), n = 2.

    Derived from Theorem 2's condition p(S) >= q(S)^2 for every S, each solved over the reals.

    >>> theorem2_example_interval()
    Interval(1 - sqrt(6)/3, -1/3 + sqrt(6)/3)
    """
    t = sp.symbols("q2", real=True)
    p = [sp.Rational(1, 3)] * 3
    q = [sp.Rational(1, 3), t, sp.Rational(2, 3) - t]
    feasible = sp.Interval(0, sp.Rational(2, 3))
    for k in range(1, 4):
        for S in combinations(range(3), k):
            condition = sum(p[i] for i in S) - sum(q[i] for i in S) ** 2 >= 0
            feasible = feasible.intersect(sp.solveset(condition, t, domain=sp.S.Reals))
    return sp.simplify(feasible)


def multinomial_substitution(V: int, n: int) -> bool:
    """For every T, sum over multisets M ⊆ T of multinomial(n; M) prod q_i^{c_i} equals q(T)^n.

    This turns the iid acceptance-one cone's Hall family into p(T) >= q(T)^n.

    >>> multinomial_substitution(3, 2)
    True
    """
    from itertools import combinations_with_replacement
    from math import factorial, prod

    q = sp.symbols(f"q0:{V}")
    for k in range(1, V + 1):
        for T in combinations(range(V), k):
            total = 0
            for M in combinations_with_replacement(T, n):
                counts = [M.count(i) for i in set(M)]
                coeff = factorial(n) // prod(factorial(c) for c in counts)
                total += coeff * prod(q[i] for i in M)
            if sp.expand(total - sum(q[i] for i in T) ** n) != 0:
                return False
    return True
