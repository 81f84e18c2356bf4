"""Adversarial inputs for every public entry point, each run in its own process under limits.

Every case is a short program (a library call) or a command line, run in a fresh subprocess with a
wall-clock limit and an address-space limit, and classified by what it did:

=================  ==========================================================================
``ok``             answered (exit 0, 1, 4 or 5 for a command; a value for a call)
``refused``        a :class:`~mdtheory.errors.ProblemTooLargeError`, or exit 2 stating an estimate
``error``          a named mdtheory error in one line (exit 2 or 3 with one ``mdtheory:`` line)
``traceback``      anything else raised, or a traceback on stderr
``wrong``          a value off an independent reference (exact decimals, another route)
``over-limit``     killed at the wall-clock limit, or out of address space
``estimate-off``   answered, but the work's own estimate is off by more than 10x in CPU time or
                   peak memory (compared where either side is over 1 s or 256 MiB; below, both
                   are noise; CPU time, as the machine may be shared)
=================  ==========================================================================

The bar: no traceback, no wrong value, nothing over its limit, no estimate off by 10x. Run it
against another checkout by putting that checkout first on PYTHONPATH (``--root``)::

    python benchmarks/fuzz_api.py                 # the default cases, about 5 minutes on 2 cores
    python benchmarks/fuzz_api.py --root /work/main --json out.json
    python benchmarks/fuzz_api.py --only audit    # cases whose name holds "audit"
    python benchmarks/fuzz_api.py --seeds 3       # the seeded random cases for 3 seeds (default 1)

Each case's time limit is its own (most 30 s: the calls pass ``max_seconds=10`` where they take it,
so that a refusal or a stop at the limit, not the harness, ends long work); the address-space limit
is 8 GiB (the package's memory limit is 4 GiB of estimated working set).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
#: Address-space limit of each case (numba and BLAS reserve far more than they touch).
ADDRESS_SPACE = 8 * 2**30
#: Estimates are compared where the measured or estimated time is over this (seconds) ...
EST_MIN_SECONDS = 1.0
#: ... or the memory over this (bytes); below, import and timer noise dominate.
EST_MIN_BYTES = 256 * 2**20
#: Off by more than this factor either way: ``estimate-off``.
EST_FACTOR = 10.0

RUNNER = r'''
import json, math, resource, sys, time, traceback
import numpy as np
import mdtheory as md
from mdtheory import _budget
from mdtheory.errors import MdtheoryError, ProblemTooLargeError
import inspect
# the front door's limits where it takes them (a checkout from before they existed runs unlimited)
LIM = {"max_seconds": 10} if "max_seconds" in inspect.signature(md.optimal_acceptance).parameters \
    else {}
from mdtheory.solve import route_estimate
ns = {"np": np, "md": md, "_budget": _budget, "math": math, "LIM": LIM, "route_estimate": route_estimate}
setup, body, check = json.loads(sys.stdin.read())
exec(setup, ns)
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = cpu()
try:
    exec(body, ns)
except MdtheoryError as exc:
    msg = str(exc)
    kind = "refused" if isinstance(exc, ProblemTooLargeError) else "error"
    if not msg or "\n" in msg:
        kind = "traceback"
    print(json.dumps({"outcome": kind, "type": type(exc).__name__, "message": msg[:300]}))
    sys.exit(0)
except BaseException as exc:
    traceback.print_exc()
    print(json.dumps({"outcome": "traceback", "type": type(exc).__name__, "message": str(exc)[:300]}))
    sys.exit(0)
seconds = cpu() - t0  # CPU seconds: the machine may be shared, the work's own time is wanted
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
out = {"outcome": "ok", "seconds": seconds, "bytes": peak}
est = ns.get("estimate")
if est is not None:
    out["est_seconds"], out["est_bytes"] = float(est.seconds), float(est.bytes)
if check:
    exec(check, ns)  # sets wrong (str) when the value is off its reference
    if ns.get("wrong"):
        out = {"outcome": "wrong", "message": str(ns["wrong"])[:300]}
print(json.dumps(out))
'''


def api(name, body, setup="", check="", limit=30.0):
    """A library case: ``setup`` (untimed), ``body`` (timed; sets ``estimate`` to compare), and
    ``check`` (sets ``wrong`` to a message when the value is off an independent reference)."""
    return {"kind": "api", "name": name, "setup": textwrap.dedent(setup), "body": textwrap.dedent(body),
            "check": textwrap.dedent(check), "limit": limit}


def cli(name, *argv, limit=30.0, close_stdout=False):
    """A command-line case (``{d}`` in an argument is the case's scratch directory)."""
    return {"kind": "cli", "name": name, "argv": list(argv), "limit": limit,
            "close_stdout": close_stdout}


def warm_route(method: str, sampling: str) -> str:
    """Untimed setup: the route once on 4 tokens, so that its imports (scipy, HiGHS, networkx) and
    compiled kernels are loaded before the timed call, whose time is then the work's own."""
    return (f"u = np.full(4, .25); md.alpha_star(u, md.make_draft_model(u, 2, {sampling!r}), "
            f"method={method!r})\n")


# --------------------------------------------------------------------------------------- references
IID_REF = '''
from decimal import Decimal, localcontext
from fractions import Fraction
from mdtheory._validate import as_distribution
def iid_reference(p, q, n):
    p, q = as_distribution(p, "p"), as_distribution(q, "q")
    key = lambda i: Fraction(p[i]) / Fraction(q[i]) if q[i] > 0 else Fraction(10**400)
    with localcontext() as ctx:
        ctx.prec = 50
        sp = sq = best = Decimal(0)
        for i in sorted(range(len(p)), key=key):
            sp += Decimal(float(p[i])); sq += Decimal(float(q[i]))
            best = max(best, min(sq, Decimal(1)) ** n - sp)
        return float(1 - best)
'''


def iid_case(name, p, q, n, method="auto", tol=1e-9, limit=30.0):
    setup = IID_REF + f"p, q, n = np.array({list(map(float, p))}), np.array({list(map(float, q))}), {n}\n"
    body = (f"res = md.optimal_acceptance(p, q, n, method={method!r}, **LIM)\n"
            f"estimate = route_estimate(md.IID(q, n), res.method)\n")
    check = (f"ref = iid_reference(p, q, n)\nif not abs(res.value - ref) <= {tol}: "
             f"wrong = f'alpha* = {{res.value!r}}, reference {{ref!r}}'\n"
             "if res.status == 'optimal' and not abs(1 + res.cut_p - res.cut_q - ref) <= 1e-7: "
             "wrong = 'its cut misses the reference'\n")
    return api(name, body, setup, check, limit)


def cases(seeds: int) -> list[dict]:
    out = []
    # ---- huge and tiny n
    near_one = ([0.5, 0.0, 0.5], [1 - 2**-53, 2**-54, 2**-54])
    for n in (10**8, 10**12, 10**15):
        out.append(iid_case(f"alpha near-one mass n={n:g}", *near_one, n, tol=1e-12))
        out.append(iid_case(f"alpha near-one mass subsets n={n:g}", *near_one, n, method="subsets",
                            tol=1e-12))
    for n in (10**30, 2**53 + 1, 2**63, -1, 0):
        for pre in ("", "md.alpha_star(np.full(3000, 1/3000), np.full(3000, 1/3000), 3)\n"):
            out.append(api(f"alpha_star uniform n={n} {'warm' if pre else 'cold'}",
                           f"v = md.alpha_star(np.full(4, .25), np.full(4, .25), {n})", pre))
    for bad in ("1.5", "True", "'3'", "None", "np.float64(2)"):
        out.append(api(f"alpha_star n={bad}", f"md.alpha_star([.5, .5], [.5, .5], {bad})"))
    for method in ("dual", "maxflow", "otlp"):
        for n in (10**4, 10**6):
            out.append(api(f"{method} iid V=3 n={n:g}", f"""
                model = md.IID(q, {n})
                estimate = route_estimate(model, {method!r})
                v = md.alpha_star(p, model, method={method!r}, **LIM)""",
                           "rng = np.random.default_rng(0); p, q = rng.dirichlet(np.ones(3)), "
                           "rng.dirichlet(np.ones(3))\n" + warm_route(method, "iid")))
    # ---- estimates against measured work, LP routes on a grid
    for V, n, method in ((12, 4, "otlp"), (16, 4, "otlp"), (20, 4, "dual"), (16, 4, "maxflow"),
                         (30, 6, "otlp"), (6, 3, "otlp-literal"), (200, 3, "mnp"), (2000, 4, "mnp")):
        for sampling in ("iid", "without-replacement"):
            out.append(api(f"estimate {method} {sampling} V={V} n={n}", f"""
                model = md.make_draft_model(q, {n}, {sampling!r})
                estimate = route_estimate(model, {method!r})
                v = md.alpha_star(p, model, method={method!r}, **LIM)""",
                           f"rng = np.random.default_rng(1); p, q = rng.dirichlet(np.ones({V})), "
                           f"rng.dirichlet(np.ones({V}))\n" + warm_route(method, sampling), limit=40))
    # ---- huge V
    out.append(api("iid prefix V=1e7", "v = md.alpha_star(p, p[::-1].copy(), 8)",
                   "p = np.random.default_rng(0).random(10**7); p /= p.sum()", limit=60))
    for V in (10**5, 10**7):
        out.append(api(f"independent V={V:g}", "v = md.alpha_star(p, np.stack([p, p[::-1]]), "
                       "sampling='independent')", f"p = np.random.default_rng(0).random({V}); "
                       "p /= p.sum()", limit=40))
    out.append(api("joint V^n huge", "md.alpha_star(np.full(40, 1/40), np.full((40,) * 5, 40.0**-5), "
                   "sampling='joint')"))
    # ---- extreme temperatures and masses
    for T in (1e-300, 1e-8, 1e8, 1e300):
        out.append(iid_case(f"softmax temperature {T:g}", *softmax_pair(50, T), 4, tol=1e-9))
    out.append(iid_case("subnormal masses", [5e-324, 0.5, 0.5], [0.5, 5e-324, 0.5], 3, tol=1e-12))
    out.append(iid_case("tiny masses 1e-300", [1e-300, 1 - 1e-300, 0.0], [0.0, 0.5, 0.5], 1000))
    out.append(iid_case("point masses", [1.0, 0.0], [0.0, 1.0], 7, tol=1e-15))
    for sampling in ("without-replacement", "conditional-poisson", "greedy"):
        out.append(api(f"{sampling} subnormal masses", f"""
            r = md.optimal_acceptance([5e-324, .5, .5, 0.0], [.25, 5e-324, .5, .25], 2, {sampling!r},
                                      **LIM)
            s = md.optimal_acceptance([5e-324, .5, .5, 0.0], [.25, 5e-324, .5, .25], 2, {sampling!r},
                                      method='subsets')""",
                       check="if not abs(r.value - s.value) <= 1e-9: wrong = (r.value, s.value)"))
    # ---- malformed arrays
    for bad in ("[np.nan, 1.0]", "[np.inf, 0]", "[-0.5, 1.5]", "[]", "[[0.5], [0.5, 0.5]]",
                "['a', 'b']", "np.zeros((2, 2, 2))", "[0.5, 0.6]", "object()", "[1e308, 1e308]"):
        out.append(api(f"alpha_star p={bad}", f"md.alpha_star({bad}, [0.5, 0.5], 2)"))
        out.append(api(f"alpha_star q={bad}", f"md.alpha_star([0.5, 0.5], {bad}, 2)"))
    for kw in ("method='nope'", "sampling='nope'", "certify='nope'", "method=None",
               "max_seconds=-1", "max_bytes=0"):
        out.append(api(f"alpha_star {kw}", f"md.alpha_star([0.5, 0.5], [0.5, 0.5], 2, {kw})"))
    out.append(api("wor n over support", "md.alpha_star([.5, .5, 0], [.5, .5, 0], 3, "
                   "'without-replacement')"))
    # ---- rules
    rules = "from mdtheory.rules import RULES, make_rule\nimport warnings\n"
    for name in ("rrs", "rrs-wor", "khisti", "khisti-lp", "gr-softmax", "optimal", "greedy",
                 "global-resolution", "spechub"):
        out.append(api(f"make_rule {name} small", f"""
            r = make_rule({name!r}, p, q, 2) if {name!r} in RULES else None""",
                       rules + "rng = np.random.default_rng(2); p, q = rng.dirichlet(np.ones(8)), "
                       "rng.dirichlet(np.ones(8))"))
        out.append(api(f"make_rule {name} n=1e9", f"r = make_rule({name!r}, p, q, 10**9) "
                       f"if {name!r} in RULES else None",
                       rules + "p = q = np.full(50, 1/50)"))
    out.append(api("make_rule optimal independent p = a draft's law", """
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            r = make_rule('optimal', Q[0], Q, 8, sampling='independent', max_seconds=10)""",
                   rules + "Q = np.random.default_rng(0).dirichlet(np.full(1000, .3), size=8)", limit=45))
    # ---- audit
    audit = ("from mdtheory import audit\nimport time\n"
             "P3, Q3 = np.array([.2, .4, .4]), np.array([.6, .3, .1])\n"
             "def lossy(p, q, d, rng):\n    return int(d[0])\n"
             "def raising(p, q, d, rng):\n    raise RuntimeError('boom')\n"
             "def garbage(p, q, d, rng):\n    return 'x'\n"
             "calls = [0]\n"
             "def slows(p, q, d, rng):\n    calls[0] += 1\n"
             "    if calls[0] > 200: time.sleep(0.01)\n    return int(d[0])\n")
    out.append(api("audit lossy 10 samples", "r = audit(lossy, P3, Q3, 2, samples=10)", audit,
                   "wrong = r.lossless and 'an inconclusive run reads lossless'"))
    out.append(api("audit lossy 200 samples", "r = audit(lossy, P3, Q3, 2, samples=200)", audit,
                   "wrong = r.lossless and 'a lossy verifier reads lossless'"))
    out.append(api("audit raising verifier", "audit(raising, P3, Q3, 2, samples=100)", audit))
    out.append(api("audit garbage verifier", "audit(garbage, P3, Q3, 2, samples=100)", audit))
    out.append(api("audit slowing verifier", "audit(slows, P3, Q3, 2, samples=30000, max_seconds=5)",
                   audit, limit=30))
    out.append(api("audit n=1e30", "audit(lossy, P3, Q3, 10**30, samples=100)", audit))
    out.append(api("audit detect_tv=0", "audit(lossy, P3, Q3, 2, detect_tv=0)", audit))
    # ---- seeded random pairs: the prefix route against exact decimals and the subsets route
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        for V, n in ((6, 3), (12, 50), (40, 10**6), (9, 10**13)):
            a = rng.dirichlet(np.full(V, rng.choice([0.1, 1.0, 10.0])))
            b = rng.dirichlet(np.full(V, rng.choice([0.1, 1.0, 10.0])))
            out.append(iid_case(f"random seed={seed} V={V} n={n:g}", a, b, n, tol=1e-9))
    # ---- commands
    out += [
        cli("cli check-acceptance closed stdout", "check-acceptance", "{d}/p.npy", "{d}/q.npy",
            close_stdout=True),
        cli("cli check-acceptance --json closed stdout", "check-acceptance", "{d}/p.npy",
            "{d}/q.npy", "--json", close_stdout=True),
        cli("cli check-acceptance n=1e30", "check-acceptance", "{d}/p.npy", "{d}/q.npy", "-n",
            "1" + "0" * 30),
        cli("cli compare-selectors n=1e30", "compare-selectors", "{d}/p.npy", "{d}/q.npy", "-n",
            "1" + "0" * 30),
        cli("cli compare-selectors --sampling all n=1e30", "compare-selectors", "{d}/p.npy",
            "{d}/q.npy", "-n", "1" + "0" * 30, "--sampling", "all"),
        cli("cli audit n=1e30", "audit", "mdtheory.rules.optimal:Optimal", "{d}/p.npy", "{d}/q.npy",
            "-n", "1" + "0" * 30),
        cli("cli audit lossy 10 samples", "audit", "{d}/lossy.py:f", "{d}/p3.npy", "{d}/q3.npy",
            "-n", "2", "--samples", "10"),
        cli("cli otlp V=30 n=6 inf seconds", "check-acceptance", "{d}/p30.npy", "{d}/q30.npy", "-n",
            "6", "--method", "otlp", "--max-seconds", "inf"),
        cli("cli otlp bundled n=4", "check-acceptance", "{d}/p.npy", "{d}/q.npy", "-n", "4",
            "--method", "otlp"),
        cli("cli dual V=3 n=1e6", "check-acceptance", "{d}/p3.npy", "{d}/q3.npy", "-n", "1000000",
            "--method", "dual"),
        cli("cli lm-pairs ngram order 1e5", "lm-pairs", "--positions", "10", "--draft", "ngram",
            "--order", "100000", "--out", "{d}/lm", "--quiet", limit=60),
        cli("cli compare-selectors rules optimal", "compare-selectors", "{d}/p.npy", "{d}/q.npy",
            "-n", "8", "--rules", "optimal"),
        cli("cli verify bad claim", "verify", "nope"),
        cli("cli dd huge", "dd", "-m", "40", "-K", "3"),
        cli("cli block-efficiency help", "block-efficiency", "--help"),
        cli("cli no args"),
        cli("cli check-acceptance missing file", "check-acceptance", "{d}/none.npy", "{d}/q.npy"),
        cli("cli check-acceptance malformed npy", "check-acceptance", "{d}/bad.npy", "{d}/q.npy"),
    ]
    return out


def softmax_pair(V, T):
    z = np.random.default_rng(5).standard_normal(V) * 3
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        p = np.exp(z - z.max())
        w = (z - z.max()) / T
        q = np.exp(w - w.max())
    return p / p.sum(), q / q.sum()


def scratch(d: Path) -> None:
    rng = np.random.default_rng(0)
    np.save(d / "p.npy", np.load(ROOT / "examples" / "p.npy"))
    np.save(d / "q.npy", np.load(ROOT / "examples" / "q.npy"))
    np.save(d / "p3.npy", np.array([.2, .4, .4]))
    np.save(d / "q3.npy", np.array([.6, .3, .1]))
    np.save(d / "p30.npy", rng.dirichlet(np.ones(30)))
    np.save(d / "q30.npy", rng.dirichlet(np.ones(30)))
    (d / "bad.npy").write_bytes(b"\x93NUMPY garbage")
    (d / "lossy.py").write_text("def f(p, q, d, rng):\n    return int(d[0])\n")


def _limits():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run_case(case: dict, root: Path, d: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
    if case["kind"] == "api":
        argv = [sys.executable, "-c", RUNNER]
        stdin = json.dumps([case["setup"], case["body"], case["check"]])
    else:
        argv = [sys.executable, "-m", "mdtheory", *[a.replace("{d}", str(d)) for a in case["argv"]]]
        stdin = ""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        if case.get("close_stdout"):  # the command starts with file descriptor 1 closed (`>&-`)
            argv = ["sh", "-c", 'exec "$@" >&-', "sh", *argv]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=err, env=env,
                                cwd=d, preexec_fn=_limits)
        proc.stdin.write(stdin.encode())
        proc.stdin.close()
        status, usage = 0, None
        for _ in range(int(case["limit"] * 20) + 1):  # bounded: one poll per 50 ms up to the limit
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.05)
        else:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            return {"outcome": "over-limit", "message": f"killed after {case['limit']:g} s"}
        seconds = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    rc = os.waitstatus_to_exitcode(status)
    if case["kind"] == "api":
        line = stdout.strip().splitlines()[-1] if stdout.strip() else ""
        try:
            res = json.loads(line)
        except json.JSONDecodeError:
            kind = "over-limit" if "MemoryError" in stderr or rc < 0 else "traceback"
            return {"outcome": kind, "message": f"rc {rc}: {stderr.strip()[-300:]}"}
        if res["outcome"] == "traceback" and res.get("type") == "MemoryError":
            res["outcome"] = "traceback"  # an allocation no estimate refused
        return _estimate_verdict(res)
    res = {"seconds": seconds, "rc": rc, "message": stderr.strip()[-300:]}
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith(("audit", "sampling"))]
    if "Traceback" in stderr or rc < 0:
        res["outcome"] = "traceback"
    elif rc in (0, 1, 4, 5) or (rc == 141 and case.get("close_stdout")):
        res["outcome"] = "ok"
    elif rc in (2, 3) and len(lines) == 1 and lines[0].startswith(("mdtheory", "usage")):
        res["outcome"] = "refused" if "estimated" in stderr or "stopped after" in stderr else "error"
    elif rc == 2 and stderr.startswith("usage:"):
        res["outcome"] = "error"
    else:
        res["outcome"] = "traceback"
    return res


def _estimate_verdict(res: dict) -> dict:
    if res["outcome"] != "ok" or "est_seconds" not in res:
        return res
    t, et = res["seconds"], res["est_seconds"]
    b, eb = res["bytes"], res["est_bytes"]
    off = []
    if max(t, et) > EST_MIN_SECONDS and not (t / EST_FACTOR <= et <= t * EST_FACTOR):
        off.append(f"time {t:.3g} s, estimated {et:.3g} s")
    if max(b, eb) > EST_MIN_BYTES and not (b / EST_FACTOR <= eb <= b * EST_FACTOR):
        off.append(f"memory {b / 2**20:.3g} MiB, estimated {eb / 2**20:.3g} MiB")
    if off:
        res = dict(res, outcome="estimate-off", message="; ".join(off))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(ROOT), help="checkout to test (first on PYTHONPATH)")
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    ap.add_argument("--seeds", type=int, default=1, help="seeds of the random cases (default 1)")
    ap.add_argument("--json", help="write every case's outcome here")
    args = ap.parse_args(argv)
    todo = [c for c in cases(args.seeds) if args.only in c["name"]]
    counts, rows = Counter(), []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        scratch(d)
        for case in todo:
            res = run_case(case, Path(args.root), d)
            counts[res["outcome"]] += 1
            rows.append({"name": case["name"], **res})
            if res["outcome"] not in ("ok", "refused", "error"):
                print(f"{res['outcome']:>12}  {case['name']}: {res.get('message', '')[:200]}",
                      flush=True)
    print(f"{len(todo)} cases in {time.perf_counter() - t0:.0f} s ({args.root}): "
          + ", ".join(f"{k} {counts[k]}" for k in ("ok", "refused", "error", "traceback", "wrong",
                                                 "over-limit", "estimate-off")))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    bad = sum(counts[k] for k in ("traceback", "wrong", "over-limit", "estimate-off"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
