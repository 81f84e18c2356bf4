"""``mdtheory lm-pairs``: (target, draft) next-token laws of the pretrained char-LSTM."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import _budget
from ..drafters import DRAFTERS, LSTMLaw, lm_pairs, make_drafter
from ..errors import InvalidInputError
from ..lm import load_char_lstm
from ..logits import check_sampling
from ._common import _bytes, _seconds, add_seed_option


def add_parser(subparsers) -> None:
    """Add ``lm-pairs`` to the CLI's subparsers."""
    cmd = subparsers.add_parser(
        "lm-pairs", help="(target, draft) next-token laws of the pretrained char-LSTM",
        description="Write DIR/P.npy and DIR/Q.npy (positions x 465): the pretrained char-LSTM "
                    "(textgenrnn 2.0.0) as target and a drafter, at the positions of texts "
                    "sampled from the target. Ready for check-acceptance and compare-selectors.",
    )
    cmd.add_argument("--positions", type=int, required=True, help="number of positions N")
    cmd.add_argument("--target-temperature", type=float, default=1.0,
                     help="temperature of the target LSTM (default 1.0)")
    cmd.add_argument("--draft", required=True, choices=DRAFTERS, help="the drafter")
    cmd.add_argument("--draft-temperature", type=float, help="default: the target temperature")
    cmd.add_argument("--top-k", type=int, help="top-k of the (LSTM) drafter")
    cmd.add_argument("--order", type=int, default=3, help="n-gram order (ngram drafter)")
    add_seed_option(cmd)
    cmd.add_argument("--out", required=True, help="output directory")
    cmd.add_argument("--quiet", action="store_true", help="no progress bar")
    cmd.add_argument("--max-seconds", type=_seconds, default=_budget.MAX_SECONDS, metavar="S",
                     help="refuse, before starting, work estimated to take longer than S seconds "
                          f"(default {_budget.MAX_SECONDS:g}; the sampling itself shows a progress "
                          "bar)")
    cmd.add_argument("--max-bytes", type=_bytes, default=_budget.MAX_BYTES, metavar="B",
                     help="refuse work estimated to need more memory than B bytes (default 4G)")
    cmd.set_defaults(func=run)


def run(args) -> int:
    if args.order < 1:
        raise InvalidInputError(f"--order must be >= 1, got {args.order}")
    if args.positions < 1:
        raise InvalidInputError(f"--positions must be >= 1, got {args.positions}")
    check_sampling(args.target_temperature)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out: {out} exists and is not a directory")
    rng = np.random.default_rng(args.seed)
    target = LSTMLaw(load_char_lstm(), args.target_temperature)
    steps = [_budget.lm_pairs(args.positions, target.V)]
    if args.draft == "ngram":
        steps.append(_budget.ngram_distillation(args.order, target.V))
    _budget.require(_budget.combine(*steps), args.max_seconds, max_bytes=args.max_bytes)
    drafter = make_drafter(args.draft, target, rng, temperature=args.draft_temperature,
                           top_k=args.top_k, order=args.order, quiet=args.quiet)
    P, Q = lm_pairs(args.positions, target, drafter, rng, quiet=args.quiet)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "P.npy", P)
    np.save(out / "Q.npy", Q)
    if not args.quiet:
        print(f"wrote {out / 'P.npy'} and {out / 'Q.npy'}: {P.shape[0]} positions x {P.shape[1]} tokens")
    return 0
