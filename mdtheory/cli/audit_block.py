"""``mdtheory audit --block FILE.py:NAME``: audit a block or tree verifier (mdtheory.blocks.audit)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable

from ..audit.statistics import POWER
from ..audit.verifier import load_target
from ..blocks.audit import MAX_CELLS, BlockAuditResult, audit_block
from ..blocks.trees import DraftTree, tree_samplings
from ..errors import InvalidInputError, ProblemTooLargeError
from ..models.registry import SAMPLINGS

#: Exit code when the run is too small to pass (verdict "inconclusive").
EXIT_INCONCLUSIVE = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--block`` options of ``mdtheory audit``."""
    g = parser.add_argument_group(
        "block and tree verifiers",
        "mdtheory audit --block FILE.py:f (--target FILE.py:law --draft FILE.py:law | --instance "
        "toy|random:V:SEED) -n K -L L: f(target, draft, drafts, rng) -> block (1-D int array), "
        "drafts (K, L) drawn by the audit; each block is completed with fresh target tokens and "
        "tested against the target's law on V^(L+1). With --exact, f is law(target, draft, drafts) "
        "-> {block tuple: probability} and every draft array is enumerated. --sampling "
        "without-replacement draws distinct siblings, --sampling top takes each node's top tokens. "
        "Exit code 0 passed (or lossless), 1 lossy or "
        f"structurally invalid blocks, 2 bad input, {EXIT_INCONCLUSIVE} inconclusive (too few "
        "samples to detect --detect-tv).")
    g.add_argument("--block", metavar="FILE.py:NAME", help="audit a block or tree verifier")
    g.add_argument("--target", dest="block_target", metavar="FILE.py:NAME",
                   help="the target's next-token law: law(context tuple) -> (V,)")
    g.add_argument("--draft", dest="block_draft", metavar="FILE.py:NAME",
                   help="the draft's next-token law: law(context tuple) -> (V,)")
    g.add_argument("--instance", metavar="NAME",
                   help="a built-in pair instead: toy (Sun et al.'s V = 2 example) or "
                        "random:V:SEED (seeded context-dependent Dirichlet laws)")
    g.add_argument("--length", "-L", type=int, metavar="L",
                   help="tokens per draft (default with --tree: its depth)")
    g.add_argument("--tree", metavar="B1,...,BL",
                   help="draw a draft tree: children per node at each depth (their product is "
                        f"-n, the default), drawn by --sampling ({', '.join(tree_samplings())})")


def refuse_block_options(args: argparse.Namespace) -> None:
    """A token-level audit given options that only ``--block`` reads: one named error."""
    given = [flag for flag, dest in (("--target", "block_target"), ("--draft", "block_draft"),
                                     ("--instance", "instance"), ("--length", "length"),
                                     ("--tree", "tree")) if getattr(args, dest) is not None]
    if given:
        raise InvalidInputError(f"{', '.join(given)} only apply with --block FILE.py:NAME")


def instance_laws(spec: str) -> tuple[Callable, Callable]:
    """``toy`` or ``random:V:SEED`` -> (target, draft), as ``block-efficiency --instance`` reads them."""
    from ..blocks.simulation import parse_instance

    return parse_instance(spec)


def run(args: argparse.Namespace) -> int:
    """Parse the ``--block`` options, audit, print; returns the exit code."""
    extra = [name for name, given in (("VERIFIER P Q", args.target or args.P or args.Q),
                                      ("--torch", args.torch), ("--normalize", args.normalize))
             if given]
    if extra:
        raise InvalidInputError(f"--block takes no {', '.join(extra)}: the laws come from --target "
                                "and --draft or --instance")
    files = (args.block_target, args.block_draft)
    if (args.instance is None) == (files == (None, None)) or (args.instance is None and None in files):
        raise InvalidInputError("--block needs either --target and --draft, or --instance")
    sampling = args.sampling or "iid"
    n, length = args.drafts, args.length
    if args.tree is not None:
        tree = DraftTree.parse(args.tree, sampling)
    elif n is None or length is None:
        raise InvalidInputError("--block needs --drafts/-n and --length/-L (or --tree)")
    elif sampling == "iid" or (n == 1 and sampling in tree_samplings()
                               and not SAMPLINGS[sampling].deterministic):
        tree = None  # K iid drafts (one random draft: any sampling): built once the audit judged their sizes
    else:
        if length >= 16:  # n >= 2 distinct first tokens need V >= 2: 2^(L+1) cells at least
            raise ProblemTooLargeError(
                f"--sampling {sampling} with n = {n} drafts needs V >= 2 tokens, so the audit would "
                f"test V^(L+1) >= 2^{length + 1} sequences, over {MAX_CELLS:,}; shorten the block")
        tree = DraftTree.chains(n, length, sampling)
    with contextlib.redirect_stdout(sys.stderr):  # user code's prints must not break --json
        f = load_target(args.block)
        if args.instance is not None:
            target, draft = instance_laws(args.instance)
        else:
            target, draft = load_target(args.block_target), load_target(args.block_draft)
        res = audit_block(f, target, draft, n, length, tree=tree, samples=args.samples, seed=args.seed,
                          level=args.level, detect_tv=args.detect_tv, exact=args.exact,
                          max_seconds=args.max_seconds, max_bytes=args.max_bytes)
    res.target = args.block
    if args.json:
        print(json.dumps(res.to_dict()))
    else:
        _print(res, args.instance or f"{args.block_target} / {args.block_draft}")
    return 0 if res.lossless else EXIT_INCONCLUSIVE if res.verdict == "inconclusive" else 1


def _print(r: BlockAuditResult, laws: str) -> None:
    shape = "x".join(map(str, r.branching))
    drafts = f"a draft tree {shape} ({r.sampling})" if r.branching[1:] != [1] * (r.length - 1) \
        else f"n = {r.drafts} {r.sampling} drafts"
    how = "exact enumeration of the draft arrays" if r.mode == "exact" else \
        f"{r.samples:,} samples (seed {r.seed})"
    print(f"block audit of {r.target} on {laws}: V = {r.vocab}, {drafts}, L = {r.length}, {how}")
    L1 = r.length + 1
    if r.mode == "exact":
        print(f"  completed law on V^{L1} ({r.cells:,} sequences): exact TV from the target = "
              f"{r.tv:.6g} -> {r.verdict if r.verdict == 'lossless' else r.verdict.upper()}")
    else:
        say = {"passed": "passed: no evidence of loss", "lossy": "REJECTED: the verifier is lossy",
               "inconclusive": "INCONCLUSIVE: too few samples to pass",
               "invalid": "INVALID blocks emitted"}[r.verdict]
        print(f"  completed law on V^{L1} ({r.cells:,} sequences) vs the target: p-value "
              f"{r.pvalue:.3g} at level {r.level:g} -> {say}")
        print(f"  TV = {r.tv:.4f} (95% upper bound {r.tv_upper:.4f}); this run detects any TV >= "
              f"{r.detectable_tv:.4f} with probability {POWER:g} (asked: {r.detect_tv:g})")
    ci = "" if r.mode == "exact" else \
        f" (95% CI [{r.block_efficiency_ci95[0]:.4f}, {r.block_efficiency_ci95[1]:.4f}])"
    bound = "" if r.alpha_star is None else \
        f"; proven ceiling 1 + sum_m alpha*_m = {1 + r.alpha_star:.4f}"
    print(f"  block efficiency E|B| = {r.block_efficiency:.4f} tokens per target call{ci}{bound}")
    if r.optimum_pvalue is not None and r.optimum_pvalue < r.level:
        print(f"  E|B| exceeds the ceiling (p-value {r.optimum_pvalue:.3g}): impossible for a valid "
              "verifier")
    if r.violations:
        unit = "calls" if r.mode == "sampled" else "probability"
        print(f"  structural violations ({unit}): "
              + "; ".join(f"{k}: {v:.6g}" for k, v in r.violations.items()))
        for ex in r.violation_examples[:3]:
            print(f"    drafts {ex['drafts']} -> {ex['block']} ({ex['reason']})")
    if r.worst_tokens and not r.lossless:
        print("  largest deviations (probability expected -> observed):")
        for w in r.worst_tokens:
            print(f"    {w['sequence']}: {w['expected']:.4f} -> {w['observed']:.4f}")
