"""The front door row by row: one deadline for a batch, a row's proven bounds reported (or raised
with them), and the same answers as the single calls. A fake clock, advanced by a stand-in for
Wolfe's minimum-norm point, stands in for the wall clock."""

from __future__ import annotations

import types

import numpy as np
import pytest

import mdtheory as md
from mdtheory import solve
from mdtheory.routes import mnp
from mdtheory.solve import Row, acceptance_rows

P = np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
Q = np.array([0.2, 0.3, 0.5])


@pytest.fixture
def clock(monkeypatch):
    """A clock that moves only when the stand-in route says so (``clock.now += seconds``)."""
    fake = types.SimpleNamespace(now=0.0)
    fake.perf_counter = lambda: fake.now
    monkeypatch.setattr(solve, "time", fake)
    return fake


@pytest.fixture
def creeping(monkeypatch, clock):
    """Wolfe's method replaced by a run that never closes: it records the deadline it was given,
    spends 4 s of the fake clock (or up to the deadline) and raises its bounds [0.4, 0.5]."""
    deadlines = []

    def route(p, model, deadline=None):
        deadlines.append(deadline)
        clock.now = min(clock.now + 4.0, max(deadline, clock.now)) if deadline is not None \
            else clock.now + 4.0
        raise md.OptimalityGapError("the minimum-norm-point method left a gap of 0.1", 0.4, 0.5)

    monkeypatch.setattr(mnp, "mnp_route", route)
    return deadlines


def test_a_batch_passes_its_deadline_to_every_row(creeping, clock):
    """max_seconds bounds the whole batch as it bounds a single call: every row's run of Wolfe's
    method is given the call's deadline (not none), so the batch stops at 5 s of the fake clock."""
    rows = list(acceptance_rows(P, Q, 2, method="mnp", max_seconds=5))
    assert creeping == [5.0, 5.0, 5.0] and clock.now == 5.0
    assert [row.index for row in rows] == [0, 1, 2]
    clock.now = 0.0
    with pytest.raises(md.OptimalityGapError):
        md.alpha_star(P, Q, 2, method="mnp", max_seconds=5)
    assert creeping[3:] == [5.0]


def test_a_row_gap_keeps_its_bounds(creeping):
    """A batch row whose solver proved only bounds raises an OptimalityGapError that names the row
    and carries the bounds (not a TypeError from rebuilding the error)."""
    for call in (md.alpha_star, md.optimal_acceptance):
        with pytest.raises(md.OptimalityGapError, match="row 0: the minimum-norm") as err:
            call(P, Q, 2, method="mnp", max_seconds=5)
        assert (err.value.lower, err.value.upper) == (0.4, 0.5)


def test_rows_report_every_gap_and_go_on(creeping):
    rows = list(acceptance_rows(P, Q, 2, method="mnp", max_seconds=100))
    assert all(isinstance(row, Row) and row.result is None for row in rows)
    assert [(row.error.lower, row.error.upper) for row in rows] == [(0.4, 0.5)] * 3
    assert [str(row.error).split(":")[0] for row in rows] == ["row 0", "row 1", "row 2"]
