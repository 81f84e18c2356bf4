"""Command-line interface: ``mdtheory check-acceptance P Q [--drafts N] ...``.

Exit codes: 0 success, 2 bad input (one line on stderr naming the culprit, never a traceback),
3 a solver failure.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import numpy as np

from ._validate import as_distribution
from .drafts import make_draft_model
from .errors import InvalidDistributionError, InvalidInputError, MdtheoryError, SolverError
from .solve import METHODS, optimal_acceptance

__all__ = ["main", "load_npy"]

EXIT_OK, EXIT_BAD_INPUT, EXIT_SOLVER = 0, 2, 3
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
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InvalidInputError(f"{name}: no such file: {path}") from None
    except IsADirectoryError:
        raise InvalidInputError(f"{name}: {path} is a directory, not a .npy file") from None
    except PermissionError:
        raise InvalidInputError(f"{name}: cannot read {path}: permission denied") from None
    except (ValueError, EOFError, OSError) as exc:
        raise InvalidInputError(
            f"{name}: {path} is not a plain numeric .npy array ({exc})"
        ) from None
    if not isinstance(arr, np.ndarray):
        arr.close()
        raise InvalidInputError(f"{name}: {path} is an .npz archive; expected a single .npy array")
    return arr


def _load_batch(path: str, name: str, normalize: bool) -> np.ndarray:
    arr = load_npy(path, name)
    if arr.ndim not in (1, 2):
        raise InvalidDistributionError(
            f"{path}: {name} has shape {arr.shape}; expected (V,) or (B, V)"
        )
    try:
        out = as_distribution(arr, name, normalize=normalize, ndim=arr.ndim)
    except InvalidDistributionError as exc:
        raise InvalidDistributionError(f"{path}: {exc}") from None
    return np.atleast_2d(out)


def _fmt_set(tokens: np.ndarray) -> str:
    tokens = tokens.tolist()
    if len(tokens) <= SHOW_TOKENS:
        return "{" + ", ".join(map(str, tokens)) + "}"
    head = ", ".join(map(str, tokens[:SHOW_TOKENS]))
    return "{" + head + f", ... }} ({len(tokens)} tokens; --json lists all)"


def _check_acceptance(args: argparse.Namespace) -> int:
    P = _load_batch(args.P, "p", args.normalize)
    Q = _load_batch(args.Q, "q", args.normalize)
    if P.shape[1] != Q.shape[1]:
        raise InvalidDistributionError(
            f"p has {P.shape[1]} tokens ({args.P}) but q has {Q.shape[1]} ({args.Q})"
        )
    if len(P) != len(Q) and 1 not in (len(P), len(Q)):
        raise InvalidDistributionError(
            f"p has {len(P)} rows but q has {len(Q)}; give equal batches or one row to broadcast"
        )
    rows = max(len(P), len(Q))
    for i in range(rows):
        p, q = P[i % len(P)], Q[i % len(Q)]
        model = make_draft_model(q, args.drafts, args.sampling)
        res = optimal_acceptance(p, model, method=args.method)
        in_cut = np.zeros(p.size, dtype=bool)
        in_cut[res.cut] = True
        p_cut, q_cut = float(p[in_cut].sum()), float(model.containment(in_cut))
        single = float(np.minimum(p, model.first_draft_law()).sum())
        if args.json:
            print(json.dumps({
                "row": i, "alpha_star": res.value, "acceptance_one": res.acceptance_one,
                "witness": None if res.witness is None else res.witness.tolist(),
                "cut": res.cut.tolist(), "margin": q_cut - p_cut, "single_draft": single,
                "drafts": res.drafts, "sampling": res.sampling, "method": res.method,
                "vocab": int(p.size),
            }))
            continue
        head = f"row {i}: " if rows > 1 else ""
        print(f"{head}V = {p.size}, n = {res.drafts} drafts, {res.sampling} sampling, "
              f"method {res.method}")
        print(f"  optimal acceptance alpha* = {res.value:.12g}")
        hall = "p(T) >= Q(T) for every T (Hall's condition"
        hall += "; iid: p(T) >= q(T)^n, Khisti et al. Thm 2 / Remark 2)" if res.sampling == "iid" \
            else ")"
        print(f"  optimal cut set T* = {_fmt_set(res.cut)}")
        if res.acceptance_one:
            print(f"  acceptance one: yes, {hall}")
        else:
            print(f"  acceptance one: no; T* is a witness: p(T*) = {p_cut:.10g} < Q(T*) = "
                  f"{q_cut:.10g} (margin {q_cut - p_cut:.6g})")
        print(f"  single-draft baseline 1 - TV(p, q) = {single:.12g}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mdtheory", description="Exact theory of multi-draft speculative sampling."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = sub.add_parser(
        "check-acceptance",
        help="optimal acceptance alpha*, acceptance-one test and optimal cut set",
        description="Optimal acceptance alpha* = 1 + min_T [p(T) - Q(T)] of n-draft speculative "
                    "sampling, whether it is exactly one, a witness set, and the optimal cut set.",
    )
    check.add_argument("P", help="target distribution, .npy of shape (V,) or (B, V)")
    check.add_argument("Q", help="draft distribution, .npy of shape (V,) or (B, V)")
    check.add_argument("--drafts", "-n", type=int, default=2, metavar="N",
                       help="number of drafts (default 2)")
    check.add_argument("--sampling", default="iid",
                       choices=["iid", "without-replacement", "conditional-poisson"],
                       help="draft model (default iid)")
    check.add_argument("--method", default="auto", choices=["auto", *METHODS],
                       help="route to alpha* (default auto: the fastest exact one)")
    check.add_argument("--normalize", action="store_true",
                       help="rescale rows that do not sum to 1 instead of refusing them")
    check.add_argument("--json", action="store_true", help="one JSON object per row")
    check.set_defaults(func=_check_acceptance)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed its usage error
        return int(exc.code or 0)
    try:
        return args.func(args)
    except SolverError as exc:
        print(f"mdtheory: solver error: {exc}", file=sys.stderr)
        return EXIT_SOLVER
    except MdtheoryError as exc:
        print(f"mdtheory: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
