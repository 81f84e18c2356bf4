"""Adversarial inputs for every public entry point, each run in its own process under limits.

Every case is a short program (a library call), a command line or a shell command, run in a fresh
subprocess with a wall-clock limit and an address-space limit, and classified by what it did:

=================  ==========================================================================
``ok``             answered (exit 0, 1, 4 or 5 for a command, or the case's own exit codes; a
                   value for a call)
``refused``        a :class:`~mdtheory.errors.ProblemTooLargeError`, or exit 2 stating an estimate
``error``          a named mdtheory error in one line (exit 2 or 3 with one ``mdtheory:`` line)
``traceback``      anything else raised, or a traceback on stderr
``wrong``          a value off an independent reference (exact decimals, another route, another
                   implementation), an exit code or output the case does not allow, or a
                   ``RuntimeWarning`` / ``ComplexWarning`` leaked by a library call
``over-limit``     killed at the wall-clock limit, or out of address space
``estimate-off``   answered, but the work's own estimate is off by more than 10x in time or peak
                   memory, resident or reserved (address space: an estimate may count what is
                   reserved; compared where either side is over 1 s or 256 MiB; below, both are
                   noise). Time is CPU time, as the machine may be shared, except for estimates
                   made from a wall-clock pilot of the work itself (the language models' measured
                   calls), which see the same load as the run: those are compared with wall time
=================  ==========================================================================

The bar: no traceback, no wrong value, nothing over its limit, no estimate off by 10x. The cases
cover the front door (huge and tiny n, extreme masses, malformed arrays, every route's estimate),
the rules, the audits and their watchdog, the guards of every path (batches, block audits,
laws that never return, the bound's precision and estimate, complex laws, closed streams, ascii
output, Ctrl-C, the commands' ``--max-bytes``), the block optimum, bound and audit against
independent references (1 + alpha* at L = 1, block verification at K = 1, bound >= optimum),
draft trees, the language models (the char-LSTM and tiny Hugging Face checkpoints built here, no
download), the torch bridge, the engines' contracts, and every console block of the README. Run it
against another checkout by putting that checkout first on PYTHONPATH (``--root``)::

    python benchmarks/fuzz_api.py                 # every case, about 30 minutes on 2 cores
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
import re
import resource
import signal
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
import json, math, resource, sys, time, traceback, warnings
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
setup, body, check, clock = json.loads(sys.stdin.read())
exec(setup, ns)
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
LEAKS = (RuntimeWarning, getattr(getattr(np, "exceptions", np), "ComplexWarning", RuntimeWarning))
def leaked(caught):
    bad = [w for w in caught if issubclass(w.category, LEAKS)]
    return f"{bad[0].category.__name__} leaked: {bad[0].message}" if bad else None
def vmpeak():  # bytes of address space at the peak (Linux; 0 elsewhere)
    try:
        with open("/proc/self/status") as f:
            return next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmPeak:"))
    except (OSError, StopIteration):
        return 0
base, vbase = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, vmpeak()
t0, w0 = cpu(), time.perf_counter()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        exec(body, ns)
    except MdtheoryError as exc:
        msg = str(exc)
        kind = "refused" if isinstance(exc, ProblemTooLargeError) else "error"
        if not msg or "\n" in msg:
            kind = "traceback"
        out = {"outcome": kind, "type": type(exc).__name__, "message": msg[:300]}
        if leaked(caught):
            out = {"outcome": "wrong", "message": leaked(caught)[:300]}
        print(json.dumps(out))
        sys.exit(0)
    except BaseException as exc:
        traceback.print_exc()
        print(json.dumps({"outcome": "traceback", "type": type(exc).__name__, "message": str(exc)[:300]}))
        sys.exit(0)
seconds = cpu() - t0 if clock == "cpu" else time.perf_counter() - w0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
out = {"outcome": "ok", "seconds": seconds, "bytes": peak, "vbytes": vmpeak() - vbase, "clock": clock}
est = ns.get("estimate")
if est is not None:
    out["est_seconds"], out["est_bytes"] = float(est.seconds), float(est.bytes)
if check:
    exec(check, ns)  # sets wrong (str) when the value is off its reference
    if ns.get("wrong"):
        out = {"outcome": "wrong", "message": str(ns["wrong"])[:300]}
if leaked(caught):
    out = {"outcome": "wrong", "message": leaked(caught)[:300]}
print(json.dumps(out))
'''


def api(name, body, setup="", check="", limit=30.0, clock="cpu"):
    """A library case: ``setup`` (untimed), ``body`` (timed; sets ``estimate`` to compare), and
    ``check`` (sets ``wrong`` to a message when the value is off an independent reference; run only
    when the body returned). ``clock``: ``"wall"`` where the estimate comes from a wall-clock pilot
    of the work itself."""
    return {"kind": "api", "name": name, "setup": textwrap.dedent(setup), "body": textwrap.dedent(body),
            "check": textwrap.dedent(check), "limit": limit, "clock": clock}


def cli(name, *argv, limit=30.0, close_stdout=False, close_stderr=False, codes=None, env=None,
        interrupt=None, stdout_has=None, stdout_is=None, stderr_lacks=None, cwd="scratch"):
    """A command-line case (``{d}`` in an argument is the case's scratch directory, ``{root}`` the
    checkout's root). ``codes``: the exit codes allowed (default any of 0, 1, 4, 5, or a one-line
    error with 2 or 3); ``env``: extra environment; ``interrupt``: seconds after which SIGINT is
    sent (the command must then end within ``limit``); ``stdout_has`` / ``stdout_is``: text the
    standard output must hold / be (seconds and a table's millisecond column masked);
    ``stderr_lacks``: text the standard error must not hold; ``cwd``: ``"scratch"`` or
    ``"root"``."""
    return {"kind": "cli", "name": name, "argv": list(argv), "limit": limit,
            "close_stdout": close_stdout, "close_stderr": close_stderr, "codes": codes, "env": env or {},
            "interrupt": interrupt, "stdout_has": stdout_has, "stdout_is": stdout_is,
            "stderr_lacks": stderr_lacks, "cwd": cwd}


def shell(name, script, limit=30.0, codes=(0,), stdout_has=None):
    """A bash script case (``{root}``: the checkout's root), judged like a command."""
    return dict(cli(name, limit=limit, codes=codes, stdout_has=stdout_has), kind="shell", script=script)


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
    # ---- verifier calls that do not return (interrupted at max_seconds by the audits' watchdog)
    hang = audit + ("def sleeps(p, q, d, rng):\n    calls[0] += 1\n"
                    "    if calls[0] == 300: time.sleep(10**6)\n    return int(d[0])\n"
                    "def spins(p, q, d, rng):\n    calls[0] += 1\n"
                    "    if calls[0] == 300:\n        for _ in range(10**12): pass\n"
                    "    return int(d[0])\n"
                    "def law_sleeps(p, q, d):\n    time.sleep(10**6)\n")
    out.append(api("hung audit verifier sleeps", "audit(sleeps, P3, Q3, 2, samples=5000, "
                   "max_seconds=2)", hang))
    out.append(api("hung audit verifier spins", "audit(spins, P3, Q3, 2, samples=5000, "
                   "max_seconds=2)", hang))
    out.append(api("hung audit exact law", "audit(law_sleeps, P3, Q3, 2, exact=True, "
                   "max_seconds=2)", hang))
    out.append(api("hung audit_block verifier", "md.audit_block(lambda t, d, x, rng: "
                   "time.sleep(10**6), lambda c: np.array([.6, .4]), lambda c: np.array([.5, .5]), "
                   "1, 1, samples=100, max_seconds=2)", "import time\n"))
    # ---- the language-model functions' limits (the char-LSTM, V = 465)
    lm = ("from mdtheory.language import drafters\nfrom mdtheory.language.langmodel import "
          "LanguageModel\nrng = np.random.default_rng(0)\n"
          "class Uniform(LanguageModel):\n    V, bos = 5, 0\n"
          "    def _laws(self, contexts):\n        return np.full((len(contexts), 5), 0.2)\n"
          "U = Uniform()\n")
    lstm = lm + "T = drafters.load_model('char-lstm', 1.0)\nD = drafters.make_drafter('tempered', " \
        "T, rng, temperature=1.3)\n"
    out.append(api("lm lm_pairs 1e9 positions", "drafters.lm_pairs(10**9, U, U, rng)", lm))
    out.append(api("lm lm_pairs char-lstm 1e6 positions", "drafters.lm_pairs(10**6, T, D, rng, "
                   "max_seconds=10)", lstm))
    out.append(api("lm lm_pairs char-lstm 512 positions", """
        estimate = _budget.lm_pairs(512, 465, (T.step_seconds(8) + D.step_seconds(8)) * 64)
        P, Q = drafters.lm_pairs(512, T, D, rng, max_seconds=10)""", lstm,
                   "wrong = P.shape != (512, 465) and 'shape'"))
    out.append(api("lm distill_ngram order 1e5", "drafters.distill_ngram(T, rng, 10**5)", lstm))
    out.append(api("lm make_drafter ngram order 1e5", "drafters.make_drafter('ngram', T, rng, "
                   "order=10**5)", lstm))
    out.append(api("lm distill_ngram char-lstm order 3", """
        estimate = _budget.ngram_distillation(3, 465, 16, 300, 7, T.step_seconds(16) * 300)
        law = drafters.distill_ngram(T, rng, 3, 16, 300, max_seconds=10)""", lstm))
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
        cli("cli hung audit verifier", "audit", "{d}/hang.py:f", "{d}/p3.npy", "{d}/q3.npy", "-n",
            "2", "--max-seconds", "2"),
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
    return out + guard_cases() + block_cases(seeds) + tree_cases() + lm_cases() + torch_cases() \
        + engine_cases()


# ------------------------------------------------------------------------------------ the guards
#: Setup of the block cases: the toy, seeded Dirichlet instances, laws that hang, complex laws.
BLOCKS = """
import time
from mdtheory import blocks
from mdtheory.blocks import block_efficiency_bound, random_instance, sun_toy
from mdtheory.blocks import bound as bound_mod, optimum as optimum_mod
P2, Q2 = (lambda c: np.array([0.6, 0.4])), (lambda c: np.array([0.5, 0.5]))
def hangs(c):
    if len(c) == 1:
        time.sleep(10**6)
    return np.array([0.6, 0.4])
def complex_law(c):
    return np.array([0.6 + 0.1j, 0.4])
def first_token(target, draft, drafts, rng):
    return np.array([int(drafts[0, 0])])
"""
#: The language-model setup: the bundled char-LSTM and the block-efficiency simulation's module.
SIMULATION = """
try:
    from mdtheory.blocks import simulation as blockeff
except ImportError:
    from mdtheory.language import blockeff
from mdtheory.blocks import iid_drafts
def block_estimate(target, drafter, rule, K, L, steps, start=1):
    # the run's own estimate: the models' measured calls where this checkout has them
    if hasattr(blockeff, "model_estimate"):
        models = blockeff.model_estimate(target, drafter, iid_drafts(K, L), steps, 1, start)
        return blockeff.with_models(blockeff.estimate(rule, target.V, K, L, steps, models.seconds), models)
    return blockeff.estimate(rule, target.V, K, L, steps)
"""
#: Tiny Hugging Face checkpoints (random GPT-2s) built into the scratch directory, no download.
HF_BUILD = """
import sys, torch, transformers
transformers.logging.set_verbosity_error()
for name, seed, width in (("hf_target", 0, 64), ("hf_draft", 1, 32)):
    torch.manual_seed(seed)
    transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=2000, n_positions=1024, n_embd=width, n_layer=2, n_head=2, bos_token_id=0,
        eos_token_id=0, pad_token_id=0)).save_pretrained(sys.argv[1] + "/" + name)
"""


def guard_cases() -> list[dict]:
    """The guards of every path: batches, the mnp route's memory, set laws, the commands' limits and
    streams, block audits, language models, the bound (a case's leading letter groups a guard's cases)."""
    out = []
    batch = ("rng = np.random.default_rng(0)\n"
             "P, Q = (rng.dirichlet(np.full(20000, 0.5), size=3) for _ in range(2))\n"
             + warm_route("mnp", "without-replacement"))
    # a, b: a batch's rows share one deadline; a row stopped at it keeps its proven bounds
    # (random and LLM-like rows at V = 300 .. 20,000 close within their estimates, which refuse
    # the larger sizes up front: these cases run the batch path; the front door's tests hold the
    # rows that reach the deadline)
    out.append(api("a batch of mnp rows max_seconds=5", "r = md.optimal_acceptance(P, Q, 4, "
                   "'without-replacement', method='mnp', max_seconds=5)", batch, limit=60))
    out.append(api("b batch row stopped with its bounds", """
        try:
            r = md.optimal_acceptance(P, Q, 4, 'without-replacement', method='mnp', max_seconds=0.3)
        except md.OptimalityGapError as exc:
            assert exc.lower <= exc.upper
            raise""", batch, limit=60))
    # c: the minimum-norm point's reservations at V = 10,000
    out.append(api("c mnp wor V=1e4", """
        model = md.make_draft_model(q, 4, 'without-replacement')
        estimate = route_estimate(model, 'mnp')
        r = md.optimal_acceptance(p, model, method='mnp', max_seconds=20)""",
                   "rng = np.random.default_rng(3); p, q = rng.dirichlet(np.full(10000, .5), size=2)\n"
                   + warm_route("mnp", "without-replacement"), limit=60))
    # d: the without-replacement certificate's set law
    out.append(cli("d check-acceptance wor n=49", "check-acceptance", "{d}/p.npy", "{d}/q.npy", "-n",
                   "49", "--sampling", "without-replacement", limit=120, codes=(0, 2, 4)))
    # e: cross-validate's memory, and --max-bytes everywhere
    out.append(cli("e cross-validate V=152000 B=8", "cross-validate", "--vocab", "152000", "--batch", "8",
                   "--samples", "100", limit=120, codes=(0, 2)))
    for argv in (["cross-validate"], ["dd", "-m", "3", "-K", "2"], ["verify", "hu-wor", "--instances", "2"],
                 ["block-efficiency", "--instance", "toy", "-n", "2", "-L", "2"],
                 ["check-acceptance", "{d}/p.npy", "{d}/q.npy", "-n", "2"]):
        out.append(cli(f"e {argv[0]} --max-bytes 1K", *argv, "--max-bytes", "1K", codes=(2,),
                       stderr_lacks="unrecognized arguments", limit=60))
    # f, g: compare-selectors at V = 10^7, and every draft model at V = 32,000
    out.append(cli("f compare-selectors V=1e7 n=4", "compare-selectors", "{d}/p1e7.npy", "{d}/q1e7.npy", "-n",
                   "4", limit=120, codes=(0, 2, 4)))
    out.append(cli("g compare-selectors --sampling all V=32000", "compare-selectors", "{d}/p32k.npy",
                   "{d}/q32k.npy", "-n", "4", "--sampling", "all", limit=180, codes=(0, 4),
                   stdout_has="highest alpha*"))
    # h: block-efficiency on Hugging Face checkpoints (and the char-LSTM) against its estimate
    out.append(api("h block-efficiency hf estimate", """
        estimate = block_estimate(T, D, "rrs", 4, 4, 200)
        r = blockeff.block_efficiency(T, D, "rrs", 4, 4, 200, np.random.default_rng(0), start=(0,),
                                      max_seconds=1e9)""",
                   SIMULATION + "import torch; torch.set_num_threads(1)\nimport os\n"
                   "from mdtheory.language.hf import load_hf\nd = os.environ['FUZZ_SCRATCH']\n"
                   "T, D = load_hf('hf:' + d + '/hf_target'), load_hf('hf:' + d + '/hf_draft')\n",
                   limit=300, clock="wall"))
    out.append(api("h block-efficiency char-lstm estimate", """
        estimate = block_estimate(T, D, "rrs", 4, 3, 60)
        r = blockeff.block_efficiency(T, D, "rrs", 4, 3, 60, np.random.default_rng(0), start=(T.bos,),
                                      max_seconds=1e9)""",
                   SIMULATION + "from mdtheory.language import drafters\n"
                   "T = drafters.load_model('char-lstm', 1.0)\n"
                   "D = drafters.make_drafter('tempered', T, np.random.default_rng(0), temperature=1.5)\n",
                   limit=300, clock="wall"))
    out.append(api("h README says where --max-seconds goes for one's own models", "text = open(path).read()",
                   "import os\npath = os.environ['FUZZ_ROOT'] + '/README.md'",
                   "own = text[text.index('## Your own models'):][:3000]\n"
                   "if '--max-seconds' not in own: wrong = 'no --max-seconds in Your own models'"))
    # i: a law that never returns, in the optimum, the bound and the block audit
    for name, call in (("optimum", "md.optimal_block_efficiency(hangs, Q2, 1, 2, max_seconds=2)"),
                       ("bound", "block_efficiency_bound(hangs, Q2, 1, 2, max_seconds=2)"),
                       ("audit_block", "md.audit_block(first_token, hangs, Q2, 1, 2, max_seconds=2)"),
                       ("audit_block draft", "md.audit_block(first_token, P2, hangs, 1, 2, max_seconds=2)")):
        out.append(api(f"i hung law {name}", call, BLOCKS))
    out.append(cli("i cli audit --block hung target law", "audit", "--block", "{d}/blocklaws.py:first",
                   "--target", "{d}/blocklaws.py:hangs", "--draft", "{d}/blocklaws.py:draft", "-n", "1",
                   "-L", "2", "--max-seconds", "2", codes=(2,)))
    # j: audit_block's sizes
    for n, L in ((10**30, 2), (1, 10**4), (1, 10**6), (1, 10**8), (10**9, 2), (10**6, 2)):
        out.append(api(f"j audit_block n={n:g} L={L:g}", f"md.audit_block(first_token, P2, Q2, {n}, {L})",
                       BLOCKS))
    for n, L in ((10**30, 2), (1, 10**8), (10**6, 2)):
        out.append(cli(f"j cli audit --block n={n:g} L={L:g}", "audit", "--block",
                       "{d}/blocklaws.py:first", "--instance", "toy", "-n", str(n), "-L", str(L), codes=(2,)))
    # k: the bound's precision, estimate, context, limits and warnings
    out.append(api("k bound float32 laws", """
        r = block_efficiency_bound(lambda c: p32, lambda c: q32, 2, 1)""",
                   BLOCKS + "z = np.random.default_rng(3).standard_normal(50).astype(np.float32)\n"
                   "p32 = (np.exp(z) / np.exp(z).sum()).astype(np.float32); p32[0] += np.float32(3e-5)\n"
                   "q32 = np.full(50, 1 / 50, dtype=np.float32)\n",
                   "p64 = p32.astype(np.float64); q64 = q32.astype(np.float64)\n"
                   "ref = 1 + md.alpha_star(p64 / p64.sum(), q64 / q64.sum(), 2)\n"
                   "if abs(r.value - ref) > 1e-9: wrong = (r.value, ref)"))
    for V, L, e in ((4000, 1, 256), (32000, 1, 256), (32000, 2, 64), (465, 4, 1024), (20, 10**6, 1024)):
        out.append(api(f"k bound estimate V={V} L={L:g} expansions={e}", f"""
            estimate = bound_mod.estimate({V}, {L}, {e})
            r = block_efficiency_bound(P, Q, 4, {L}, expansions={e}, max_seconds=1e9)""",
                       BLOCKS + f"rng = np.random.default_rng({V}); P, Q = (blocks.ConstantLaw(rng.dirichlet("
                       f"np.ones({V}))) for _ in range(2))\n"
                       "block_efficiency_bound(P, Q, 1, 1, max_seconds=1e9)\n", limit=60))
    for kw in ("context=(1.5,)", "context=('a',)", "max_seconds=float('nan')", "max_bytes=float('nan')"):
        out.append(api(f"k bound {kw}", f"r = block_efficiency_bound(P2, Q2, 2, 2, {kw})", BLOCKS,
                       "wrong = 'accepted'"))
        out.append(api(f"k optimum {kw}", f"r = md.optimal_block_efficiency(P2, Q2, 2, 2, {kw})"
                       if "context" not in kw else "r = None; raise md.InvalidInputError('no context here')",
                       BLOCKS, "wrong = 'accepted'"))
    out.append(api("k bound log1p(-1) warning", "r = block_efficiency_bound("
                   "lambda c: np.array([1e-40, 1.0]), lambda c: np.array([1e-20, 1.0]), 2, 1)", BLOCKS,
                   "if abs(r.value - 2.0) > 1e-12: wrong = r.value"))
    # l: complex laws
    for name, call in (("optimum", "md.optimal_block_efficiency(complex_law, Q2, 2, 2)"),
                       ("bound", "block_efficiency_bound(complex_law, Q2, 2, 2)"),
                       ("bound draft", "block_efficiency_bound(P2, complex_law, 2, 2)"),
                       ("audit_block", "md.audit_block(first_token, complex_law, Q2, 1, 1, samples=100)")):
        out.append(api(f"l complex law {name}", f"r = {call}", BLOCKS,
                       "wrong = 'a complex law was accepted'"))
    # m: stderr closed
    for argv, codes in ((["compare-selectors", "{d}/p.npy", "{d}/q.npy", "-n", "4"], (0,)),
                        (["verify", "hu-wor", "--instances", "2"], (1,)),  # refuted, as README shows
                        (["audit", "mdtheory.rules.optimal:Optimal", "{d}/p3.npy", "{d}/q3.npy", "-n", "2"],
                         (0,))):
        out.append(cli(f"m {argv[0]} stderr closed", *argv, close_stderr=True, codes=codes,
                       stdout_has="\n", limit=120))
    # n: an ascii terminal
    out.append(cli("n compare-selectors --help ascii", "compare-selectors", "--help",
                   env={"PYTHONIOENCODING": "ascii"}, codes=(0,), stdout_has="usage"))
    # o: Ctrl-C during the double description
    out.append(cli("o dd elimination Ctrl-C", "dd", "--vocab", "5", "--drafts", "4", "--method",
                   "elimination", "--max-seconds", "1e9", interrupt=3.0, limit=15, codes=(1, 2, 130)))
    # p: the Python API's corners
    rules = "from mdtheory.rules import make_rule\n"
    out.append(api("p monte_carlo 1e12", "make_rule('rrs', [.5, .5], [.5, .5], 2).monte_carlo(10**12, 0)",
                   rules, "wrong = 'ran 1e12 samples'"))
    for seed in ("-1", "'a'"):
        out.append(api(f"p audit seed={seed}", f"md.audit(lambda p, q, d, r: (int(d[0]), True), "
                       f"[.5, .5], [.5, .5], 2, seed={seed})", check="wrong = 'accepted'"))
    lang = "from mdtheory.language import logits, langmodel, drafters\n"
    out.append(api("p to_probs list", "r = logits.to_probs([0.0, 1.0])", lang,
                   "if not abs(float(np.sum(r)) - 1) < 1e-12: wrong = r"))
    out.append(api("p to_probs string", "logits.to_probs('abc')", lang, "wrong = 'accepted'"))
    out.append(api("p as_model string law", "langmodel.as_model(lambda c: 'abc')((0,))", lang,
                   "wrong = 'accepted'"))
    out.append(api("p lm_pairs rng=None", "m = langmodel.as_model(lambda c: np.full(3, 1/3), 3); m.bos = 0\n"
                   "P, Q = drafters.lm_pairs(10, m, m, None)", lang,  # a named error, or fresh entropy
                   "if P.shape != (10, 3): wrong = P.shape"))
    # r: the README's block-efficiency example (every README console block: readme_cases)
    # s: the set-up's progress
    out.append(shell("s setup.sh ticker", "set -e; cd {root}\n"
                     "eval \"$(sed -n '/^ticking() {/,/^}/p' scripts/setup.sh)\"\n"
                     "SETUP_TICK=1 ticking sleep 3", stdout_has="still working"))
    out.append(api("s warm-up progress", """
        warmup._commands = lambda folder: [["dd", "--help"], ["verify", "--help"]]
        warmup._library = lambda: None
        with contextlib.redirect_stdout(io.StringIO()) as text:
            warmup.warm(progress=True)""", "import contextlib, io\nfrom mdtheory.cli import warmup\n",
                   "if 'warm-up 2/2' not in text.getvalue(): wrong = text.getvalue()[-200:]"))
    return out


def block_cases(seeds: int) -> list[dict]:
    """The block optimum, the bound and the block audit against independent references."""
    out = []
    for seed in range(seeds + 1):
        for V, K in ((2, 1), (3, 2), (3, 3), (4, 2)):
            # L = 1: the LP over multisets against the front door's prefix route, 1 + alpha*
            out.append(api(f"block optimum L=1 = 1 + alpha* V={V} K={K} seed={seed}", f"""
                estimate = optimum_mod.estimate({V}, {K}, 1)
                r = md.optimal_block_efficiency(t, d, {K}, 1)""",
                           BLOCKS + f"t, d = random_instance({V}, {seed}, 0.7)\n",
                           f"ref = 1 + md.alpha_star(t(()), d(()), {K})\n"
                           "if not abs(r.value - ref) <= 1e-7: wrong = (r.value, ref)"))
        for V, L in ((2, 3), (3, 2), (3, 3)):
            # K = 1: the LP against block verification's exact law (Sun et al.), and the bound
            out.append(api(f"block optimum K=1 = block verification V={V} L={L} seed={seed}", f"""
                estimate = optimum_mod.estimate({V}, 1, {L})
                r = md.optimal_block_efficiency(t, d, 1, {L})
                b = block_efficiency_bound(t, d, 1, {L})""",
                           BLOCKS + f"t, d = random_instance({V}, {seed}, 0.7)\n",
                           f"ref = float(blocks.make_verifier('block').block_efficiency(t, d, 1, {L}))\n"
                           "if not abs(r.value - ref) <= 1e-7: wrong = (r.value, ref)\n"
                           "if not b.value >= r.value - 1e-9: wrong = ('bound below', b.value, r.value)"))
        out.append(api(f"block bound >= optimum V=3 K=2 L=3 seed={seed}", """
            r = md.optimal_block_efficiency(t, d, 2, 3)
            bs = [block_efficiency_bound(t, d, 2, 3, expansions=e, batch=2).value for e in (1, 3, 13)]""",
                       BLOCKS + f"t, d = random_instance(3, {seed}, 0.8)\n",
                       "if min(bs) < r.value - 1e-9: wrong = ('bound below', bs, r.value)"))
    for kw in ("n=1000, length=30", "n=10**9, length=10**9", "n=2**53 + 1, length=2", "n=0, length=2",
               "n=2, length=True"):
        out.append(api(f"block optimum {kw}", f"md.optimal_block_efficiency(P2, Q2, {kw})", BLOCKS))
        out.append(api(f"block bound {kw}", f"block_efficiency_bound(P2, Q2, {kw})", BLOCKS))
    out.append(api("block bound expansions=1e9", "block_efficiency_bound(P2, Q2, 2, 10**6, expansions=10**9)",
                   BLOCKS))
    for name, law in (("nan", "lambda c: np.array([np.nan, 1.0])"), ("shape", "lambda c: np.ones(3) / 3"),
                      ("string", "lambda c: 'ab'"), ("raises", "lambda c: 1 / 0"),
                      ("negative", "lambda c: np.array([-0.5, 1.5])")):
        out.append(api(f"block optimum law {name}", f"md.optimal_block_efficiency({law}, Q2, 1, 2)", BLOCKS))
        out.append(api(f"block bound law {name}", f"block_efficiency_bound({law}, Q2, 1, 2)", BLOCKS))
        out.append(api(f"block audit law {name}", f"md.audit_block(first_token, {law}, Q2, 1, 2, samples=50)",
                       BLOCKS))
    verifier = "from mdtheory.audit.verifier import load_target\nimport os\n" \
        "ex = os.environ['FUZZ_ROOT'] + '/examples/verifiers/'\n"
    out.append(api("block audit exact block verification", """
        r = md.audit_block(law, t, d, 1, 2, exact=True)""",
                   BLOCKS + verifier + "law = load_target(ex + 'block_verification.py:law')\n"
                   "t, d = random_instance(3, 1)\n",
                   "if r.verdict != 'lossless': wrong = (r.verdict, r.tv)"))
    out.append(api("block audit sampled lossy verifier", """
        r = md.audit_block(f, t, d, 1, 2, samples=20000)""",
                   BLOCKS + verifier + "f = load_target(ex + 'block_missing_q.py:verify')\n"
                   "t, d = random_instance(3, 1)\n", "if r.verdict != 'lossy': wrong = r.verdict"))
    return out


def tree_cases() -> list[dict]:
    """Draft trees: the exact optimum over prefix sets, the bound, the audit."""
    out = []
    trees = "from mdtheory.blocks import DraftTree\n"
    for b, smp in (((2, 2), "iid"), ((2, 2), "without-replacement"), ((3, 1), "iid"), ((2, 1, 1), "top")):
        out.append(api(f"tree optimum {b} {smp}", f"""
            tree = DraftTree({b}, {smp!r})
            estimate = optimum_mod.tree_estimate(3, tree)
            r = md.optimal_block_efficiency(t, d, tree=tree)
            ub = block_efficiency_bound(t, d, tree=tree)
            v = blocks.make_verifier('traversal', tree=tree)
            trav = float(v.block_efficiency(t, d, tree.n, tree.length))
            """, BLOCKS + trees + "t, d = random_instance(3, 2, 0.8)\n",
                       "if ub.value < r.value - 1e-9: wrong = ('bound below', ub.value, r.value)\n"
                       "if trav > r.value + 1e-7: wrong = ('traversal above the optimum', trav, r.value)",
                       limit=60))
    out.append(api("tree optimum huge", "md.optimal_block_efficiency(P2, Q2, tree=DraftTree((10,) * 6))",
                   BLOCKS + trees))
    out.append(api("tree bound wide", "block_efficiency_bound(P2, Q2, tree=DraftTree((10**4,) * 3))",
                   BLOCKS + trees))
    out.append(api("tree audit huge exact", "md.audit_block(lambda t, d, x: {(0,): 1.0}, P2, Q2, "
                   "tree=DraftTree((2,) * 12), exact=True)", BLOCKS + trees))
    out.append(api("tree audit sampled traversal", """
        tree = DraftTree((2, 2), 'iid')
        v = blocks.make_verifier('traversal', tree=tree)
        r = md.audit_block(lambda tg, dr, x, rng: v.sample(tg, dr, x, rng), t, d, tree=tree, samples=5000)""",
                   BLOCKS + trees + "t, d = random_instance(3, 2, 0.8)\n",
                   "if r.verdict == 'lossy' or r.verdict == 'invalid': wrong = (r.verdict, r.pvalue)"))
    return out


def lm_cases() -> list[dict]:
    """The language models' functions: measured estimates against the runs (wall time: the
    estimates come from wall-clock pilots), checkpoints that do not load, bad sizes."""
    out = []
    lstm = SIMULATION + "from mdtheory.language import drafters\nT = drafters.load_model('char-lstm', 1.0)\n"
    out.append(api("lm lm_pairs char-lstm 2000 positions", """
        L = 64; streams = -(-2000 // L)
        estimate = md._budget.lm_pairs(2000, 465, (T.step_seconds(streams) + D.step_seconds(streams)) * L)
        P, Q = drafters.lm_pairs(2000, T, D, np.random.default_rng(0), length=L, max_seconds=None)""",
                   lstm + "D = drafters.make_drafter('tempered', T, np.random.default_rng(0), "
                   "temperature=1.3)\n",
                   limit=120, clock="wall"))
    hf = "import os\nfrom mdtheory.language import drafters\nfrom mdtheory.language.hf import load_hf\n" \
        "import torch; torch.set_num_threads(1)\nd = os.environ['FUZZ_SCRATCH']\n"
    out.append(api("lm lm_pairs hf 1000 positions", """
        L = 256; streams = -(-1000 // L)
        estimate = md._budget.lm_pairs(1000, T.V, (T.step_seconds(streams) + D.step_seconds(streams)) * L)
        P, Q = drafters.lm_pairs(1000, T, D, np.random.default_rng(0), length=L, max_seconds=None)""",
                   hf + "T, D = load_hf('hf:' + d + '/hf_target'), load_hf('hf:' + d + '/hf_draft')\n",
                   limit=300, clock="wall"))
    out.append(cli("lm cli lm-pairs hf 1000 positions", "lm-pairs", "--target", "hf:{d}/hf_target", "--draft",
                   "hf:{d}/hf_draft", "--positions", "1000", "--out", "{d}/pairs", "--quiet", limit=300,
                   codes=(0, 2)))
    out.append(cli("lm cli block-efficiency hf README command", "block-efficiency", "--target",
                   "hf:{d}/hf_target", "--draft", "hf:{d}/hf_draft", "-n", "4", "-L", "4", "--steps", "200",
                   "--quiet", limit=300, codes=(0, 2)))
    for spec in ("hf:{d}/nowhere", "hf:{d}/p.npy", "hf:nobody/tiny"):
        out.append(cli(f"lm cli hf checkpoint {spec.split('/')[-1]}", "lm-pairs", "--target", spec, "--draft",
                       "tempered", "--positions", "10", "--out", "{d}/x", codes=(2,), limit=60))
    out.append(cli("lm cli block-efficiency steps=1e9", "block-efficiency", "-n", "2", "-L", "2", "--steps",
                   str(10**9), "--rules", "rrs", codes=(2,), limit=60))
    out.append(cli("lm cli block-efficiency L=1e5", "block-efficiency", "-n", "2", "-L", str(10**5),
                   "--steps", "3", "--rules", "rrs", codes=(2,), limit=60))
    return out


def torch_cases() -> list[dict]:
    """The torch bridge against the numpy front door, on batches, in float32 and at large V."""
    out = []
    tb = "import torch\nfrom mdtheory import torch_bridge as tb\nrng = np.random.default_rng(0)\n"
    for V, B, n in ((50, 8, 4), (32000, 4, 8), (10**6, 2, 3)):
        out.append(api(f"torch alpha_star V={V} B={B} n={n}", f"""
            a = tb.alpha_star(torch.as_tensor(P), torch.as_tensor(Q), {n})""",
                       tb + f"P, Q = (rng.dirichlet(np.full({V}, .5), size={B}) for _ in range(2))\n",
                       f"ref = [md.alpha_star(P[i], Q[i], {n}) for i in range({B})]\n"
                       "if np.abs(a.numpy() - ref).max() > 1e-9: wrong = (a.numpy()[:3], ref[:3])",
                       limit=60))
    out.append(api("torch alpha_star float32", """
        f32 = torch.float32
        a = tb.alpha_star(torch.as_tensor(P, dtype=f32), torch.as_tensor(Q, dtype=f32), 4)""",
                   tb + "P, Q = (rng.dirichlet(np.ones(1000), size=4) for _ in range(2))\n",
                   "ref = [md.alpha_star(P[i], Q[i], 4) for i in range(4)]\n"
                   "if np.abs(a.double().numpy() - ref).max() > 1e-4: wrong = (a, ref)"))
    out.append(api("torch cross_validate estimate", """
        estimate = md._budget.batched_steps(8, 4000, 6, 2, 4)
        r = cross_validate(batch=8, samples=4000, vocab=6, drafts=2)""",
                   tb + "try:\n    from mdtheory.audit.crossval import cross_validate\n"
                   "except ImportError:\n    cross_validate = tb.cross_validate\n",
                   "if not r['passed']: wrong = 'a torch rule failed its cross-validation'", limit=120))
    for rule in ("TorchRRS", "TorchOptimal", "TorchKhisti"):
        out.append(api(f"torch {rule} V=32000 B=8 n=8", f"""
            r = tb.{rule}(torch.as_tensor(P), torch.as_tensor(Q), 8)
            r.prepare()
            drafts = tb.sample_drafts(torch.as_tensor(Q), 8, torch.Generator().manual_seed(0))
            y = r.step(drafts, torch.Generator().manual_seed(1))""",
                       tb + "P, Q = (rng.dirichlet(np.full(32000, .5), size=8) for _ in range(2))\n",
                       limit=120))
    out.append(api("torch rule bad n", "tb.TorchRRS(torch.full((2, 3), 1/3), torch.full((2, 3), 1/3), 0)",
                   tb))
    return out


def engine_cases() -> list[dict]:
    """The engines' contracts (``mdtheory audit --engine``): lossless and lossy examples, bad sizes."""
    ex = "{root}/examples/verifiers/engines/"
    return [
        cli("engine chain block verification", "audit", "--engine", "chain",
            ex + "chain_block_verification.py:verify", "-L", "2", "--instance", "random:3:1", codes=(0,),
            limit=120),
        cli("engine chain ignores draft probs", "audit", "--engine", "chain",
            ex + "chain_block_ignores_draft_probs.py:verify", "-L", "2", "--instance", "random:3:1",
            codes=(1,), limit=120),
        cli("engine tree target only", "audit", "--engine", "tree", ex + "tree_target_only.py:verify",
            "--tree", "2,2", "--instance", "random:3:1", codes=(0, 1, 5), limit=120),
        cli("engine chain L=1e8", "audit", "--engine", "chain", ex + "chain_block_verification.py:verify",
            "-L", str(10**8), "--instance", "toy", codes=(2,), limit=60),
        cli("engine tree huge", "audit", "--engine", "tree", ex + "tree_target_only.py:verify", "--tree",
            "1000,1000,1000", "--instance", "toy", codes=(2,), limit=60),
    ]


def readme_cases(root: Path) -> list[dict]:
    """Every ``$ mdtheory ...`` of the README's console blocks, its output compared with the one
    shown (seconds and the tables' millisecond columns masked)."""
    text = (root / "README.md").read_text()
    out = []
    chunks = [chunk for block in re.findall(r"^```console\n(.*?)^```", text, flags=re.M | re.S)
              for chunk in block.split("$ mdtheory ")[1:]]
    for k, chunk in enumerate(chunks):
        argv, expected = chunk.split("\n", 1)
        words = argv.split()
        out.append(cli(f"r README {k} {words[0]}", *words, stdout_is=expected, limit=180,
                       cwd="scratch" if words[0] == "lm-pairs" else "root", codes=(0, 1, 4, 5)))
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
    (d / "hang.py").write_text("import time\n\n\ndef f(p, q, d, rng):\n    time.sleep(10**6)\n")
    (d / "blocklaws.py").write_text(
        "import time\n\nimport numpy as np\n\n\ndef first(target, draft, drafts, rng):\n"
        "    return np.array([int(drafts[0, 0])])\n\n\ndef hangs(context):\n    if context:\n"
        "        time.sleep(10**6)\n    return np.array([0.6, 0.4])\n\n\ndef draft(context):\n"
        "    return np.array([0.5, 0.5])\n")
    for V, name in ((32_000, "32k"), (10**7, "1e7")):
        np.save(d / f"p{name}.npy", rng.dirichlet(np.full(V, 0.5)))
        np.save(d / f"q{name}.npy", rng.dirichlet(np.full(V, 0.5)))
    # tiny Hugging Face checkpoints (where transformers is installed; their cases fail otherwise)
    subprocess.run([sys.executable, "-c", HF_BUILD, str(d)], capture_output=True, timeout=600)


def _limits():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


#: Seconds in a command's output, and a table's last column of milliseconds: masked before an
#: output is compared with the one a case expects (as the README's console test does).
TIMES = re.compile(r"\d+\.\d+ s\b|(?<=  ) *\d+\.\d+$", flags=re.M)


def run_case(case: dict, root: Path, d: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONHASHSEED="0", OMP_NUM_THREADS="1",
               FUZZ_ROOT=str(root), FUZZ_SCRATCH=str(d), **case.get("env", {}))
    if case["kind"] == "api":
        argv = [sys.executable, "-c", RUNNER]
        stdin = json.dumps([case["setup"], case["body"], case["check"], case["clock"]])
    elif case["kind"] == "shell":
        argv = ["bash", "-c", case["script"].replace("{root}", str(root))]
        stdin = ""
    else:
        argv = [sys.executable, "-m", "mdtheory",
                *[a.replace("{d}", str(d)).replace("{root}", str(root)) for a in case["argv"]]]
        stdin = ""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        closed = ">&-" if case.get("close_stdout") else ""
        closed += " 2>&-" if case.get("close_stderr") else ""
        if closed:  # the command starts with file descriptor 1 or 2 closed (`>&-`, `2>&-`)
            argv = ["sh", "-c", f'exec "$@" {closed}', "sh", *argv]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=err, env=env,
                                cwd=root if case.get("cwd") == "root" else d, preexec_fn=_limits)
        proc.stdin.write(stdin.encode())
        proc.stdin.close()
        status, usage, interrupted = 0, None, False
        for _ in range(int(case["limit"] * 20) + 1):  # bounded: one poll per 50 ms up to the limit
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if case.get("interrupt") is not None and not interrupted \
                    and time.perf_counter() - t0 >= case["interrupt"]:
                proc.send_signal(signal.SIGINT)  # Ctrl-C
                interrupted = True
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
        return _estimate_verdict(res)
    res = {"seconds": seconds, "rc": rc, "message": stderr.strip()[-300:]}
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith(("audit", "sampling"))]
    codes = case.get("codes")
    if "Traceback" in stderr or (rc < 0 and not interrupted):
        res["outcome"] = "traceback"
    elif codes is not None:
        res["outcome"] = "ok" if rc in codes else "wrong"
        if rc not in codes:
            res["message"] = f"exit {rc}, expected {' or '.join(map(str, codes))}: {res['message']}"
    elif rc in (0, 1, 4, 5) or (rc == 141 and case.get("close_stdout")):
        res["outcome"] = "ok"
    elif rc in (2, 3) and len(lines) == 1 and lines[0].startswith(("mdtheory", "usage")):
        res["outcome"] = "refused" if any(k in stderr for k in (
            "estimated", "stopped after", "did not return")) else "error"
    elif rc == 2 and stderr.startswith("usage:"):
        res["outcome"] = "error"
    else:
        res["outcome"] = "traceback"
    if res["outcome"] in ("ok", "refused", "error"):
        wrong = _output_check(case, stdout, stderr)
        if wrong:
            res.update(outcome="wrong", message=wrong)
    return res


def _output_check(case: dict, stdout: str, stderr: str) -> str | None:
    """Why a command's output is not what the case allows (None: it is)."""
    if case.get("stdout_has") and case["stdout_has"] not in stdout:
        return f"no {case['stdout_has']!r} in its output: {stdout.strip()[-200:]!r}"
    if case.get("stdout_is") is not None and TIMES.sub("T", stdout) != TIMES.sub("T", case["stdout_is"]):
        return f"its output differs from the expected one: {stdout.strip()[-200:]!r}"
    if case.get("stderr_lacks") and case["stderr_lacks"] in stderr:
        return f"{case['stderr_lacks']!r} in its stderr: {stderr.strip()[-200:]!r}"
    return None


def _estimate_verdict(res: dict) -> dict:
    if res["outcome"] != "ok" or "est_seconds" not in res:
        return res
    t, et = res["seconds"], res["est_seconds"]
    b, eb = res["bytes"], res["est_bytes"]
    off = []
    if max(t, et) > EST_MIN_SECONDS and not (t / EST_FACTOR <= et <= t * EST_FACTOR):
        off.append(f"time {t:.3g} s, estimated {et:.3g} s")
    vb = res.get("vbytes", 0)  # reserved address space: an estimate may count what is reserved
    if max(b, eb) > EST_MIN_BYTES and not (b / EST_FACTOR <= eb <= b * EST_FACTOR) \
            and not (vb / EST_FACTOR <= eb <= vb * EST_FACTOR):
        off.append(f"memory {b / 2**20:.3g} MiB resident, {vb / 2**20:.3g} MiB reserved, estimated "
                   f"{eb / 2**20:.3g} MiB")
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
    todo = [c for c in cases(args.seeds) + readme_cases(Path(args.root)) if args.only in c["name"]]
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
