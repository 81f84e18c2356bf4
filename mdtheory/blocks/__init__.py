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

from .trees import TREE_SAMPLINGS, DraftTree, iid_drafts  # noqa: E402
from .verifiers import (  # noqa: E402
    VERIFIERS,
    BlockVerification,
    BlockVerifier,
    MultiPath,
    TokenByToken,
    Traversal,
    block_efficiency,
    exact_block_law,
    make_verifier,
)

__all__ += ["TREE_SAMPLINGS", "DraftTree", "iid_drafts", "VERIFIERS", "BlockVerification", "BlockVerifier",
            "MultiPath", "TokenByToken", "Traversal", "block_efficiency", "exact_block_law", "make_verifier"]
