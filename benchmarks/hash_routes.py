"""SHA-256 of every route's and every rule's outputs on a fixed instance set.

A refactor that must not change any output runs this before and after and compares the digests.
Each (instance, route, certify mode) contributes the value, cut, status, certificate name and gap,
base, plan or flow, support and masses, duals, duality gap, cut masses and the single-draft
baseline (timings excluded), or the error's class and message; each (instance, rule) the marginal
or conditional laws of a few draft tuples, the exact acceptance and the closed form. Instances:
random pairs, ties in q/p, zeros in p and q, p = q and point masses, for iid, without-replacement,
conditional-Poisson, independent, joint and greedy drafts (V <= 6, and the mnp route at V = 24).

Usage::

    PYTHONPATH=$PWD python benchmarks/hash_routes.py [--verbose]

Prints one digest per section and one for everything (``--verbose``: one per instance too). The
script re-runs itself with ``PYTHONHASHSEED=0``: the maxflow route's flow is one of many maximum
flows, and which one networkx's preflow-push finds follows Python's string hashing.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import warnings

import numpy as np

import mdtheory as md
from mdtheory.rules import RULES, make_rule

ROUTE_NAMES = ("prefix", "subsets", "otlp", "otlp-literal", "dual", "maxflow", "mnp", "closed-form")
FIELDS = ("value", "cut", "method", "sampling", "drafts", "status", "certificate", "certificate_gap",
          "base", "cut_p", "cut_q", "single_draft", "plan", "flow", "support", "support_probs",
          "duals", "duality_gap")


def _feed(h, obj) -> None:
    """Hash ``obj`` exactly: arrays by dtype, shape and bytes, floats by their bits."""
    if obj is None:
        h.update(b"N")
    elif isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        h.update(f"A{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    elif isinstance(obj, (float, np.floating)):
        h.update(b"F" + np.float64(obj).tobytes())
    elif isinstance(obj, (bool, np.bool_, int, np.integer, str)):
        h.update(f"{type(obj).__name__}:{obj}".encode())
    elif isinstance(obj, dict) or hasattr(obj, "_asdict"):
        items = obj.items() if isinstance(obj, dict) else obj._asdict().items()
        for k, v in sorted(items):
            h.update(f"K{k}".encode())
            _feed(h, v)
    elif isinstance(obj, (list, tuple)):
        h.update(f"L{len(obj)}".encode())
        for v in obj:
            _feed(h, v)
    else:
        raise TypeError(f"cannot hash {type(obj)}")


def instances():
    """(name, p, model) for the fixed set."""
    rng = np.random.default_rng(20261126)
    out = []
    for V, n in [(3, 2), (4, 2), (5, 3), (6, 2)]:
        for conc in (0.3, 2.0):
            p, q = rng.dirichlet(np.full(V, conc)), rng.dirichlet(np.full(V, conc))
            for s in ("iid", "without-replacement", "conditional-poisson", "greedy"):
                if s in ("without-replacement", "conditional-poisson", "greedy") and \
                        np.count_nonzero(q) < n:
                    continue
                out.append((f"rand-{s}-V{V}n{n}c{conc}", p, md.make_draft_model(q, n, s)))
            qs = rng.dirichlet(np.full(V, conc), size=n)
            out.append((f"rand-independent-V{V}n{n}c{conc}", p, md.Independent(qs)))
    # ties in q/p, zeros in p and q, p = q, point masses
    q = np.array([0.4, 0.3, 0.2, 0.1, 0.0])
    for label, p in [("ties", np.array([0.2, 0.15, 0.1, 0.05, 0.5])), ("equal", q.copy()),
                     ("point-last", np.array([0.0, 0.0, 0.0, 0.0, 1.0])),
                     ("point-first", np.array([1.0, 0.0, 0.0, 0.0, 0.0])),
                     ("zeros", np.array([0.0, 0.5, 0.0, 0.5, 0.0]))]:
        for s in ("iid", "without-replacement", "conditional-poisson", "greedy"):
            out.append((f"{label}-{s}", p, md.make_draft_model(q, 2, s)))
        out.append((f"{label}-independent", p, md.Independent(np.vstack([q, q[::-1]]))))
    # explicit joint tables: correlated drafts and an iid product
    p = np.array([0.5, 0.3, 0.2])
    table = np.array([[0.3, 0.1, 0.0], [0.05, 0.2, 0.05], [0.0, 0.1, 0.2]])
    out.append(("joint-correlated", p, md.Joint(table)))
    qj = np.array([0.2, 0.5, 0.3])
    out.append(("joint-product", p, md.Joint(np.einsum("i,j,k->ijk", qj, qj, qj))))
    # the mnp route on a larger alphabet
    V = 24
    p = rng.dirichlet(np.ones(V))
    out.append(("mnp-independent-V24", p, md.Independent(rng.dirichlet(np.ones(V), size=3))))
    out.append(("mnp-wor-V24", p, md.WithoutReplacement(rng.dirichlet(np.ones(V)), 3)))
    return out


def route_digest(p, model, verbose=False, label=""):
    h = hashlib.sha256()
    for name in ROUTE_NAMES:
        for mode in ("fast", "full"):
            h.update(f"{name}/{mode}".encode())
            if model.V > 8 and name not in ("prefix", "mnp", "dual"):
                h.update(b"skipped")
                continue
            try:
                res = md.optimal_acceptance(p, model, method=name, certify=mode)
            except md.MdtheoryError as exc:
                _feed(h, f"{type(exc).__name__}: {exc}")
                continue
            for f in FIELDS:
                h.update(f.encode())
                _feed(h, getattr(res, f))
    if verbose:
        print(f"  {label}: {h.hexdigest()[:16]}")
    return h.digest()


def rule_digest(p, model, verbose=False, label=""):
    h = hashlib.sha256()
    q = model.q
    if q is None or model.V > 8:
        return h.digest()
    rng = np.random.default_rng(5)
    tuples = model.sample(rng, 4)
    for name, cls in RULES.items():
        if cls.sampling != model.sampling and not (name == "optimal"):
            continue
        h.update(name.encode())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                kw = {"sampling": model.sampling} if name == "optimal" else {}
                rule = make_rule(name, p, q, model.n, **kw)
                _feed(h, getattr(rule, "marginal", None))
                _feed(h, rule.closed_form_acceptance())
                for x in tuples:
                    _feed(h, list(rule.conditional(x)))
                _feed(h, rule.exact_acceptance())
                _feed(h, rule.exact_output_law())
        except md.MdtheoryError as exc:
            _feed(h, f"{type(exc).__name__}: {exc}")
    if verbose:
        print(f"  rules {label}: {h.hexdigest()[:16]}")
    return h.digest()


def main(argv=None) -> None:
    if os.environ.get("PYTHONHASHSEED") != "0":
        # networkx's preflow-push visits nodes in an order that follows the string hash of their
        # names: the maxflow route's flow (not its value or cut) differs from process to process
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    total, routes, rules = hashlib.sha256(), hashlib.sha256(), hashlib.sha256()
    cases = instances()
    for label, p, model in cases:
        r = route_digest(p, model, args.verbose, label)
        s = rule_digest(p, model, args.verbose, label)
        routes.update(r)
        rules.update(s)
        total.update(r + s)
    print(f"instances: {len(cases)}")
    print(f"routes: {routes.hexdigest()}")
    print(f"rules:  {rules.hexdigest()}")
    print(f"all:    {total.hexdigest()}")


if __name__ == "__main__":
    main()
