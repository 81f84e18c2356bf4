"""Draft trees in the exact block optimum and the upper bound (mdtheory.blocks.prefixsets, optimum,
bound) against independent routes: the tree's enumerated draws, the K-iid-drafts LP, alpha* without
replacement at L = 1, and the verifiers that run on trees."""

from __future__ import annotations

import numpy as np
import pytest

import mdtheory as md
from mdtheory.blocks import make_verifier
from mdtheory.blocks.bound import block_efficiency_bound
from mdtheory.blocks.markov import ConstantLaw, block_law_tv, random_instance, sun_toy
from mdtheory.blocks.optimum import tree_estimate
from mdtheory.blocks.prefixsets import prefix_presence, prefix_set_law, wor_inclusion
from mdtheory.blocks.trees import DraftTree, iid_drafts, tree_samplings
from mdtheory.certify import CERT_TOL
from mdtheory.errors import InvalidInputError, ProblemTooLargeError
from tests.tolerances import ROUNDING, SOLVER

TREES = [(2, 2), (3, 1), (2, 1, 1), (1, 2), (2, 1)]


def _enumerated_prefix_sets(draft, tree):
    law: dict = {}
    for drafts, prob in tree.enumerate(draft):
        key = frozenset(map(tuple, drafts.tolist()))
        law[key] = law.get(key, 0.0) + prob
    return law


@pytest.mark.parametrize("sampling", tree_samplings())
@pytest.mark.parametrize("branching", TREES)
def test_prefix_set_law_is_the_law_of_the_enumerated_draws(branching, sampling):
    _, draft = random_instance(3, 2, concentration=0.8)
    tree = DraftTree(branching, sampling)
    law = prefix_set_law(draft, tree, 3)
    ref = _enumerated_prefix_sets(draft, tree)
    assert set(law) == set(ref)
    assert max(abs(law[k] - ref[k]) for k in ref) <= ROUNDING
    assert sum(law.values()) == pytest.approx(1.0, abs=ROUNDING)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("K", "L"), [(2, 2), (3, 2), (2, 3), (4, 1)])
def test_iid_chain_tree_is_the_k_iid_drafts_optimum(K, L, seed):
    """Branching (K, 1, ..., 1) with iid children is K iid drafts: the prefix-set LP and the
    multiset LP (two supports, two LPs) give the same optimum."""
    target, draft = random_instance(3, seed, concentration=0.8)
    by_multisets = md.optimal_block_efficiency(target, draft, n=K, length=L)
    by_tree = md.optimal_block_efficiency(target, draft, tree=iid_drafts(K, L))
    assert by_tree.success and by_tree.tree == iid_drafts(K, L)
    assert by_tree.value == pytest.approx(by_multisets.value, abs=SOLVER)
    assert by_tree.acceptance == pytest.approx(by_multisets.acceptance, abs=SOLVER)
    assert by_tree.lp["multisets"] <= by_multisets.lp["multisets"]


@pytest.mark.parametrize("sampling", tree_samplings())
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("V", "K"), [(3, 2), (4, 2), (4, 3), (5, 2)])
def test_one_level_tree_is_one_plus_alpha_star(V, K, seed, sampling):
    """One level of K children: the block is a token of the token-level optimum and a bonus token."""
    target, draft = random_instance(V, seed, concentration=0.7)
    res = md.optimal_block_efficiency(target, draft, tree=DraftTree((K,), sampling))
    alpha = md.optimal_acceptance(target(()), draft(()), K, sampling=sampling).value
    assert res.value == pytest.approx(1 + alpha, abs=SOLVER)


def _tree_verifiers(tree):
    from mdtheory.rules import RULES

    rules = [r for r in ("rrs", "rrs-wor", "optimal") if RULES[r].sampling == tree.sampling or r == "optimal"]
    tokens = [make_verifier("token", rule=r, tree=tree) for r in rules]
    drawn = tree.sampling in ("iid", "without-replacement")  # traversal: children drawn from q
    return ([make_verifier("traversal", tree=tree)] if drawn else []) + tokens


@pytest.mark.parametrize("sampling", tree_samplings())
@pytest.mark.parametrize("branching", [(2, 2), (3, 1), (2, 1, 1), (1, 2)])
@pytest.mark.parametrize("instance", ["toy", "rand0", "rand1"])
def test_tree_verifiers_are_at_most_the_tree_optimum_and_the_bound_above_it(instance, branching, sampling):
    target, draft = sun_toy() if instance == "toy" else random_instance(3, int(instance[-1]), 0.8)
    V = target(()).size
    tree = DraftTree(branching, sampling)
    if tree.distinct and max(branching) > V:
        with pytest.raises(InvalidInputError, match="children without replacement|top tokens"):
            md.optimal_block_efficiency(target, draft, tree=tree)
        return
    res = md.optimal_block_efficiency(target, draft, tree=tree)
    assert res.success and res.validity_tv <= CERT_TOL and abs(res.certificate_gap) <= CERT_TOL
    assert 1 - SOLVER <= res.value <= 1 + tree.length + SOLVER
    for verifier in _tree_verifiers(tree):
        assert float(verifier.block_efficiency(target, draft, tree.n, tree.length)) <= res.value + SOLVER
    bound = block_efficiency_bound(target, draft, tree=tree)
    assert bound.complete and bound.value >= res.value - SOLVER


def test_tree_plan_is_a_valid_verifier_of_the_enumerated_draws():
    """Give each tree draw the conditional law of its prefix set's row: the block law rebuilt from
    the tree's own enumeration is the result's, valid, and every block starts at a node of the draw."""
    target, draft = random_instance(3, 5, concentration=0.8)
    tree = DraftTree((2, 2), "iid")
    res = md.optimal_block_efficiency(target, draft, tree=tree)
    index = {frozenset(map(tuple, X)): i for i, X in enumerate(res.support.tolist())}
    plan = res.plan.toarray()
    law: dict = {}
    for drafts, prob in tree.enumerate(draft):
        i = index[frozenset(map(tuple, drafts.tolist()))]
        for j in np.nonzero(plan[i])[0]:
            b = res.blocks[j]
            assert any(tuple(x[:len(b) - 1]) == b[:-1] for x in drafts.tolist())
            law[b] = law.get(b, 0.0) + prob * plan[i, j] / res.support_probs[i]
    assert block_law_tv(law, target, 2) <= CERT_TOL
    assert sum(len(b) * m for b, m in law.items()) == pytest.approx(res.value, abs=SOLVER)


@pytest.mark.parametrize("sampling", ["iid", "without-replacement"])
def test_tree_optimum_grows_with_the_tree(sampling):
    """A tree's first child at every node is a draw of any tree with smaller branching factors (its
    law is the node's q under either rule), so a larger tree allows a superset of blocks: the optimum
    is monotone, and (1, 1) is one draft (K = 1)."""
    target, draft = random_instance(3, 3, concentration=0.8)
    value = {b: md.optimal_block_efficiency(target, draft, tree=DraftTree(b, sampling)).value
             for b in [(1, 1), (2, 1), (1, 2), (2, 2), (3, 2)]}
    assert value[(1, 1)] == pytest.approx(md.optimal_block_efficiency(target, draft, n=1, length=2).value,
                                          abs=SOLVER)
    for small, large in [((1, 1), (2, 1)), ((1, 1), (1, 2)), ((2, 1), (2, 2)), ((1, 2), (2, 2)),
                         ((2, 2), (3, 2))]:
        assert value[small] <= value[large] + SOLVER


def test_tree_results_are_json_ready():
    import json

    tree = DraftTree((2, 1), "without-replacement")
    res = md.optimal_block_efficiency(*sun_toy(), tree=tree)
    bound = block_efficiency_bound(*sun_toy(), tree=tree)
    for out in (json.loads(json.dumps(res.to_dict())), json.loads(json.dumps(bound.to_dict()))):
        assert out["tree"] == {"branching": [2, 1], "sampling": "without-replacement"}
    plain = md.optimal_block_efficiency(*sun_toy(), n=1, length=1).to_dict()
    assert json.loads(json.dumps(plain))["tree"] is None


@pytest.mark.parametrize("branching", [(2, 2), (2, 1, 1), (3, 1)])
def test_sparse_laws_on_trees_are_proven(branching):
    """Dirichlet(0.1) laws (masses down to 1e-38; q = (0.988, 3.6e-27, 0.0117) at one root): the
    prefix-set law sums to one (the mass left after some draws without replacement is summed, not
    taken as 1 minus a near-one), and every tree optimum is proven, most through the dual LP."""
    for sampling in ("iid", "without-replacement"):
        tree = DraftTree(branching, sampling)
        for seed in range(0, 20, 4):
            target, draft = random_instance(3, seed, concentration=0.1)
            assert sum(prefix_set_law(draft, tree, 3).values()) == pytest.approx(1.0, abs=ROUNDING)
            res = md.optimal_block_efficiency(target, draft, tree=tree)
            assert res.success and abs(res.certificate_gap) <= CERT_TOL and res.validity_tv <= CERT_TOL
            bound = block_efficiency_bound(target, draft, tree=tree)
            assert bound.value >= res.value - SOLVER


@pytest.mark.parametrize("seed", [0, 2, 12])
def test_tree_enumeration_without_replacement_sums_to_one_on_sparse_laws(seed):
    """The root laws hold all but 1e-12 (seeds 0, 2) or 1e-27 (seed 12) of their mass on two tokens;
    three children without replacement must still be a law."""
    _, draft = random_instance(3, seed, concentration=0.1)
    tree = DraftTree((3, 1), "without-replacement")
    assert sum(p for _, p in tree.enumerate(draft)) == pytest.approx(1.0, abs=ROUNDING)
    assert sum(prefix_set_law(draft, tree, 3).values()) == pytest.approx(1.0, abs=ROUNDING)


def test_wor_inclusion_without_cancellation():
    """Two draws from q = (1 - 1e-13 - 1e-27, 1e-13, 1e-27): the chance of the last token is
    q_2 (1 + q_0 / (q_1 + q_2) + q_1 / (q_0 + q_2)), about 1e-14. With 1 - q_0 taken by subtraction
    (1 - fl(1 - 1e-13) misses 1e-13 by 1e-3 relative) it would be off by 1e-3; the masses left are
    summed instead. Reference: exact fractions of the same floats."""
    from fractions import Fraction

    q = np.array([1 - 1e-13 - 1e-27, 1e-13, 1e-27])
    f = [Fraction(float(x)) for x in q]
    total = sum(f)
    ref = sum(f[a] * f[c] / (total - f[a]) for a in range(3) for c in range(3) if a != c and 2 in (a, c))
    exact, is_exact = wor_inclusion(q, 2)
    assert is_exact and exact[2] == pytest.approx(float(ref / total), rel=1e-12, abs=0)


def test_tree_input_is_checked():
    target, draft = sun_toy()
    with pytest.raises(InvalidInputError, match="does not match"):
        md.optimal_block_efficiency(target, draft, n=3, tree=DraftTree((2, 2)))
    with pytest.raises(InvalidInputError, match="DraftTree"):
        md.optimal_block_efficiency(target, draft, tree=(2, 2))
    with pytest.raises(InvalidInputError, match="give n and length"):
        md.optimal_block_efficiency(target, draft, n=2)
    with pytest.raises(InvalidInputError, match="does not match"):
        block_efficiency_bound(target, draft, 2, 3, tree=DraftTree((2, 2)))


@pytest.mark.parametrize("sampling", ["iid", "without-replacement"])
@pytest.mark.parametrize("branching", [(2, 2), (3, 1), (2, 1, 1), (3, 2), (2, 2, 1), (4,)])
def test_prefix_set_count_bounds_the_law(branching, sampling):
    """The estimate's count of prefix sets is an upper bound on those drawn (and exact here: every
    law has full support, V = 3)."""
    from mdtheory.blocks.prefixsets import count_prefix_sets

    tree = DraftTree(branching, sampling)
    if sampling == "without-replacement" and max(branching) > 3:
        assert count_prefix_sets(3, tree)[0] == -np.inf
        return
    _, draft = random_instance(3, 0, concentration=0.8)
    drawn = len(prefix_set_law(draft, tree, 3))
    assert drawn <= np.exp(count_prefix_sets(3, tree)[0]) * (1 + ROUNDING)
    if branching != (3, 2):
        assert round(float(np.exp(count_prefix_sets(3, tree)[0]))) == drawn


def test_large_trees_are_refused_by_estimate():
    target, draft = random_instance(4, 0)
    with pytest.raises(ProblemTooLargeError, match="prefix sets"):
        md.optimal_block_efficiency(target, draft, tree=DraftTree((4, 4, 4), "iid"))
    assert tree_estimate(3, DraftTree((2, 2), "iid")).seconds < 1
    assert tree_estimate(465, DraftTree((8, 1, 1, 1), "without-replacement")).seconds == float("inf")


# --- the bound's cap for trees ---------------------------------------------------------------------

@pytest.mark.parametrize("sampling", tree_samplings())
@pytest.mark.parametrize("branching", [(2, 2), (3, 1), (2, 1, 1), (1, 2), (2, 2, 1)])
def test_prefix_presence_is_the_probability_that_a_path_has_the_prefix(branching, sampling):
    """P(some path starts with y) from the closed forms against the enumerated prefix sets."""
    _, draft = random_instance(3, 1, concentration=0.8)
    tree = DraftTree(branching, sampling)
    law = prefix_set_law(draft, tree, 3)
    for m in range(1, tree.length + 1):
        for y in np.ndindex(*(3,) * m):
            exact = sum(w for S, w in law.items() if any(s[:m] == y for s in S))
            if not tree.distinct:
                steps = [draft(y[:d])[y[d]] for d in range(m)]
            else:
                steps = [tree.inclusion(draft(y[:d]), tree.branching[d])[0][y[d]] for d in range(m)]
            assert float(prefix_presence(tree, steps)) == pytest.approx(exact, abs=ROUNDING)


@pytest.mark.parametrize("b", [3, 4, 5])
def test_wor_inclusion_upper_bound_is_above_the_exact_inclusion(b):
    rng = np.random.default_rng(b)
    for _ in range(20):
        q = rng.dirichlet(np.full(7, 0.5))
        exact, is_exact = wor_inclusion(q, b)
        upper, is_upper = wor_inclusion(q, b, max_orders=0)
        assert is_exact and not is_upper
        assert exact.sum() == pytest.approx(b, abs=ROUNDING)
        assert np.all(upper >= exact - ROUNDING) and np.all(upper <= 1)


def test_wor_inclusion_closed_form_for_two():
    q = np.array([0.5, 0.3, 0.2])
    exact, _ = wor_inclusion(q, 2)
    ref = [sum(q[a] * q[c] / (1 - q[a]) for a in range(3) for c in range(3) if a != c and y in (a, c))
           for y in range(3)]
    assert exact == pytest.approx(ref, abs=ROUNDING)


@pytest.mark.parametrize("seed", range(3))
def test_bound_on_a_chain_tree_is_the_k_iid_bound(seed):
    target, draft = random_instance(3, seed, concentration=0.8)
    for K, L in ((2, 2), (3, 3)):
        a = block_efficiency_bound(target, draft, K, L)
        b = block_efficiency_bound(target, draft, tree=iid_drafts(K, L))
        assert a.value == pytest.approx(b.value, abs=ROUNDING)


def test_one_draft_chain_tree_without_replacement_is_block_verification():
    """A tree of branching (1, ..., 1) is one draft whatever its rule: the bound is the optimum."""
    target, draft = random_instance(3, 4, concentration=0.8)
    opt = md.optimal_block_efficiency(target, draft, n=1, length=3).value
    for sampling in ("iid", "without-replacement"):
        tree = DraftTree((1, 1, 1), sampling)
        assert md.optimal_block_efficiency(target, draft, tree=tree).value == pytest.approx(opt, abs=SOLVER)
        assert block_efficiency_bound(target, draft, tree=tree).value == pytest.approx(opt, abs=SOLVER)


def test_tree_bound_partial_trees_are_valid():
    target, draft = random_instance(3, 2, concentration=0.8)
    for sampling in ("iid", "without-replacement"):
        tree = DraftTree((2, 1, 1), sampling)
        opt = md.optimal_block_efficiency(target, draft, tree=tree).value
        full = block_efficiency_bound(target, draft, tree=tree)
        for expansions in (1, 2, 4, 7):
            part = block_efficiency_bound(target, draft, tree=tree, expansions=expansions, batch=2)
            assert part.value >= full.value - ROUNDING >= opt - SOLVER


def test_constant_law_tree_optimum_is_exact_on_identical_laws():
    law = ConstantLaw([0.2, 0.5, 0.3])
    res = md.optimal_block_efficiency(law, law, tree=DraftTree((2, 1), "without-replacement"))
    assert res.value == pytest.approx(3.0, abs=SOLVER)


def test_cli_prints_the_tree_optimum_beside_the_tree_verifiers(capsys):
    import json

    from mdtheory.blocks.markov import random_instance as instance
    from tests.cli_helpers import run_main

    code, out, err = run_main(capsys, "block-efficiency", "--instance", "random:3:0", "--tree", "2,2",
                              "--sampling", "without-replacement", "--verifier", "traversal,token",
                              "--rules", "optimal", "--optimum", "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    target, draft = instance(3, 0)
    best = md.optimal_block_efficiency(target, draft, tree=DraftTree((2, 2), "without-replacement")).value
    assert len(rows) == 2 and all(abs(r["optimum"] - best) <= SOLVER for r in rows)
    assert all(r["block_efficiency"] <= best + SOLVER for r in rows)


# --- deterministic (top) trees ----------------------------------------------------------------------

@pytest.mark.parametrize("branching", [(2, 2), (3, 1), (1, 2, 2), (2,)])
@pytest.mark.parametrize("seed", range(3))
def test_a_top_tree_has_one_draw_and_its_optimum_is_one_plus_the_paths_target_mass(branching, seed):
    """Each node's children are the draft's most likely tokens (one draw of probability one); no
    lossless verifier emits more than 1 + sum over the tree's nodes of p(path to the node), which
    the LP attains, token-by-token verification with the optimal rule attains, and the bound meets."""
    target, draft = random_instance(4, seed, concentration=0.7)
    tree = DraftTree(branching, "top")
    (drafts, prob), = list(tree.enumerate(draft))
    assert prob == 1 and (tree.sample(draft, np.random.default_rng(seed)) == drafts).all()
    for d in range(tree.length):  # every node's children are the draft's top tokens there
        for s in tree.nodes(d):
            q = draft(tuple(drafts[s, :d]))
            kids = [int(drafts[lo, d]) for lo, _ in tree.children_rows(d, s)]
            assert kids == sorted(range(q.size), key=lambda y: -q[y])[:len(kids)]
    nodes = {tuple(row[:m]) for row in drafts.tolist() for m in range(1, tree.length + 1)}
    reach = 1 + sum(float(np.prod([target(path[:i])[path[i]] for i in range(len(path))]))
                    for path in nodes)
    res = md.optimal_block_efficiency(target, draft, tree=tree)
    assert res.success and res.value == pytest.approx(reach, abs=SOLVER)
    law = md.blocks.exact_block_law(make_verifier("token", rule="optimal", tree=tree), target, draft,
                                    tree.n, tree.length)
    assert block_law_tv(law, target, tree.length) <= ROUNDING
    assert sum(len(b) * w for b, w in law.items()) == pytest.approx(reach, abs=ROUNDING)
    assert block_efficiency_bound(target, draft, tree=tree).value == pytest.approx(reach, abs=ROUNDING)


def test_top_children_need_no_mass_and_verifiers_of_drawn_children_refuse_them():
    """Ties break toward the lower token index; a token of mass 0 is a child once the others run
    out; traversal and the first-draft rule read the children as draws from q and refuse."""
    tree = DraftTree((3,), "top")
    (drafts, _), = list(tree.enumerate(ConstantLaw([0.5, 0.0, 0.25, 0.25])))
    assert drafts[:, 0].tolist() == [0, 2, 3]
    (drafts, _), = list(tree.enumerate(ConstantLaw([0.0, 1.0, 0.0, 0.0])))
    assert drafts[:, 0].tolist() == [1, 0, 2]
    with pytest.raises(InvalidInputError, match="traversal verifies trees of iid or without-replacement"):
        make_verifier("traversal", tree=tree)
    with pytest.raises(InvalidInputError, match="expects iid drafts, not top"):
        make_verifier("token", rule="single", tree=tree)
    with pytest.raises(InvalidInputError, match="drafts repeat a token among siblings"):
        tree.check_drafts(np.array([[0], [0], [1]]))
    with pytest.raises(InvalidInputError, match="unknown tree sampling 'greedy'"):
        DraftTree((2,), "greedy")
