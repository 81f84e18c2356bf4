"""The audits' time limits: slow calls stop the pilot early, bad limits are named, and the block
audit has the same default limit as the numpy audit. A fake clock, advanced by the verifiers, stands
in for the wall clock."""

import re
import types

import numpy as np
import pytest

import mdtheory as md
from mdtheory import _budget
from mdtheory.audit import verifier
from mdtheory.blocks import audit as block_audit
from mdtheory.errors import InvalidInputError, ProblemTooLargeError

P, Q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])


@pytest.fixture
def clock(monkeypatch):
    """A clock that moves only when a verifier says so (``clock.now += seconds``)."""
    fake = types.SimpleNamespace(now=0.0)
    fake.perf_counter = lambda: fake.now
    monkeypatch.setattr(verifier, "time", fake)
    monkeypatch.setattr(block_audit, "time", fake)
    return fake


def slow(clock, seconds, counter):
    def verify(p, q, drafts, rng):
        counter.append(1)
        clock.now += seconds
        return int(drafts[0]), True
    return verify


def block_target(ctx):
    return np.array([0.6, 0.4])


def block_draft(ctx):
    return np.array([0.5, 0.5])


def slow_block(clock, seconds, counter):
    def verify(target, draft, drafts, rng):
        counter.append(1)
        clock.now += seconds
        return np.array([int(drafts.ravel()[0])])
    return verify


def test_slow_calls_stop_the_audit_within_the_limit_not_after_the_pilot(clock):
    """0.3 s a call against a 1 s limit: refused once the calls so far took a tenth of the limit
    (after one call), not after the pilot's 100."""
    calls = []
    with pytest.raises(ProblemTooLargeError, match=r"timed on the first 1\).*over the limit of 1 s"):
        md.audit(slow(clock, 0.3, calls), P, Q, 2, max_seconds=1)
    assert len(calls) == 1 and clock.now <= 1 + 0.3


def test_a_short_audit_of_slow_calls_is_refused_by_its_projection(clock):
    calls = []
    with pytest.raises(ProblemTooLargeError, match="10 verifier calls"):
        md.audit(slow(clock, 0.3, calls), P, Q, 2, samples=10, max_seconds=1)
    assert len(calls) == 1


def test_fast_calls_run_to_the_end(clock):
    """1 ms a call, 200 calls: 0.2 s, within 1 s; judged early after the 100th call, not refused."""
    calls = []
    res = md.audit(slow(clock, 1e-3, calls), P, Q, 2, samples=200, max_seconds=1)
    assert res.samples == 200 and len(calls) == 200


@pytest.mark.parametrize("exact", [False, True])
def test_slow_block_calls_stop_the_block_audit_early(clock, exact):
    calls = []
    f = slow_block(clock, 0.3, calls)
    if exact:
        def law(target, draft, drafts):
            calls.append(1)
            clock.now += 0.3
            return {(int(drafts.ravel()[0]),): 1.0}
        with pytest.raises(ProblemTooLargeError, match="timed on the first 1"):
            md.audit_block(law, block_target, block_draft, 2, 6, exact=True, max_seconds=1)
    else:
        with pytest.raises(ProblemTooLargeError, match="timed on the first 1"):
            md.audit_block(f, block_target, block_draft, 1, 1, samples=1000, max_seconds=1)
    assert len(calls) == 1


def test_the_block_audit_has_the_audits_default_limit(clock):
    """100 s a call: the default limit (60 s) refuses after one call; None runs all of them."""
    calls = []
    with pytest.raises(ProblemTooLargeError, match=f"over the limit of "
                       f"{re.escape(_budget.fmt_seconds(_budget.MAX_SECONDS))}"):
        md.audit_block(slow_block(clock, 100.0, calls), block_target, block_draft, 1, 1, samples=50)
    assert len(calls) == 1
    calls.clear()
    res = md.audit_block(slow_block(clock, 100.0, calls), block_target, block_draft, 1, 1,
                         samples=50, max_seconds=None)
    assert res.samples == 50 and len(calls) == 50


BAD = ("1", [1], 1j, float("nan"), 0, -1.0, True, np.bool_(True))


@pytest.mark.parametrize("value", BAD)
def test_a_bad_time_limit_is_named(value):
    called = []
    with pytest.raises(InvalidInputError, match=rf"^max_seconds must be a positive number or None, "
                       rf"got {re.escape(repr(value))}$"):
        md.audit(lambda p, q, d, r: called.append(1) or 0, P, Q, 2, max_seconds=value)
    with pytest.raises(InvalidInputError, match="^max_seconds must be a positive number or None"):
        md.audit_block(lambda *a: called.append(1) or [0], block_target, block_draft, 1, 1,
                       max_seconds=value)
    assert called == []


@pytest.mark.parametrize("value", ["1", float("nan"), 0, True])
def test_a_bad_memory_limit_is_named(value):
    with pytest.raises(InvalidInputError, match="^max_bytes must be a positive number or None"):
        md.audit(lambda p, q, d, r: 0, P, Q, 2, max_bytes=value)


def test_check_limit_takes_positive_numbers_infinity_and_none():
    assert _budget.check_limit(None, "x") is None
    assert _budget.check_limit(np.float32(0.5), "x") == 0.5
    assert _budget.check_limit(np.int64(3), "x") == 3.0
    assert _budget.check_limit(float("inf"), "x") == float("inf")


# --- the block audit's sizes, judged before any draw ------------------------------------------------

def counted_block(counter):
    def verify(target, draft, drafts, rng):
        counter.append(1)
        return np.array([int(drafts[0, 0])])
    return verify


@pytest.mark.parametrize(("n", "length", "rows", "message"), [
    (10**30, 2, 1, r"2e\+30 tree nodes.*of memory, over the limit of 4 GiB"),
    (10**9, 2, 1, r"2e\+09 tree nodes.*of memory, over the limit of 4 GiB"),
    (10**6, 2, 7, r"2e\+06 tree nodes.*1.57e\+04 draft arrays drawn.*over the limit of 60 s"),
    (1, 10**4, 1, r"V\^\(L\+1\) = 2\^10001 = about 10\^3011 sequences, over 65,536"),
    (1, 10**8, 1, r"V\^\(L\+1\) = 2\^100000001 = about 10\^3.01e\+07 sequences"),
])
def test_huge_block_audits_are_refused_before_any_draw(clock, n, length, rows, message):
    """No verifier call, no draft array: the drafts' memory, the draws' time and the cells are
    judged from the sizes (the clock never moves, so no pilot could have judged anything); at
    most the target's 7 rows of V^(L+1) = 8 cells are read (to size the default samples)."""
    calls, reads = [], []

    def target(ctx):
        reads.append(ctx)
        return np.array([0.6, 0.4])
    with pytest.raises(ProblemTooLargeError, match=message):
        md.audit_block(counted_block(calls), target, block_draft, n, length)
    assert calls == [] and len(reads) == rows and clock.now == 0.0


def test_a_single_token_vocabulary_with_a_huge_length_is_refused_by_its_rows(clock):
    """V = 1: one cell whatever L, but L + 1 rows to read and L nodes per draw."""
    one = lambda ctx: np.array([1.0])  # noqa: E731
    calls = []
    with pytest.raises(ProblemTooLargeError, match=r"1e\+08 target rows"):
        md.audit_block(counted_block(calls), one, one, 1, 10**8)
    assert calls == []


def test_huge_exact_block_audits_are_refused_before_any_call(clock):
    calls = []

    def law(target, draft, drafts):
        calls.append(1)
        return {(0,): 1.0}
    with pytest.raises(ProblemTooLargeError, match=r"exact mode would enumerate up to about 10\^120 draft "
                       r"arrays \(V = 2, 400 tree nodes\)"):
        md.audit_block(law, block_target, block_draft, 200, 2, exact=True)
    assert calls == []


def test_a_block_audit_within_the_sizes_runs(clock):
    calls = []
    res = md.audit_block(counted_block(calls), block_target, block_draft, 1000, 2, samples=20)
    assert res.samples == 20 and len(calls) == 20


@pytest.mark.parametrize("value", ["1", float("nan"), 0, True])
def test_a_bad_memory_limit_of_the_block_audit_is_named(value):
    with pytest.raises(InvalidInputError, match="^max_bytes must be a positive number or None"):
        md.audit_block(lambda *a: [0], block_target, block_draft, 1, 1, max_bytes=value)


def test_the_block_audit_refuses_complex_laws():
    with pytest.raises(md.InvalidDistributionError, match="complex values"):
        md.audit_block(lambda *a: np.array([0]), lambda c: np.array([0.6 + 0.1j, 0.4]), block_draft,
                       1, 1, samples=100)
