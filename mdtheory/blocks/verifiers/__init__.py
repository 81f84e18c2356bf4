"""Sequence-level verifiers: from K drafts of L tokens to one emitted block, each with its exact law.

One module per verifier behind this face (:mod:`.base`: the interface, the laws' arithmetic and the
exact enumeration; :mod:`.registry`: :data:`VERIFIERS`, :func:`register_verifier`,
:func:`make_verifier`).

A verifier sees the drafts (an int array (K, L)), the target's and the draft's next-token laws at
every node of the draft tree (callables ``law(context) -> (V,)``, contexts relative to the start of
the block), and emits a block B = (b_1..b_{k+1}): b_{1:k} the first k tokens of some draft, b_{k+1}
the correction or bonus token. It is valid (lossless) when B followed by fresh target tokens has the
target's law on V^(L+1) (:func:`mdtheory.blocks.block_law_tv`). Each verifier has two forms:

- ``sample(target, draft, drafts, rng)``: the emitted block, a 1-D int array;
- ``law(target, draft, drafts)``: the emitted block's exact law given the drafts, ``{block: prob}``
  (exact fractions when the laws return :class:`fractions.Fraction` entries, except ``token``,
  whose rules work in floats);

and :meth:`BlockVerifier.block_efficiency` sums ``law`` over every draw of the drafts (small
instances). Both forms compute in floats while every normalising divisor is at least
:data:`FLOAT_FLOOR` and otherwise redo that draft array in exact fractions of the laws' entries, so
that ``law`` sums to one and ``sample`` draws from it even on draft arrays of tiny probability; the
laws are validated as they are read (:func:`mdtheory.blocks.trees.checked_row`). The verifiers
(derivations and proofs in ``papers/blocks_verifiers.md``):

=============  ===========================================================================  ========
name           verifier                                                                     drafts
=============  ===========================================================================  ========
``token``      token by token along the drafts consistent with the accepted prefix, with a  iid/tree
               token-level selection rule of :data:`mdtheory.rules.RULES` at each node
``block``      block verification (Sun et al., ICLR 2025, Algorithm 2) on the first draft  any
``multipath``  multi-path block verification: a token-level rule selects one drafted path  iid
               top-down, then block verification of it against the selection's law
``gbv``        greedy multi-path block verification (Thomas & Pal, 2026): the draft of      iid
               highest p/q ranks, block-verified against its own law
``trie``       block verification over the prefix trie of the drafts: at each node the      iid
               distinct next tokens are tried in order with the residual passed on
``traversal``  traversal verification (Weng et al., NeurIPS 2025): leaf to root over a      tree
               draft tree, residuals passed to the next sibling
=============  ===========================================================================  ========

Where they coincide (proved in the paper, checked in the tests): at K = 1 ``multipath``, ``gbv``,
``trie`` and ``traversal`` are ``block``; at L = 1 ``block`` is single-draft speculative sampling,
``traversal`` on an iid tree is recursive rejection sampling (``token`` with ``rrs``), on a tree
without replacement it is ``token`` with ``rrs-wor``, ``multipath`` with ``rrs`` is ``token`` with
``rrs`` and ``trie`` is recursive rejection sampling over the distinct drafted tokens, without
replacement.
"""

from .base import FLOAT_FLOOR, BlockVerifier, block_efficiency, exact_block_law
from .block import BlockVerification
from .gbv import GreedyMultiPath
from .multipath import SelectedPath
from .registry import VERIFIERS, make_verifier, register_verifier
from .token_by_token import TokenByToken
from .traversal import Traversal
from .trie import PrefixTrie

__all__ = ["BlockVerifier", "TokenByToken", "BlockVerification", "SelectedPath", "GreedyMultiPath",
           "PrefixTrie", "Traversal", "VERIFIERS", "register_verifier", "make_verifier",
           "exact_block_law", "block_efficiency", "FLOAT_FLOOR"]
