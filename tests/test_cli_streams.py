"""The commands' standard streams: stderr closed, or an encoding that cannot write the help's Greek
letters."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mdtheory.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)


@pytest.fixture
def pair(tmp_path):
    np.save(tmp_path / "p.npy", np.array([0.5, 0.3, 0.2]))
    np.save(tmp_path / "q.npy", np.array([0.2, 0.3, 0.5]))
    return str(tmp_path / "p.npy"), str(tmp_path / "q.npy")


@pytest.mark.parametrize("argv", [
    ["compare-selectors", "{p}", "{q}", "-n", "2", "--rules", "single,rrs"],
    ["verify", "theorem3", "--vocab", "3", "--instances", "2"],
    ["audit", str(ROOT / "examples/verifiers/rrs.py") + ":verify", "{p}", "{q}", "-n", "2",
     "--detect-tv", "0.3"],
    ["check-acceptance", "{p}", "{q}"],
])
def test_stderr_closed_still_prints_the_table(monkeypatch, capsys, pair, argv):
    """Python starts a process whose file descriptor 2 is closed (``2>&-``) with sys.stderr None:
    the command runs, prints its table and exits 0 (not 1, the refuted/lossy code)."""
    monkeypatch.setattr(sys, "stderr", None)
    code = main([a.format(p=pair[0], q=pair[1]) for a in argv])
    out = capsys.readouterr().out
    assert code == 0 and out.strip()


def test_stderr_closed_in_a_process_of_its_own(pair):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = ["sh", "-c", 'exec "$@" 2>&-', "sh", sys.executable, "-m", "mdtheory", "compare-selectors",
           *pair, "-n", "2", "--rules", "rrs"]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, env=env, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("V = 3, n = 2 drafts")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_prints_in_ascii(monkeypatch, command):
    """``PYTHONIOENCODING=ascii``: the help prints, letters it cannot encode as escapes."""
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    assert main([command, "--help"]) == 0
    sys.stdout.flush()
    text = raw.getvalue().decode("ascii")
    assert f"usage: mdtheory {command}" in text
    if command == "compare-selectors":
        assert "\\u03b1*" in text  # alpha* in the rules' list
