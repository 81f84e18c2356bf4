"""CONTRIBUTING.md's worked examples run: each Python block in a fresh interpreter (a block registers
a rule, a route, a draft model or a block verifier, which must not leak into the other tests)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEXT = (ROOT / "CONTRIBUTING.md").read_text()
SECTIONS = {"## Add a selection rule": "acceptance 0.6", "## Add a route to alpha\\*": "by scan",
            "## Add a draft model": "echo drafts: alpha* = ",
            "## Add a block verifier": "last-draft: E|B| = "}


def block(heading):
    """The first Python block after ``heading``."""
    assert heading + "\n" in TEXT, heading
    return re.search(r"^```python\n(.*?)^```", TEXT.split(heading + "\n", 1)[1], re.M | re.S).group(1)


def test_every_python_block_is_run():
    assert len(re.findall(r"^```python$", TEXT, re.M)) == len(SECTIONS)


@pytest.mark.parametrize("heading", list(SECTIONS))
def test_worked_example_runs(heading):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", block(heading)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert SECTIONS[heading] in proc.stdout, proc.stdout
