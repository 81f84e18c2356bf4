"""Command-line interface: ``mdtheory check-acceptance P Q [--drafts N] ...``.

Exit codes: 0 success (for ``verify``: the claim holds), 1 a ``verify`` claim is refuted, 2 bad input
(one line on stderr naming the culprit, never a traceback) or work refused because its estimated
time or memory is over the limit (``--max-seconds``; the line states the estimate), 3 a solver
failure, 130 interrupted (Ctrl-C).

Long work that was allowed to start (Monte Carlo, exact verification) shows a progress bar on stderr
when stderr is a terminal, unless ``--quiet``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import numpy as np

from . import _budget
from ._validate import as_distribution, as_drafts
from .dd import DD_MODELS, acceptance_one_cone, compare_with_hall, draft_supports, sparsest
from .drafts import make_draft_model
from .errors import (
    InvalidDistributionError,
    InvalidInputError,
    MdtheoryError,
    ProblemTooLargeError,
    SolverError,
)
from .solve import METHODS, _auto, optimal_acceptance

__all__ = ["main", "load_npy"]

EXIT_OK, EXIT_REFUTED, EXIT_BAD_INPUT, EXIT_SOLVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
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


def _row_error(exc: MdtheoryError, i: int, rows: int) -> MdtheoryError:
    return exc if rows == 1 else type(exc)(f"row {i}: {exc}")


def _check_acceptance(args: argparse.Namespace) -> int:
    P, Q = _load_pair(args)
    drafts = args.drafts
    if args.sampling == "independent":  # Q holds one row per draft: a single draft model
        Q = Q[None]
    elif drafts is None:
        drafts = 2
    if len(P) != len(Q) and 1 not in (len(P), len(Q)):
        raise InvalidDistributionError(
            f"p has {len(P)} rows but q has {len(Q)}; give equal batches or one row to broadcast"
        )
    rows = max(len(P), len(Q))
    models, estimates = [], []
    for j in range(len(Q)):  # every draft model and size estimate before any solve starts
        try:
            model = make_draft_model(Q[j], drafts, args.sampling)
        except MdtheoryError as exc:
            raise _row_error(exc, j, rows) from None
        models.append(model)
        estimates.append(_budget.acceptance_route(
            model, _auto(model) if args.method == "auto" else args.method))
    what = estimates[0].what + (f" (and {rows - 1} more rows)" if rows > 1 else "")
    _budget.require(_budget.combine(*(estimates[i % len(Q)] for i in range(rows)), what=what),
                    args.max_seconds)
    for i in range(rows):
        p, model = P[i % len(P)], models[i % len(Q)]
        try:
            res = optimal_acceptance(p, model, method=args.method)
        except MdtheoryError as exc:
            raise _row_error(exc, i, rows) from None
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
                "vocab": int(p.size), "status": res.status, "certificate": res.certificate,
                "certificate_gap": res.certificate_gap,
            }))
            continue
        head = f"row {i}: " if rows > 1 else ""
        print(f"{head}V = {p.size}, n = {res.drafts} drafts, {res.sampling} sampling, "
              f"method {res.method}")
        if res.status == "optimal":
            gap = "" if res.certificate_gap is None else f", gap {abs(res.certificate_gap):.1g}"
            print(f"  optimal acceptance alpha* = {res.value:.12g} (proven: {res.certificate}{gap})")
        else:
            print(f"  optimal acceptance alpha* <= {res.value:.12g} (an upper bound: the cut is checked, "
                  f"optimality is not proved for {res.sampling} drafts at this size by this "
                  "route; --method mnp proves it)")
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


def _require_cone(args: argparse.Namespace, m: int, K: int, model: str) -> None:
    """Refuse a cone whose Hall comparison is estimated over ``--max-seconds``."""
    supports = len(draft_supports(m, K, model))  # refuses dimensions over the DD limit first
    _budget.require(_budget.acceptance_cone(m, K, model, supports), args.max_seconds)


def _dd(args: argparse.Namespace) -> int:
    _require_cone(args, args.alphabet, args.drafts, args.model)
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


#: Defaults of ``mdtheory verify CLAIM``: (alphabet, drafts, instances).
VERIFY_DEFAULTS = {"theorem2": (3, 2, None), "theorem3": (4, None, 20), "hu-wor": (3, 2, 20),
                   "symbolic": (None, None, None)}


def _verify_one(args: argparse.Namespace) -> dict:
    """Check the arguments of one claim, estimate its cost, then run it with a progress bar."""
    from .verify import check_claim, verify_hu_wor, verify_symbolic, verify_theorem2, verify_theorem3

    defaults = VERIFY_DEFAULTS[args.claim]
    for flag, value, default in zip(("--alphabet", "--drafts", "--instances"),
                                    (args.alphabet, args.drafts, args.instances), defaults,
                                    strict=True):
        if value is not None and default is None:
            raise InvalidInputError(f"verify {args.claim} takes no {flag}")
    m, K, instances = (d if v is None else v for v, d in
                       zip((args.alphabet, args.drafts, args.instances), defaults, strict=True))
    if args.claim == "symbolic":
        return verify_symbolic()
    check_claim(args.claim, m, K if K is not None else 2, instances or 0)
    if args.claim == "theorem2":
        _require_cone(args, m, K, args.model)
        return verify_theorem2(m, K, args.model)
    _budget.require(_budget.verify_claim(args.claim, m, K, instances), args.max_seconds)
    total = instances + (args.claim == "hu-wor" and (m, K) == (3, 2))
    with _progress(args, total, f"verify {args.claim}") as bar:
        if args.claim == "theorem3":
            return verify_theorem3(m, instances, args.seed, progress=bar.update)
        return verify_hu_wor(m, K, instances, args.seed, progress=bar.update)


def _verify(args: argparse.Namespace) -> int:
    from .verify import ALL_GRID, verify_all

    if args.claim == "all":
        given = [flag for flag, value in (("--alphabet", args.alphabet), ("--drafts", args.drafts),
                                          ("--instances", args.instances)) if value is not None]
        if given:
            raise InvalidInputError(
                f"verify all runs its fixed grid; {', '.join(given)} applies to one claim "
                "(theorem2, theorem3 or hu-wor)"
            )
        with _progress(args, len(ALL_GRID), "verify all") as bar:
            def progress(done, total, label):
                bar.update(done - bar.n)
                bar.set_postfix_str(label, refresh=True)
            records = verify_all(progress)
    else:
        records = [_verify_one(args)]
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
    refuted = sorted({r["name"] for r in records if not r["verified"]})
    if refuted:
        print(f"mdtheory: refuted: {', '.join(refuted)} (counterexample on stdout)", file=sys.stderr)
    return EXIT_REFUTED if refuted else EXIT_OK


def _progress(args: argparse.Namespace, total: int, desc: str):
    """A tqdm bar on stderr; silent under ``--quiet`` or when stderr is not a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True,
                disable=args.quiet or not sys.stderr.isatty())


def _rule_acceptance(args, rule, rng) -> tuple[float, bool, list | None]:
    """(acceptance, exact, 95% interval or None): closed form, exact enumeration or Monte Carlo."""
    from .rules.base import MAX_ENUMERATION

    closed = rule.closed_form_acceptance()
    if closed is not None:
        return closed, True, None
    count = rule.model.count_tuples()
    if count <= MAX_ENUMERATION:
        _budget.require(_budget.enumeration(count, rule.n, rule.V), args.max_seconds)
        return rule.enumerate()[0], True, None
    _budget.require(_budget.monte_carlo(args.samples, rule.n, rule.V), args.max_seconds)
    with _progress(args, args.samples, f"{rule.name} Monte Carlo") as bar:
        mc = rule.monte_carlo(args.samples, rng, progress=bar.update)
    return mc["acceptance"], False, list(mc["ci95"])


def _compare_selectors(args: argparse.Namespace) -> int:
    from .rules import RULES, make_rule

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
    as_drafts(args.drafts)
    if args.samples < 1:
        raise InvalidInputError(f"--samples must be at least 1, got {args.samples}")
    rng = np.random.default_rng(args.seed)
    for name in names:  # untimed warm-up: numba loads its compiled kernels on a process's first call
        try:
            make_rule(name, np.full(3, 1 / 3), np.full(3, 1 / 3), 2)
        except MdtheoryError:
            pass
    rows, optimum = [], {}
    for name in names:  # each rule is prepared and its work estimated before that work starts
        params = {"s": args.truncation} if name == "khisti-lp" else {}
        try:
            model = make_draft_model(Q[0], args.drafts, RULES[name].sampling)
            _budget.require(_budget.rule_preparation(name, model), args.max_seconds)
            rule = make_rule(name, P[0], Q[0], args.drafts, **params)  # times q's validation too
            acc, exact, ci = _rule_acceptance(args, rule, rng)
        except (InvalidInputError, ProblemTooLargeError) as exc:
            if isinstance(exc, InvalidDistributionError):
                raise
            rows.append({"rule": name, "sampling": RULES[name].sampling, "acceptance": None,
                         "exact": False, "ci95": None, "alpha_star": None, "gap": None,
                         "prepare_ms": None, "error": str(exc)})
            continue
        if rule.sampling not in optimum:  # (alpha*, None) or (None, why it was not computed)
            try:
                _budget.require(_budget.acceptance_route(rule.model, _auto(rule.model)),
                                args.max_seconds)
                optimum[rule.sampling] = (optimal_acceptance(rule.p, rule.model).value, None)
            except ProblemTooLargeError as exc:
                optimum[rule.sampling] = (None, f"alpha* not computed: {exc}")
        alpha, why = optimum[rule.sampling]
        rows.append({"rule": name, "sampling": rule.sampling, "acceptance": acc, "exact": exact,
                     "ci95": ci, "alpha_star": alpha, "gap": None if why else alpha - acc,
                     "prepare_ms": rule.prepare_seconds * 1e3,
                     **({"alpha_star_error": why} if why else {})})
    if all(r.get("error") for r in rows):
        raise InvalidInputError("no selection rule could be prepared within the limits: "
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
        alpha, gap = (f"{r['alpha_star']:10.6f}", f"{r['gap']:10.6f}") if r["alpha_star"] is not None \
            else (f"{'n/a':>10s}", f"{'n/a':>10s}")
        print(f"{r['rule']:<10s} {r['sampling']:<20s} {r['acceptance']:12.6f} {how:<24s} "
              f"{alpha} {gap} {r['prepare_ms']:11.3f}")
    for sampling, (_, why) in optimum.items():
        if why:
            print(f"  {sampling} drafts: {why}")
    return EXIT_OK


def _cross_validate(args: argparse.Namespace) -> int:
    from .torch_bridge import TORCH_RULES, check_device, cross_validate

    check_device(args.device)
    _budget.require(_budget.batched_steps(args.batch, args.samples, args.vocab), args.max_seconds)
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


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _add_limits(parser: argparse.ArgumentParser, quiet: bool = True) -> None:
    parser.add_argument("--max-seconds", type=_seconds, default=_budget.MAX_SECONDS, metavar="S",
                        help="refuse, before starting, work estimated to take longer than S seconds "
                             f"(default {_budget.MAX_SECONDS:g}); the refusal states the estimate")
    if quiet:
        parser.add_argument("--quiet", "-q", action="store_true",
                            help="no progress bar (it is shown only when stderr is a terminal)")


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
    check.add_argument("Q", help="draft distribution, .npy of shape (V,) or (B, V); with "
                       "--sampling independent, shape (n, V), one law per draft")
    check.add_argument("--drafts", "-n", type=int, default=None, metavar="N",
                       help="number of drafts (default 2; independent: the rows of Q)")
    check.add_argument("--sampling", default="iid",
                       choices=["iid", "without-replacement", "conditional-poisson", "independent"],
                       help="draft model (default iid)")
    check.add_argument("--method", default="auto", choices=["auto", *METHODS],
                       help="route to alpha* (default auto: the fastest exact one)")
    check.add_argument("--normalize", action="store_true",
                       help="rescale rows that do not sum to 1 instead of refusing them")
    check.add_argument("--json", action="store_true", help="one JSON object per row")
    _add_limits(check, quiet=False)
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
    cmp.add_argument("--truncation", type=int, default=5, help="khisti-lp truncation s")
    cmp.add_argument("--normalize", action="store_true")
    cmp.add_argument("--json", action="store_true", help="a JSON list, one object per rule")
    _add_limits(cmp)
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
    _add_limits(xv, quiet=False)
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
    _add_limits(dd, quiet=False)
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
    ver.add_argument("--instances", type=int,
                     help="random rational instances (theorem3, hu-wor; default 20)")
    ver.add_argument("--seed", type=int, default=0)
    ver.add_argument("--json", action="store_true", help="one JSON object per check")
    _add_limits(ver)
    ver.set_defaults(func=_verify)
    from .audit import add_audit_parser
    add_audit_parser(sub)
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
    except KeyboardInterrupt:
        print("mdtheory: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
