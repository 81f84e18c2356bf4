"""``mdtheory block-efficiency``: tokens per target call of multi-draft speculative decoding."""

from __future__ import annotations

import json

import numpy as np

from .. import _budget
from ..blockeff import (
    SAMPLINGS,
    _check_rule,
    _check_sizes,
    block_efficiency,
    estimate,
)
from ..errors import InvalidInputError
from ._common import _seconds, add_seed_option
from .lm_pairs import add_model_options, models_from_args


def add_parser(subparsers) -> None:
    """Add ``block-efficiency`` to the CLI's subparsers."""
    cmd = subparsers.add_parser(
        "block-efficiency", help="tokens per target call of multi-draft speculative decoding",
        description="Simulate K-draft, L-token speculative decoding with a target (the bundled "
                    "pretrained char-LSTM, textgenrnn 2.0.0, or a local Hugging Face checkpoint, "
                    "hf:PATH) and a drafter, verified token by token along the "
                    "drafts consistent with the accepted prefix, one bonus token at the end; print "
                    "the block efficiency (mean tokens per target call) of each rule.",
    )
    cmd.add_argument("--drafts", "-K", type=int, required=True, help="number of drafts K")
    cmd.add_argument("--length", "-L", type=int, required=True, help="draft length L")
    cmd.add_argument("--rules", default="single,rrs,k-seq,khisti-lp,optimal",
                     help="comma-separated selection rules")
    cmd.add_argument("--steps", type=int, default=200, help="target calls per rule")
    cmd.add_argument("--sampling", choices=SAMPLINGS, default="iid",
                     help="first-token draft sampling (without-replacement: rrs-wor)")
    add_model_options(cmd, draft_required=False)
    add_seed_option(cmd)
    cmd.add_argument("--max-seconds", type=_seconds, default=_budget.MAX_SECONDS, metavar="S",
                     help="refuse, before starting, a rule whose run is estimated longer than S "
                          f"seconds (default {_budget.MAX_SECONDS:g}); the refusal states the estimate")
    cmd.add_argument("--json", action="store_true", help="one JSON object per rule")
    cmd.add_argument("--quiet", "-q", action="store_true",
                     help="no progress (a bar on a terminal, else a line every 10 s)")
    cmd.set_defaults(func=run)


def run(args) -> int:
    rules = [r.strip() for r in args.rules.split(",") if r.strip()]
    if not rules:
        raise InvalidInputError("--rules names no rule")
    _check_sizes(args.drafts, args.length, args.steps)
    for rule in rules:
        _check_rule(rule, args.sampling)
    target, drafter = models_from_args(args, np.random.default_rng([args.seed, 1]))
    if target.bos is None:
        raise InvalidInputError(f"{args.target} has no start token (bos) to begin the text after")
    start = (target.bos,)
    for rule in rules:  # every rule's estimate before any runs
        _budget.require(estimate(rule, target.V, args.drafts, args.length, args.steps),
                        args.max_seconds)
    for rule in rules:
        res = block_efficiency(target, drafter, rule, args.drafts, args.length, args.steps,
                               np.random.default_rng(args.seed), args.sampling, start, args.quiet,
                               max_seconds=args.max_seconds)
        row = res.row()
        if args.json:
            print(json.dumps(row))
        else:
            lo, hi = row["ci95"]
            print(f"{rule:12s} K={args.drafts} L={args.length}  block efficiency "
                  f"{row['block_efficiency']:.3f}  [{lo:.3f}, {hi:.3f}]  "
                  f"({row['tokens']} tokens / {row['target_calls']} target calls)")
    return 0
