"""Bad input to the Python API: one named MdtheoryError before any work, never a raw numpy or
Python error, and work whose estimate is over the limits refused up front."""

from __future__ import annotations

import numpy as np
import pytest

import mdtheory as md
from mdtheory import _budget
from mdtheory.errors import InvalidInputError, ProblemTooLargeError
from mdtheory.language import drafters
from mdtheory.language.langmodel import as_model
from mdtheory.language.logits import to_probs
from mdtheory.rules import make_rule

from .test_lm_limits import Counted

P, Q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.3, 0.5])


def test_monte_carlo_of_a_trillion_steps_is_refused_before_any_step(monkeypatch):
    """The run's estimate (days) is refused up front, not run to a deadline: no draft is drawn."""
    rule = make_rule("rrs", P, Q, 2)
    drawn = []
    monkeypatch.setattr(rule.model, "sample", lambda rng, size: drawn.append(size) or [])
    with pytest.raises(ProblemTooLargeError, match=r"Monte Carlo over 1e\+12 samples .* days, over "
                       r"the limit of 60 s; raise it with max_seconds \(--max-seconds\)"):
        rule.monte_carlo(10**12)
    assert drawn == []
    assert make_rule("rrs", P, Q, 2).monte_carlo(10**4, 0)["counts"].sum() == 10**4  # runs


def test_monte_carlo_takes_the_limits_and_none():
    rule = make_rule("rrs", P, Q, 2)
    with pytest.raises(ProblemTooLargeError, match="over the limit of"):
        rule.monte_carlo(2000, 0, max_seconds=1e-6)
    with pytest.raises(ProblemTooLargeError, match="of memory"):
        rule.monte_carlo(2000, 0, max_bytes=8)
    assert rule.monte_carlo(2000, 0, max_seconds=None, max_bytes=None)["counts"].sum() == 2000
    with pytest.raises(InvalidInputError, match="max_seconds must be a positive number"):
        rule.monte_carlo(10, 0, max_seconds="1")


@pytest.mark.parametrize("name, kind", [("rrs", "closed form"), ("rrs-wor", "enumeration"),
                                        ("rrs-wor", "monte carlo")])
def test_the_acceptance_policy_is_the_rules(name, kind):
    """closed form where the rule has one, exact enumeration over few draft tuples, Monte Carlo
    beyond; each refused over the limits before it runs."""
    rng = np.random.default_rng(0)
    V = 3 if kind != "monte carlo" else 700
    p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
    rule = make_rule(name, p, q, 2)
    acc, exact, ci = rule.acceptance(2000, 0)
    assert exact == (kind != "monte carlo") and (ci is None) == exact
    if kind == "closed form":
        assert acc == rule.closed_form_acceptance()
    elif kind == "enumeration":
        assert rule.closed_form_acceptance() is None and acc == rule.enumerate()[0]
    else:
        assert rule.model.count_tuples() > 200_000 and ci[0] <= acc <= ci[1]
        est = _budget.monte_carlo(2000, 2, V)
        with pytest.raises(ProblemTooLargeError, match="at each of 10 positions"):
            rule.acceptance(2000, 0, max_seconds=est.seconds * 5, repeats=10)


@pytest.mark.parametrize("seed", [-1, "a", 1.5, True, None])
def test_audit_names_a_bad_seed(seed):
    def verify(p, q, drafts, rng):
        return int(drafts[0]), True
    with pytest.raises(InvalidInputError, match=r"seed must be an integer >= 0, got"):
        md.audit(verify, P, Q, 2, seed=seed, samples=100)


@pytest.mark.parametrize("logits", [[0.0, 1.0], [[0.0, 1.0], [2.0, 2.0]], (1, 2, 3)])
def test_to_probs_reads_a_list_as_an_array(logits):
    out = to_probs(logits)
    expected = np.exp(np.asarray(logits, dtype=float))
    assert np.allclose(out, expected / expected.sum(axis=-1, keepdims=True), rtol=1e-15, atol=0)


@pytest.mark.parametrize("logits", ["abc", [[1.0], [1.0, 2.0]], 3.0, ["a", "b"], None])
def test_to_probs_names_what_is_not_logits(logits):
    with pytest.raises(InvalidInputError, match="logits must be"):
        to_probs(logits)


def test_the_torch_bridge_to_probs_reads_a_list_too():
    pytest.importorskip("torch")
    from mdtheory.torch_bridge import to_probs as torch_to_probs

    assert np.allclose(torch_to_probs([0.0, 0.0]), [0.5, 0.5])
    with pytest.raises(InvalidInputError, match="logits must be"):
        torch_to_probs("abc")


def test_a_law_callable_that_returns_no_numbers_is_named():
    model = as_model(lambda context: "abc")
    with pytest.raises(InvalidInputError, match=r"the law at context \(\) is not an array of numbers "
                       r"\(got str 'abc'\)"):
        _ = model.V


@pytest.mark.parametrize("rng", [None, 3])
def test_lm_pairs_takes_any_seed_numpy_takes(rng):
    P_, Q_ = drafters.lm_pairs(4, Counted(), Counted(), rng)
    assert P_.shape == Q_.shape == (4, 5)


def test_lm_pairs_names_a_bad_rng():
    with pytest.raises(InvalidInputError, match="rng must be None, an integer seed"):
        drafters.lm_pairs(4, Counted(), Counted(), "a")
