"""``mdtheory audit VERIFIER P Q``: certify that a verifier is lossless and measure its acceptance
(``--block``: a block or tree verifier, :mod:`mdtheory.cli.audit_block`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from ..audit.statistics import DEFAULT_LEVEL, POWER, TARGET_TV
from ..audit.verifier import (
    EXIT_INCONCLUSIVE,
    PILOT_CALLS,
    AuditResult,
    audit,
    audit_samplings,
    load_target,
)
from ..errors import InvalidInputError
from ..models.registry import sampling_names
from . import audit_block, audit_engine
from ._common import COMMANDS, add_common, add_limits, add_seed_option, drafts_option, load_npy


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``mdtheory audit`` to the CLI's subparsers."""
    sub = subparsers.add_parser(
        "audit", help=COMMANDS["audit"][1],
        description="Run a verifier written by anyone on drafts drawn by the audit and test that its "
                    "output law is p (Pearson chi-square, sparse cells pooled, Bonferroni over "
                    "positions); report its acceptance against alpha*. VERIFIER is FILE.py:NAME or "
                    "MODULE:NAME: f(p, q, drafts, rng) -> token or (token, accepted); a "
                    "SelectionRule subclass, or with --exact law(p, q, drafts) -> (accept, "
                    "residual), is audited exactly by enumerating draft tuples. Exit code 0 if the "
                    "verifier is shown lossless (not rejected, and the run detects any TV of at "
                    "least --detect-tv), 1 if it is found lossy, 5 if the run is inconclusive "
                    "(not rejected, too few samples to detect --detect-tv), 2 for bad input or "
                    "work over --max-seconds. A block or tree verifier: --block; a verifier in an "
                    "engine's chain or tree contract: --engine (below).",
    )
    sub.add_argument("target", metavar="VERIFIER", nargs="?",
                     help="the verifier under audit: FILE.py:NAME or MODULE:NAME")
    sub.add_argument("P", nargs="?", help="target distribution p: .npy of shape (V,) or (B, V)")
    sub.add_argument("Q", nargs="?", help="draft distribution q: .npy of shape (V,) or (B, V)")
    drafts_option(sub, default=None)
    sub.add_argument("--sampling", choices=sampling_names(lambda cls: cls.single_q or cls.tree_node),
                     default=None,
                     help="draft model (default iid, or a SelectionRule's own): for VERIFIER P Q "
                          f"one of {', '.join(audit_samplings())} ({', '.join(audit_samplings(torch=True))} "
                          "with --torch); with --block or --engine tree, a draft tree's children: "
                          f"{', '.join(sampling_names(lambda cls: cls.tree_node))}")
    sub.add_argument("--samples", type=int, default=None,
                     help="steps per position (default: enough to detect TV --detect-tv with "
                          f"probability {POWER})")
    sub.add_argument("--detect-tv", type=float, default=TARGET_TV, metavar="X",
                     help="the smallest TV(output, p) the run must detect with probability "
                          f"{POWER} to call the verifier lossless; sizes the default --samples "
                          f"(default {TARGET_TV})")
    add_seed_option(sub)
    sub.add_argument("--level", type=float, default=DEFAULT_LEVEL,
                     help=f"level of the output-law test (default {DEFAULT_LEVEL})")
    sub.add_argument("--exact", action="store_true",
                     help="VERIFIER is law(p, q, drafts) -> (accept, residual): enumerate draft tuples")
    sub.add_argument("--torch", action="store_true",
                     help="VERIFIER is batched: f(p, q, drafts, generator) -> tokens on tensors")
    sub.add_argument("--device", default="cpu", help="torch device (default cpu)")
    sub.add_argument("--normalize", action="store_true", help="rescale p and q to sum one")
    add_common(sub, "one JSON object")
    add_limits(sub, seconds_help="refuse an audit estimated longer than S seconds (the verifier is "
                                 f"timed on its first {PILOT_CALLS} calls)")
    audit_block.add_arguments(sub)
    audit_engine.add_arguments(sub)
    sub.set_defaults(func=run)
    return sub


def run(args: argparse.Namespace) -> int:
    if args.engine is not None:
        return audit_engine.run(args)
    audit_engine.refuse_engine_options(args)
    if args.block is not None:
        return audit_block.run(args)
    audit_block.refuse_block_options(args)
    if None in (args.target, args.P, args.Q, args.drafts):
        raise InvalidInputError("audit needs VERIFIER P Q and -n (or --block FILE.py:NAME for a "
                                "block or tree verifier)")
    p, q = load_npy(args.P, "p"), load_npy(args.Q, "q")
    with contextlib.redirect_stdout(sys.stderr):  # the target's prints must not break --json
        f = load_target(args.target)
        res = audit(f, p, q, args.drafts, sampling=args.sampling, samples=args.samples,
                    seed=args.seed, level=args.level, exact=args.exact, torch=args.torch,
                    device=args.device, normalize=args.normalize,
                    max_seconds=args.max_seconds, max_bytes=args.max_bytes,
                    detect_tv=args.detect_tv, quiet=args.quiet)
    res.target = args.target
    if args.json:
        print(json.dumps(res.to_dict()))
    else:
        _print(res)
    return {"lossless": 0, "lossy": 1}.get(res.verdict, EXIT_INCONCLUSIVE)


def _print(r: AuditResult) -> None:
    pos = f"{r.positions} positions" if r.positions > 1 else "1 position"
    how = "exact enumeration of draft tuples" if r.mode == "exact" else \
        f"{r.samples:,} samples per position ({r.mode}, seed {r.seed})"
    print(f"audit of {r.target}: V = {r.vocab}, n = {r.drafts} {r.sampling} drafts, {pos}, {how}")
    verdict = {"lossless": "not rejected: no evidence of loss",
               "lossy": "REJECTED: the verifier is lossy"}.get(
        r.verdict, f"INCONCLUSIVE: not rejected, but {r.samples or 0:,} samples cannot detect TV "
                   f"{r.detect_tv:g} (--detect-tv); no verdict")
    if r.mode == "exact":
        print(f"  output law: exact TV(output, p) = {r.tv:.6g} -> "
              + ("lossless" if r.lossless else "LOSSY"))
    else:
        print(f"  output law vs p: p-value {r.pvalue:.3g} at level {r.level:g} -> {verdict}")
        print(f"  TV(output, p) = {r.tv:.4f} (95% upper bound {r.tv_upper:.4f}); this run detects "
              f"any TV >= {r.detectable_tv:.4f} with probability {POWER:g}")
    ci = "" if r.mode == "exact" else \
        f" (95% CI [{r.acceptance_ci95[0]:.4f}, {r.acceptance_ci95[1]:.4f}])"
    gap = round(r.alpha_star - r.acceptance, 12) + 0.0  # no "-0.0000" from round-off
    print(f"  acceptance {r.acceptance:.4f}{ci}; alpha* = {r.alpha_star:.4f} (gap {gap:.4f})")
    if r.optimum_pvalue is not None and r.optimum_pvalue < r.level:
        print(f"  acceptance exceeds alpha* (p-value {r.optimum_pvalue:.3g}): impossible for a "
              "lossless verifier that counts only drafted outputs as accepted")
    if r.worst_tokens and r.verdict == "lossy":
        print("  largest deviations (frequency expected -> observed):")
        for w in r.worst_tokens:
            where = f" at position {w['position']}" if r.positions > 1 else ""
            print(f"    token {w['token']}{where}: {w['expected']:.4f} -> {w['observed']:.4f}")
