"""Torch bridge benchmark: batched alpha* against one sort, and each rule's positions per second.

    .venv/bin/python benchmarks/bench_torch.py [--device cpu|cuda] [--full] [--json FILE]

Every row is one line: what, B x V, dtype, the median time of the repeats after a warm-up (CUDA runs
synchronised), positions per second, and a ratio where one is named. alpha*: the default (selection)
route, and at 1024 x 128,000 the sort route too, on (B, V) float32 rows of random logits, against one
``torch.sort`` of the same ratio p/q. Rules:
one verification step per position, preparation included ("prepare + one step"), on LLM-like pairs
(mdtheory._synthetic.llm_pairs) or on random-logit pairs at the large sizes, n = 4 drafts. The
reviewers' question (Khisti et al., OpenReview): the truncated LP's selection time against ``rrs``
per step, at V = 32k and 128k. Without ``--full`` (the default on CPU), the large rows run at a
smaller B (the row says which). benchmarks/gpu_check.py runs this with ``--full`` on CUDA.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from mdtheory import torch_bridge as tb
from mdtheory._synthetic import llm_pairs


def timed(fn, device, repeats=5):
    fn()
    times = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def logit_pairs(B, V, device, dtype, seed=0):
    """p = softmax(z), q = softmax(z + noise), z standard normal: a drafter close to its target."""
    gen = torch.Generator(device=device).manual_seed(seed)
    z = torch.randn(B, V, generator=gen, device=device, dtype=torch.float32)
    p = torch.softmax(z, -1).to(dtype)
    q = torch.softmax(z + torch.randn(B, V, generator=gen, device=device), -1).to(dtype)
    return p, q


def _free(device):
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def rule_row(name, B, V, device, dtype=torch.float64, source="llm", repeats=3, note=""):
    if source == "llm":
        P, Q = (torch.as_tensor(x, dtype=dtype, device=device)
                for x in llm_pairs(np.random.default_rng(0), B, V))
    else:
        P, Q = logit_pairs(B, V, device, dtype)
    gen = torch.Generator(device=device).manual_seed(0)

    def run():
        rule = tb.TORCH_RULES[name](P, Q, 4)
        return rule.step(tb.sample_drafts(Q, 4, gen), gen)

    t = timed(run, device, repeats)
    return {"what": name, "B": B, "V": V, "dtype": str(dtype).replace("torch.", ""),
            "seconds": t, "positions_per_s": B / t, "note": note or "prepare + one step"}


def alpha_rows(B, V, device, method="auto"):
    p, q = logit_pairs(B, V, device, torch.float32)
    ratio = p / q
    t_sort = timed(lambda: torch.sort(ratio, dim=-1), device)
    t = timed(lambda: tb.alpha_star(p, q, 4, method), device)
    what = "alpha_star" if method == "auto" else f"alpha_star {method}"
    return {"what": what, "B": B, "V": V, "dtype": "float32", "seconds": t,
            "positions_per_s": B / t, "sort_seconds": t_sort, "ratio_to_sort": t / t_sort,
            "note": f"n = 4, {'selection' if method == 'auto' else method} route, against one "
                    "torch.sort of p/q"}


def measure(device: str, full: bool, log=print) -> list[dict]:
    """Every row of the table (a row that fails, out of memory say, is kept with its error)."""
    big = 1 if full else 16  # batch divisor of the large rows off the GPU
    specs = [(alpha_rows, (B // big, V, device), {})
             for B, V in [(1024, 128_000), (256, 152_064), (4096, 32_000)]]
    specs += [(alpha_rows, (1024 // big, 128_000, device), {"method": "sort"})]
    specs += [(rule_row, ("khisti-lp", 256, 10, device), {}),
              (rule_row, ("khisti-lp", 256, 1000, device), {}),
              (rule_row, ("rrs", 4096, 1000, device), {}),
              (rule_row, ("k-seq", 4096, 1000, device), {})]
    for V in (32_000, 128_000):  # the reviewers' question: truncated LP vs rrs per step
        for name in ("rrs", "khisti-lp"):
            specs.append((rule_row, (name, 4096 // big, V, device, torch.float32, "logits"),
                          {"note": "prepare + one step; the reviewers' table"}))
    specs += [(rule_row, (name, 16384 // big, 32_000, device), {}) for name in ("rrs", "k-seq")]
    specs += [(rule_row, ("optimal", 256, 10, device), {}),
              (rule_row, ("optimal", 4096 // big, 1000, device), {}),
              (rule_row, ("optimal", 1024 // big, 32_000, device),
               {"note": "prepare + one step (cells and swaps built for the batch on the device)"})]
    rows = []
    for fn, args, kw in specs:
        try:
            row = fn(*args, **kw)
            _free(device)
        except (RuntimeError, MemoryError) as exc:  # torch.OutOfMemoryError is a RuntimeError
            row = {"what": args[0] if isinstance(args[0], str) else "alpha_star",
                   "error": str(exc).splitlines()[0][:200]}
            _free(device)
            log(f"{row['what']:<11s} {args}: {row['error']}")
            rows.append(row)
            continue
        rows.append(row)
        extra = (f"; {row['ratio_to_sort']:.2f}x one sort ({row['sort_seconds'] * 1e3:.1f} ms)"
                 if "ratio_to_sort" in row else "")
        log(f"{row['what']:<11s} {row['B']:>6d} x {row['V']:<7d} {row['dtype']:<8s} "
            f"{row['seconds'] * 1e3:9.2f} ms {row['positions_per_s']:>12,.0f} positions/s{extra}"
            f"  [{row['note']}]", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--full", action="store_true", help="the GPU sizes (default on CUDA)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    dev = args.device
    full = args.full or dev.startswith("cuda")
    print(f"device: {dev}; torch {torch.__version__}; threads {torch.get_num_threads()}")
    rows = measure(dev, full)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
