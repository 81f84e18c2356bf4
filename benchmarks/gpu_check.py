"""One device check of the torch bridge: its tests on the device, then every row of the benchmark.

    PYTHONPATH=$PWD python benchmarks/gpu_check.py [--device cuda] [--out DIR] [--skip-tests]

1. ``pytest tests/test_torch_bridge.py`` with ``MDTHEORY_TEST_DEVICE`` set to the device, so every
   device-parametrised test (alpha*, the rules' audits, the truncated stages against the numpy
   solvers) runs there as well as on the CPU.
2. benchmarks/bench_torch.py's table at the GPU sizes (``--full``), one line per row.
3. The goals, each with its measured value and whether it is met.
4. Where the time goes: the profiler's top kernels for one alpha* (1024 x 128000), one khisti-lp
   preparation and step (4096 x 32000) and one optimal preparation and step (1024 x 32000).

Writes ``torch_<device type>.json`` (``torch_cuda.json`` on a GPU; device name, torch version, the
pytest summary, rows, goals) into ``--out`` (default benchmarks/results/), so a CPU run never
overwrites a GPU's results. Meant to finish within 5 minutes on one H100/H200.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from bench_torch import measure  # noqa: E402


def run_tests(device: str) -> dict:
    path = os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env = dict(os.environ, MDTHEORY_TEST_DEVICE=device, PYTHONPATH=path)
    t0 = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "-o", "addopts=", "tests/test_torch_bridge.py"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=240)
        lines = (out.stdout + out.stderr).strip().splitlines()
        code = out.returncode
    except subprocess.TimeoutExpired as exc:
        lines, code = [f"timed out after {exc.timeout} s"], -1
    tail = [ln for ln in lines if ln.strip()][-25:]
    print("\n".join(tail), flush=True)
    return {"returncode": code, "summary": tail[-1] if tail else "", "tail": tail,
            "seconds": time.perf_counter() - t0}


def find(rows, what, B=None, V=None):
    for r in rows:
        if r.get("what") == what and "error" not in r and (B is None or r["B"] == B) and (
                V is None or r["V"] == V):
            return r
    return None


def goals(rows) -> list[dict]:
    out = []

    def goal(text, value, ok):
        out.append({"goal": text, "measured": value, "met": bool(ok) if value is not None else None})

    r = find(rows, "khisti-lp", 4096, 128_000)
    goal("khisti-lp >= 100,000 positions/s at B = 4096, V = 128000, n = 4",
         r and r["positions_per_s"], r and r["positions_per_s"] >= 1e5)
    r = find(rows, "optimal", V=32_000)
    goal("optimal >= 20,000 positions/s at V = 32000, n = 4", r and r["positions_per_s"],
         r and r["positions_per_s"] >= 2e4)
    r = find(rows, "optimal", V=1000)
    goal("optimal >= 200,000 positions/s at V = 1000, n = 4", r and r["positions_per_s"],
         r and r["positions_per_s"] >= 2e5)
    r = find(rows, "alpha_star", 1024, 128_000)
    goal("alpha* <= 1.2x one torch.sort at 1024 x 128000 float32", r and r["ratio_to_sort"],
         r and r["ratio_to_sort"] <= 1.2)
    k, s = find(rows, "k-seq", V=32_000), find(rows, "rrs", 16384, 32_000)
    ratio = k and s and s["positions_per_s"] / k["positions_per_s"]
    goal("k-seq within 3x of rrs at 16384 x 32000", ratio, ratio and ratio <= 3.0)
    for r in out:
        print(f"goal: {r['goal']}: measured {r['measured']}, met {r['met']}", flush=True)
    return out


def profile(device: str) -> dict:
    """The profiler's kernel table (top 12 by device time) for alpha*, khisti-lp and optimal."""
    from bench_torch import logit_pairs

    from mdtheory import torch_bridge as tb

    tables = {}
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    key = "cuda_time_total" if device.startswith("cuda") else "cpu_time_total"
    for label, B, V, fn in [
            ("alpha_star 1024 x 128000", 1024, 128_000, lambda p, q: tb.alpha_star(p, q, 4)),
            ("khisti-lp 4096 x 32000", 4096, 32_000,
             lambda p, q: tb.TorchKhisti(p, q, 4).step(tb.sample_drafts(q, 4))),
            ("optimal 1024 x 32000", 1024, 32_000,
             lambda p, q: tb.TorchOptimal(p, q, 4).step(tb.sample_drafts(q, 4)))]:
        p, q = logit_pairs(B, V, device, torch.float32)
        fn(p, q)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=activities) as prof:
            fn(p, q)
            torch.cuda.synchronize()
        table = prof.key_averages().table(sort_by=key, row_limit=12, max_name_column_width=60)
        print(f"profile: {label}\n{table}", flush=True)
        tables[label] = table
        del p, q
        torch.cuda.empty_cache()
    return tables


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--skip-tests", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    dev = args.device
    name = torch.cuda.get_device_name(0) if dev.startswith("cuda") else "cpu"
    print(f"device: {dev} ({name}); torch {torch.__version__}", flush=True)
    report = {"device": dev, "device_name": name, "torch": torch.__version__}
    report["tests"] = None if args.skip_tests else run_tests(dev)
    report["rows"] = measure(dev, full=True)
    report["goals"] = goals(report["rows"])
    try:
        report["profile"] = profile(dev)
    except (RuntimeError, AssertionError) as exc:  # a profiler that cannot run leaves the rest intact
        report["profile"] = {"error": str(exc).splitlines()[0][:200]}
    report["seconds"] = time.perf_counter() - t0
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"torch_{torch.device(dev).type}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {path} in {report['seconds']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
