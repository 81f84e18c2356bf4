"""The library's language-model functions refuse work over their limits before doing it."""

import re

import numpy as np
import pytest

from mdtheory.errors import InvalidInputError, ProblemTooLargeError
from mdtheory.language import drafters
from mdtheory.language.langmodel import PILOT_BATCH, LanguageModel


class Counted(LanguageModel):
    """A uniform law over V tokens that counts its batched calls and their texts; ``wait`` seconds
    a call (a model slower than the limit allows)."""

    def __init__(self, V: int = 5, wait: float = 0.0):
        self.V, self.bos, self.wait = V, 0, wait
        self.calls, self.texts = 0, 0

    def _laws(self, contexts):
        import time

        self.calls += 1
        self.texts += len(contexts)
        time.sleep(self.wait)
        return np.full((len(contexts), self.V), 1.0 / self.V)


def test_lm_pairs_refuses_memory_before_any_call():
    target, drafter = Counted(), Counted()
    with pytest.raises(ProblemTooLargeError, match="lm-pairs: 1000000000 positions.*memory"):
        drafters.lm_pairs(10**9, target, drafter, np.random.default_rng(0), max_bytes=2**30)
    assert target.calls == drafter.calls == 0


def test_lm_pairs_refuses_time_after_its_pilot_steps_only():
    """64 steps of two models at 20 ms a step: about 2.6 s, over a limit of 0.5 s. Refused after
    the pilot (two calls of each model on a batch of at most PILOT_BATCH texts), before any step."""
    target, drafter = Counted(wait=0.02), Counted(wait=0.02)
    with pytest.raises(ProblemTooLargeError, match=r"lm-pairs: 64 positions.*estimated.*max_seconds"):
        drafters.lm_pairs(64, target, drafter, np.random.default_rng(0), max_seconds=0.5)
    assert target.calls == drafter.calls == 2 and target.texts <= 2 * PILOT_BATCH


def test_lm_pairs_within_its_limits_runs():
    target, drafter = Counted(), Counted()
    P, Q = drafters.lm_pairs(10, target, drafter, np.random.default_rng(0), max_seconds=60)
    assert P.shape == Q.shape == (10, 5) and np.allclose(P, 0.2)


def test_distill_ngram_refuses_a_huge_order_by_memory_before_sampling():
    target = Counted(V=465)
    with pytest.raises(ProblemTooLargeError, match="n-gram drafter of order 100000.*memory"):
        drafters.distill_ngram(target, np.random.default_rng(0), order=100_000)
    assert target.calls == 0


@pytest.mark.parametrize("call", [
    lambda t: drafters.distill_ngram(t, np.random.default_rng(0), order=2, max_seconds=0.5),
    lambda t: drafters.make_drafter("ngram", t, np.random.default_rng(0), order=2, max_seconds=0.5),
])
def test_distilling_from_a_slow_target_is_refused_after_its_pilot(call):
    """300 sampled steps at 20 ms each: 6 s, over 0.5 s."""
    target = Counted(wait=0.02)
    with pytest.raises(ProblemTooLargeError, match="n-gram drafter of order 2.*estimated"):
        call(target)
    assert target.calls == 2


def test_distill_ngram_within_its_limits_runs():
    law = drafters.distill_ngram(Counted(), np.random.default_rng(0), order=2, streams=4, length=20)
    assert law.order == 2 and np.isclose(law.law((0,)).sum(), 1.0)


def test_no_time_limit_takes_no_pilot_step():
    target, drafter = Counted(), Counted()
    drafters.lm_pairs(3, target, drafter, np.random.default_rng(0), max_seconds=None)
    assert target.calls == 3 and drafter.calls == 3  # start and two steps, no pilot


BAD_LIMITS = [("max_seconds", v) for v in ("1", [1], 1j, float("nan"), 0, -1.0, True)] + \
    [("max_bytes", v) for v in ("1", float("nan"), 0, -1, False)]


@pytest.mark.parametrize("name,value", BAD_LIMITS)
@pytest.mark.parametrize("call", [
    lambda t, kw: drafters.lm_pairs(3, t, t, np.random.default_rng(0), **kw),
    lambda t, kw: drafters.distill_ngram(t, np.random.default_rng(0), order=2, **kw),
    lambda t, kw: drafters.make_drafter("ngram", t, np.random.default_rng(0), order=2, **kw),
    lambda t, kw: drafters.load_drafter("ngram", t, np.random.default_rng(0), order=2, **kw),
])
def test_a_bad_limit_is_named_before_any_call(call, name, value):
    target = Counted()
    with pytest.raises(InvalidInputError, match=rf"^{name} must be a positive number or None, "
                       rf"got {re.escape(repr(value))}$"):
        call(target, {name: value})
    assert target.calls == 0


def test_an_infinite_time_limit_takes_no_pilot_step():
    target, drafter = Counted(), Counted()
    drafters.lm_pairs(3, target, drafter, np.random.default_rng(0), max_seconds=float("inf"),
                      max_bytes=None)
    assert target.calls == 3 and drafter.calls == 3


class Clocked(LanguageModel):
    """A uniform law over V tokens whose calls cost ``per_token`` seconds per token of their
    contexts on a fake clock (a transformer recomputing each context); counts its calls."""

    def __init__(self, clock, per_token: float, V: int = 5):
        self.V, self.bos, self.clock, self.per_token = V, 0, clock, per_token
        self.calls = 0

    def _laws(self, contexts):
        self.calls += 1
        self.clock.now += self.per_token * sum(len(c) for c in contexts)
        return np.full((len(contexts), self.V), 1.0 / self.V)


@pytest.fixture
def fake_clock(monkeypatch):
    from types import SimpleNamespace

    from mdtheory.language import langmodel

    clock = SimpleNamespace(now=0.0)
    clock.perf_counter = lambda: clock.now
    monkeypatch.setattr(langmodel, "time", clock)
    return clock


def test_block_efficiency_is_refused_by_the_models_measured_calls(fake_clock):
    """1 ms per context token: 200 calls of a text that grows to about 400 tokens cost minutes,
    while the sizes alone (the rule, the contexts) take milliseconds. Refused from the pilot calls,
    before any drafting."""
    from mdtheory.blocks import simulation as blockeff

    target, drafter = Clocked(fake_clock, 1e-3), Clocked(fake_clock, 1e-3)
    assert blockeff.estimate("rrs", 5, 2, 2, 200).seconds < 10  # the sizes alone fit the limit
    with pytest.raises(ProblemTooLargeError,
                       match=r"the models .* a call \(measured\).*over the limit of 10 s"):
        blockeff.block_efficiency(target, drafter, "rrs", 2, 2, 200, np.random.default_rng(0),
                                  start=(0,), max_seconds=10)
    assert target.calls == 2 and drafter.calls == 4  # the pilots: two calls per batch size


def test_the_measured_estimate_follows_the_models_cost_and_the_texts_length(fake_clock):
    from mdtheory.blocks import iid_drafts
    from mdtheory.blocks import simulation as blockeff

    tree = iid_drafts(2, 2)
    one = blockeff.model_estimate(Clocked(fake_clock, 1e-3), Clocked(fake_clock, 1e-3), tree, 20).seconds
    slow = blockeff.model_estimate(Clocked(fake_clock, 2e-3), Clocked(fake_clock, 1e-3), tree, 20).seconds
    long = blockeff.model_estimate(Clocked(fake_clock, 1e-3), Clocked(fake_clock, 1e-3), tree, 200).seconds
    T = blockeff.mean_context(tree, 20)
    # the drafter at depths 0 and 1 (1 and 2 contexts), the target on the 1 + 2 + 2 nodes, and the
    # 2 x 3 nodes' contexts of T + L tokens built
    contexts = blockeff.CONTEXT_TOKEN_SECONDS * 2 * 3 * (T + 2)
    assert T == 20 and one == pytest.approx(1e-3 * (T + 2 * (T + 1) + 5 * (T + 1)) + contexts)
    assert slow > one and long > 8 * one
    assert blockeff.mean_context(tree, 200, replicates=10) == T


def test_the_measured_estimate_holds_the_largest_calls_memory(fake_clock):
    """The memory of the models' largest call: the target on every node at the longest text (the
    text grows at most L + 1 tokens a call, a node adds at most L), as the model counts it."""
    from mdtheory.blocks import iid_drafts
    from mdtheory.blocks import simulation as blockeff

    asked = []

    class Sized(Clocked):
        def laws_bytes(self, batch, length):
            asked.append((batch, length))
            return 1000.0 * batch * length

    tree = iid_drafts(2, 3)
    est = blockeff.model_estimate(Sized(fake_clock, 1e-3), Sized(fake_clock, 1e-3), tree, 40,
                                  replicates=4)
    longest = 1 + (10 - 1) * 4 + 3  # 10 calls a text, L = 3
    assert (1 + 2 + 2 + 2, longest) in asked and est.bytes == 1000.0 * 7 * longest
    verifier = blockeff.with_models(blockeff.estimate("rrs", 5, 2, 3, 40, est.seconds), est)
    assert verifier.bytes == est.bytes and verifier.seconds > 40 * est.seconds


def test_a_transformer_counts_its_logits_at_every_position():
    pytest.importorskip("transformers")
    from types import SimpleNamespace

    from mdtheory.language.hf import HFModel

    model = HFModel.__new__(HFModel)
    model.V, model.max_length = 2000, 1024
    model.net = SimpleNamespace(config=SimpleNamespace(hidden_size=64, num_hidden_layers=2,
                                                       num_attention_heads=2), dtype=np.dtype(np.float32))
    B, T = 17, 1000
    assert model.laws_bytes(B, T) >= 4 * B * T * 2000 + 4 * B * 2 * T * T
    assert model.laws_bytes(B, 10**6) == model.laws_bytes(B, 1024)  # at most its positions
