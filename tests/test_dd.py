"""Double description of the acceptance-one cone, exact; checked against Hall and the exact LP."""

import random
from fractions import Fraction

import pytest

from mdtheory.claims.dd import acceptance_one_cone, canonical, compare_with_hall, draft_supports, sparsest
from mdtheory.claims.exact import exact_otlp
from mdtheory.errors import InvalidInputError, ProblemTooLargeError

#: (alphabet, drafts) checked for both models; SLOW: (alphabet, drafts, model) beyond those, which
#: with FAST cover the Theorem 2 grid of ``mdtheory verify all`` (tests/test_verify.py checks that).
FAST = [(m, K) for m in (2, 3, 4) for K in (2, 3)] + [(2, 4)]
SLOW = [(5, 2, "iid"), (5, 3, "iid"), (3, 4, "iid"), (5, 2, "tuples"), (3, 4, "tuples")]


@pytest.mark.parametrize("m,K,model", [
    pytest.param(m, K, model, marks=[pytest.mark.slow] if (m, K, model) == (4, 3, "tuples") else [])
    for model in ("iid", "tuples") for m, K in FAST])  # 4 tokens, 3 ordered drafts: about 10 s
def test_facets_are_hall_family(m, K, model):
    cone = acceptance_one_cone(m, K, model)
    cmp = compare_with_hall(cone)
    assert cmp["equal"], (cmp["missing"], cmp["extra"])
    assert all(label is not None for _, label in cmp["facets"])


@pytest.mark.parametrize("model", ["iid", "tuples"])
@pytest.mark.parametrize("m,K", [(2, 2), (3, 2), (3, 3), (4, 2), (2, 4)])
def test_two_projection_routes_agree(m, K, model):
    gen = acceptance_one_cone(m, K, model, "generators")
    eli = acceptance_one_cone(m, K, model, "elimination")
    assert gen.facets == eli.facets


@pytest.mark.slow
@pytest.mark.parametrize("m,K,model", SLOW)
def test_facets_are_hall_family_larger(m, K, model):
    assert compare_with_hall(acceptance_one_cone(m, K, model))["equal"]


def test_iid_2_2_facets_explicit():
    cone = acceptance_one_cone(2, 2)
    texts = sorted(t for t, _ in compare_with_hall(cone)["facets"])
    assert texts == ["d00 >= 0", "d11 >= 0", "p0 >= d00", "p1 >= d11"]


def _in_cone(cone, z):
    return all(sum(Fraction(a) * x for a, x in zip(f, z, strict=True)) >= 0 for f in cone.facets)


def _set_law(cone, d):
    law = {}
    for x, mass in zip(cone.supports, d, strict=True):
        if mass:
            law[frozenset(x)] = law.get(frozenset(x), 0) + mass
    return law


@pytest.mark.parametrize("model", ["iid", "tuples"])
@pytest.mark.parametrize("m,K", [(2, 2), (3, 2), (3, 3), (4, 2)])
def test_facets_agree_with_exact_lp_inside_and_just_outside(m, K, model):
    """A point satisfies every facet iff the exact OTLP reaches acceptance exactly one."""
    cone = acceptance_one_cone(m, K, model)
    rng = random.Random(m * 10 + K)
    inside = outside = 0
    for _ in range(40):
        d = [Fraction(rng.randint(0, 6)) for _ in cone.supports]
        if not any(d):
            d[0] = Fraction(1)
        # route every draft mass to one of its tokens: a point of the cone
        p = [Fraction(0)] * m
        for x, mass in zip(cone.supports, d, strict=True):
            p[rng.choice(sorted(set(x)))] += mass
        total = sum(d)
        d = [x / total for x in d]
        p = [x / total for x in p]
        # push mass into token b until p_b is delta above (outside) or below (inside) the mass of
        # the draft supports that contain b, taking it from another token a
        b = rng.randrange(m)
        a = rng.choice([y for y in range(m) if y != b])
        cap = sum(x for s, x in zip(cone.supports, d, strict=True) if b in s)
        delta = Fraction(rng.choice([1, -1]), 1000)
        eps = cap - p[b] + delta
        if 0 < eps <= p[a]:
            p[a] -= eps
            p[b] += eps
        z = p + d
        in_cone = _in_cone(cone, z)
        one = exact_otlp(p, _set_law(cone, d)) == 1
        assert in_cone == one, (p, d)
        inside += in_cone
        outside += not in_cone
    assert inside and outside  # both sides were exercised


@pytest.mark.parametrize("m,K,model", [(3, 2, "iid"), (2, 3, "tuples"), (4, 2, "iid")])
def test_sparsest_form_is_equivalent(m, K, model):
    """The sparsest form of a facet is the same inequality on the cone's linear span: a positive
    multiple of the facet plus a multiple of the linearity row (so it has the same canonical form and
    the same value, up to one positive factor, at every point with sum p = sum d), and it has at most
    as many non-zero coefficients."""
    cone = acceptance_one_cone(m, K, model)
    (ell,) = cone.linearities
    rng = random.Random(m * 10 + K)
    sparser = 0
    for f in cone.facets:
        s = sparsest(f, cone.linearities)
        assert canonical(s, cone.linearities) == f
        assert sum(x != 0 for x in s) <= sum(x != 0 for x in f)
        sparser += sum(x != 0 for x in s) < sum(x != 0 for x in f)
        # s = c f + t ell with c > 0: solve for (c, t) on two coordinates, check all of them
        c, t = _combination(s, f, ell)
        assert c > 0 and all(a == c * b + t * e for a, b, e in zip(s, f, ell, strict=True))
        for _ in range(5):  # points of the linear span: the two forms differ by the factor c
            z = [Fraction(rng.randint(-9, 9)) for _ in f]
            z[-1] -= sum(a * x for a, x in zip(ell, z, strict=True)) / ell[-1]  # onto ell . z = 0
            value = sum(a * x for a, x in zip(f, z, strict=True))
            assert sum(a * x for a, x in zip(s, z, strict=True)) == c * value
    assert sparser  # the canonical (projected) forms are dense; sparsest really removes terms


def _combination(s, f, ell):
    """(c, t) with s = c f + t ell, read off the first pair of coordinates where (f, ell) is
    invertible (f is not a multiple of ell: it is orthogonal to it and non-zero)."""
    for i in range(len(f)):
        for j in range(i + 1, len(f)):
            det = Fraction(f[i]) * ell[j] - Fraction(f[j]) * ell[i]
            if det:
                c = (Fraction(s[i]) * ell[j] - Fraction(s[j]) * ell[i]) / det
                t = (Fraction(f[i]) * s[j] - Fraction(f[j]) * s[i]) / det
                return c, t
    raise AssertionError("a facet parallel to the linearity row")


def test_bad_arguments():
    with pytest.raises(InvalidInputError, match="unknown DD sampling 'joint'"):
        draft_supports(3, 2, "joint")
    with pytest.raises(InvalidInputError, match="number of tokens V must be an integer >= 1, got 0"):
        acceptance_one_cone(0, 2)
    with pytest.raises(InvalidInputError, match="unknown DD method 'fourier'"):
        acceptance_one_cone(2, 2, method="fourier")
    with pytest.raises(ProblemTooLargeError, match="dimension 130, over the limit 90"):
        acceptance_one_cone(5, 3, "tuples")


def stubborn(m, supports):
    """As pycddlib in a long projection: deaf to SIGINT, never returns."""
    import signal
    import time

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    while True:
        time.sleep(1)


def dies(m, supports):
    import os

    os._exit(9)


def test_an_interrupt_is_answered_while_pycddlib_runs():
    """The parent, not pycddlib, holds the interpreter: SIGINT raises KeyboardInterrupt in it
    while the projection runs, and the child is stopped and reaped."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import multiprocessing, os, signal, threading, time\n"
        "from mdtheory.claims import dd\n"
        "from tests.test_dd import stubborn\n"
        "def interrupt():\n"
        "    while not multiprocessing.active_children():\n"
        "        time.sleep(0.01)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "threading.Thread(target=interrupt, daemon=True).start()\n"
        "try:\n"
        "    dd._in_child(stubborn, 2, [], 'a projection', None)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', multiprocessing.active_children())\n")
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=str(root)), cwd=root)
    assert out.stdout == "interrupted []\n", out.stderr


def test_a_projection_is_stopped_at_its_limit(monkeypatch):
    """A fake clock, a second per look at the child: stopped at max_seconds = 5."""
    import types

    from mdtheory.claims import dd

    clock = types.SimpleNamespace(now=0.0)

    def monotonic():
        clock.now += 1.0
        return clock.now
    monkeypatch.setattr(dd, "time", types.SimpleNamespace(monotonic=monotonic,
                                                          perf_counter=monotonic))
    with pytest.raises(ProblemTooLargeError, match="did not finish within the limit of 5 s"):
        dd._in_child(stubborn, 2, [], "a projection", 5.0)
    assert clock.now <= 8.0


def test_a_projection_whose_process_dies_is_a_solver_error():
    from mdtheory.claims import dd
    from mdtheory.errors import SolverError

    with pytest.raises(SolverError, match="ended without an answer \\(exit code 9"):
        dd._in_child(dies, 2, [], "a projection", None)
    with pytest.raises(ProblemTooLargeError, match="did not finish"):
        acceptance_one_cone(5, 4, method="elimination", max_seconds=0.2)
