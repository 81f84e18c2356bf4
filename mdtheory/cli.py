"""Command-line interface: ``mdtheory check-acceptance P Q [--drafts N] ...``.

Exit codes: 0 success (for ``verify``: the claim holds), 1 a ``verify`` claim is refuted, 2 bad input
(one line on stderr naming the culprit, never a traceback), 3 a solver failure.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import numpy as np

from ._validate import as_distribution
from .dd import DD_MODELS, acceptance_one_cone, compare_with_hall, sparsest
from .drafts import make_draft_model
from .errors import (
    InvalidDistributionError,
    InvalidInputError,
    MdtheoryError,
    ProblemTooLargeError,
    SolverError,
)
from .solve import METHODS, optimal_acceptance

__all__ = ["main", "load_npy"]

EXIT_OK, EXIT_REFUTED, EXIT_BAD_INPUT, EXIT_SOLVER = 0, 1, 2, 3
#: Cut sets longer than this are abbreviated in the human-readable output (never in --json).
SHOW_TOKENS = 20


def load_npy(path: str, name: str) -> np.ndarray:
    """Load a plain numeric ``.npy`` array without pickle.

    Raises
    ------
    InvalidInputError
        A missing or unreadable file, an ``.npz`` archive, pickled or object data, or a file that is
        not in ``.npy`` format.
    """
    try:
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InvalidInputError(f"{name}: no such file: {path}") from None
    except IsADirectoryError:
        raise InvalidInputError(f"{name}: {path} is a directory, not a .npy file") from None
    except PermissionError:
        raise InvalidInputError(f"{name}: cannot read {path}: permission denied") from None
    except (ValueError, EOFError, OSError) as exc:
        raise InvalidInputError(
            f"{name}: {path} is not a plain numeric .npy array ({exc})"
        ) from None
    if not isinstance(arr, np.ndarray):
        arr.close()
        raise InvalidInputError(f"{name}: {path} is an .npz archive; expected a single .npy array")
    return arr


def _load_batch(path: str, name: str, normalize: bool) -> np.ndarray:
    arr = load_npy(path, name)
    if arr.ndim not in (1, 2):
        raise InvalidDistributionError(
            f"{path}: {name} has shape {arr.shape}; expected (V,) or (B, V)"
        )
    try:
        out = as_distribution(arr, name, normalize=normalize, ndim=arr.ndim)
    except InvalidDistributionError as exc:
        raise InvalidDistributionError(f"{path}: {exc}") from None
    return np.atleast_2d(out)


def _load_pair(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """P and Q as (rows, V) arrays with the same number of tokens."""
    P = _load_batch(args.P, "p", args.normalize)
    Q = _load_batch(args.Q, "q", args.normalize)
    if P.shape[1] != Q.shape[1]:
        raise InvalidDistributionError(
            f"p has {P.shape[1]} tokens ({args.P}) but q has {Q.shape[1]} ({args.Q})"
        )
    return P, Q


def _fmt_set(tokens: np.ndarray) -> str:
    tokens = tokens.tolist()
    if len(tokens) <= SHOW_TOKENS:
        return "{" + ", ".join(map(str, tokens)) + "}"
    head = ", ".join(map(str, tokens[:SHOW_TOKENS]))
    return "{" + head + f", ... }} ({len(tokens)} tokens; --json lists all)"


def _check_acceptance(args: argparse.Namespace) -> int:
    P, Q = _load_pair(args)
    if len(P) != len(Q) and 1 not in (len(P), len(Q)):
        raise InvalidDistributionError(
            f"p has {len(P)} rows but q has {len(Q)}; give equal batches or one row to broadcast"
        )
    rows = max(len(P), len(Q))
    for i in range(rows):
        p, q = P[i % len(P)], Q[i % len(Q)]
        try:
            model = make_draft_model(q, args.drafts, args.sampling)
            res = optimal_acceptance(p, model, method=args.method)
        except MdtheoryError as exc:
            if rows == 1:
                raise
            raise type(exc)(f"row {i}: {exc}") from None
        in_cut = np.zeros(p.size, dtype=bool)
        in_cut[res.cut] = True
        p_cut, q_cut = float(p[in_cut].sum()), float(model.containment(in_cut))
        single = float(np.minimum(p, model.first_draft_law()).sum())
        if args.json:
            print(json.dumps({
                "row": i, "alpha_star": res.value, "acceptance_one": res.acceptance_one,
                "witness": None if res.witness is None else res.witness.tolist(),
                "cut": res.cut.tolist(), "margin": q_cut - p_cut, "single_draft": single,
                "drafts": res.drafts, "sampling": res.sampling, "method": res.method,
                "vocab": int(p.size),
            }))
            continue
        head = f"row {i}: " if rows > 1 else ""
        print(f"{head}V = {p.size}, n = {res.drafts} drafts, {res.sampling} sampling, "
              f"method {res.method}")
        print(f"  optimal acceptance alpha* = {res.value:.12g}")
        hall = "p(T) >= Q(T) for every T (Hall's condition"
        hall += "; iid: p(T) >= q(T)^n, Khisti et al. Thm 2 / Remark 2)" if res.sampling == "iid" \
            else ")"
        print(f"  optimal cut set T* = {_fmt_set(res.cut)}")
        if res.acceptance_one:
            print(f"  acceptance one: yes, {hall}")
        else:
            print(f"  acceptance one: no; T* is a witness: p(T*) = {p_cut:.10g} < Q(T*) = "
                  f"{q_cut:.10g} (margin {q_cut - p_cut:.6g})")
        print(f"  single-draft baseline 1 - TV(p, q) = {single:.12g}")
    return EXIT_OK


def _dd(args: argparse.Namespace) -> int:
    cone = acceptance_one_cone(args.alphabet, args.drafts, args.model, args.method)
    cmp = compare_with_hall(cone)
    rows = sorted(zip(cmp["facets"], cone.facets, strict=True),  # Hall's inequalities first
                  key=lambda r: (r[0][1] is None, not (r[0][1] or "").startswith("hall"),
                                 len(r[0][1] or ""), r[0][1] or r[0][0]))
    if args.json:
        print(json.dumps({
            "alphabet": cone.m, "drafts": cone.K, "model": cone.model, "method": cone.method,
            "dimension": len(cone.names), "variables": cone.names,
            "facets": [{"inequality": text, "hall": label,
                        "coefficients": list(sparsest(f, cone.linearities))}
                       for (text, label), f in rows],
            "linearities": [[str(x) for x in row] for row in cone.linearities],
            "hall_equal": cmp["equal"], "missing": cmp["missing"], "extra": cmp["extra"],
            "seconds": round(cone.seconds, 3),
        }))
        return EXIT_OK
    kind = "iid drafts grouped by multiset" if cone.model == "iid" else "free ordered draft tuples"
    print(f"acceptance-one cone, {kind}, m = {cone.m} tokens, K = {cone.K} drafts: dimension "
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


def _verify(args: argparse.Namespace) -> int:
    from .verify import verify_all, verify_hu_wor, verify_symbolic, verify_theorem2, verify_theorem3

    if args.claim == "all":
        def progress(done, total, label):
            bar = "#" * (20 * done // total)
            print(f"\r[{bar:<20s}] {done}/{total} {label:<50s}", end="", file=sys.stderr,
                  flush=True)
        records = verify_all(progress)
        print(file=sys.stderr)
    else:
        m, K = args.alphabet, args.drafts
        records = [{
            "theorem2": lambda: verify_theorem2(m or 3, K or 2, args.model),
            "theorem3": lambda: verify_theorem3(m or 4, args.instances, args.seed),
            "hu-wor": lambda: verify_hu_wor(m or 3, K or 2, args.instances, args.seed),
            "symbolic": verify_symbolic,
        }[args.claim]()]
    if args.json:
        for rec in records:
            print(json.dumps(rec))
    elif args.claim == "all":
        print(f"{'claim':<10s} {'case':<34s} {'verdict':<9s} {'seconds':>8s}")
        for rec in records:
            case = rec["cases"][0] if rec["name"] == "theorem2" else \
                {k: rec[k] for k in ("alphabet", "drafts", "seed") if k in rec}
            case = ", ".join(f"{k}={v}" for k, v in case.items()) if isinstance(case, dict) else ""
            verdict = "verified" if rec["verified"] else "REFUTED"
            print(f"{rec['name']:<10s} {case:<34s} {verdict:<9s} {rec['seconds']:8.2f}")
        refuted = sorted({r["name"] for r in records if not r["verified"]})
        print(f"{sum(r['verified'] for r in records)}/{len(records)} checks verified"
              + (f"; refuted: {', '.join(refuted)} (run 'mdtheory verify NAME' for the "
                 "counterexample)" if refuted else ""))
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
    return EXIT_OK if all(r["verified"] for r in records) else EXIT_REFUTED


def _compare_selectors(args: argparse.Namespace) -> int:
    from .rules import RULES, make_rule
    from .rules.base import MAX_ENUMERATION

    P, Q = _load_pair(args)
    if len(P) != 1 or len(Q) != 1:
        raise InvalidDistributionError(
            f"compare-selectors takes one (V,) pair; got {len(P)} row(s) of p and {len(Q)} of q"
        )
    names = list(RULES) if args.rules is None else [r.strip() for r in args.rules.split(",") if r]
    for name in names:
        if name not in RULES:
            raise InvalidInputError(
                f"unknown selection rule {name!r}; valid choices: {', '.join(RULES)}"
            )
    if args.samples < 1:
        raise InvalidInputError(f"--samples must be at least 1, got {args.samples}")
    rng = np.random.default_rng(args.seed)
    for name in names:  # untimed warm-up: numba loads its compiled kernels on a process's first call
        try:
            make_rule(name, np.full(3, 1 / 3), np.full(3, 1 / 3), 2)
        except MdtheoryError:
            pass
    rows, optimum = [], {}
    for name in names:
        params = {"s": args.truncation} if name == "khisti-lp" else {}
        try:
            rule = make_rule(name, P[0], Q[0], args.drafts, **params)
        except (InvalidInputError, ProblemTooLargeError) as exc:
            if isinstance(exc, InvalidDistributionError):
                raise
            rows.append({"rule": name, "sampling": RULES[name].sampling, "acceptance": None,
                         "exact": False, "ci95": None, "alpha_star": None, "gap": None,
                         "prepare_ms": None, "error": str(exc)})
            continue
        closed = rule.closed_form_acceptance()
        if closed is not None:
            acc, exact, ci = closed, True, None
        elif rule.model.count_tuples() <= MAX_ENUMERATION:
            acc, exact, ci = rule.enumerate()[0], True, None
        else:
            mc = rule.monte_carlo(args.samples, rng)
            acc, exact, ci = mc["acceptance"], False, list(mc["ci95"])
        if rule.sampling not in optimum:
            optimum[rule.sampling] = optimal_acceptance(rule.p, rule.model).value
        alpha = optimum[rule.sampling]
        rows.append({"rule": name, "sampling": rule.sampling, "acceptance": acc, "exact": exact,
                     "ci95": ci, "alpha_star": alpha, "gap": alpha - acc,
                     "prepare_ms": rule.prepare_seconds * 1e3})
    if all(r.get("error") for r in rows):
        raise InvalidInputError("no selection rule could be prepared: "
                                + "; ".join(f"{r['rule']}: {r['error']}" for r in rows))
    if args.json:
        print(json.dumps(rows))
        return EXIT_OK
    print(f"V = {P.shape[1]}, n = {args.drafts} drafts; alpha* is the optimum for each rule's "
          "draft model")
    print(f"{'rule':<10s} {'drafts':<20s} {'acceptance':>12s} {'':<24s} {'alpha*':>10s} "
          f"{'gap':>10s} {'prepare ms':>11s}")
    for r in rows:
        if r.get("error"):
            print(f"{r['rule']:<10s} {r['sampling']:<20s} not run: {r['error']}")
            continue
        how = "exact" if r["exact"] else f"MC, 95% [{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}]"
        print(f"{r['rule']:<10s} {r['sampling']:<20s} {r['acceptance']:12.6f} {how:<24s} "
              f"{r['alpha_star']:10.6f} {r['gap']:10.6f} {r['prepare_ms']:11.3f}")
    return EXIT_OK


def _cross_validate(args: argparse.Namespace) -> int:
    from .torch_bridge import TORCH_RULES, cross_validate

    names = list(TORCH_RULES) if args.rules is None else [r for r in args.rules.split(",") if r]
    for name in names:
        if name not in TORCH_RULES:
            raise InvalidInputError(
                f"no torch rule {name!r}; valid choices: {', '.join(TORCH_RULES)}"
            )
    report = cross_validate(names, device=args.device, batch=args.batch, vocab=args.vocab,
                            drafts=args.drafts, samples=args.samples, seed=args.seed)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mdtheory", description="Exact theory of multi-draft speculative sampling."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = sub.add_parser(
        "check-acceptance",
        help="optimal acceptance alpha*, acceptance-one test and optimal cut set",
        description="Optimal acceptance alpha* = 1 + min_T [p(T) - Q(T)] of n-draft speculative "
                    "sampling, whether it is exactly one, a witness set, and the optimal cut set.",
    )
    check.add_argument("P", help="target distribution, .npy of shape (V,) or (B, V)")
    check.add_argument("Q", help="draft distribution, .npy of shape (V,) or (B, V)")
    check.add_argument("--drafts", "-n", type=int, default=2, metavar="N",
                       help="number of drafts (default 2)")
    check.add_argument("--sampling", default="iid",
                       choices=["iid", "without-replacement", "conditional-poisson"],
                       help="draft model (default iid)")
    check.add_argument("--method", default="auto", choices=["auto", *METHODS],
                       help="route to alpha* (default auto: the fastest exact one)")
    check.add_argument("--normalize", action="store_true",
                       help="rescale rows that do not sum to 1 instead of refusing them")
    check.add_argument("--json", action="store_true", help="one JSON object per row")
    check.set_defaults(func=_check_acceptance)

    cmp = sub.add_parser(
        "compare-selectors", help="acceptance of practical selection rules against alpha*",
        description="Exact (or Monte Carlo) acceptance of each selection rule, the optimum alpha* "
                    "of its draft model, the gap, and the preparation time per position.",
    )
    cmp.add_argument("P", help="target distribution, .npy of shape (V,)")
    cmp.add_argument("Q", help="draft distribution, .npy of shape (V,)")
    cmp.add_argument("--drafts", "-n", type=int, default=2, metavar="N")
    cmp.add_argument("--rules", help="comma-separated rule names (default: all)")
    cmp.add_argument("--samples", type=int, default=20_000,
                     help="Monte Carlo samples where exact enumeration is too costly")
    cmp.add_argument("--seed", type=int, default=0)
    cmp.add_argument("--truncation", type=int, default=None,
                     help="khisti-lp truncation s (default: the union of p's and q's top-0.95 nuclei)")
    cmp.add_argument("--normalize", action="store_true")
    cmp.add_argument("--json", action="store_true", help="a JSON list, one object per rule")
    cmp.set_defaults(func=_compare_selectors)

    xv = sub.add_parser(
        "cross-validate", help="run the torch rules batched and test them against the exact theory",
        description="Run each batched torch selection rule on random LLM-like (p, q) pairs and test "
                    "its acceptance (against the exact value and alpha*) and its output law "
                    "(chi-square against p). Needs the torch extra. Exit code 0 if every rule "
                    "passes, 1 otherwise.",
    )
    xv.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    xv.add_argument("--batch", type=int, default=8, help="positions (default 8)")
    xv.add_argument("--vocab", type=int, default=6, help="alphabet size V (default 6)")
    xv.add_argument("--drafts", "-n", type=int, default=2, metavar="N")
    xv.add_argument("--samples", type=int, default=4000, help="steps per position (default 4000)")
    xv.add_argument("--rules", help="comma-separated torch rules (default: all)")
    xv.add_argument("--seed", type=int, default=0)
    xv.add_argument("--json", action="store_true", help="one JSON object")
    xv.set_defaults(func=_cross_validate)

    dd = sub.add_parser(
        "dd", help="facets of the acceptance-one cone by exact double description",
        description="Project the flows out of the acceptance-one polyhedral cone with pycddlib "
                    "(exact GMP arithmetic) and compare its facets with Hall's family.",
    )
    dd.add_argument("--alphabet", "-m", type=int, required=True, help="alphabet size m")
    dd.add_argument("--drafts", "-K", type=int, required=True, help="number of drafts K")
    dd.add_argument("--model", choices=DD_MODELS, default="iid",
                    help="iid (tuples grouped into multisets) or free ordered tuples")
    dd.add_argument("--method", choices=["generators", "elimination"], default="generators",
                    help="projection route (default generators)")
    dd.add_argument("--json", action="store_true", help="one JSON object")
    dd.set_defaults(func=_dd)

    ver = sub.add_parser(
        "verify", help="verify a published claim exactly",
        description="Verify a published claim in exact arithmetic. Exit code 0 if it holds, 1 if "
                    "it is refuted (the counterexample is printed).",
    )
    ver.add_argument("claim", choices=["theorem2", "theorem3", "hu-wor", "symbolic", "all"])
    ver.add_argument("--alphabet", "-m", type=int, help="alphabet size (theorem2, theorem3, hu-wor)")
    ver.add_argument("--drafts", "-K", type=int, help="number of drafts (theorem2, hu-wor)")
    ver.add_argument("--model", choices=DD_MODELS, default="iid", help="theorem2's cone model")
    ver.add_argument("--instances", type=int, default=20, help="random rational instances")
    ver.add_argument("--seed", type=int, default=0)
    ver.add_argument("--json", action="store_true", help="one JSON object per check")
    ver.set_defaults(func=_verify)
    from .drafters import add_lm_pairs_parser  # the real-LM commands (mdtheory.lm)

    add_lm_pairs_parser(sub)
    from .blockeff import add_block_efficiency_parser

    add_block_efficiency_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed its usage error
        return int(exc.code or 0)
    try:
        return args.func(args)
    except SolverError as exc:
        print(f"mdtheory: solver error: {exc}", file=sys.stderr)
        return EXIT_SOLVER
    except MdtheoryError as exc:
        print(f"mdtheory: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
