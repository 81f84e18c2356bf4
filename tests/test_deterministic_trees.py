"""Deterministic draft trees: the most any lossless verifier keeps is 1 + sum of p(path), target-only
verification attains it, and best-first search finds the best tree of N nodes."""

from fractions import Fraction
from itertools import combinations, product

import numpy as np
import pytest
import torch

from mdtheory.blocks import DraftTree, block_law_tv, optimal_block_efficiency, random_instance, sun_toy
from mdtheory.blocks.deterministic import (
    DeterministicTree,
    best_first_tree,
    deterministic_trees,
    simulate_best_first,
    target_only_block,
    target_only_law,
)
from mdtheory.engines import VERIFIERS
from mdtheory.errors import InvalidInputError
from tests.engine_reference import deterministic_tensors, stratified_pvalue

INSTANCES = {"toy": sun_toy(), "r3": random_instance(3, seed=1), "r4": random_instance(4, seed=2)}


def _exact(probs):
    row = np.array([Fraction(x) for x in probs], dtype=object)
    return lambda ctx: row


@pytest.mark.parametrize("inst", sorted(INSTANCES))
@pytest.mark.parametrize("branching", [(1,), (2,), (2, 1), (1, 2), (2, 2), (1, 1, 2)])
def test_the_lp_optimum_of_a_top_tree_is_one_plus_the_path_masses(inst, branching):
    # the exact optimum over every lossless verifier (the prefix-set LP, an independent formulation)
    # equals the bound, and target-only verification keeps exactly that
    target, draft = INSTANCES[inst]
    tree = DraftTree(branching, "top")
    if max(branching) > np.asarray(draft(())).size:
        pytest.skip("more children than tokens")
    (drafts, _), = list(tree.enumerate(draft))
    det = DeterministicTree.from_drafts(drafts)
    bound = det.value(target)
    assert optimal_block_efficiency(target, draft, tree=tree).value == pytest.approx(bound, abs=1e-12)
    law = VERIFIERS["target-only"].stops(*deterministic_tensors(det, target))
    assert float(law.block_efficiency()[0]) == pytest.approx(bound, abs=1e-13)


def test_target_only_attains_the_bound_on_best_first_trees_exactly():
    target, draft = random_instance(4, seed=7)
    for nodes in (1, 3, 6, 10):
        for law in (target, draft):
            tree = best_first_tree(law, nodes, 3)
            ref = target_only_law(target, tree)
            assert block_law_tv(ref, target, 3) < 1e-14  # lossless
            assert sum(len(b) * w for b, w in ref.items()) == pytest.approx(tree.value(target), abs=1e-13)
            stops = VERIFIERS["target-only"].stops(*deterministic_tensors(tree, target))
            assert float(stops.block_efficiency()[0]) == pytest.approx(tree.value(target), abs=1e-13)


def test_the_value_is_exact_in_fractions():
    p = _exact([Fraction(1, 3), Fraction(2, 3)])
    tree = DeterministicTree([(1,), (0,), (1, 1)])
    assert tree.value(p) == 1 + Fraction(2, 3) + Fraction(1, 3) + Fraction(4, 9)


def _all_trees(V, L, N):
    """Every prefix-closed set of N paths of at most L tokens over V tokens."""
    paths = [x for d in range(1, L + 1) for x in product(range(V), repeat=d)]
    for pick in combinations(paths, N):
        chosen = set(pick)
        if all(len(x) == 1 or x[:-1] in chosen for x in chosen):
            yield DeterministicTree(sorted(chosen, key=len))


@pytest.mark.parametrize("inst", ["toy", "r3"])
def test_best_first_is_the_best_tree_of_n_nodes(inst):
    target, draft = INSTANCES[inst]
    V = np.asarray(target(())).size
    for N in (1, 2, 3, 4):
        best = max(t.value(target) for t in _all_trees(V, 2, N))
        r = deterministic_trees(target, draft, N, 2)
        assert r.best_value == pytest.approx(best, abs=1e-14)
        assert r.draft_value <= r.best_value + 1e-15
        assert r.best_tree.nodes == r.draft_tree.nodes == N


def test_best_first_respects_the_depth_and_reads_each_law_once_per_node():
    calls = []
    target, _ = random_instance(3, seed=3)

    def counted(ctx):
        calls.append(ctx)
        return target(ctx)

    tree = best_first_tree(counted, 7, 2)
    assert tree.length <= 2 and tree.nodes == 7
    assert len(calls) == len(set(calls)) == 1 + sum(len(x) < 2 for x in tree.paths)


def test_refusals():
    with pytest.raises(InvalidInputError, match="prefix"):
        DeterministicTree([(0, 1)])
    with pytest.raises(InvalidInputError, match="nodes"):
        best_first_tree(sun_toy()[0], 0, 2)
    with pytest.raises(InvalidInputError, match="length"):
        deterministic_trees(*sun_toy(), 2, 0)
    with pytest.raises(InvalidInputError, match="token ids"):
        DeterministicTree([(-1,)])


def test_tensors_of_a_tree_are_valid_in_the_contract():
    from mdtheory.engines.contracts import check_tree_inputs

    tree = best_first_tree(random_instance(3, seed=0)[1], 5, 3)
    t = deterministic_tensors(tree, random_instance(3, seed=0)[0])
    check_tree_inputs(*t, torch.Generator())


def test_target_only_blocks_follow_the_exact_law_and_the_simulation_its_values():
    target, draft = random_instance(3, seed=4)
    tree = best_first_tree(draft, 5, 3)
    rng = np.random.default_rng(0)
    seen = [tuple(target_only_block(target, tree, rng)) for _ in range(20_000)]
    assert stratified_pvalue([(target_only_law(target, tree), seen)]) > 1e-4
    counts, exact = simulate_best_first(target, draft, 5, 3, 4, rng, replicates=2, start=(1,))
    assert counts.shape == exact.shape == (4,) and (counts >= 1).all()
    assert exact[0] == pytest.approx(best_first_tree(draft, 5, 3, (1,)).value(target, (1,)), abs=1e-15)


def test_block_efficiency_prints_the_best_first_trees(capsys):
    import json

    from mdtheory.cli import main

    assert main(["block-efficiency", "--instance", "random:3:1", "-K", "2", "-L", "2", "--verifier", "block",
                 "--best-tree", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    target, draft = random_instance(3, seed=1)
    r = deterministic_trees(target, draft, 4, 2)
    assert [x["rule"] for x in rows] == ["block", "best-first:draft:4", "best-first:target:4"]
    assert rows[1]["block_efficiency"] == pytest.approx(r.draft_value, abs=1e-12)
    assert rows[2]["block_efficiency"] == pytest.approx(r.best_value, abs=1e-12)
    assert rows[2]["validity_tv"] < 1e-12 and rows[1]["nodes"] == 4


def test_standard_and_block_verification_of_a_deterministic_chain_keep_the_bound():
    # a deterministic chain is a deterministic tree: both reach 1 + sum of p(prefix), block
    # verification gains nothing there
    from tests.engine_reference import chain_tensors

    target, draft = random_instance(4, seed=5)
    chains = [(0, 1, 2), (3, 3, 1), (2, 0, 0)]
    x, _, p = chain_tensors(chains, target, draft)
    for name in ("standard", "block"):
        eb = VERIFIERS[name].stops(x, None, p).block_efficiency()
        for b, c in enumerate(chains):
            bound = DeterministicTree.from_drafts(np.array([c])).value(target)
            assert float(eb[b]) == pytest.approx(bound, abs=1e-13)
