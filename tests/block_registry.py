"""What the registry-driven block-verifier tests iterate over: every registered verifier
(:data:`mdtheory.blocks.VERIFIERS`) on every draft model it declares it verifies, with the selection
rules it takes.

A verifier registered without reaching any of :func:`draft_models`' trees, or a rule role without
an entry in :data:`RULES_FOR`, fails ``test_every_registered_verifier_is_covered``
(tests/test_block_verifiers.py).
"""

from __future__ import annotations

from mdtheory.blocks import VERIFIERS, DraftTree, iid_drafts, make_verifier, tree_samplings
from mdtheory.blocks.verifiers.base import rule_runs_on

#: The selection rules each rule role is tested with (``takes_rule``: verify at every node, select
#: the path); a rule that does not run on a tree's draft model is left out for that tree.
RULES_FOR = {None: (None,), "verify": ("rrs", "rrs-wor", "k-seq", "optimal"), "select": ("rrs", "optimal")}


def draft_models(K: int, L: int, V: int) -> list[DraftTree]:
    """K iid drafts of L tokens, and (where the alphabet has K tokens) the K drafts whose first
    tokens are drawn by each other tree sampling, each continued on its own."""
    out = [iid_drafts(K, L)]
    out += [DraftTree.chains(K, L, s) for s in tree_samplings() if s != "iid" and K <= V]
    return out


def variants(tree: DraftTree, rules=None) -> list:
    """Every registered verifier of the drafts of ``tree``, one per rule it is tested with
    (``rules``: those alone, where given)."""
    out = []
    for name, cls in VERIFIERS.items():
        if not cls.verifies(tree):
            continue
        for rule in RULES_FOR[cls.takes_rule]:
            if rule is not None and (not rule_runs_on(rule, tree.sampling)
                                     or rules is not None and rule not in rules):
                continue
            out.append(make_verifier(name, rule=rule, tree=None if tree.is_iid_drafts else tree))
    return out
