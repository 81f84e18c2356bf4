"""The language-model protocol: batched laws, incremental state, wrapped callables, progress lines."""

import io

import numpy as np
import pytest

from mdtheory import _progress
from mdtheory.errors import InvalidInputError
from mdtheory.language import drafters, lm
from mdtheory.language.langmodel import CallableModel, LanguageModel, as_model, check_same_vocab, sample
from mdtheory.language.logits import to_probs

from .tolerances import BATCH_FLOAT32, FLOAT32, ROUNDING


class Markov:
    """A plain callable law: the next token depends on the last one (rows of a stochastic matrix)."""

    def __init__(self, V=5, seed=0):
        self.matrix = np.random.default_rng(seed).dirichlet(np.ones(V), size=V)

    def __call__(self, context):
        return self.matrix[context[-1] if context else 0]


def test_a_callable_is_wrapped_and_batched():
    law = Markov()
    model = as_model(law)
    assert isinstance(model, CallableModel) and model.V == 5 and as_model(model) is model
    contexts = [(1,), (0, 3), ()]
    P = model.laws(contexts)
    assert P.shape == (3, 5)
    for row, c in zip(P, contexts, strict=True):
        assert np.array_equal(row, law(c) / law(c).sum())
    assert np.abs(model((2, 4)) - law((4,))).max() < ROUNDING


def test_a_wrapped_callable_tempers_through_logits():
    law = Markov()
    model = CallableModel(law, temperature=0.5, top_k=2)
    p = model((3,))
    assert np.abs(p - to_probs(np.log(law((3,))), 0.5, 2)).max() < ROUNDING
    q = law((3,)) ** 2
    q[np.argsort(q)[:-2]] = 0
    assert np.abs(p - q / q.sum()).max() < ROUNDING  # softmax(log p / T) = p^(1/T), top-2 kept


@pytest.mark.parametrize("bad, match", [
    (lambda c: np.ones(4) / 4, "shape"),
    (lambda c: np.array([0.5, 0.6, 0, 0, 0]), "not a distribution"),
    (lambda c: np.array([1.5, -0.5, 0, 0, 0]), "not a distribution"),
    (lambda c: np.full((5,), np.nan), "not a distribution"),
])
def test_a_callable_that_gives_no_law_is_refused(bad, match):
    model = CallableModel(bad, V=5)
    with pytest.raises(InvalidInputError, match=match):
        model.laws([(1,)])


def test_not_callable_is_refused():
    with pytest.raises(InvalidInputError, match="callable"):
        as_model(42)


def test_start_step_select_follow_the_contexts():
    model = as_model(Markov(V=6, seed=1))
    state = model.start([(0,), (1, 2)])
    state = model.step(state, [4, 5])
    assert state.contexts == [(0, 4), (1, 2, 5)]
    assert np.array_equal(state.probs, model.laws(state.contexts))
    branch = model.select(state, [1, 1, 0])
    assert branch.contexts == [(1, 2, 5), (1, 2, 5), (0, 4)]
    assert np.array_equal(branch.probs, state.probs[[1, 1, 0]])
    with pytest.raises(InvalidInputError, match="one integer token per text"):
        model.step(state, [1])
    with pytest.raises(InvalidInputError, match="tokens must be in 0 .. 5"):
        model.step(state, [1, 6])


def test_sample_is_reproducible_and_follows_the_law():
    model = as_model(Markov(V=4, seed=2))
    a = sample(model, [(0,)] * 3000, 2, np.random.default_rng(7))
    b = sample(model, [(0,)] * 3000, 2, np.random.default_rng(7))
    assert a.shape == (3000, 2) and np.array_equal(a, b)
    freq = np.bincount(a[:, 0], minlength=4) / 3000
    assert np.abs(freq - model((0,))).max() < 0.04  # 4 standard errors of a share at n = 3000


def test_vocabularies_of_different_size_are_refused():
    with pytest.raises(InvalidInputError, match="has 5 tokens but the drafter has 6"):
        check_same_vocab(as_model(Markov(5)), as_model(Markov(6)))


def test_ngram_is_a_language_model():
    texts = [np.array([3, 1, 2, 1, 2, 1, 2, 4]), np.array([3, 2, 2, 1])]
    ngram = drafters.NGramLaw.fit(texts, V=5, order=2, strength=0.5)
    assert isinstance(ngram, LanguageModel)
    P = ngram.laws([(3,), (1,), (1, 2)])
    assert np.abs(P.sum(axis=1) - 1).max() < ROUNDING and (P[:, 0] == 0).all()  # pad never emitted
    # (after 1: the counts are 3 x "2"; smoothed with the unigram law, itself smoothed with uniform)
    assert P[1].argmax() == 2 and P[2].argmax() == 1
    ngram.temperature = 0.5
    hot = ngram.laws([(1,)])[0]
    ref = P[1] ** 2 / (P[1] ** 2).sum()
    assert np.abs(hot - ref).max() < ROUNDING
    assert np.array_equal(ngram((1,)), hot)


@pytest.mark.char_lstm
def test_char_lstm_steps_equal_a_full_recompute():
    """No incremental state is kept: a stepped state's laws are the laws of its contexts."""
    target = drafters.LSTMLaw(lm.load_char_lstm(), 0.8)
    ids = target.model.encode("The quick brown fox jumps over the lazy dog and the cat")
    state = target.start([(target.bos,), (target.bos, *ids[:3])])
    for t in range(3):
        state = target.step(state, ids[[t, t + 3]])
    assert state.contexts[0] == (target.bos, *ids[:3])
    assert np.abs(state.probs - target.laws(state.contexts)).max() < ROUNDING
    assert np.abs(target(state.contexts[1]) - state.probs[1]).max() < BATCH_FLOAT32
    f64 = drafters.load_model("char-lstm", 0.8, dtype="float64")
    assert f64.model.dtype == np.float64
    assert np.abs(f64.laws(state.contexts) - state.probs).max() < FLOAT32


# ---------------------------------------------------------------- progress lines
def test_plain_progress_prints_at_most_every_interval():
    now = [0.0]
    out = io.StringIO()
    bar = _progress.PlainProgress(range(100), 100, "sampling", interval=10.0, file=out,
                                  clock=lambda: now[0])
    for i in bar:
        now[0] = i * 0.5  # 0.5 s an item: 49.5 s in all
    lines = out.getvalue().splitlines()
    assert len(lines) == 4  # at 10, 20, 30, 40 s: none before the first 10 s
    assert lines[0] == "mdtheory: sampling: 21/100 (21%), 10 s"
    assert all("\r" not in line for line in lines)


def test_progress_quiet_and_off_a_terminal(monkeypatch):
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a terminal
    assert isinstance(_progress.progress(range(3), 3, "x"), _progress.PlainProgress)
    assert _progress.progress(None, 3, "x", quiet=True) is None
    items = range(3)
    assert _progress.progress(items, 3, "x", quiet=True) is items
