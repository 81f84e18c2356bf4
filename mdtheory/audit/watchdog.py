"""Interrupt a verifier call that does not return: one watchdog for the calls of user code.

The audits check their pace between verifier calls (:mod:`mdtheory.audit.verifier`,
:mod:`mdtheory.blocks.audit`); a call that never returns is never between calls. :data:`CALLS`
covers that case: while armed (:meth:`Watchdog.armed`, around a run), each call made through
:meth:`Watchdog.call` is marked in flight, and a POSIX interval timer (``signal.setitimer``,
``SIGALRM``) fires once the run's limit has passed and every :data:`RECHECK` seconds after; when it
fires while one call has been running for longer than the whole run's limit (and at least
:data:`RECHECK`), that call is interrupted and the run raises
:class:`~mdtheory.errors.VerifierTimeoutError` ("the verifier call at position X did not return
within Y s"). The interrupt is a ``BaseException`` inside the call, so neither the verifier's own
``except Exception`` nor the audit's handling of the verifier's errors swallows it; it becomes the
named error when the run ends. On leaving, the timer is disarmed and the previous ``SIGALRM`` handler
restored. Runs nest: a verifier that itself runs an audit arms the watchdog again inside its call;
the calls in flight form a stack, each judged against its own run's limit, and a late outer call is
interrupted even while an inner run's calls come and go.

Next-token laws are user code too: the block optimum, the block-efficiency bound
(:mod:`mdtheory.blocks`) and the block audit call a law through :meth:`Watchdog.call_law` while
armed with their ``max_seconds``, and a law call that does not return raises the same error ("the
target law's call at context (0, 1) did not return within Y s").

What it cannot do. A Python signal handler runs between bytecodes of the main thread: a call stuck in
C code that holds the GIL (a long numpy or torch kernel, a C extension's loop) is interrupted only when
that code returns to the interpreter (``time.sleep`` and blocking I/O are woken by the signal, and
the handler's exception propagates, PEP 475). The batched torch audit is not watched (its calls
are few and its time is not estimated). Off the main thread, where no signal handler can be
installed, on platforms without ``SIGALRM`` (Windows), or while another ``ITIMER_REAL`` timer is
running (e.g. a test harness's timeout, which it would otherwise replace), the watchdog stays
unarmed and the audits keep only their between-call pace checks; a verifier that hands its calls to
another thread is watched only as long as its main-thread call waits for them, and the other
thread's work runs on after the interrupt.

The interrupt is an exception raised inside the verifier's own code, so the verifier can defeat it:
one that catches ``BaseException`` (a bare ``except:``) and returns has its answer counted as if the
call had returned in time (the run goes on, and its pace checks stop it later with
:class:`~mdtheory.errors.ProblemTooLargeError`), and one that catches it and loops or waits again
hangs the run (the timer fires again every :data:`RECHECK` seconds, and each interrupt can be
caught again). A verifier that installs its own ``SIGALRM`` handler, ignores the signal, or sets
or cancels the ``ITIMER_REAL`` timer switches the watchdog off for the rest of the run.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from contextlib import contextmanager

from .. import _budget
from ..errors import VerifierTimeoutError

__all__ = ["Watchdog", "CALLS", "RECHECK", "can_arm"]

#: After the first ``max_seconds``, the timer fires this often (seconds): a call that has run longer
#: than the limit is interrupted within this much of it. Slower calls that each return are the
#: audits' own pace checks' business (they stop with their projection).
RECHECK = 0.25


class _Interrupt(BaseException):
    """Raised inside the verifier call by the timer's handler (a BaseException: the verifier's and
    the audit's ``except Exception`` do not catch it)."""


def can_arm() -> bool:
    """Whether a watchdog can be armed here: POSIX ``SIGALRM``, the main thread, no ``ITIMER_REAL``
    timer running."""
    return (hasattr(signal, "SIGALRM") and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
            and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0))


class Watchdog:
    """Marks verifier calls in flight and interrupts one that runs longer than an armed limit.

    Re-entrant: a verifier that runs an audit of its own arms the watchdog again inside its call;
    the calls in flight form a stack, each judged against the limit of the run that made it, so
    the inner run's calls neither clear nor replace the outer call's mark.
    """

    def __init__(self):
        # (start, (position, drafts, law), limit, depth); law: None for a verifier, else its name
        self._calls: list[tuple[float, tuple, float, int]] = []
        self._depth = 0  # runs armed, the innermost last
        self._late = None  # (start, where, limit, depth) of the call interrupted
        self.limit = math.inf

    @property
    def _started(self) -> float | None:
        """Start of the innermost call in flight (None when none is)."""
        return self._calls[-1][0] if self._calls else None

    def call(self, position, drafts, f, *args):
        """``f(*args)``, marked in flight at ``position`` (an int, or None) on ``drafts``."""
        self._calls.append((time.perf_counter(), (position, drafts, None), self.limit, self._depth))
        try:
            return f(*args)
        finally:
            self._calls.pop()

    def call_law(self, name: str, context, f, *args):
        """``f(*args)``, marked in flight as a call of the ``name`` law (``"target"``, ``"draft"``)
        at ``context``: a next-token law is user code watched like a verifier."""
        self._calls.append((time.perf_counter(), (None, context, name), self.limit, self._depth))
        try:
            return f(*args)
        finally:
            self._calls.pop()

    def _alarm(self, signum, frame):
        now = time.perf_counter()
        for entry in self._calls:  # the outermost late call first
            if now - entry[0] >= max(entry[2], RECHECK):
                self._late = entry
                raise _Interrupt

    @contextmanager
    def armed(self, max_seconds: float | None, what: str):
        """Arm the watchdog for a run of ``what`` whose limit is ``max_seconds`` (None or infinite:
        no limit for this run's calls): a call through :meth:`call` that runs longer than that by
        itself is interrupted, and the run raises :class:`~mdtheory.errors.VerifierTimeoutError`.
        Entered again while armed (a verifier running an audit), the inner run's calls get its own
        limit, the outer calls keep theirs, and the timer keeps running for both."""
        limit = math.inf if max_seconds is None or not math.isfinite(max_seconds) else max_seconds
        nested = self._depth > 0
        if not nested and (math.isinf(limit) or not can_arm()):
            yield self
            return
        outer_limit = self.limit
        self._depth += 1
        self.limit, depth = limit, self._depth
        previous = None
        try:
            if nested:  # the timer already runs: make it fire often enough for the inner limit too
                signal.setitimer(signal.ITIMER_REAL, RECHECK, RECHECK)
            else:
                previous = signal.signal(signal.SIGALRM, self._alarm)
                signal.setitimer(signal.ITIMER_REAL, max(limit, RECHECK), RECHECK)
            yield self
        except _Interrupt:
            if self._late is None or self._late[3] != depth:
                raise  # an outer run's call is late: that run reports it
            started, (position, drafts, law), late_limit, _ = self._late
            self._late = None
            at = "" if position is None else f" at position {position}"
            shown = drafts.tolist() if hasattr(drafts, "tolist") else drafts
            call = f"the verifier call{at} on drafts {shown}" if law is None else \
                f"the {law} law's call at context {shown}"
            raise VerifierTimeoutError(
                f"{what}: {call} did not return within "
                f"{_budget.fmt_seconds(time.perf_counter() - started)}, longer than the limit of "
                f"{_budget.fmt_seconds(late_limit)} by itself: interrupted; raise the limit with "
                "max_seconds (--max-seconds)"
            ) from None
        finally:
            self._depth -= 1
            self.limit = outer_limit
            if not nested:
                signal.setitimer(signal.ITIMER_REAL, 0.0)
                signal.signal(signal.SIGALRM, previous)
                self._late = None


#: The watchdog the audits call their verifiers through.
CALLS = Watchdog()
