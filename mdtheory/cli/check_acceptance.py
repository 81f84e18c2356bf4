"""``mdtheory check-acceptance P Q``: alpha*, the acceptance-one test and the optimal cut set."""

from __future__ import annotations

import argparse
import json

import numpy as np

from .._validate import batch_rows
from ..errors import OptimalityGapError
from ..models.registry import SAMPLINGS, file_samplings
from ..solve import METHODS, acceptance_rows
from ._common import (
    COMMANDS,
    EXIT_BOUNDS,
    EXIT_OK,
    add_common,
    add_limits,
    drafts_option,
    fmt_set,
    independent_drafts,
    load_pair,
)

#: The result's fields in one ``--json`` row (``value`` as ``alpha_star``), before and after ``vocab``.
JSON_HEAD = ("value", "acceptance_one", "witness", "cut", "margin", "single_draft", "drafts", "sampling",
             "method")
JSON_TAIL = ("status", "certificate", "certificate_gap", "success", "message")


def add_parser(sub) -> None:
    """Add ``check-acceptance`` to the CLI's subparsers."""
    check = sub.add_parser(
        "check-acceptance", help=COMMANDS["check-acceptance"][1],
        description="Optimal acceptance alpha* = 1 + min_T [p(T) - Q(T)] of n-draft speculative "
                    "sampling, whether it is exactly one, a witness set, and the optimal cut set. "
                    "Exit code 4: for some row the solver proved only a lower and an upper bound "
                    "on alpha* that did not meet (both printed; the other rows as usual); known "
                    "for --sampling independent where p is one of the drafts' laws or near one.",
    )
    check.add_argument("P", help="target distribution, .npy of shape (V,) or (B, V)")
    check.add_argument("Q", help="draft distribution, .npy of shape (V,) or (B, V); with "
                       "--sampling independent, shape (n, V), one law per draft")
    drafts_option(check, default=None,
                  help="number of drafts n (default 2; independent: the rows of Q)")
    check.add_argument("--sampling", default="iid",
                       choices=file_samplings(),
                       help="draft model (default iid; wor is short for without-replacement: "
                            "successive sampling, as torch.multinomial without replacement; greedy: "
                            "Hu et al.'s greedy draft set; independent: one law per draft, Q of "
                            "shape (n, V), n its rows; a Q of shape (V,) is refused unless "
                            "--drafts 1, as n identical drafts are --sampling iid)")
    check.add_argument("--method", default="auto", choices=["auto", *METHODS],
                       help="route to alpha* (default auto: the fastest exact one)")
    check.add_argument("--normalize", action="store_true",
                       help="rescale rows that do not sum to 1 instead of refusing them")
    add_common(check, "one JSON object per row")
    add_limits(check)
    check.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    P, Q, q_ndim = load_pair(args)
    drafts = args.drafts
    model_cls = SAMPLINGS[args.sampling]
    if model_cls.rows_per_draft:  # Q holds one row per draft: a single draft model
        Q = independent_drafts(Q, q_ndim, drafts, args.Q)
        drafts = None
    elif drafts is None:
        drafts = 2
    code = EXIT_OK
    rows = batch_rows(len(P), 1 if model_cls.rows_per_draft else len(Q))
    for i, res, why in acceptance_rows(P, Q, drafts, args.sampling, method=args.method,
                                       max_seconds=args.max_seconds, max_bytes=args.max_bytes):
        if res is None:  # the row's solver proved only bounds
            _print_bounds(args, why, i, rows, P.shape[1], len(Q) if drafts is None else drafts,
                          model_cls.sampling)
            code = EXIT_BOUNDS
            continue
        p = P[i % len(P)]
        p_cut, q_cut, single = res.cut_p, res.cut_q, res.single_draft
        lower = why.lower if isinstance(why, OptimalityGapError) else None
        if lower is not None:  # the minimum-norm point bracketed what the default route bounds
            code = EXIT_BOUNDS
        if args.json:
            head, tail = res.to_dict(JSON_HEAD), res.to_dict(JSON_TAIL)
            if res.acceptance_one and res.status != "optimal":
                head["acceptance_one"] = None  # not proven: only the upper bound alpha* <= 1
            print(json.dumps({"row": i, "alpha_star": head.pop("value"), **head, "vocab": int(p.size),
                              **tail, **({} if lower is None else {"lower": lower})}))
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
        if lower is not None:
            print(f"  {lower:.12g} <= alpha* <= {res.value:.12g}: proven bounds only, the "
                  f"minimum-norm point left a gap of {res.value - lower:.3g}")
        hall = "p(T) >= Q(T) for every T (Hall's condition"
        hall += "; iid: p(T) >= q(T)^n, Khisti et al. Thm 2 / Remark 2)" \
            if model_cls.lex_base_closed_form else ")"
        print(f"  optimal cut set T* = {fmt_set(res.cut)}")
        if res.acceptance_one and res.status != "optimal":  # a cut of value one proves nothing
            print("  acceptance one: not proven (only alpha* <= 1 is)")
        elif res.acceptance_one:
            print(f"  acceptance one: yes, {hall}")
        else:
            print(f"  acceptance one: no; T* is a witness: p(T*) = {p_cut:.10g} < Q(T*) = "
                  f"{q_cut:.10g} (margin {q_cut - p_cut:.6g})")
        if model_cls.single_q:  # one draft drawn from q, whatever this model's first draft is
            q = Q[i % len(Q)]
            single = float(np.minimum(p / p.sum(), q / q.sum()).sum())
            print(f"  single-draft baseline 1 - TV(p, q) = {single:.12g}")
        else:
            print(f"  single-draft baseline 1 - TV(p, q_1) = {single:.12g} (q_1: the first draft's law)")
    return code


def _print_bounds(args: argparse.Namespace, exc: OptimalityGapError, i: int, rows: int, V: int,
                  n: int, sampling: str) -> None:
    """A row of ``check-acceptance`` whose solver proved only bounds on alpha* (exit code 4)."""
    if args.json:
        print(json.dumps({"row": i, "alpha_star": None, "lower": exc.lower, "upper": exc.upper,
                          "drafts": n, "sampling": sampling, "vocab": V,
                          "status": "bounds", "success": False, "message": str(exc)}))
        return
    head = f"row {i}: " if rows > 1 else ""
    print(f"{head}V = {V}, n = {n} drafts, {sampling} sampling")
    print(f"  {exc.lower:.12g} <= alpha* <= {exc.upper:.12g}: proven bounds only, the solver left a "
          f"gap of {exc.upper - exc.lower:.3g}")
