"""The verifiers of :mod:`mdtheory.engines`, written in the engines' contracts, by name.

===================== ======== ============== ===========================================================
name                  contract drafts         verifier
===================== ======== ============== ===========================================================
``standard``          chain    any            standard speculative sampling along the chain
``block``             chain    any            block verification (Sun et al., ICLR 2025)
``target-only``       tree     deterministic  one coin over the children's target masses at each node
``traversal``         tree     sampled        traversal verification (Weng et al., NeurIPS 2025)
``tree-optimal``      tree     sampled        token by token, the optimal rule at every node
``chains-optimal``    tree     chains         n chains, token by token, the optimal rule on consistent ones
``gbv``               tree     chains         n chains, greedy multi-path block verification (Thomas & Pal)
``multipath-optimal`` tree     chains         n chains, the optimal rule's candidate selects, then block
===================== ======== ============== ===========================================================

Each entry is a callable in its contract (:mod:`mdtheory.engines.contracts`) with ``.contract``,
``.drafts`` (which drafts it is lossless for: :class:`mdtheory.engines.stops.EngineVerifier`) and
``.exact`` (whether ``.stops`` gives the exact law of its output). :func:`register_verifier` adds one.
"""

from __future__ import annotations

from ..errors import InvalidInputError
from .chain import BlockChain, StandardChain
from .multipath import ChainsOptimal, GreedyChains, SelectedChains
from .stops import EngineVerifier
from .tree import OptimalTree, TargetOnlyTree, TraversalTree

__all__ = ["VERIFIERS", "register_verifier"]

#: Verifier instances by name.
VERIFIERS: dict[str, EngineVerifier] = {}


def register_verifier(verifier: EngineVerifier) -> EngineVerifier:
    """Add ``verifier`` (an :class:`~mdtheory.engines.stops.EngineVerifier` with a new name, a
    contract of :data:`mdtheory.engines.contracts.CONTRACTS` and its drafts) to :data:`VERIFIERS`."""
    from .contracts import CONTRACTS

    if not isinstance(verifier, EngineVerifier):
        raise InvalidInputError(f"an engine verifier must be an EngineVerifier, got "
                                f"{type(verifier).__name__}")
    if not verifier.name or verifier.name in VERIFIERS:
        raise InvalidInputError(f"engine verifier name {verifier.name!r} is empty or taken")
    if verifier.contract not in CONTRACTS:
        raise InvalidInputError(f"engine verifier {verifier.name!r}: contract {verifier.contract!r} is "
                                f"not one of {', '.join(CONTRACTS)}")
    if verifier.drafts not in ("any", "sampled", "deterministic", "chains"):
        raise InvalidInputError(f"engine verifier {verifier.name!r}: unknown drafts {verifier.drafts!r}")
    VERIFIERS[verifier.name] = verifier
    return verifier


for _v in (StandardChain(), BlockChain(), TargetOnlyTree(), TraversalTree(), OptimalTree(), ChainsOptimal(),
           GreedyChains(), SelectedChains()):
    register_verifier(_v)
