"""One device run of the torch bridge: exactness checks on the device, then the goal rows, in minutes.

    PYTHONUNBUFFERED=1 PYTHONPATH=$PWD python benchmarks/gpu_check.py --device cuda --out gpu_check.json
    PYTHONPATH=$PWD python benchmarks/gpu_check.py --device cpu --small --threads 1 --out /tmp/cpu.json

1. Checks, on the device: ``alpha_star`` by buckets (``select``, the default) against the sort
   route and a float64 numpy reference written here (a sort of p/q, running sums), float64 and
   float32 rows, n = 1, 4, 16; the optimal rule built on the device (``TorchOptimal``): its marginal
   is a distribution whose acceptance sum(min(p, mu)) is alpha*, and one step's acceptance rate over
   4,096 rows matches the rows' exact acceptance within 5 standard errors.
2. Rows, each timed after a warm-up (CUDA synchronised), repeats alternated with the reference where
   there is one: ``alpha_star`` against one ``torch.sort`` of p/q at 1,024 x 128,000 float32 (and the
   sort route's time); ``optimal`` prepare + one step at 1,024 x 32,000 and 4,096 x 1,000 (float64,
   n = 4); ``khisti-lp`` prepare + one step at 4,096 x 128,000 (float32 logits, n = 4).
3. With ``--tests SECONDS``: tests/test_torch_bridge.py's alpha* and optimal tests on the device.
4. The goals, each with its measured value and whether it is met:
   alpha* <= 1.0x one torch.sort; optimal >= 20,000 and >= 200,000 positions/s; khisti-lp >= 100,000.

All pairs are made on the device (language-model-like rows: Zipf logits with noise, the draft's
perturbed and tempered), so no large array crosses from the host. ``highspy`` and ``cdd`` (pycddlib)
are blocked from import (they may be absent on the device; ``--allow-all`` lifts the block), so a
CPU run here proves the script needs neither. A stage that fails (out of memory, say) is recorded
with its error and the run goes on. The table is written as JSON to ``--out``; progress lines go to
stdout as each stage ends. ``--small`` divides every batch by 64 (a CPU run in seconds).
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.util
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

#: Modules that may be missing on the device: their import fails here as it would there.
BLOCKED = ("highspy", "cdd")
#: The goals, as (key of a row, field, comparison, threshold, text).
GOALS = (
    ("alpha_star 1024x128000", "ratio_to_sort", "<=", 1.0,
     "alpha* (select) <= 1.0x one torch.sort at 1,024 x 128,000 float32"),
    ("optimal 1024x32000", "positions_per_s", ">=", 2e4,
     "optimal >= 20,000 positions/s at 1,024 x 32,000 (n = 4)"),
    ("optimal 4096x1000", "positions_per_s", ">=", 2e5,
     "optimal >= 200,000 positions/s at 4,096 x 1,000 (n = 4)"),
    ("khisti-lp 4096x128000", "positions_per_s", ">=", 1e5,
     "khisti-lp >= 100,000 positions/s at 4,096 x 128,000 (n = 4)"),
)


class _Blocker(importlib.abc.MetaPathFinder):
    """Fail the import of :data:`BLOCKED` modules, as on a machine without them."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked by gpu_check.py (it may be absent on the device)")
        return None


def log(text: str) -> None:
    print(text, flush=True)


def sync(torch, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def device_pairs(torch, B: int, V: int, device: str, dtype, seed: int = 0, kind: str = "llm"):
    """(p, q) rows made on the device: ``llm``, Zipf logits plus noise, the draft's perturbed by 0.8
    and tempered by 1.3 (benchmarks/bench_speed.py's pair); ``logits``, standard normal logits and a
    draft perturbed by a standard normal (benchmarks/bench_torch.py's)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    noise = torch.randn(2, B, V, generator=gen, device=device, dtype=torch.float32)
    if kind == "llm":
        zipf = -1.1 * torch.log(torch.arange(1, V + 1, device=device, dtype=torch.float32))
        target = zipf + 0.5 * noise[0]
        draft = (target + 0.8 * noise[1]) / 1.3
    else:
        target, draft = noise[0], noise[0] + noise[1]
    p = torch.softmax(target.to(dtype), -1)
    q = torch.softmax(draft.to(dtype), -1)
    return p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)


def numpy_alpha(p: np.ndarray, q: np.ndarray, n: int) -> np.ndarray:
    """alpha* of float64 rows by the sorted prefixes (papers/theory.md §4): tokens by p/q increasing
    (q = 0 last), 1 - max(0, max_j [Q_j^n - P_j]). An independent reference, numpy only."""
    out = np.empty(p.shape[0])
    for i, (a, b) in enumerate(zip(p, q, strict=True)):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(b > 0, a / b, np.inf)
        order = np.argsort(r, kind="stable")
        Q = np.minimum(np.cumsum(b[order]), 1.0)
        P = np.cumsum(a[order])
        out[i] = 1.0 - max(0.0, float((Q ** n - P).max()))
    return out


def timed(torch, device: str, fns: dict, repeats: int) -> dict:
    """Median and minimum seconds of each function, one warm-up call each first, the repeats
    alternated (f1, f2, f1, f2, ...)."""
    for fn in fns.values():
        fn()
    sync(torch, device)
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            sync(torch, device)
            t0 = time.perf_counter()
            fn()
            sync(torch, device)
            times[k].append(time.perf_counter() - t0)
    return {k: {"median": float(np.median(v)), "min": float(min(v))} for k, v in times.items()}


def free(torch, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


# --------------------------------------------------------------------------------------- checks
def check_alpha(torch, tb, device: str, div: int) -> dict:
    out = {}
    for dtype, tol in (("float64", 1e-12), ("float32", 2e-5)):
        dt = getattr(torch, dtype)
        p, q = device_pairs(torch, max(16 // div, 2), 32_000, device, dt, seed=1)
        P, Q = p.double().cpu().numpy(), q.double().cpu().numpy()
        P, Q = P / P.sum(1, keepdims=True), Q / Q.sum(1, keepdims=True)
        for n in (1, 4, 16):
            sel = tb.alpha_star(p, q, n, "select").double().cpu().numpy()
            srt = tb.alpha_star(p, q, n, "sort").double().cpu().numpy()
            ref = numpy_alpha(P, Q, n)
            err = float(np.abs(sel - ref).max())
            out[f"{dtype} n={n}"] = {"select_vs_numpy": err, "sort_vs_numpy": float(np.abs(srt - ref).max()),
                                     "ok": err <= tol}
    return out


def check_optimal(torch, tb, device: str, div: int) -> dict:
    n = 4
    p, q = device_pairs(torch, max(16 // div, 2), 32_000, device, torch.float64, seed=2)
    rule = tb.TorchOptimal(p, q, n)
    mu = rule.plan.mu
    accept = torch.minimum(p, mu).sum(-1).cpu().numpy()
    ref = numpy_alpha(p.cpu().numpy(), q.cpu().numpy(), n)
    out = {"acceptance_vs_alpha": float(np.abs(accept - ref).max()),
           "mu_min": float(mu.min()), "mu_sum_off_one": float((mu.sum(-1) - 1).abs().max())}
    B = max(4096 // div, 64)
    p, q = device_pairs(torch, B, 1000, device, torch.float64, seed=3)
    rule = tb.TorchOptimal(p, q, n)
    gen = torch.Generator(device=device).manual_seed(4)
    _, accepted = rule.step(tb.sample_drafts(q, n, gen), gen)
    exact = torch.minimum(p, rule.plan.mu).sum(-1)
    rate, mean = float(accepted.double().mean()), float(exact.mean())
    se = math.sqrt(float((exact * (1 - exact)).sum())) / B
    out.update({"step_acceptance_rate": rate, "exact_mean_acceptance": mean, "standard_error": se,
                "ok": out["acceptance_vs_alpha"] <= 1e-9 and out["mu_min"] >= 0
                and out["mu_sum_off_one"] <= 1e-12 and abs(rate - mean) <= 5 * se + 1e-12})
    return out


# ----------------------------------------------------------------------------------------- rows
def row_alpha(torch, tb, device: str, div: int, repeats: int) -> dict:
    B, V, n = max(1024 // div, 1), 128_000, 4
    p, q = device_pairs(torch, B, V, device, torch.float32, kind="logits")
    ratio = p / q
    t = timed(torch, device, {"sort": lambda: torch.sort(ratio, dim=-1),
                              "select": lambda: tb.alpha_star(p, q, n, "select"),
                              "sort_route": lambda: tb.alpha_star(p, q, n, "sort")}, repeats)
    return {"B": B, "V": V, "n": n, "dtype": "float32", "seconds": t["select"]["median"],
            "sort_seconds": t["sort"]["median"], "sort_route_seconds": t["sort_route"]["median"],
            "ratio_to_sort": t["select"]["median"] / t["sort"]["median"],
            "ratio_to_sort_min": t["select"]["min"] / t["sort"]["min"],
            "sort_route_ratio_to_sort": t["sort_route"]["median"] / t["sort"]["median"],
            "positions_per_s": B / t["select"]["median"]}


def row_rule(torch, tb, device: str, name: str, B: int, V: int, dtype, kind: str, repeats: int) -> dict:
    n = 4
    p, q = device_pairs(torch, B, V, device, dtype, kind=kind)
    gen = torch.Generator(device=device).manual_seed(0)

    def run():
        rule = tb.TORCH_RULES[name](p, q, n)
        return rule.step(tb.sample_drafts(q, n, gen), gen)

    t = timed(torch, device, {name: run}, repeats)[name]
    return {"B": B, "V": V, "n": n, "dtype": str(dtype).replace("torch.", ""), "pairs": kind,
            "seconds": t["median"], "seconds_min": t["min"], "positions_per_s": B / t["median"],
            "note": "prepare + one step"}


def goals(rows: dict) -> list[dict]:
    out = []
    for key, field, op, threshold, text in GOALS:
        value = rows.get(key, {}).get(field)
        met = None if value is None else (value <= threshold if op == "<=" else value >= threshold)
        out.append({"goal": text, "row": key, "measured": value, "met": met})
        log(f"goal: {text}: measured {value if value is None else f'{value:.4g}'}, met {met}")
    return out


def stage(report: dict, section: str, key: str, fn):
    """Run one stage, record its result or its error, and log a line."""
    t0 = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 - out of memory or a failed check: recorded, run goes on
        result = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
    result["stage_seconds"] = time.perf_counter() - t0
    report[section][key] = result
    def shown(d):
        return ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in d.items()
                         if not isinstance(v, dict))

    log(f"{section} {key}: {shown(result)}")
    for sub, d in result.items():
        if isinstance(d, dict):
            log(f"    {sub}: {shown(d)}")
    return result


def run_tests(device: str, seconds: float) -> dict:
    """tests/test_torch_bridge.py's alpha* and optimal tests with the device as their second device
    (``MDTHEORY_TEST_DEVICE``), in a subprocess stopped after ``seconds``."""
    import subprocess

    env = dict(os.environ, MDTHEORY_TEST_DEVICE=device, PYTHONPATH=str(ROOT))
    try:
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
                              "addopts=", "tests/test_torch_bridge.py", "-k", "alpha_star or optimal"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=seconds)
        lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
        return {"returncode": out.returncode, "summary": lines[-1] if lines else "", "tail": lines[-15:]}
    except subprocess.TimeoutExpired:
        return {"returncode": None, "summary": f"stopped after {seconds:.0f} s"}


def cpu_name() -> str:
    info = Path("/proc/cpuinfo")
    if info.exists():
        for line in info.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write the table to")
    ap.add_argument("--small", action="store_true", help="every batch divided by 64 (a CPU run)")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (CPU runs)")
    ap.add_argument("--repeats", type=int, default=7, help="timed repeats per row (default 7)")
    ap.add_argument("--allow-all", action="store_true", help="do not block highspy and cdd")
    ap.add_argument("--tests", type=float, default=0.0, metavar="SECONDS",
                    help="also run tests/test_torch_bridge.py -k 'alpha_star or optimal' on the device, "
                         "stopped after SECONDS (default 0: not run)")
    args = ap.parse_args(argv)
    if not args.allow_all:
        sys.meta_path.insert(0, _Blocker())
    t_start = time.perf_counter()
    import torch

    from mdtheory import torch_bridge as tb

    if args.threads:
        torch.set_num_threads(args.threads)
    dev = args.device
    tb.check_device(dev)
    div = 64 if args.small else 1
    name = torch.cuda.get_device_name(torch.device(dev)) if dev.startswith("cuda") else cpu_name()
    report = {"device": dev, "device_name": name, "torch": torch.__version__,
              "cuda": torch.version.cuda, "python": platform.python_version(), "numpy": np.__version__,
              "threads": torch.get_num_threads(), "small": args.small, "blocked": [] if args.allow_all
              else list(BLOCKED),
              "present": {m: importlib.util.find_spec(m) is not None for m in BLOCKED} if args.allow_all
              else "not probed (blocked)", "checks": {}, "rows": {}}
    log(f"device {dev} ({name}); torch {torch.__version__}, CUDA {torch.version.cuda}; "
        f"threads {torch.get_num_threads()}; small {args.small}")
    stage(report, "checks", "alpha_star", lambda: check_alpha(torch, tb, dev, div))
    free(torch, dev)
    stage(report, "checks", "optimal", lambda: check_optimal(torch, tb, dev, div))
    free(torch, dev)
    reps = args.repeats
    stage(report, "rows", "alpha_star 1024x128000", lambda: row_alpha(torch, tb, dev, div, reps))
    free(torch, dev)
    for B, V in ((1024, 32_000), (4096, 1000)):
        stage(report, "rows", f"optimal {B}x{V}",
              lambda B=B, V=V: row_rule(torch, tb, dev, "optimal", max(B // div, 1), V, torch.float64,
                                        "llm", reps))
        free(torch, dev)
    stage(report, "rows", "khisti-lp 4096x128000",
          lambda: row_rule(torch, tb, dev, "khisti-lp", max(4096 // div, 1), 128_000, torch.float32,
                           "logits", max(reps // 2, 2)))
    free(torch, dev)
    if args.tests > 0:
        stage(report, "checks", "pytest", lambda: run_tests(dev, args.tests))
    report["goals"] = goals(report["rows"])
    report["seconds"] = time.perf_counter() - t_start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    log(f"wrote {args.out} in {report['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
