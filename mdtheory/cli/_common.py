"""What every command shares: exit codes, reading ``.npy`` files, the common options."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from .. import _budget
from .._validate import as_distribution, as_drafts
from ..errors import InvalidDistributionError, InvalidInputError

#: The commands: name -> (module of :mod:`mdtheory.cli`, the line ``mdtheory --help`` lists it by). A
#: run imports the module of its command alone.
COMMANDS = {
    "check-acceptance": ("check_acceptance",
                         "optimal acceptance alpha*, acceptance-one test and optimal cut set"),
    "compare-selectors": ("compare_selectors", "acceptance of practical selection rules against "
                          "alpha*, or alpha* of each draft model (--sampling)"),
    "cross-validate": ("cross_validate",
                       "run the torch rules batched and test them against the exact theory"),
    "dd": ("dd", "facets of the acceptance-one cone by exact double description"),
    "verify": ("verify", "verify a published claim exactly"),
    "audit": ("audit",
              "certify that a verifier is lossless and measure its acceptance against alpha*"),
    "lm-pairs": ("lm_pairs", "(target, draft) next-token laws of a language model and a drafter"),
    "block-efficiency": ("block_efficiency",
                         "tokens per target call of multi-draft speculative decoding"),
}

EXIT_OK, EXIT_REFUTED, EXIT_BAD_INPUT, EXIT_SOLVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: ``check-acceptance``: a row's solver proved only bounds on alpha* that did not meet (printed).
EXIT_BOUNDS = 4
#: Exit code when stdout is closed before the output is written (128 + SIGPIPE, as a shell reports it).
EXIT_BROKEN_PIPE = 141
#: The first bytes of every .npy file.
NPY_MAGIC = b"\x93NUMPY"
#: Cut sets longer than this are abbreviated in the human-readable output (never in --json).
SHOW_TOKENS = 20


def load_npy(path: str, name: str) -> np.ndarray:
    """Load a plain numeric ``.npy`` array without pickle.

    Raises
    ------
    InvalidInputError
        A missing or unreadable file, an ``.npz`` archive, pickled or object data, or a file that is
        not in ``.npy`` format.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(NPY_MAGIC))
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InvalidInputError(f"{name}: no such file: {path}") from None
    except IsADirectoryError:
        raise InvalidInputError(f"{name}: {path} is a directory, not a .npy file") from None
    except PermissionError:
        raise InvalidInputError(f"{name}: cannot read {path}: permission denied") from None
    except (ValueError, EOFError, OSError) as exc:
        if head != NPY_MAGIC:
            raise InvalidInputError(f"{name}: {path} is not a valid .npy file (it does not start "
                                    "with the .npy header)") from None
        why = "it holds Python objects, which are not loaded (pickle is unsafe)" \
            if "pickle" in str(exc) else f"a damaged .npy file: {exc}"
        raise InvalidInputError(f"{name}: {path} is not a plain numeric .npy array: {why}") from None
    if not isinstance(arr, np.ndarray):
        arr.close()
        raise InvalidInputError(f"{name}: {path} is an .npz archive; expected a single .npy array")
    return arr


def load_batch(path: str, name: str, normalize: bool) -> tuple[np.ndarray, int]:
    """The rows of a (V,) or (B, V) file as a (rows, V) array, and the file's number of axes."""
    arr = load_npy(path, name)
    if arr.ndim not in (1, 2):
        raise InvalidDistributionError(
            f"{path}: {name} has shape {arr.shape}; expected (V,) or (B, V)"
        )
    try:
        out = as_distribution(arr, name, normalize=normalize, ndim=arr.ndim)
    except InvalidDistributionError as exc:
        raise InvalidDistributionError(f"{path}: {exc}") from None
    return np.atleast_2d(out), arr.ndim


def load_pair(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, int]:
    """P and Q as (rows, V) arrays with the same number of tokens, and the number of axes of Q's
    file (1 or 2)."""
    P, _ = load_batch(args.P, "p", args.normalize)
    Q, q_ndim = load_batch(args.Q, "q", args.normalize)
    if P.shape[1] != Q.shape[1]:
        raise InvalidDistributionError(
            f"p has {P.shape[1]} tokens ({args.P}) but q has {Q.shape[1]} ({args.Q})"
        )
    return P, Q, q_ndim


def independent_drafts(Q: np.ndarray, q_ndim: int, drafts: int | None, path: str) -> np.ndarray:
    """The (n, V) table of ``--sampling independent``: one law per draft, one row each.

    A q of shape (V,) is one draft: it is refused (exit 2) unless ``--drafts 1`` says so, since n
    identical independent drafts are iid drafts (``--sampling iid``), and a (V,) file given here is
    more likely a mistake than a request for one draft. ``--drafts``, when given, must equal the
    number of rows.
    """
    n = len(Q)
    if q_ndim == 1 and drafts != 1:
        raise InvalidInputError(
            f"{path}: --sampling independent takes one law per draft, q of shape (n, V); q has shape "
            f"({Q.shape[1]},), which is one draft: for n identical drafts use --sampling iid, for "
            "one draft add --drafts 1"
        )
    if drafts is not None and as_drafts(drafts) != n:
        raise InvalidInputError(
            f"{path}: --drafts {drafts} contradicts the independent draft table, which has {n} "
            "row(s), one law per draft; drop --drafts or give one row per draft"
        )
    return Q


def fmt_set(tokens: np.ndarray) -> str:
    """A token set as ``{0, 1, ...}``, abbreviated beyond :data:`SHOW_TOKENS` tokens."""
    tokens = tokens.tolist()
    if len(tokens) <= SHOW_TOKENS:
        return "{" + ", ".join(map(str, tokens)) + "}"
    head = ", ".join(map(str, tokens[:SHOW_TOKENS]))
    return "{" + head + f", ... }} ({len(tokens)} tokens; --json lists all)"


def progress(args: argparse.Namespace, total: int, desc: str):
    """Progress on stderr: a tqdm bar on a terminal, a plain line at most every 10 s elsewhere
    (:mod:`mdtheory._progress`), nothing under ``--quiet``."""
    from tqdm import tqdm

    from .._progress import PlainProgress

    if not args.quiet and not sys.stderr.isatty():
        return PlainProgress(None, total, desc)
    return tqdm(total=total, desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True,
                disable=args.quiet)


def checked_names(text: str | None, valid, what: str) -> list[str]:
    """The comma-separated names of ``--rules`` (all of ``valid`` when not given), each checked."""
    if text is None:
        return list(valid)
    out = [name.strip() for name in text.split(",") if name.strip()]
    if not out:
        raise InvalidInputError(f"--rules {text!r} names no {what}; give comma-separated names "
                                f"from: {', '.join(valid)}")
    for name in out:
        if name not in valid:
            raise InvalidInputError(f"unknown {what} {name!r}; valid choices: {', '.join(valid)}")
    return out


def _seconds(text: str) -> float:
    """``--max-seconds``: a positive number of seconds (argparse names this function in its error
    for a non-number: "invalid _seconds value")."""
    value = float(text)
    if not value > 0:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _bytes(text: str) -> float:
    """``--max-bytes``: a positive number of bytes, with an optional binary suffix K, M, G or T."""
    scale = {"K": 2.0**10, "M": 2.0**20, "G": 2.0**30, "T": 2.0**40}.get(text[-1:].upper(), 1.0)
    value = float(text[:-1] if scale != 1.0 else text) * scale
    if not value > 0:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"must be a positive number of bytes, got {text}")
    return value


def add_limits(parser: argparse.ArgumentParser, seconds_help: str | None = None) -> None:
    """``--max-seconds``, ``--max-bytes`` and ``--quiet``, the options of every command that does
    work (``seconds_help``: what the time limit refuses, where a command says it otherwise)."""
    parser.add_argument("--max-seconds", type=_seconds, default=_budget.MAX_SECONDS, metavar="S",
                        help=(seconds_help or "refuse, before starting, work estimated to take "
                              "longer than S seconds") + f" (default {_budget.MAX_SECONDS:g}); the "
                        "refusal states the estimate")
    parser.add_argument("--max-bytes", type=_bytes, default=_budget.MAX_BYTES, metavar="B",
                        help="refuse, before starting, work estimated to need more memory than B "
                             "bytes (a suffix K, M, G or T multiplies by 2^10 ...; default 4G)")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no progress (a bar on a terminal, else a line every 10 s)")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose ``epilog`` may be a callable, evaluated only when help is shown (the
    rule and claim lists need modules that the other commands do not load)."""

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


def vocab_option(parser: argparse.ArgumentParser, required: bool, help: str) -> None:
    """``--vocab V`` (``--alphabet`` and ``-m``, older spellings, are aliases)."""
    parser.add_argument("--vocab", "--alphabet", "-m", dest="vocab", type=int, required=required,
                        metavar="V", help=help + " (--alphabet and -m are older spellings)")


def drafts_option(parser: argparse.ArgumentParser, default: int | None = 2, required=False,
                  help: str = "number of drafts n") -> None:
    """``-n N`` (``--drafts`` is the same; ``-K``, an older spelling, is an alias)."""
    parser.add_argument("-n", "--drafts", "-K", dest="drafts", type=int, default=default,
                        required=required, metavar="N",
                        help=help + ("" if default is None else f" (default {default})")
                        + " (--drafts is the same; -K is an older spelling)")


def _seed(text: str) -> int:
    """``--seed``: a non-negative integer (what numpy's generators accept)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return value


def add_seed_option(parser: argparse.ArgumentParser) -> None:
    """The ``--seed`` option every sampling command shares."""
    parser.add_argument("--seed", type=_seed, default=0,
                        help="seed of the random number generator, an integer >= 0 (default 0)")


def add_common(parser: argparse.ArgumentParser, json_help: str, with_seed: bool = False) -> None:
    """``--json`` (and ``--seed``)."""
    parser.add_argument("--json", action="store_true", help=json_help + " per line (JSON Lines)")
    if with_seed:
        add_seed_option(parser)
