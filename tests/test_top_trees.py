"""Trees of top children (deterministic draft trees) through every path: the bound against the
optimum on every tree sampling of the registry, the one rule for choosing top tokens (exact
fractions ordered exactly), the size estimates that count one prefix set, and the top set's
closed-form route."""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest

import mdtheory as md
from mdtheory._budget import MAX_SECONDS
from mdtheory.blocks import audit_block, block_law_tv, exact_block_law, make_verifier
from mdtheory.blocks.bound import block_efficiency_bound
from mdtheory.blocks.deterministic import DeterministicTree
from mdtheory.blocks.markov import ConstantLaw, RandomLaw, random_instance
from mdtheory.blocks.optimum import tree_estimate
from mdtheory.blocks.prefixsets import count_prefix_sets, prefix_set_law
from mdtheory.blocks.simulation import ceiling
from mdtheory.blocks.trees import DraftTree, tree_samplings
from mdtheory.errors import InvalidInputError
from mdtheory.models.top import Top
from mdtheory.solve import route_estimate
from tests.tolerances import ROUNDING, SOLVER


def _top_value(target, draft, branching) -> float:
    """1 + the sum of p(path) over the nodes of the top tree, the tree read off one draw."""
    drafts = DraftTree(branching, "top").sample(draft, np.random.default_rng(0))
    return DeterministicTree.from_drafts(drafts).value(target)


# --------------------------------------------------------------------------- the bound and the optimum
@pytest.mark.parametrize("sampling", tree_samplings())
@pytest.mark.parametrize("branching", [(1,), (2,), (1, 1), (2, 1), (1, 2), (1, 2, 1)])
def test_the_bound_is_at_least_the_optimum_on_every_tree_sampling(sampling, branching):
    """A sweep over the registry's tree samplings: the proven bound never falls below the proven
    optimum (with one node at a depth, a top child is the argmax of q, not a draw from it)."""
    for V in (2, 3):
        if sampling != "iid" and max(branching) > V:
            continue
        for target, draft in (random_instance(V, seed=V, concentration=0.5),
                              (RandomLaw(V, seed=9), ConstantLaw(np.full(V, 1 / V)))):
            tree = DraftTree(branching, sampling)
            opt = md.optimal_block_efficiency(target, draft, tree=tree).value
            bound = block_efficiency_bound(target, draft, tree=tree).value
            assert bound >= opt - SOLVER, (tree, V, bound, opt)


def test_the_bound_of_a_top_tree_is_its_exact_value():
    """p = (0.9, 0.1), q = (0.6, 0.4): the top token is 0, the optimum 1 + p(0) = 1.9; one draft from
    q would give 1 + (1 - TV) = 1.7. The complete tree's nested bound is 1 + sum p(path)."""
    target, draft = ConstantLaw([0.9, 0.1]), ConstantLaw([0.6, 0.4])
    for branching, value in (((1,), 1.9), ((1, 1), 1 + 0.9 + 0.81), ((1, 2, 1), 1 + 0.9 + 0.9 + 0.81)):
        tree = DraftTree(branching, "top")
        bound = block_efficiency_bound(target, draft, tree=tree)
        assert bound.complete and bound.value == pytest.approx(value, abs=ROUNDING)
        assert md.optimal_block_efficiency(target, draft, tree=tree).value == pytest.approx(value, abs=SOLVER)
    target, draft = random_instance(4, seed=3)
    for branching in ((2,), (2, 2), (3, 1, 2)):
        bound = block_efficiency_bound(target, draft, tree=DraftTree(branching, "top")).value
        assert bound == pytest.approx(_top_value(target, draft, branching), abs=ROUNDING)


def test_prefix_draws_reads_the_declarations():
    """The prefix-set bound's number of draws: iid children b_1 ... b_m, a single path of a random
    sampling one, distinct siblings and top children none."""
    assert [DraftTree((2, 3), "iid").prefix_draws(m) for m in (1, 2)] == [2, 6]
    assert [DraftTree((1, 2), "without-replacement").prefix_draws(m) for m in (1, 2)] == [1, None]
    assert [DraftTree((1, 1), "top").prefix_draws(m) for m in (1, 2)] == [None, None]


def test_the_simulation_ceiling_of_a_top_tree_is_not_below_its_value():
    target, draft = ConstantLaw([0.9, 0.1]), ConstantLaw([0.6, 0.4])
    tree = DraftTree((1, 1), "top")
    bound, kind = ceiling(target, draft, tree)
    assert kind == "optimum_bound" and bound(()) == pytest.approx(2.71, abs=ROUNDING)


# --------------------------------------------------------------------------- exact fractions, a near tie
D = Fraction(1, 10**30)
Q_TIE = np.array([Fraction(1, 3) - D, Fraction(1, 3) + D, Fraction(1, 3)], dtype=object)
P_TIE = np.array([Fraction(1, 10), Fraction(8, 10), Fraction(1, 10)], dtype=object)


def _exact(row):
    return lambda context: row


def test_every_path_chooses_the_exact_top_token():
    """q = (1/3 - d, 1/3 + d, 1/3), d = 1e-30, is a tie in float64: the exact top token is 1, and
    enumeration, sampling, the batch, the inclusion, the prefix-set law and the Top model agree."""
    tree, rng = DraftTree((1,), "top"), np.random.default_rng(0)
    assert [x.tolist() for x, _ in tree.enumerate(_exact(Q_TIE))] == [[[1]]]
    assert tree.sample(_exact(Q_TIE), rng).tolist() == [[1]]
    assert tree.sample_batch(_exact(Q_TIE), rng, 3)[:, 0, 0].tolist() == [1, 1, 1]
    assert tree.inclusion(Q_TIE, 1)[0].tolist() == [0.0, 1.0, 0.0]
    assert list(prefix_set_law(_exact(Q_TIE), tree, 3)) == [frozenset({(1,)})]
    assert Top(Q_TIE, 1).top.tolist() == [1]
    assert Top(Q_TIE.astype(float), 1).top.tolist() == [0]  # float64 ties go to the lower index


@pytest.mark.parametrize("q,msg", [
    (np.array([0.5, 0.5, None], dtype=object), "dtype object"),
    (np.array([Fraction(1, 2), "a", Fraction(1, 2)], dtype=object), "dtype object"),
    (np.array([Fraction(10**400), Fraction(1)], dtype=object), "beyond float64's range"),
])
def test_an_object_q_that_is_not_fractions_is_refused_by_name(q, msg):
    """Only real numbers are read as exact: None is no NaN, and a fraction beyond float64 is named."""
    with pytest.raises(md.InvalidDistributionError, match=msg):
        Top(q, 1)


def test_the_optimum_the_verifier_the_bound_and_the_audit_agree_on_a_near_tie():
    """With the exact top token 1 the optimum is 1 + p(1) = 1.8; token:optimal's exact block law is
    lossless with that efficiency; the bound is not below it; the exact audit agrees."""
    target, draft, tree = _exact(P_TIE), _exact(Q_TIE), DraftTree((1,), "top")
    assert md.optimal_block_efficiency(target, draft, tree=tree).value == pytest.approx(1.8, abs=SOLVER)
    verifier = make_verifier("token", rule="optimal", tree=tree)
    law = exact_block_law(verifier, target, draft, 1, 1)
    assert float(block_law_tv(law, target, 1)) <= ROUNDING
    assert float(sum(len(b) * w for b, w in law.items())) == pytest.approx(1.8, abs=ROUNDING)
    assert block_efficiency_bound(target, draft, tree=tree).value >= 1.8 - ROUNDING
    audit = audit_block(verifier.law, target, draft, tree=tree, exact=True)
    assert audit.verdict == "lossless" and audit.block_efficiency == pytest.approx(1.8, abs=ROUNDING)
    with pytest.raises(InvalidInputError, match="not a draw of"):  # the float argmax is no draw
        verifier.law(target, draft, np.array([[0]]))


def test_check_drafts_refuses_other_tokens_than_the_top_ones():
    tree = DraftTree((2, 1), "top")
    law = ConstantLaw([0.5, 0.3, 0.2])
    assert tree.check_drafts(np.array([[0, 0], [1, 0]]), law).shape == (2, 2)
    for drafts in ([[0, 0], [2, 0]], [[1, 0], [0, 0]], [[0, 1], [1, 0]]):
        with pytest.raises(InvalidInputError, match="not a draw of"):
            tree.check_drafts(np.array(drafts), law)


# --------------------------------------------------------------------------- size estimates
def test_a_top_tree_has_one_prefix_set_and_is_estimated_so():
    """The optimum of a top tree is one prefix set: estimated and run within the default limits."""
    tree = DraftTree((2, 2, 2), "top")
    assert count_prefix_sets(4, tree) == [0.0] * 4
    assert tree.count_draws(10**6) == 1
    assert tree_estimate(4, tree).seconds < 1
    assert tree_estimate(100, DraftTree((2, 1), "top")).seconds < MAX_SECONDS
    target, draft = random_instance(4, seed=1)
    res = md.optimal_block_efficiency(target, draft, tree=tree)
    assert res.lp["multisets"] == 1
    assert res.value == pytest.approx(_top_value(target, draft, (2, 2, 2)), abs=SOLVER)
    assert count_prefix_sets(2, DraftTree((3,), "top"))[0] == -np.inf  # three top tokens of two


def test_the_top_set_has_a_closed_form_route_at_any_size():
    """alpha* of the top set is p(top): route ``fixed-set``, proven by the flow of p along the set,
    estimated O(V) (no refusal at V = 10^6)."""
    V = 20_000
    p, q = np.random.default_rng(1).dirichlet(np.ones(V)), np.random.default_rng(2).dirichlet(np.ones(V))
    res = md.optimal_acceptance(p, q, 3, "top")
    assert (res.method, res.certificate, res.status) == ("fixed-set", "flow", "optimal")
    assert res.value == pytest.approx(p[np.argsort(-q, kind="stable")[:3]].sum(), abs=ROUNDING)
    assert sorted(res.cut.tolist()) == sorted(np.argsort(-q, kind="stable")[:3].tolist())
    big = md.make_draft_model(np.full(10**6, 1e-6), 3, "top")
    assert route_estimate(big).seconds < 1
    with pytest.raises(InvalidInputError, match="fixed draft set only"):
        md.optimal_acceptance(p, q, 3, "iid", method="fixed-set")


# --------------------------------------------------------------------------- the commands
TOP_LAW = '''
from mdtheory.blocks import DraftTree, make_verifier

law = make_verifier("token", tree=DraftTree((1, 1), "top")).law
'''


def test_audit_block_takes_the_registry_tree_samplings(capsys, tmp_path):
    """``audit --block --sampling top`` runs (the choices come from the samplings registry); the
    package's token verifier on a top tree is exactly lossless."""
    from tests.cli_helpers import run_main

    path = tmp_path / "top_law.py"
    path.write_text(TOP_LAW)
    code, out, err = run_main(capsys, "audit", "--block", f"{path}:law", "--instance", "random:3:1",
                              "--tree", "1,1", "--sampling", "top", "--exact", "--json")
    assert code == 0 and err == ""
    import json

    row = json.loads(out)
    assert row["verdict"] == "lossless" and row["sampling"] == "top"
    code, _, err = run_main(capsys, "audit", "--block", f"{path}:law", "--instance", "toy", "--tree", "1",
                            "--sampling", "greedy")
    assert code == 2 and "unknown tree sampling 'greedy'" in err and "top" in err


def test_audit_block_of_one_top_draft_audits_the_top_chain(capsys, tmp_path):
    """``-n 1 -L 2 --sampling top`` (no --tree) audits the chain of q's top tokens, not one random
    draft: the token verifier on it is exactly lossless, and the JSON names the sampling."""
    import json

    from tests.cli_helpers import run_main

    path = tmp_path / "top_law.py"
    path.write_text(TOP_LAW)
    code, out, err = run_main(capsys, "audit", "--block", f"{path}:law", "--instance", "random:3:1",
                              "-n", "1", "-L", "2", "--sampling", "top", "--exact", "--json")
    assert code == 0 and err == ""
    row = json.loads(out)
    assert row["verdict"] == "lossless" and row["sampling"] == "top"


def test_block_efficiency_on_a_top_tree_runs_its_rules_within_the_limits(capsys):
    """Without --rules a top tree runs the rules that fit it; the exact optimum is refused over
    --max-seconds / --max-bytes like any other work."""
    from tests.cli_helpers import one_line_error, run_main

    code, out, _ = run_main(capsys, "block-efficiency", "--instance", "random:3:1", "--tree", "1,1",
                            "--sampling", "top", "--optimum")
    assert code == 0 and out.startswith("token:optimal[1,1 top]")
    efficiency, optimum = (float(x) for x in
                           (out.split("block efficiency")[1].split()[0], out.split("optimum")[1].split()[0]))
    assert efficiency == pytest.approx(optimum, abs=1e-4)
    for flag, value in (("--max-bytes", "1K"), ("--max-seconds", "0.0001")):
        code, _, err = run_main(capsys, "block-efficiency", "--instance", "random:4:1", "--tree", "2,2",
                                "--optimum", "--verifier", "token", flag, value)
        one_line_error(code, err, "block-efficiency LP", flag)


@pytest.mark.parametrize(("command", "flag"), [("block-efficiency", "--tree"), ("audit", "--tree"),
                                               ("audit", "--sampling")])
def test_the_help_names_every_tree_sampling(capsys, command, flag):
    from tests.cli_helpers import run_main

    code, out, _ = run_main(capsys, command, "--help")
    text = " ".join(out.split())
    assert code == 0
    at = re.search(rf" {flag} (B1,\S+|\{{[^}}]*\}}) ", text)  # the option's own help entry
    part = text[at.start():at.start() + 400]
    for name in tree_samplings():
        assert name in part, (command, flag, name, part)
