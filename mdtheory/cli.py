"""Command-line interface: ``mdtheory check-acceptance P Q [--drafts N] ...``.

Exit codes: 0 success (for ``verify CLAIM``: the claim holds; for ``verify all``: every verdict is
the one papers/ records), 1 a ``verify`` claim is refuted (``verify all``: a verdict differs from the
record), 2 bad input (one line on stderr naming the culprit, never a traceback) or work refused
because its estimated time or memory is over the limit (``--max-seconds``; the line states the
estimate; or, uncaught by an estimate, an allocation beyond the machine's memory), 3 a solver failure,
4 (``check-acceptance``) a row's alpha* proven only between two bounds that did not meet (both
printed; the minimum-norm-point route's known failure, :func:`mdtheory.independent.min_norm_base`),
130 interrupted (Ctrl-C), 141 stdout closed early (``| head``).

One vocabulary: n (``--drafts``, ``-n``) is the number of drafts, V (``--vocab``) the number of
tokens; the old spellings ``-K``, ``--alphabet`` and ``-m`` are still accepted. ``--json`` prints
JSON Lines everywhere: one JSON object per line (per row, rule, check or run).

Long work that was allowed to start (Monte Carlo, exact verification) shows a progress bar on stderr
when stderr is a terminal, unless ``--quiet``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import sys
import textwrap
import time
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
    OptimalityGapError,
    ProblemTooLargeError,
    SolverError,
)
from .solve import METHODS, _auto, optimal_acceptance

__all__ = ["main", "load_npy", "tempered"]

EXIT_OK, EXIT_REFUTED, EXIT_BAD_INPUT, EXIT_SOLVER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: ``check-acceptance``: a row's solver proved only bounds on alpha* that did not meet (printed).
EXIT_BOUNDS = 4
#: Exit code when stdout is closed before the output is written (128 + SIGPIPE, as a shell reports it).
EXIT_BROKEN_PIPE = 141
#: The first bytes of every .npy file.
NPY_MAGIC = b"\x93NUMPY"
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
        with open(path, "rb") as fh:
            head = fh.read(len(NPY_MAGIC))
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InvalidInputError(f"{name}: no such file: {path}") from None
    except IsADirectoryError:
        raise InvalidInputError(f"{name}: {path} is a directory, not a .npy file") from None
    except PermissionError:
        raise InvalidInputError(f"{name}: cannot read {path}: permission denied") from None
    except (ValueError, EOFError, OSError) as exc:
        if head != NPY_MAGIC:
            raise InvalidInputError(f"{name}: {path} is not a valid .npy file (it does not start "
                                    "with the .npy header)") from None
        why = "it holds Python objects, which are not loaded (pickle is unsafe)" \
            if "pickle" in str(exc) else f"a damaged .npy file: {exc}"
        raise InvalidInputError(f"{name}: {path} is not a plain numeric .npy array: {why}") from None
    if not isinstance(arr, np.ndarray):
        arr.close()
        raise InvalidInputError(f"{name}: {path} is an .npz archive; expected a single .npy array")
    return arr


def _load_batch(path: str, name: str, normalize: bool) -> tuple[np.ndarray, int]:
    """The rows of a (V,) or (B, V) file as a (rows, V) array, and the file's number of axes."""
    arr = load_npy(path, name)
    if arr.ndim not in (1, 2):
        raise InvalidDistributionError(
            f"{path}: {name} has shape {arr.shape}; expected (V,) or (B, V)"
        )
    try:
        out = as_distribution(arr, name, normalize=normalize, ndim=arr.ndim)
    except InvalidDistributionError as exc:
        raise InvalidDistributionError(f"{path}: {exc}") from None
    return np.atleast_2d(out), arr.ndim


def _load_pair(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, int]:
    """P and Q as (rows, V) arrays with the same number of tokens, and the number of axes of Q's
    file (1 or 2)."""
    P, _ = _load_batch(args.P, "p", args.normalize)
    Q, q_ndim = _load_batch(args.Q, "q", args.normalize)
    if P.shape[1] != Q.shape[1]:
        raise InvalidDistributionError(
            f"p has {P.shape[1]} tokens ({args.P}) but q has {Q.shape[1]} ({args.Q})"
        )
    return P, Q, q_ndim


def _independent_drafts(Q: np.ndarray, q_ndim: int, drafts: int | None, path: str) -> np.ndarray:
    """The (n, V) table of ``--sampling independent``: one law per draft, one row each.

    A q of shape (V,) is one draft: it is refused (exit 2) unless ``--drafts 1`` says so, since n
    identical independent drafts are iid drafts (``--sampling iid``), and a (V,) file given here is
    more likely a mistake than a request for one draft. ``--drafts``, when given, must equal the
    number of rows.
    """
    n = len(Q)
    if q_ndim == 1 and drafts != 1:
        raise InvalidInputError(
            f"{path}: --sampling independent takes one law per draft, q of shape (n, V); q has shape "
            f"({Q.shape[1]},), which is one draft: for n identical drafts use --sampling iid, for "
            "one draft add --drafts 1"
        )
    if drafts is not None and as_drafts(drafts) != n:
        raise InvalidInputError(
            f"{path}: --drafts {drafts} contradicts the independent draft table, which has {n} "
            "row(s), one law per draft; drop --drafts or give one row per draft"
        )
    return Q


def _fmt_set(tokens: np.ndarray) -> str:
    tokens = tokens.tolist()
    if len(tokens) <= SHOW_TOKENS:
        return "{" + ", ".join(map(str, tokens)) + "}"
    head = ", ".join(map(str, tokens[:SHOW_TOKENS]))
    return "{" + head + f", ... }} ({len(tokens)} tokens; --json lists all)"


def _row_error(exc: MdtheoryError, i: int, rows: int) -> MdtheoryError:
    return exc if rows == 1 else type(exc)(f"row {i}: {exc}")


def _check_acceptance(args: argparse.Namespace) -> int:
    P, Q, q_ndim = _load_pair(args)
    drafts = args.drafts
    if args.sampling == "independent":  # Q holds one row per draft: a single draft model
        Q = _independent_drafts(Q, q_ndim, drafts, args.Q)[None]
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
    code = EXIT_OK
    for i in range(rows):
        p, model = P[i % len(P)], models[i % len(Q)]
        try:
            res = optimal_acceptance(p, model, method=args.method)
        except OptimalityGapError as exc:
            _print_bounds(args, exc, i, rows, p.size, model)
            code = EXIT_BOUNDS
            continue
        except MdtheoryError as exc:
            raise _row_error(exc, i, rows) from None
        p_cut, q_cut, single = res.cut_p, res.cut_q, res.single_draft
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
    return code


def _print_bounds(args: argparse.Namespace, exc: OptimalityGapError, i: int, rows: int, V: int,
                  model) -> None:
    """A row of ``check-acceptance`` whose solver proved only bounds on alpha* (exit code 4)."""
    if args.json:
        print(json.dumps({"row": i, "alpha_star": None, "lower": exc.lower, "upper": exc.upper,
                          "drafts": model.n, "sampling": model.sampling, "vocab": V,
                          "status": "bounds", "message": str(exc)}))
        return
    head = f"row {i}: " if rows > 1 else ""
    print(f"{head}V = {V}, n = {model.n} drafts, {model.sampling} sampling")
    print(f"  {exc.lower:.12g} <= alpha* <= {exc.upper:.12g}: proven bounds only, the solver left a "
          f"gap of {exc.upper - exc.lower:.3g}")


def _require_cone(args: argparse.Namespace, m: int, K: int, model: str) -> None:
    """Refuse a cone whose Hall comparison is estimated over ``--max-seconds``."""
    supports = len(draft_supports(m, K, model))  # refuses dimensions over the DD limit first
    _budget.require(_budget.acceptance_cone(m, K, model, supports), args.max_seconds)


def _dd(args: argparse.Namespace) -> int:
    _require_cone(args, args.vocab, args.drafts, args.model)
    cone = acceptance_one_cone(args.vocab, args.drafts, args.model, args.method)
    cmp = compare_with_hall(cone)
    rows = sorted(zip(cmp["facets"], cone.facets, strict=True),  # Hall's inequalities first
                  key=lambda r: (r[0][1] is None, not (r[0][1] or "").startswith("hall"),
                                 len(r[0][1] or ""), r[0][1] or r[0][0]))
    if args.json:
        print(json.dumps({
            "vocab": cone.m, "alphabet": cone.m, "drafts": cone.K, "model": cone.model, "method": cone.method,
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
    for flag, value, default in zip(("--vocab", "--drafts", "--instances"),
                                    (args.vocab, args.drafts, args.instances), defaults,
                                    strict=True):
        if value is not None and default is None:
            raise InvalidInputError(f"verify {args.claim} takes no {flag}")
    m, K, instances = (d if v is None else v for v, d in
                       zip((args.vocab, args.drafts, args.instances), defaults, strict=True))
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
    from .verify import ALL_GRID, RECORDED, verify_all

    if args.claim == "all":
        given = [flag for flag, value in (("--vocab", args.vocab), ("--drafts", args.drafts),
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
    changed = sorted({r["name"] for r in records if r["verified"] != RECORDED[r["name"]]})
    if args.json:
        for rec in records:
            print(json.dumps({**rec, "recorded": RECORDED[rec["name"]],
                              **({"vocab": rec["alphabet"]} if "alphabet" in rec else {})}))
    elif args.claim == "all":
        print(f"{'claim':<10s} {'case':<34s} {'verdict':<9s} {'seconds':>8s}")
        for rec in records:
            case = rec["cases"][0] if rec["name"] == "theorem2" else \
                {k: rec[k] for k in ("alphabet", "drafts", "seed") if k in rec}
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


def _progress(args: argparse.Namespace, total: int, desc: str):
    """A tqdm bar on stderr; silent under ``--quiet`` or when stderr is not a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True,
                disable=args.quiet or not sys.stderr.isatty())


def _names(text: str | None, valid, what: str) -> list[str]:
    """The comma-separated names of ``--rules`` (all of ``valid`` when not given), each checked."""
    if text is None:
        return list(valid)
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise InvalidInputError(f"--rules {text!r} names no {what}; give comma-separated names "
                                f"from: {', '.join(valid)}")
    for name in names:
        if name not in valid:
            raise InvalidInputError(f"unknown {what} {name!r}; valid choices: {', '.join(valid)}")
    return names


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


#: The draft models of ``compare-selectors --sampling all``, each built from the one law q (and
#: ``independent`` with ``--draft-temperatures``).
ONE_LAW_MODELS = ("iid", "without-replacement", "conditional-poisson", "greedy")


def _temperatures(text: str) -> tuple[float, ...]:
    """``--draft-temperatures 0.7,1,1.4``: positive finite numbers, one per draft."""
    try:
        temps = tuple(float(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not all(np.isfinite(t) and t > 0 for t in temps):
        raise argparse.ArgumentTypeError(f"temperatures must be positive and finite, got {text!r}")
    return temps


def tempered(q: np.ndarray, temperature: float) -> np.ndarray:
    """q's drafter at another temperature: :math:`q^{1/T} / \\sum_y q(y)^{1/T}` (zeros stay zero).

    If q = softmax(z) then :math:`q^{1/T} \\propto e^{z/T}`, so this is softmax(z / T), the law the
    drafter's logits give at temperature T, taking q's own temperature as 1.

    Parameters
    ----------
    q : ndarray, shape (V,)
        A distribution with at least one positive entry.
    temperature : float
        T > 0.

    Returns
    -------
    ndarray, shape (V,)

    Examples
    --------
    >>> tempered(np.array([0.8, 0.2, 0.0]), 0.5).round(6).tolist()  # q^2 / (0.64 + 0.04)
    [0.941176, 0.058824, 0.0]
    """
    logq = np.log(np.where(q > 0, q, 1.0)) / temperature
    w = np.exp(logq - logq[q > 0].max()) * (q > 0)
    return w / w.sum()


def _draft_models(args: argparse.Namespace, Q: np.ndarray, q_ndim: int) -> list[tuple]:
    """The draft models that ``--sampling`` names (``all`` or comma-separated names), built from q:
    (name, model) pairs, or (name, error) for a model that this q and n cannot build (successive
    sampling, conditional Poisson and greedy sets need n tokens with q > 0)."""
    valid = (*ONE_LAW_MODELS, "independent")
    names = []
    for name in args.sampling.split(","):
        name = {"wor": "without-replacement"}.get(name.strip(), name.strip())
        if name == "all":
            names += [*ONE_LAW_MODELS, *(["independent"] if args.draft_temperatures else [])]
        elif name in valid:
            names.append(name)
        else:
            raise InvalidInputError(f"unknown draft model {name!r} in --sampling; valid choices: all, "
                                    f"{', '.join(valid)} (wor is short for without-replacement)")
    names = list(dict.fromkeys(names))
    temps = args.draft_temperatures
    if q_ndim == 2:  # one law per draft: only the independent model reads it
        if names != ["independent"] or temps:
            raise InvalidInputError(
                f"{args.Q}: q has shape {Q.shape}, one law per draft, which only --sampling "
                "independent reads (without --draft-temperatures); the other draft models and "
                "--draft-temperatures need one q of shape (V,)"
            )
        return [("independent", make_draft_model(_independent_drafts(Q, q_ndim, args.drafts, args.Q),
                                                 sampling="independent"))]
    n = len(temps) if temps else 2 if args.drafts is None else args.drafts
    if temps and args.drafts is not None and as_drafts(args.drafts) != n:
        raise InvalidInputError(f"--drafts {args.drafts} contradicts --draft-temperatures, which "
                                f"gives {n} drafts; drop --drafts or give {args.drafts} temperatures")
    if "independent" in names and not temps:
        raise InvalidInputError(
            "--sampling independent needs one law per draft: a q of shape (n, V), or "
            "--draft-temperatures T1,...,Tn to temper q once per draft"
        )
    if temps and "independent" not in names:
        raise InvalidInputError("--draft-temperatures builds the independent drafts; add "
                                "independent (or all) to --sampling")
    as_drafts(n)
    models = []
    for name in names:
        try:
            models.append((name, make_draft_model(np.array([tempered(Q[0], t) for t in temps]),
                                                  sampling=name) if name == "independent"
                           else make_draft_model(Q[0], n, name)))
        except InvalidDistributionError:
            raise
        except InvalidInputError as exc:
            models.append((name, exc))
    return models


def _proven_acceptance(args: argparse.Namespace, p: np.ndarray, model) -> tuple:
    """alpha* of one draft model by the default route, then by ``mnp`` when the default route only
    bounds it (without-replacement drafts beyond the flow certificate's size) and ``mnp``'s estimate
    fits ``--max-seconds``; returns (result, seconds, note on a bound left unproven or None)."""
    _budget.require(_budget.acceptance_route(model, _auto(model)), args.max_seconds)
    t0 = time.perf_counter()
    res = optimal_acceptance(p, model)
    note = None
    if res.status != "optimal" and model.sampling != "joint":
        try:
            _budget.require(_budget.acceptance_route(model, "mnp"), args.max_seconds)
            res = optimal_acceptance(p, model, method="mnp")
        except ProblemTooLargeError as exc:
            note = f"not proved by method 'mnp': {exc}"
    return res, time.perf_counter() - t0, note


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
            if model.sampling == "independent" else make_draft_model(uniform, 2, model.sampling)
        for method in ("auto", "mnp"):
            optimal_acceptance(uniform, tiny, method=method)
    rows = []
    for name, model in pairs:
        head = {"sampling": name, "drafts": n, "vocab": int(p.size)}
        if name == "independent" and args.draft_temperatures:
            head["temperatures"] = list(args.draft_temperatures)
        if isinstance(model, Exception):
            rows.append({**head, "alpha_star": None, "status": None, "error": str(model)})
            continue
        try:
            res, seconds, note = _proven_acceptance(args, p, model)
        except ProblemTooLargeError as exc:
            rows.append({**head, "alpha_star": None, "status": None, "error": str(exc)})
            continue
        rows.append({**head, "alpha_star": res.value, "status": res.status,
                     "proven": res.status == "optimal", "method": res.method,
                     "certificate": res.certificate, "certificate_gap": res.certificate_gap,
                     "acceptance_one": res.acceptance_one, "seconds": seconds,
                     **({"note": note} if note else {})})
    if _json_rows(rows, args.json, "sampling", "no draft model's alpha* could be computed"):
        return EXIT_OK
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
        status = "proven" if r["proven"] else "upper bound"
        gap = "" if r["certificate_gap"] is None else f"{abs(r['certificate_gap']):.0e}"
        print(f"{name:<26s} {r['alpha_star']:14.10f}  {status:<12s} {r['method']:<11s} "
              f"{r['certificate']:<15s} {gap:>8s} {1e3 * r['seconds']:9.1f}")
    done = [r for r in rows if not r.get("error")]
    best = max(done, key=lambda r: r["alpha_star"])
    print(f"highest alpha*: {best['sampling']} ({best['alpha_star']:.10f}"
          + ("" if best["proven"] else ", an upper bound") + ")"
          + ("" if q_ndim == 2 else f"; one draft: 1 - TV(p, q) = {np.minimum(p, Q[0]).sum():.10f}"))
    for r in rows:
        if r.get("note"):
            print(f"  {r['sampling']}: upper bound only, {r['note']}")
    return EXIT_OK


def _compare_selectors(args: argparse.Namespace) -> int:
    from .rules import RULES, make_rule

    P, Q, q_ndim = _load_pair(args)
    if args.sampling is not None:
        if len(P) != 1:
            raise InvalidDistributionError(
                f"compare-selectors takes one target p of shape (V,); got {len(P)} rows")
        return _compare_drafts(args, P[0], Q, q_ndim)
    if args.draft_temperatures:
        raise InvalidInputError("--draft-temperatures builds independent drafts for --sampling "
                                "independent or all; the rules table does not read it")
    if len(P) != 1 or len(Q) != 1:
        raise InvalidDistributionError(
            f"compare-selectors takes one (V,) pair; got {len(P)} row(s) of p and {len(Q)} of q"
        )
    names = _names(args.rules, RULES, "selection rule")
    args.drafts = 2 if args.drafts is None else args.drafts
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
    with _progress(args, len(names), "compare-selectors") as bar:
        for k, name in enumerate(names):  # each rule is prepared and its work estimated first
            bar.update(k - bar.n)
            bar.set_postfix_str(name, refresh=True)
            params = {"s": args.truncation} if name == "khisti-lp" else {}
            try:
                model = make_draft_model(Q[0], args.drafts, RULES[name].sampling)
                _budget.require(_budget.rule_preparation(name, model), args.max_seconds)
                rule = make_rule(name, P[0], Q[0], args.drafts, max_seconds=args.max_seconds,
                                 **params)  # times q's validation too
                acc, exact, ci = _rule_acceptance(args, rule, rng)
            except (InvalidInputError, ProblemTooLargeError) as exc:
                if isinstance(exc, InvalidDistributionError):
                    raise
                rows.append({"rule": name, "sampling": RULES[name].sampling, "acceptance": None,
                             "exact": False, "ci95": None, "alpha_star": None, "gap": None,
                             "prepare_ms": None, "error": str(exc)})
                continue
            if rule.sampling not in optimum:  # (alpha*, None, status) or (None, why not, None)
                try:
                    res, _, note = _proven_acceptance(args, rule.p, rule.model)
                    optimum[rule.sampling] = (res.value, None, res.status, note)
                except ProblemTooLargeError as exc:
                    optimum[rule.sampling] = (None, f"alpha* not computed: {exc}", None, None)
            alpha, why, status, _ = optimum[rule.sampling]
            rows.append({"rule": name, "sampling": rule.sampling, "acceptance": acc, "exact": exact,
                         "ci95": ci, "alpha_star": alpha, "gap": None if why else alpha - acc,
                         "prepare_ms": rule.prepare_seconds * 1e3,
                         **({"alpha_star_error": why} if why else {"alpha_star_status": status})})
    if _json_rows(rows, args.json, "rule", "no selection rule could be prepared"):
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
    for sampling, (_, why, status, note) in optimum.items():
        if why or status != "optimal":
            print(f"  {sampling} drafts: {why or f'alpha* is an upper bound, {note}'}")
    return EXIT_OK


def _cross_validate(args: argparse.Namespace) -> int:
    from .rules import RULES
    from .torch_bridge import TORCH_RULES, check_device, cross_validate

    check_device(args.device)
    names = _names(args.rules, TORCH_RULES, "torch rule")
    _budget.require(_budget.batched_steps(args.batch, args.samples, args.vocab, args.drafts,
                                          len(names)), args.max_seconds)
    if args.vocab >= 2 and args.drafts >= 1:  # else cross_validate names the bad size
        for name in names:  # each numpy rule is prepared for the exact acceptance: estimate it
            model = make_draft_model(np.full(args.vocab, 1 / args.vocab), args.drafts,
                                     RULES[name].sampling)
            _budget.require(_budget.rule_preparation(name, model), args.max_seconds)
    report = cross_validate(names, device=args.device, batch=args.batch, vocab=args.vocab,
                            drafts=args.drafts, samples=args.samples, seed=args.seed,
                            max_seconds=args.max_seconds)
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


def _add_limits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-seconds", type=_seconds, default=_budget.MAX_SECONDS, metavar="S",
                        help="refuse, before starting, work estimated to take longer than S seconds "
                             f"(default {_budget.MAX_SECONDS:g}); the refusal states the estimate")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no progress bar (it is shown only when stderr is a terminal)")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose ``epilog`` may be a callable, evaluated only when help is shown (the
    rule and claim lists need modules that the other commands do not load)."""

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


def _rules_epilog() -> str:
    from .rules import RULES

    def summary(name, cls) -> str:  # the docstring's first sentence ("et al." does not end one)
        text = re.split(r"(?<!\bal)\.\s", " ".join(inspect.getdoc(cls).split("\n\n")[0].split()))[0]
        return textwrap.fill(f"{name:<11s} {text.rstrip('.')} [{cls.sampling} drafts]", 96,
                             initial_indent="  ", subsequent_indent=" " * 14)
    return "selection rules (--rules):\n" + "\n".join(summary(*item) for item in RULES.items())


def _claims_epilog() -> str:
    from .verify import CLAIMS, RECORDED

    return "claims:\n" + "\n".join(
        textwrap.fill(f"{name:<9s} {text} (papers/ records it as "
                      f"{'holding' if RECORDED[name] else 'refuted'})", 96, initial_indent="  ",
                      subsequent_indent=" " * 12) for name, text in CLAIMS.items()) + (
        "\n  all       every claim above on a fixed grid of sizes\n\n" + textwrap.fill(
            "exit code: verify CLAIM: 0 the claim holds, 1 it is refuted (the counterexample is "
            "printed); verify all: 0 every verdict is the one papers/ records (refutations "
            "included), 1 a verdict differs from the record", 96))


def _vocab_option(parser: argparse.ArgumentParser, required: bool, help: str) -> None:
    parser.add_argument("--vocab", "--alphabet", "-m", dest="vocab", type=int, required=required,
                        metavar="V", help=help + " (--alphabet and -m are older spellings)")


def _drafts_option(parser: argparse.ArgumentParser, default: int | None = 2, required=False,
                   help: str = "number of drafts n") -> None:
    parser.add_argument("--drafts", "-n", "-K", dest="drafts", type=int, default=default,
                        required=required, metavar="N",
                        help=help + ("" if default is None else f" (default {default})")
                        + " (-K is an older spelling)")


def _seed(text: str) -> int:
    """``--seed``: a non-negative integer (what numpy's generators accept)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return value


def add_seed_option(parser: argparse.ArgumentParser) -> None:
    """The ``--seed`` option every sampling command shares."""
    parser.add_argument("--seed", type=_seed, default=0,
                        help="seed of the random number generator, an integer >= 0 (default 0)")


def _add_common(parser: argparse.ArgumentParser, json_help: str, seed: bool = False) -> None:
    parser.add_argument("--json", action="store_true", help=json_help + " per line (JSON Lines)")
    if seed:
        add_seed_option(parser)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="mdtheory", description="Exact theory of multi-draft speculative sampling.",
        epilog="n is the number of drafts (--drafts, -n), V the number of tokens (--vocab). "
               "--json prints JSON Lines: one object per line. Exit codes: 0 success, 1 a claim "
               "refuted or a verifier found lossy, 2 bad input or work over --max-seconds, 3 solver "
               "failure, 4 check-acceptance proved only bounds on alpha* (printed), 130 "
               "interrupted, 141 stdout closed early.",
    )
    parser.add_argument("--version", action="version", version=f"mdtheory {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)
    check = sub.add_parser(
        "check-acceptance",
        help="optimal acceptance alpha*, acceptance-one test and optimal cut set",
        description="Optimal acceptance alpha* = 1 + min_T [p(T) - Q(T)] of n-draft speculative "
                    "sampling, whether it is exactly one, a witness set, and the optimal cut set. "
                    "Exit code 4: for some row the solver proved only a lower and an upper bound "
                    "on alpha* that did not meet (both printed; the other rows as usual); known "
                    "for --sampling independent where p is one of the drafts' laws or near one.",
    )
    check.add_argument("P", help="target distribution, .npy of shape (V,) or (B, V)")
    check.add_argument("Q", help="draft distribution, .npy of shape (V,) or (B, V); with "
                       "--sampling independent, shape (n, V), one law per draft")
    _drafts_option(check, default=None,
                   help="number of drafts n (default 2; independent: the rows of Q)")
    check.add_argument("--sampling", default="iid",
                       choices=["iid", "without-replacement", "wor", "conditional-poisson", "greedy",
                                "independent"],
                       help="draft model (default iid; wor is short for without-replacement: "
                            "successive sampling, as torch.multinomial without replacement; greedy: "
                            "Hu et al.'s greedy draft set; independent: one law per draft, Q of "
                            "shape (n, V), n its rows; a Q of shape (V,) is refused unless "
                            "--drafts 1, as n identical drafts are --sampling iid)")
    check.add_argument("--method", default="auto", choices=["auto", *METHODS],
                       help="route to alpha* (default auto: the fastest exact one)")
    check.add_argument("--normalize", action="store_true",
                       help="rescale rows that do not sum to 1 instead of refusing them")
    _add_common(check, "one JSON object per row")
    _add_limits(check)
    check.set_defaults(func=_check_acceptance)

    cmp = sub.add_parser(
        "compare-selectors", help="acceptance of practical selection rules against alpha*, or "
                                  "alpha* of each draft model (--sampling)",
        description="Exact (or Monte Carlo) acceptance of each selection rule, the optimum alpha* "
                    "of its draft model, the gap, and the preparation time per position. With "
                    "--sampling all: which draft model to choose, alpha* of iid, without-"
                    "replacement, conditional-Poisson, greedy (and independent) drafts side by "
                    "side, each with its route and certificate.",
        epilog=_rules_epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmp.add_argument("P", help="target distribution, .npy of shape (V,)")
    cmp.add_argument("Q", help="draft distribution, .npy of shape (V,); with --sampling independent, "
                               "shape (n, V), one law per draft")
    _drafts_option(cmp, default=None, help="number of drafts n (default 2; with "
                   "--draft-temperatures their count; with a q of shape (n, V) its rows)")
    cmp.add_argument("--sampling", metavar="MODELS",
                     help="instead of the rules, compare draft models: alpha* of each under its "
                          "optimal verifier, with the route and certificate that prove it "
                          "(or 'upper bound'); 'all' (iid, without-replacement, "
                          "conditional-poisson, greedy, and independent with --draft-temperatures) "
                          "or comma-separated names; a q of shape (n, V), one law per draft, is "
                          "read by --sampling independent alone")
    cmp.add_argument("--draft-temperatures", type=_temperatures, metavar="T1,...,Tn",
                     help="with --sampling: independent drafts, draft i from q at temperature Ti "
                          "(q^(1/Ti) renormalised, which is softmax(z / Ti) for q = softmax(z)); "
                          "n is their count")
    cmp.add_argument("--rules", help="comma-separated rule names (default: all; listed below)")
    cmp.add_argument("--samples", type=int, default=20_000,
                     help="Monte Carlo samples where exact enumeration is too costly (default 20000)")
    cmp.add_argument("--truncation", type=int, default=None,
                     help="khisti-lp truncation s (default: the union of p's and q's top-0.95 nuclei)")
    cmp.add_argument("--normalize", action="store_true",
                     help="rescale p and q if they do not sum to 1 instead of refusing them")
    _add_common(cmp, "one JSON object per rule", seed=True)
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
    xv.add_argument("--vocab", type=int, default=6, metavar="V",
                    help="number of tokens V (default 6)")
    _drafts_option(xv)
    xv.add_argument("--samples", type=int, default=4000, help="steps per position (default 4000)")
    xv.add_argument("--rules", help="comma-separated torch rules (default: all of rrs, k-seq, "
                                    "khisti-lp, optimal)")
    _add_common(xv, "one JSON object", seed=True)
    _add_limits(xv)
    xv.set_defaults(func=_cross_validate)

    dd = sub.add_parser(
        "dd", help="facets of the acceptance-one cone by exact double description",
        description="Project the flows out of the acceptance-one polyhedral cone with pycddlib "
                    "(exact GMP arithmetic) and compare its facets with Hall's family.",
    )
    _vocab_option(dd, True, "number of tokens V")
    _drafts_option(dd, default=None, required=True)
    dd.add_argument("--model", choices=DD_MODELS, default="iid",
                    help="iid (tuples grouped into multisets) or free ordered tuples (default iid)")
    dd.add_argument("--method", choices=["generators", "elimination"], default="generators",
                    help="projection route (default generators)")
    _add_common(dd, "one JSON object")
    _add_limits(dd)
    dd.set_defaults(func=_dd)

    ver = sub.add_parser(
        "verify", help="verify a published claim exactly",
        description="Verify a published claim in exact arithmetic.",
        epilog=_claims_epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ver.add_argument("claim", choices=["theorem2", "theorem3", "hu-wor", "symbolic", "all"],
                     help="the claim to check (listed below)")
    _vocab_option(ver, False, "number of tokens V (theorem2, theorem3, hu-wor)")
    _drafts_option(ver, default=None, help="number of drafts n (theorem2, hu-wor)")
    ver.add_argument("--model", choices=DD_MODELS, default="iid",
                     help="theorem2's cone model (default iid)")
    ver.add_argument("--instances", type=int,
                     help="random rational instances (theorem3, hu-wor; default 20)")
    _add_common(ver, "one JSON object per check", seed=True)
    _add_limits(ver)
    ver.set_defaults(func=_verify)
    from .audit import add_audit_parser
    add_audit_parser(sub)

    from .drafters import add_lm_pairs_parser  # the real-LM commands (mdtheory.lm)

    add_lm_pairs_parser(sub)
    from .blockeff import add_block_efficiency_parser

    add_block_efficiency_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    parser = build_parser()
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # argparse has printed its usage error, help or version
            sys.stdout.flush()
            return int(exc.code or 0)
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except SolverError as exc:
        print(f"mdtheory: solver error: {exc}", file=sys.stderr)
        return EXIT_SOLVER
    except MdtheoryError as exc:
        print(f"mdtheory: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError as exc:  # an allocation beyond the machine that no size estimate caught
        print(f"mdtheory: error: out of memory: {exc or 'an allocation failed'}; the problem is too "
              "large for this machine", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("mdtheory: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader left (`| head`): stop quietly, as the Python docs advise
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is not a file descriptor (captured)
            pass
        return EXIT_BROKEN_PIPE
    except OSError as exc:  # a path that cannot be read or written (--out /proc/x, a full disk)
        where = f": {exc.filename}" if exc.filename else ""
        print(f"mdtheory: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
