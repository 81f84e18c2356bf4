"""Interrupt a verifier call that does not return: one watchdog for the audits' calls of user code.

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
restored.

What it cannot do. A Python signal handler runs between bytecodes of the main thread: a call stuck in
C code that holds the GIL (a long numpy or torch kernel, a C extension's loop) is interrupted only when
that code returns to the interpreter (``time.sleep`` and blocking I/O are woken by the signal, and
the handler's exception propagates, PEP 475). The batched torch audit is not watched (its calls
are few and its time is not estimated). Off the main thread, where no signal handler can be
installed, on platforms without ``SIGALRM`` (Windows), or while another ``ITIMER_REAL`` timer is
running (e.g. a test harness's timeout, which it would otherwise replace), the watchdog stays
unarmed and the audits keep only their between-call pace checks.
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
    """Marks verifier calls in flight and interrupts one that runs longer than an armed limit."""

    def __init__(self):
        self._started: float | None = None
        self._where = None
        self._armed = False
        self._late = None  # (start, where) of the call interrupted
        self.limit = math.inf

    def call(self, position, drafts, f, *args):
        """``f(*args)``, marked in flight at ``position`` (an int, or None) on ``drafts``."""
        self._where = (position, drafts)
        self._started = time.perf_counter()
        try:
            return f(*args)
        finally:
            self._started = None

    def _alarm(self, signum, frame):
        if self._started is not None and \
                time.perf_counter() - self._started >= max(self.limit, RECHECK):
            self._late = (self._started, self._where)
            raise _Interrupt

    @contextmanager
    def armed(self, max_seconds: float | None, what: str):
        """Arm the watchdog for a run of ``what`` whose limit is ``max_seconds`` (None or infinite:
        not armed): a call through :meth:`call` that runs longer than that by itself is interrupted,
        and the run raises :class:`~mdtheory.errors.VerifierTimeoutError`. Re-entering while
        armed does nothing."""
        if self._armed or max_seconds is None or not math.isfinite(max_seconds) or not can_arm():
            yield self
            return
        self.limit, self._armed = max_seconds, True
        previous = signal.signal(signal.SIGALRM, self._alarm)
        try:
            signal.setitimer(signal.ITIMER_REAL, max(max_seconds, RECHECK), RECHECK)
            yield self
        except _Interrupt:
            started, (position, drafts) = self._late
            at = "" if position is None else f" at position {position}"
            shown = drafts.tolist() if hasattr(drafts, "tolist") else drafts
            raise VerifierTimeoutError(
                f"{what}: the verifier call{at} on drafts {shown} did not return within "
                f"{_budget.fmt_seconds(time.perf_counter() - started)}, longer than the limit of "
                f"{_budget.fmt_seconds(max_seconds)} by itself: interrupted; raise the limit with "
                "max_seconds (--max-seconds)"
            ) from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0.0)
            signal.signal(signal.SIGALRM, previous)
            self._armed, self._started, self.limit = False, None, math.inf


#: The watchdog the audits call their verifiers through.
CALLS = Watchdog()
