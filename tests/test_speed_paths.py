"""Fast paths give the same answers as the paths they shortcut; no wall-clock checks.

* lazy imports: ``import mdtheory`` and the CLI's default ``check-acceptance`` load none of the heavy
  libraries (the routes that need them import them when run);
* kernels of :mod:`mdtheory._jit`: interpreted and numba-compiled runs agree;
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mdtheory import _jit, alpha_star, certify, optimal_acceptance
from mdtheory.models.iid import IID
from mdtheory.routes import subsets

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numba", "scipy", "networkx", "highspy", "cdd", "cvxpy", "sympy", "torch", "tqdm")


def _loaded_after(code: str) -> list[str]:
    """Heavy modules present in a fresh interpreter after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_loads_no_heavy_library():
    assert _loaded_after("import mdtheory") == []


def test_default_cli_command_loads_no_heavy_library():
    code = ("import contextlib, io\nfrom mdtheory.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['check-acceptance', 'examples/p.npy', 'examples/q.npy', '--drafts', '4'])")
    assert _loaded_after(code) == []


def _instance(V: int, seed: int):
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.full(V, 0.3)), rng.dirichlet(np.full(V, 0.3))
    p[rng.random(V) < 0.05] = 0.0  # draft-only tokens and ties
    q[:3] = 0.0
    return p / p.sum(), q / q.sum()


@pytest.mark.parametrize("seed", range(3))
def test_kernels_interpreted_and_compiled_agree(seed, monkeypatch):
    p, q = _instance(300, seed)
    model = IID(q, 4)
    runs = []
    for mode in ("python", "numba"):  # everything interpreted, then everything compiled
        monkeypatch.setattr(_jit, "FORCE", mode)
        out = subsets.prefix_scan(p, model)
        runs.append((out, certify.check_base_iid(p, model, out.proof.order)))
    (a, (lo_a, mu_a)), (b, (lo_b, mu_b)) = runs
    assert a.value == b.value and np.array_equal(a.cut, b.cut)
    assert lo_a == lo_b  # the same operations on IEEE doubles: the same bits
    np.testing.assert_array_equal(mu_a, mu_b)


def test_interpreted_work_is_bounded_then_numba_runs():
    """Ski rental: a fresh process interprets the CLI example, and compiles once its interpreted
    work would pass the budget."""
    code = ("import numpy as np, sys\nimport mdtheory as md\nfrom mdtheory import _jit\n"
            "from mdtheory.routes import select\n"
            "p, q = np.load('examples/p.npy'), np.load('examples/q.npy')\n"
            "md.optimal_acceptance(p, q, 4)\n"
            "first = ('numba' in sys.modules, 0 < _jit._spent <= _jit.INTERPRETED_BUDGET)\n"
            "rng = np.random.default_rng(0)\n"
            "for _ in range(4):\n"
            "    md.optimal_acceptance(rng.dirichlet(np.ones(3000)), rng.dirichlet(np.ones(3000)), 4)\n"
            "print(first, 'numba' in sys.modules, select._histogram._compiled is not None, "
            "_jit._spent <= _jit.INTERPRETED_BUDGET)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    assert out.stdout.split() == ["(False,", "True)", "True", "True", "True"]


# ----------------------------------------------------------------------------- sorted prefixes
def _near_ties(seed: int):
    """Ratios p/q that agree in their leading bits (one packed sort key) but differ in the last
    ones, laid out against the token order; exact ties; p = 0, q = 0 and p = q = 0 tokens; masses
    below TINY."""
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.ones(60))
    ratio = np.repeat(rng.uniform(0.5, 2.0, 6), 10)
    ratio *= 1.0 + rng.integers(-40, 40, ratio.size) * np.finfo(float).eps  # last bits only
    p = ratio * q
    p[:3], q[3:6], p[6:8], q[6:8] = 0.0, 0.0, 0.0, 0.0
    p[8], q[9] = 1e-200, 1e-190  # below TINY: read as zero by the order
    p[10:14] = 2.0 * q[10:14]  # exact ties
    return p / p.sum(), q / q.sum()


def _stable_ratio_order(p, q):
    """The order :func:`mdtheory.routes.subsets.prefix_order` promises, by a stable sort of p/q (masses
    below TINY read as zero; p = 0 < q first, q = 0 < p then p = q = 0 last)."""
    from mdtheory.models.polymatroid import TINY

    a, b = np.where(p >= TINY, p, 0.0), np.where(q >= TINY, q, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        key = np.where(b > 0, a / np.where(b > 0, b, 1.0), np.where(a > 0, np.inf, np.nan))
    return np.argsort(key, kind="stable")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", ["python", "numba"])
def test_packed_key_sort_is_the_exact_ratio_order(seed, mode, monkeypatch):
    """Sorting ratio bits with the token index in the low bits, then re-sorting the runs whose
    truncated ratios tie, gives exactly a stable sort of the ratios."""
    monkeypatch.setattr(_jit, "FORCE", mode)
    p, q = _near_ties(seed)
    shift = max(int(p.size - 1).bit_length(), 1)
    keys = np.sort(subsets._packed_keys(p, q, shift))
    assert (np.diff(keys >> np.uint64(shift)) == 0).sum() >= 10  # the fix-up has work to do
    np.testing.assert_array_equal(subsets.prefix_order(p, q), _stable_ratio_order(p, q))


def _softmax_pair(V: int, seed: int):
    rng = np.random.default_rng(seed)
    logits = -1.1 * np.log(np.arange(1, V + 1)) + 0.5 * rng.standard_normal(V)
    p, q = np.exp(logits), np.exp((logits + 0.8 * rng.standard_normal(V)) / 1.3)
    return p / p.sum(), q / q.sum()


@pytest.mark.parametrize("mode", ["python", "numba"])
def test_radix_sort_is_np_sort_on_packed_keys(mode, monkeypatch):
    """The radix sort of the packed keys (large V) gives np.sort's result: keys of real ratios,
    keys sharing digits or whole ratios, and keys whose top digit is common (a skipped pass)."""
    monkeypatch.setattr(_jit, "FORCE", mode)
    rng = np.random.default_rng(5)
    V = 3000 if mode == "python" else 40_000
    shift = int(V - 1).bit_length()
    p, q = _softmax_pair(V, 1)
    ratio_keys = subsets._packed_keys(p, q, shift)
    low = np.arange(V, dtype=np.uint64)
    shared = (rng.integers(0, 4, V).astype(np.uint64) << np.uint64(40)) | \
        (np.uint64(0x3FF) << np.uint64(52)) | low  # few distinct ratios, one top digit
    spread = (rng.integers(0, 2**46, V).astype(np.uint64) << np.uint64(shift)) | low
    for keys in (ratio_keys, shared, spread):
        expect = np.sort(keys)
        subsets._radix_sort(keys, shift)
        np.testing.assert_array_equal(keys, expect)
    if mode == "numba":  # prefix_order takes the radix path at this size
        assert V >= subsets.RADIX_MIN_V
        np.testing.assert_array_equal(subsets.prefix_order(p, q), _stable_ratio_order(p, q))


@pytest.mark.parametrize("seed", range(6))
def test_pooling_runs_gives_the_token_pooling(seed):
    """The base certificate pools runs of non-increasing slope: the same blocks, and block sums
    within rounding, as pooling token by token (empty, vertical and zero-rise tokens included)."""
    from mdtheory.models.polymatroid import _lex_blocks

    p, q = (_near_ties, lambda s: _instance(400, s), lambda s: _softmax_pair(3000, s))[seed % 3](seed)
    model = IID(q, (1, 4, 64)[seed % 3] + seed % 2)
    order = subsets.prefix_order(p, q)
    ps, _, contained = certify._iid_points(order, p, q, model.n)
    g = np.concatenate([[0.0], 1.0 - contained[::-1][1:], [1.0]])  # g along order[::-1]
    ref = _lex_blocks(np.where(ps >= 2.0 ** -600, ps, 0.0), np.diff(g))
    starts, run_p, run_g = certify._runs(ps, contained)
    bounds, dP, dG = _lex_blocks(run_p, run_g)
    np.testing.assert_array_equal(starts[bounds], ref[0])
    np.testing.assert_allclose(dP, ref[1], rtol=1e-14, atol=0)
    np.testing.assert_allclose(dG, ref[2], rtol=1e-14, atol=1e-300)


# ----------------------------------------------------------------------------- sampling steps
def _chi_square_pvalue(counts: np.ndarray, law: np.ndarray) -> float:
    """Pearson's test of counts against a law, cells of expected count below 5 pooled into one."""
    from scipy import stats

    expected = law * counts.sum()
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    assert obs[~keep].sum() == 0, "a draw landed on a cell of probability zero"
    return float(stats.chisquare(obs[keep], exp[keep] * obs.sum() / exp[keep].sum()).pvalue)


@pytest.mark.parametrize("name", ["rrs", "k-seq"])
def test_sampled_step_follows_the_exact_conditional_law(name):
    """The O(n + log V) ``select`` draws (token, accepted) from ``conditional``'s exact law
    (accepted: a(. | x); rejected: r(. | x)), by Pearson's chi-square on V = 400 tokens."""
    from mdtheory.rules import make_rule

    rng = np.random.default_rng(11)
    q = rng.dirichlet(np.ones(400))
    p = 0.5 * q + 0.5 * rng.dirichlet(np.ones(400))
    rule = make_rule(name, p, q, 3)
    draws, tested = 20_000, 0
    for x in rule.model.sample(rng, 20):
        accept, reject = rule.conditional(x)
        if not 0.3 < accept.sum() < 0.9:  # both outcomes well represented
            continue
        counts = np.zeros(2 * rule.V, dtype=np.int64)  # accepted tokens, then rejected ones
        for _ in range(draws):
            y, ok = rule.select(x, rng)
            counts[y + (0 if ok else rule.V)] += 1
        assert _chi_square_pvalue(counts, np.concatenate([accept, reject])) > 1e-4
        tested += 1
        if tested == 2:
            break
    assert tested == 2


# ----------------------------------------------------------------------------- batches
@pytest.mark.parametrize("sampling", ["iid", "conditional-poisson"])
def test_batch_matches_row_by_row(sampling):
    rng = np.random.default_rng(3)
    P, Q = rng.dirichlet(np.full(12, 0.5), size=4), rng.dirichlet(np.full(12, 0.5), size=4)
    batch = optimal_acceptance(P, Q, 3, sampling)
    assert isinstance(batch, list) and len(batch) == 4
    for i, res in enumerate(batch):
        one = optimal_acceptance(P[i], Q[i], 3, sampling)
        assert res.value == one.value and np.array_equal(res.cut, one.cut)
        assert res.status == one.status == "optimal"
    values = alpha_star(P, Q, 3, sampling)
    assert values.shape == (4,) and values.tolist() == [r.value for r in batch]
    # one row on either side is broadcast
    assert alpha_star(P, Q[1], 3, sampling).tolist() == \
        [alpha_star(P[i], Q[1], 3, sampling) for i in range(4)]
    assert alpha_star(P[2], Q, 3, sampling).tolist() == \
        [alpha_star(P[2], Q[i], 3, sampling) for i in range(4)]


def test_batch_errors_name_the_problem():
    from mdtheory import InvalidDistributionError

    P = np.full((2, 3), 1 / 3)
    with pytest.raises(InvalidDistributionError, match="p has 2 rows but q has 3"):
        alpha_star(P, np.full((3, 3), 1 / 3), 2)
    bad = P.copy()
    bad[1] = [0.5, 0.5, 0.5]
    with pytest.raises(InvalidDistributionError, match=r"^row 1: p sums to 1.5"):
        alpha_star(bad, [0.2, 0.3, 0.5], 2)
    # independent drafts take q of shape (n, V): a 2-D q is their law, not a batch
    assert isinstance(alpha_star(P[0], np.full((2, 3), 1 / 3), sampling="independent"), float)


def test_power_diff_is_exact_to_a_few_roundings_per_binary_digit():
    """_power_diff(x, d, n) = x^n - (x - d)^n to relative n 2^-52 against exact rationals, with no
    cancellation for d far below x, and the same bits interpreted and compiled."""
    from fractions import Fraction

    from mdtheory.models.polymatroid import _power_diff

    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 4, 5, 8, 13, 16, 17, 64, 100):
        for k in range(40):
            x = float(0.05 + 0.95 * rng.random() ** rng.choice([1, 4]))  # x^n normal
            d = x * float(10.0 ** -rng.uniform(0, 17)) if k % 2 else x * float(rng.random())
            exact = Fraction(x) ** n - (Fraction(x) - Fraction(d)) ** n
            got = _power_diff(x, d, n)
            assert abs(Fraction(got) - exact) <= exact * Fraction(max(n, 2)) * Fraction(2) ** -52
            assert _power_diff.py_func(x, d, n) == got
    assert _power_diff(0.5, 0.5, 3) == 0.125 and _power_diff(0.5, 0.0, 3) == 0.0


@pytest.mark.parametrize("n", [1, 2, 4, 16, 64])
def test_compiled_rises_match_the_transcendental_form(n, monkeypatch):
    """The lexicographic base by the compiled rises of G (n <= DIFF_N) and by numpy's
    transcendental form: the same hull and the same base to a few roundings."""
    from mdtheory.models import polymatroid

    p, q = _instance(2000, n)
    fast = polymatroid.lex_optimal_base_iid(p, q, n)
    monkeypatch.setattr(polymatroid, "DIFF_N", 0)
    slow = polymatroid.lex_optimal_base_iid(p, q, n)
    assert np.array_equal(fast.order, slow.order) and np.array_equal(fast.bounds, slow.bounds)
    np.testing.assert_allclose(fast.mu, slow.mu, rtol=1e-14, atol=0)


def test_schedule_workspace_reuse_and_threads(monkeypatch):
    """_realise's per-thread workspace: a schedule is the same built on a fresh workspace, on one
    kept from a larger or a smaller problem, and in several threads at once; workspaces over
    CACHE_TOKENS tokens are not kept."""
    from concurrent.futures import ThreadPoolExecutor

    from mdtheory.models.polymatroid import lex_optimal_base_iid
    from mdtheory.rules import schedule

    cases = []
    for V, seed in ((400, 1), (60, 2), (900, 3), (60, 4)):
        p, q = _instance(V, seed)
        base = lex_optimal_base_iid(p, q, 4)
        cases.append((base.mu, q, base.order))

    def arrays(s):
        return [s.owner, s.start, s.end, s.marginal, s.cumulative, s.first, s.count]

    monkeypatch.setattr(schedule, "CACHE_TOKENS", 0)  # every call on a fresh workspace
    monkeypatch.setattr(schedule._cache, "ws", None, raising=False)
    fresh = [arrays(schedule._realise(mu, q, 4, h)) for mu, q, h in cases]
    assert schedule._cache.ws is None
    monkeypatch.setattr(schedule, "CACHE_TOKENS", 1 << 16)
    for _ in range(2):  # kept between calls, grown, reused for smaller problems
        for (mu, q, h), want in zip(cases, fresh, strict=True):
            for a, b in zip(arrays(schedule._realise(mu, q, 4, h)), want, strict=True):
                assert np.array_equal(a, b)
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda c: arrays(schedule._realise(c[0], c[1], 4, c[2])), cases * 4))
    for got, want in zip(runs, fresh * 4, strict=True):
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_prepared_optimal_rules_own_their_arrays():
    """A prepared optimal rule (its window schedule) keeps nothing in the per-thread workspace: after
    rules of other sizes (the workspace reused, grown, passed over above CACHE_TOKENS), a pickled
    copy and a rule that rebuilt its schedule (tokens of q = 1e-17 at the back of [0, 1]), every
    earlier rule's arrays are bit for bit as built and share no memory with the workspace."""
    import pickle

    from mdtheory.rules import make_rule, schedule

    def arrays(r):
        s = r.schedule
        return [s.owner, s.start, s.end, s.cumulative, s.first, s.count, s.lengths, s.marginal,
                r.marginal, r.accept_ratio, r.res, r._res_cdf, r.base.mu]

    tiny = np.r_[np.full(5, (1 - 3e-17) / 5), 1e-17, 1e-17, 1e-17]
    pairs = [(*_instance(V, V), n) for V, n in ((40, 3), (900, 4), (20, 2))]
    pairs += [(np.r_[np.full(5, 0.2), 0, 0, 0], tiny, 2),
              (*_instance(schedule.CACHE_TOKENS + 1, 1), 4), (*_instance(300, 2), 8)]
    kept = []
    for p, q, n in pairs:
        rule = make_rule("optimal", p, q, n, realise="windows")
        ws = schedule._cache.ws
        scratch = (ws.front, ws.rest, ws.order, ws.keys, ws.qs, ws.mus) + ws.build
        assert not any(np.shares_memory(a, w) for a in arrays(rule) for w in scratch)
        kept.append((rule, [a.copy() for a in arrays(rule)]))
        kept.append((pickle.loads(pickle.dumps(rule)), kept[-1][1]))
        for r, want in kept:
            assert all(np.array_equal(a, b) for a, b in zip(arrays(r), want, strict=True))
