"""The warm-up that scripts/setup.sh runs compiles every kernel into numba's on-disk cache."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mdtheory.cli import warmup

ROOT = Path(__file__).resolve().parents[1]


def test_the_kernel_list_is_the_package_kernels():
    names = {name for name, _ in warmup.kernels()}
    for name in ("mdtheory.routes.mnp._minor_chol", "mdtheory.routes.mnp._qr_delete",
                 "mdtheory.rules.schedule._earliest", "mdtheory.models.containment.scaled_esp_table",
                 "mdtheory.routes.subsets._radix_sort", "mdtheory.models.vertices._product_scan",
                 "mdtheory._jit._two_sum"):
        assert name in names
    # kernels numba inlines into their callers are never compiled alone: not listed
    assert "mdtheory.rules.schedule._pow" not in names and "mdtheory.rules.schedule._finish" in names


@pytest.mark.slow
def test_warm_up_fills_an_empty_cache_with_every_kernel(tmp_path):
    """In a fresh process with an empty cache (NUMBA_CACHE_DIR): before the warm-up no kernel is
    cached; after it every kernel has its index file, and a second warm-up adds no entry."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    check = [sys.executable, "-c", "from mdtheory.cli import warmup; "
             "print(len(warmup.kernels()), len(warmup.uncached()))"]
    total, uncached = map(int, subprocess.run(check, env=env, capture_output=True, text=True,
                                              check=True).stdout.split())
    assert total > 50 and uncached == total
    run = subprocess.run([sys.executable, "-m", "mdtheory.cli.warmup"], env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "not exercised" not in run.stdout
    assert subprocess.run(check, env=env, capture_output=True, text=True,
                          check=True).stdout.split() == [str(total), "0"]
    entries = sorted(p.name for p in tmp_path.rglob("*.nbc"))
    assert len(entries) >= total
    again = subprocess.run([sys.executable, "-m", "mdtheory.cli.warmup"], env=env,
                           capture_output=True, text=True)
    assert again.returncode == 0 and sorted(p.name for p in tmp_path.rglob("*.nbc")) == entries


def test_setup_script_runs_the_warm_up_after_installing():
    lines = (ROOT / "scripts" / "setup.sh").read_text().splitlines()
    install = max(i for i, line in enumerate(lines) if "pip install" in line)
    warm = [i for i, line in enumerate(lines) if "-m mdtheory.cli.warmup" in line]
    assert warm and warm[0] > install


def _setup_function(name: str) -> str:
    text = (ROOT / "scripts" / "setup.sh").read_text()
    start = text.index(f"\n{name}() {{") + 1
    return text[start:text.index("\n}\n", start) + 3]


def test_setup_script_says_what_each_step_does_and_how_long_it_takes():
    steps = [line for line in (ROOT / "scripts" / "setup.sh").read_text().splitlines()
             if line.lstrip().startswith("step ")]
    assert [s.split()[1] for s in steps] == ["1", "1", "2", "3", "4", "5"]
    text = (ROOT / "scripts" / "setup.sh").read_text()
    for hint in ("about 2.5 min", "1 to 3 min", "a few seconds", "already installed"):
        assert hint in text
    # the quiet pip installs run under the ticker; the warm-up prints a line per command
    assert all(line.startswith("ticking ") for line in text.splitlines() if "pip install -q -c" in line
               or "textgenrnn==" in line and "pip install" in line)
    assert "mdtheory.cli.warmup --progress" in text


def test_setup_ticker_reports_a_long_quiet_step_and_its_failure():
    """A 3 s step under a 1 s tick prints at least one "still working" line; the step's exit status
    is the ticker's."""
    script = _setup_function("ticking") + "SETUP_TICK=1 ticking sleep 3 && SETUP_TICK=1 ticking false\n"
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert run.returncode != 0 and "still working" in run.stdout, run


def test_warm_up_progress_prints_one_line_per_command(monkeypatch, capsys):
    monkeypatch.setattr(warmup, "_commands", lambda folder: [["verify", "--help"], ["dd", "--help"]])
    monkeypatch.setattr(warmup, "_library", lambda: None)
    warmup.warm(progress=True)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(",")[0] for line in lines] == ["  warm-up 1/2: verify", "  warm-up 2/2: dd"]
    monkeypatch.setattr(warmup, "_commands", lambda folder: [["verify", "nope"]])
    with pytest.raises(RuntimeError, match="warm-up command verify nope exited 2"):
        warmup.warm(progress=True)
