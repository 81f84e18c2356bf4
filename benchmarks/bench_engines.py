"""The engine verifiers' step time (mdtheory.engines.VERIFIERS), against the standard chain step and
against one read of the call's target_probs.

    PYTHONPATH=$PWD python benchmarks/bench_engines.py [--device cpu|cuda] [--threads 1]
        [--batch 256] [--vocab 32000] [--repeats 5] [--out FILE.json]

One problem size, the engines' own: B = 256 rows, V = 32,000, float32 laws (LLM-like: Zipf target
logits plus noise, the draft a noisy copy), chains of k = L = 4 drafts, and trees of 8 drafted nodes
(N = 9): ``chains2x4``, two sampled chains of 4 tokens (the n-chain verifiers, and the tree
verifiers on the same tree), and ``tree2x3``, a root with two children of three children each
(sampled for traversal and tree-optimal, the draft's top tokens for target-only). Every call gets
``depth`` (no host synchronisation) and a fixed generator.

Each row is the minimum over interleaved repeats of one call (CUDA synchronised; on CPU one torch
thread by default), as a ratio to ``standard`` (the chain contract's standard rule at L = 4, same
B and V) and to its floor, ``target_probs.sum()`` of the call's own target tensor (one read of it,
timed the same way). On CUDA each row also reports whether a call ran with
``torch.cuda.set_sync_debug_mode("error")`` (no synchronisation) and its time when captured in a
CUDA graph (replays of the captured call; "-" where capture failed, with the reason in the JSON).
Progress goes to stdout; ``--out`` gets the table as JSON with the machine's facts and the goals:
block <= 1.5x standard; tree-optimal <= 3x target-only on the same tree; on CUDA standard, block
and target-only within 2x of their floor.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from mdtheory.blocks import DraftTree  # noqa: E402
from mdtheory.engines import VERIFIERS, tree_layout  # noqa: E402


def laws(gen, B: int, rows: int, V: int, device, noise: float = 0.5, temperature: float = 1.0):
    """(target, draft) float32 (B, rows, V): Zipf logits plus noise, the draft a noisy copy."""
    kw = {"generator": gen, "device": device}
    base = -1.1 * torch.log(torch.arange(1, V + 1, device=device, dtype=torch.float32))
    logits = base + 0.5 * torch.randn(B, rows, V, **kw)
    draft = (logits + noise * torch.randn(B, rows, V, **kw)) / temperature
    return logits.softmax(-1), draft.softmax(-1)


def chain_problem(gen, B, L, V, device):
    p, q = laws(gen, B, L + 1, V, device)
    q = q[:, :L].contiguous()
    x = torch.multinomial(q.reshape(-1, V), 1, generator=gen).reshape(B, L)
    return x, q, p


def tree_problem(gen, B, branching, V, device, top: bool):
    """Linked lists of ``DraftTree(branching)`` (breadth-first numbering), children drawn iid from
    the parent's draft row (or its top tokens)."""
    lay = tree_layout(DraftTree(branching))
    N = lay.nodes
    p, q = laws(gen, B, N, V, device)
    cand = torch.zeros(B, N, dtype=torch.long, device=device)
    for j in range(N):
        kids = np.flatnonzero(lay.parent == j)
        if kids.size == 0:
            continue
        if top:
            cand[:, kids] = torch.topk(q[:, j], kids.size, dim=-1).indices
        else:
            cand[:, kids] = torch.multinomial(q[:, j], kids.size, replacement=True, generator=gen)
    links = [torch.as_tensor(a, device=device).expand(B, N).contiguous() for a in (lay.next_token,
                                                                                   lay.next_sibling)]
    return cand, links[0], links[1], p, q, len(branching)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, repeats: int) -> float:
    """Minimum time of ``fn()`` over ``repeats`` (after one warm-up; one repeat when the warm-up
    took over 2 s): wall time, CUDA synchronised, on a device; on the CPU the process's CPU time
    (one thread: the wall time of an idle machine, without the other jobs of a shared one)."""
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    t0 = clock()
    fn()
    sync(device)
    best = float("inf")
    for _ in range(repeats if clock() - t0 < 2 else 1):
        t0 = clock()
        fn()
        sync(device)
        best = min(best, clock() - t0)
    return best


def graphed(call, device, gen, repeats: int):
    """(time per replay of ``call(generator)`` captured in a CUDA graph, None) or (None, why capture
    failed). The benchmark's generator is registered with the graph where torch allows it, else the
    device's default generator is used (graph-safe in every torch with CUDA graphs)."""
    why = None
    for g in (gen, None):
        try:
            graph = torch.cuda.CUDAGraph()
            if g is not None:
                if not hasattr(graph, "register_generator_state"):
                    continue
                graph.register_generator_state(g)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    call(g)
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(graph):
                call(g)
            return timed(graph.replay, device, repeats), None
        except Exception as exc:  # noqa: BLE001 -- report any capture failure, keep benchmarking
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return None, why


def sync_free(fn) -> bool | str:
    """Whether ``fn()`` runs with CUDA's synchronisation debug mode set to error."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
        return True
    except RuntimeError as exc:
        return f"synchronises: {str(exc).splitlines()[0][:200]}"
    finally:
        torch.cuda.set_sync_debug_mode("default")


def audits(device) -> list[dict]:
    """Every verifier through the engine audit on ``device`` (random V = 3 instance, trees as the
    tests take them): a lossless check of the device's code path."""
    from mdtheory.blocks import random_instance
    from mdtheory.engines import audit_chain, audit_tree

    target, draft = random_instance(3, seed=2)
    out = []
    for name, v in VERIFIERS.items():
        t0 = time.perf_counter()
        try:
            if v.contract == "chain":
                rs = [audit_chain(v, target, draft, 2, deterministic=det, seed=1, device=str(device))
                      for det in (False, True)]
            else:
                shape = {"chains": (2, 1), "deterministic": (2, 2), "sampled": (2, 2)}[v.drafts]
                rs = [audit_tree(v, target, draft, shape, deterministic=v.drafts == "deterministic", seed=1,
                                 device=str(device))]
            row = {"verifier": name, "verdicts": [r.verdict for r in rs],
                   "block_efficiency": [r.block_efficiency for r in rs], "optimum": [r.optimum for r in rs]}
        except Exception as exc:  # noqa: BLE001 -- report and go on
            row = {"verifier": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
        row["seconds"] = time.perf_counter() - t0
        out.append(row)
        print(f"  audit {name:<18} {row.get('verdicts', row.get('error'))}  {row['seconds']:.1f} s",
              flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch threads on the CPU (default 1)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=32_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", help="write the table as JSON here (rewritten after every row)")
    ap.add_argument("--no-audit", action="store_true", help="skip the engine audits on the device")
    ap.add_argument("--only", help="comma-separated verifiers to time (default: all; standard always)")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    B, V, L = args.batch, args.vocab, 4
    gen = torch.Generator(device=device).manual_seed(0)
    chain = chain_problem(gen, B, L, V, device)
    problems = {"chains2x4": tree_problem(gen, B, (2, 1, 1, 1), V, device, top=False),
                "tree2x3": tree_problem(gen, B, (2, 3), V, device, top=False),
                "tree2x3-top": tree_problem(gen, B, (2, 3), V, device, top=True)}
    only = set(VERIFIERS) if args.only is None else {"standard", *args.only.split(",")}
    calls = []
    for name in ("standard", "block"):
        x, q, p = chain
        calls.append((name, "chain L=4", p, lambda g, v=VERIFIERS[name], x=x, q=q, p=p: v(x, q, p, g)))
        calls.append((name, "chain L=4 deterministic", p,
                      lambda g, v=VERIFIERS[name], x=x, p=p: v(x, None, p, g)))
    for name, v in VERIFIERS.items():
        if v.contract != "tree" or name not in only:
            continue
        shapes = {"chains": ["chains2x4"], "deterministic": ["tree2x3-top", "chains2x4"],
                  "sampled": ["tree2x3", "chains2x4"]}[v.drafts]
        for shape in shapes:
            cand, nt, ns, p, q, D = problems[shape]
            dq = None if v.drafts == "deterministic" else q
            calls.append((name, shape, p, lambda g, v=v, c=cand, nt=nt, ns=ns, p=p, dq=dq, D=D:
                          v(c, nt, ns, p, dq, g, depth=D)))
    facts = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
             or platform.machine(), "torch": torch.__version__, "python": platform.python_version(),
             "threads": torch.get_num_threads(), "batch": B, "vocab": V, "length": L,
             "load": os.getloadavg() if hasattr(os, "getloadavg") else None}
    print(f"bench_engines: B = {B}, V = {V}, L = {L}, {device}, {facts['device']}, torch {facts['torch']}, "
          f"threads {facts['threads']}", flush=True)
    report = {"facts": facts, "audits": [], "rows": [], "goals": {}}

    def save():
        if args.out:
            pathlib.Path(args.out).write_text(json.dumps(report, indent=1, default=str))

    if not args.no_audit:
        report["audits"] = audits(device)
        save()
    floors = {}
    rows = report["rows"]
    for name, shape, p, call in calls:
        if name not in only:
            continue
        key = id(p)
        if key not in floors:
            floors[key] = timed(lambda p=p: p.sum(), device, args.repeats)
        row = {"verifier": name, "problem": shape, "floor_seconds": floors[key]}
        try:
            row["seconds"] = timed(lambda call=call: call(gen), device, args.repeats)
            if device.type == "cuda":
                row["sync_free"] = sync_free(lambda call=call: call(gen))
                row["graph_seconds"], row["graph_failure"] = graphed(call, device, gen, args.repeats)
        except Exception as exc:  # noqa: BLE001 -- report and go on
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        rows.append(row)
        save()
        t = row.get("seconds")
        print(f"  {name:<18} {shape:<24} " + (f"{1e3 * t:9.3f} ms" if t else row.get("error", ""))
              + f"   floor {1e3 * floors[key]:8.3f} ms"
              + (f"   graph {1e3 * row['graph_seconds']:.3f} ms" if row.get("graph_seconds") else ""),
              flush=True)

    def get(name, shape, key="seconds"):
        return next((r.get(key) for r in rows if (r["verifier"], r["problem"]) == (name, shape)), None)

    def best(name, shape):  # eager, or its CUDA graph where captured
        return min(t for t in (get(name, shape), get(name, shape, "graph_seconds")) if t) \
            if get(name, shape) else None

    std = best("standard", "chain L=4")
    for r in rows:
        if r.get("seconds"):
            r["vs_standard"] = best(r["verifier"], r["problem"]) / std
            r["vs_floor"] = best(r["verifier"], r["problem"]) / r["floor_seconds"]
    pairs = {"block <= 1.5x standard": (("block", "chain L=4"), ("standard", "chain L=4"), 1.5),
             "tree-optimal <= 3x target-only (8-node trees)": (("tree-optimal", "tree2x3"),
                                                              ("target-only", "tree2x3-top"), 3.0),
             "chains-optimal <= 3x target-only (2 chains of 4)": (("chains-optimal", "chains2x4"),
                                                                 ("target-only", "chains2x4"), 3.0)}
    goals = report["goals"]
    for text, (a, b, limit) in pairs.items():
        if best(*a) and best(*b):
            goals[text] = {"value": best(*a) / best(*b), "limit": limit}
    if device.type == "cuda":
        floor_goals = (("standard", "chain L=4"), ("block", "chain L=4"), ("target-only", "tree2x3-top"))
        for name, shape in floor_goals:
            if best(name, shape):
                goals[f"{name} within 2x of its floor"] = {
                    "value": best(name, shape) / get(name, shape, "floor_seconds"), "limit": 2.0}
    save()
    print(f"\n{'verifier':<18} {'problem':<24} {'ms':>9} {'x standard':>11} {'x floor':>9}"
          "  (the better of eager and CUDA graph)")
    for r in rows:
        if r.get("seconds"):
            print(f"{r['verifier']:<18} {r['problem']:<24} {1e3 * best(r['verifier'], r['problem']):9.3f} "
                  f"{r['vs_standard']:11.2f} {r['vs_floor']:9.2f}")
    print("\ngoals:")
    for text, g in goals.items():
        print(f"  {text}: {g['value']:.2f} ({'met' if g['value'] <= g['limit'] else 'not met'})")
    if args.out:
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
