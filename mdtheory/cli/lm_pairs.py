"""``mdtheory lm-pairs``: (target, draft) next-token laws of a language model and a drafter, and the
options that name the two models (shared with ``block-efficiency``)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from .. import _budget
from ..errors import InvalidInputError
from ..language import drafters
from ..language.drafters import CHAR_LSTM, DRAFTERS, lm_pairs, load_drafter, load_model
from ..language.logits import check_sampling
from ._common import COMMANDS, add_common, add_limits, add_seed_option


def _drafter_spec(text: str) -> str:
    """``--draft``: one of the drafters or ``hf:PATH``."""
    if text in DRAFTERS or text.startswith("hf:"):
        return text
    raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(DRAFTERS)}, "
                                     "or hf:PATH)")


def add_model_options(cmd, draft_required: bool, draft_default: str = "tempered",
                      draft_temperature_help: str = "default: the target temperature") -> None:
    """The options that name the target and the drafter."""
    cmd.add_argument("--target", default=CHAR_LSTM, metavar="MODEL",
                     help=f"the target: {CHAR_LSTM} (default; the bundled pretrained char-LSTM, no "
                          "download) or hf:PATH (a local Hugging Face checkpoint directory, or a "
                          "name in the local Hugging Face cache; needs pip install 'mdtheory[hf]')")
    cmd.add_argument("--target-temperature", type=float, default=1.0,
                     help="temperature of the target (default 1.0)")
    cmd.add_argument("--draft", required=draft_required, type=_drafter_spec, metavar="DRAFTER",
                     **({} if draft_required else {"default": draft_default}),
                     help="the drafter: tempered (the target at --draft-temperature), ngram (an "
                          "n-gram distilled from text sampled from the target), quantized (the "
                          "char-LSTM with int8 weights), or hf:PATH (a second checkpoint with the "
                          "target's vocabulary)"
                          + ("" if draft_required else f" (default {draft_default})"))
    cmd.add_argument("--draft-temperature", type=float, help=draft_temperature_help)
    cmd.add_argument("--top-k", type=int, help="top-k of the drafter")
    cmd.add_argument("--order", type=int, default=3, help="n-gram order (ngram drafter; default 3)")
    cmd.add_argument("--device", default="cpu", help="device of hf: models, cpu or cuda (default cpu)")
    cmd.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                     help="arithmetic of the models (default float32; the laws are float64)")


def models_from_args(args, rng: np.random.Generator, before_drafter=None):
    """The (target, drafter) that :func:`add_model_options`' options name; ``before_drafter(target)``,
    if given, runs before the drafter is built (a distilled drafter's work is refused there)."""
    if args.order < 1:
        raise InvalidInputError(f"--order must be >= 1, got {args.order}")
    check_sampling(args.target_temperature)
    target = load_model(args.target, args.target_temperature, device=args.device, dtype=args.dtype)
    if before_drafter is not None:
        before_drafter(target)
    drafter = load_drafter(args.draft, target, rng, temperature=args.draft_temperature,
                           top_k=args.top_k, order=args.order, device=args.device, dtype=args.dtype,
                           quiet=args.quiet, max_seconds=args.max_seconds,
                           max_bytes=args.max_bytes)
    return target, drafter


def add_parser(subparsers) -> None:
    """Add ``lm-pairs`` to the CLI's subparsers."""
    cmd = subparsers.add_parser(
        "lm-pairs", help=COMMANDS["lm-pairs"][1],
        description="Write DIR/P.npy and DIR/Q.npy (positions x V): the next-token laws of a target "
                    "(the bundled pretrained char-LSTM, textgenrnn 2.0.0, V = 465; or a local "
                    "Hugging Face checkpoint, hf:PATH) and of a drafter, at the positions of texts "
                    "sampled from the target. Ready for check-acceptance and compare-selectors.",
    )
    cmd.add_argument("--positions", type=int, required=True, help="number of positions N")
    add_model_options(cmd, draft_required=True)
    add_seed_option(cmd)
    cmd.add_argument("--out", required=True, help="output directory")
    add_common(cmd, "one JSON object naming the files written")
    add_limits(cmd, seconds_help="refuse, before starting, work estimated to take longer than S "
                                 "seconds (the sampling itself shows a progress bar)")
    cmd.set_defaults(func=run)


def run(args) -> int:
    if args.positions < 1:
        raise InvalidInputError(f"--positions must be >= 1, got {args.positions}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out: {out} exists and is not a directory")
    rng = np.random.default_rng(args.seed)

    def refuse_too_large(target) -> None:  # the whole command, before the drafter is built
        length = min(drafters.PAIRS_LENGTH, args.positions)
        streams = -(-args.positions // length)

        def steps(pairs_seconds: float, sampling_seconds: float) -> list:
            est = [_budget.lm_pairs(args.positions, target.V, pairs_seconds)]
            if args.draft == "ngram":
                est.append(_budget.ngram_distillation(
                    args.order, target.V, drafters.NGRAM_STREAMS, drafters.NGRAM_LENGTH,
                    sampling_seconds=sampling_seconds))
            return est

        # the memory from the sizes alone; then the time from the target's pilot steps, the
        # drafter's steps estimated as the target's (the tempered and quantized drafters are the
        # same network; lm_pairs measures the drafter itself before its steps)
        _budget.require(_budget.combine(*steps(0.0, 0.0)), math.inf, max_bytes=args.max_bytes)
        pairs = 2 * target.step_seconds(streams) * length
        sampling = target.step_seconds(drafters.NGRAM_STREAMS) * drafters.NGRAM_LENGTH \
            if args.draft == "ngram" else 0.0
        _budget.require(_budget.combine(*steps(pairs, sampling)), args.max_seconds,
                        max_bytes=args.max_bytes)

    target, drafter = models_from_args(args, rng, before_drafter=refuse_too_large)
    P, Q = lm_pairs(args.positions, target, drafter, rng, quiet=args.quiet,
                    max_seconds=args.max_seconds, max_bytes=args.max_bytes)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "P.npy", P)
    np.save(out / "Q.npy", Q)
    if args.json:
        print(json.dumps({"P": str(out / "P.npy"), "Q": str(out / "Q.npy"), "positions": P.shape[0],
                          "vocab": P.shape[1]}))
    elif not args.quiet:
        print(f"wrote {out / 'P.npy'} and {out / 'Q.npy'}: {P.shape[0]} positions x {P.shape[1]} tokens")
    return 0
