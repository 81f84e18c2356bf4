"""``mdtheory dd``: facets of the acceptance-one cone by exact double description."""

from __future__ import annotations

import argparse
import json

from .. import _budget
from ..claims.dd import DD_MODELS, acceptance_one_cone, compare_with_hall, draft_supports, sparsest
from ._common import COMMANDS, EXIT_OK, add_common, add_limits, drafts_option, vocab_option


def add_parser(sub) -> None:
    """Add ``dd`` to the CLI's subparsers."""
    dd = sub.add_parser(
        "dd", help=COMMANDS["dd"][1],
        description="Project the flows out of the acceptance-one polyhedral cone with pycddlib "
                    "(exact GMP arithmetic) and compare its facets with Hall's family.",
    )
    vocab_option(dd, True, "number of tokens V")
    drafts_option(dd, default=None, required=True)
    dd.add_argument("--sampling", "--model", dest="sampling", choices=DD_MODELS, default="iid",
                    help="the drafts: iid (tuples grouped into multisets) or free ordered tuples "
                         "(any joint law; default iid; --model is an older spelling)")
    dd.add_argument("--method", choices=["generators", "elimination"], default="generators",
                    help="projection route (default generators)")
    add_common(dd, "one JSON object")
    add_limits(dd)
    dd.set_defaults(func=run)


def require_cone(args: argparse.Namespace, V: int, n: int, sampling: str) -> None:
    """Refuse a cone whose Hall comparison is estimated over ``--max-seconds`` or ``--max-bytes``."""
    supports = len(draft_supports(V, n, sampling))  # refuses dimensions over the DD limit first
    _budget.require(_budget.acceptance_cone(V, n, sampling, supports), args.max_seconds,
                    max_bytes=args.max_bytes)


def run(args: argparse.Namespace) -> int:
    require_cone(args, args.vocab, args.drafts, args.sampling)
    cone = acceptance_one_cone(args.vocab, args.drafts, args.sampling, args.method,
                               max_seconds=args.max_seconds)
    cmp = compare_with_hall(cone)
    rows = sorted(zip(cmp["facets"], cone.facets, strict=True),  # Hall's inequalities first
                  key=lambda r: (r[0][1] is None, not (r[0][1] or "").startswith("hall"),
                                 len(r[0][1] or ""), r[0][1] or r[0][0]))
    if args.json:
        print(json.dumps({
            "vocab": cone.V, "drafts": cone.n, "sampling": cone.sampling, "method": cone.method,
            "dimension": len(cone.names), "variables": cone.names,
            "facets": [{"inequality": text, "hall": label,
                        "coefficients": list(sparsest(f, cone.linearities))}
                       for (text, label), f in rows],
            "linearities": [[str(x) for x in row] for row in cone.linearities],
            "hall_equal": cmp["equal"], "missing": cmp["missing"], "extra": cmp["extra"],
            "seconds": round(cone.seconds, 3),
        }))
        return EXIT_OK
    kind = "iid drafts grouped by multiset" if cone.sampling == "iid" else "free ordered draft tuples"
    print(f"acceptance-one cone, {kind}, V = {cone.V} tokens, n = {cone.n} drafts: dimension "
          f"{len(cone.names)}, {len(cone.facets)} facets ({cone.method} route, exact GMP, "
          f"{cone.seconds:.2f} s)")
    print("  equality: sum of p = sum of d")
    for (text, label), _ in rows:
        print(f"  {text:<60s} [{label or 'not in Hall family'}]")
    verdict = "equal to" if cmp["equal"] else "different from"
    print(f"facets are {verdict} the irredundant Hall family p(T) >= sum of d over supports inside T")
    for label in cmp["missing"]:
        print(f"  missing: {label}")
    for text in cmp["extra"]:
        print(f"  extra facet: {text}")
    return EXIT_OK
