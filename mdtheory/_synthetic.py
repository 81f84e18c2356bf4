"""LLM-like (p, q) pairs for the torch harness, the benchmarks and the tests: one generator.

Target logits follow a Zipf-like rank law with noise, :math:`\\ell_y = -1.1 \\log(y + 1) + 0.5 Z_y`;
the draft is the target perturbed and tempered, :math:`(\\ell_y + \\sigma Z'_y) / \\tau`; both are
soft-maxed. Optionally both are restricted to the draft's ``top_k`` most likely tokens and
renormalised, as a top-k serving stack does before verification.
"""

from __future__ import annotations

import numpy as np

__all__ = ["llm_pairs", "HARNESS", "SERVING"]

#: (noise, temperature) of the torch harness: a strongly perturbed draft (acceptance well below one).
HARNESS = (1.5, 2.0)
#: (noise, temperature) of the benchmarks: a draft close to a small model's.
SERVING = (0.8, 1.3)


def llm_pairs(rng: np.random.Generator, batch: int, vocab: int, *, noise: float = HARNESS[0],
              temperature: float = HARNESS[1], top_k: int | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """``batch`` LLM-like (p, q) rows over ``vocab`` tokens (``top_k`` after restriction).

    Parameters
    ----------
    rng : numpy.random.Generator
        Draws the target noise (batch, vocab), then the draft noise (batch, vocab).
    batch, vocab : int
    noise, temperature : float
        The draft's perturbation σ and temperature τ (default :data:`HARNESS`).
    top_k : int, optional
        Keep each row's ``top_k`` most likely draft tokens, in decreasing draft probability.

    Returns
    -------
    p, q : ndarray, shape (batch, vocab) or (batch, top_k)
        Rows summing to one.
    """
    logits = -1.1 * np.log(np.arange(1, vocab + 1))[None, :] \
        + 0.5 * rng.standard_normal((batch, vocab))
    draft = (logits + noise * rng.standard_normal((batch, vocab))) / temperature
    if top_k is not None:
        top = np.argsort(-draft, axis=1)[:, :top_k]
        logits, draft = (np.take_along_axis(x, top, axis=1) for x in (logits, draft))
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    q = np.exp(draft - draft.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True), q / q.sum(axis=1, keepdims=True)
