"""The table of papers/engines.md: each engine-style example verifier audited in its contract
(sampled, seed 0, default sample size) and its exact law (the example's ``law`` over every draw of
the drafts: exact TV from the target and exact E|B|), beside the optimum for the same drafts.

    .venv/bin/python benchmarks/engine_findings.py            # the markdown table
    .venv/bin/python benchmarks/engine_findings.py --json out.json

The sampled columns are also the output of ``mdtheory audit --engine``, the exact ones (but for top
trees) of ``mdtheory audit --block FILE.py:law --exact``: --commands prints them under each row.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import mdtheory as md
from mdtheory.audit.verifier import load_target
from mdtheory.blocks import DraftTree
from mdtheory.language.blockeff import parse_instance

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = "examples/verifiers/engines"

#: (example, contract, shape, drafts) with drafts "sampled" (iid), "without-replacement" or "top".
ROWS = [
    ("chain_rejection", "chain", 2, "sampled"),
    ("chain_block_verification", "chain", 2, "sampled"),
    ("chain_block_verification", "chain", 2, "top"),
    ("chain_deterministic_drafts", "chain", 2, "top"),
    ("chain_deterministic_drafts", "chain", 2, "sampled"),
    ("chain_block_ignores_draft_probs", "chain", 2, "sampled"),
    ("chain_block_ignores_draft_probs", "chain", 2, "top"),
    ("chain_ensemble", "chain", 1, "sampled"),
    ("chain_ensemble", "chain", 2, "sampled"),
    ("tree_target_only", "tree", (2, 2), "top"),
    ("tree_target_only", "tree", (2, 2), "sampled"),
    ("tree_target_only", "tree", (2, 2), "without-replacement"),
    ("tree_target_only_threshold", "tree", (2, 2), "top"),
    ("tree_target_only_threshold", "tree", (2, 2), "sampled"),
    ("tree_siblings_unchanged_parent", "tree", (2, 2), "sampled"),
    ("tree_siblings_unchanged_parent", "tree", (2, 2), "without-replacement"),
]
INSTANCES = ("toy", "random:3:1", "random:4:2")


def _tree(contract, shape, drafts) -> DraftTree:
    branching = (1,) * shape if contract == "chain" else shape
    return DraftTree(branching, {"sampled": "iid"}.get(drafts, drafts))


def commands(name, contract, shape, drafts, instance) -> list[str]:
    """The commands that print the row's numbers: the sampled audit, and the exact one where the
    command line offers it (``audit --block`` draws no top trees: those rows' exact numbers are this
    script's)."""
    file = f"{EXAMPLES}/{name}.py"
    if contract == "chain":
        sampled = f"mdtheory audit --engine chain {file}:verify -L {shape}"
        exact = f"mdtheory audit --block {file}:law --exact -n 1 -L {shape}"
    else:
        tree = ",".join(map(str, shape))
        sampled = f"mdtheory audit --engine tree {file}:verify --tree {tree}"
        exact = f"mdtheory audit --block {file}:law --exact --tree {tree}"
    if drafts == "top":
        return [f"{sampled} --deterministic --instance {instance}"]
    if drafts == "without-replacement":
        sampled += " --sampling without-replacement"
        exact += " --sampling without-replacement"
    return [f"{sampled} --instance {instance}", f"{exact} --instance {instance}"]


def point_mass(draft):
    """The draft law of deterministic (top) drafts: a point mass at the draft's most likely token
    (ties to the lower index). A chain verifier given no draft probabilities reads q one-hot at the
    drafted token, which is this law's row: so an example's ``law`` with this draft is the exact law
    of its ``verify`` on top chains."""
    def law(ctx):
        row = np.zeros(len(draft(ctx)))
        row[int(np.argmax(draft(ctx)))] = 1.0
        return row
    return law


def row(name, contract, shape, drafts, instance) -> dict:
    target, draft = parse_instance(instance)
    tree = _tree(contract, shape, drafts)
    f = load_target(f"{ROOT / EXAMPLES / name}.py:verify")
    law = load_target(f"{ROOT / EXAMPLES / name}.py:law")
    t0 = time.perf_counter()
    sampled = md.audit_chain(f, target, draft, shape, deterministic=drafts == "top") if contract == "chain" \
        else md.audit_tree(f, target, draft, tree)
    seconds = time.perf_counter() - t0
    as_read = point_mass(draft) if drafts == "top" and contract == "chain" else draft
    exact = md.audit_block(law, target, as_read, exact=True, tree=tree)
    return {"example": name, "contract": contract, "shape": shape, "drafts": drafts, "instance": instance,
            "verdict": sampled.verdict, "pvalue": sampled.pvalue, "tv_sampled": sampled.tv,
            "tv_upper": sampled.tv_upper, "samples": sampled.samples, "seconds": seconds,
            "block_efficiency": sampled.block_efficiency, "exact_tv": exact.tv,
            "exact_block_efficiency": float(exact.block_efficiency), "optimum": sampled.optimum}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--commands", action="store_true", help="print each row's two commands")
    parser.add_argument("--instances", default=",".join(INSTANCES))
    args = parser.parse_args()
    rows = []
    print("| verifier | drafts | instance | audit (seed 0) | sampled TV | exact TV | exact E|B| | optimum |")
    print("|---|---|---|---|---|---|---|---|")
    for name, contract, shape, drafts in ROWS:
        for instance in args.instances.split(","):
            r = row(name, contract, shape, drafts, instance)
            rows.append(r)
            what = f"L = {shape}" if contract == "chain" else f"tree {'x'.join(map(str, shape))}"
            print(f"| {name} | {what}, {drafts} | {instance} | {r['verdict']} (p = {r['pvalue']:.2g}) | "
                  f"{r['tv_sampled']:.4f} | {r['exact_tv']:.6f} | {r['exact_block_efficiency']:.4f} | "
                  f"{r['optimum']:.4f} |", flush=True)
            if args.commands:
                for c in commands(name, contract, shape, drafts, instance):
                    print(f"    {c}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
    print(f"\n{len(rows)} rows; sampled audits took {np.sum([r['seconds'] for r in rows]):.1f} s in all")


if __name__ == "__main__":
    main()
