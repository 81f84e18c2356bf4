"""One SHA-256 over the outputs of every CLI command and every selection rule and route.

A refactor that must change no output runs this before and after and compares the hashes:

    PYTHONPATH=$PWD .venv/bin/python benchmarks/hash_outputs.py            # the hash
    PYTHONPATH=$PWD .venv/bin/python benchmarks/hash_outputs.py --verbose  # one hash per case

What is hashed:

- every CLI command (and its ``--help``) on the bundled examples (examples/p.npy, q.npy,
  p_batch.npy, examples/verifiers/): the exit code and the stdout and stderr bytes, with wall-clock
  times (``seconds``, ``prepare ms``, ``ms``) replaced by a placeholder, as they differ between runs;
- every rule of :data:`mdtheory.rules.RULES` on a fixed instance set: its exact acceptance and
  output law (or the error it raises), bytes of the float64 arrays;
- every route of :data:`mdtheory.METHODS` on every draft model of the same instances: alpha*, the
  cut, the status and certificate (or the error it raises).

``lm-pairs`` and ``block-efficiency`` run when textgenrnn's data files are installed (the hash then
differs from a machine without them; ``--verbose`` names the skipped cases). The script runs
under ``PYTHONHASHSEED=0`` (it restarts itself so): the max-flow route's certificate gap, a
rounding error, depends on the order in which Python iterates over sets.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"
P, Q, PB = str(EX / "p.npy"), str(EX / "q.npy"), str(EX / "p_batch.npy")
VER = EX / "verifiers"

#: Wall-clock times: (pattern, replacement) on the output text.
TIMES = (
    (re.compile(r'("(?:seconds|prepare_ms)": )[-0-9.e+]+'), r"\1T"),  # JSON Lines
    (re.compile(r"(exact GMP, )[0-9.]+( s\))"), r"\1T\2"),  # dd
    (re.compile(r"(cases checked: \d+, )[0-9.]+( s)"), r"\1T\2"),  # verify CLAIM
    (re.compile(r" +[0-9.]+(  (?:as recorded|CHANGED))$", re.M), r" T\1"),  # verify all
)


def scrub(text: str, argv: list[str]) -> str:
    """``text`` with its wall-clock times replaced by ``T``."""
    for pat, repl in TIMES:
        text = pat.sub(repl, text)
    if argv[0] == "compare-selectors" and "--json" not in argv:  # a table's last column: ms
        text = re.sub(r" +[0-9.]+$", " T", text, flags=re.M)
    return text


def cli_cases(tmp: Path) -> list[list[str]]:
    """The CLI invocations hashed."""
    cases = [["--help"], ["--version"]]
    for cmd in ("check-acceptance", "compare-selectors", "cross-validate", "dd", "verify", "audit",
                "lm-pairs", "block-efficiency"):
        cases.append([cmd, "--help"])
    for extra in ([], ["--json"]):
        cases += [
            ["check-acceptance", P, Q, *extra],
            ["check-acceptance", P, Q, "--drafts", "4", *extra],
            ["check-acceptance", PB, Q, "--drafts", "3", *extra],
            ["check-acceptance", P, Q, "--sampling", "wor", "-n", "3", *extra],
            ["check-acceptance", P, Q, "--sampling", "conditional-poisson", "-n", "3", *extra],
            ["check-acceptance", P, Q, "--sampling", "greedy", "-n", "3", *extra],
            ["check-acceptance", P, PB, "--sampling", "independent", *extra],
            ["compare-selectors", P, Q, "--samples", "500", *extra],
            ["compare-selectors", P, Q, "-n", "3", "--samples", "500", *extra],
            ["compare-selectors", P, Q, "--sampling", "all", "--draft-temperatures", "0.5,1,2",
             *extra],
            ["compare-selectors", P, PB, "--sampling", "independent", *extra],
            ["dd", "--vocab", "3", "--drafts", "2", *extra],
            ["dd", "--vocab", "3", "--drafts", "2", "--model", "free", *extra],
            ["verify", "theorem2", *extra],
            ["verify", "theorem3", "--instances", "3", *extra],
            ["verify", "hu-wor", "--instances", "3", *extra],
            ["verify", "symbolic", *extra],
            ["audit", f"{VER}/rrs.py:verify", P, Q, "-n", "2", "--samples", "3000", *extra],
            ["audit", f"{VER}/rrs_skip_repeat.py:law", P, Q, "-n", "2", "--exact", *extra],
            ["cross-validate", "--batch", "2", "--samples", "300", *extra],
        ]
        for method in ("prefix", "subsets", "otlp", "dual", "maxflow", "mnp", "closed-form",
                       "otlp-literal"):
            cases.append(["check-acceptance", P, Q, "-n", "2", "--method", method, *extra])
    cases += [  # bad input: one line and exit code 2
        ["check-acceptance", P, str(tmp / "missing.npy")],
        ["check-acceptance", P, Q, "--drafts", "0"],
        ["check-acceptance", P, Q, "--sampling", "bogus"],
        ["compare-selectors", P, Q, "--rules", "nope"],
        ["compare-selectors", PB, Q],
        ["dd", "--vocab", "30", "--drafts", "9"],
        ["verify", "theorem3", "--drafts", "2"],
        ["audit", f"{VER}/rrs.py:nope", P, Q, "-n", "2"],
        ["lm-pairs", "--positions", "0", "--draft", "ngram", "--out", str(tmp / "x")],
        ["block-efficiency", "--drafts", "2", "--length", "2", "--rules", ""],
    ]
    return cases


def lm_cases(tmp: Path) -> list[list[str]]:
    """The commands that need the pretrained char-LSTM (textgenrnn's data files)."""
    return [
        ["lm-pairs", "--positions", "6", "--draft", "tempered", "--out", str(tmp / "lm"), "--quiet"],
        ["block-efficiency", "--drafts", "2", "--length", "2", "--steps", "3", "--rules",
         "single,rrs,optimal", "--quiet"],
        ["block-efficiency", "--drafts", "2", "--length", "2", "--steps", "3", "--rules", "rrs",
         "--quiet", "--json"],
    ]


def run_cli(argv: list[str]) -> bytes:
    from mdtheory.cli import main

    out, err = io.StringIO(), io.StringIO()
    env = {"COLUMNS": "100"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    text = f"exit {code}\n--stdout\n{out.getvalue()}--stderr\n{err.getvalue()}"
    return scrub(text, argv).replace(str(ROOT), "ROOT").encode()


def instances() -> list[tuple[str, np.ndarray, np.ndarray, int]]:
    """A fixed instance set: (label, p, q, n), small enough for every rule's exact enumeration."""
    rng = np.random.default_rng(20261126)
    out = [("uniform-q", np.array([0.5, 0.3, 0.2]), np.full(3, 1 / 3), 2),
           ("equal", np.full(4, 0.25), np.full(4, 0.25), 2),
           ("zeros", np.array([0.6, 0.0, 0.4, 0.0]), np.array([0.1, 0.5, 0.2, 0.2]), 2)]
    for k, (V, n) in enumerate([(4, 2), (5, 3), (6, 2), (5, 2)]):
        out.append((f"dirichlet-{k}", rng.dirichlet(np.ones(V)), rng.dirichlet(np.full(V, 0.5)), n))
    return out


def arrays(obj) -> bytes:
    """Bytes of a result: float64 arrays' bytes, other values' repr."""
    if isinstance(obj, np.ndarray):
        return obj.dtype.str.encode() + repr(obj.shape).encode() + np.ascontiguousarray(obj).tobytes()
    if isinstance(obj, (tuple, list)):
        return b"(" + b",".join(arrays(x) for x in obj) + b")"
    if isinstance(obj, dict):
        return b"{" + b",".join(k.encode() + b":" + arrays(v) for k, v in sorted(obj.items())) + b"}"
    if isinstance(obj, (float, np.floating)):
        return np.float64(obj).tobytes()
    return repr(obj).encode()


def guarded(f) -> bytes:
    from mdtheory.errors import MdtheoryError

    try:
        return arrays(f())
    except MdtheoryError as exc:
        return f"{type(exc).__name__}: {exc}".encode()


def rule_outputs() -> dict[str, bytes]:
    from mdtheory.rules import RULES, make_rule

    out = {}
    for label, p, q, n in instances():
        for name in RULES:
            def run(name=name, p=p, q=q, n=n):
                rule = make_rule(name, p, q, n)
                return (rule.exact_acceptance(), rule.exact_output_law(), rule.closed_form_acceptance())
            out[f"rule {name} {label}"] = guarded(run)
    return out


def route_outputs() -> dict[str, bytes]:
    import mdtheory as md
    from mdtheory.models.registry import make_draft_model

    out = {}
    for label, p, q, n in instances():
        models = {s: (lambda s=s, q=q, n=n: make_draft_model(q, n, s))
                  for s in ("iid", "without-replacement", "conditional-poisson", "greedy")}
        qs = np.array([q, np.roll(q, 1), q[::-1]][:n])
        models["independent"] = lambda qs=qs: make_draft_model(qs, None, "independent")
        for sampling, build in models.items():
            for method in ("auto", *md.METHODS):
                def run(build=build, method=method, p=p):
                    res = md.optimal_acceptance(p, build(), method=method)
                    return (res.value, res.cut, res.status, res.certificate, res.method,
                            res.acceptance_one)
                out[f"route {method} {sampling} {label}"] = guarded(run)
    return out


def main() -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":  # the max-flow's rounding follows set order
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--verbose", action="store_true", help="print one hash per case")
    args = ap.parse_args()
    from mdtheory.errors import MdtheoryError
    from mdtheory.language.lm import textgenrnn_files

    parts: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cases = cli_cases(tmp)
        try:
            textgenrnn_files()
            cases += lm_cases(tmp)
        except MdtheoryError:
            if args.verbose:
                print("skipped: lm-pairs and block-efficiency runs (no textgenrnn data files)")
        for argv in cases:
            t0 = time.perf_counter()
            key = "cli " + " ".join(argv).replace(str(ROOT), "ROOT").replace(d, "TMP")
            parts[key] = run_cli(argv).replace(d.encode(), b"TMP")
            if args.verbose:
                print(f"{time.perf_counter() - t0:6.2f} s  {key}", file=sys.stderr)
        lm = tmp / "lm"
        if lm.is_dir():
            parts["cli lm-pairs files"] = b"".join(arrays(np.load(lm / f)) for f in ("P.npy", "Q.npy"))
    parts.update(rule_outputs())
    parts.update(route_outputs())
    total = hashlib.sha256()
    for key, value in parts.items():
        total.update(key.encode() + b"\0" + hashlib.sha256(value).digest())
        if args.verbose:
            print(hashlib.sha256(value).hexdigest()[:16], key)
    print(f"{total.hexdigest()}  ({len(parts)} outputs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
