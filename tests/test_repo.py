"""Repository hygiene: CI runs the README's test command; the code is lint-clean."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands():
    text = (ROOT / "README.md").read_text()
    return re.findall(r"^    (\./scripts/setup\.sh && .+)$", text, flags=re.M)


def test_readme_gives_exactly_two_commands():
    cmds = readme_commands()
    assert len(cmds) == 2, cmds
    assert "check-acceptance examples/p.npy examples/q.npy" in cmds[0]
    assert "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci


def test_ruff_clean():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise",
                           "mdtheory", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
