"""The minimum-norm-point route's memory: each Wolfe run reserves its corral in rows that grow as
the corral does, up to a cap; the estimate is above the traced peak within the factor estimates are
held to; beyond a limit the route is refused up front."""

import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import mdtheory as md
from mdtheory import _budget
from mdtheory.errors import ProblemTooLargeError
from mdtheory.models.independent import Independent
from mdtheory.routes import mnp
from mdtheory.solve import route_estimate

ROOT = Path(__file__).resolve().parent.parent
V = 10_000


def _pair():
    rng = np.random.default_rng(0)
    return rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V), size=2)


def _reserved(run) -> int:
    """Bytes a run holds for its corral: its vertex rows, their orders, the Gram matrix and its
    factor, and the least-squares route's factors where built."""
    arrays = [run.S, run.R, run.orders, run.G, run.L] + (list(run.qr[:2]) if run.qr else [])
    return sum(a.nbytes for a in arrays)


def test_each_run_reserves_what_its_corral_needs_within_the_cap(monkeypatch):
    """V = 10,000, two independent drafts, 30 iterations: every run's storage holds at most twice
    its largest corral (it grows by doubling) and never more than the cap; the estimate stays under
    the ceiling of all runs at their cap (a run of V + 2 rows would reserve 3.7 GiB)."""
    runs = []
    real = mnp._Wolfe.__init__

    def record(self, *args, **kwargs):
        real(self, *args, **kwargs)
        runs.append(self)

    monkeypatch.setattr(mnp._Wolfe, "__init__", record)
    p, qs = _pair()
    base = mnp.min_norm_base(p, Independent(qs), max_iter=30, strict=False)
    cap = _budget.mnp_corral_cap(V)
    assert runs and base.iterations <= 3 * 30
    for run in runs:
        assert run.S.shape[0] <= min(cap, max(mnp.FIRST_ROWS, 2 * (base.iterations + 1)))
        assert _reserved(run) <= _budget.mnp_run_bytes(V, run.S.shape[0])
    assert _budget.MNP_RUNS * _budget.mnp_run_bytes(V, cap) <= _budget.MNP_RESERVE
    assert route_estimate(Independent(qs), "mnp").bytes <= _budget.MNP_RESERVE + 64 * (V + 2)


@pytest.mark.parametrize("sampling, V, n", [
    ("without-replacement", 500, 4), ("without-replacement", 1000, 8), ("iid", 1000, 2),
    pytest.param("without-replacement", 2000, 4, marks=pytest.mark.slow),
    pytest.param("without-replacement", 2000, 8, marks=pytest.mark.slow)])
def test_the_memory_estimate_is_above_the_traced_peak_within_ten_times(sampling, V, n):
    """The estimate against the peak :mod:`tracemalloc` traces over the whole route (its runs'
    storage, the vertices, the result), on a Dirichlet(1) pair: above it, by at most the factor
    10 that estimates are held to (measured 1.3 to 5.1 times on these)."""
    rng = np.random.default_rng(1)
    p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
    model = md.make_draft_model(q, n, sampling)
    estimate = route_estimate(model, "mnp").bytes
    md.optimal_acceptance(np.full(20, 0.05), md.make_draft_model(np.full(20, 0.05), 2, sampling),
                          method="mnp")  # compiled kernels loaded before tracing
    tracemalloc.start()
    try:
        md.optimal_acceptance(p, model, method="mnp")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= estimate <= 10 * peak


def test_a_corral_at_its_cap_stops_with_its_bounds(monkeypatch):
    """A cap below the corral the method needs: the run stops (as a stall) with proven bounds,
    it does not outgrow its storage."""
    monkeypatch.setattr(mnp, "mnp_corral_cap", lambda V: 4)
    rng = np.random.default_rng(3)
    p, qs = rng.dirichlet(np.ones(60)), rng.dirichlet(np.full(60, 0.3), size=3)
    base = mnp.min_norm_base(p, Independent(qs), strict=False)
    assert base.orders.shape[0] <= 4 and base.lower <= base.upper
    exact = md.optimal_acceptance(p, Independent(qs), method="dual").value
    assert base.lower <= exact + 1e-9 <= base.upper + 2e-9


def test_the_route_is_refused_up_front_beyond_max_bytes():
    p, qs = _pair()
    with pytest.raises(ProblemTooLargeError, match="memory"):
        md.optimal_acceptance(p, qs, sampling="independent", method="mnp", max_bytes=2**27)


def test_the_route_runs_under_an_address_space_limit():
    """Under ``ulimit -v 8000000`` (8 GB of address space), the route at V = 10,000 runs (a few
    iterations here) instead of failing to reserve its arrays (three runs of five (V + 2)-square
    arrays asked for 11 GiB)."""
    code = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (8_000_000 * 1024, 8_000_000 * 1024))
        import numpy as np
        from mdtheory.models.independent import Independent
        from mdtheory.routes.mnp import min_norm_base
        rng = np.random.default_rng(0)
        p, qs = rng.dirichlet(np.ones({V})), rng.dirichlet(np.ones({V}), size=2)
        base = min_norm_base(p, Independent(qs), max_iter=10, strict=False)
        print(base.lower <= base.upper)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "True"


@pytest.mark.parametrize("sampling", ["greedy", "top"])
def test_fixed_top_drafts_run_at_large_v_within_the_default_limits(sampling):
    """Greedy and top-n drafts: one O(V) pass per vertex and a handful of iterations, so at
    V = 100,000 the route fits the default limits and closes."""
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.full(100_000, 0.5), size=2)
    model = md.make_draft_model(q, 4, sampling)
    estimate = route_estimate(model, "mnp")
    assert estimate.seconds < _budget.MAX_SECONDS and estimate.bytes < _budget.MAX_BYTES
    res = md.optimal_acceptance(p, model, method="mnp")
    assert res.status == "optimal"
