"""Compile every numba kernel once into numba's on-disk cache: ``python -m mdtheory.cli.warmup``.

Every kernel is decorated with ``cache=True``, so numba writes its machine code next to the source
(``__pycache__``, or under ``NUMBA_CACHE_DIR`` where that is set) and a later process loads it
instead of compiling. Without this step the first command after installing pays for the
compilation (half a minute on two cores); ``scripts/setup.sh`` runs it once. It runs the commands
and library routes on small instances with every kernel forced compiled (:data:`mdtheory._jit.FORCE`),
so each compiled signature the library uses (float64 arrays; int64 sizes) is built: the draft models
and their routes, the selection rules, the optimal rule's schedule, the audit. Re-running it only
loads the cache. ``benchmarks/bench_first_run.py`` measures the first command after it.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time

import numpy as np

__all__ = ["warm", "kernels", "uncached", "main"]

#: A verifier file for the audit's warm-up: recursive rejection sampling.
_VERIFIER = '''
import numpy as np


def verify(p, q, drafts, rng):
    r = p
    for x in drafts:
        if rng.random() * q[x] < r[x]:
            return int(x), True
        d = np.clip(r - q, 0.0, None)
        r = d / d.sum() if d.sum() > 0 else r
    return int(rng.choice(len(p), p=r)), False


def optimal(p, q, drafts, rng):
    from mdtheory.rules import make_rule

    return make_rule("optimal", p, q, len(drafts)).select(drafts, rng)
'''


def _commands(folder: str) -> list[list[str]]:
    """The command lines the warm-up runs, on small random pairs saved in ``folder``."""
    rng = np.random.default_rng(0)
    files = {}
    for name, shape in (("p", (12,)), ("q", (12,)), ("pb", (3, 12)), ("qb", (3, 12)),
                        ("qi", (2, 12)), ("qt", (12,)), ("ps", (30,)), ("qs", (30,)),
                        ("pl", (16_384,)), ("ql", (16_384,))):
        x = rng.dirichlet(np.ones(shape[-1]), size=shape[:-1] or None)
        if name == "qt":  # a dominant token and masses of 1e-200: the scaled (exponent) tables
            x = np.full(12, 1e-200)
            x[0] = 1.0 - x[1:].sum()
        if name in ("ps", "qs"):  # cold laws, alpha* = 1 to 1e-9: the minimum-norm point's
            z = np.random.default_rng(1).normal(size=30) * 3  # least-squares route and its drops
            noise = 0.3 * np.random.default_rng(2).normal(size=30) if name == "ps" else 0.0
            x = np.exp((z + noise - z.max()) / 0.1)
            x /= x.sum()
        files[name] = os.path.join(folder, name + ".npy")
        np.save(files[name], x)
    verifier = os.path.join(folder, "rrs.py")
    with open(verifier, "w") as f:
        f.write(_VERIFIER)
    p, q, pb, qb, qi, qt, ps, qs, pl, ql = (files[k] for k in (
        "p", "q", "pb", "qb", "qi", "qt", "ps", "qs", "pl", "ql"))
    commands = []
    for sampling in ("iid", "without-replacement", "conditional-poisson", "greedy"):
        for n in ("1", "2", "3"):
            commands.append(["check-acceptance", p, q, "-n", n, "--sampling", sampling, "-q"])
            commands.append(["check-acceptance", pb, qb, "-n", n, "--sampling", sampling, "-q"])
    for method in ("prefix", "subsets", "dual", "maxflow", "mnp"):
        commands.append(["check-acceptance", p, q, "-n", "3", "--method", method, "-q"])
    commands.append(["check-acceptance", p, q, "-n", "3", "--sampling", "wor", "--method", "mnp",
                     "-q"])
    commands.append(["check-acceptance", p, qi, "--sampling", "independent", "-q"])
    commands.append(["check-acceptance", p, qi, "--sampling", "independent", "--method", "mnp",
                     "-q"])
    for sampling in ("without-replacement", "conditional-poisson"):
        commands.append(["check-acceptance", ps, qs, "-n", "4", "--sampling", sampling, "--method",
                         "mnp", "-q"])
    commands.append(["check-acceptance", pl, ql, "-n", "3", "-q"])
    commands.append(["check-acceptance", pl, ql, "-n", "3", "--method", "prefix", "-q"])  # radix sort
    for sampling in ("iid", "without-replacement", "conditional-poisson"):
        commands.append(["check-acceptance", p, qt, "-n", "3", "--sampling", sampling, "-q"])
    commands.append(["compare-selectors", p, q, "-n", "3", "--samples", "2000", "-q"])
    commands.append(["compare-selectors", pb, qb, "-n", "2", "--samples", "2000", "-q"])
    commands.append(["compare-selectors", p, q, "-n", "3", "--sampling", "all", "-q"])
    commands.append(["compare-selectors", p, q, "-n", "3", "--sampling", "without-replacement",
                     "--samples", "2000", "-q"])
    commands.append(["audit", verifier + ":verify", p, q, "-n", "2", "--samples", "300", "-q"])
    commands.append(["audit", verifier + ":verify", p, q, "-n", "2", "--samples", "300",
                     "--sampling", "without-replacement", "-q"])
    commands.append(["audit", verifier + ":optimal", p, q, "-n", "2", "--samples", "300", "-q"])
    commands.append(["audit", "mdtheory.rules.optimal:Optimal", p, q, "-n", "2", "-q"])
    commands.append(["block-efficiency", "--instance", "random:3:1", "-n", "2", "--length", "2",
                     "-q"])
    return commands


def _library() -> None:
    """Calls that reach kernels the commands do not, or with argument types they do not pass
    (writeable drafts, a schedule built from its pieces, a column-major table of draft laws, every
    majorant of successive sampling's face certificate, GLS's law at its compiled size, the window
    realisation, the torch khisti-lp rule's CPU stages and the engine verifiers' CPU kernels where
    torch is installed)."""
    from ..models.independent import Independent
    from ..models.majorant import face_bound
    from ..models.registry import make_draft_model
    from ..routes.mnp import min_norm_base
    from ..routes.subsets import exact_ratio_order
    from ..rules import make_rule
    from ..rules.schedule import Schedule

    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(12)), rng.dirichlet(np.ones(12))
    make_rule("optimal", p, q, 2).select(np.array([0, 1]), rng)
    make_rule("optimal", p, q, 2, realise="windows").select(np.array([0, 1]), rng)
    Schedule(q, 2, np.arange(12), np.zeros(12), q.copy()).candidate(np.array([0, 1]), rng)
    min_norm_base(p, Independent(np.asfortranarray(np.vstack([q, p]))))  # a column-major table
    order = exact_ratio_order(p, q)
    model = make_draft_model(q, 3, "without-replacement")
    for cut in (0, 6):  # no goal: every majorant
        face_bound(p, model, order, cut)
    make_rule("gls", p, q, 3).law(np.array([0, 1, 2]))
    try:
        import torch
    except ImportError:
        return
    from ..engines.optimal import candidates
    from ..engines.stops import excess_masses
    from ..torch_bridge import TorchKhisti

    TorchKhisti(torch.tensor(np.vstack([p, q])), torch.tensor(np.vstack([q, p])), 3)
    for dtype in (torch.float64, torch.float32):  # the engines read either in place
        P, Q = (torch.tensor(np.vstack([a, b]), dtype=dtype) for a, b in ((p, q), (q, p)))
        candidates(P, Q, torch.tensor([[0, 1], [2, 3]]), torch.ones(2, 2, dtype=torch.bool), None)
        excess_masses(torch.stack([P, Q], 1), torch.stack([Q, P], 1), torch.ones(2, 2, dtype=torch.float64))


def kernels() -> list[tuple[str, object]]:
    """Every compiled kernel of the package: ``(module.name, dispatcher-or-Kernel)``.

    Imports every module that defines one. A :class:`mdtheory._jit.Kernel` is listed as itself
    (its dispatcher exists once compiled), a numba dispatcher as itself; kernels numba inlines
    into their callers (``inline="always"``) are left out, as they are never compiled alone.
    """
    import importlib
    import pkgutil

    from numba.core.registry import CPUDispatcher

    from .. import __path__ as package_path
    from .. import _jit

    found = []
    for info in pkgutil.walk_packages(package_path, "mdtheory."):
        if info.name.startswith(("mdtheory.cli", "mdtheory.language", "mdtheory.torch_bridge")) or \
                info.name.endswith("__main__"):
            continue  # no kernels there (torch's and transformers' imports are slow)
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if getattr(getattr(obj, "py_func", None), "__module__", None) != info.name:
                continue  # (an import of another module's kernel)
            if isinstance(obj, _jit.Kernel):
                options = obj._options
            elif isinstance(obj, CPUDispatcher):
                options = obj.targetoptions
            else:
                continue
            if options.get("inline") != "always":
                found.append((f"{info.name}.{name}", obj))
    return found


def uncached() -> list[str]:
    """The kernels of :func:`kernels` with no entry in numba's on-disk cache (its index file)."""
    missing = []
    for name, k in kernels():
        dispatcher = k.compiled if hasattr(k, "compiled") else k
        if not os.path.exists(dispatcher._cache._cache_file._index_path):
            missing.append(name)
    return missing


def warm(verbose: bool = False, progress: bool = False) -> float:
    """Run every command of the warm-up with the kernels compiled; return the seconds it took.

    The commands' own output is discarded; a command that fails raises ``RuntimeError`` with its
    output (the warm-up of a broken install should not pass silently). ``verbose``: each command
    line and its seconds on stderr; ``progress``: one short line per command on stdout
    (``warm-up 3/52: check-acceptance, 1.2 s``), as ``scripts/setup.sh`` shows it.
    """
    from .. import _jit
    from . import main as cli_main

    start = time.perf_counter()
    previous = _jit.FORCE
    _jit.FORCE = "numba"
    try:
        with tempfile.TemporaryDirectory(prefix="mdtheory-warmup-") as folder:
            commands = _commands(folder)
            for k, argv in enumerate(commands, 1):
                t0 = time.perf_counter()
                out = io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                    code = cli_main(argv)
                if code not in (0, 4, 5):
                    raise RuntimeError(f"warm-up command {' '.join(argv)} exited {code}:\n"
                                       f"{out.getvalue()}")
                if verbose:
                    print(f"{time.perf_counter() - t0:7.2f} s  mdtheory {' '.join(argv)}",
                          file=sys.stderr)
                if progress:
                    print(f"  warm-up {k}/{len(commands)}: {argv[0]}, {time.perf_counter() - t0:.1f} s "
                          f"(total {time.perf_counter() - start:.0f} s)", flush=True)
            _library()
    finally:
        _jit.FORCE = previous
    return time.perf_counter() - start


def main(argv=None) -> int:
    """``python -m mdtheory.cli.warmup [--verbose] [--progress]``: compile the kernels into the
    cache (see :func:`warm` for the two options)."""
    args = sys.argv[1:] if argv is None else argv
    seconds = warm("--verbose" in args, "--progress" in args)
    missing = uncached()
    print(f"mdtheory: numba kernels compiled into the cache in {seconds:.1f} s"
          + (f"; not exercised: {', '.join(missing)}" if missing else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
