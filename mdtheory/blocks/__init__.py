"""Sequence-level (block and tree) speculative verification: small exact instances, the optimum, bounds."""

from .markov import (
    ConstantLaw,
    RandomLaw,
    all_sequences,
    block_law_tv,
    continuation_probs,
    draft_multisets,
    draft_tuples,
    random_instance,
    sequence_probs,
    sun_toy,
)

__all__ = [
    "ConstantLaw",
    "RandomLaw",
    "all_sequences",
    "block_law_tv",
    "continuation_probs",
    "draft_multisets",
    "draft_tuples",
    "random_instance",
    "sequence_probs",
    "sun_toy",
]

from .audit import BlockAuditResult, audit_block  # noqa: E402

__all__ += ["BlockAuditResult", "audit_block"]
