"""``mdtheory compare-selectors P Q``: practical selection rules against alpha*, or alpha* of each
draft model (``--sampling``)."""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import re
import textwrap
import time

import numpy as np

from .. import _budget
from .._jit import use_compiled
from .._validate import as_drafts
from ..errors import (
    InvalidDistributionError,
    InvalidInputError,
    MdtheoryError,
    OptimalityGapError,
    ProblemTooLargeError,
)
from ..language.logits import tempered
from ..models.registry import SAMPLINGS, make_draft_model, sampling_names
from ..solve import Row, acceptance_rows, optimal_acceptance
from ._common import (
    COMMANDS,
    EXIT_BOUNDS,
    EXIT_OK,
    add_common,
    add_limits,
    checked_names,
    drafts_option,
    independent_drafts,
    load_pair,
    progress,
)

#: Rules estimated to prepare within this (seconds) are prepared once untimed first, so that
#: prepare_ms is the steady-state cost (kernels compiled and loaded for this size).
WARM_SECONDS = 1.0

def _rules_epilog() -> str:
    from ..rules import RULES

    def summary(name, cls) -> str:  # the docstring's first sentence ("et al." does not end one)
        text = re.split(r"(?<!\bal)\.\s", " ".join(inspect.getdoc(cls).split("\n\n")[0].split()))[0]
        return textwrap.fill(f"{name:<11s} {text.rstrip('.')} [{cls.sampling} drafts]", 96,
                             initial_indent="  ", subsequent_indent=" " * 14)
    return "selection rules (--rules):\n" + "\n".join(summary(*item) for item in RULES.items())


def add_parser(sub) -> None:
    """Add ``compare-selectors`` to the CLI's subparsers."""
    cmp = sub.add_parser(
        "compare-selectors", help=COMMANDS["compare-selectors"][1],
        description="Exact (or Monte Carlo) acceptance of each selection rule, the optimum alpha* "
                    "of its draft model, the gap, and the preparation time per position. With "
                    f"--sampling all: which draft model to choose, alpha* of {', '.join(one_law_models())} "
                    f"(and {', '.join(per_draft_models())}) drafts side by side, each with its route "
                    "and certificate.",
        epilog=_rules_epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmp.add_argument("P", help="target distribution, .npy of shape (V,), or (B, V): one law per "
                               "position (as lm-pairs writes them)")
    cmp.add_argument("Q", help="draft distribution, .npy of shape (V,), or (B, V) with P's rows; with "
                               "--sampling independent, shape (n, V), one law per draft")
    drafts_option(cmp, default=None, help="number of drafts n (default 2; with "
                   "--draft-temperatures their count; with a q of shape (n, V) its rows)")
    cmp.add_argument("--sampling", metavar="MODELS",
                     help="instead of the rules, compare draft models: alpha* of each under its "
                          "optimal verifier, with the route and certificate that prove it "
                          f"(or 'upper bound'); 'all' ({', '.join(one_law_models())}, and "
                          f"{', '.join(per_draft_models())} with --draft-temperatures) or "
                          "comma-separated names; a q of shape (n, V), one law per draft, is read "
                          "by --sampling independent alone")
    cmp.add_argument("--draft-temperatures", type=_temperatures, metavar="T1,...,Tn",
                     help="with --sampling: independent drafts, draft i from q at temperature Ti "
                          "(q^(1/Ti) renormalised, which is softmax(z / Ti) for q = softmax(z)); "
                          "n is their count")
    cmp.add_argument("--rules", help="comma-separated rule names (default: all; listed below)")
    cmp.add_argument("--samples", type=int, default=20_000,
                     help="Monte Carlo samples where exact enumeration is too costly (default 20000)")
    cmp.add_argument("--truncation", type=int, default=None,
                     help="khisti-lp truncation s (default: the union of p's and q's top-0.95 nuclei)")
    cmp.add_argument("--per-position", action="store_true",
                     help="with P, Q of shape (B, V): every position's row too, before the rows of "
                          "means over positions")
    cmp.add_argument("--normalize", action="store_true",
                     help="rescale p and q if they do not sum to 1 instead of refusing them")
    add_common(cmp, "one JSON object per rule (and, with --per-position, per rule and position)",
               with_seed=True)
    add_limits(cmp)
    cmp.set_defaults(func=run)


def _rule_acceptance(args, rule, rng, times: int = 1) -> tuple[float, bool, list | None]:
    """(acceptance, exact, 95% interval or None) by the rule's own policy
    (:meth:`~mdtheory.rules.base.SelectionRule.acceptance`), the work estimated as if repeated at
    ``times`` positions; a progress bar once Monte Carlo reports (a batch's own counts
    positions)."""
    with contextlib.ExitStack() as stack:
        bars = []

        def update(steps: int) -> None:
            if not bars:
                bars.append(stack.enter_context(progress(args, args.samples,
                                                         f"{rule.name} Monte Carlo")))
            bars[0].update(steps)
        acc, exact, ci = rule.acceptance(args.samples, rng, max_seconds=args.max_seconds,
                                         max_bytes=args.max_bytes, repeats=times,
                                         progress=update if times == 1 else None)
    return acc, exact, None if ci is None else list(ci)


def one_law_models() -> tuple[str, ...]:
    """The draft models of ``compare-selectors --sampling all`` built from the one law q: the
    registered one-law models, read when the command runs (a model registered after the CLI was
    imported is listed)."""
    return sampling_names(lambda cls: cls.single_q)


def per_draft_models() -> tuple[str, ...]:
    """With ``--draft-temperatures``: the registered models with one law per draft
    (``independent``: q tempered once per draft)."""
    return sampling_names(lambda cls: cls.rows_per_draft and not cls.single_q)


def _temperatures(text: str) -> tuple[float, ...]:
    """``--draft-temperatures 0.7,1,1.4``: positive finite numbers, one per draft."""
    try:
        temps = tuple(float(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not all(np.isfinite(t) and t > 0 for t in temps):
        raise argparse.ArgumentTypeError(f"temperatures must be positive and finite, got {text!r}")
    return temps


def _draft_models(args: argparse.Namespace, Q: np.ndarray, q_ndim: int) -> list[tuple]:
    """The draft models that ``--sampling`` names (``all`` or comma-separated names), built from q:
    (name, model) pairs, or (name, error) for a model that this q and n cannot build (successive
    sampling, conditional Poisson and greedy sets need n tokens with q > 0)."""
    one_law, per_draft_names = one_law_models(), per_draft_models()
    valid = (*one_law, *per_draft_names)
    names = []
    for name in args.sampling.split(","):
        name = name.strip()
        name = SAMPLINGS[name].sampling if name in SAMPLINGS else name  # aliases: wor
        if name == "all":
            names += [*one_law, *(per_draft_names if args.draft_temperatures else [])]
        elif name in valid:
            names.append(name)
        else:
            raise InvalidInputError(f"unknown draft model {name!r} in --sampling; valid choices: all, "
                                    f"{', '.join(valid)} (wor is short for without-replacement)")
    names = list(dict.fromkeys(names))
    temps = args.draft_temperatures
    per_draft = [name for name in names if name in per_draft_names]
    if q_ndim == 2:  # one law per draft: only the independent model reads it
        if len(names) != 1 or names != per_draft or temps:
            raise InvalidInputError(
                f"{args.Q}: q has shape {Q.shape}, one law per draft, which only --sampling "
                "independent reads (without --draft-temperatures); the other draft models and "
                "--draft-temperatures need one q of shape (V,)"
            )
        return [(names[0], make_draft_model(independent_drafts(Q, q_ndim, args.drafts, args.Q),
                                            sampling=names[0]))]
    n = len(temps) if temps else 2 if args.drafts is None else args.drafts
    if temps and args.drafts is not None and as_drafts(args.drafts) != n:
        raise InvalidInputError(f"--drafts {args.drafts} contradicts --draft-temperatures, which "
                                f"gives {n} drafts; drop --drafts or give {args.drafts} temperatures")
    if per_draft and not temps:
        raise InvalidInputError(
            "--sampling independent needs one law per draft: a q of shape (n, V), or "
            "--draft-temperatures T1,...,Tn to temper q once per draft"
        )
    if temps and not per_draft:
        raise InvalidInputError("--draft-temperatures builds the independent drafts; add "
                                "independent (or all) to --sampling")
    as_drafts(n)
    models = []
    for name in names:
        try:
            models.append((name, make_draft_model(np.array([tempered(Q[0], t) for t in temps]),
                                                  sampling=name) if name in per_draft_names
                           else make_draft_model(Q[0], n, name)))
        except InvalidDistributionError:
            raise
        except InvalidInputError as exc:
            models.append((name, exc))
    return models


def _proven_acceptance(args: argparse.Namespace, p: np.ndarray, model) -> tuple[Row, float]:
    """alpha* of one draft model by the front door's row form (the default route, and the
    minimum-norm point where that only bounds alpha* and its estimate fits what is left) and the
    seconds it took.

    Raises
    ------
    ProblemTooLargeError
        The default route's estimate is over the limits.
    """
    t0 = time.perf_counter()
    (row,) = acceptance_rows(p, model, max_seconds=args.max_seconds, max_bytes=args.max_bytes)
    return row, time.perf_counter() - t0


def _bounds(row: Row) -> tuple[float, float] | None:
    """The proven bounds of a row that only brackets alpha* (its solver's gap, or the minimum-norm
    point's gap under the default route's upper bound); None for a value or a lone upper bound."""
    if not isinstance(row.error, OptimalityGapError):
        return None
    upper = row.error.upper if row.result is None else min(row.error.upper, row.result.value)
    return row.error.lower, upper


def _json_rows(rows: list[dict], as_json: bool, key: str, nothing: str) -> bool:
    """Refuse a table whose every row failed (``nothing`` within the limits, each row's ``key`` and
    error named); print the rows as JSON Lines if ``as_json``. True if they were printed."""
    if all(r.get("error") for r in rows):
        raise InvalidInputError(f"{nothing} within the limits: "
                                + "; ".join(f"{r[key]}: {r['error']}" for r in rows))
    if as_json:  # JSON Lines, as every command
        for r in rows:
            print(json.dumps(r))
    return as_json


def _compare_drafts(args: argparse.Namespace, p: np.ndarray, Q: np.ndarray, q_ndim: int) -> int:
    """``compare-selectors --sampling``: alpha* of each draft model under its optimal verifier."""
    if args.rules is not None or args.truncation is not None:
        raise InvalidInputError(
            "--sampling compares draft models under their optimal verifiers; --rules and "
            "--truncation apply to the table of selection rules (run without --sampling)"
        )
    pairs = _draft_models(args, Q, q_ndim)
    models = [model for _, model in pairs if not isinstance(model, Exception)]
    n = len(Q) if q_ndim == 2 else len(args.draft_temperatures or ()) or args.drafts or 2
    uniform = np.full(20, 1 / 20)
    for model in models:  # untimed warm-up: numba loads its compiled kernels on a process's first call
        tiny = make_draft_model(np.tile(uniform, (2, 1)), None, model.sampling) \
            if model.rows_per_draft else make_draft_model(uniform, 2, model.sampling)
        for method in ("auto", "mnp"):
            with contextlib.suppress(MdtheoryError):  # only the kernels' loading counts here
                optimal_acceptance(uniform, tiny, method=method)
    rows = []
    for name, model in pairs:
        head = {"sampling": name, "drafts": n, "vocab": int(p.size)}
        if name in per_draft_models() and args.draft_temperatures:
            head["temperatures"] = list(args.draft_temperatures)
        if isinstance(model, Exception):
            rows.append({**head, "alpha_star": None, "status": None, "error": str(model)})
            continue
        try:
            row, seconds = _proven_acceptance(args, p, model)
        except InvalidDistributionError:
            raise  # p itself: every row's
        except MdtheoryError as exc:  # this model's own refusal or failure: its row says it
            rows.append({**head, "alpha_star": None, "status": None, "error": str(exc)})
            continue
        res, bounds = row.result, _bounds(row)
        if bounds is not None:
            rows.append({**head, "alpha_star": None, "status": "bounds", "proven": False,
                         "lower": bounds[0], "upper": bounds[1], "seconds": seconds,
                         "note": str(row.error)})
            continue
        note = f"not proved by method 'mnp': {row.error}" if row.error is not None else None
        rows.append({**head, "alpha_star": res.value, "status": res.status,
                     "proven": res.status == "optimal", "method": res.method,
                     "certificate": res.certificate, "certificate_gap": res.certificate_gap,
                     "acceptance_one": res.acceptance_one, "seconds": seconds,
                     **({"note": note} if note else {})})
    code = EXIT_BOUNDS if any(r["status"] == "bounds" for r in rows) else EXIT_OK
    if _json_rows(rows, args.json, "sampling", "no draft model's alpha* could be computed"):
        return code
    print(f"V = {p.size}, n = {n} drafts: alpha*, the best acceptance of any lossless "
          "verifier, under each draft model")
    print(f"{'draft model':<26s} {'alpha*':>14s}  {'status':<12s} {'route':<11s} {'certificate':<15s} "
          f"{'gap':>8s} {'ms':>9s}")
    for r in rows:
        name = r["sampling"] + (" T=" + ",".join(f"{t:g}" for t in r["temperatures"])
                                if "temperatures" in r else "")
        if r.get("error"):
            print(f"{name:<26s} not computed: {r['error']}")
            continue
        if r["status"] == "bounds":
            print(f"{name:<26s} {r['lower']:.10f} <= alpha* <= {r['upper']:.10f}: proven bounds "
                  f"only, a gap of {r['upper'] - r['lower']:.3g} {1e3 * r['seconds']:9.1f}")
            continue
        status = "proven" if r["proven"] else "upper bound"
        gap = "" if r["certificate_gap"] is None else f"{abs(r['certificate_gap']):.0e}"
        print(f"{name:<26s} {r['alpha_star']:14.10f}  {status:<12s} {r['method']:<11s} "
              f"{r['certificate']:<15s} {gap:>8s} {1e3 * r['seconds']:9.1f}")
    done = [r for r in rows if r["alpha_star"] is not None]
    if done:
        best = max(done, key=lambda r: r["alpha_star"])
        print(f"highest alpha*: {best['sampling']} ({best['alpha_star']:.10f}"
              + ("" if best["proven"] else ", an upper bound") + ")"
              + ("" if q_ndim == 2 else f"; one draft: 1 - TV(p, q) = {np.minimum(p, Q[0]).sum():.10f}"))
    for r in rows:
        if r.get("note"):
            kind = "proven bounds only" if r["status"] == "bounds" else "upper bound only"
            print(f"  {r['sampling']}: {kind}, {r['note']}")
    return code


def run(args: argparse.Namespace) -> int:
    from ..rules import RULES, make_rule

    P, Q, q_ndim = load_pair(args)
    if args.sampling is not None:
        if args.per_position:
            raise InvalidInputError("--per-position applies to the table of selection rules (run "
                                    "without --sampling)")
        if len(P) != 1:
            raise InvalidDistributionError(
                f"compare-selectors takes one target p of shape (V,); got {len(P)} rows")
        return _compare_drafts(args, P[0], Q, q_ndim)
    if args.draft_temperatures:
        raise InvalidInputError("--draft-temperatures builds independent drafts for --sampling "
                                "independent or all; the rules table does not read it")
    if len(P) != len(Q):
        raise InvalidDistributionError(
            f"compare-selectors takes p and q with one row per position; got {len(P)} row(s) of p "
            f"and {len(Q)} of q")
    names = checked_names(args.rules, RULES, "selection rule")
    args.drafts = 2 if args.drafts is None else args.drafts
    as_drafts(args.drafts)
    if args.samples < 1:
        raise InvalidInputError(f"--samples must be at least 1, got {args.samples}")
    rng = np.random.default_rng(args.seed)
    use_compiled()  # prepare_ms is the steady state: compiled kernels, not interpreted small calls
    for name in names:  # untimed warm-up: numba loads its compiled kernels on a process's first call
        try:
            make_rule(name, np.full(3, 1 / 3), np.full(3, 1 / 3), 2)
        except MdtheoryError:
            pass
    B = len(P)
    batch = B > 1 or args.per_position
    rows, per_position, optimum = [], [], [{} for _ in range(B)]
    with progress(args, len(names) * B, "compare-selectors") as bar:
        for name in names:  # each rule is prepared and its work estimated first
            bar.set_postfix_str(name, refresh=True)
            here = []
            for i in range(B):
                here.append(_position_row(args, name, P[i], Q[i], rng, B, optimum[i]))
                bar.update(1)
                if here[-1].get("error"):  # the rule cannot run at this position: the rule stops
                    break
            if not batch:
                rows.append(here[0])
                continue
            per_position += [{**r, "position": i} for i, r in enumerate(here)]
            rows.append(_mean_row(name, here, B))
    # exit code 4 where an alpha* is only bracketed, as for check-acceptance
    code = EXIT_BOUNDS if any(r.get("alpha_star_status") == "bounds" for r in rows + per_position) \
        else EXIT_OK
    if batch:
        _print_batch(args, rows, per_position, P.shape[1], B)
        return code
    if _json_rows(rows, args.json, "rule", "no selection rule could be prepared"):
        return code
    print(f"V = {P.shape[1]}, n = {args.drafts} drafts; alpha* is the optimum for each rule's "
          "draft model")
    print(f"{'rule':<10s} {'drafts':<20s} {'acceptance':>12s} {'':<24s} {'alpha*':>10s} "
          f"{'gap':>10s} {'prepare ms':>11s}")
    for r in rows:
        _print_row(r)
    for sampling, (_, why, status, note) in optimum[0].items():
        if why or status != "optimal":
            print(f"  {sampling} drafts: {why or f'alpha* is an upper bound, {note}'}")
    return code


def _print_row(r: dict, first: str = "", width: int = 24) -> None:
    """One line of the rules table (``first``: a leading column, the position; ``width``: of the
    column that says how the acceptance was found)."""
    if r.get("error"):
        print(f"{first}{r['rule']:<10s} {r['sampling']:<20s} not run: {r['error']}")
        return
    if "positions" in r:
        how = f"mean of {r['positions']}" + ("" if r["ci95"] is None else
                                             f", 95% [{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}]")
    else:
        how = "exact" if r["exact"] else f"MC, 95% [{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}]"
    alpha, gap = (f"{r['alpha_star']:10.6f}", f"{r['gap']:10.6f}") if r["alpha_star"] is not None \
        else (f"{'n/a':>10s}", f"{'n/a':>10s}")
    print(f"{first}{r['rule']:<10s} {r['sampling']:<20s} {r['acceptance']:12.6f} {how:<{width}s} "
          f"{alpha} {gap} {r['prepare_ms']:11.3f}")


def _position_row(args, name: str, p: np.ndarray, q: np.ndarray, rng, times: int,
                  optimum: dict) -> dict:
    """One rule at one position: its acceptance, alpha* of its draft model and the gap, or why it
    did not run. ``times`` scales the work estimates (a batch's positions); ``optimum`` caches
    alpha* by draft model at this position."""
    from ..rules import RULES, make_rule, rule_keywords

    params = {"s": args.truncation} if "s" in rule_keywords(RULES[name]) else {}  # --truncation
    try:
        model = make_draft_model(q, args.drafts, RULES[name].sampling)
        est = RULES[name].estimate(model)
        limits = {"max_seconds": args.max_seconds, "max_bytes": args.max_bytes}
        _budget.require(_budget.repeated(est, times), **limits)
        if times == 1 and est.seconds <= WARM_SECONDS:  # a first preparation at this size loads kernels
            make_rule(name, p, q, args.drafts, **limits, **params)
        rule = make_rule(name, p, q, args.drafts, **limits, **params)  # times q's validation too
        acc, exact, ci = _rule_acceptance(args, rule, rng, times)
    except (InvalidInputError, ProblemTooLargeError) as exc:
        if isinstance(exc, InvalidDistributionError):
            raise
        return {"rule": name, "sampling": RULES[name].sampling, "acceptance": None,
                "exact": False, "ci95": None, "alpha_star": None, "gap": None,
                "prepare_ms": None, "error": str(exc)}
    if rule.sampling not in optimum:  # (alpha*, None, status, note) or (None, why not, None, None)
        try:
            row, _ = _proven_acceptance(args, rule.p, rule.model)
            bounds = _bounds(row)
            note = f"not proved by method 'mnp': {row.error}" if row.error is not None else None
            optimum[rule.sampling] = (row.result.value, None, row.result.status, note) \
                if bounds is None else (None, "alpha* is proven only in [{:.10g}, {:.10g}]: {}".format(
                    *bounds, row.error), "bounds", None)
        except ProblemTooLargeError as exc:
            optimum[rule.sampling] = (None, f"alpha* not computed: {exc}", None, None)
    alpha, why, status, _ = optimum[rule.sampling]
    return {"rule": name, "sampling": rule.sampling, "acceptance": acc, "exact": exact,
            "ci95": ci, "alpha_star": alpha, "gap": None if why else alpha - acc,
            "prepare_ms": rule.prepare_seconds * 1e3,
            **({"alpha_star_error": why} if why else {}),
            **({"alpha_star_status": status} if status else {})}


def _mean_row(name: str, rows: list[dict], B: int) -> dict:
    """One rule over B positions: the means over positions and the acceptance's 95% interval over
    positions (mean +- 1.96 standard errors; none for one position), or the first position's
    error. ``exact``: every position's acceptance was exact (not Monte Carlo)."""
    from ..rules import RULES

    head = {"rule": name, "sampling": RULES[name].sampling, "positions": B}
    if rows[-1].get("error"):
        return {**head, "acceptance": None, "exact": False, "ci95": None, "alpha_star": None,
                "gap": None, "prepare_ms": None,
                "error": f"position {len(rows) - 1}: {rows[-1]['error']}"}
    acc = np.array([r["acceptance"] for r in rows])
    mean = float(acc.mean())
    half = 1.96 * float(acc.std(ddof=1)) / np.sqrt(B) if B > 1 else None
    row = {**head, "acceptance": mean, "exact": all(r["exact"] for r in rows),
           "ci95": None if half is None else [mean - half, mean + half],
           "alpha_star": None, "gap": None,
           "prepare_ms": float(np.mean([r["prepare_ms"] for r in rows]))}
    missing = [r["alpha_star_error"] for r in rows if r["alpha_star"] is None]
    if missing:
        return {**row, "alpha_star_error": f"{len(missing)} of {B} positions: {missing[0]}"}
    alpha = float(np.mean([r["alpha_star"] for r in rows]))
    proven = all(r["alpha_star_status"] == "optimal" for r in rows)
    return {**row, "alpha_star": alpha, "gap": alpha - mean,
            "alpha_star_status": "optimal" if proven else "upper bound"}


def _print_batch(args, rows: list[dict], per_position: list[dict], V: int, B: int) -> None:
    """The rows of a batch: every position's (with ``--per-position``), then one per rule."""
    shown = per_position if args.per_position else []
    if _json_rows(rows, False, "rule", "no selection rule could be prepared") or args.json:
        for r in shown + rows:
            print(json.dumps(r))
        return
    head = (f"{'rule':<10s} {'drafts':<20s} {'acceptance':>12s} {'':<32s} {'alpha*':>10s} "
            f"{'gap':>10s} {'prepare ms':>11s}")
    if shown:
        print(f"V = {V}, n = {args.drafts} drafts; each of {B} positions")
        print(f"{'position':>8s}  {head}")
        for r in shown:
            _print_row(r, f"{r['position']:>8d}  ", 32)
        print()
    print(f"V = {V}, n = {args.drafts} drafts; means over {B} positions (95% interval over "
          "positions); alpha* is the optimum for each rule's draft model")
    print(head)
    for r in rows:
        _print_row(r, width=32)
    for r in rows:
        if r.get("alpha_star_error") or r.get("alpha_star_status") == "upper bound":
            print(f"  {r['rule']}: " + (r.get("alpha_star_error")
                                        or "alpha* is an upper bound at some positions"))
