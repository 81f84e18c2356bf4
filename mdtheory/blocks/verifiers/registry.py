"""The registry of block verifiers by name: :data:`VERIFIERS`, :func:`register_verifier` and
:func:`make_verifier`. A new verifier is one module (a :class:`~.base.BlockVerifier` subclass with
its declarations) and one entry here, or a :func:`register_verifier` call."""

from __future__ import annotations

from ...errors import InvalidInputError
from ..trees import DraftTree, tree_samplings
from .base import BlockVerifier
from .block import BlockVerification
from .gbv import GreedyMultiPath
from .multipath import SelectedPath
from .token_by_token import TokenByToken
from .traversal import Traversal
from .trie import PrefixTrie

__all__ = ["VERIFIERS", "register_verifier", "make_verifier"]

#: Registry of block verifiers by name (:func:`register_verifier` adds one).
VERIFIERS: dict[str, type[BlockVerifier]] = {
    cls.name: cls for cls in (TokenByToken, BlockVerification, SelectedPath, GreedyMultiPath,
                              PrefixTrie, Traversal)
}

#: The values of :attr:`~.base.BlockVerifier.takes_rule`.
RULE_ROLES = (None, "verify", "select")


def register_verifier(cls: type[BlockVerifier]) -> type[BlockVerifier]:
    """Add a verifier class to :data:`VERIFIERS` under ``cls.name``, so that
    :func:`make_verifier`, the command line's ``block-efficiency --verifier`` and the
    registry-driven tests find it by name. Returns ``cls`` (usable as a decorator).

    Raises
    ------
    InvalidInputError
        ``cls`` is not a :class:`~.base.BlockVerifier` subclass, has no name, a name taken by
        another class, or a declaration outside its documented values.
    """
    if not (isinstance(cls, type) and issubclass(cls, BlockVerifier)) or not cls.name:
        raise InvalidInputError("register_verifier takes a BlockVerifier subclass with a name")
    if VERIFIERS.get(cls.name, cls) is not cls:
        raise InvalidInputError(f"verifier {cls.name!r} is already {VERIFIERS[cls.name].__name__}")
    if cls.takes_rule not in RULE_ROLES:
        raise InvalidInputError(f"verifier {cls.name!r}: takes_rule must be one of {RULE_ROLES}, got "
                                f"{cls.takes_rule!r}")
    if cls.tree_samplings is not None and not set(cls.tree_samplings) <= set(tree_samplings()):
        raise InvalidInputError(f"verifier {cls.name!r}: tree_samplings must be tree samplings of the "
                                f"registry ({', '.join(tree_samplings())}) or None, got "
                                f"{cls.tree_samplings!r}")
    VERIFIERS[cls.name] = cls
    return cls


def make_verifier(name: str, *, rule: str | None = None, tree: DraftTree | None = None,
                  **params) -> BlockVerifier:
    """A verifier by name, for the drafts of ``tree`` (None: K iid drafts), with the selection
    ``rule`` and the rule's keywords where it takes one (default: a rule that runs on the tree's
    drafts, :func:`~.base.default_rule`: ``rrs`` on iid drafts, ``rrs-wor`` without replacement,
    ``optimal`` on top children): what each takes is read off its declarations
    (:meth:`~.base.BlockVerifier.create`), and refused at construction. The built-in verifiers:
    ``token`` (a rule verifies every node; any tree), ``block`` (the first draft; trees whose
    first draft is drawn from q), ``multipath`` (a rule selects the path; K iid drafts), ``gbv``,
    ``trie`` (K iid drafts) and ``traversal`` (iid or without-replacement trees).

    Raises
    ------
    InvalidInputError
        An unknown name (the message lists the registered ones), or what the verifier does not
        take (a tree it does not verify names the registered verifiers that do; a rule that does
        not run on the drafts, the rules that do; a keyword the rule does not take; a ``sampling``
        keyword contradicting the tree's).

    Examples
    --------
    >>> make_verifier("token", rule="optimal", tree=DraftTree((2, 2), "top"))
    TokenByToken('token:optimal[2,2 top]')
    """
    cls = VERIFIERS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise InvalidInputError(f"unknown verifier {name!r}; valid choices: {', '.join(VERIFIERS)}")
    if isinstance(tree, DraftTree) and not cls.verifies(tree):
        others = [other for other, c in VERIFIERS.items() if c.verifies(tree)]
        raise InvalidInputError(f"{cls.refusal(tree)}; for this tree use {' or '.join(others)}")
    return cls.create(rule=rule, tree=tree, **params)
