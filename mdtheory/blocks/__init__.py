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
from .optimum import BlockOptimumResult, dual_bound, lp_size, optimal_block_efficiency

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
    "BlockOptimumResult",
    "dual_bound",
    "lp_size",
    "optimal_block_efficiency",
]
