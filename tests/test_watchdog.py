"""A verifier call that does not return is interrupted at the audit's limit."""

import signal
import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest

import mdtheory as md
from mdtheory.audit import verifier, watchdog
from mdtheory.errors import VerifierTimeoutError

from .cli_helpers import one_line_error, run_main

P, Q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])


@pytest.fixture
def frozen_pace(monkeypatch):
    """The audit's pace clock stopped: its pilot sees calls that take no time, however loaded the
    machine, so only the watchdog (a real interval timer) can stop the audit."""
    monkeypatch.setattr(verifier, "time", types.SimpleNamespace(perf_counter=lambda: 0.0))


def hangs_on(call: int, hang):
    """A verifier whose output is drawn from p (lossless) that runs ``hang()`` on its
    ``call``-th call; each call before takes 0.3 ms, a slow machine's pace (at that pace the
    pilot would refuse 2000 calls against a 0.5 s limit)."""
    state = {"calls": 0}

    def verify(p, q, drafts, rng):
        state["calls"] += 1
        if state["calls"] == call:
            hang()
        time.sleep(3e-4)
        return int(rng.choice(len(p), p=p)), False
    return verify


def sleep_long():
    time.sleep(5)  # the limit below is 0.5 s; before the watchdog the audit waited the 5 s out


def spin_long():
    for _ in range(10**8):  # pure Python, several seconds
        pass


def sleep_catching_everything_it_can():
    try:
        time.sleep(5)
    except Exception:  # a verifier's own handler does not swallow the interrupt
        pass


@pytest.mark.skipif(not watchdog.can_arm(), reason="no SIGALRM timer here (not POSIX, not the "
                    "main thread, or an ITIMER_REAL timer already running)")
@pytest.mark.parametrize("hang", [sleep_long, spin_long, sleep_catching_everything_it_can])
def test_a_call_that_does_not_return_is_interrupted(hang, frozen_pace):
    with pytest.raises(VerifierTimeoutError, match=r"verifier call at position 0 on drafts "
                       r"\[\d, \d\] did not return within .* limit of 0\.5 s"):
        md.audit(hangs_on(300, hang), P, Q, 2, samples=2000, max_seconds=0.5)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.skipif(not watchdog.can_arm(), reason="no SIGALRM timer here")
def test_the_previous_alarm_handler_is_restored(frozen_pace):
    def mine(signum, frame):
        pass
    previous = signal.signal(signal.SIGALRM, mine)
    try:
        with pytest.raises(VerifierTimeoutError):
            md.audit(hangs_on(300, sleep_long), P, Q, 2, samples=2000, max_seconds=0.5)
        assert signal.getsignal(signal.SIGALRM) is mine
        res = md.audit(hangs_on(10**9, sleep_long), P, Q, 2, samples=200, max_seconds=30)
        assert res.samples == 200 and signal.getsignal(signal.SIGALRM) is mine
    finally:
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.skipif(not watchdog.can_arm(), reason="no SIGALRM timer here")
def test_an_exact_law_that_does_not_return_is_interrupted():
    def law(p, q, drafts):
        time.sleep(5)
        return p, np.zeros_like(p)
    with pytest.raises(VerifierTimeoutError, match="position 0"):
        md.audit(law, P, Q, 2, exact=True, max_seconds=0.5)


@pytest.mark.skipif(not watchdog.can_arm(), reason="no SIGALRM timer here")
def test_a_block_verifier_that_does_not_return_is_interrupted():
    def target(ctx):
        return np.array([0.6, 0.4])

    def draft(ctx):
        return np.array([0.5, 0.5])

    def verify(target, draft, drafts, rng):
        time.sleep(5)
        return np.array([0])
    with pytest.raises(VerifierTimeoutError, match="block audit of .* did not return"):
        md.audit_block(verify, target, draft, 1, 1, samples=100, max_seconds=0.5)


@pytest.mark.skipif(not watchdog.can_arm(), reason="no SIGALRM timer here")
def test_the_command_line_says_one_line_and_exits_2(capsys, tmp_path):
    (tmp_path / "hang.py").write_text(
        "import time\n\n\ndef verify(p, q, drafts, rng):\n    time.sleep(5)\n    return 0\n")
    np.save(tmp_path / "p.npy", P)
    np.save(tmp_path / "q.npy", Q)
    code, out, err = run_main(capsys, "audit", f"{tmp_path / 'hang.py'}:verify", tmp_path / "p.npy",
                              tmp_path / "q.npy", "-n", "2", "--max-seconds", "0.5", "-q")
    one_line_error(code, err, "did not return within", "interrupted", "limit of 0.5 s")


def test_off_the_main_thread_the_watchdog_stays_unarmed_and_the_audit_runs():
    found = {}

    def run():
        found["can_arm"] = watchdog.can_arm()
        found["result"] = md.audit(hangs_on(10**9, sleep_long), P, Q, 2, samples=200,
                                   max_seconds=30)
    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive()
    assert found["can_arm"] is False and found["result"].samples == 200


def quick(p, q, drafts, rng):
    return int(drafts[0]), True


@pytest.mark.skipif(not watchdog.can_arm(), reason="no SIGALRM timer here")
def test_a_nested_audit_leaves_the_outer_call_watched():
    """A verifier that runs an audit of its own and then hangs: the inner run's calls do not clear
    the outer call's mark, so the outer call is still interrupted at the outer limit."""
    state = {"inner": None}

    def outer(p, q, drafts, rng):
        state["inner"] = md.audit(quick, p, q, 2, samples=20, max_seconds=30).samples
        time.sleep(5)
        return 0
    with pytest.raises(VerifierTimeoutError, match=r"audit of .*outer: .*position 0 .*limit of 0\.5 s"):
        md.audit(outer, P, Q, 2, samples=200, max_seconds=0.5)
    assert state["inner"] == 20
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is not watchdog.CALLS._alarm


@pytest.mark.skipif(not watchdog.can_arm(), reason="no SIGALRM timer here")
@pytest.mark.parametrize("outer_limit", [30, None])
def test_a_nested_audit_keeps_its_own_limit(outer_limit):
    """The inner run's hanging call is interrupted at the inner limit (0.5 s), not the outer one
    (30 s, or none: the outer run is not armed); the outer verifier catches the inner error and
    the outer audit runs to its end."""
    caught = []

    def inner_hangs(p, q, drafts, rng):
        time.sleep(5)
        return 0

    def outer(p, q, drafts, rng):
        if not caught:
            try:
                md.audit(inner_hangs, p, q, 2, samples=20, max_seconds=0.5)
            except VerifierTimeoutError as exc:
                caught.append(str(exc))
        return int(rng.choice(len(p), p=p)), False
    res = md.audit(outer, P, Q, 2, samples=200, max_seconds=outer_limit)
    assert res.samples == 200
    assert len(caught) == 1
    assert "inner_hangs: the verifier call" in caught[0] and "limit of 0.5 s" in caught[0]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def _hangs_at_depth_one(calls):
    """A next-token law (V = 2) that sleeps 30 s at its first context of one token (the limit in
    the tests is 0.5 s); ``calls`` counts its calls."""
    def law(context):
        calls.append(tuple(context))
        if len(context) == 1:
            time.sleep(30)
        return np.array([0.6, 0.4])
    return law


def _block_runs():
    from mdtheory.blocks import block_efficiency_bound

    def verify(target, draft, drafts, rng):
        return np.array([0])
    return {
        "optimum": lambda t, d: md.optimal_block_efficiency(t, d, n=1, length=2, max_seconds=0.5),
        "bound": lambda t, d: block_efficiency_bound(t, d, 1, 2, max_seconds=0.5),
        "audit_block": lambda t, d: md.audit_block(verify, t, d, 1, 2, samples=100, max_seconds=0.5),
    }


@pytest.mark.skipif(not watchdog.can_arm(), reason="no SIGALRM timer here")
@pytest.mark.parametrize("run", ["optimum", "bound", "audit_block"])
@pytest.mark.parametrize("which", ["target", "draft"])
def test_a_law_that_does_not_return_is_interrupted(run, which):
    calls = []
    hanging, plain = _hangs_at_depth_one(calls), (lambda c: np.array([0.5, 0.5]))
    laws = (hanging, plain) if which == "target" else (plain, hanging)
    with pytest.raises(VerifierTimeoutError, match=rf"the {which} law's call at context \(\d,\)"
                       r".* did not return within .* limit of 0\.5 s"):
        _block_runs()[run](*laws)
    assert len([c for c in calls if len(c) == 1]) == 1  # interrupted in its first deep call
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.skipif(not watchdog.can_arm(), reason="no SIGALRM timer here")
def test_a_block_audit_law_that_does_not_return_exits_2(capsys, tmp_path):
    (tmp_path / "laws.py").write_text(
        "import time\n\nimport numpy as np\n\n\ndef target(context):\n    if context:\n"
        "        time.sleep(30)\n    return np.array([0.6, 0.4])\n\n\n"
        "def draft(context):\n    return np.array([0.5, 0.5])\n")
    verifier = Path(__file__).resolve().parent.parent / "examples" / "verifiers" / "block_verification.py"
    code, out, err = run_main(capsys, "audit", "--block", f"{verifier}:verify",
                              "--target", f"{tmp_path / 'laws.py'}:target", "--draft",
                              f"{tmp_path / 'laws.py'}:draft", "-n", "1", "-L", "2",
                              "--max-seconds", "0.5")
    one_line_error(code, err, "the target law's call at context", "did not return within",
                   "limit of 0.5 s")
