"""``mdtheory verify CLAIM``: a published claim checked in exact arithmetic."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from .. import _budget
from ..claims.dd import DD_MODELS
from ..errors import InvalidInputError
from ._common import (
    COMMANDS,
    EXIT_OK,
    EXIT_REFUTED,
    add_common,
    add_limits,
    drafts_option,
    progress,
    vocab_option,
)
from .dd import require_cone

#: Defaults of ``mdtheory verify CLAIM``: (V, n, instances).
VERIFY_DEFAULTS = {"theorem2": (3, 2, None), "theorem3": (4, None, 20), "hu-wor": (3, 2, 20),
                   "symbolic": (None, None, None)}


def _claims_epilog() -> str:
    from ..claims.verify import CLAIMS, RECORDED

    return "claims:\n" + "\n".join(
        textwrap.fill(f"{name:<9s} {text} (papers/ records it as "
                      f"{'holding' if RECORDED[name] else 'refuted'})", 96, initial_indent="  ",
                      subsequent_indent=" " * 12) for name, text in CLAIMS.items()) + (
        "\n  all       every claim above on a fixed grid of sizes\n\n" + textwrap.fill(
            "exit code: verify CLAIM: 0 the claim holds, 1 it is refuted (the counterexample is "
            "printed); verify all: 0 every verdict is the one papers/ records (refutations "
            "included), 1 a verdict differs from the record", 96))


def add_parser(sub) -> None:
    """Add ``verify`` to the CLI's subparsers."""
    ver = sub.add_parser(
        "verify", help=COMMANDS["verify"][1],
        description="Verify a published claim in exact arithmetic.",
        epilog=_claims_epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ver.add_argument("claim", choices=["theorem2", "theorem3", "hu-wor", "symbolic", "all"],
                     help="the claim to check (listed below)")
    vocab_option(ver, False, "number of tokens V (theorem2, theorem3, hu-wor)")
    drafts_option(ver, default=None, help="number of drafts n (theorem2, hu-wor)")
    ver.add_argument("--sampling", "--model", dest="sampling", choices=DD_MODELS, default="iid",
                     help="theorem2's drafts: iid, or free ordered tuples (default iid; --model is "
                          "an older spelling)")
    ver.add_argument("--instances", type=int,
                     help="random rational instances (theorem3, hu-wor; default 20)")
    add_common(ver, "one JSON object per check", with_seed=True)
    add_limits(ver)
    ver.set_defaults(func=run)


def _verify_one(args: argparse.Namespace) -> dict:
    """Check the arguments of one claim, estimate its cost, then run it with a progress bar."""
    from ..claims.verify import check_claim, verify_hu_wor, verify_symbolic, verify_theorem2, verify_theorem3

    defaults = VERIFY_DEFAULTS[args.claim]
    for flag, value, default in zip(("--vocab", "-n", "--instances"),
                                    (args.vocab, args.drafts, args.instances), defaults,
                                    strict=True):
        if value is not None and default is None:
            raise InvalidInputError(f"verify {args.claim} takes no {flag}")
    V, n, instances = (d if v is None else v for v, d in
                       zip((args.vocab, args.drafts, args.instances), defaults, strict=True))
    if args.claim == "symbolic":
        return verify_symbolic()
    check_claim(args.claim, V, n if n is not None else 2, instances or 0)
    if args.claim == "theorem2":
        require_cone(args, V, n, args.sampling)
        return verify_theorem2(V, n, args.sampling)
    _budget.require(_budget.verify_claim(args.claim, V, n, instances), args.max_seconds,
                    max_bytes=args.max_bytes)
    total = instances + (args.claim == "hu-wor" and (V, n) == (3, 2))
    with progress(args, total, f"verify {args.claim}") as bar:
        if args.claim == "theorem3":
            return verify_theorem3(V, instances, args.seed, progress=bar.update)
        return verify_hu_wor(V, n, instances, args.seed, progress=bar.update)


def run(args: argparse.Namespace) -> int:
    from ..claims.verify import ALL_GRID, RECORDED, verify_all

    if args.claim == "all":
        given = [flag for flag, value in (("--vocab", args.vocab), ("-n", args.drafts),
                                          ("--instances", args.instances)) if value is not None]
        if given:
            raise InvalidInputError(
                f"verify all runs its fixed grid; {', '.join(given)} applies to one claim "
                "(theorem2, theorem3 or hu-wor)"
            )
        with progress(args, len(ALL_GRID), "verify all") as bar:
            def update(done, total, label):
                bar.update(done - bar.n)
                bar.set_postfix_str(label, refresh=True)
            records = verify_all(update)
    else:
        records = [_verify_one(args)]
    changed = sorted({r["name"] for r in records if r["verified"] != RECORDED[r["name"]]})
    if args.json:
        for rec in records:
            print(json.dumps({**rec, "recorded": RECORDED[rec["name"]]}))
    elif args.claim == "all":
        print(f"{'claim':<10s} {'case':<34s} {'verdict':<9s} {'seconds':>8s}")
        for rec in records:
            case = rec["cases"][0] if rec["name"] == "theorem2" else \
                {k: rec[k] for k in ("vocab", "drafts", "seed") if k in rec}
            case = ", ".join(f"{k}={v}" for k, v in case.items()) if isinstance(case, dict) else ""
            verdict = "verified" if rec["verified"] else "REFUTED"
            note = "as recorded" if rec["verified"] == RECORDED[rec["name"]] else "CHANGED"
            print(f"{rec['name']:<10s} {case:<34s} {verdict:<9s} {rec['seconds']:8.2f}  {note}")
        refuted = sorted({r["name"] for r in records if not r["verified"]})
        print(f"{sum(r['verified'] for r in records)}/{len(records)} checks verified"
              + (f"; refuted: {', '.join(refuted)} (run 'mdtheory verify NAME' for the "
                 "counterexample)" if refuted else ""))
        print("every verdict is the one recorded in papers/" if not changed else
              f"verdicts differ from papers/ for: {', '.join(changed)}")
    else:
        rec = records[0]
        print(("VERIFIED" if rec["verified"] else "REFUTED") + f": {rec['claim']}")
        print(f"  cases checked: {len(rec['cases'])}, {rec['seconds']:.2f} s")
        if rec["counterexample"] is not None:
            print(f"  counterexample: {json.dumps(rec['counterexample'])}")
        if "matches_conditional_poisson" in rec:
            print("  the ratio is exact for conditional Poisson sampling: "
                  + ("yes, on every instance and set" if rec["matches_conditional_poisson"]
                     else "no"))
    if args.claim == "all":  # gates CI: 0 when every verdict is the recorded one
        if changed:
            print(f"mdtheory: verdicts differ from papers/ for: {', '.join(changed)}", file=sys.stderr)
        return EXIT_REFUTED if changed else EXIT_OK
    if not records[0]["verified"]:
        recorded = "as papers/ records" if not RECORDED[args.claim] else "papers/ records it as holding"
        print(f"mdtheory: refuted: {args.claim} ({recorded}; counterexample on stdout)",
              file=sys.stderr)
        return EXIT_REFUTED
    return EXIT_OK
