"""Sequence-level verifiers: exact block efficiencies, losslessness by enumeration, coincidences."""

import json
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chi2

from mdtheory.blocks import (
    VERIFIERS,
    BlockVerification,
    DraftTree,
    PrefixTrie,
    SelectedPath,
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
from tests.block_registry import RULES_FOR, draft_models, variants
from tests.tolerances import ROUNDING, SOLVER

#: Children drawn without replacement (the tree sampling's registry name).
WOR = "without-replacement"


def _exact_law(probs):
    row = np.array([Fraction(x) for x in probs], dtype=object)
    return lambda ctx: row


def _toy_fractions():
    return _exact_law(["1/3", "2/3"]), _exact_law(["2/3", "1/3"])


INSTANCES = {"toy": sun_toy,
             **{f"random V={V} seed {s}": (lambda V=V, s=s: random_instance(V, s)) for V in (2, 3)
                for s in range(3)}}


# ------------------------------------------------------------------ Sun et al.'s toy
def test_toy_block_verification_is_20_ninths_exactly():
    p, q = _toy_fractions()
    assert BlockVerification().block_efficiency(p, q, 1, 2) == Fraction(20, 9)


@pytest.mark.parametrize("verifier", [SelectedPath(), PrefixTrie(), Traversal(),
                                      Traversal(DraftTree((1, 1), WOR))])
def test_toy_multi_draft_verifiers_are_block_verification_at_one_draft(verifier):
    p, q = _toy_fractions()
    assert verifier.block_efficiency(p, q, 1, 2) == Fraction(20, 9)


@pytest.mark.parametrize("rule", ["single", "rrs", "optimal"])
def test_toy_token_by_token_is_19_ninths(rule):
    p, q = sun_toy()
    assert abs(TokenByToken(rule).block_efficiency(p, q, 1, 2) - 19 / 9) <= ROUNDING


def test_toy_exact_multi_draft_values():
    p, q = _toy_fractions()
    assert PrefixTrie().block_efficiency(p, q, 2, 2) == Fraction(196, 81)
    assert SelectedPath().block_efficiency(p, q, 2, 2) == Fraction(977, 405)
    assert Traversal().block_efficiency(p, q, 2, 2) == Fraction(65, 27)


# ------------------------------------------------------------------ losslessness by enumeration
@pytest.mark.parametrize("name", list(INSTANCES))
@pytest.mark.parametrize("K,L", [(K, L) for K in (1, 2, 3) for L in (1, 2, 3)])
def test_every_verifier_is_lossless(name, K, L):
    """Every registered verifier, with every rule it is tested with, on every draft model it
    verifies (tests/block_registry.py), by enumerating every draw of the drafts."""
    target, draft = INSTANCES[name]()
    V = target(()).size
    if V ** (K * L) > 600:
        pytest.skip(f"{V ** (K * L)} draft tuples: the slow test covers it")
    for tree in draft_models(K, L, V):
        for verifier in variants(tree):
            law = exact_block_law(verifier, target, draft, K, L)
            assert block_law_tv(law, target, L) <= 1e-12, (verifier.label, tree)


def test_every_registered_verifier_is_covered():
    """A verifier registered in mdtheory.blocks.VERIFIERS that no draft model of the registry-driven
    tests reaches, or a rule role they do not know, fails here."""
    covered = {v.name for tree in draft_models(2, 2, 3) for v in variants(tree)}
    assert covered == set(VERIFIERS)
    assert {cls.takes_rule for cls in VERIFIERS.values()} <= set(RULES_FOR)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_every_verifier_is_lossless_at_V3_K3_L3(seed):
    target, draft = random_instance(3, seed)
    for tree in draft_models(3, 3, 3):
        for verifier in variants(tree, rules=("rrs", "rrs-wor")):
            assert block_law_tv(exact_block_law(verifier, target, draft, 3, 3), target, 3) <= 1e-12


@pytest.mark.parametrize("tree", [DraftTree((2, 2), "iid"), DraftTree((2, 2), WOR),
                                  DraftTree((3, 1), WOR), DraftTree((1, 2, 1), "iid"),
                                  pytest.param(DraftTree((2, 1, 2), WOR),
                                               marks=pytest.mark.slow)])
def test_traversal_and_token_level_on_trees_are_lossless(tree):
    target, draft = random_instance(3, 11)
    rule = "rrs-wor" if tree.sampling == WOR else "rrs"
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
    for verifier in (SelectedPath(), PrefixTrie(), Traversal()):
        by_tuples: dict = {}
        for x, w in zip(drafts, probs, strict=True):
            for b, m in verifier.law(target, draft, x).items():
                by_tuples[b] = by_tuples.get(b, 0.0) + w * m
        by_tree = exact_block_law(verifier, target, draft, 2, 2)
        assert by_tuples.keys() == by_tree.keys()
        assert max(abs(by_tuples[b] - by_tree[b]) for b in by_tree) <= ROUNDING


# ------------------------------------------------------------------ multi-draft beats single-draft block
def _beat_cases():
    names = ["toy", "random V=2 seed 0", "random V=2 seed 1", "random V=3 seed 0", "random V=3 seed 1",
             "random V=3 seed 2"]
    for name in names:
        for K, L in [(2, 1), (2, 2), (3, 1), (2, 3)]:
            slow = "V=3" in name and K * L > 4  # 729 draft tuples
            yield pytest.param(name, K, L, marks=pytest.mark.slow) if slow else (name, K, L)


@pytest.mark.parametrize("name,K,L", list(_beat_cases()))
def test_multi_draft_block_verifiers_beat_block_verification(name, K, L):
    target, draft = INSTANCES[name]()
    block = BlockVerification().block_efficiency(target, draft, K, L)
    optimal = [SelectedPath("optimal")] if K * L <= 4 else []
    for verifier in (SelectedPath(), *optimal, PrefixTrie(), Traversal()):
        assert verifier.block_efficiency(target, draft, K, L) > block + 1e-6, verifier.label


# ------------------------------------------------------------------ where the verifiers coincide
@pytest.mark.parametrize("seed", range(4))
def test_at_one_draft_every_block_verifier_has_block_verifications_law(seed):
    target, draft = random_instance(3, seed)
    rng = np.random.default_rng(seed)
    for _ in range(5):
        x = iid_drafts(1, 3).sample(draft, rng)
        want = BlockVerification().law(target, draft, x)
        for verifier in (SelectedPath(), SelectedPath("optimal"), PrefixTrie(), Traversal(),
                         Traversal(DraftTree((1, 1, 1), WOR))):
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
        wor = DraftTree((K,), WOR)
        assert abs(Traversal(wor).block_efficiency(target, draft, K, 1)
                   - TokenByToken("rrs-wor", wor).block_efficiency(target, draft, K, 1)) <= ROUNDING


# ------------------------------------------------------------------ the sample form follows the law form
SAMPLED = [(tree, v) for tree in draft_models(3, 2, 3)
           for v in variants(tree, rules=("rrs", "rrs-wor", "optimal"))]


@pytest.mark.parametrize("tree,verifier", SAMPLED, ids=[f"{v.label}-{t.sampling}" for t, v in SAMPLED])
def test_samples_follow_the_exact_law(tree, verifier):
    """Every registered verifier's sampler against its own law on drafts of each draft model."""
    target, draft = random_instance(3, 5)
    rng = np.random.default_rng(7)
    x = tree.sample(draft, rng)
    law = verifier.law(target, draft, x)
    N = 4000
    counts: dict = {}
    for _ in range(N):
        b = tuple(verifier.sample(target, draft, x, rng).tolist())
        counts[b] = counts.get(b, 0) + 1
    assert set(counts) <= set(law)
    stat = sum((counts.get(b, 0) - N * w) ** 2 / (N * w) for b, w in law.items())
    assert stat <= chi2.ppf(1 - 1e-6, max(len(law) - 1, 1))


def test_bad_input_is_refused_with_a_named_error():
    target, draft = random_instance(3, 0)
    with pytest.raises(InvalidInputError, match="unknown verifier"):
        make_verifier("nope")
    with pytest.raises(InvalidInputError, match="outside"):
        BlockVerification().law(target, draft, np.array([[0, 5]]))
    with pytest.raises(InvalidInputError, match="int array"):
        PrefixTrie().law(target, draft, np.array([[0.5, 1.0]]))
    with pytest.raises(InvalidInputError, match="laid out"):
        Traversal(DraftTree((1, 2), "iid")).law(target, draft, np.array([[0, 1], [1, 2]]))
    with pytest.raises(InvalidInputError, match="repeat a token"):
        Traversal(DraftTree((2,), WOR)).law(target, draft, np.array([[1], [1]]))
    with pytest.raises(InvalidInputError, match="expects"):
        TokenByToken("rrs", DraftTree((2,), WOR))
    with pytest.raises(InvalidInputError, match="branching"):
        DraftTree((2, 0))
    with pytest.raises(InvalidInputError, match="positive mass"):
        list(DraftTree((3,), WOR).enumerate(_exact_law(["1/2", "1/2"])))
    with pytest.raises(InvalidInputError, match="tree"):
        Traversal(DraftTree((2, 2), "iid")).block_efficiency(target, draft, 2, 2)
    with pytest.raises(ProblemTooLargeError, match="draws"):
        exact_block_law(PrefixTrie(), target, draft, 4, 4)


# ------------------------------------------------------------------ the simulation along a text
class _BatchMarkov:
    """A law whose next token depends on the last one: called on one context (a sequence of token
    ids) it returns (V,), on a list of contexts (B, V)."""

    def __init__(self, matrix):
        self.matrix = matrix

    def __call__(self, contexts):
        if len(contexts) and np.ndim(contexts[0]) == 0:  # one context
            return self.matrix[int(contexts[-1])]
        return np.stack([self.matrix[int(c[-1])] for c in contexts])


def _markov_pair(V=3, seed=11):
    rng = np.random.default_rng(seed)
    return (_BatchMarkov(rng.dirichlet(np.ones(V), size=V)),
            _BatchMarkov(rng.dirichlet(np.ones(V) * 0.7, size=V)))


@pytest.mark.parametrize("tree", [iid_drafts(2, 2), DraftTree((2, 2), WOR),
                                  DraftTree((2, 1), "iid")])
def test_drafted_trees_have_the_tree_law(tree):
    from mdtheory.blocks import simulation as blockeff

    _, drafter = _markov_pair()
    rng = np.random.default_rng(3)
    law = {tuple(x.ravel().tolist()): w
           for x, w in tree.enumerate(lambda ctx: drafter.matrix[(0, *ctx)[-1]])}
    N = 3000
    counts: dict = {}
    for _ in range(N):
        x, _ = blockeff.draft_tree(drafter, (0,), tree, rng)
        key = tuple(x.ravel().tolist())
        counts[key] = counts.get(key, 0) + 1
    assert set(counts) <= set(law)
    stat = sum((counts.get(k, 0) - N * w) ** 2 / (N * w) for k, w in law.items())
    assert stat <= chi2.ppf(1 - 1e-6, len(law) - 1)


@pytest.mark.parametrize("verifier,tree", [(SelectedPath(), iid_drafts(3, 2)),
                                           (PrefixTrie(), iid_drafts(3, 2)),
                                           (Traversal(DraftTree((2, 2), WOR)),
                                            DraftTree((2, 2), WOR))])
def test_decoding_with_a_verifier_keeps_the_targets_law(verifier, tree):
    """The first two tokens emitted from a fixed context, block after block, follow the target."""
    from mdtheory.blocks import simulation as blockeff

    target, drafter = _markov_pair()
    rng = np.random.default_rng(5)
    counts = np.zeros((3, 3))
    longest = 0
    for _ in range(1500):
        out: list[int] = []
        while len(out) < 2:  # bounded: every step emits at least one token
            out += blockeff.verifier_step(target, drafter, (0, *out), verifier, tree, rng)
        longest = max(longest, len(out))
        counts[out[0], out[1]] += 1
    assert longest > 2
    expected = 1500 * target.matrix[0][:, None] * target.matrix
    stat = ((counts - expected) ** 2 / expected).sum()
    assert stat <= chi2.ppf(1 - 1e-6, 8)


def test_intervals_come_from_replicates_or_batch_means():
    from mdtheory.blocks import simulation as blockeff

    counts = np.arange(40) % 4 + 1
    lo, hi, method = blockeff.block_interval(counts, replicates=4)
    means = counts.reshape(4, 10).mean(axis=1)
    half = 3.182446305284263 * means.std(ddof=1) / 2  # t_{0.975, 3}
    assert method == "replicates" and abs((hi - lo) / 2 - half) <= ROUNDING
    lo, hi, method = blockeff.block_interval(counts, replicates=1)
    batches = counts.reshape(10, 4).mean(axis=1)
    half = 2.2621571627409915 * batches.std(ddof=1) / np.sqrt(10)  # t_{0.975, 9}
    assert method == "batch-means" and abs((hi - lo) / 2 - half) <= ROUNDING
    assert blockeff.block_interval(counts[:5])[2] == "none"


def test_simulate_runs_independent_texts():
    from mdtheory.blocks import simulation as blockeff

    target, drafter = _markov_pair()
    res = blockeff.simulate(target, drafter, SelectedPath(), iid_drafts(2, 2), 60, np.random.default_rng(1),
                            replicates=3, start=(0,))
    row = res.row()
    assert row["replicates"] == 3 and row["interval"] == "replicates" and row["target_calls"] == 60
    texts = res.counts.reshape(3, 20)
    assert not (np.array_equal(texts[0], texts[1]) and np.array_equal(texts[1], texts[2]))
    assert row["block_efficiency"] == res.counts.sum() / 60
    with pytest.raises(InvalidInputError, match="replicates"):
        blockeff.simulate(target, drafter, SelectedPath(), iid_drafts(2, 2), 5, np.random.default_rng(1),
                          replicates=6)


def test_exact_rows_on_the_toy():
    from mdtheory.blocks import simulation as blockeff

    target, draft = blockeff.parse_instance("toy")
    rows = blockeff.exact_rows(target, draft, [BlockVerification(), TokenByToken("single")], iid_drafts(1, 2))
    assert abs(rows[0]["block_efficiency"] - 20 / 9) <= ROUNDING
    assert abs(rows[1]["block_efficiency"] - 19 / 9) <= ROUNDING
    assert max(r["validity_tv"] for r in rows) <= 1e-12
    with pytest.raises(InvalidInputError, match="instance"):
        blockeff.parse_instance("random:3")


# ------------------------------------------------------------------ the block-efficiency command
def _run_cli(argv, capsys):
    from mdtheory.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_exact_rows_on_the_toy(capsys):
    code, out, _ = _run_cli(["block-efficiency", "--instance", "toy", "-n", "1", "-L", "2",
                             "--verifier", "block,token,multipath,trie,traversal", "--rules", "single",
                             "--json"], capsys)
    assert code == 0
    rows = {r["rule"]: r for r in map(json.loads, out.splitlines())}
    assert abs(rows["block"]["block_efficiency"] - 20 / 9) <= ROUNDING
    assert abs(rows["token:single"]["block_efficiency"] - 19 / 9) <= ROUNDING
    for label in ("multipath:rrs", "trie", "traversal"):
        assert abs(rows[label]["block_efficiency"] - 20 / 9) <= ROUNDING
    assert max(r["validity_tv"] for r in rows.values()) <= 1e-12


def test_cli_exact_rows_on_a_tree(capsys):
    code, out, _ = _run_cli(["block-efficiency", "--instance", "random:3:1", "--tree", "2,2",
                             "--sampling", WOR, "--verifier", "traversal,token,block",
                             "--rules", "rrs-wor"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["traversal[2,2", "token:rrs-wor[2,2", "block"]
    assert all("exact" in line for line in lines)


@pytest.mark.parametrize("argv, culprit", [
    (["--instance", "toy", "-n", "2", "-L", "2", "--verifier", "nope"], "nope"),
    (["--instance", "toy", "--tree", "2,2", "-n", "3"], "--drafts"),
    (["--instance", "toy", "--tree", "2,2", "--verifier", "multipath"], "multipath"),
    (["--instance", "toy", "--tree", "2,x"], "tree"),
    (["--instance", "random:3", "-n", "2", "-L", "2"], "--instance"),
    (["--instance", "toy", "-L", "2"], "--drafts"),
    (["--instance", "toy", "-n", "2", "-L", "2", "--verifier", "token", "--rules", "rrs-wor"], "rrs-wor"),
    (["-n", "2", "-L", "2", "--steps", "3", "--replicates", "4"], "--replicates"),
    (["-n", "2", "-L", "2", "--steps", "0"], "--steps"),
])
def test_cli_bad_input_exits_2_with_one_line(argv, culprit, capsys):
    code, _, err = _run_cli(["block-efficiency", *argv], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and culprit in err




@pytest.mark.char_lstm
def test_cli_simulation_rows(capsys):
    code, out, err = _run_cli(["block-efficiency", "-n", "2", "-L", "2", "--verifier", "block,multipath,trie",
                               "--steps", "6", "--replicates", "2", "--json", "--quiet"], capsys)
    assert code == 0 and "equals the target" not in err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["rule"] for r in rows] == ["block", "multipath:rrs", "trie"]
    for r in rows:
        assert r["target_calls"] == 6 and r["replicates"] == 2 and r["interval"] == "replicates"
        assert 6 <= r["tokens"] <= 18 and r["block_efficiency"] == r["tokens"] / 6
        assert r["ci95"][0] <= r["block_efficiency"] <= r["ci95"][1]


@pytest.mark.char_lstm
def test_cli_says_when_the_drafter_is_the_target(capsys):
    code, out, err = _run_cli(["block-efficiency", "-n", "1", "-L", "2", "--verifier", "block",
                               "--steps", "3", "--draft-temperature", "1.0", "--json", "--quiet"], capsys)
    assert code == 0 and "equals the target" in err
    assert json.loads(out.splitlines()[0])["block_efficiency"] == 3.0


def test_cli_optimum_on_a_small_instance(capsys):
    """Sun et al. prove block verification optimal at K = 1: the exact optimum is 20/9 on the toy."""
    from mdtheory import blocks

    code, out, err = _run_cli(["block-efficiency", "--instance", "toy", "-n", "1", "-L", "2",
                               "--verifier", "block", "--optimum", "--json"], capsys)
    if hasattr(blocks, "optimal_block_efficiency"):
        assert code == 0
        assert abs(json.loads(out)["optimum"] - 20 / 9) <= SOLVER
    else:
        assert code == 2 and "optimal_block_efficiency" in err and len(err.strip().splitlines()) == 1


@pytest.mark.char_lstm
@pytest.mark.slow
def test_cli_optimum_bound_beside_the_char_lstm_rows(capsys):
    from mdtheory import blocks

    code, out, err = _run_cli(["block-efficiency", "-n", "2", "-L", "2", "--verifier", "multipath",
                               "--steps", "4", "--optimum", "--json", "--quiet"], capsys)
    if not hasattr(blocks, "block_efficiency_bound"):
        assert code == 2 and "block_efficiency_bound" in err
        return
    assert code == 0
    row = json.loads(out.splitlines()[0])
    assert 1.0 <= row["optimum_bound"] <= 3.0


@pytest.mark.parametrize("name", ["toy", "random V=2 seed 0", "random V=3 seed 1"])
def test_no_verifier_exceeds_the_exact_optimum(name):
    """The LP optimum of K iid drafts (an independent formulation) bounds every valid verifier; at
    K = 1 block verification attains it (Sun et al.)."""
    from mdtheory.blocks import optimal_block_efficiency

    target, draft = INSTANCES[name]()
    for K, L in [(1, 2), (2, 2)]:
        best = optimal_block_efficiency(target, draft, K, L).value
        for verifier in (TokenByToken("optimal"), BlockVerification(), SelectedPath(),
                         SelectedPath("optimal"), PrefixTrie(), Traversal()):
            assert verifier.block_efficiency(target, draft, K, L) <= best + SOLVER, verifier.label
        if K == 1:
            assert abs(BlockVerification().block_efficiency(target, draft, 1, L) - best) <= SOLVER


# --------------------------------------------------------------------------- construction refusals
def test_a_sampling_keyword_contradicting_the_tree_is_refused():
    """The drafts' model is the tree's: sampling='iid' on a top tree would verify other drafts than
    those drawn (a lossy verifier), so it is refused by name; the tree's own sampling is accepted."""
    tree = DraftTree((2,), "top")
    with pytest.raises(InvalidInputError, match="sampling='iid' contradicts the drafts verified, which are "
                                                "top"):
        make_verifier("token", rule="optimal", tree=tree, sampling="iid")
    assert make_verifier("token", rule="optimal", tree=tree, sampling="top").label == "token:optimal[2 top]"


def test_unknown_rule_keywords_are_refused_at_construction():
    with pytest.raises(InvalidInputError, match="rule 'rrs' takes no keyword 'foo'"):
        make_verifier("token", foo=1)
    with pytest.raises(InvalidInputError, match="rule 'optimal' takes no keyword 'bar'; valid keywords: "
                                                "sampling"):
        make_verifier("multipath", rule="optimal", bar=2)


def test_the_default_rule_fits_the_tree_and_a_misfit_names_the_fitting_ones():
    assert make_verifier("token").label == "token:rrs"
    assert make_verifier("token", tree=DraftTree((2,), "top")).label == "token:optimal[2 top]"
    assert make_verifier("token", tree=DraftTree((2,), WOR)).label == f"token:rrs-wor[2 {WOR}]"
    with pytest.raises(InvalidInputError, match="rule 'rrs' expects iid drafts, not top; rules for top "
                                                "drafts: optimal"):
        make_verifier("token", rule="rrs", tree=DraftTree((2,), "top"))


@pytest.mark.parametrize("sampling", ["iid", WOR, "top"])
def test_every_accepted_verifier_estimates_its_run(sampling):
    """An accepted (verifier, tree, rule) runs its estimate: a node offers the rule its children,
    not the tree's K paths (rrs-wor on (2, 2) over V = 3 would need 4 distinct tokens)."""
    from mdtheory import rules

    for branching in [(2,), (2, 1), (2, 2)]:
        tree = DraftTree(branching, sampling)
        built = 0
        for name in VERIFIERS:
            for rule in [None, *rules.RULES]:
                try:
                    v = make_verifier(name, rule=rule, tree=tree)
                except InvalidInputError:
                    continue
                built += 1
                assert v.estimate(3, tree, 10).seconds > 0, v.label
        assert built >= 2, (branching, sampling)  # at least the token and block verifiers
