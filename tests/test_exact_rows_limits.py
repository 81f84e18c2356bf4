"""The exact rows of ``block-efficiency --instance`` are refused before any work over their size
estimate, and the default limits run the README's example. Counted law calls, no wall clock."""

import numpy as np
import pytest

from mdtheory.blocks import DraftTree, make_verifier
from mdtheory.blocks import optimum as block_optimum
from mdtheory.blocks import simulation as blockeff
from mdtheory.blocks.trees import MAX_TREE_DRAWS, iid_drafts
from mdtheory.blocks.verifiers import TokenByToken
from mdtheory.errors import InvalidInputError, ProblemTooLargeError

README_EXAMPLE = ["block-efficiency", "--instance", "toy", "-n", "2", "-L", "2", "--verifier",
                  "token,block,multipath,gbv,trie,traversal", "--rules", "rrs,optimal", "--optimum"]


class Counted:
    """A law that counts its calls."""

    def __init__(self, law):
        self.law, self.calls = law, 0

    def __call__(self, ctx):
        self.calls += 1
        return self.law(ctx)


def _run_cli(argv, capsys):
    from mdtheory.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def no_work(monkeypatch):
    """Counts of the exact laws and the optimum started (each raises if reached)."""
    started = []

    def refuse(name):
        def call(*args, **kwargs):
            started.append(name)
            raise AssertionError(f"{name} ran")
        return call

    monkeypatch.setattr(blockeff, "exact_block_law", refuse("exact_block_law"))
    monkeypatch.setattr(block_optimum, "optimal_block_efficiency", refuse("optimum"))
    return started


def test_max_bytes_1k_refuses_the_exact_rows_in_one_line(capsys, no_work):
    code, out, err = _run_cli(["block-efficiency", "--instance", "toy", "-n", "2", "-L", "2",
                               "--max-bytes", "1K"], capsys)
    assert code == 2 and out == "" and no_work == []
    lines = err.strip().splitlines()
    assert len(lines) == 1
    what = "exact block efficiency of 5 verifiers over 16 draws of K = 2 drafts of L = 2 tokens, V = 2"
    assert what in lines[0]
    assert "over the limit of 1 KiB" in lines[0] and "--max-bytes" in lines[0]


def test_max_seconds_refuses_the_exact_rows_and_the_optimum_first(capsys, no_work):
    code, _, err = _run_cli(README_EXAMPLE + ["--max-seconds", "1e-4"], capsys)
    assert code == 2 and no_work == []
    line = err.strip()
    assert "\n" not in line and "block-efficiency LP" in line and "--max-seconds" in line


def test_the_library_reads_one_draft_row_before_refusing():
    target, draft = blockeff.parse_instance("random:4:1")
    target, draft = Counted(target), Counted(draft)
    verifiers = [TokenByToken("rrs"), make_verifier("block")]
    refused = r"exact block efficiency of 2 verifiers over 4\.1e\+03 draws.*over the limit of 1 KiB; raise it"
    with pytest.raises(ProblemTooLargeError, match=refused + " with --max-bytes"):
        blockeff.exact_rows(target, draft, verifiers, iid_drafts(3, 2), max_bytes=1024)
    assert (target.calls, draft.calls) == (0, 1)
    with pytest.raises(ProblemTooLargeError, match=r"over the limit of 0\.01 s"):
        blockeff.exact_rows(target, draft, verifiers, iid_drafts(3, 2), max_seconds=0.01)
    assert (target.calls, draft.calls) == (0, 2)


def test_draws_over_the_cap_are_refused_before_the_optimum(no_work):
    target, draft = blockeff.parse_instance("random:8:1")
    assert iid_drafts(3, 3).count_draws(8) > MAX_TREE_DRAWS
    with pytest.raises(ProblemTooLargeError, match="draws, over 200000; use sampling"):
        blockeff.exact_rows(target, draft, [make_verifier("block")], iid_drafts(3, 3), optimum=True,
                            max_seconds=None, max_bytes=None)
    assert no_work == []


@pytest.mark.parametrize("limit", [0, -1.0, float("nan"), True, "1"])
def test_bad_limits_are_named(limit):
    target, draft = blockeff.parse_instance("toy")
    with pytest.raises(InvalidInputError, match="max_seconds"):
        blockeff.exact_rows(target, draft, [make_verifier("block")], iid_drafts(1, 1), max_seconds=limit)


def test_the_estimate_grows_with_the_draws_verifiers_and_optimum():
    V = 3
    one = blockeff.exact_estimate([make_verifier("block")], V, iid_drafts(2, 2))
    more = blockeff.exact_estimate([make_verifier("block")], V, iid_drafts(3, 2))
    assert more.seconds / one.seconds == pytest.approx(3 ** 6 / 3 ** 4, rel=0.05)  # the draws: V^(K L)
    two = blockeff.exact_estimate([make_verifier("block"), TokenByToken("rrs")], V, iid_drafts(2, 2))
    assert two.seconds > 1.9 * one.seconds and "2 verifiers" in two.what
    best = blockeff.exact_estimate([make_verifier("block")], V, iid_drafts(2, 2), optimum=True)
    lp = block_optimum.estimate(V, 2, 2)
    assert best.seconds == pytest.approx(one.seconds + lp.seconds) and best.bytes >= lp.bytes
    assert lp.what in best.what
    tree = DraftTree((2, 2), "without-replacement")
    on_tree = blockeff.exact_estimate([make_verifier("traversal", tree=tree)], V, tree, optimum=True)
    assert block_optimum.tree_estimate(V, tree).what in on_tree.what
    assert f"over {tree.count_draws(V)} draws" in on_tree.what


def test_the_default_limits_run_the_readme_example(capsys):
    target, draft = blockeff.parse_instance("toy")
    code, out, err = _run_cli(README_EXAMPLE, capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 7
    assert all("(exact; validity TV" in line and "optimum 2.6173" in line for line in lines)
    assert np.isfinite([float(line.split("block efficiency ")[1].split()[0]) for line in lines]).all()
