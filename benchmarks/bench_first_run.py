"""The first command after setting up against the later ones: is the first run within 2x?

A fresh copy of the package (no ``__pycache__``: no bytecode, no numba cache, as after a clone) in a
temporary folder, then ``python -m mdtheory.cli.warmup`` (the step ``scripts/setup.sh`` runs), then
each command in fresh processes: its first run and ``--repeats`` later runs. Printed per command:
the first run's wall time, the median of the later ones, their ratio (the goal: at most 2), and the
numba cache entries the first run had to add (0 when the warm-up compiled every signature the
command uses). ``--no-warmup`` skips the warm-up: the first run then compiles (the cost it removes).

    python benchmarks/bench_first_run.py [--repeats 3] [--no-warmup]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = [
    ["compare-selectors", "examples/p.npy", "examples/q.npy", "--drafts", "4"],
    ["check-acceptance", "examples/p.npy", "examples/q.npy", "--drafts", "4"],
    ["audit", "examples/verifiers/rrs.py:verify", "examples/p.npy", "examples/q.npy", "--drafts",
     "4"],
]


def cache_entries(folder: Path) -> set[str]:
    """numba's compiled entries (``.nbc`` files) under ``folder``."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*.nbc")}


def timed(argv: list[str], cwd: Path, env: dict) -> float:
    """Wall seconds of one fresh process; the command must succeed (exit 0)."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="later runs per command (default 3)")
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up (the before)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mdtheory-first-run-") as tmp:
        clone = Path(tmp)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(ROOT / "mdtheory", clone / "mdtheory", ignore=ignore)
        shutil.copytree(ROOT / "examples", clone / "examples", ignore=ignore)
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
        env["PYTHONPATH"] = str(clone)
        python = [sys.executable]
        print(f"fresh copy in {clone}; python {sys.executable}")
        if not args.no_warmup:
            seconds = timed(python + ["-m", "mdtheory.cli.warmup"], clone, env)
            print(f"warm-up (python -m mdtheory.cli.warmup): {seconds:.1f} s, "
                  f"{len(cache_entries(clone))} cache entries")
        print(f"{'command':<60} {'first s':>8} {'later s':>8} {'ratio':>6} {'new entries':>11}")
        worst = 0.0
        for command in COMMANDS:
            argv = python + ["-m", "mdtheory"] + command
            before = cache_entries(clone)
            first = timed(argv, clone, env)
            added = len(cache_entries(clone) - before)
            later = statistics.median(timed(argv, clone, env) for _ in range(args.repeats))
            worst = max(worst, first / later)
            print(f"{'mdtheory ' + ' '.join(command):<60} {first:8.2f} {later:8.2f} "
                  f"{first / later:6.2f} {added:11d}")
        print(f"largest first/later ratio: {worst:.2f} (goal <= 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
