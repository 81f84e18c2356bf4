"""Progress on stderr: a tqdm bar on a terminal, plain lines elsewhere (a CI log, a notebook).

Off a terminal a line ``mdtheory: DESC: DONE/TOTAL (PCT%), S s`` is printed at most every
:data:`INTERVAL` seconds, the first only after :data:`INTERVAL` seconds, so work shorter than that
prints nothing (tqdm's own non-terminal advice: few updates, no carriage returns). ``quiet``
silences both.
"""

from __future__ import annotations

import sys
import time

__all__ = ["progress", "PlainProgress", "INTERVAL"]

#: Seconds between two plain progress lines.
INTERVAL = 10.0


class PlainProgress:
    """The subset of tqdm's interface the package uses (``update``, ``set_postfix_str``, ``n``,
    ``close``, iteration, a context manager), printing a plain line at most every ``interval``
    seconds (default :data:`INTERVAL`)."""

    def __init__(self, iterable=None, total: int | None = None, desc: str = "",
                 interval: float | None = None, file=None, clock=time.monotonic):
        self.iterable, self.total, self.desc = iterable, total, desc
        self.interval = INTERVAL if interval is None else interval
        self.file, self.clock = file, clock
        self.n, self.postfix = 0, ""
        self.t0 = self.last = clock()

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        self.postfix = text

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.interval:
            self.last = now
            of = f"/{self.total} ({100 * self.n / self.total:.0f}%)" if self.total else ""
            extra = f" [{self.postfix}]" if self.postfix else ""
            print(f"mdtheory: {self.desc}: {self.n}{of}{extra}, {now - self.t0:.0f} s",
                  file=self.file or sys.stderr, flush=True)

    def close(self) -> None:
        pass


def progress(iterable, total: int, desc: str, quiet: bool = False):
    """Progress over ``iterable`` (or, with ``iterable=None``, a bar to ``update``).

    Returns ``iterable`` itself (``None`` for a bar) when ``quiet``; a tqdm bar when stderr is a
    terminal; a :class:`PlainProgress` otherwise.
    """
    if quiet:
        return iterable
    if not sys.stderr.isatty():
        return PlainProgress(iterable, total, desc)
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True)
