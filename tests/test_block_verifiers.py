"""Sequence-level verifiers: exact block efficiencies, losslessness by enumeration, coincidences."""

from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chi2

from mdtheory.blocks import (
    BlockVerification,
    DraftTree,
    MultiPath,
    TokenByToken,
    Traversal,
    block_law_tv,
    draft_tuples,
    exact_block_law,
    iid_drafts,
    make_verifier,
    random_instance,
    sun_toy,
)
from mdtheory.errors import InvalidInputError, ProblemTooLargeError
from tests.tolerances import ROUNDING


def _exact_law(probs):
    row = np.array([Fraction(x) for x in probs], dtype=object)
    return lambda ctx: row


def _toy_fractions():
    return _exact_law(["1/3", "2/3"]), _exact_law(["2/3", "1/3"])


def _verifiers(K, L, V):
    """Every verifier valid for K iid drafts of length L, and with V >= K the verifiers of the tree
    of K distinct first tokens (without replacement) each continued on its own."""
    wor = DraftTree((K,) + (1,) * (L - 1), "wor")
    extra = [Traversal(wor), TokenByToken("rrs-wor", wor)] if V >= K else []
    return [TokenByToken("rrs"), TokenByToken("k-seq"), BlockVerification(), MultiPath(), Traversal(), *extra]


INSTANCES = {"toy": sun_toy,
             **{f"random V={V} seed {s}": (lambda V=V, s=s: random_instance(V, s)) for V in (2, 3)
                for s in range(3)}}


# ------------------------------------------------------------------ Sun et al.'s toy
def test_toy_block_verification_is_20_ninths_exactly():
    p, q = _toy_fractions()
    assert BlockVerification().block_efficiency(p, q, 1, 2) == Fraction(20, 9)


@pytest.mark.parametrize("verifier", [MultiPath(), Traversal(), Traversal(DraftTree((1, 1), "wor"))])
def test_toy_multi_draft_verifiers_are_block_verification_at_one_draft(verifier):
    p, q = _toy_fractions()
    assert verifier.block_efficiency(p, q, 1, 2) == Fraction(20, 9)


@pytest.mark.parametrize("rule", ["single", "rrs", "optimal"])
def test_toy_token_by_token_is_19_ninths(rule):
    p, q = sun_toy()
    assert abs(TokenByToken(rule).block_efficiency(p, q, 1, 2) - 19 / 9) <= ROUNDING


def test_toy_exact_multi_draft_values():
    p, q = _toy_fractions()
    assert MultiPath().block_efficiency(p, q, 2, 2) == Fraction(196, 81)
    assert Traversal().block_efficiency(p, q, 2, 2) == Fraction(65, 27)


# ------------------------------------------------------------------ losslessness by enumeration
@pytest.mark.parametrize("name", list(INSTANCES))
@pytest.mark.parametrize("K,L", [(K, L) for K in (1, 2, 3) for L in (1, 2, 3)])
def test_every_verifier_is_lossless(name, K, L):
    target, draft = INSTANCES[name]()
    V = target(()).size
    if V ** (K * L) > 600:
        pytest.skip(f"{V ** (K * L)} draft tuples: the slow test covers it")
    for verifier in _verifiers(K, L, V):
        law = exact_block_law(verifier, target, draft, K, L)
        assert block_law_tv(law, target, L) <= 1e-12, verifier.label


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_every_verifier_is_lossless_at_V3_K3_L3(seed):
    target, draft = random_instance(3, seed)
    for verifier in [TokenByToken("rrs"), BlockVerification(), MultiPath(), Traversal(),
                     Traversal(DraftTree((3, 1, 1), "wor"))]:
        assert block_law_tv(exact_block_law(verifier, target, draft, 3, 3), target, 3) <= 1e-12


@pytest.mark.parametrize("tree", [DraftTree((2, 2), "iid"), DraftTree((2, 2), "wor"),
                                  DraftTree((3, 1), "wor"), DraftTree((1, 2, 1), "iid"),
                                  pytest.param(DraftTree((2, 1, 2), "wor"), marks=pytest.mark.slow)])
def test_traversal_and_token_level_on_trees_are_lossless(tree):
    target, draft = random_instance(3, 11)
    rule = "rrs-wor" if tree.sampling == "wor" else "rrs"
    for verifier in (Traversal(tree), TokenByToken(rule, tree), TokenByToken("optimal", tree)):
        law = exact_block_law(verifier, target, draft, tree.n, tree.length)
        assert block_law_tv(law, target, tree.length) <= 1e-12, verifier.label


def test_iid_enumeration_matches_the_independent_tuple_enumeration():
    target, draft = random_instance(3, 4)
    mine = {tuple(x.ravel().tolist()): w for x, w in iid_drafts(2, 2).enumerate(draft)}
    drafts, probs = draft_tuples(draft, 2, 2)
    theirs = {tuple(x.ravel().tolist()): w for x, w in zip(drafts, probs, strict=True)}
    assert mine.keys() == theirs.keys()
    assert max(abs(mine[k] - theirs[k]) for k in mine) <= ROUNDING


def test_exact_block_law_by_tuples_agrees_with_the_tree_enumeration():
    target, draft = random_instance(3, 2)
    drafts, probs = draft_tuples(draft, 2, 2)
    for verifier in (MultiPath(), Traversal()):
        by_tuples: dict = {}
        for x, w in zip(drafts, probs, strict=True):
            for b, m in verifier.law(target, draft, x).items():
                by_tuples[b] = by_tuples.get(b, 0.0) + w * m
        by_tree = exact_block_law(verifier, target, draft, 2, 2)
        assert by_tuples.keys() == by_tree.keys()
        assert max(abs(by_tuples[b] - by_tree[b]) for b in by_tree) <= ROUNDING


# ------------------------------------------------------------------ multi-draft beats single-draft block
@pytest.mark.parametrize("name", ["toy", "random V=2 seed 0", "random V=2 seed 1", "random V=3 seed 0",
                                  "random V=3 seed 1", "random V=3 seed 2"])
@pytest.mark.parametrize("K,L", [(2, 1), (2, 2), (3, 1), (2, 3)])
def test_multipath_beats_block_verification(name, K, L):
    target, draft = INSTANCES[name]()
    block = BlockVerification().block_efficiency(target, draft, K, L)
    multi = MultiPath().block_efficiency(target, draft, K, L)
    assert multi > block + 1e-6


# ------------------------------------------------------------------ where the verifiers coincide
@pytest.mark.parametrize("seed", range(4))
def test_at_one_draft_every_block_verifier_has_block_verifications_law(seed):
    target, draft = random_instance(3, seed)
    rng = np.random.default_rng(seed)
    for _ in range(5):
        x = iid_drafts(1, 3).sample(draft, rng)
        want = BlockVerification().law(target, draft, x)
        for verifier in (MultiPath(), Traversal(), Traversal(DraftTree((1, 1, 1), "wor"))):
            got = verifier.law(target, draft, x)
            assert min(got.values()) >= 0
            assert max(abs(got.get(b, 0) - want.get(b, 0)) for b in {*got, *want}) <= ROUNDING


@pytest.mark.parametrize("seed", range(3))
def test_at_length_one_the_block_verifiers_are_token_level_rules(seed):
    target, draft = random_instance(4, seed)
    assert abs(BlockVerification().block_efficiency(target, draft, 1, 1)
               - 1 - np.minimum(target(()), draft(())).sum()) <= ROUNDING
    for K in (2, 3):
        rrs = TokenByToken("rrs").block_efficiency(target, draft, K, 1)
        assert abs(Traversal().block_efficiency(target, draft, K, 1) - rrs) <= ROUNDING
        wor = DraftTree((K,), "wor")
        assert abs(Traversal(wor).block_efficiency(target, draft, K, 1)
                   - TokenByToken("rrs-wor", wor).block_efficiency(target, draft, K, 1)) <= ROUNDING


# ------------------------------------------------------------------ the sample form follows the law form
@pytest.mark.parametrize("verifier", [BlockVerification(), MultiPath(), Traversal(DraftTree((2, 2), "wor")),
                                      TokenByToken("rrs-wor", DraftTree((2, 2), "wor")),
                                      TokenByToken("rrs")])
def test_samples_follow_the_exact_law(verifier):
    target, draft = random_instance(3, 5)
    rng = np.random.default_rng(7)
    model = verifier.draft_model(4, 2) if verifier.tree is not None else iid_drafts(3, 2)
    x = model.sample(draft, rng)
    law = verifier.law(target, draft, x)
    N = 4000
    counts: dict = {}
    for _ in range(N):
        b = tuple(verifier.sample(target, draft, x, rng).tolist())
        counts[b] = counts.get(b, 0) + 1
    assert set(counts) <= set(law)
    stat = sum((counts.get(b, 0) - N * w) ** 2 / (N * w) for b, w in law.items())
    assert stat <= chi2.ppf(1 - 1e-6, max(len(law) - 1, 1))


# ------------------------------------------------------------------ bad input
def test_bad_input_is_refused_with_a_named_error():
    target, draft = random_instance(3, 0)
    with pytest.raises(InvalidInputError, match="unknown verifier"):
        make_verifier("nope")
    with pytest.raises(InvalidInputError, match="outside"):
        BlockVerification().law(target, draft, np.array([[0, 5]]))
    with pytest.raises(InvalidInputError, match="int array"):
        MultiPath().law(target, draft, np.array([[0.5, 1.0]]))
    with pytest.raises(InvalidInputError, match="laid out"):
        Traversal(DraftTree((1, 2), "iid")).law(target, draft, np.array([[0, 1], [1, 2]]))
    with pytest.raises(InvalidInputError, match="repeat a token"):
        Traversal(DraftTree((2,), "wor")).law(target, draft, np.array([[1], [1]]))
    with pytest.raises(InvalidInputError, match="expects"):
        TokenByToken("rrs", DraftTree((2,), "wor"))
    with pytest.raises(InvalidInputError, match="branching"):
        DraftTree((2, 0))
    with pytest.raises(InvalidInputError, match="positive mass"):
        list(DraftTree((3,), "wor").enumerate(_exact_law(["1/2", "1/2"])))
    with pytest.raises(InvalidInputError, match="tree"):
        Traversal(DraftTree((2, 2), "iid")).block_efficiency(target, draft, 2, 2)
    with pytest.raises(ProblemTooLargeError, match="draws"):
        exact_block_law(MultiPath(), target, draft, 4, 4)
