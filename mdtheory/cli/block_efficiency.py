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
from ..drafters import DRAFTERS, LSTMLaw, make_drafter
from ..errors import InvalidInputError
from ..lm import META, load_char_lstm
from ._common import _seconds, add_seed_option


def add_parser(subparsers) -> None:
    """Add ``block-efficiency`` to the CLI's subparsers."""
    cmd = subparsers.add_parser(
        "block-efficiency", help="tokens per target call of multi-draft speculative decoding",
        description="Simulate K-draft, L-token speculative decoding with the pretrained char-LSTM "
                    "(textgenrnn 2.0.0) as target and a drafter, verified token by token along the "
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
    cmd.add_argument("--target-temperature", type=float, default=1.0,
                     help="temperature of the target LSTM (default 1.0)")
    cmd.add_argument("--draft", choices=DRAFTERS, default="tempered",
                     help="the drafter (default tempered: the LSTM at the draft temperature)")
    cmd.add_argument("--draft-temperature", type=float, help="default: the target temperature")
    cmd.add_argument("--top-k", type=int, help="top-k of the (LSTM) drafter")
    add_seed_option(cmd)
    cmd.add_argument("--max-seconds", type=_seconds, default=_budget.MAX_SECONDS, metavar="S",
                     help="refuse, before starting, a rule whose run is estimated longer than S "
                          f"seconds (default {_budget.MAX_SECONDS:g}); the refusal states the estimate")
    cmd.add_argument("--json", action="store_true", help="one JSON object per rule")
    cmd.add_argument("--quiet", action="store_true", help="no progress bar")
    cmd.set_defaults(func=run)


def run(args) -> int:
    rules = [r.strip() for r in args.rules.split(",") if r.strip()]
    if not rules:
        raise InvalidInputError("--rules names no rule")
    _check_sizes(args.drafts, args.length, args.steps)
    for rule in rules:
        _check_rule(rule, args.sampling)
    model = load_char_lstm()
    target = LSTMLaw(model, args.target_temperature)
    drafter = make_drafter(args.draft, target, np.random.default_rng([args.seed, 1]),
                           temperature=args.draft_temperature, top_k=args.top_k, quiet=args.quiet)
    start = (model.vocab[META],)
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
