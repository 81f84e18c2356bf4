"""Block efficiency of multi-draft speculative decoding with a real target and a drafter.

One *step* (one call of the target):

1. the drafter writes K drafts of L tokens from the current text: iid drafts, or (``sampling=
   "without-replacement"``) K distinct first tokens drawn by successive sampling and then each draft
   continued on its own;
2. the target scores, in one batch, every prefix of every draft (K (L + 1) contexts);
3. verification goes token by token: at depth d the drafts consistent with the accepted prefix (those
   that agree with it on their first d tokens) offer their d-th tokens to the selection rule, prepared
   for (p, q) at that prefix and the number of those drafts (as SpecTr and Khisti et al. do); the
   rule's output is emitted; a rejection ends the step;
4. after L accepted tokens the target's law at the end of the block gives one bonus token.

Given the accepted prefix, the consistent drafts' next tokens are iid from q at that prefix (each
draft's continuation depends only on its own tokens), so a lossless rule keeps every emitted token's
law the target's: the text follows the target whatever the rule. Block efficiency is the mean number of
tokens emitted per target call.

References
----------
Sun et al., SpecTr, NeurIPS 2023 (draft trees verified along consistent drafts); Khisti et al., ICLR
2025, §5 and Table 1 (block efficiency on Dolly with K iid drafts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _budget
from .drafters import draw, progress
from .drafts import SAMPLINGS as _MODELS
from .drafts import make_draft_model, sampling_names
from .errors import InvalidInputError

__all__ = ["BlockResult", "speculative_step", "block_efficiency", "estimate", "SAMPLINGS"]

#: Draft samplings of the first token: the models that are a multinomial draw from the drafter's
#: law (:attr:`~mdtheory.drafts.DraftModel.torch_replacement`).
SAMPLINGS = sampling_names(lambda cls: cls.single_q and cls.torch_replacement is not None)


@dataclass
class BlockResult:
    """Tokens emitted per step by one rule."""

    rule: str
    drafts: int
    length: int
    counts: np.ndarray

    def row(self) -> dict:
        m = self.counts.size
        mean = float(self.counts.mean())
        half = 1.96 * float(self.counts.std(ddof=1)) / np.sqrt(m) if m > 1 else float("inf")
        return {"rule": self.rule, "drafts": self.drafts, "length": self.length,
                "block_efficiency": mean, "ci95": [float(mean - half), float(mean + half)],
                "target_calls": int(m), "tokens": int(self.counts.sum())}


def _laws(law, contexts: list[tuple]) -> dict:
    """law at each distinct context, in one batch."""
    unique = list(dict.fromkeys(contexts))
    rows = law([np.array(c, dtype=np.int64) for c in unique])
    return dict(zip(unique, rows, strict=True))


def _draft(drafter, context: tuple, K: int, L: int, sampling: str, rng) -> tuple[np.ndarray, dict]:
    """K drafts (K, L) from ``context`` and the drafter's law at every prefix it visited."""
    drafts = np.zeros((K, L), dtype=np.int64)
    q = {}
    for d in range(L):
        prefixes = [context + tuple(drafts[k, :d].tolist()) for k in range(K)]
        q.update(_laws(drafter, prefixes))
        rows = np.stack([q[c] for c in prefixes])
        if d == 0 and not _MODELS[sampling].torch_replacement:  # a joint draw, not K independent
            drafts[:, 0] = make_draft_model(rows[0], K, sampling, normalize=True).sample(rng, 1)[0]
        else:
            drafts[:, d] = draw(rows, rng)
    return drafts, q


def speculative_step(target, drafter, context: tuple, rule: str, K: int, L: int, rng,
                     sampling: str = "iid", rule_params: dict | None = None,
                     prepared: dict | None = None,
                     max_seconds: float = _budget.MAX_SECONDS) -> list[int]:
    """One target call of K-draft, L-token speculative decoding; returns the emitted tokens.

    ``prepared``, if given, keeps the rules prepared at each (prefix, number of drafts) for reuse by
    later calls (the laws at a prefix never change); useful where prefixes recur. ``max_seconds``
    limits each rule's estimated preparation (:func:`mdtheory.rules.make_rule`).
    """
    from . import rules  # loaded on use: the rules import scipy, HiGHS and numba

    drafts, q = _draft(drafter, context, K, L, sampling, rng)
    p = _laws(target, [context + tuple(drafts[k, :d].tolist()) for k in range(K) for d in range(L + 1)])
    emitted: list[int] = []
    alive = np.arange(K)
    for d in range(L):
        here = context + tuple(emitted)
        kind = sampling if d == 0 else "iid"
        params = dict(rule_params or {})
        if rule == "optimal" and kind != "iid":
            params["sampling"] = kind
        key = (here, alive.size)
        if prepared is not None and key in prepared:
            r = prepared[key]
        else:
            r = rules.make_rule(rule, p[here], q[here], alive.size, normalize=True,
                                max_seconds=max_seconds, **params)
            if prepared is not None:
                prepared[key] = r
        y, accepted = r.select(drafts[alive, d], rng)
        emitted.append(y)
        alive = alive[drafts[alive, d] == y]
        if not accepted or alive.size == 0:
            return emitted
    end = context + tuple(emitted)
    emitted.append(int(draw(p[end][None, :], rng)[0]))
    return emitted


def _check_sizes(K, L, steps) -> None:
    for name, value in (("drafts", K), ("length", L), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidInputError(f"--{name} must be an integer >= 1, got {value!r}")


def _check_rule(rule: str, sampling: str) -> None:
    if sampling not in SAMPLINGS:
        raise InvalidInputError(f"unknown sampling {sampling!r}; valid choices: {', '.join(SAMPLINGS)}")
    from . import rules  # the rules load scipy, HiGHS and numba: only when a simulation runs

    if rule not in rules.RULES:
        raise InvalidInputError(
            f"unknown selection rule {rule!r}; valid choices: {', '.join(rules.RULES)}")
    expects = rules.RULES[rule].sampling
    if rule in ("optimal", "single") or expects == sampling:  # single: the first draft has law q
        return
    raise InvalidInputError(f"rule {rule!r} expects {expects} drafts, not {sampling}")


def estimate(rule: str, V: int, K: int, L: int, steps: int) -> _budget.Estimate:
    """``steps`` target calls with ``rule``: each drafts K x L tokens (about 2 ms an LSTM call,
    measured with ``lm-pairs``), keeps K (L + 1) target laws and prepares the rule at up to L
    prefixes (:func:`mdtheory._budget.rule_preparation` with K drafts, an upper bound)."""
    from . import rules

    prep = _budget.rule_preparation(
        rule, make_draft_model(np.full(V, 1.0 / V), K, rules.RULES[rule].sampling))
    return _budget.Estimate(
        f"block-efficiency with {rule}: {steps} target calls of K = {K} drafts of L = {L} tokens "
        f"over V = {V}", steps * L * (2 * 2e-3 + prep.seconds), 8.0 * K * (L + 1) * V + prep.bytes)


def block_efficiency(target, drafter, rule: str, K: int, L: int, steps: int, rng,
                     sampling: str = "iid", start: tuple = (), quiet: bool = True,
                     rule_params: dict | None = None,
                     max_seconds: float = _budget.MAX_SECONDS) -> BlockResult:
    """Run ``steps`` target calls of speculative decoding from ``start`` and count tokens per call;
    refused first if :func:`estimate` is over ``max_seconds`` or the memory limit."""
    _check_sizes(K, L, steps)
    _check_rule(rule, sampling)
    _budget.require(estimate(rule, target.V, K, L, steps), max_seconds)
    text = tuple(start)
    counts = np.zeros(steps, dtype=np.int64)
    for i in progress(range(steps), steps, rule, quiet):
        out = speculative_step(target, drafter, text, rule, K, L, rng, sampling, rule_params,
                               max_seconds=max_seconds)
        counts[i] = len(out)
        text = text + tuple(out)
    return BlockResult(rule, K, L, counts)
