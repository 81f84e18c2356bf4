"""The table of papers/engines.md: each engine-style example verifier audited in its contract
(sampled, seed 0, default sample size) and its exact law (the example's ``law`` over every draw of
the drafts: exact TV from the target and exact E|B|), beside the optimum for the same drafts.

    .venv/bin/python benchmarks/engine_findings.py            # the table of papers/engines.md
    .venv/bin/python benchmarks/engine_findings.py --commands --json out.json

Each cell: the sampled audit's verdict at seed 0, then exact TV from the target / exact E|B| / the
optimum for the same drafts.

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
from mdtheory.blocks.simulation import parse_instance

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


LABELS = {"sampled": "sampled", "without-replacement": "w/o repl.", "top": "top"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--commands", action="store_true", help="print each cell's commands after the table")
    parser.add_argument("--instances", default=",".join(INSTANCES))
    args = parser.parse_args()
    instances = args.instances.split(",")
    rows, lines = [], []
    print("| verifier | drafts | " + " | ".join(instances) + " |")
    print("|---|---|" + "---|" * len(instances))
    for name, contract, shape, drafts in ROWS:
        cells = []
        for instance in instances:
            r = row(name, contract, shape, drafts, instance)
            rows.append(r)
            verdict = r["verdict"] if r["verdict"] == "passed" else f"**{r['verdict']}**"
            tv = "0" if r["exact_tv"] < 1e-9 else f"{r['exact_tv']:.6f}"
            cells.append(f"{verdict}; {tv} / {r['exact_block_efficiency']:.4f} / {r['optimum']:.4f}")
            lines += commands(name, contract, shape, drafts, instance)
        label = name + (f", L = {shape}" if contract == "chain" and shape != 2 else "")
        print(f"| {label} | {LABELS[drafts]} | " + " | ".join(cells) + " |", flush=True)
    if args.commands:
        print("\n" + "\n".join(f"    {c}" for c in lines))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=float))
    lossy = [r for r in rows if r["verdict"] != "passed"]
    passed = [r for r in rows if r["verdict"] == "passed"]
    print(f"\n{len(rows)} cells, {len(lossy)} lossy; sampled audits {sum(r['seconds'] for r in rows):.0f} s; "
          f"largest exact TV of a passed cell {max(r['exact_tv'] for r in passed):.2g}; "
          f"largest |sampled - exact TV| of a lossy cell "
          f"{max(abs(r['tv_sampled'] - r['exact_tv']) for r in lossy):.2g}; "
          f"p-values of the passed cells {min(r['pvalue'] for r in passed):.2g} to "
          f"{max(r['pvalue'] for r in passed):.2g}, of the lossy ones at most "
          f"{max(r['pvalue'] for r in lossy):.2g}; lossy cells with E|B| above the optimum "
          f"{sum(r['exact_block_efficiency'] > r['optimum'] + 1e-9 for r in lossy)}")


if __name__ == "__main__":
    main()
