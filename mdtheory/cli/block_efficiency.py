"""``mdtheory block-efficiency``: tokens per target call of multi-draft speculative decoding."""

from __future__ import annotations

import json
import sys

import numpy as np

from .. import _budget
from ..blocks.simulation import (
    INSTANCE_HELP,
    ceiling,
    drafter_equals_target,
    exact_rows,
    model_estimate,
    parse_instance,
    simulate,
    with_models,
)
from ..blocks.trees import tree_samplings
from ..blocks.verifiers import VERIFIERS
from ..errors import InvalidInputError
from ._common import COMMANDS, add_common, add_limits, add_seed_option, drafts_option
from .lm_pairs import add_model_options, models_from_args

#: The drafter's temperature, relative to the target's, when --draft-temperature is not given.
DRAFT_TEMPERATURE_FACTOR = 1.5


#: The token verifier's rules when ``--rules`` is not given (those that run on the drafts).
DEFAULT_RULES = "single,rrs,k-seq,khisti-lp,optimal"

def add_parser(subparsers) -> None:
    """Add ``block-efficiency`` to the CLI's subparsers."""
    cmd = subparsers.add_parser(
        "block-efficiency", help=COMMANDS["block-efficiency"][1],
        description="Simulate n-draft, L-token speculative decoding with a target (the bundled "
                    "pretrained char-LSTM, textgenrnn 2.0.0, or a local Hugging Face checkpoint, "
                    "hf:PATH) and a drafter, and print the block efficiency "
                    "(mean tokens per target call) of each verifier: token by token with each "
                    "selection rule (--rules), block verification of the first draft (Sun et al.), "
                    "multi-path block verification (a selected path, block-verified), greedy "
                    "multi-path block verification (Thomas & Pal: the draft of highest p/q ranks, "
                    "block-verified against its own law), block "
                    "verification over the drafts' prefix trie, traversal verification of a draft "
                    "tree (Weng et al.). Intervals come from independent texts (--replicates) or "
                    "batch means, not from treating the calls of one text as independent. With "
                    "--instance, exact block efficiencies on a small instance instead.",
    )
    drafts_option(cmd, default=None, help="number of drafts n (or --tree)")
    cmd.add_argument("--length", "-L", type=int, help="draft length L (or --tree)")
    cmd.add_argument("--tree", metavar="B1,B2,...",
                     help="a draft tree: B_d children at every node of depth d - 1 (n = B1 B2 ..., "
                          "L = its depth), drawn at every node by --sampling "
                          f"({', '.join(tree_samplings())}: iid, without replacement, or the node's "
                          "top B_d tokens)")
    cmd.add_argument("--verifier", default="token",
                     help=f"comma-separated verifiers among {', '.join(VERIFIERS)} (default token)")
    cmd.add_argument("--rules", default=None,
                     help=f"comma-separated selection rules of the token verifier (default: those of "
                          f"{DEFAULT_RULES} that run on the drafts' sampling)")
    cmd.add_argument("--selection", default="rrs",
                     help="the token-level rule that selects the path of the multipath verifier "
                          "(default rrs; others enumerate the n-tuples: small V only)")
    cmd.add_argument("--steps", type=int, default=200, help="target calls per verifier")
    cmd.add_argument("--replicates", type=int,
                     help="independent texts the steps are split into, the interval taken over their "
                          "means (default min(8, steps)); 1: one text, interval from 10 batch means "
                          "(which miss correlations longer than a batch)")
    cmd.add_argument("--sampling", choices=tree_samplings(), default="iid",
                     help="without n iid drafts: the first tokens without replacement (rrs-wor) or "
                          "the top n tokens, or with --tree every node's children")
    cmd.add_argument("--optimum", action="store_true",
                     help="print beside each verifier the ceiling: the exact optimum with --instance, "
                          "else the mean over the calls' contexts of a proven upper bound on it")
    cmd.add_argument("--best-tree", action="store_true",
                     help="also the deterministic trees of as many nodes as the drafts (K L, or the "
                          "tree's): best-first on the drafter's path probabilities (what engines build) "
                          "and on the target's (the best deterministic tree), each verified target-only, "
                          "the most a lossless verifier keeps on it (papers/blocks.md, section 10)")
    cmd.add_argument("--instance", metavar="NAME",
                     help=f"exact block efficiencies on a small instance: {INSTANCE_HELP}")
    add_model_options(cmd, draft_required=False, draft_temperature_help=(
        f"default: {DRAFT_TEMPERATURE_FACTOR:g} x the target temperature with the tempered drafter "
        "(a drafter equal to the target accepts every single draft; it is said so)"))
    add_seed_option(cmd)
    add_common(cmd, "one JSON object per verifier")
    add_limits(cmd, seconds_help="refuse, before starting, a verifier whose run is estimated longer "
                                 "than S seconds")
    cmd.set_defaults(func=run)


def _names(text: str, what: str) -> list[str]:
    names = [r.strip() for r in str(text).split(",") if r.strip()]
    if not names:
        raise InvalidInputError(f"{what} names nothing")
    return names


def _tree(args):
    from ..blocks import DraftTree

    if args.tree is not None:
        tree = DraftTree.parse(args.tree, args.sampling)
        for value, have, name in ((args.drafts, tree.n, "--drafts"), (args.length, tree.length, "--length")):
            if value is not None and value != have:
                raise InvalidInputError(f"{name} {value} contradicts --tree {args.tree} ({have})")
        return tree
    for value, name in ((args.drafts, "--drafts"), (args.length, "--length")):
        if value is None:
            raise InvalidInputError(f"{name} is required without --tree")
        if isinstance(value, bool) or value < 1:
            raise InvalidInputError(f"{name} must be an integer >= 1, got {value}")
    return DraftTree.chains(args.drafts, args.length, args.sampling)


def _verifiers(args, tree) -> list:
    """The verifiers of ``--verifier``, as their declarations take them: one per ``--rules`` entry
    for a verifier whose rule verifies, ``--selection`` for one whose rule selects the path."""
    from ..blocks import make_verifier
    from ..blocks.verifiers.base import rules_for

    fits = rules_for(tree.sampling)
    given = args.rules if args.rules is not None else ",".join(
        r for r in DEFAULT_RULES.split(",") if r in fits) or ",".join(fits)
    rules = {"verify": lambda: _names(given, "--rules"), "select": lambda: [args.selection],
             None: lambda: [None]}
    out = []
    for name in _names(args.verifier, "--verifier"):
        if name not in VERIFIERS:
            raise InvalidInputError(f"unknown verifier {name!r}; valid choices: {', '.join(VERIFIERS)}")
        out += [make_verifier(name, rule=r, tree=None if tree.is_iid_drafts else tree)
                for r in rules[VERIFIERS[name].takes_rule]()]
    return out


def _print(row: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(row))
        return
    head = (f"{row['rule']:24s} n={row['drafts']} L={row['length']}  "
            f"block efficiency {row['block_efficiency']:.4f}")
    if row.get("exact"):
        line = f"{head}  (exact; validity TV {row['validity_tv']:.1e})"
    else:
        lo, hi = row["ci95"]
        how = {"replicates": f"over {row['replicates']} texts", "batch-means": "batch means of one text",
               "none": "too few calls"}[row["interval"]]
        line = (f"{head}  [{lo:.3f}, {hi:.3f}] ({how})  "
                f"({row['tokens']} tokens / {row['target_calls']} target calls)")
    for key, label in (("optimum", "optimum"), ("optimum_bound", "optimum <="), ("exact_mean", "exact mean")):
        if key in row:
            line += f"  {label} {row[key]:.4f}"
    print(line)


def run(args) -> int:
    if isinstance(args.steps, bool) or args.steps < 1:
        raise InvalidInputError(f"--steps must be an integer >= 1, got {args.steps}")
    tree = _tree(args)
    verifiers = _verifiers(args, tree)
    if args.instance is not None:
        target, draft = parse_instance(args.instance)
        for row in exact_rows(target, draft, verifiers, tree, optimum=args.optimum,
                              max_seconds=args.max_seconds, max_bytes=args.max_bytes):
            _print(row, args.json)
        for row in _best_trees(args, target, draft, tree) if args.best_tree else ():
            _print(row, args.json)
        return 0
    replicates = min(8, args.steps) if args.replicates is None else args.replicates
    if not 1 <= replicates <= args.steps:
        raise InvalidInputError(f"--replicates must be in 1 .. --steps = {args.steps}, got {replicates}")
    if args.draft_temperature is None and args.draft == "tempered":
        args.draft_temperature = DRAFT_TEMPERATURE_FACTOR * args.target_temperature
    target, drafter = models_from_args(args, np.random.default_rng([args.seed, 1]))
    if drafter_equals_target(target, drafter):
        print("note: the drafter equals the target (the same model at the same temperature): every single "
              "draft is accepted", file=sys.stderr if args.json else sys.stdout)
    if target.bos is None:
        raise InvalidInputError(f"{args.target} has no start token (bos) to begin the text after")
    start = (target.bos,)
    for v in verifiers:  # every estimate before any run: the sizes alone, then the models' calls
        _budget.require(v.estimate(target.V, tree, args.steps), args.max_seconds,
                        max_bytes=args.max_bytes)
    models = model_estimate(target, drafter, tree, args.steps, replicates, len(start), args.optimum)
    for v in verifiers:
        _budget.require(with_models(v.estimate(target.V, tree, args.steps, models.seconds), models),
                        args.max_seconds, max_bytes=args.max_bytes)
    top = ceiling(target, drafter, tree, max_seconds=args.max_seconds, max_bytes=args.max_bytes) \
        if args.optimum else (None, None)
    for v in verifiers:
        res = simulate(target, drafter, v, tree, args.steps, np.random.default_rng(args.seed),
                       replicates=replicates, start=start, quiet=args.quiet,
                       ceiling=top[0], ceiling_kind=top[1])
        _print(res.row(), args.json)
    for row in _best_trees(args, target, drafter, tree, start, replicates) if args.best_tree else ():
        _print(row, args.json)
    return 0


def _best_trees(args, target, drafter, tree, start=None, replicates=1) -> list[dict]:
    """The rows of ``--best-tree``: exact on an instance (``start`` None), else simulated texts with
    the mean over their calls' contexts of the exact E|B| there."""
    from ..blocks import block_law_tv
    from ..blocks.deterministic import deterministic_trees, simulate_best_first, target_only_law
    from ..blocks.simulation import EXACT_TOL, BlockResult

    nodes = sum(int(np.prod(tree.branching[:d + 1])) for d in range(tree.length))
    if start is None:
        r = deterministic_trees(target, drafter, nodes, tree.length)
        rows = []
        for who, best in (("draft", r.draft_tree), ("target", r.best_tree)):
            law = target_only_law(target, best)
            efficiency = float(sum(len(b) * w for b, w in law.items()))
            tv = float(block_law_tv(law, target, tree.length))
            rows.append({"rule": f"best-first:{who}:{nodes}", "drafts": tree.n, "length": tree.length,
                         "nodes": nodes, "block_efficiency": efficiency, "exact": True, "validity_tv": tv,
                         "status": "exact", "success": tv <= EXACT_TOL,
                         "message": f"exact: E|B| = {efficiency:.6g}, validity TV {tv:.1e}"})
        return rows
    rows = []
    for who in ("draft", "target"):
        counts, exact = simulate_best_first(target, drafter, nodes, tree.length, args.steps,
                                            np.random.default_rng(args.seed), under=who,
                                            replicates=replicates, start=start)
        row = BlockResult(f"best-first:{who}:{nodes}", tree.n, tree.length, counts, replicates,
                          float(exact.mean()), "exact_mean").row()
        rows.append({**row, "nodes": nodes})
    return rows
