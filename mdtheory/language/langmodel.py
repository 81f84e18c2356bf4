"""One protocol for language models: next-token laws of a batch of texts, with incremental state.

Every language model of the package (the char-LSTM of :mod:`mdtheory.language.lm`, the drafters of
:mod:`mdtheory.language.drafters`, Hugging Face checkpoints in :mod:`mdtheory.language.hf`) is a
:class:`LanguageModel`:

* ``model.start(contexts)`` -> a :class:`State` of B texts, its ``probs`` (B, V) the next-token laws;
* ``model.step(state, tokens)`` -> the state after appending one token to each text (a state is
  stepped once: a model may update its cache in place; :meth:`LanguageModel.select` copies);
* ``model.select(state, rows)`` -> the texts ``rows`` (reordered, repeated), e.g. K drafts from one
  context;
* ``model.laws(contexts)`` -> (B, V), and ``model(context)`` -> (V,): the law after one context, the
  plain-callable contract that the block optimum and the block audit take.

A model reuses state only where that is exact: a transformer's KV cache
(:class:`mdtheory.language.hf.HFModel`). A model without exact incremental state (the char-LSTM, whose input
is a sliding window) recomputes from the contexts at each step, batched. Laws are float64 rows
summing to one; the model's own arithmetic may be float32 or float64. Temperature, top-k and top-p
go through :func:`mdtheory.language.logits.to_probs` (a model that gives probabilities, not logits, is
tempered through their logarithms: softmax(log p / T) = p^(1/T) renormalised).

A plain callable ``law(context) -> (V,)`` is wrapped by :func:`as_model`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from .logits import to_probs

__all__ = ["State", "LanguageModel", "CallableModel", "as_model", "sample", "draw", "check_same_vocab"]


@dataclass
class State:
    """Where a batch of texts stands.

    Attributes
    ----------
    contexts : list of tuple of int
        The B texts (token ids).
    probs : ndarray, shape (B, V), float64
        The next-token law after each text.
    cache : object
        Model-specific incremental state (``None`` where the model recomputes from ``contexts``).
    """

    contexts: list
    probs: np.ndarray
    cache: Any = None


def _as_context(c) -> tuple[int, ...]:
    """A context as a tuple of token ids (a tuple is taken as it is: the callers' texts grow by
    concatenation, and converting each again would cost O(length) per call)."""
    if type(c) is tuple:
        return c
    a = np.asarray(c)
    if a.ndim > 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise InvalidInputError("a context must be a sequence of integer token ids")
    return tuple(a.astype(np.int64).ravel().tolist())


def _as_contexts(contexts) -> list[tuple[int, ...]]:
    if isinstance(contexts, np.ndarray) and contexts.ndim == 2:
        return [tuple(row) for row in contexts.astype(np.int64).tolist()]
    try:
        return [_as_context(c) for c in contexts]
    except TypeError:
        raise InvalidInputError("contexts must be a sequence of sequences of token ids") from None


def _as_tokens(tokens, B: int, V: int) -> np.ndarray:
    tokens = np.asarray(tokens).ravel()
    if tokens.size != B or not np.issubdtype(tokens.dtype, np.integer):
        raise InvalidInputError(f"step takes one integer token per text ({B}), got {tokens!r}")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= V):
        raise InvalidInputError(f"tokens must be in 0 .. {V - 1}, got {tokens.min()} .. {tokens.max()}")
    return tokens.astype(np.int64)


#: Texts in the pilot batch of :meth:`LanguageModel.step_seconds` and :meth:`LanguageModel.laws_seconds`.
PILOT_BATCH = 64


class LanguageModel:
    """Base class of the package's language models.

    A subclass defines ``V`` (the number of tokens) and one of

    * ``_logits(contexts) -> (B, V)`` logits (may hold -inf), made laws with ``temperature``,
      ``top_k``, ``top_p`` by :func:`mdtheory.language.logits.to_probs`; or
    * ``_laws(contexts) -> (B, V)`` laws directly;

    and, where it has exact incremental state, overrides :meth:`start`, :meth:`step` and
    :meth:`select`. The defaults recompute from the contexts at each step.
    """

    V: int
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    #: The token a text starts after (a title or document delimiter), where the model has one.
    bos: int | None = None
    #: The longest context the model takes (a transformer's positions), or None.
    max_length: int | None = None

    def _logits(self, contexts: list[tuple[int, ...]]) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} defines neither _logits nor _laws")

    def _laws(self, contexts: list[tuple[int, ...]]) -> np.ndarray:
        z = np.asarray(self._logits(contexts), dtype=np.float64)
        return to_probs(z, self.temperature, self.top_k, self.top_p)

    def start(self, contexts: Sequence) -> State:
        """The state of the texts ``contexts`` (B sequences of token ids)."""
        contexts = _as_contexts(contexts)
        return State(contexts, self._laws(contexts))

    def step(self, state: State, tokens) -> State:
        """The state after appending ``tokens[b]`` to text b (``state`` is not to be used again)."""
        tokens = _as_tokens(tokens, len(state.contexts), self.V)
        contexts = [c + (int(t),) for c, t in zip(state.contexts, tokens, strict=True)]
        return State(contexts, self._laws(contexts))

    def select(self, state: State, rows) -> State:
        """The texts ``rows`` of ``state`` (indices, repeats allowed), as a new state."""
        rows = np.asarray(rows, dtype=np.int64).ravel()
        return State([state.contexts[r] for r in rows], state.probs[rows], state.cache)

    def laws(self, contexts: Sequence) -> np.ndarray:
        """Next-token laws (B, V), float64, after each of the B contexts."""
        contexts = _as_contexts(contexts)
        if not contexts:
            return np.zeros((0, self.V))
        return self.start(contexts).probs

    def __call__(self, context) -> np.ndarray:
        """The next-token law (V,) after one context (a tuple of token ids)."""
        return self.laws([context])[0]

    def step_seconds(self, batch: int) -> float:
        """Seconds of one batched step of ``batch`` texts, measured: the faster of two :meth:`start`
        calls on min(batch, :data:`PILOT_BATCH`) one-token texts, scaled linearly to ``batch``.

        The size estimate of sampling from the model (:func:`mdtheory.language.drafters.lm_pairs`,
        :func:`~mdtheory.language.drafters.distill_ngram`), taken before the work starts; a model
        whose later steps cost more than its first (a transformer's attention over a growing
        context) may override it.
        """
        token = self.bos if self.bos is not None else 0
        pilot = max(1, min(int(batch), PILOT_BATCH))
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            self.start([(token,)] * pilot)
            best = min(best, time.perf_counter() - t0)
        return best * max(int(batch), 1) / pilot

    def laws_seconds(self, batch: int, length: int) -> float:
        """Seconds of one :meth:`laws` call on ``batch`` contexts of ``length`` tokens, measured:
        the faster of two calls on min(batch, :data:`PILOT_BATCH`) contexts of that many tokens
        (at most the model's ``max_length``), scaled linearly to ``batch``.

        The estimate of work that asks for laws at whole contexts (the block-efficiency
        simulations: a transformer recomputes each context from its first token, so the cost
        grows with the context's length, which :meth:`step_seconds` does not see).
        """
        token = self.bos if self.bos is not None else 0
        length = max(1, int(length))
        if self.max_length is not None:
            length = min(length, int(self.max_length))
        pilot = max(1, min(int(batch), PILOT_BATCH))
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            self.laws([(token,) * length] * pilot)
            best = min(best, time.perf_counter() - t0)
        return best * max(int(batch), 1) / pilot

    def laws_bytes(self, batch: int, length: int) -> float:
        """Peak bytes of one :meth:`laws` call on ``batch`` contexts of ``length`` tokens: the laws
        and the logits (float64) and two temporaries of their size; a model whose forward pass
        holds more (a transformer's logits at every position and attention scores) overrides it."""
        return 4 * 8.0 * max(int(batch), 1) * self.V


class CallableModel(LanguageModel):
    """A plain callable ``law(context) -> (V,)`` as a :class:`LanguageModel` (one call per context).

    Each law is checked: V entries, finite, non-negative, summing to one within 1e-6 (then
    renormalised). With ``temperature``, ``top_k`` or ``top_p`` the law is tempered through its
    logarithm.
    """

    def __init__(self, law: Callable, V: int | None = None, temperature: float = 1.0,
                 top_k: int | None = None, top_p: float | None = None):
        if not callable(law):
            raise InvalidInputError(f"a language model must be callable, got {type(law).__name__}")
        self.law, self._V = law, V
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        to_probs(np.zeros(1), temperature, top_k, top_p)  # checks the parameters

    @property
    def V(self) -> int:
        if self._V is None:
            self._V = self._one(())[0].size
        return self._V

    def _one(self, context) -> tuple[np.ndarray]:
        law = self.law(tuple(context))
        try:
            p = np.asarray(law, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidInputError(f"the law at context {tuple(context)} is not an array of numbers "
                                    f"(got {type(law).__name__} {law!r:.60})") from None
        if p.ndim != 1 or (self._V is not None and p.size != self._V):
            raise InvalidInputError(f"the law at context {tuple(context)} has shape {p.shape}; "
                                    f"expected ({self._V if self._V is not None else 'V'},)")
        s = p.sum()
        if not (np.isfinite(p).all() and (p >= 0).all() and abs(s - 1.0) <= 1e-6):
            raise InvalidInputError(f"the law at context {tuple(context)} is not a distribution "
                                    f"(entries must be finite, >= 0 and sum to 1; sum {s!r})")
        return (p / s,)

    def _laws(self, contexts) -> np.ndarray:
        P = np.stack([self._one(c)[0] for c in contexts])
        if self.temperature == 1.0 and self.top_k is None and self.top_p is None:
            return P
        with np.errstate(divide="ignore"):
            return to_probs(np.log(P), self.temperature, self.top_k, self.top_p)


def as_model(law, V: int | None = None) -> LanguageModel:
    """``law`` itself if it is a :class:`LanguageModel`, else the callable wrapped
    (:class:`CallableModel`)."""
    if isinstance(law, LanguageModel):
        if V is not None and law.V != V:
            raise InvalidInputError(f"the model has {law.V} tokens, expected {V}")
        return law
    return CallableModel(law, V)


def check_same_vocab(target: LanguageModel, drafter: LanguageModel, names=("target", "drafter")):
    """Refuse a (target, drafter) pair whose token ids do not mean the same thing: different V, or
    (where both models know their tokens) a different token at some id."""
    if target.V != drafter.V:
        raise InvalidInputError(f"the {names[0]} has {target.V} tokens but the {names[1]} has "
                                f"{drafter.V}: a drafter must share the target's vocabulary")
    a, b = getattr(target, "vocabulary", None), getattr(drafter, "vocabulary", None)
    if a is not None and b is not None and a != b:
        diff = sorted(set(a.items()) ^ set(b.items()), key=lambda kv: (kv[1], kv[0]))[0]
        raise InvalidInputError(
            f"the {names[0]} and the {names[1]} have {target.V} tokens each but different "
            f"vocabularies (token {diff[0]!r} has id {a.get(diff[0])} in the {names[0]}, "
            f"{b.get(diff[0])} in the {names[1]}): a drafter must share the target's tokenizer")


def draw(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One token per row of the laws p (B, V), by inversion of the cumulative sums."""
    cdf = np.cumsum(p, axis=1)
    u = rng.random((p.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(axis=1), p.shape[1] - 1)


def sample(model: LanguageModel, contexts: Sequence, length: int, rng: np.random.Generator,
           record: Callable | None = None, tick: Callable | None = None) -> np.ndarray:
    """Continue each context by ``length`` tokens drawn from ``model``: (B, length) token ids.

    ``record(state)``, if given, sees the state before every draw (its contexts and laws);
    ``tick()`` is called after each step (a progress counter).
    """
    state = model.start(contexts)
    out = np.zeros((len(state.contexts), length), dtype=np.int64)
    for t in range(length):
        if record is not None:
            record(state)
        out[:, t] = draw(state.probs, rng)
        if t + 1 < length:
            state = model.step(state, out[:, t])
        if tick is not None:
            tick()
    return out
