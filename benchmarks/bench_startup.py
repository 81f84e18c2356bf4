"""Start-up: ``import mdtheory`` and a command on the bundled pair against ``import numpy``.

Each case runs in a fresh process, the cases alternated round by round (so a change in the machine's
load reaches every case alike); printed per case: the median wall time over the rounds and its ratio
to the median of ``python -c "import numpy"`` (the goal for the command: at most 1.3), with bytecode
written and read as in an installation. ``--importtime``
prints the slowest imports of each case (``python -X importtime``, cumulative microseconds).

    python benchmarks/bench_startup.py [--rounds 15] [--importtime] [--root CHECKOUT] [--no-bytecode]

``--root`` measures another checkout of the package (its ``examples/`` pair): before and after a
change in the same run of the machine. ``--no-bytecode`` runs with ``PYTHONDONTWRITEBYTECODE=1`` and
no cached bytecode of the package: every start compiles its modules (a checkout whose environment
sets it, as this project's machine does).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASES = {
    "import numpy": ["-c", "import numpy"],
    "import mdtheory": ["-c", "import mdtheory"],
    "check-acceptance": ["-m", "mdtheory", "check-acceptance", "examples/p.npy", "examples/q.npy"],
    "compare-selectors": ["-m", "mdtheory", "compare-selectors", "examples/p.npy", "examples/q.npy",
                          "--rules", "rrs"],
    "--help": ["-m", "mdtheory", "--help"],
}


def timed(args: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=env["PYTHONPATH"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def slowest_imports(args: list[str], env: dict, top: int = 8) -> list[tuple[int, str]]:
    """The ``top`` largest cumulative import times (microseconds, module) of a run."""
    out = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=env["PYTHONPATH"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    rows = []
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line.split("|")
            rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--no-bytecode", action="store_true")
    args = parser.parse_args()
    # bytecode written and read, as in an installation (a PYTHONDONTWRITEBYTECODE environment would
    # compile every module of the package at every start)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(args.root.resolve())
    if args.no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        for cached in (args.root / "mdtheory").rglob("*.pyc"):
            cached.unlink()
    for case in CASES.values():  # bytecode and the numba cache written before the rounds
        timed(case, env)
    times = {name: [] for name in CASES}
    for _ in range(args.rounds):
        for name, case in CASES.items():
            times[name].append(timed(case, env))
    base = statistics.median(times["import numpy"])
    print(f"{args.root.resolve()}: load average {os.getloadavg()[0]:.2f}; {args.rounds} alternated "
          "rounds, medians")
    print(f"{'case':<20s} {'median s':>9s} {'x numpy':>8s}")
    for name, runs in times.items():
        print(f"{name:<20s} {statistics.median(runs):9.3f} {statistics.median(runs) / base:8.2f}")
    if args.importtime:
        for name, case in CASES.items():
            print(f"\n{name}: slowest imports (cumulative us)")
            for us, module in slowest_imports(case, env):
                print(f"  {us:>9d}  {module}")


if __name__ == "__main__":
    main()
