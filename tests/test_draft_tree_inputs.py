"""DraftTree's public methods on bad and extreme input: named errors, no silent acceptance, nothing
allocated for a tree beyond any estimate."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from mdtheory.blocks.markov import ConstantLaw
from mdtheory.blocks.trees import MAX_TREE_PATHS, DraftTree, tree_samplings
from mdtheory.errors import InvalidDistributionError, InvalidInputError
from mdtheory.models.base import COUNT_CAP


@pytest.mark.parametrize("sampling", tree_samplings())
def test_sample_batch_sizes(sampling):
    """size 0 is an empty batch (no law read); a negative, fractional or boolean size is refused."""
    tree, law = DraftTree((2, 1), sampling), ConstantLaw([0.5, 0.3, 0.2])
    rng = np.random.default_rng(0)
    assert tree.sample_batch(lambda c: 1 / 0, rng, 0).shape == (0, 2, 2)
    for size in (-1, 2.5, True, "3"):
        with pytest.raises(InvalidInputError, match="number of samples"):
            tree.sample_batch(law, rng, size)


def test_rng_is_a_generator_a_seed_or_none():
    tree, law = DraftTree((2, 1), "iid"), ConstantLaw([0.5, 0.5])
    assert tree.sample(law, None).shape == (2, 2)
    assert np.array_equal(tree.sample(law, 7), tree.sample(law, np.random.default_rng(7)))
    for rng in ("x", np.random.RandomState(0), 1.5):
        with pytest.raises(InvalidInputError, match="rng"):
            tree.sample(law, rng)
        with pytest.raises(InvalidInputError, match="rng"):
            tree.sample_batch(law, rng, 2)


def _growing(context):
    """V = 2 at the root, 3 below it."""
    return np.array([0.5, 0.5]) if not context else np.array([0.2, 0.3, 0.5])


@pytest.mark.parametrize("sampling", tree_samplings())
def test_a_law_whose_vocabulary_changes_is_refused(sampling):
    tree, rng = DraftTree((2, 1), sampling), np.random.default_rng(0)
    for run in (lambda: list(tree.enumerate(_growing)), lambda: tree.sample(_growing, rng),
                lambda: tree.sample_batch(_growing, rng, 4)):
        with pytest.raises(InvalidDistributionError, match="length 2"):
            run()


def test_enumerate_lists_positive_probabilities_only():
    """q = (1, 1e-300): a draw holding four tokens 1 has probability 1e-1200, zero in floats, and is
    left out; in exact fractions every draw is listed and the law sums to exactly one."""
    tree = DraftTree((2, 2), "iid")
    draws = list(tree.enumerate(ConstantLaw([1.0, 1e-300])))
    assert draws and all(w > 0 for _, w in draws)
    assert math.fsum(w for _, w in draws) == pytest.approx(1.0, abs=1e-15)
    q = np.array([1 - Fraction(1, 10**300), Fraction(1, 10**300)], dtype=object)
    exact = list(tree.enumerate(lambda c: q))
    assert len(exact) == 2 ** 6 and sum(w for _, w in exact) == 1 and all(w > 0 for _, w in exact)


@pytest.mark.parametrize("text", ["2,,1", "2,", ",2", "", " ", "2, ,1", "2;1", "1e3", "2,x"])
def test_parse_refuses_empty_and_bad_fields(text):
    with pytest.raises(InvalidInputError, match="comma-separated"):
        DraftTree.parse(text)


def test_parse_reads_spaces_around_fields():
    assert DraftTree.parse(" 2, 1 ", "top").branching == (2, 1)


@pytest.mark.parametrize("branching", [(10**20,), (2**27, 2**27), (10**5, 10**5, 10**5, 10**4),
                                       (2,) * 54, (10**4000, 1)])
def test_a_tree_beyond_any_estimate_is_refused_before_anything(branching):
    """More than 2^53 paths: one named error, no array, no huge integer formed."""
    with pytest.raises(InvalidInputError, match="2\\^53"):
        DraftTree(branching)
    with pytest.raises(InvalidInputError, match="2\\^53"):
        DraftTree.parse(",".join(map(str, branching[:60])) if max(branching) < 10**30 else "1" + "0" * 25)


def test_the_largest_tree_is_accepted_and_counted_without_huge_integers():
    tree = DraftTree((2**26, 2**27), "iid")
    assert tree.n == MAX_TREE_PATHS
    assert tree.count_draws(50) == COUNT_CAP  # V^nodes, judged by logarithms
    assert DraftTree((2**26, 2**27), "top").count_draws(50) == 1
    assert DraftTree((3, 2), "iid").count_draws(4) == 4**3 * (4**2) ** 3


@pytest.mark.parametrize("text", ["99999999999999999999", "100000,100000,100000,10000", "2,,1"])
def test_the_commands_refuse_a_bad_tree_in_one_line(capsys, text):
    from tests.cli_helpers import one_line_error, run_main

    code, out, err = run_main(capsys, "audit", "--block", "examples/verifiers/tree_traversal.py:verify_tree",
                              "--instance", "toy", "--tree", text)
    one_line_error(code, err, "2\\^53|comma-separated")
    code, out, err = run_main(capsys, "block-efficiency", "--instance", "toy", "--tree", text)
    one_line_error(code, err, "2\\^53|comma-separated")
