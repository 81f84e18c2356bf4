"""``mdtheory audit --engine chain|tree FILE.py:f``: audit a verifier in an engine's contract
(:mod:`mdtheory.engines.audit`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from ..audit.statistics import POWER
from ..audit.verifier import load_target
from ..errors import InvalidInputError
from .audit_block import EXIT_INCONCLUSIVE, instance_laws

#: The options only ``--engine`` reads, by flag and destination.
_ENGINE_ONLY = (("--deterministic", "deterministic"), ("--batch", "batch"), ("--dtype", "dtype"))


def _registered() -> dict:
    """mdtheory.engines.VERIFIERS (the registry loads neither torch nor the torch bridge)."""
    from ..engines.registry import VERIFIERS

    return VERIFIERS


def _names(contract: str) -> str:
    return ", ".join(n for n, v in _registered().items() if v.contract == contract)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--engine`` options of ``mdtheory audit`` (it shares --target, --draft, --instance,
    --length and --tree with ``--block``)."""
    g = parser.add_argument_group(
        "verifiers in an engine's contract",
        "mdtheory audit --engine chain FILE.py:f -L L | --engine tree FILE.py:f --tree B1,...,BL, with "
        "--instance toy|random:V:SEED or --target FILE.py:law --draft FILE.py:law: f in the chain "
        "contract f(draft_token_ids [B,L], draft_probs [B,L,V] or None, target_probs [B,L+1,V], "
        "generator) -> (output_token_ids [B,L+1] padded with -1, emitted_draft_token_num [B]), or the "
        "tree contract f(candidates, next_token, next_sibling [B,N], target_probs [B,N,V], draft_probs "
        "[B,N,V] or None, generator) -> emitted [B,L+1] (mdtheory.engines.contracts). The audit draws "
        "the drafts, calls f on batches, completes each output with fresh target tokens and tests "
        "the target's law on V^(L+1). VERIFIER may also be one of mdtheory's own (mdtheory.engines."
        f"VERIFIERS): chain: {_names('chain')}; tree: {_names('tree')} (e.g. mdtheory audit --engine "
        "chain block -L 3 --instance toy). Exit code 0 passed, 1 lossy or invalid output, 2 bad input, "
        f"{EXIT_INCONCLUSIVE} inconclusive.")
    g.add_argument("--engine", choices=("chain", "tree"),
                   help="audit VERIFIER (FILE.py:f, MODULE:f or a registered name) in this contract")
    g.add_argument("--deterministic", action="store_true", default=None,
                   help="each node's children are the draft's most likely tokens (distinct); no draft "
                        "probabilities are passed")
    g.add_argument("--batch", type=int, metavar="B", default=None,
                   help="problems per verifier call (default 16384)")
    g.add_argument("--dtype", choices=("float64", "float32"), default=None,
                   help="of the laws passed to the verifier (default float64)")


def refuse_engine_options(args: argparse.Namespace) -> None:
    """An audit without ``--engine`` given options that only ``--engine`` reads: one named error."""
    given = [flag for flag, dest in _ENGINE_ONLY if getattr(args, dest) is not None]
    if given:
        raise InvalidInputError(f"{', '.join(given)} only appl{'ies' if len(given) == 1 else 'y'} with "
                                "--engine chain|tree")


def run(args: argparse.Namespace) -> int:
    """Parse the ``--engine`` options, audit, print; returns the exit code."""
    from ..engines.audit import audit_chain, audit_tree

    extra = [name for name, given in (("P Q", args.P or args.Q), ("--block", args.block),
                                      ("--drafts/-n", args.drafts is not None), ("--exact", args.exact),
                                      ("--torch", args.torch), ("--normalize", args.normalize))
             if given]
    if extra:
        raise InvalidInputError(f"--engine takes no {', '.join(extra)}: the verifier is VERIFIER, the laws "
                                "come from --target and --draft or --instance, the drafts from -L or --tree")
    if args.target is None:
        raise InvalidInputError("--engine needs the verifier: mdtheory audit --engine chain FILE.py:f -L L")
    files = (args.block_target, args.block_draft)
    if (args.instance is None) == (files == (None, None)) or (args.instance is None and None in files):
        raise InvalidInputError("--engine needs either --target and --draft, or --instance")
    options = {"samples": args.samples, "seed": args.seed, "level": args.level, "detect_tv": args.detect_tv,
               "batch": args.batch, "device": args.device, "dtype": args.dtype or "float64",
               "deterministic": bool(args.deterministic), "max_seconds": args.max_seconds,
               "max_bytes": args.max_bytes}
    if args.engine == "chain":
        if args.tree is not None or args.sampling not in (None, "iid"):
            raise InvalidInputError("--engine chain draws one chain of -L drafts: no --tree or --sampling "
                                    "(use --engine tree --tree 1,1,... for sampled or top children)")
        if args.length is None:
            raise InvalidInputError("--engine chain needs --length/-L, the drafted tokens")
    else:
        if args.tree is None:
            raise InvalidInputError("--engine tree needs --tree B1,...,BL, the children per node at each "
                                    "depth")
        try:
            branching = tuple(int(b) for b in args.tree.split(","))
        except ValueError:
            raise InvalidInputError(f"--tree {args.tree!r}: expected integers B1,...,BL") from None
        if args.length is not None and args.length != len(branching):
            raise InvalidInputError(f"--length {args.length} does not match --tree {args.tree} (depth "
                                    f"{len(branching)})")
        if args.deterministic and args.sampling is not None:
            raise InvalidInputError("--deterministic children are the draft's top tokens: no --sampling")
    registered = _registered().get(args.target)
    if registered is not None:
        _check_registered(registered, args, None if args.engine == "chain" else branching)
    elif ":" not in args.target:
        raise InvalidInputError(f"VERIFIER {args.target!r} is neither FILE.py:f, MODULE:f nor a registered "
                                f"{args.engine} verifier ({_names(args.engine)})")
    with contextlib.redirect_stdout(sys.stderr):  # user code's prints must not break --json
        f = registered if registered is not None else load_target(args.target)
        if args.instance is not None:
            target, draft = instance_laws(args.instance)
        else:
            target, draft = load_target(args.block_target), load_target(args.block_draft)
        if args.engine == "chain":
            res = audit_chain(f, target, draft, args.length, **options)
        else:
            res = audit_tree(f, target, draft, branching, sampling=args.sampling or "iid", **options)
    res.target = args.target
    if args.json:
        print(json.dumps(res.to_dict()))
    else:
        _print(res, args.instance or f"{args.block_target} / {args.block_draft}")
    return 0 if res.lossless else EXIT_INCONCLUSIVE if res.verdict == "inconclusive" else 1


def _check_registered(v, args: argparse.Namespace, branching: tuple | None) -> None:
    """A registered verifier audited in its own contract, on the drafts it is lossless for
    (:class:`mdtheory.engines.stops.EngineVerifier`'s ``drafts``)."""
    if v.contract != args.engine:
        raise InvalidInputError(f"verifier {v.name!r} is in the {v.contract} contract: use --engine "
                                f"{v.contract}")
    if v.drafts in ("sampled", "chains") and (args.deterministic or args.sampling not in (None, "iid")):
        raise InvalidInputError(f"verifier {v.name!r} verifies children drawn iid from the draft: no "
                                "--deterministic or --sampling")
    if v.drafts == "chains" and any(b != 1 for b in branching[1:]):
        raise InvalidInputError(f"verifier {v.name!r} verifies n chains of L tokens: --tree n,1,...,1 (n at "
                                f"the root, then one child per node), got --tree {args.tree}")


def _print(r, laws: str) -> None:
    how = "the draft's top tokens" if r.deterministic else f"{r.sampling} from the draft"
    if r.contract == "chain":
        drafts = f"a chain of L = {r.length} drafts ({'drawn from the draft' if how[0] == 'i' else how})"
    else:
        drafts = f"a tree {'x'.join(map(str, r.branching))} of depth L = {r.length} (children: {how})"
    calls = f"{r.calls:,} call" + ("s" if r.calls != 1 else "")
    print(f"{r.contract} audit of {r.target} on {laws}: V = {r.vocab}, {drafts}, {r.samples:,} problems in "
          f"{calls} of up to {r.batch:,} (seed {r.seed}, {r.dtype} on {r.device})")
    L1 = r.length + 1
    say = {"passed": "passed: no evidence of loss", "lossy": "REJECTED: the verifier is lossy",
           "inconclusive": "INCONCLUSIVE: too few samples to pass",
           "invalid": "INVALID output (the contract is broken)"}[r.verdict]
    print(f"  completed law on V^{L1} ({r.cells:,} sequences) vs the target: p-value {r.pvalue:.3g} at "
          f"level {r.level:g} -> {say}")
    print(f"  TV = {r.tv:.4f} (95% upper bound {r.tv_upper:.4f}); this run detects any TV >= "
          f"{r.detectable_tv:.4f} with probability {POWER:g} (asked: {r.detect_tv:g})")
    optimum = f"; optimum for these drafts {r.optimum:.4f}" if r.optimum is not None else \
        f" (no optimum: {r.optimum_note})" if r.optimum_note else ""
    invalid = sum(r.violations.values())
    if invalid < r.samples:
        lo, hi = r.block_efficiency_ci95
        print(f"  block efficiency E|B| = {r.block_efficiency:.4f} tokens per target call (95% CI "
              f"[{lo:.4f}, {hi:.4f}]){optimum}")
    else:
        print(f"  block efficiency: none measured, no output row was valid{optimum}")
    if r.optimum_pvalue is not None and r.optimum_pvalue < r.level:
        print(f"  E|B| exceeds the optimum (p-value {r.optimum_pvalue:.3g}): impossible for a lossless "
              "verifier")
    if r.violations:
        print(f"  invalid rows: {invalid:,} of {r.samples:,} problems: "
              + "; ".join(f"{k}: {v:,}" for k, v in r.violations.items()))
        for ex in r.violation_examples[:3]:
            print(f"    problem {ex['sample']}: drafts {ex['drafts']} -> {ex['output']} ({ex['reason']})")
    elif r.worst_tokens and not r.lossless:
        print("  largest deviations (probability expected -> observed):")
        for w in r.worst_tokens:
            print(f"    {w['sequence']}: {w['expected']:.4f} -> {w['observed']:.4f}")
