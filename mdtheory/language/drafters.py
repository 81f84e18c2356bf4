"""Draft language models for a target language model, and (target, draft) pairs along texts.

Every model here is a :class:`mdtheory.language.langmodel.LanguageModel` (batched next-token laws, ``start``
/ ``step`` / ``select``, callable on one context). The bundled target is the char-LSTM of
:mod:`mdtheory.language.lm` at a temperature (:class:`LSTMLaw`); a Hugging Face checkpoint
(:class:`mdtheory.language.hf.HFModel`) is another. The drafters are what a practitioner would put next to it:

* ``tempered``: the target itself at another temperature and/or top-k;
* ``ngram``: a token n-gram model distilled from text sampled from the target, its smoothing
  chosen on held-out sampled text (:class:`NGramLaw`, :func:`distill_ngram`);
* ``quantized`` (the char-LSTM only): the LSTM with its weight matrices rounded to int8 per output
  channel (or float16), as compressed drafters are stored (:meth:`mdtheory.language.lm.CharLSTM.quantized`).

Everything random takes a ``numpy.random.Generator``: the same seed gives the same drafter and pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import _budget
from .._budget import MAX_BYTES, MAX_SECONDS
from .._progress import progress
from .._validate import as_generator
from ..errors import InvalidInputError
from .langmodel import LanguageModel, check_same_vocab, draw, sample
from .lm import META, PAD, CharLSTM, load_char_lstm
from .logits import check_sampling, to_probs

__all__ = ["LSTMLaw", "NGramLaw", "distill_ngram", "sample_texts", "make_drafter", "lm_pairs",
           "DRAFTERS", "CHAR_LSTM", "load_model", "load_drafter", "draw", "progress"]

#: Drafter kinds of :func:`make_drafter` (besides a second model, e.g. ``hf:PATH``).
DRAFTERS = ("tempered", "ngram", "quantized")
#: Smoothing strengths tried for the n-gram drafter (chosen on held-out text).
NGRAM_STRENGTHS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
#: Texts and their length sampled from the target to distil an n-gram drafter (:func:`distill_ngram`).
NGRAM_STREAMS, NGRAM_LENGTH = 64, 300
#: Tokens per sampled text of :func:`lm_pairs` (the texts run side by side).
PAIRS_LENGTH = 64


@dataclass(frozen=True)
class LSTMLaw(LanguageModel):
    """The char-LSTM's next-token law at a temperature, with optional top-k / top-p.

    No exact incremental state (the input is a sliding window): each step recomputes the windows of
    the batch in one forward pass.
    """

    model: CharLSTM
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
        check_sampling(self.temperature, self.top_k, self.top_p)

    @property
    def V(self) -> int:
        return self.model.V

    @property
    def bos(self) -> int:
        return self.model.vocab[META]

    @property
    def vocabulary(self) -> dict:
        return self.model.vocab

    def with_sampling(self, temperature: float | None = None, top_k: int | None = None,
                      top_p: float | None = None) -> LSTMLaw:
        """The same network at another temperature / top-k / top-p (``None``: 1, no filter)."""
        return LSTMLaw(self.model, 1.0 if temperature is None else temperature, top_k, top_p)

    def _logits(self, contexts) -> np.ndarray:
        return self.model.logits(self.model.windows(contexts))


@dataclass
class NGramLaw(LanguageModel):
    """A token n-gram law with hierarchical additive smoothing.

    .. math:: p_m(c \\mid h_m) = \\frac{N(h_m c) + \\beta\\, p_{m-1}(c \\mid h_{m-1})}{N(h_m) + \\beta},
              \\qquad p_0 = \\text{uniform over the tokens other than } \\texttt{pad},

    with :math:`h_m` the last m - 1 tokens (m = 1 .. order) and N the counts in the training text.

    Attributes
    ----------
    V, order : int
    strength : float
        The smoothing strength β.
    temperature : float
        The law is raised to the power 1 / temperature and renormalised (softmax(log p / T)).
    counts : list of dict
        ``counts[m]`` maps a context tuple of length m to its next-token counts (V,).
    pad : int or None
        A token never emitted (the char-LSTM's padding), or None.
    """

    V: int
    order: int
    strength: float = 1.0
    counts: list = field(default_factory=list)
    temperature: float = 1.0
    pad: int | None = PAD

    @classmethod
    def fit(cls, texts, V: int, order: int, strength: float = 1.0, pad: int | None = PAD) -> NGramLaw:
        counts: list[dict] = [{} for _ in range(order)]
        for ids in texts:
            ids = [int(t) for t in ids]
            for t in range(1, len(ids)):
                for m in range(min(order - 1, t) + 1):
                    row = counts[m].get(key := tuple(ids[t - m:t]))
                    if row is None:
                        row = counts[m][key] = np.zeros(V)
                    row[ids[t]] += 1
        return cls(V, order, strength, counts, pad=pad)

    def law(self, context) -> np.ndarray:
        """The smoothed law after ``context`` at temperature 1."""
        p = np.full(self.V, 1.0 / (self.V - (self.pad is not None)))
        if self.pad is not None:
            p[self.pad] = 0.0
        ctx = [int(c) for c in context[max(len(context) - (self.order - 1), 0):]]  # the last order - 1
        for m in range(min(self.order - 1, len(ctx)) + 1):
            row = self.counts[m].get(tuple(ctx[len(ctx) - m:]))
            if row is None:
                break
            p = (row + self.strength * p) / (row.sum() + self.strength)
        return p

    def _laws(self, contexts) -> np.ndarray:
        P = np.stack([self.law(c) for c in contexts])
        if self.temperature == 1.0:
            return P
        with np.errstate(divide="ignore"):
            return to_probs(np.log(P), self.temperature)

    def bits_per_char(self, texts) -> float:
        total, count = 0.0, 0
        for ids in texts:
            for t in range(1, len(ids)):
                total -= np.log2(self.law(ids[:t])[ids[t]])
                count += 1
        return total / max(count, 1)


def _limits(max_seconds, max_bytes) -> tuple[float | None, float]:
    """The limits checked (:func:`mdtheory._budget.check_limit`): ``max_seconds`` None where it sets
    no limit (None or infinite: no pilot step), ``max_bytes`` infinite where None."""
    max_seconds = _budget.check_limit(max_seconds, "max_seconds")
    max_bytes = _budget.check_limit(max_bytes, "max_bytes")
    return (max_seconds if max_seconds is not None and math.isfinite(max_seconds) else None,
            math.inf if max_bytes is None else max_bytes)


def sample_texts(law: LanguageModel, streams: int, length: int, rng: np.random.Generator,
                 meta: int, quiet: bool = True, record=None) -> list[np.ndarray]:
    """Sample ``streams`` texts of ``length`` tokens from ``law``, each starting after the token
    ``meta`` (which each returned text begins with).

    ``record(contexts, p)``, if given, sees every batch of contexts and their laws.
    """
    bar = progress(None, length, "sampling", quiet)
    tokens = sample(law, [(meta,)] * streams, length, rng,
                    None if record is None else lambda s: record(s.contexts, s.probs),
                    None if bar is None else bar.update)
    if bar is not None:
        bar.close()
    return list(np.hstack([np.full((streams, 1), meta, dtype=np.int64), tokens]))


def distill_ngram(target: LanguageModel, rng: np.random.Generator, order: int = 3,
                  streams: int = NGRAM_STREAMS, length: int = NGRAM_LENGTH, meta: int | None = None,
                  quiet: bool = True, *,
                  max_seconds: float = MAX_SECONDS, max_bytes: float = MAX_BYTES) -> NGramLaw:
    """An n-gram drafter distilled from text sampled from ``target``.

    Samples ``streams`` texts of ``length`` tokens (batched: one forward pass of the target per
    token position, for all texts), each after ``meta`` (default: the target's ``bos``); fits the
    counts on 90% of them and picks the smoothing strength from :data:`NGRAM_STRENGTHS` with the
    fewest bits per token on the rest.

    Raises
    ------
    ProblemTooLargeError
        Before any work: the counts' memory is estimated over ``max_bytes``, or (``max_seconds``
        finite; None: no limit) the time (the
        sampling by :meth:`~mdtheory.language.langmodel.LanguageModel.step_seconds`, measured on a
        pilot batch, plus the counting, :func:`mdtheory._budget.ngram_distillation`) over
        ``max_seconds``; the message states the estimate.
    """
    max_seconds, max_bytes = _limits(max_seconds, max_bytes)
    if streams < 2:
        raise InvalidInputError(f"distilling an n-gram needs at least 2 sampled texts, got {streams}")
    if order < 1 or length < 1:
        raise InvalidInputError(f"an n-gram needs order >= 1 and length >= 1, got order {order}, "
                                f"length {length}")
    meta = target.bos if meta is None else meta
    if meta is None:
        raise InvalidInputError("the target has no start token: give meta")
    if target.max_length is not None:  # a transformer's positions bound the sampled texts
        length = min(length, target.max_length - 1)
    size = _budget.ngram_distillation(order, target.V, streams, length, len(NGRAM_STRENGTHS), 0.0)
    _budget.require(size, math.inf, max_bytes=max_bytes)  # the memory, before the pilot step
    if max_seconds is not None:
        _budget.require(size._replace(seconds=size.seconds + target.step_seconds(streams) * length),
                        max_seconds, max_bytes=max_bytes, flag="max_seconds")
    texts = sample_texts(target, streams, length, rng, meta, quiet)
    held = max(1, streams // 10)
    pad = PAD if isinstance(target, LSTMLaw) else None
    fitted = NGramLaw.fit(texts[held:], target.V, order, pad=pad)
    scores = {}
    for beta in NGRAM_STRENGTHS:
        fitted.strength = beta
        scores[beta] = fitted.bits_per_char(texts[:held])
    fitted.strength = min(scores, key=scores.get)
    return fitted


def make_drafter(kind, target: LanguageModel, rng: np.random.Generator, *,
                 temperature: float | None = None, top_k: int | None = None, order: int = 3,
                 quantization: str = "int8", quiet: bool = True, max_seconds: float = MAX_SECONDS,
                 max_bytes: float = MAX_BYTES) -> LanguageModel:
    """The drafter ``kind`` (one of :data:`DRAFTERS`, or a :class:`LanguageModel` to draft with)
    for ``target``.

    ``temperature`` defaults to the target's; ``top_k`` applies to the tempered and quantized
    drafters; ``order`` and ``rng`` to the n-gram, which is fitted to text sampled from the target
    and then tempered by ``temperature / target.temperature``. A model given as ``kind`` is tempered
    likewise where it has ``with_sampling``; its vocabulary must be the target's. ``max_seconds``
    and ``max_bytes`` bound the n-gram's distillation (:func:`distill_ngram`, refused up front).
    """
    max_seconds, max_bytes = _limits(max_seconds, max_bytes)
    temperature = target.temperature if temperature is None else temperature
    check_sampling(temperature, top_k)
    if isinstance(kind, LanguageModel):
        if hasattr(kind, "with_sampling"):
            kind = kind.with_sampling(temperature, top_k)
        check_same_vocab(target, kind)
        return kind
    if kind == "tempered":
        if not hasattr(target, "with_sampling"):
            raise InvalidInputError("the tempered drafter needs a target with a temperature")
        return target.with_sampling(temperature, top_k)
    if kind == "quantized":
        if not isinstance(target, LSTMLaw):
            raise InvalidInputError("the quantized drafter is the char-LSTM's (int8 or float16 "
                                    "weights); for another target give a drafter model")
        return LSTMLaw(target.model.quantized(quantization), temperature, top_k)
    if kind == "ngram":
        ngram = distill_ngram(target, rng, order, quiet=quiet, max_seconds=max_seconds,
                              max_bytes=max_bytes)
        ngram.temperature = temperature / target.temperature
        return ngram
    raise InvalidInputError(f"unknown drafter {kind!r}; valid choices: {', '.join(DRAFTERS)}")


#: The bundled target: the pretrained char-LSTM (no download, the ``lm`` extra).
CHAR_LSTM = "char-lstm"


def load_model(spec: str = CHAR_LSTM, temperature: float = 1.0, top_k: int | None = None,
               device: str = "cpu", dtype: str = "float32") -> LanguageModel:
    """The target model ``spec``: ``char-lstm`` (the bundled pretrained char-LSTM) or ``hf:PATH``
    (a local Hugging Face checkpoint, :func:`mdtheory.language.hf.load_hf`), at ``temperature``."""
    check_sampling(temperature, top_k)
    if dtype not in ("float32", "float64"):
        raise InvalidInputError(f"dtype must be float32 or float64, got {dtype!r}")
    if spec == CHAR_LSTM:
        if device != "cpu":
            raise InvalidInputError(f"the char-LSTM runs in numpy on the CPU, not on {device!r}")
        model = load_char_lstm()
        return LSTMLaw(model if dtype == "float32" else model.with_dtype(np.float64), temperature,
                       top_k)
    from .hf import is_hf, load_hf

    if is_hf(spec):
        return load_hf(spec, device=device, dtype=dtype, temperature=temperature, top_k=top_k)
    raise InvalidInputError(f"unknown model {spec!r}; give {CHAR_LSTM} or hf:PATH (a local Hugging "
                            "Face checkpoint directory)")


def load_drafter(spec: str, target: LanguageModel, rng: np.random.Generator, *,
                 temperature: float | None = None, top_k: int | None = None, order: int = 3,
                 device: str = "cpu", dtype: str = "float32", quiet: bool = True,
                 max_seconds: float = MAX_SECONDS, max_bytes: float = MAX_BYTES) -> LanguageModel:
    """The drafter ``spec`` for ``target``: one of :data:`DRAFTERS` (:func:`make_drafter`, with the
    limits) or ``hf:PATH``, a second checkpoint whose vocabulary must be the target's."""
    max_seconds, max_bytes = _limits(max_seconds, max_bytes)
    from .hf import is_hf, load_hf

    if is_hf(spec):
        check_sampling(target.temperature if temperature is None else temperature, top_k)
        spec = load_hf(spec, device=device, dtype=dtype)
    return make_drafter(spec, target, rng, temperature=temperature, top_k=top_k, order=order,
                        quiet=quiet, max_seconds=max_seconds, max_bytes=max_bytes)


def lm_pairs(positions: int, target: LanguageModel, drafter: LanguageModel,
             rng: np.random.Generator | int | None,
             length: int = PAIRS_LENGTH, quiet: bool = True, *, max_seconds: float = MAX_SECONDS,
             max_bytes: float = MAX_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """Target and draft laws (P, Q), each (positions, V), at the positions of texts sampled from the
    target: ceil(positions / length) texts of ``length`` tokens (at most the models'
    ``max_length`` - 1) side by side, each after the target's ``bos``; rows in time-major order
    (every text's first position, then every text's second ...), the last step cut to make
    ``positions`` rows. Both models advance by their own
    incremental state (:meth:`~mdtheory.language.langmodel.LanguageModel.step`).

    Raises
    ------
    ProblemTooLargeError
        Before any work: P and Q are estimated over ``max_bytes``, or (``max_seconds`` finite;
        None: no limit) the steps (each model's
        :meth:`~mdtheory.language.langmodel.LanguageModel.step_seconds` on the batch of texts,
        measured on a pilot batch, times the steps) over ``max_seconds``; the message states the
        estimate.
    """
    max_seconds, max_bytes = _limits(max_seconds, max_bytes)
    rng = as_generator(rng)
    if positions < 1:
        raise InvalidInputError(f"--positions must be >= 1, got {positions}")
    if length < 1:
        raise InvalidInputError(f"length must be >= 1, got {length}")
    check_same_vocab(target, drafter)
    if target.bos is None:
        raise InvalidInputError("the target has no start token (bos) to sample texts after")
    length = min(length, positions)
    for model in (target, drafter):  # a transformer's positions bound the sampled texts
        if model.max_length is not None:
            length = min(length, model.max_length - 1)
    streams = -(-positions // length)
    _budget.require(_budget.lm_pairs(positions, target.V, 0.0), math.inf, max_bytes=max_bytes)
    if max_seconds is not None:  # the pilot steps, only where a limit needs them
        seconds = (target.step_seconds(streams) + drafter.step_seconds(streams)) * length
        _budget.require(_budget.lm_pairs(positions, target.V, seconds), max_seconds,
                        max_bytes=max_bytes, flag="max_seconds")
    P, Q = [], []
    contexts = [(target.bos,)] * streams
    bar = progress(None, length, "lm-pairs", quiet)
    ts, ds = target.start(contexts), drafter.start(contexts)
    for t in range(length):
        P.append(ts.probs)
        Q.append(ds.probs)
        if bar is not None:
            bar.update(1)
        if t + 1 < length:
            tokens = draw(ts.probs, rng)
            ts, ds = target.step(ts, tokens), drafter.step(ds, tokens)
    if bar is not None:
        bar.close()
    return np.concatenate(P)[:positions], np.concatenate(Q)[:positions]
