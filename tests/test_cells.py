"""The optimal rule's cells and swaps (mdtheory.rules.cells): the candidate's exact law integrates to
the marginal over every draft tuple, the sampler follows that law, the acceptance is alpha*, and light
tokens, zeros, ties and large V and n keep all three."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import mdtheory as md
from mdtheory.errors import InvalidInputError
from mdtheory.rules import cells as cells_module
from mdtheory.rules import make_rule
from mdtheory.rules.cells import FRONT_Q, MAX_CELL_DRAFTS, CellSchedule
from mdtheory.rules.optimal import TimeCells, TimeSchedule

from .tolerances import ROUNDING


def instances(rng, count: int = 6):
    """Small (p, q, n) with zeros in p and q, light draft masses (front cells) and ties."""
    out = []
    for V, n in [(2, 1), (3, 2), (4, 3), (5, 2), (6, 4), (7, 3)][:count]:
        p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.full(V, 0.5))
        out.append((p, q, n))
        q0 = q.copy()
        q0[0] = 0.0
        out.append((p, q0 / q0.sum(), n))
        p0 = p.copy()
        p0[-1] = 0.0
        out.append((p0 / p0.sum(), q, n))
        light = q.copy()
        light[0], light[-1] = 1e-300, 3e-17  # below FRONT_Q: cells at the front
        out.append((p, light / light.sum(), n))
        out.append((q, q, n))  # p = q: every ratio tied
    return out


def exact_law_over_tuples(schedule: CellSchedule, q: np.ndarray, n: int) -> np.ndarray:
    law = np.zeros(q.size)
    for x in itertools.product(range(q.size), repeat=n):
        w = np.prod(q[list(x)])
        if w > 0:
            law += w * schedule.candidate_law(np.array(x))
    return law


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow),
                                  pytest.param(2, marks=pytest.mark.slow)])
def test_exact_law_integrates_to_the_marginal_and_attains_alpha(seed):
    for p, q, n in instances(np.random.default_rng(seed)):
        s = CellSchedule(p, q, n)
        assert s.marginal.min() >= 0 and s.marginal.sum() == pytest.approx(1.0, abs=ROUNDING)
        assert np.abs(exact_law_over_tuples(s, q, n) - s.marginal).max() <= 1e-14
        assert np.minimum(p, s.marginal).sum() == pytest.approx(md.alpha_star(p, q, n), abs=1e-14)


def test_rule_output_law_is_p_by_enumeration():
    for p, q, n in instances(np.random.default_rng(7), 5):
        rule = make_rule("optimal", p, q, n)
        assert isinstance(rule.strategy, TimeCells)
        acceptance, law = rule.enumerate()
        assert np.abs(law - rule.p).max() <= ROUNDING
        assert acceptance == pytest.approx(md.alpha_star(p, q, n), abs=1e-14)


def test_sampler_follows_the_exact_law():
    """Each tuple's candidates, 40,000 draws, against its exact law: every frequency within 5
    standard errors, and no draw where the law is zero (a front token drafted wins surely)."""
    rng = np.random.default_rng(3)
    p, q = rng.dirichlet(np.full(7, 5.0)), rng.dirichlet(np.full(7, 5.0))
    q[6] = 1e-20
    q /= q.sum()
    s = CellSchedule(p, q, 4)
    assert s.up_cell.size > 0  # swaps are exercised
    for x in ([0, 1, 2, 3], [1, 1, 4, 5], [2, 2, 2, 3], [0, 5, 5, 1], [3, 4, 3, 6], [6, 6, 0, 1]):
        x = np.array(x)
        law = s.candidate_law(x)
        draws = 40_000
        counts = np.bincount([s.candidate(x, rng) for _ in range(draws)], minlength=7)
        se = np.sqrt(np.maximum(law * (1 - law), 1e-300) / draws)
        assert np.all(np.abs(counts / draws - law) <= 5 * se + 1e-12), (x, counts / draws, law)
        assert counts[law == 0].sum() == 0


@pytest.mark.parametrize("n", [1, 4, 8, 16, pytest.param(64, marks=pytest.mark.slow),
                               pytest.param(MAX_CELL_DRAFTS, marks=pytest.mark.slow)])
def test_language_model_pairs_at_large_v(n):
    rng = np.random.default_rng(n)
    V = 32_000
    logits = -1.1 * np.log(np.arange(1, V + 1)) + 0.5 * rng.standard_normal(V)
    p = np.exp(logits - logits.max())
    q = np.exp((logits + 0.8 * rng.standard_normal(V)) / 1.3)
    p, q = p / p.sum(), q / q.sum()
    rule = make_rule("optimal", p, q, n)
    assert isinstance(rule.strategy, TimeCells)
    assert rule.closed_form_acceptance() == pytest.approx(md.alpha_star(p, q, n, method="prefix"),
                                                          abs=ROUNDING)
    cells = rule.schedule
    assert cells.up_cell.size < V and np.all(cells.ell >= 0)
    assert np.all(cells.keep >= 0) and np.all(cells.keep <= cells.length)
    drafts = rule.model.sample(rng, 3)
    for x in drafts:  # Gauss-Legendre nodes of degree n - 1: a few roundings per node
        assert cells.candidate_law(x).sum() == pytest.approx(1.0, abs=ROUNDING * max(1, n // 16))


def test_light_tokens_take_the_front():
    """Masses below FRONT_Q get cells at the front of [0, 1] in the time coordinates: each owns
    time, wins when drafted, and the rule stays lossless with acceptance alpha*."""
    rng = np.random.default_rng(11)
    V = 3000
    p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
    light = rng.choice(V, 300, replace=False)
    q[light] = 10.0 ** -rng.uniform(17, 320, light.size)
    q /= q.sum()
    assert np.all(q[light] < FRONT_Q)
    rule = make_rule("optimal", p, q, 4)
    s = rule.schedule
    assert np.all(s.where[light] < 0) and s.front_length.size == light.size
    assert np.all(np.diff(s.front_start) >= 0)
    assert rule.closed_form_acceptance() == pytest.approx(md.alpha_star(p, q, 4, method="prefix"),
                                                          abs=ROUNDING)
    heavy = np.setdiff1d(np.arange(V), light)[:3]
    for y in light[:5]:
        x = np.array([heavy[0], y, heavy[1], heavy[2]])
        assert s.candidate_law(x)[y] == 1.0 and s.candidate(x, rng) == y
    two = np.array([light[0], heavy[0], light[1], light[0]])  # the lighter token's cell comes first
    first = light[0] if q[light[0]] < q[light[1]] else light[1]
    assert s.candidate_law(two)[first] == 1.0 and s.candidate(two, rng) == first


def test_strategy_choice_and_refusals():
    rng = np.random.default_rng(2)
    p, q = rng.dirichlet(np.ones(50)), rng.dirichlet(np.ones(50))
    assert isinstance(make_rule("optimal", p, q, MAX_CELL_DRAFTS).strategy, TimeCells)
    assert isinstance(make_rule("optimal", p, q, MAX_CELL_DRAFTS + 1).strategy, TimeSchedule)
    windows = make_rule("optimal", p, q, 4, realise="windows")
    assert isinstance(windows.strategy, TimeSchedule) and windows.base is not None
    assert windows.closed_form_acceptance() == pytest.approx(
        make_rule("optimal", p, q, 4).closed_form_acceptance(), abs=ROUNDING)
    with pytest.raises(InvalidInputError, match="realise must be one of"):
        make_rule("optimal", p, q, 4, realise="heap")
    s = CellSchedule(p, q, 4)
    with pytest.raises(InvalidInputError, match="q = 0"):
        CellSchedule(p, np.r_[q[:-1] + q[-1] / 49, 0.0], 4).candidate_law(np.array([49, 0, 1, 2]))
    with pytest.raises(InvalidInputError, match="tokens in 0..49"):
        s.candidate(np.array([0, 1, 2, 50]), rng)
    with pytest.raises(md.ProblemTooLargeError, match="at most 256 drafts"):
        CellSchedule(p, q, MAX_CELL_DRAFTS + 1)


def test_schedules_own_their_arrays():
    """The working arrays are this thread's, reused from schedule to schedule: a schedule keeps
    none of them, and an earlier one is bit for bit as built after later ones of other sizes."""
    rng = np.random.default_rng(5)
    kept = []
    for V in (40, 900, 20, 2000):
        p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
        s = CellSchedule(p, q, 3)
        work, positions = cells_module._cache.ws
        mine = [s.where, s.first, s.stop, s.rest, s.keep, s.marginal, s.up_cell, s.down_cell, s.cum]
        assert not any(np.shares_memory(a, w) for a in mine for w in (work, positions))
        kept.append((s, [a.copy() for a in mine]))
    for s, want in kept:
        got = [s.where, s.first, s.stop, s.rest, s.keep, s.marginal, s.up_cell, s.down_cell, s.cum]
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
