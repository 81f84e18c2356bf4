"""Command-line interface: ``mdtheory check-acceptance P Q [-n N] ...``.

One module per command (``check_acceptance``, ``compare_selectors``, ``cross_validate``, ``dd``,
``verify``, ``audit``, ``lm_pairs``, ``block_efficiency``), each with ``add_parser(subparsers)`` and
``run(args) -> exit code``; :mod:`._common` holds what they share (reading ``.npy`` files, the
common options, the exit codes). A command parses, calls the library and prints; no module of the
library imports this package.

Exit codes: 0 success (for ``verify CLAIM``: the claim holds; for ``verify all``: every verdict is
the one papers/ records), 1 a ``verify`` claim is refuted (``verify all``: a verdict differs from the
record), 2 bad input (one line on stderr naming the culprit, never a traceback) or work refused
because its estimated time or memory is over the limit (``--max-seconds``; the line states the
estimate; or, uncaught by an estimate, an allocation beyond the machine's memory), 3 a solver failure,
4 (``check-acceptance``, ``compare-selectors``) an alpha* proven only between two bounds that did
not meet (both printed; the minimum-norm-point route's known failure,
:func:`mdtheory.routes.mnp.min_norm_base`, or its run stopped at ``--max-seconds``),
5 (``audit``) inconclusive: not rejected, but too few samples to detect ``--detect-tv``,
130 interrupted (Ctrl-C), 141 stdout closed early (``| head``) or closed from the start (``>&-``).

One vocabulary: n (``-n``, or ``--drafts``) is the number of drafts, V (``--vocab``) the number of
tokens, ``--sampling`` the draft model; ``-K``, ``--alphabet``, ``-m`` and (``dd``, ``verify``)
``--model`` are accepted as older spellings. Every command that does work takes ``--max-seconds``,
``--max-bytes``, ``--json`` and ``--quiet``, declared once in :mod:`._common`. ``--json`` prints
JSON Lines everywhere: one JSON object per line (per row, rule, check or run).

Long work that was allowed to start (Monte Carlo, exact verification, sampling from a language
model) shows a progress bar on stderr when stderr is a terminal, and elsewhere (a CI log, a
notebook) a plain line at most every 10 s, the first after 10 s; ``--quiet`` silences both.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Iterable, Sequence

from ..errors import MdtheoryError, SolverError
from ._common import (
    COMMANDS,
    EXIT_BAD_INPUT,
    EXIT_BOUNDS,
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REFUTED,
    EXIT_SOLVER,
    Parser,
    load_npy,
)

__all__ = ["main", "build_parser", "load_npy", "EXIT_OK", "EXIT_REFUTED", "EXIT_BAD_INPUT",
           "EXIT_SOLVER", "EXIT_BOUNDS", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE"]


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``mdtheory``, with the options of ``commands`` (default: every command); the
    others are listed by their help line alone, so that their modules are not imported."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="mdtheory", description="Exact theory of multi-draft speculative sampling.",
        epilog="n is the number of drafts (-n, --drafts), V the number of tokens (--vocab). "
               "--json prints JSON Lines: one object per line. Exit codes: 0 success, 1 a claim "
               "refuted or a verifier found lossy, 2 bad input or work over --max-seconds or "
               "--max-bytes, 3 solver failure, 4 only bounds on an alpha* were proven (printed), 5 audit "
               "inconclusive (too few samples for --detect-tv), 130 interrupted, 141 stdout "
               "closed.",
    )
    parser.add_argument("--version", action="version", version=f"mdtheory {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=Parser)
    wanted = set(COMMANDS) if commands is None else set(commands)
    for name, (module, line) in COMMANDS.items():
        if name in wanted:
            importlib.import_module(f".{module}", __name__).add_parser(sub)
        else:
            sub.add_parser(name, help=line)
    return parser


class _ClosedStdout:
    """sys.stdout of a process started with file descriptor 1 closed (``>&-``; Python sets it to
    None): writing raises BrokenPipeError, as a pipe whose reader left, so the command ends with
    exit code 141 where it would print, and runs where it only writes files."""

    def write(self, text):
        raise BrokenPipeError(32, "stdout is closed")

    def flush(self):
        pass

    def fileno(self):
        raise OSError("stdout is closed")


def _writable(stream) -> None:
    """Let ``stream`` write what its encoding cannot (``PYTHONIOENCODING=ascii``: the help's Greek
    letters) as backslash escapes instead of raising UnicodeEncodeError."""
    try:
        "\u03b1".encode(stream.encoding or "utf-8")
    except (UnicodeEncodeError, LookupError):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="backslashreplace")
    except AttributeError:  # a stream without an encoding: it takes str as it is
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    if sys.stdout is None:
        sys.stdout = _ClosedStdout()
    if sys.stderr is None:  # started with file descriptor 2 closed (``2>&-``): messages are lost
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the process's own stderr, never closed)
    for stream in (sys.stdout, sys.stderr):
        _writable(stream)
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)  # the first word names it
    parser = build_parser([command] if command in COMMANDS else [])
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # argparse has printed its usage error, help or version
            sys.stdout.flush()
            return int(exc.code or 0)
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except SolverError as exc:
        print(f"mdtheory: solver error: {exc}", file=sys.stderr)
        return EXIT_SOLVER
    except MdtheoryError as exc:
        print(f"mdtheory: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError as exc:  # an allocation beyond the machine that no size estimate caught
        print(f"mdtheory: error: out of memory: {exc or 'an allocation failed'}; the problem is too "
              "large for this machine", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("mdtheory: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader left (`| head`): stop quietly, as the Python docs advise
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is not a file descriptor (captured)
            pass
        return EXIT_BROKEN_PIPE
    except OSError as exc:  # a path that cannot be read or written (--out /proc/x, a full disk)
        where = f": {exc.filename}" if exc.filename else ""
        print(f"mdtheory: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_BAD_INPUT
