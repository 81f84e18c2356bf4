"""Exact rational arithmetic routes (Fractions and cdd's GMP linear programming), for small sizes.

Used to verify published closed forms with equality, no tolerance: the exact draft-set law of iid,
successive-sampling and conditional-Poisson drafts, the exact containment, and the set-reduced OTLP
(``mdtheory.routes.otlp``) solved by cdd's exact simplex.
"""

from __future__ import annotations

from fractions import Fraction

from .._validate import as_fractions
from ..errors import InvalidInputError, SolverError
from ..models.registry import SAMPLINGS

__all__ = ["exact_set_law", "exact_containment", "exact_otlp", "elementary_symmetric"]


def exact_set_law(q, n: int, sampling: str = "iid") -> dict[frozenset, Fraction]:
    """P(set(X) = U) exactly, by the draft model's own exact law
    (:meth:`~mdtheory.models.base.DraftModel.exact_set_law`): ``"iid"``, ``"without-replacement"``
    (successive sampling) and ``"conditional-poisson"`` have one, each by enumeration.

    Raises
    ------
    InvalidInputError
        An unknown sampling, or a model without an exact law, or q not rational and summing to 1.
    """
    cls = SAMPLINGS.get(sampling) if isinstance(sampling, str) else None
    if cls is None:
        raise InvalidInputError(f"no exact set law for sampling {sampling!r}")
    return cls.exact_set_law(q, n)


def elementary_symmetric(values, n: int) -> Fraction:
    """e_n(values) exactly."""
    e = [Fraction(1)] + [Fraction(0)] * n
    for v in values:
        for k in range(n, 0, -1):
            e[k] += v * e[k - 1]
    return e[n]


def exact_containment(law: dict[frozenset, Fraction], T) -> Fraction:
    """Q(T) = P(set(X) ⊆ T) from an exact set law."""
    T = frozenset(T)
    return sum((w for U, w in law.items() if U <= T), start=Fraction(0))


def exact_otlp(p, law: dict[frozenset, Fraction]) -> Fraction:
    """The set-reduced OTLP optimum, solved by cdd's exact (GMP) simplex.

    .. math:: \\max \\sum_U \\sum_{y \\in U} C(U, y) \\;\\text{ s.t. }\\; \\sum_y C(U, y) = w_U,\\;
       \\sum_U C(U, y) = p(y),\\; C \\ge 0.

    Raises
    ------
    SolverError
        cdd does not report an optimum.
    """
    p = as_fractions(p)
    V = len(p)
    sets = sorted(law, key=lambda U: (len(U), sorted(U)))
    ncol = len(sets) * V
    rows, lin = [], set()
    for k, U in enumerate(sets):  # w_U - sum_y C(U, y) = 0
        lin.add(len(rows))
        rows.append([law[U]] + [-1 if j // V == k else 0 for j in range(ncol)])
    for y in range(V):  # p_y - sum_U C(U, y) = 0
        lin.add(len(rows))
        rows.append([p[y]] + [-1 if j % V == y else 0 for j in range(ncol)])
    for j in range(ncol):  # C >= 0
        rows.append([0] + [1 if i == j else 0 for i in range(ncol)])
    objective = [0] + [1 if j % V in sets[j // V] else 0 for j in range(ncol)]
    import cdd.gmp as cdd  # pycddlib: imported by the routes that run it

    mat = cdd.matrix_from_array(rows, lin_set=lin, rep_type=cdd.RepType.INEQUALITY,
                                obj_type=cdd.LPObjType.MAX, obj_func=objective)
    lp = cdd.linprog_from_matrix(mat)
    cdd.linprog_solve(lp)
    if lp.status != cdd.LPStatusType.OPTIMAL:
        raise SolverError(f"cdd's exact LP ended with status {lp.status.name}")
    return Fraction(lp.obj_value)
