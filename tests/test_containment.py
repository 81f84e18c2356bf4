"""One-pass prefix containment (mdtheory.models.containment) against exact rationals and the per-set
routes."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import numpy as np
import pytest

import mdtheory as md
from mdtheory.claims.exact import elementary_symmetric
from mdtheory.models.containment import (
    REL_TOL,
    _nodes_per_octave,
    conditional_poisson_prefix_containment,
    successive_outside_containment,
    successive_prefix_containment,
)

from .reference_containment import successive_containment_gl
from .tolerances import QUADRATURE_EXACT as EXACT_TOL
from .tolerances import QUADRATURE_PER_SET as PER_SET_TOL


@cache
def exact_successive_set_law(q: tuple, n: int) -> dict[int, Fraction]:
    """P(set of the n drafts = S), S a bitmask, for successive sampling from the weights q / sum(q),
    exactly (the float weights converted exactly), by dynamic programming over subsets:
    f(S) = sum_{i in S} f(S - i) q_i / (total - q(S - i))."""
    w = [Fraction(float(x)) for x in q]
    total, V = sum(w), len(w)
    f = {0: Fraction(1)}
    mass = {0: Fraction(0)}
    for _ in range(n):
        nxt: dict[int, Fraction] = {}
        for S, prob in f.items():
            for i in range(V):
                if w[i] and not S >> i & 1:
                    nxt[S | 1 << i] = nxt.get(S | 1 << i, 0) + prob * w[i] / (total - mass[S])
                    mass[S | 1 << i] = mass[S] + w[i]
        f = nxt
    return f


def exact_successive_prefix(q, order, n) -> list[Fraction]:
    """Q of every prefix of ``order``, exactly: the set law summed by the rank of each set's last
    token in the order."""
    V = len(q)
    rank = [0] * V
    for k, tok in enumerate(order):
        rank[int(tok)] = k
    by_last = [Fraction(0)] * V
    for S, prob in exact_successive_set_law(tuple(float(x) for x in q), n).items():
        by_last[max(rank[i] for i in range(V) if S >> i & 1)] += prob
    out, acc = [], Fraction(0)
    for v in by_last:
        acc += v
        out.append(acc)
    return out


def exact_cp_prefix(q, order, n) -> list[Fraction]:
    w = [Fraction(float(x)) for x in q]
    total = elementary_symmetric(w, n)
    return [elementary_symmetric([w[i] for i in order[: k + 1]], n) / total
            for k in range(len(order))]


def _with_rest(head, V_rest, rng):
    """head masses plus V_rest random masses filling the rest of the unit mass."""
    head = np.asarray(head, dtype=float)
    rest = rng.dirichlet(np.ones(V_rest)) * (1.0 - head.sum())
    return np.concatenate([head, rest])


def adversarial_cases():
    """(name, q, n): tiny masses, masses near one, subnormals, ties, zeros, n up to |support|."""
    rng = np.random.default_rng(7)
    yield "dirichlet-3", rng.dirichlet(np.ones(6)), 3
    yield "dirichlet-sparse-4", rng.dirichlet(0.3 * np.ones(7)), 4
    yield "near-one", np.array([1 - 3e-12, 1e-12, 1e-12, 5e-13, 5e-13]), 3
    yield "tiny", np.array([0.4, 0.3, 0.3 - 3e-15, 1e-15, 1e-15, 1e-15]), 4
    yield "subnormal", np.array([0.5, 0.25, 0.25, 5e-324, 1e-310, 2e-300]), 4
    yield "ties", np.full(6, 1 / 6), 3
    yield "ties-tiny", np.array([0.5, 0.5 - 4e-9, 1e-9, 1e-9, 1e-9, 1e-9]), 5
    yield "zeros", np.array([0.0, 0.3, 0.0, 0.3, 0.2, 0.2, 0.0]), 3
    yield "n-equals-support", rng.dirichlet(np.ones(6)), 6
    yield "n-support-minus-one", _with_rest([0.9], 6, rng), 6
    yield "n8-support8", rng.dirichlet(np.ones(8)), 8
    yield "spread", np.array([0.6, 0.2, 0.1, 0.05, 0.03, 0.015, 0.005 - 1e-20, 1e-20]), 8
    yield "n9-of-10", rng.dirichlet(0.7 * np.ones(10)), 9
    yield "n10-of-10-tiny", np.array([0.3, 0.2, 0.2, 0.1, 0.1, 0.05, 0.03, 0.02 - 2e-12, 1e-12,
                                      1e-12]), 10


CASES = list(adversarial_cases())


@pytest.mark.parametrize("name,q,n", CASES, ids=[c[0] for c in CASES])
def test_successive_matches_exact_rationals(name, q, n):
    rng = np.random.default_rng(len(name))
    for order in (np.arange(q.size), rng.permutation(q.size), np.argsort(q)):
        got = successive_prefix_containment(q, order, n)
        want = [float(v) for v in exact_successive_prefix(q, order, n)]
        err = np.abs(got - np.array(want))
        assert err.max() <= EXACT_TOL, f"{name}, order {order.tolist()}: error {err.max():.3g}"


@pytest.mark.parametrize("name,q,n", CASES, ids=[c[0] for c in CASES])
def test_conditional_poisson_matches_exact_rationals(name, q, n):
    rng = np.random.default_rng(len(name))
    for order in (np.arange(q.size), rng.permutation(q.size)):
        got = conditional_poisson_prefix_containment(q, order, n)
        want = np.array([float(v) for v in exact_cp_prefix(q, order, n)])
        rel = np.abs(got - want) / np.maximum(want, np.finfo(float).tiny)
        assert np.all((rel <= EXACT_TOL) | (got == want)), \
            f"{name}, order {order.tolist()}: relative error {rel.max():.3g}"


def test_conditional_poisson_huge_dynamic_range():
    """e_n of the prefixes spans 1e-1500..1: plain doubles underflow, the scaled pass does not."""
    q = np.array([0.5, 0.5 - 5e-301] + [1e-301] * 5)
    n = 6
    order = np.arange(q.size)
    got = conditional_poisson_prefix_containment(q, order, n)
    want = exact_cp_prefix(q, order, n)
    # ratios e_6(prefix)/e_6(all): 0 for short prefixes, then ratios of numbers near 1e-1505
    for k, w in enumerate(want):
        assert got[k] == pytest.approx(float(w), rel=EXACT_TOL, abs=0.0), k


@pytest.mark.parametrize("V,n", [(40, 3), (40, 8), (40, 12), (120, 5)])
def test_models_match_per_set_containment(V, n):
    """The drafts' prefix_containment overrides against one per-set containment per prefix."""
    rng = np.random.default_rng(V + n)
    q = rng.dirichlet(0.4 * np.ones(V))
    q[rng.choice(V, 3, replace=False)] *= 1e-9  # a few tiny masses: c down to ~1e-10
    q /= q.sum()
    order = rng.permutation(V)
    ks = np.arange(n - 1, V, max(1, V // 25))  # every prefix would cost V per-set quadratures
    masks = np.arange(V)[None, :] <= ks[:, None]
    masks = masks[:, np.argsort(order)]  # row r: the first ks[r] + 1 tokens of order
    for model in (md.WithoutReplacement(q, n), md.ConditionalPoisson(q, n)):
        fast = model.prefix_containment(order)[ks]
        slow = model.containment(masks)
        if model.sampling == "without-replacement":  # the package's per-set route is the same rule
            slow = np.array([successive_containment_gl(q, m, n) for m in masks])
        err = np.abs(fast - slow)
        tol = PER_SET_TOL if model.sampling == "without-replacement" else 1e-13 * slow + 1e-300
        assert np.all(err <= tol), f"{model.sampling}: error {err.max():.3g}"


def test_partial_order_counts_left_out_tokens_outside():
    q = np.array([0.4, 0.3, 0.2, 0.1])
    for fn in (successive_prefix_containment, conditional_poisson_prefix_containment):
        full = fn(q, [2, 0, 1, 3], 3)
        assert np.array_equal(fn(q, [2, 0, 1], 3), full[:3]), fn.__name__


def test_one_draft_is_the_prefix_mass():
    q = np.array([0.1, 0.2, 0.3, 0.4])
    assert np.allclose(successive_prefix_containment(q, [3, 1, 0, 2], 1), [0.4, 0.6, 0.7, 1.0],
                       rtol=0, atol=1e-15)


def test_trapezoid_step_meets_the_stated_bound():
    """The chosen nodes per octave make min_a 2 sec^(n+1)(a) / (e^(2 pi a/delta) - 1) <= REL_TOL,
    and one node fewer does not (so the bound, not a guess, sets the grid)."""
    a = np.linspace(1e-3, math.pi / 2 - 1e-3, 20001)
    for n in (2, 3, 8, 20, 60):
        m = _nodes_per_octave(n)

        def bound(mm, n=n):
            delta = math.log(2) / mm
            return float(np.min(2 / np.cos(a) ** (n + 1) / np.expm1(2 * np.pi * a / delta)))

        assert bound(m) <= REL_TOL, n
        assert bound(m - 1) > REL_TOL * 0.5, n


def test_prefix_scan_alpha_matches_exhaustive_subsets():
    """alpha* through the new prefix pass equals the exhaustive subset route (wor)."""
    rng = np.random.default_rng(3)
    for V, n in ((8, 3), (9, 5)):
        p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(0.5 * np.ones(V))
        fast = md.optimal_acceptance(p, q, n, "without-replacement", method="prefix").value
        slow = md.optimal_acceptance(p, q, n, "without-replacement", method="subsets").value
        assert abs(fast - slow) <= 1e-12, (V, n, fast, slow)


def test_conditional_poisson_optimal_cut_is_a_prefix():
    """For conditional Poisson the minimum of p(T) - Q(T) over all 2^V sets is attained by a prefix
    of the tokens sorted by q/p decreasing. Proof: Q(T + i) - Q(T) = q_i e_{n-1}(q|T) / e_n(q), so at
    an inclusion-maximal minimiser T, p_i > q_i h for i outside and p_j <= q_j e_{n-1}(q|T-j)/e_n(q)
    <= q_j h inside, h = e_{n-1}(q|T)/e_n(q): every token inside has p/q <= h < p/q of every token
    outside. Checked here exhaustively, with ties in q and zeros in p."""
    rng = np.random.default_rng(11)
    instances = [(rng.dirichlet(np.ones(V)), rng.dirichlet(0.5 * np.ones(V)), n)
                 for V, n in ((6, 2), (7, 3), (8, 4), (8, 6), (9, 3))]
    instances.append((np.array([0.25, 0.25, 0.0, 0.25, 0.25, 0.0]),
                      np.array([0.2, 0.2, 0.2, 0.2, 0.1, 0.1]), 3))
    for p, q, n in instances:
        V = q.size
        model = md.ConditionalPoisson(q, n)
        codes = np.arange(2 ** V)
        masks = ((codes[:, None] >> np.arange(V)) & 1).astype(bool)
        best = float(np.min(masks @ p - model.containment(masks)))
        order = np.argsort(p / q)
        prefix = min(0.0, float(np.min(np.cumsum(p[order]) - model.prefix_containment(order))))
        assert abs(prefix - best) <= 1e-14, (p, q, n, prefix, best)


def test_two_draft_closed_form_beside_a_mass_near_one():
    """q = (1, eps, eps): the first draft is token 0, the second token 1 or 2 with probability 1/2
    each, so Q({0, 1}) = 1/2. (The per-set n = 2 closed form once formed q(T) - q_i by subtracting
    q_i ~ 1 from a running sum and returned eps; hypothesis found it through the prefix route.)"""
    eps = 1.0132149e-155
    model = md.WithoutReplacement([1.0, eps, eps], 2)
    assert float(model.containment([True, True, False])) == pytest.approx(0.5, rel=1e-15)
    assert successive_prefix_containment(model.q, [0, 1, 2], 2)[1] == pytest.approx(0.5, rel=1e-15)


def test_conditional_poisson_few_and_many_sets_against_exact_rationals():
    """ConditionalPoisson.containment: the compiled per-set pass (a few sets, the certificate's
    call) and the recurrence vectorised over sets (many) both equal e_n(q|T) / e_n(q) exactly."""
    from mdtheory.models.base import FEW_SETS

    rng = np.random.default_rng(7)
    V, n = 9, 3
    q = rng.dirichlet(0.5 * np.ones(V))
    model = md.ConditionalPoisson(q, n)
    masks = rng.random((FEW_SETS + 4, V)) < 0.6
    masks[0] = False  # the empty set
    qf = [Fraction(x) for x in q]
    total = elementary_symmetric(qf, n)
    want = np.array([float(elementary_symmetric([v for v, t in zip(qf, m, strict=True) if t], n) / total)
                     for m in masks])
    for got in (np.array([model.containment(m) for m in masks]), model.containment(masks)):
        assert np.allclose(got, want, rtol=1e-14, atol=0.0)


def test_esp_table_against_exact_rationals():
    from mdtheory.models.containment import esp_table

    w = np.random.default_rng(8).dirichlet(np.ones(12))
    table = esp_table(w, 4)
    wf = [Fraction(x) for x in w]
    for i in (0, 1, 5, 12):
        for j in range(5):
            want = elementary_symmetric(wf[:i], j)
            assert table[i, j] == pytest.approx(float(want), rel=1e-14, abs=0.0), (i, j)


def test_node_values_against_mpmath():
    """The vectorised e^{-v} and 1 - e^{-v} of every class (both degree tables, with and without the
    Cody-Waite reduction) within 4 eps relative of 50-digit values, v from 2^-70 to 2^9."""
    import mpmath

    from mdtheory.models.containment import _LIM_G, _LIM_H, SAT_E, _exp_nodes

    mpmath.mp.dps = 50
    m, octaves = 4, 90
    tb = np.ldexp(np.exp2(np.arange(m) / m)[None, :], np.arange(octaves)[:, None]).ravel()
    G, H = np.empty(tb.size), np.empty(tb.size)
    eps = np.finfo(float).eps
    for lim, check_h in ((_LIM_H, True), (_LIM_G, False)):
        for mant in (0.5, 0.61, 0.75, 0.999999):
            e0 = -70
            scale = math.ldexp(mant, e0)
            j1 = (SAT_E - e0) * m  # below saturation
            _exp_nodes(scale, tb, 0, j1, e0, m, lim, G, H)
            for j in range(0, j1, 3):
                v = mpmath.mpf(scale * tb[j])  # the rounded argument, exactly
                g, h = mpmath.exp(-v), -mpmath.expm1(-v)
                assert abs(G[j] - g) <= 4 * eps * g, (mant, j, float(v))
                if check_h:
                    assert abs(H[j] - h) <= 4 * eps * h, (mant, j, float(v))


def test_fused_update_is_the_row_update():
    """The per-n compiled fused pass gives the row-by-row pass's bits, n = 2..9."""
    from mdtheory.models.containment import _update_rows, _update_token

    rng = np.random.default_rng(5)
    for n in range(2, 10):
        a = rng.random((n + 1, 40))
        G = rng.random(40)
        H = 1.0 - G
        b = a.copy()
        _update_token(a, G, H, 3, 37, n)
        _update_rows(b, G, H, 3, 37, n)
        assert np.array_equal(a, b), n


def test_bit_casts_are_ldexp_and_frexp():
    """_pow2(k) is 2^k over the normal range, and _as_bits gives the exponent frexp gives."""
    from numba import njit

    from mdtheory.models.containment import _as_bits, _pow2

    @njit
    def table(ks, xs):
        return [_pow2(k) for k in ks], [((_as_bits(x) >> 52) & 0x7FF) - 1022 for x in xs]

    ks = np.arange(-1022, 1024)
    xs = np.random.default_rng(2).uniform(0.5, 4.0, 200) * np.exp2(np.arange(-100, 100))
    powers, exponents = table(ks, xs)
    assert powers == [math.ldexp(1.0, int(k)) for k in ks]
    assert exponents == [math.frexp(x)[1] for x in xs]


def test_successive_masses_not_summing_to_one():
    """The drafts are drawn from q / sum(q): n = 1 returned cumsum(q) unnormalised (off by 3e-8 for
    float32-rounded q), and masses near the float limit overflowed the grid's start."""
    q = np.array([0.2, 0.3, 0.1, 0.2], dtype=np.float32).astype(float)
    got = successive_prefix_containment(q, np.arange(4), 1)
    assert np.abs(got - np.cumsum(q) / q.sum()).max() <= 1e-16 and got[-1] == 1.0
    big = np.array([2.0, 3.0, 1.0, 2.0])
    for n in (1, 2, 3):  # Q is scale free: masses 5e307 apart give the same prefixes
        ref = successive_prefix_containment(big / 8, np.arange(4), n)
        assert np.abs(successive_prefix_containment(big * 5e307, np.arange(4), n) - ref).max() <= 1e-15


@pytest.mark.parametrize("name,q,n", CASES, ids=[c[0] for c in CASES])
def test_outside_containment_matches_exact_rationals(name, q, n):
    """Q(T) with one token left outside T, each token of q in turn (several masses at once: the
    token's own, and 0, where all n drafts lie in T)."""
    V = q.size
    for y in range(V):
        T = [i for i in range(V) if i != y]
        if np.count_nonzero(q[T]) < n:
            continue
        got = successive_outside_containment(q[T], n, [q[y], 0.0])
        want = float(exact_successive_prefix(q, np.array(T + [y]), n)[V - 2])
        assert abs(got[0] - want) <= EXACT_TOL and got[1] == 1.0, f"{name}, token {y} outside"


def test_outside_containment_matches_the_per_set_quadrature():
    """Outside masses that are no token's, up to twice T's own (the grid starts low enough for
    the largest total), against the Gauss-Legendre reference over T and one token of that mass;
    masses near the float limit scaled together; fewer than n tokens of positive mass: 0."""
    rng = np.random.default_rng(3)
    for V, n in [(12, 3), (30, 8), (7, 2)]:
        qT = rng.dirichlet(np.full(V, 0.6))
        outside = np.concatenate([[2.0, 1.0], 10.0 ** rng.uniform(-12, 0, 6)])
        got = successive_outside_containment(qT, n, outside)
        for c, value in zip(outside, got, strict=True):
            mask = np.append(np.ones(V, dtype=bool), False)
            assert value == pytest.approx(successive_containment_gl(np.append(qT, c), mask, n),
                                          abs=PER_SET_TOL)
        assert np.abs(successive_outside_containment(qT * 1e307, n, outside * 1e307) - got).max() \
            <= 1e-15
    assert successive_outside_containment(np.array([0.5, 0.0, 0.5]), 3, [0.1, 0.0]).tolist() == [0.0, 0.0]
