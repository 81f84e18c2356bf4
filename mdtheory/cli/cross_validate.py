"""``mdtheory cross-validate``: the batched torch rules against the exact theory."""

from __future__ import annotations

import argparse
import json

from ._common import COMMANDS, EXIT_OK, EXIT_REFUTED, add_common, add_limits, checked_names, drafts_option


def add_parser(sub) -> None:
    """Add ``cross-validate`` to the CLI's subparsers."""
    xv = sub.add_parser(
        "cross-validate", help=COMMANDS["cross-validate"][1],
        description="Run each batched torch selection rule on random LLM-like (p, q) pairs and test "
                    "its acceptance (against the exact value and alpha*) and its output law "
                    "(chi-square against p). Needs the torch extra. Exit code 0 if every rule "
                    "passes, 1 otherwise.",
    )
    xv.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    xv.add_argument("--batch", type=int, default=8, help="positions (default 8)")
    xv.add_argument("--vocab", type=int, default=6, metavar="V",
                    help="number of tokens V (default 6)")
    drafts_option(xv)
    xv.add_argument("--samples", type=int, default=4000, help="steps per position (default 4000)")
    xv.add_argument("--rules", help="comma-separated torch rules (default: all of rrs, k-seq, "
                                    "khisti-lp, optimal)")
    add_common(xv, "one JSON object", with_seed=True)
    add_limits(xv)
    xv.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..audit.crossval import cross_validate
    from ..torch_bridge import TORCH_RULES, check_device

    check_device(args.device)
    names = checked_names(args.rules, TORCH_RULES, "torch rule")
    report = cross_validate(names, device=args.device, batch=args.batch, vocab=args.vocab,
                            drafts=args.drafts, samples=args.samples, seed=args.seed,
                            max_seconds=args.max_seconds, max_bytes=args.max_bytes)
    if args.json:
        print(json.dumps(report))
    else:
        print(f"device {report['device']}: {args.batch} positions x {args.samples} steps, V = "
              f"{args.vocab}, n = {args.drafts}; p-values Bonferroni-adjusted over positions")
        print(f"{'rule':<10s} {'empirical':>10s} {'exact':>10s} {'alpha*':>10s} {'p(acc)':>8s} "
              f"{'p(<=a*)':>8s} {'p(law)':>8s}  verdict")
        for r in report["rules"]:
            print(f"{r['rule']:<10s} {r['acceptance_empirical']:10.5f} {r['acceptance_exact']:10.5f} "
                  f"{r['alpha_star']:10.5f} {r['acceptance_pvalue']:8.3f} {r['optimum_pvalue']:8.3f} "
                  f"{r['law_pvalue']:8.3f}  {'pass' if r['passed'] else 'FAIL'}")
        print("overall: " + ("PASSED" if report["passed"] else "FAILED"))
    return EXIT_OK if report["passed"] else EXIT_REFUTED
