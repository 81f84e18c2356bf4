"""CPU seconds of the language-model commands from a cold start (a fresh process each run).

    python benchmarks/bench_models.py [--repeats R] [--tree PATH] [--only lm-pairs|block-efficiency]

Runs, each in a new ``python -m mdtheory`` process with ``PYTHONPATH=TREE`` (default: this
checkout; give another checkout to measure it the same way, e.g. the main branch before a change):

* ``lm-pairs --positions 1000 --draft ngram --seed 1`` (the n-gram drafter distilled from text
  sampled from the char-LSTM, then the pairs; nothing is cached between runs), goal <= 10 s CPU;
* ``block-efficiency --drafts 4 --length 4 --rules rrs --steps 1000 --draft ngram`` (1,000 target
  calls of a token-level rule with the char-LSTM target and the n-gram drafter), goal <= 20 s CPU.

Prints the user + system CPU seconds of each run's process (``resource.getrusage`` of the
children), the minimum over ``--repeats`` (the least disturbed by other work on the machine), and
the wall seconds. CPU time, not wall time, is the measure: on a shared machine the wall time
depends on the load, the CPU time much less. Writes only a temporary directory, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "lm-pairs": (["lm-pairs", "--positions", "1000", "--draft", "ngram", "--seed", "1", "--quiet",
                  "--out", "{tmp}/pairs"], 10.0),
    "block-efficiency": (["block-efficiency", "--drafts", "4", "--length", "4", "--rules", "rrs",
                          "--steps", "1000", "--draft", "ngram", "--quiet"], 20.0),
}


def cpu_seconds(argv: list[str], tree: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one ``python -m mdtheory ARGV`` process."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # cwd=tree too: ``python -m`` puts the working directory first on sys.path
    subprocess.run([sys.executable, "-m", "mdtheory", *argv], env=env, cwd=tree, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout to run (default: this one)")
    parser.add_argument("--only", choices=list(COMMANDS))
    args = parser.parse_args()
    print(f"tree {args.tree}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (argv, goal) in COMMANDS.items():
            if args.only and name != args.only:
                continue
            argv = [a.format(tmp=tmp) for a in argv]
            runs = [cpu_seconds(argv, args.tree) for _ in range(max(1, args.repeats))]
            cpu = min(r[0] for r in runs)
            print(f"{name:17s} CPU {cpu:6.1f} s (min of {len(runs)}; goal <= {goal:g} s: "
                  f"{'met' if cpu <= goal else 'NOT met'})  wall {min(r[1] for r in runs):6.1f} s  "
                  f"mdtheory {' '.join(argv)}")


if __name__ == "__main__":
    main()
