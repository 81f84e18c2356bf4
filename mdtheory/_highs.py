"""One place where linear programs go to HiGHS (through highspy) and statuses become errors."""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

import highspy
import numpy as np
from scipy import sparse

from .errors import SolverError

#: HiGHS primal and dual feasibility tolerance (its default, 1e-7, is too loose to read cuts off plans).
FEAS_TOL = 1e-10


_banner_shown = False


def _new_highs() -> highspy.Highs:
    """A ``Highs`` object, keeping the banner HiGHS writes to file descriptor 1 on its first construction
    in a process (not governed by ``output_flag``) out of standard output, where it would break ``--json``."""
    global _banner_shown
    if _banner_shown:
        return highspy.Highs()
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()
            h.setOptionValue("output_flag", False)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    _banner_shown = True
    return h


class LPSolution(NamedTuple):
    x: np.ndarray
    row_dual: np.ndarray
    objective: float


def build_lp(cost: np.ndarray, A: sparse.csc_matrix, row_lower: np.ndarray, row_upper: np.ndarray, *,
             col_lower: np.ndarray | None = None, col_upper: np.ndarray | None = None,
             maximize: bool = False) -> highspy.HighsLp:
    """The HiGHS model of ``min/max cost @ x`` s.t. ``row_lower <= A x <= row_upper``,
    ``col_lower <= x <= col_upper`` (defaults 0 and unbounded above), ``A`` stored by columns."""
    A = sparse.csc_matrix(A)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = A.shape[1], A.shape[0]
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_ = (np.zeros(A.shape[1]) if col_lower is None
                     else np.asarray(col_lower, dtype=np.float64))
    lp.col_upper_ = (np.full(A.shape[1], highspy.kHighsInf) if col_upper is None
                     else np.asarray(col_upper, dtype=np.float64))
    lp.row_lower_ = np.asarray(row_lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(row_upper, dtype=np.float64)
    lp.sense_ = highspy.ObjSense.kMaximize if maximize else highspy.ObjSense.kMinimize
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = A.indptr.astype(np.int32)
    lp.a_matrix_.index_ = A.indices.astype(np.int32)
    lp.a_matrix_.value_ = A.data.astype(np.float64)
    return lp


def solver(presolve: str, method: str | None = None, **options) -> highspy.Highs:
    """A quiet single-threaded ``Highs`` at the package's feasibility tolerance :data:`FEAS_TOL`, with
    ``presolve`` ("on"/"off"), ``method`` (HiGHS's ``solver`` option, e.g. "simplex"; its default
    if None) and any further HiGHS options."""
    h = _new_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("primal_feasibility_tolerance", FEAS_TOL)
    h.setOptionValue("dual_feasibility_tolerance", FEAS_TOL)
    h.setOptionValue("presolve", presolve)
    if method is not None:
        h.setOptionValue("solver", method)
    for name, value in options.items():
        h.setOptionValue(name, value)
    return h


def solve_lp(cost: np.ndarray, A: sparse.csc_matrix, row_lower: np.ndarray, row_upper: np.ndarray,
             *, maximize: bool, simplex: bool = False, col_upper: np.ndarray | None = None
             ) -> LPSolution:
    """Solve max/min ``cost @ x`` s.t. ``row_lower <= A x <= row_upper``, ``0 <= x <= col_upper``
    (default unbounded above) with HiGHS.

    ``simplex=True`` forces the simplex method, whose optimum is a vertex (needed where integrality
    of a totally unimodular LP is read off the solution).

    Raises
    ------
    SolverError
        The model status is anything but optimal.
    """
    lp = build_lp(cost, A, row_lower, row_upper, col_upper=col_upper, maximize=maximize)
    # HiGHS 1.15's presolve declares some feasible transport LPs with masses near 1e-14 infeasible
    # (seen on iid V = 6, n = 4 tuple laws); these LPs have nothing for presolve to remove anyway.
    h = solver("off", "simplex" if simplex else None)
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise SolverError(f"HiGHS did not prove optimality: {h.modelStatusToString(status)}")
    sol = h.getSolution()
    return LPSolution(np.asarray(sol.col_value), np.asarray(sol.row_dual),
                      float(h.getInfo().objective_function_value))
