"""Draft language models for the pretrained char-LSTM target, and (target, draft) pairs along texts.

A *language law* maps a batch of contexts (arrays of token ids) to next-token laws (B, V). The target
is the char-LSTM of :mod:`mdtheory.lm` at a temperature; the drafters are what a practitioner would
put next to it:

* ``tempered``: the same LSTM at another temperature and/or top-k (:class:`LSTMLaw`);
* ``ngram``: a character n-gram model distilled from text sampled from the target, its smoothing
  chosen on held-out sampled text (:class:`NGramLaw`, :func:`distill_ngram`);
* ``quantized``: the LSTM with its weight matrices rounded to int8 per output channel (or float16),
  as compressed drafters are stored (:meth:`mdtheory.lm.CharLSTM.quantized`).

Everything random takes a ``numpy.random.Generator``: the same seed gives the same drafter and pairs.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from .errors import InvalidInputError
from .lm import META, PAD, CharLSTM
from .logits import check_sampling

__all__ = ["LSTMLaw", "NGramLaw", "distill_ngram", "sample_texts", "make_drafter", "lm_pairs",
           "DRAFTERS", "draw", "progress"]

#: Drafter kinds of :func:`make_drafter`.
DRAFTERS = ("tempered", "ngram", "quantized")
#: Smoothing strengths tried for the n-gram drafter (chosen on held-out text).
NGRAM_STRENGTHS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)


def progress(iterable, total: int, desc: str, quiet: bool = False):
    """A tqdm bar on stderr when it is a terminal (and not ``quiet``); the iterable itself otherwise."""
    if quiet or not sys.stderr.isatty():
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False)


@dataclass(frozen=True)
class LSTMLaw:
    """The char-LSTM's next-token law at a temperature, with optional top-k / top-p."""

    model: CharLSTM
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
        check_sampling(self.temperature, self.top_k, self.top_p)

    @property
    def V(self) -> int:
        return self.model.V

    def __call__(self, contexts) -> np.ndarray:
        return self.model.probs(self.model.windows(contexts), self.temperature, self.top_k, self.top_p)


@dataclass
class NGramLaw:
    """A character n-gram law with hierarchical additive smoothing.

    .. math:: p_m(c \\mid h_m) = \\frac{N(h_m c) + \\beta\\, p_{m-1}(c \\mid h_{m-1})}{N(h_m) + \\beta},
              \\qquad p_0 = \\text{uniform over the non-padding tokens},

    with :math:`h_m` the last m - 1 characters (m = 1 .. order) and N the counts in the training text.

    Attributes
    ----------
    V, order : int
    strength : float
        The smoothing strength β.
    temperature : float
        The law is raised to the power 1 / temperature and renormalised.
    counts : list of dict
        ``counts[m]`` maps a context tuple of length m to its next-token counts (V,).
    """

    V: int
    order: int
    strength: float = 1.0
    counts: list = field(default_factory=list)
    temperature: float = 1.0

    @classmethod
    def fit(cls, texts, V: int, order: int, strength: float = 1.0) -> NGramLaw:
        counts: list[dict] = [{} for _ in range(order)]
        for ids in texts:
            ids = np.asarray(ids)
            for t in range(1, ids.size):
                for m in range(min(order - 1, t) + 1):
                    row = counts[m].setdefault(tuple(ids[t - m:t].tolist()), np.zeros(V))
                    row[ids[t]] += 1
        return cls(V, order, strength, counts)

    def law(self, context) -> np.ndarray:
        p = np.full(self.V, 1.0 / (self.V - 1))
        p[PAD] = 0.0
        ctx = [int(c) for c in context]
        for m in range(min(self.order - 1, len(ctx)) + 1):
            row = self.counts[m].get(tuple(ctx[len(ctx) - m:]))
            if row is None:
                break
            p = (row + self.strength * p) / (row.sum() + self.strength)
        if self.temperature != 1.0:
            p = p ** (1.0 / self.temperature)
            p /= p.sum()
        return p

    def __call__(self, contexts) -> np.ndarray:
        return np.stack([self.law(c) for c in contexts])

    def bits_per_char(self, texts) -> float:
        total, count = 0.0, 0
        for ids in texts:
            for t in range(1, len(ids)):
                total -= np.log2(self.law(ids[:t])[ids[t]])
                count += 1
        return total / max(count, 1)


def draw(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One token per row of the laws p (B, V), by inversion of the cumulative sums."""
    cdf = np.cumsum(p, axis=1)
    u = rng.random((p.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(axis=1), p.shape[1] - 1)


def sample_texts(law, streams: int, length: int, rng: np.random.Generator, meta: int,
                 quiet: bool = True, record=None) -> list[np.ndarray]:
    """Sample ``streams`` texts of ``length`` tokens from ``law``, each starting after the token ``meta``.

    ``record(contexts, p)``, if given, sees every batch of contexts and their laws.
    """
    ids = np.full((streams, length + 1), meta, dtype=np.int64)
    for t in progress(range(length), length, "sampling", quiet):
        contexts = [row[:t + 1] for row in ids]
        p = law(contexts)
        if record is not None:
            record(contexts, p)
        ids[:, t + 1] = draw(p, rng)
    return list(ids)


def distill_ngram(target, rng: np.random.Generator, order: int = 3, streams: int = 64,
                  length: int = 300, meta: int | None = None, quiet: bool = True) -> NGramLaw:
    """An n-gram drafter distilled from text sampled from ``target``.

    Samples ``streams`` texts of ``length`` characters; fits the counts on 90% of them and picks the
    smoothing strength from :data:`NGRAM_STRENGTHS` with the fewest bits per char on the rest.
    """
    if streams < 2:
        raise InvalidInputError(f"distilling an n-gram needs at least 2 sampled texts, got {streams}")
    meta = target.model.vocab[META] if meta is None else meta
    texts = sample_texts(target, streams, length, rng, meta, quiet)
    held = max(1, streams // 10)
    fitted = NGramLaw.fit(texts[held:], target.V, order)
    scores = {}
    for beta in NGRAM_STRENGTHS:
        fitted.strength = beta
        scores[beta] = fitted.bits_per_char(texts[:held])
    fitted.strength = min(scores, key=scores.get)
    return fitted


def make_drafter(kind: str, target: LSTMLaw, rng: np.random.Generator, *,
                 temperature: float | None = None, top_k: int | None = None, order: int = 3,
                 quantization: str = "int8", quiet: bool = True):
    """The drafter ``kind`` (one of :data:`DRAFTERS`) for ``target``.

    ``temperature`` defaults to the target's; ``top_k`` applies to the LSTM drafters; ``order`` and
    ``rng`` to the n-gram, which is fitted to text sampled from the target and then tempered by
    ``temperature / target.temperature``.
    """
    temperature = target.temperature if temperature is None else temperature
    check_sampling(temperature, top_k)
    if kind == "tempered":
        return LSTMLaw(target.model, temperature, top_k)
    if kind == "quantized":
        return LSTMLaw(target.model.quantized(quantization), temperature, top_k)
    if kind == "ngram":
        ngram = distill_ngram(target, rng, order, quiet=quiet)
        ngram.temperature = temperature / target.temperature
        return ngram
    raise InvalidInputError(f"unknown drafter {kind!r}; valid choices: {', '.join(DRAFTERS)}")


def lm_pairs(positions: int, target: LSTMLaw, drafter, rng: np.random.Generator, length: int = 64,
             quiet: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Target and draft laws (P, Q), each (positions, V), at the positions of texts sampled from the
    target: ceil(positions / length) texts of ``length`` characters side by side, each from the start
    of a title; rows in time-major order (every text's first position, then every text's second ...),
    the last step cut to make ``positions`` rows."""
    if positions < 1:
        raise InvalidInputError(f"--positions must be >= 1, got {positions}")
    length = min(length, positions)
    streams = -(-positions // length)
    P, Q = [], []

    def record(contexts, p):
        P.append(p)
        Q.append(drafter(contexts))

    sample_texts(target, streams, length, rng, target.model.vocab[META], quiet, record)
    return np.concatenate(P)[:positions], np.concatenate(Q)[:positions]
