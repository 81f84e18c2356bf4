"""Sequence-level (block and tree) speculative verification: small exact instances (:mod:`.markov`),
draft trees (:mod:`.trees`, the one drawing), the verifiers (:mod:`.verifiers`, one module each,
registered), the exact optimum and an upper bound at any size, the audit of anyone's block verifier
(:mod:`.audit`) and the block-efficiency simulation on language models (:mod:`.simulation`)."""

from .audit import BlockAuditResult, audit_block
from .bound import BlockBoundResult, block_efficiency_bound, coarse_alpha_bound
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
from .trees import DraftTree, iid_drafts, tree_samplings
from .verifiers import (
    VERIFIERS,
    BlockVerification,
    BlockVerifier,
    GreedyMultiPath,
    PrefixTrie,
    SelectedPath,
    TokenByToken,
    Traversal,
    block_efficiency,
    exact_block_law,
    make_verifier,
    register_verifier,
)

__all__ = [
    "BlockAuditResult",
    "audit_block",
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
    "BlockBoundResult",
    "block_efficiency_bound",
    "coarse_alpha_bound",
    "dual_bound",
    "lp_size",
    "optimal_block_efficiency",
    "tree_samplings",
    "DraftTree",
    "iid_drafts",
    "VERIFIERS",
    "BlockVerification",
    "BlockVerifier",
    "GreedyMultiPath",
    "PrefixTrie",
    "SelectedPath",
    "TokenByToken",
    "Traversal",
    "block_efficiency",
    "exact_block_law",
    "make_verifier",
    "register_verifier",
]
