"""One SHA-256 over the outputs of the sequence level: every block verifier, the block optimum and
bound, the block audit and the block commands.

A refactor that must change no output runs this before and after and compares the hashes:

    PYTHONPATH=$PWD .venv/bin/python benchmarks/hash_blocks.py            # one hash per section
    PYTHONPATH=$PWD .venv/bin/python benchmarks/hash_blocks.py --verbose  # one hash per case

What is hashed (float64 bits, exact fractions by value):

- ``verifiers``: every registered block verifier (the token verifier with every selection rule, the
  multi-path verifier with every rule that runs on iid drafts) on every draft model it takes (K iid
  drafts, trees with iid and without-replacement children): its exact block law over every draw of
  the drafts (:func:`mdtheory.blocks.exact_block_law`), its law and one sampled block on fixed
  draft arrays, its exact block efficiency in fractions on Sun et al.'s toy, or the error it raises;
- ``optimum``: :func:`mdtheory.blocks.optimal_block_efficiency` (value, acceptance, status, dual
  bound, the block law) and :func:`mdtheory.blocks.block_efficiency_bound` (value, acceptance,
  nested and prefix-set bounds, cells) on a fixed instance set;
- ``audit``: :func:`mdtheory.blocks.audit_block` on the bundled block and tree verifiers
  (examples/verifiers/), sampled and exact, on K iid drafts and on trees;
- ``commands``: ``mdtheory audit --block`` and ``mdtheory block-efficiency --instance`` (text and
  ``--json``, bad input included), with wall-clock times replaced by a placeholder; with textgenrnn's
  data files installed, three short ``block-efficiency`` simulations on the char-LSTM.

The script calls the block audit with ``tree=`` when :func:`~mdtheory.blocks.audit_block` takes it,
else with ``branching=`` and ``sampling=`` (the same draft model), and spells trees drawn without
replacement as the draft tree accepts them, so that two commits with either form compare.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import inspect
import io
import json
import os
import re
import sys
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VER = ROOT / "examples" / "verifiers"

#: Wall-clock times in the commands' output: (pattern, replacement).
TIMES = (
    (re.compile(r'("(?:seconds|total|laws|solve|build|law|lp|dual|check)": )[-0-9.e+]+'), r"\1T"),
)


def _feed(h, obj) -> None:
    """Hash ``obj`` exactly: arrays by dtype, shape and bytes, floats by their bits."""
    if obj is None:
        h.update(b"N")
    elif isinstance(obj, np.ndarray):
        if obj.dtype == object:
            h.update(f"O{obj.shape}".encode())
            for v in obj.ravel():
                _feed(h, v)
        else:
            a = np.ascontiguousarray(obj)
            h.update(f"A{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
    elif isinstance(obj, Fraction):
        h.update(f"Q{obj.numerator}/{obj.denominator}".encode())
    elif isinstance(obj, (bool, np.bool_)):
        h.update(f"B{bool(obj)}".encode())
    elif isinstance(obj, (float, np.floating)):
        h.update(b"F" + np.float64(obj).tobytes())
    elif isinstance(obj, (int, np.integer)):
        h.update(f"I{int(obj)}".encode())
    elif isinstance(obj, str):
        h.update(f"S{obj}".encode())
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)}".encode())
        for k, v in sorted(obj.items(), key=lambda kv: repr(kv[0])):
            _feed(h, k)
            _feed(h, v)
    elif isinstance(obj, (list, tuple)):
        h.update(f"L{len(obj)}".encode())
        for v in obj:
            _feed(h, v)
    else:
        raise TypeError(f"cannot hash {type(obj)}")


def digest(obj) -> bytes:
    h = hashlib.sha256()
    _feed(h, obj)
    return h.digest()


def guarded(f):
    """``f()``, or the class and message of the package error it raises."""
    from mdtheory.errors import MdtheoryError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return f()
    except MdtheoryError as exc:
        return f"{type(exc).__name__}: {exc}"


def tree(branching, sampling):
    """A draft tree, children drawn ``"iid"`` or ``"without-replacement"``."""
    from mdtheory.blocks import DraftTree

    try:
        return DraftTree(branching, sampling)
    except Exception:  # noqa: BLE001 -- a draft tree that spells it "wor"
        return DraftTree(branching, {"without-replacement": "wor"}.get(sampling, sampling))


def instances():
    """(label, target, draft): Sun et al.'s toy and seeded random laws over V = 2 and 3."""
    from mdtheory.blocks import random_instance, sun_toy

    return [("toy", *sun_toy()), ("random:3:1", *random_instance(3, 1)),
            ("random:3:7", *random_instance(3, 7)), ("random:2:5", *random_instance(2, 5, 0.3))]


def draft_models():
    """(label, K, L, tree or None): K iid drafts and small trees."""
    out = [("K1L2", 1, 2, None), ("K2L1", 2, 1, None), ("K2L2", 2, 2, None), ("K3L1", 3, 1, None)]
    for b in ((2, 1), (2, 2), (1, 2), (3,)):
        for s in ("iid", "without-replacement"):
            out.append((f"tree{','.join(map(str, b))}-{s}", int(np.prod(b)), len(b), (b, s)))
    return out


def verifier_variants():
    """(label, name, keywords) for every registered verifier and the rules it takes."""
    from mdtheory import blocks
    from mdtheory.rules import RULES

    out = []
    for name, cls in blocks.VERIFIERS.items():
        # what the verifier takes: its declaration, or on a tree without declarations its name's
        role = getattr(cls, "takes_rule", {"token": "verify", "multipath": "select"}.get(name))
        if role == "verify":  # every rule (those for other draft models refuse K iid drafts)
            out += [(f"{name}:{r}", name, {"rule": r}) for r in RULES]
        elif role == "select":  # the rules for iid drafts
            out += [(f"{name}:{r}", name, {"rule": r}) for r in RULES if RULES[r].sampling == "iid"]
        else:
            out.append((name, name, {}))
    return out


def verifier_outputs() -> dict[str, bytes]:
    from mdtheory import blocks

    out = {}
    drafts_for = {1: np.array([[0], [1], [0]]), 2: np.array([[0, 1], [1, 0], [0, 0], [1, 1]])}
    for label, name, kw in verifier_variants():
        for mlabel, K, L, spec in draft_models():
            def build(name=name, kw=kw, spec=spec):
                t = None if spec is None else tree(*spec)
                return blocks.make_verifier(name, tree=t, **kw) if t is not None else \
                    blocks.make_verifier(name, **kw)
            made = guarded(build)
            if isinstance(made, str):
                out[f"verifier {label} {mlabel}"] = digest(made)
                continue
            for ilabel, target, draft in instances():
                if ilabel == "random:3:7" and K * L > 4:
                    continue
                key = f"verifier {label} {mlabel} {ilabel}"
                out[key + " law"] = digest(guarded(
                    lambda v=made, t=target, d=draft, K=K, L=L: blocks.exact_block_law(v, t, d, K, L)))
                x = drafts_for[L][:K] if spec is None else None
                if x is not None and x.shape == (K, L):
                    def one(v=made, t=target, d=draft, x=x):
                        rng = np.random.default_rng(11)
                        return (v.law(t, d, x), [v.sample(t, d, x, rng).tolist() for _ in range(8)])
                    out[key + " drafts"] = digest(guarded(one))
        if not kw or kw.get("rule") == "rrs":
            def fractions(name=name, kw=kw):
                return blocks.make_verifier(name, **kw).block_efficiency(*exact_toy(), 1, 2)
            out[f"verifier {label} toy fractions"] = digest(guarded(fractions))
    return out


def exact_toy():
    """Sun et al.'s toy in exact fractions."""
    def law(probs):
        return lambda ctx: np.array(probs, dtype=object)
    return law([Fraction(1, 3), Fraction(2, 3)]), law([Fraction(2, 3), Fraction(1, 3)])


def optimum_outputs() -> dict[str, bytes]:
    from mdtheory import blocks

    out = {}
    for ilabel, target, draft in instances():
        for mlabel, K, L, spec in draft_models():
            if K * L > 4 and ilabel != "toy":
                continue
            kw = {"n": K, "length": L} if spec is None else {"tree": tree(*spec)}

            def opt(target=target, draft=draft, kw=kw):
                r = blocks.optimal_block_efficiency(target, draft, **kw)
                return (r.value, r.acceptance, r.status, r.upper_bound, r.certificate_gap, r.validity_tv,
                        r.support, r.support_probs, r.block_law, r.lp)

            def bound(target=target, draft=draft, kw=kw):
                r = blocks.block_efficiency_bound(target, draft, **kw)
                return (r.value, r.acceptance, r.nested, r.prefix_set, r.cells, r.expansions,
                        r.complete, r.presence_exact)

            out[f"optimum {ilabel} {mlabel}"] = digest(guarded(opt))
            out[f"bound {ilabel} {mlabel}"] = digest(guarded(bound))
    return out


def _audit(f, target, draft, n, length, spec=None, **kw):
    from mdtheory.blocks import audit_block

    if spec is not None:
        if "tree" in inspect.signature(audit_block).parameters:
            kw["tree"] = tree(*spec)
        else:
            kw.update(branching=spec[0], sampling=spec[1])
    return audit_block(f, target, draft, n, length, **kw)


def audit_outputs() -> dict[str, bytes]:
    from mdtheory.audit.verifier import load_target
    from mdtheory.blocks import random_instance, sun_toy

    out = {}
    toy, rnd = ("toy", *sun_toy()), ("random:3:1", *random_instance(3, 1))
    cases = [
        ("block_verification.py:verify", toy, 1, 2, None, {"samples": 3000}),
        ("block_verification.py:law", toy, 1, 2, None, {"exact": True}),
        ("block_verification.py:law", rnd, 1, 2, None, {"exact": True}),
        ("block_tempered_draft.py:law", toy, 1, 2, None, {"exact": True}),
        ("block_missing_q.py:law", rnd, 1, 2, None, {"exact": True}),
        ("block_unnormalised_residual.py:law", rnd, 1, 2, None, {"exact": True}),
        ("tree_traversal.py:verify", toy, 2, 2, None, {"samples": 3000}),
        ("tree_traversal.py:law", toy, 2, 2, None, {"exact": True}),
        ("tree_traversal.py:law", rnd, 2, 2, None, {"exact": True}),
        ("tree_traversal.py:law_tree", rnd, 4, 2, ((2, 2), "iid"), {"exact": True}),
        ("tree_traversal.py:law_tree", rnd, 4, 2, ((2, 2), "without-replacement"), {"exact": True}),
        ("tree_traversal.py:verify_tree", rnd, 4, 2, ((2, 2), "iid"), {"samples": 2000}),
        ("tree_traversal.py:verify_tree", rnd, 4, 2, ((2, 2), "without-replacement"),
         {"samples": 2000}),
    ]
    fields = ("verdict", "lossless", "tv", "tv_upper", "pvalue", "acceptance", "acceptance_ci95",
              "alpha_star", "block_efficiency", "block_efficiency_ci95", "samples", "detectable_tv",
              "optimum_pvalue", "violations", "invalid_mass", "worst_tokens", "sampling",
              "branching", "cells")
    for spec, (ilabel, target, draft), n, L, shape, kw in cases:
        f = load_target(str(VER / spec))

        def run(f=f, target=target, draft=draft, n=n, L=L, shape=shape, kw=kw):
            r = _audit(f, target, draft, n, L, shape, **kw)
            return [getattr(r, k) for k in fields]

        label = "exact" if kw.get("exact") else "sampled"
        out[f"audit {spec} {ilabel} {n}x{L} {shape} {label}"] = digest(guarded(run))
    return out


def cli_cases() -> list[list[str]]:
    B = f"{VER}/block_verification.py"
    T = f"{VER}/tree_traversal.py"
    cases = [["block-efficiency", "--help"]]
    for extra in ([], ["--json"]):
        cases += [
            ["audit", "--block", f"{B}:verify", "--instance", "toy", "-n", "1", "-L", "2",
             "--samples", "2000", *extra],
            ["audit", "--block", f"{B}:law", "--instance", "random:3:1", "-n", "1", "-L", "2",
             "--exact", *extra],
            ["audit", "--block", f"{VER}/block_missing_q.py:law", "--instance", "random:3:1", "-n", "1",
             "-L", "2", "--exact", *extra],
            ["audit", "--block", f"{T}:law", "--instance", "toy", "-n", "2", "-L", "2", "--exact",
             *extra],
            ["audit", "--block", f"{T}:law_tree", "--tree", "2,2", "--instance", "random:3:1",
             "--exact", *extra],
            ["audit", "--block", f"{T}:law_tree", "--tree", "2,2", "--instance", "random:3:1",
             "--exact", "--sampling", "without-replacement", *extra],
            ["audit", "--block", f"{T}:verify_tree", "--tree", "2,2", "--instance", "random:3:1",
             "--samples", "2000", *extra],
            ["block-efficiency", "--instance", "toy", "-K", "2", "-L", "2", "--verifier",
             "token,block,multipath,gbv,trie,traversal", "--rules", "single,rrs,optimal",
             "--optimum", *extra],
            ["block-efficiency", "--instance", "random:3:1", "-K", "2", "-L", "2", "--verifier",
             "token,multipath", "--rules", "rrs,k-seq,khisti-lp", "--selection", "optimal", *extra],
            ["block-efficiency", "--instance", "random:3:1", "--tree", "2,2", "--verifier",
             "token,traversal,block", "--rules", "rrs,optimal", "--optimum", *extra],
            ["block-efficiency", "--instance", "random:3:1", "--tree", "2,1", "--sampling",
             "without-replacement", "--verifier", "token,traversal,block", "--rules", "rrs-wor,optimal",
             "--optimum", *extra],
            ["block-efficiency", "--instance", "random:3:1", "-K", "3", "-L", "1", "--sampling",
             "without-replacement", "--verifier", "token", "--rules", "rrs-wor", *extra],
        ]
    cases += [  # bad input: one line and exit code 2
        ["audit", "--block", f"{B}:verify", "--instance", "toy", "-n", "2", "-L", "2", "--tree", "2,x"],
        ["audit", "--block", f"{B}:verify", "--instance", "toy", "-n", "3", "-L", "2", "--tree", "2,2"],
        ["audit", "--block", f"{B}:verify", "--instance", "toy"],
        ["block-efficiency", "--instance", "toy", "--tree", "2,2", "--verifier", "gbv"],
        ["block-efficiency", "--instance", "toy", "-K", "2", "-L", "2", "--verifier", "nope"],
        ["block-efficiency", "--instance", "toy", "-K", "2", "--verifier", "block"],
        ["block-efficiency", "--instance", "toy", "--tree", "2,2", "-K", "3", "--verifier", "block"],
        ["block-efficiency", "--instance", "toy", "--tree", "3,1", "--sampling", "without-replacement",
         "--verifier", "traversal"],
        ["block-efficiency", "--instance", "toy", "-K", "2", "-L", "2", "--verifier", "token",
         "--rules", "rrs-wor"],
    ]
    return cases


def lm_cases() -> list[list[str]]:
    """Block-efficiency simulations on the bundled char-LSTM (textgenrnn's data files)."""
    return [
        ["block-efficiency", "--drafts", "2", "--length", "2", "--steps", "3", "--verifier",
         "block,multipath,gbv,trie,traversal", "--quiet", "--json"],
        ["block-efficiency", "--tree", "2,2", "--steps", "3", "--verifier", "token,traversal",
         "--rules", "rrs", "--quiet"],
        ["block-efficiency", "--tree", "2,1", "--sampling", "without-replacement", "--steps", "3",
         "--verifier", "token,traversal", "--rules", "rrs-wor", "--quiet", "--json"],
    ]


def run_cli(argv: list[str]) -> bytes:
    from mdtheory.cli import main

    out, err = io.StringIO(), io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    text = f"exit {code}\n--stdout\n{out.getvalue()}--stderr\n{err.getvalue()}"
    for pat, repl in TIMES:
        text = pat.sub(repl, text)
    return text.replace(str(ROOT), "ROOT").encode()


def command_outputs(verbose: bool) -> dict[str, bytes]:
    from mdtheory.errors import MdtheoryError

    cases = cli_cases()
    try:
        try:
            from mdtheory.language.lm import textgenrnn_files
        except ImportError:  # pragma: no cover -- the module moved
            textgenrnn_files = None
        if textgenrnn_files is not None:
            textgenrnn_files()
            cases += lm_cases()
    except MdtheoryError:
        if verbose:
            print("skipped: block-efficiency simulations (no textgenrnn data files)")
    out = {}
    for argv in cases:
        key = "cli " + " ".join(argv).replace(str(ROOT), "ROOT")
        raw = run_cli(argv)
        out[key] = raw
        if verbose and "--json" in argv:
            for line in raw.decode().splitlines():
                with contextlib.suppress(json.JSONDecodeError):
                    json.loads(line)
    return out


def main() -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":  # set iteration order in the optimum's LP rows
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--verbose", action="store_true", help="print one hash per case")
    ap.add_argument("--dump", metavar="DIR", help="also write each command's output to DIR")
    args = ap.parse_args()
    sections = {"verifiers": verifier_outputs(), "optimum": optimum_outputs(),
                "audit": audit_outputs(), "commands": command_outputs(args.verbose)}
    if args.dump:
        d = Path(args.dump)
        d.mkdir(parents=True, exist_ok=True)
        for i, (key, value) in enumerate(sections["commands"].items()):
            (d / f"{i:03d}.txt").write_bytes(key.encode() + b"\n" + value)
    total = hashlib.sha256()
    for name, parts in sections.items():
        h = hashlib.sha256()
        for key, value in parts.items():
            h.update(key.encode() + b"\0" + hashlib.sha256(value).digest())
            if args.verbose:
                print(hashlib.sha256(value).hexdigest()[:16], key)
        total.update(h.digest())
        print(f"{name:10s} {h.hexdigest()}  ({len(parts)} outputs)")
    print(f"{'all':10s} {total.hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
