"""mdtheory.blocks.audit: exact and sampled audits of block and tree verifiers, structural checks,
the example verifiers, bad input."""

import json
import math
from itertools import product
from pathlib import Path

import numpy as np
import pytest

import mdtheory as md
from mdtheory.audit.statistics import DEFAULT_LEVEL, samples_for
from mdtheory.audit.verifier import load_target
from mdtheory.blocks import (
    BlockAuditResult,
    ConstantLaw,
    audit_block,
    block_law_tv,
    draft_tuples,
    random_instance,
    sun_toy,
)
from mdtheory.blocks.audit import MAX_CELLS, _Law
from mdtheory.blocks.trees import DraftTree
from mdtheory.cli import main
from mdtheory.cli.audit_block import EXIT_INCONCLUSIVE

from .tolerances import ROUNDING

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "verifiers"
CORRECT = ["block_verification", "tree_traversal"]
LOSSY = ["block_missing_q", "block_unnormalised_residual", "block_tempered_draft"]


TOY = sun_toy()  # Sun et al.'s toy: V = 2, target (1/3, 2/3), draft (2/3, 1/3) at every context


def seeded(V=3, seed=1):
    return random_instance(V, seed)


def example(name, attr):
    return load_target(f"{EXAMPLES / name}.py:{attr}")


def completed_law_tv(law, target, draft, n, L, V):
    """Independent check of exact mode: the completed law summed sequence by sequence over ordered
    draft tuples (iid drafts), then its TV from the target's sequence law."""
    def seq_prob(lw, seq, start=()):
        prob, ctx = 1.0, tuple(start)
        for t in seq:
            prob *= lw(ctx)[t]
            ctx += (t,)
        return prob

    seqs = list(product(range(V), repeat=L))
    lhs = dict.fromkeys(product(range(V), repeat=L + 1), 0.0)
    for tup in product(seqs, repeat=n):
        w = math.prod(seq_prob(draft, s) for s in tup)
        if w == 0:
            continue
        for block, mass in law(target, draft, np.array(tup, dtype=np.int64)).items():
            for y in lhs:
                if y[:len(block)] == tuple(block):
                    lhs[y] += w * mass * seq_prob(target, y[len(block):], block)
    return 0.5 * sum(abs(v - seq_prob(target, y)) for y, v in lhs.items())


# ------------------------------------------------------------------------------------- exact mode
def test_block_verification_on_the_toy_gives_sun_et_al_numbers():
    """K = 1, L = 2: block verification emits 20/9 tokens per call (11/9 accepted), lossless; the
    accepted tokens stay under the bound sum_m alpha*_m."""
    res = audit_block(example("block_verification", "law"), *TOY, n=1, length=2, exact=True)
    assert res.verdict == "lossless" and res.lossless and res.tv <= ROUNDING
    assert abs(res.block_efficiency - 20 / 9) <= ROUNDING
    assert res.acceptance <= res.alpha_star + ROUNDING


def test_a_validity_ignoring_coupling_is_rejected():
    """Sun et al.'s "ideal" on the toy: accept the whole draft (and a bonus token) with probability
    min(1, p(x1 x2) / q(x1 x2)), else emit the first token of z ~ norm((p - q)^+) on V^2. It makes
    21/9 tokens per call (12/9 accepted), over block verification's 20/9, and is lossy."""
    p, q = TOY
    seqs = list(product(range(2), repeat=2))

    def pair_law(law):
        return np.array([law(())[a] * law((a,))[b] for a, b in seqs])

    def ideal(target, draft, drafts):
        x = tuple(int(t) for t in drafts[0])
        p2, q2 = pair_law(target), pair_law(draft)
        a = min(1.0, p2[seqs.index(x)] / q2[seqs.index(x)])
        res = np.clip(p2 - q2, 0, None)
        res /= res.sum()
        out = {x + (y,): a * target(x)[y] for y in range(2)}
        for (z1, _), mass in zip(seqs, res, strict=True):
            out[(z1,)] = out.get((z1,), 0.0) + (1 - a) * mass
        return out

    res = audit_block(ideal, p, q, n=1, length=2, exact=True)
    assert abs(res.block_efficiency - 21 / 9) <= ROUNDING
    assert res.verdict == "lossy" and res.tv > 0.1, res.tv


@pytest.mark.parametrize("name", CORRECT)
@pytest.mark.parametrize("n,L", [(1, 1), (1, 3), (2, 2), (3, 1)])
def test_correct_examples_pass_the_exact_audit(name, n, L):
    for target, draft in (TOY, seeded()):
        res = audit_block(example(name, "law"), target, draft, n=n, length=L, exact=True)
        assert res.verdict == "lossless" and res.tv <= ROUNDING, (name, n, L, res.tv)
        assert res.acceptance <= res.alpha_star + ROUNDING
        assert not res.violations and res.invalid_mass == 0


def test_traversal_on_a_two_by_two_tree_is_lossless_and_beats_one_draft():
    for target, draft in (TOY, seeded(), seeded(V=2, seed=4)):
        tree = audit_block(example("tree_traversal", "law_tree"), target, draft, exact=True,
                           tree=DraftTree((2, 2)))
        chain = audit_block(example("block_verification", "law"), target, draft, n=1, length=2,
                            exact=True)
        assert tree.verdict == "lossless" and tree.tv <= ROUNDING
        assert tree.alpha_star is None and tree.branching == [2, 2]
        assert tree.block_efficiency >= chain.block_efficiency - ROUNDING


def test_traversal_is_block_verification_on_one_draft_and_beats_it_on_two():
    for target, draft in (TOY, seeded()):
        bv = audit_block(example("block_verification", "law"), target, draft, n=1, length=3,
                         exact=True)
        tv1 = audit_block(example("tree_traversal", "law"), target, draft, n=1, length=3, exact=True)
        tv2 = audit_block(example("tree_traversal", "law"), target, draft, n=2, length=2, exact=True)
        bv2 = audit_block(example("block_verification", "law"), target, draft, n=2, length=2,
                          exact=True)
        assert abs(bv.block_efficiency - tv1.block_efficiency) <= ROUNDING
        assert tv2.block_efficiency > bv2.block_efficiency


@pytest.mark.parametrize("name", LOSSY)
def test_lossy_examples_are_caught_exactly(name):
    """The exact TV, cross-checked against an independent sum over sequences."""
    target, draft = seeded()
    law = example(name, "law")
    res = audit_block(law, target, draft, n=1, length=2, exact=True)
    assert res.verdict == "lossy" and not res.lossless and res.tv > 0.05, res.tv
    assert abs(res.tv - completed_law_tv(law, target, draft, 1, 2, 3)) <= ROUNDING
    assert res.worst_tokens and len(res.worst_tokens[0]["sequence"]) == 3


def test_exact_tv_agrees_with_independent_routes():
    """Exact mode against the sum over sequences above and against block_law_tv of the block's
    overall law (markov.draft_tuples enumerating the drafts)."""
    target, draft = seeded(seed=2)
    for name, n in (("block_verification", 2), ("tree_traversal", 2), ("block_tempered_draft", 1),
                    ("block_unnormalised_residual", 1)):
        law = example(name, "law")
        res = audit_block(law, target, draft, n=n, length=2, exact=True)
        assert abs(res.tv - completed_law_tv(law, target, draft, n, 2, 3)) <= ROUNDING, name
        overall = {}
        for drafts, w in zip(*draft_tuples(draft, n, 2), strict=True):
            for block, mass in law(target, draft, drafts).items():
                overall[block] = overall.get(block, 0.0) + w * mass
        assert abs(res.tv - block_law_tv(overall, target, 2)) <= ROUNDING, name


def test_a_certain_draft_throughout_is_lossless():
    """Taking q = 1 at the drafted token and 0 elsewhere in every step (weights and residuals) is
    valid whatever the real draft law: given the drafts, the output has the target's law. Only
    the mixture in block_missing_q loses."""
    def certain(target, draft, drafts):
        x = [int(t) for t in drafts[0]]
        out, later = {}, 1.0
        steps, w = [], 1.0
        for i in range(len(x) + 1):
            p = target(tuple(x[:i]))
            if i == len(x):
                steps.append((w, p))
                break
            r = p * w
            r[x[i]] = max(r[x[i]] - 1.0, 0.0)
            s = r.sum()
            steps.append((1.0 if i == 0 else s / (s + 1 - w) if s + 1 - w > 0 else 0.0,
                          r / s if s > 0 else p))
            w = min(1.0, w * p[x[i]])
        for i in range(len(steps) - 1, -1, -1):
            h, last = steps[i]
            for y, py in enumerate(last):
                out[(*x[:i], y)] = out.get((*x[:i], y), 0.0) + later * h * py
            later *= 1.0 - h
        return out

    for target, draft in (TOY, seeded()):
        res = audit_block(certain, target, draft, n=1, length=2, exact=True)
        assert res.verdict == "lossless" and res.tv <= ROUNDING


def test_library_verifiers_pass_and_agree_with_the_examples():
    """mdtheory.blocks' verifiers, audited exactly: lossless, and the examples (written separately
    from the papers) give the same block efficiencies; the library's traversal on trees drawn
    without replacement passes too, sampled and exact."""
    from mdtheory.blocks import DraftTree, make_verifier

    target, draft = seeded()
    for n, L in ((1, 2), (2, 2)):
        got = {name: audit_block(make_verifier(name).law, target, draft, n=n, length=L, exact=True)
               for name in ("token", "block", "multipath", "traversal")}
        assert all(r.verdict == "lossless" and r.tv <= ROUNDING for r in got.values()), got
        for mine, theirs in (("block_verification", "block"), ("tree_traversal", "traversal")):
            res = audit_block(example(mine, "law"), target, draft, n=n, length=L, exact=True)
            assert abs(res.block_efficiency - got[theirs].block_efficiency) <= ROUNDING, (mine, n)
    tree = make_verifier("traversal", tree=DraftTree((2, 2), "without-replacement"))
    wor = {"tree": DraftTree((2, 2), "without-replacement")}
    assert audit_block(tree.law, target, draft, exact=True, **wor).verdict == "lossless"
    assert audit_block(tree.sample, target, draft, detect_tv=0.1, seed=1, **wor).verdict == "passed"


# ------------------------------------------------------------------------------------- sampled mode
@pytest.mark.parametrize("name,n", [("block_verification", 1), ("tree_traversal", 2)])
def test_correct_examples_pass_the_sampled_audit(name, n):
    target, draft = seeded()
    exact = audit_block(example(name, "law"), target, draft, n=n, length=2, exact=True)
    res = audit_block(example(name, "verify"), target, draft, n=n, length=2, detect_tv=0.05, seed=3)
    assert res.verdict == "passed" and res.lossless and res.pvalue >= DEFAULT_LEVEL
    assert res.samples == samples_for(0.05, _sequence_law(target, 3, 3))
    assert res.detectable_tv <= 0.05
    lo, hi = res.block_efficiency_ci95
    half = (hi - lo) / 2
    assert abs(res.block_efficiency - exact.block_efficiency) <= 2.5 * half  # ~5 standard errors


def test_tree_sampler_passes_the_sampled_audit():
    target, draft = seeded()
    res = audit_block(example("tree_traversal", "verify_tree"), target, draft, tree=DraftTree((2, 2)),
                      detect_tv=0.05, seed=5)
    assert res.verdict == "passed" and res.branching == [2, 2]


@pytest.mark.parametrize("name", LOSSY)
def test_lossy_examples_are_caught_at_the_sample_size_the_audit_chooses(name):
    """Sized to detect the example's own exact TV (power >= 0.9 by the token-level audit's bound),
    fixed seed: rejected, and the exact TV under the 95% upper bound."""
    target, draft = seeded()
    exact = audit_block(example(name, "law"), target, draft, n=1, length=2, exact=True)
    res = audit_block(example(name, "verify"), target, draft, n=1, length=2, detect_tv=exact.tv,
                      seed=0)
    assert res.samples == samples_for(exact.tv, _sequence_law(target, 3, 3))
    assert res.verdict == "lossy" and not res.lossless and res.pvalue < DEFAULT_LEVEL
    assert res.tv_upper >= exact.tv


def test_too_few_samples_is_inconclusive_never_lossless():
    target, draft = seeded()
    res = audit_block(example("block_verification", "verify"), target, draft, n=1, length=2,
                      samples=200, seed=0)
    assert res.verdict == "inconclusive" and not res.lossless and res.detectable_tv > res.detect_tv


def test_false_rejection_rate_of_a_correct_verifier():
    target, draft = TOY
    f = example("block_verification", "verify")
    seeds, level = 60, 0.1
    rejected = sum(audit_block(f, target, draft, n=1, length=2, samples=150, seed=s,
                               level=level).verdict == "lossy" for s in range(seeds))
    assert abs(rejected - seeds * level) <= 4 * math.sqrt(seeds * level * (1 - level)), rejected


def test_result_is_an_audit_result_and_json_ready():
    target, draft = TOY
    res = audit_block(example("block_verification", "verify"), target, draft, n=2, length=2,
                      samples=300)
    assert isinstance(res, BlockAuditResult) and isinstance(res, md.AuditResult)
    d = json.loads(json.dumps(res.to_dict()))
    for key in ("verdict", "lossless", "pvalue", "tv", "tv_upper", "detectable_tv", "block_efficiency",
                "block_efficiency_ci95", "acceptance", "alpha_star", "violations", "samples", "length"):
        assert key in d
    assert md.audit_block is audit_block


def _sequence_law(target, V, L1):
    return np.array([math.prod(target(y[:j])[y[j]] for j in range(L1))
                     for y in product(range(V), repeat=L1)])


# ------------------------------------------------------------------------------------- structure
@pytest.mark.parametrize("body,reason", [
    (lambda d: np.array([1 - d[0, 0], 0]), "not a draft prefix"),
    (lambda d: np.zeros(4, dtype=np.int64), "length 4 outside 1..3"),
    (lambda d: np.array([], dtype=np.int64), "length 0"),
    (lambda d: np.array([5]), "a token outside 0..1"),
    (lambda d: np.array([0.0]), "not a 1-D integer array"),
    (lambda d: None, "not a 1-D integer array"),
    (lambda d: np.zeros((1, 1), dtype=np.int64), "not a 1-D integer array"),
])
def test_structural_violations_are_failures_not_crashes(body, reason):
    target, draft = TOY
    res = audit_block(lambda t, q, d, rng: body(d), target, draft, n=1, length=2, samples=50)
    assert res.verdict == "invalid" and not res.lossless
    assert sum(res.violations.values()) == 50 and res.invalid_mass == 1.0
    assert any(reason in k for k in res.violations), res.violations
    assert len(res.violation_examples) == 5 and reason in res.violation_examples[0]["reason"]


def test_exact_mode_reports_invalid_blocks_with_their_probability():
    target, draft = TOY

    def sometimes_wrong(t, q, drafts):
        x = tuple(int(v) for v in drafts[0])
        return {(0,): 0.25, (1,): 0.5, (1 - x[0], 0): 0.25}  # (1 - x1, .) is no draft prefix

    res = audit_block(sometimes_wrong, target, draft, n=1, length=2, exact=True)
    assert res.verdict == "invalid" and abs(res.invalid_mass - 0.25) <= ROUNDING
    assert res.violation_examples[0]["reason"] == "not a draft prefix plus one token"


def test_tree_layout_and_enumeration():
    """Paths sharing a node share its token; the enumerated trees carry probability one."""
    target, draft = seeded()
    law = _Law(draft, "draft")
    law.V = 3
    rng = np.random.default_rng(0)
    tree = DraftTree((2, 3))
    for _ in range(20):
        paths = tree.sample(law, rng)
        assert paths.shape == (6, 2) and (paths[:3, 0] == paths[0, 0]).all()
        assert (paths[3:, 0] == paths[3, 0]).all()
    trees = list(DraftTree((2, 1)).enumerate(law))
    assert len(trees) == 3 ** 4 and abs(sum(w for _, w in trees) - 1) <= ROUNDING


def test_exact_audit_of_a_tree_keeps_the_mass_left_after_a_heavy_sibling():
    """Two children without replacement from q = (1 - 2e-16, 1e-16, 1e-16): after the heavy token
    each light one is drawn with probability 1/2. The mass left is summed over the tokens not drawn
    (2e-16); taken as 1 minus the mass drawn (2.2e-16 in floats) the second child's weights sum to
    0.9, and the exact audit would read the target-only verifier (lossless on any drafts) as lossy,
    TV 0.0496 and E|B| 0.9007 < 1."""
    q = ConstantLaw([1 - 2e-16, 1e-16, 1e-16])
    p = ConstantLaw([0.2, 0.3, 0.5])
    heavy = float(q(())[0])
    cancelling = 1e-16 / (1.0 - heavy)
    assert abs(2 * cancelling - 1) > 0.09  # the weights of the second child would sum to 0.9

    def target_only(target, draft, drafts):
        return {(y,): float(py) for y, py in enumerate(target(()))}

    tree = DraftTree((2,), "without-replacement")
    res = audit_block(target_only, p, q, tree=tree, exact=True)
    assert res.verdict == "lossless" and res.tv <= ROUNDING and abs(res.block_efficiency - 1) <= ROUNDING
    law = list(tree.enumerate(q))
    assert abs(sum(w for _, w in law) - 1) <= ROUNDING
    assert all(abs(w / heavy - 0.5) <= 1e-12 for x, w in law if x[0, 0] == 0)


def rrs_without_replacement(target, draft, drafts):
    """L = 1: recursive rejection sampling with q renormalised off the drafts already tried (Jeon
    et al. 2024), the accepted draft followed by a bonus token."""
    r, q, reach, out = target(()), draft(()).copy(), 1.0, {}
    for x in drafts[:, 0].tolist():
        a = min(1.0, r[x] / q[x])
        for y, py in enumerate(target((x,))):
            out[(x, y)] = out.get((x, y), 0.0) + reach * a * py
        reach *= 1.0 - a
        d = np.clip(r - q, 0.0, None)
        r = d / d.sum() if d.sum() > 0 else r
        q[x] = 0.0
        q /= q.sum()
    for y, py in enumerate(r):
        out[(y,)] = out.get((y,), 0.0) + reach * py
    return out


def test_without_replacement_drafts():
    """Distinct siblings: recursive rejection sampling without replacement is lossless on them,
    block verification (first draft only) still is, and traversal written for iid children is not
    in general: after the first branch is rejected it tries the second with q where the siblings'
    law is q renormalised off the first token."""
    target, draft = seeded()
    wor = {"exact": True, "tree": DraftTree((2,), "without-replacement")}
    res = audit_block(rrs_without_replacement, target, draft, **wor)
    assert res.verdict == "lossless" and res.tv <= ROUNDING and res.sampling == "without-replacement"
    assert res.alpha_star is None
    wor2 = {"exact": True, "tree": DraftTree((2, 1), "without-replacement")}
    res = audit_block(example("block_verification", "law"), target, draft, **wor2)
    assert res.verdict == "lossless" and res.tv <= ROUNDING
    # the iid formulas on distinct siblings lose unless the root's residual (p - q)^+ is a point
    # mass (seeded(seed=1) has one token with p > q at the root and passes; seed 2 has two)
    res = audit_block(example("tree_traversal", "law"), target, draft, **wor2)
    assert res.verdict == "lossless" and (target(()) > draft(())).sum() == 1
    target, draft = seeded(seed=2)
    res = audit_block(example("tree_traversal", "law"), target, draft, **wor2)
    assert res.verdict == "lossy" and res.tv > 0.1, res.tv
    res = audit_block(rrs_without_replacement, target, draft, **wor)
    assert res.verdict == "lossless" and res.tv <= ROUNDING
    with pytest.raises(md.InvalidInputError, match="3 children without replacement"):
        audit_block(rrs_without_replacement, ConstantLaw([0.5, 0.5, 0.0]), ConstantLaw([0.5, 0.5, 0.0]),
                    exact=True, tree=DraftTree((3,), "without-replacement"))


@pytest.mark.parametrize("sampling", ["iid", "without-replacement"])
def test_drawn_trees_follow_the_enumerated_law(sampling):
    """The sampler of draft trees against the enumeration (two independent routes): Pearson's test
    of 4,000 draws of a (2, 1) tree over V = 3 does not reject at 0.001."""
    from mdtheory.audit.statistics import law_test

    target, draft = seeded(V=3, seed=3)
    law = _Law(draft, "draft")
    law.V = 3
    tree = DraftTree((2, 1), sampling)
    trees = list(tree.enumerate(law))
    index = {tuple(t.ravel().tolist()): i for i, (t, _) in enumerate(trees)}
    probs = np.array([w for _, w in trees])
    rng = np.random.default_rng(11)
    counts = np.bincount([index[tuple(tree.sample(law, rng).ravel().tolist())] for _ in range(4000)],
                         minlength=len(trees))
    assert len(trees) == (6 * 9 if tree.distinct else 81) and abs(probs.sum() - 1) <= ROUNDING
    assert law_test(counts, probs) > 1e-3


# ------------------------------------------------------------------------------------- bad input
def test_a_raising_verifier_is_named_in_one_line():
    target, draft = TOY

    def boom(t, q, drafts, rng):
        raise ValueError("bad\ndraft")

    with pytest.raises(md.InvalidInputError, match=r"raised ValueError: bad draft on drafts \[\["):
        audit_block(boom, target, draft, n=1, length=2, samples=50)


def test_a_slow_verifier_is_refused_with_its_estimate(monkeypatch):
    """A clock that advances 10 ms at every reading makes each verifier call look slow: the pilot
    projects 5,000 calls past the 1 s limit (the audit's own work, estimated from the sizes, fits)."""
    import types

    from mdtheory.blocks import audit as block_audit

    clock = types.SimpleNamespace(now=0.0)

    def tick():
        clock.now += 0.01
        return clock.now
    monkeypatch.setattr(block_audit, "time", types.SimpleNamespace(perf_counter=tick))
    target, draft = TOY
    with pytest.raises(md.ProblemTooLargeError, match="verifier calls"):
        audit_block(example("block_verification", "verify"), target, draft, n=1, length=2,
                    samples=5000, max_seconds=1)


@pytest.mark.parametrize("kwargs,error,message", [
    ({"n": 0}, md.InvalidInputError, "n must be"),
    ({"length": 0}, md.InvalidInputError, "length must be"),
    ({"tree": DraftTree((2, 2))}, md.InvalidInputError, "does not match"),
    ({"tree": (2, 2)}, md.InvalidInputError, "tree must be a DraftTree"),
    ({"samples": 3}, md.InvalidInputError, "samples must be"),
    ({"level": 1.5}, md.InvalidInputError, "level must be"),
    ({"detect_tv": 0}, md.InvalidInputError, "detect_tv must be"),
    ({"seed": -1}, md.InvalidInputError, "seed must be"),
    ({"f": 3}, md.InvalidInputError, "verifier must be callable"),
    ({"target": lambda c: np.array([0.5, 0.6])}, md.InvalidDistributionError,
     "target at context"),
    ({"draft": lambda c: np.array([0.2, 0.3, 0.5])}, md.InvalidDistributionError,
     r"draft at context \(\) is not a probability vector of length 2"),
    ({"target": lambda c: 1 / 0}, md.InvalidInputError, "target raised ZeroDivisionError"),
    ({"target": ConstantLaw(np.full(40, 1 / 40)), "draft": ConstantLaw(np.full(40, 1 / 40)),
      "length": 3}, md.ProblemTooLargeError, "over"),
])
def test_bad_input(kwargs, error, message):
    args = {"f": example("block_verification", "verify"), "target": TOY[0], "draft": TOY[1],
            "n": 1, "length": 2, **kwargs}
    with pytest.raises(error, match=message):
        audit_block(args.pop("f"), args.pop("target"), args.pop("draft"), args.pop("n"),
                    args.pop("length"), **args)
    assert 40 ** 4 > MAX_CELLS


@pytest.mark.parametrize("out", [[(0,), 1.0], {(0,): 0.5}, {(0,): float("nan"), (1,): 1.0}])
def test_exact_law_that_is_not_a_law_is_bad_input(out):
    with pytest.raises(md.InvalidInputError, match="did not return a law"):
        audit_block(lambda t, q, d: out, *TOY, n=1, length=1, exact=True)


# ------------------------------------------------------------------------------------- CLI
def run(capsys, *argv):
    code = main(["audit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def laws(tmp_path):
    path = tmp_path / "laws.py"
    path.write_text("import numpy as np\n\n\ndef target(context):\n    return np.array([1 / 3, 2 / 3])\n"
                    "\n\ndef draft(context):\n    return np.array([2 / 3, 1 / 3])\n"
                    "\n\ndef broken(context):\n    raise KeyError(context)\n")
    return ["--target", f"{path}:target", "--draft", f"{path}:draft"]


def test_cli_block_exact(capsys, laws):
    code, out, _ = run(capsys, "--block", f"{EXAMPLES}/block_verification.py:law", "--exact", *laws,
                       "-n", "1", "-L", "2")
    assert code == 0 and "exact TV from the target = 0 -> lossless" in out
    assert "E|B| = 2.2222 tokens per target call" in out
    code, out, _ = run(capsys, "--block", f"{EXAMPLES}/block_missing_q.py:law", "--exact", *laws,
                       "-n", "1", "-L", "2", "--json")
    res = json.loads(out)
    assert code == 1 and res["verdict"] == "lossy" and res["tv"] > 0.2 and res["mode"] == "exact"


def test_cli_block_sampled_verdicts_and_exit_codes(capsys, laws):
    code, out, _ = run(capsys, "--block", f"{EXAMPLES}/block_verification.py:verify", *laws, "-n", "2",
                       "-L", "2", "--detect-tv", "0.1", "--json")
    res = json.loads(out)
    assert code == 0 and res["verdict"] == "passed" and res["detectable_tv"] <= 0.1
    code, out, _ = run(capsys, "--block", f"{EXAMPLES}/block_verification.py:verify", *laws, "-n", "2",
                       "-L", "2", "--samples", "100")
    assert code == EXIT_INCONCLUSIVE and "INCONCLUSIVE" in out
    code, out, _ = run(capsys, "--block", f"{EXAMPLES}/block_missing_q.py:verify", *laws, "-n", "1",
                       "-L", "2", "--detect-tv", "0.2")
    assert code == 1 and "REJECTED" in out and "largest deviations" in out


def test_cli_block_tree(capsys, laws):
    code, out, _ = run(capsys, "--block", f"{EXAMPLES}/tree_traversal.py:law_tree", "--exact", *laws,
                       "--tree", "2,2")
    assert code == 0 and "a draft tree 2x2 (iid)" in out and "lossless" in out
    code, out, _ = run(capsys, "--block", f"{EXAMPLES}/tree_traversal.py:verify_tree", "--instance",
                       "random:3:1", "--tree", "2,2", "--sampling", "without-replacement",
                       "--detect-tv", "0.1", "--json")
    res = json.loads(out)  # the example assumes iid children: lossy on distinct siblings here
    assert code == 1 and res["verdict"] == "lossy" and res["sampling"] == "without-replacement"


def test_cli_block_invalid_blocks_exit_1(capsys, laws, tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("import numpy as np\n\n\ndef f(target, draft, drafts, rng):\n"
                    "    return np.array([1 - drafts[0, 0], 0])\n")
    code, out, _ = run(capsys, "--block", f"{path}:f", *laws, "-n", "1", "-L", "2", "--samples", "50")
    assert code == 1 and "not a draft prefix plus one token: 50" in out


@pytest.mark.parametrize("argv,message", [
    (["-n", "1"], "needs --drafts/-n and --length/-L"),
    (["-L", "2"], "needs --drafts/-n and --length/-L"),
    (["-n", "1", "-L", "2", "p.npy", "q.npy"], "takes no VERIFIER P Q"),
    (["-n", "1", "-L", "2", "--instance", "toy"], "either --target and --draft, or --instance"),
    (["-n", "1", "-L", "2", "--instance", "bogus", "NOLAWS"], "--instance must be toy"),
    (["-L", "2", "--tree", "2,x"], "comma-separated branching factors"),
    (["-n", "3", "-L", "2", "--tree", "2,2"], "does not match"),
    (["-n", "1", "-L", "2", "--detect-tv", "2"], "detect_tv must be"),
    (["-n", "1", "-L", "2", "--samples", "5000", "--max-seconds", "1e-9"], "draft arrays drawn"),
    (["-n", str(10**30), "-L", "2"], "of memory, over the limit"),
    (["-n", "1", "-L", str(10**8)], "V^(L+1) = 2^100000001 = about 10^3.01e+07 sequences"),
    (["-n", "2", "-L", str(10**8), "--sampling", "without-replacement"], "needs V >= 2 tokens"),
])
def test_cli_block_bad_input_exits_2_with_one_line(capsys, laws, argv, message):
    if "NOLAWS" in argv:
        argv, laws = [a for a in argv if a != "NOLAWS"], []
    code, out, err = run(capsys, "--block", f"{EXAMPLES}/block_verification.py:verify", *laws, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err


def test_cli_block_bad_files_exit_2(capsys, laws, tmp_path):
    spec = laws[1].rsplit(":", 1)[0]
    for argv, message in [
        (["--block", "/nonexistent/v.py:f", *laws], "no such file"),
        (["--block", f"{EXAMPLES}/block_verification.py:verify", "--target", f"{spec}:nothing",
          "--draft", laws[3]], "has no 'nothing'"),
        (["--block", f"{EXAMPLES}/block_verification.py:verify", "--target", f"{spec}:broken",
          "--draft", laws[3]], "the target raised KeyError"),
    ]:
        code, out, err = run(capsys, *argv, "-n", "1", "-L", "2")
        assert code == 2 and err.count("\n") == 1 and message in err, err


def test_cli_token_audit_still_needs_its_arguments(capsys):
    code, out, err = run(capsys, f"{EXAMPLES}/rrs.py:verify")
    assert code == 2 and err.count("\n") == 1 and "VERIFIER P Q" in err
    code, out, err = run(capsys, f"{EXAMPLES}/rrs.py:verify", "p.npy", "q.npy", "-n", "2",
                         "--instance", "toy", "-L", "2")
    assert code == 2 and err.count("\n") == 1 and "--instance, --length only apply with --block" in err
