"""The exact optimum of block verification (mdtheory.blocks.optimum) against independent references:
Sun et al.'s toy, 1 + alpha* at L = 1, single-draft block verification at K = 1, monotonicity in K."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import mdtheory as md
from mdtheory.blocks import optimum
from mdtheory.blocks.bound import block_efficiency_bound
from mdtheory.blocks.bound import estimate as bound_estimate
from mdtheory.blocks.markov import (
    ConstantLaw,
    all_sequences,
    block_law_tv,
    conditional_tables,
    continuation_probs,
    draft_multisets,
    draft_tuples,
    random_instance,
    sequence_probs,
    sun_toy,
)
from mdtheory.blocks.trees import DraftTree
from mdtheory.certify import CERT_TOL
from mdtheory.errors import (
    InvalidDistributionError,
    InvalidInputError,
    ProblemTooLargeError,
)
from tests.tolerances import FEASIBILITY, ROUNDING, SOLVER


def _sequences(V, L):
    return [tuple(s) for s in all_sequences(V, L).tolist()]


def token_by_token_law(target, draft, V, L):
    """Block law of single-draft token-by-token speculative sampling (accept x_i with probability
    min(1, p/q), else emit a token of the normalised residual (p - q)+; after L acceptances a bonus
    token from p), by enumeration of the draft."""
    law: dict[tuple, float] = {}
    for x in _sequences(V, L):
        qx = np.prod([draft(x[:i])[x[i]] for i in range(L)])
        reach = qx
        for i in range(L):
            p, q = target(x[:i]), draft(x[:i])
            acc = min(1.0, p[x[i]] / q[x[i]])
            residual = np.maximum(p - q, 0.0)
            if residual.sum() > 0:
                for v in range(V):
                    b = x[:i] + (v,)
                    law[b] = law.get(b, 0.0) + reach * (1 - acc) * residual[v] / residual.sum()
            reach *= acc
        for v in range(V):
            b = x + (v,)
            law[b] = law.get(b, 0.0) + reach * target(x)[v]
    return law


def block_verification_law(target, draft, V, L):
    """Block law of Sun et al.'s single-draft block verification (ICLR 2025, Algorithm 2), written
    from its definition and enumerated over the draft: weights p_0 = 1,
    p_i = min(1, p_{i-1} p(x_i|x_<i) / q(x_i|x_<i)); residual r_i = (p_i p(.|x_<=i) - q(.|x_<=i))+;
    acceptance probabilities h_i = |r_i| / (|r_i| + 1 - p_i) for i < L and h_L = p_L; the accepted
    length tau is the largest i with eta_i <= h_i (0 if none); the correction is drawn from r_tau
    normalised (r_0 = (p - q)+), or from p(.|x) when tau = L."""
    law: dict[tuple, float] = {}
    for x in _sequences(V, L):
        qx = np.prod([draft(x[:i])[x[i]] for i in range(L)])
        weights = [1.0]
        for i in range(1, L + 1):
            weights.append(min(1.0, weights[-1] * target(x[:i - 1])[x[i - 1]] / draft(x[:i - 1])[x[i - 1]]))
        residuals, h = [], [1.0]
        for i in range(L + 1):
            residuals.append(np.maximum(weights[i] * target(x[:i]) - draft(x[:i]), 0.0))
        for i in range(1, L + 1):
            if i == L:
                h.append(weights[L])
            else:
                mass = residuals[i].sum()
                h.append(mass / (mass + 1 - weights[i]) if mass + 1 - weights[i] > 0 else 0.0)
        for tau in range(L + 1):
            prob = h[tau] * np.prod([1 - h[j] for j in range(tau + 1, L + 1)])
            if prob == 0:
                continue
            correction = target(x) if tau == L else residuals[tau] / residuals[tau].sum()
            for v in range(V):
                b = x[:tau] + (v,)
                law[b] = law.get(b, 0.0) + qx * prob * correction[v]
    return law


def efficiency(law):
    return sum(len(b) * m for b, m in law.items())


# --- Sun et al.'s toy ------------------------------------------------------------------------------

def test_toy_optimum_is_20_ninths():
    res = md.optimal_block_efficiency(*sun_toy(), n=1, length=2)
    assert res.success and res.status == "optimal"
    assert res.value == pytest.approx(20 / 9, abs=SOLVER)
    assert res.acceptance == pytest.approx([6 / 9, 5 / 9], abs=SOLVER)
    assert abs(res.certificate_gap) <= CERT_TOL and res.validity_tv <= CERT_TOL
    assert res.value == pytest.approx(1 + res.acceptance.sum(), abs=ROUNDING)


def test_toy_token_by_token_is_valid_and_below_the_optimum():
    target, draft = sun_toy()
    law = token_by_token_law(target, draft, 2, 2)
    assert block_law_tv(law, target, 2) <= ROUNDING
    assert efficiency(law) == pytest.approx(19 / 9, abs=ROUNDING)
    assert efficiency(law) < md.optimal_block_efficiency(target, draft, n=1, length=2).value - 0.1


def test_toy_validity_ignoring_coupling_reaches_21_ninths_and_is_rejected():
    """The maximal coupling of the draft block X ~ q_2 with a target block Y ~ p_2 (diagonal where
    they agree, X = aa paired with Y = bb otherwise), emitting Y up to the first disagreement plus one
    token (plus a bonus after two agreements): E|B| = 21/9, Sun et al.'s "ideal" 12/9 accepted."""
    target, draft = sun_toy()
    q2 = {s: Fraction(c, 9) for s, c in zip(_sequences(2, 2), (4, 2, 2, 1), strict=True)}
    p2 = {s: Fraction(c, 9) for s, c in zip(_sequences(2, 2), (1, 2, 2, 4), strict=True)}
    coupling = {(s, s): min(q2[s], p2[s]) for s in q2}
    coupling[((0, 0), (1, 1))] = q2[(0, 0)] - p2[(0, 0)]
    for s in q2:  # a coupling of q_2 and p_2
        assert sum(m for (x, _), m in coupling.items() if x == s) == q2[s]
        assert sum(m for (_, y), m in coupling.items() if y == s) == p2[s]
    law: dict[tuple, float] = {}
    for (x, y), m in coupling.items():
        k = next((i for i in range(2) if x[i] != y[i]), 2)
        if k < 2:
            law[y[:k + 1]] = law.get(y[:k + 1], 0.0) + float(m)
        else:
            for v in range(2):
                law[y + (v,)] = law.get(y + (v,), 0.0) + float(m) * target(y)[v]
    assert sum(law.values()) == pytest.approx(1.0, abs=ROUNDING)
    assert efficiency(law) == pytest.approx(21 / 9, abs=ROUNDING)
    assert block_law_tv(law, target, 2) > 0.05


def test_toy_block_verification_reaches_the_optimum():
    target, draft = sun_toy()
    law = block_verification_law(target, draft, 2, 2)
    assert block_law_tv(law, target, 2) <= ROUNDING
    assert efficiency(law) == pytest.approx(20 / 9, abs=ROUNDING)


# --- agreement with independent formulations ---------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("V", "K"), [(2, 3), (3, 2), (4, 3), (5, 2)])
def test_length_one_is_one_plus_alpha_star(V, K, seed):
    target, draft = random_instance(V, seed, concentration=0.7)
    res = md.optimal_block_efficiency(target, draft, n=K, length=1)
    assert res.value == pytest.approx(1 + md.alpha_star(target(()), draft(()), K), abs=SOLVER)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("V", "L"), [(2, 3), (3, 2), (3, 3), (4, 2)])
def test_single_draft_is_block_verification(V, L, seed):
    """Sun et al. prove block verification optimal for one draft; the LP and the algorithm agree."""
    target, draft = random_instance(V, seed, concentration=0.8)
    law = block_verification_law(target, draft, V, L)
    assert block_law_tv(law, target, L) <= ROUNDING
    res = md.optimal_block_efficiency(target, draft, n=1, length=L)
    assert res.value == pytest.approx(efficiency(law), abs=SOLVER)


@pytest.mark.parametrize("seed", range(3))
def test_monotone_in_the_number_of_drafts_and_at_most_one_plus_length(seed):
    target, draft = random_instance(3, seed, concentration=0.8)
    for L in (1, 2):
        values = [md.optimal_block_efficiency(target, draft, n=K, length=L).value for K in (1, 2, 3)]
        assert all(b >= a - SOLVER for a, b in itertools.pairwise(values))
        assert all(1 - SOLVER <= v <= 1 + L + SOLVER for v in values)


def test_identical_laws_accept_everything():
    law = ConstantLaw([0.2, 0.5, 0.3])
    res = md.optimal_block_efficiency(law, law, n=2, length=2)
    assert res.value == pytest.approx(3.0, abs=SOLVER)


# --- the certificate, checked again from the outside ----------------------------------------------

def test_plan_is_a_valid_verifier_of_ordered_tuples():
    """Expand the multiset plan to ordered tuples (each ordering gets the multiset's conditional law)
    and rebuild the block law from draft_tuples: it is the result's block law and it is valid."""
    target, draft = random_instance(3, 5, concentration=0.8)
    res = md.optimal_block_efficiency(target, draft, n=2, length=2)
    index = {tuple(map(tuple, X)): i for i, X in enumerate(res.support.tolist())}
    tuples, probs = draft_tuples(draft, 2, 2)
    law: dict[tuple, float] = {}
    plan = res.plan.toarray()
    for X, qx in zip(tuples.tolist(), probs, strict=True):
        if qx == 0:
            continue
        i = index[tuple(sorted(map(tuple, X)))]
        for j in np.nonzero(plan[i])[0]:
            b = res.blocks[j]
            assert any(tuple(x[:len(b) - 1]) == b[:-1] for x in X)
            law[b] = law.get(b, 0.0) + qx * plan[i, j] / res.support_probs[i]
    assert block_law_tv(law, target, 2) <= CERT_TOL
    assert efficiency(law) == pytest.approx(res.value, abs=SOLVER)
    assert max(abs(law.get(b, 0.0) - m) for b, m in res.block_law.items()) <= SOLVER


def test_any_potentials_give_an_upper_bound():
    """Weak duality: dual_bound(w) >= the optimum for arbitrary w, and the LP's own w attains it."""
    target, draft = random_instance(3, 1, concentration=0.8)
    res = md.optimal_block_efficiency(target, draft, n=2, length=2)
    rng = np.random.default_rng(0)
    for _ in range(5):
        w = rng.normal(size=3 ** 3)
        assert optimum.dual_bound(w, target, res.support, res.support_probs, 3, 2) >= res.value - ROUNDING
    assert res.upper_bound == pytest.approx(res.value, abs=CERT_TOL)


def test_sparse_laws_single_draft_is_block_verification():
    """Dirichlet(0.1) laws put masses down to 1e-38 on some tokens. Over 60 such instances every
    answer is proven (where the primal LP's duals are not accurate enough the dual LP gives the
    bound) and at K = 1 equals block verification (Sun et al.)."""
    routes = set()
    for (V, L), seed in itertools.product([(3, 3), (4, 2), (2, 3)], range(20)):
        target, draft = random_instance(V, seed, concentration=0.1)
        law = block_verification_law(target, draft, V, L)
        assert block_law_tv(law, target, L) <= ROUNDING
        res = md.optimal_block_efficiency(target, draft, n=1, length=L)
        assert res.success and abs(res.certificate_gap) <= CERT_TOL and res.validity_tv <= CERT_TOL
        assert res.value == pytest.approx(efficiency(law), abs=SOLVER)
        routes.add(res.dual_from)
    assert routes == {"primal duals", "dual LP"}


@pytest.mark.parametrize(("V", "seed", "L"), [(3, 1, 3), (3, 9, 3), (4, 19, 2)])
def test_sparse_laws_proven_by_the_dual_lp(V, seed, L):
    """The primal LP's duals, mapped back from the scaled LP, bound these at 5.16, 2.19 and 2.59
    against optima 2.98, 1.29 and 1.46; the dual LP solved in its own variables proves them."""
    target, draft = random_instance(V, seed, concentration=0.1)
    res = md.optimal_block_efficiency(target, draft, n=1, length=L)
    assert res.success and res.dual_from == "dual LP" and abs(res.certificate_gap) <= CERT_TOL
    assert res.value == pytest.approx(efficiency(block_verification_law(target, draft, V, L)), abs=SOLVER)


def test_dual_lp_gives_a_bound_and_a_plan_on_any_instance():
    """The dual LP's potentials are a valid bound (weak duality) and its row duals a valid plan; both
    meet the optimum on a dense instance too, where the primal LP already proves it."""
    V, K, L = 3, 2, 2
    target, draft = random_instance(V, 4, concentration=0.8)
    res = md.optimal_block_efficiency(target, draft, n=K, length=L)
    assert res.plan_from == "simplex" and res.dual_from == "primal duals"
    tables = conditional_tables(target, V, L + 1)
    members, drafts, probs = draft_multisets(draft, K, L, V)
    row, bid, blen, offsets = optimum._columns(members, V, L)
    w, x, _ = optimum._dual_lp(row, bid, blen, probs, tables, offsets, members.shape[0], V, L)
    assert optimum.dual_bound(w, target, drafts, probs, V, L) == pytest.approx(res.value, abs=CERT_TOL)
    law: dict = {}
    blocks = optimum._block_tuples(V, L)
    for b, m in zip(bid, x, strict=True):
        law[blocks[b]] = law.get(blocks[b], 0.0) + m
    assert min(x) >= -FEASIBILITY and block_law_tv(law, target, L) <= CERT_TOL
    assert efficiency(law) == pytest.approx(res.value, abs=CERT_TOL)


def test_sparse_laws_where_the_scaled_primal_fails():
    """HiGHS returns no proven optimum for the scaled primal LP of these (status Unknown, or duals
    too inaccurate, with presolve on and off, simplex and interior point); the dual LP, solved on its
    own, gives a plan that passes the plan's own checks and a bound that meets it."""
    sources = set()
    for V, L, K, seed in [(2, 3, 2, 7), (4, 2, 2, 1), (3, 2, 3, 0)]:
        target, draft = random_instance(V, seed, concentration=0.1)
        res = md.optimal_block_efficiency(target, draft, n=K, length=L)
        assert res.success and abs(res.certificate_gap) <= CERT_TOL and res.validity_tv <= CERT_TOL
        assert 1 - SOLVER <= res.value <= 1 + L + SOLVER
        sources.add(res.plan_from)
    assert "dual LP" in sources


@pytest.mark.parametrize(("V", "seed"), [(3, 0), (2, 41)])
def test_sparse_laws_that_failed_to_solve_or_to_prove(V, seed):
    target, draft = random_instance(V, seed, concentration=0.1)
    law = block_verification_law(target, draft, V, 3)
    res = md.optimal_block_efficiency(target, draft, n=1, length=3)
    assert res.success and res.value == pytest.approx(efficiency(law), abs=SOLVER)


def test_presolve_failure_is_recovered():
    """With the implied validity row kept, HiGHS's presolve calls this feasible LP infeasible; the
    solve falls back to presolve off, and the LP as built (that row left out) solves with presolve."""
    V, K, L = 3, 3, 2
    target, draft = random_instance(V, 2, concentration=0.8)
    tables = conditional_tables(target, V, L + 1)
    members, _, probs = draft_multisets(draft, K, L, V)
    row, bid, blen, offsets = optimum._columns(members, V, L)
    args = (blen, row, bid, probs, sequence_probs(target, V, L + 1, tables),
            continuation_probs(target, V, L + 1, tables), members.shape[0], int(offsets[-1]), V, L)
    x_full, _, _, presolve_full = optimum._solve(*optimum._lp(*args, redundant=True))
    x, _, _, presolve = optimum._solve(*optimum._lp(*args))
    if presolve_full == "on":
        pytest.skip("this HiGHS's presolve solves the LP with its dependent row: nothing to recover")
    assert presolve_full == "off" and presolve == "on"
    assert -optimum._lp(*args)[0] @ x == pytest.approx(-optimum._lp(*args)[0] @ x_full, abs=SOLVER)
    res = md.optimal_block_efficiency(target, draft, n=K, length=L)
    assert res.success and res.value == pytest.approx(float(blen @ x[:row.size]), abs=SOLVER)


def test_to_dict_is_json_ready():
    import json

    res = md.optimal_block_efficiency(*sun_toy(), n=2, length=1)
    out = json.loads(json.dumps(res.to_dict()))
    assert out["success"] is True and out["value"] == pytest.approx(res.value)
    assert sum(out["plan"]["mass"]) == pytest.approx(1.0, abs=SOLVER)
    assert float(res) == res.value


# --- bad input and sizes -------------------------------------------------------------------------

def test_refuses_by_estimate():
    target, draft = random_instance(4, 0)
    with pytest.raises(ProblemTooLargeError, match="block-efficiency LP .*estimated"):
        md.optimal_block_efficiency(target, draft, n=4, length=3)
    est = optimum.estimate(4, 4, 3)
    assert est.seconds > 60 and optimum.lp_size(4, 4, 3)["multisets"] == math.comb(64 + 3, 4)


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"n": 0, "length": 2}, InvalidInputError), ({"n": 1, "length": 0}, InvalidInputError),
    ({"n": 1.5, "length": 1}, InvalidInputError), ({"n": True, "length": 1}, InvalidInputError)])
def test_bad_sizes(kwargs, error):
    with pytest.raises(error):
        md.optimal_block_efficiency(*sun_toy(), **kwargs)


def test_bad_laws():
    target, _ = sun_toy()
    with pytest.raises(InvalidInputError, match="different vocabularies"):
        md.optimal_block_efficiency(target, ConstantLaw([0.2, 0.3, 0.5]), n=1, length=1)
    with pytest.raises(InvalidDistributionError, match="not a probability vector"):
        md.optimal_block_efficiency(target, lambda c: np.array([0.5, 0.6]) if c else np.array([0.5, 0.5]),
                                    n=1, length=2)
    with pytest.raises(InvalidInputError, match="callable"):
        md.optimal_block_efficiency([0.5, 0.5], target, n=1, length=1)


# --- the upper bound (mdtheory.blocks.bound) ---------------------------------------------------------

@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("K", "L"), [(1, 2), (2, 2), (3, 2), (2, 3)])
def test_bound_is_above_the_optimum_for_every_tree(K, L, seed):
    target, draft = random_instance(3, seed, concentration=0.8)
    opt = md.optimal_block_efficiency(target, draft, n=K, length=L).value
    full = block_efficiency_bound(target, draft, n=K, length=L)
    assert full.complete and opt <= full.value + SOLVER
    for expansions in (1, 2, 3, 5, 8):
        part = block_efficiency_bound(target, draft, n=K, length=L, expansions=expansions, batch=2)
        assert part.complete == (expansions >= sum(3 ** j for j in range(L)))  # internal nodes
        assert part.value >= full.value - ROUNDING and part.value >= opt - SOLVER
        assert part.value <= 1 + L


@pytest.mark.parametrize("seed", range(3))
def test_complete_prefix_set_bound_is_the_sequence_level_alpha_star(seed):
    """With the whole tree, beta_m is alpha* of the m-prefix laws (md.alpha_star on V^m)."""
    V, K, L = 3, 2, 3
    target, draft = random_instance(V, seed, concentration=0.8)
    res = block_efficiency_bound(target, draft, n=K, length=L)
    for m in range(1, L + 1):
        exact = md.alpha_star(sequence_probs(target, V, m), sequence_probs(draft, V, m), K, normalize=True)
        assert res.prefix_set[m - 1] == pytest.approx(exact, abs=SOLVER)


@pytest.mark.parametrize("seed", range(6))
def test_nested_bound_is_exact_for_one_draft(seed):
    """At K = 1 the nested recursion reaches the optimum (Sun et al.'s block verification)."""
    target, draft = random_instance(3, seed, concentration=0.8)
    for L in (2, 3):
        opt = md.optimal_block_efficiency(target, draft, n=1, length=L).value
        assert block_efficiency_bound(target, draft, n=1, length=L).value == pytest.approx(opt, abs=SOLVER)


def test_the_alpha_star_sum_alone_is_loose_on_the_toy():
    res = block_efficiency_bound(*sun_toy(), n=1, length=2)
    assert 1 + res.prefix_set.sum() == pytest.approx(21 / 9, abs=ROUNDING)
    assert res.value == pytest.approx(20 / 9, abs=ROUNDING)


def test_bound_reads_batched_laws_like_per_context_laws():
    from mdtheory.language.drafters import NGramLaw

    rng = np.random.default_rng(0)
    texts = [rng.integers(1, 5, size=40) for _ in range(6)]
    law = NGramLaw.fit(texts, 5, order=2)

    class Batched:
        def batch(self, contexts):
            return law.laws([tuple(c) for c in contexts])

    target, _ = random_instance(5, 1, concentration=1.0)
    per_context = lambda c: np.asarray(law(tuple(c)))  # noqa: E731
    a = block_efficiency_bound(target, law, n=2, length=3, context=(1, 2), expansions=9, batch=4)
    b = block_efficiency_bound(target, per_context, n=2, length=3, context=(1, 2), expansions=9, batch=4)
    c = block_efficiency_bound(target, Batched(), n=2, length=3, context=(1, 2), expansions=9, batch=4)
    assert a.value == b.value == c.value and a.expansions == 9
    assert md.optimal_block_efficiency(law, target, n=2, length=2).value == pytest.approx(
        md.optimal_block_efficiency(per_context, target, n=2, length=2).value, abs=ROUNDING)


def test_bound_bad_input():
    target, draft = sun_toy()
    with pytest.raises(InvalidInputError):
        block_efficiency_bound(target, draft, n=1, length=2, expansions=0)
    with pytest.raises(InvalidDistributionError, match="draft law"):
        block_efficiency_bound(target, lambda c: np.array([0.9, 0.9]), n=1, length=2)
    with pytest.raises(InvalidInputError, match="shape"):
        block_efficiency_bound(target, ConstantLaw([0.2, 0.3, 0.5]), n=1, length=2)
    with pytest.raises(InvalidInputError, match="2\\^53"):
        block_efficiency_bound(target, draft, n=2**53 + 1, length=2)


@pytest.mark.parametrize("kw", [{"n": 10**12, "length": 2}, {"n": 2**53, "length": 2},
                                {"n": 10**9, "length": 4}, {"tree": DraftTree((10**4,) * 3)}])
def test_bound_with_the_draft_equal_to_the_target_is_one_plus_length(kw):
    """With the draft equal to the target every block of L tokens is accepted, so the optimum is
    1 + L at any number of drafts; the path masses of a depth sum to one only up to rounding, and
    raising that sum to the n-th power would put the bound below the optimum (even negative for huge
    n). The prefix sets' masses are taken from their complements."""
    law = ConstantLaw([0.1, 0.2, 0.3, 0.4])
    res = block_efficiency_bound(law, law, **kw)
    assert res.value >= 1 + res.length


@pytest.mark.parametrize("seed", range(2))
def test_every_verifier_is_below_the_optimum_and_block_verification_reaches_it_alone(seed):
    from mdtheory.blocks import make_verifier

    target, draft = random_instance(3, seed, concentration=0.8)
    for K in (1, 2):
        opt = md.optimal_block_efficiency(target, draft, n=K, length=2).value
        for name, kw in (("token", {"rule": "rrs"}), ("block", {}), ("multipath", {}), ("traversal", {})):
            value = float(make_verifier(name, **kw).block_efficiency(target, draft, K, 2))
            assert value <= opt + SOLVER
            if K == 1 and name != "token":
                assert value == pytest.approx(opt, abs=SOLVER)


def test_float32_laws_are_accepted_by_the_optimum_and_the_bound():
    """A float32 law's row misses sum 1 in float64 by float32 rounding; it is judged by its own
    precision's tolerance, as at the front door, and gives the float64 law's answers."""
    x = np.array([0.1, 0.2, 0.7], dtype=np.float32)
    y = np.array([0.3, 0.3, 0.4], dtype=np.float32)
    assert abs(float(x.astype(np.float64).sum()) - 1) > 1e-9
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    res32 = md.optimal_block_efficiency(lambda c: x, lambda c: y, n=1, length=2)
    res64 = md.optimal_block_efficiency(lambda c: x64 / x64.sum(), lambda c: y64 / y64.sum(), n=1, length=2)
    assert res32.success and res32.value == pytest.approx(res64.value, abs=SOLVER)
    b32 = block_efficiency_bound(lambda c: x, lambda c: y, 1, 2)
    b64 = block_efficiency_bound(lambda c: x64 / x64.sum(), lambda c: y64 / y64.sum(), 1, 2)
    assert b32.value == pytest.approx(b64.value, abs=SOLVER)
    with pytest.raises(InvalidDistributionError):
        md.optimal_block_efficiency(lambda c: np.array([0.1, 0.2, 0.7003]), lambda c: x, n=1, length=1)


def _raises_at_depth_one(context):
    if len(context) == 1:
        raise ValueError("no law here")
    return np.array([0.5, 0.5])


@pytest.mark.parametrize("law", [_raises_at_depth_one, lambda c: None, lambda c: 0.5, lambda c: "ab", 5])
def test_bad_law_callables_are_named_errors(law):
    _, draft = sun_toy()
    with pytest.raises(InvalidInputError):
        md.optimal_block_efficiency(law, draft, n=1, length=2)
    with pytest.raises(InvalidInputError):
        block_efficiency_bound(law, draft, 1, 2)


@pytest.mark.parametrize(("n", "length"), [(1000, 30), (10**9, 10**9), (1, 10**9)])
def test_huge_sizes_are_refused_by_estimate(n, length):
    with pytest.raises(ProblemTooLargeError):
        md.optimal_block_efficiency(*sun_toy(), n=n, length=length)


def test_huge_bound_is_refused_by_estimate():
    """Its work grows with the tree (expansions x V) and, up to the tree's depth, with the depths;
    deeper depths repeat the last, so L = 10**6 is cheap, while a tree of 10**9 expansions or arrays
    of L = 10**9 depths are refused (memory) before the tree is grown."""
    res = block_efficiency_bound(*sun_toy(), 10**9, 10**6)
    assert res.acceptance.shape == (10**6,) and 1 <= res.value <= 1 + 10**6
    assert np.all(np.diff(res.acceptance) <= 0) and res.acceptance[-1] == res.acceptance[res.expansions + 1]
    assert bound_estimate(2, 10**6, 256).seconds < 1
    with pytest.raises(ProblemTooLargeError):
        block_efficiency_bound(*sun_toy(), 10**9, 10**6, max_seconds=1e-3)
    with pytest.raises(ProblemTooLargeError):
        block_efficiency_bound(*sun_toy(), 10**9, 10**6, expansions=10**9)
    with pytest.raises(ProblemTooLargeError):
        block_efficiency_bound(*sun_toy(), 10**9, 10**9)


def test_bound_past_the_trees_depth_repeats_the_last_depth():
    """With few expansions the tree stops at depth D; depths past D + 1 have the same cells. The
    shortcut (K iid drafts) against the depth-by-depth sums (the same drafts given as a tree)."""
    from mdtheory.blocks.trees import iid_drafts

    target, draft = random_instance(3, 0, concentration=0.8)
    fast = block_efficiency_bound(target, draft, 2, 40, expansions=5)
    every = block_efficiency_bound(target, draft, tree=iid_drafts(2, 40), expansions=5)
    assert fast.acceptance == pytest.approx(every.acceptance, abs=ROUNDING)
    assert np.all(fast.cells == every.cells) and fast.acceptance[-1] < fast.acceptance[0]


# --- guards of the optimum and the bound: precision, complex values, contexts, limits, warnings ------

def _softmax32(V: int, seed: int) -> np.ndarray:
    """A float32 law whose float64 sum misses one by 3e-5: within float32's tolerance, outside
    float64's."""
    z = np.random.default_rng(seed).standard_normal(V).astype(np.float32)
    p = (np.exp(z) / np.exp(z).sum()).astype(np.float32)
    p[0] += np.float32(3e-5)
    return p


def test_float32_laws_off_float64s_tolerance_are_accepted_by_both():
    p, q = _softmax32(6, 0), _softmax32(6, 1)
    assert abs(float(p.astype(np.float64).sum()) - 1) > 1e-5
    exact = md.optimal_block_efficiency(lambda c: p, lambda c: q, n=2, length=1)
    bound = block_efficiency_bound(lambda c: p, lambda c: q, 2, 1)
    p64, q64 = p.astype(np.float64), q.astype(np.float64)
    # at L = 1 the bound is the optimum: 1 + alpha* of the renormalised laws
    one = 1 + md.alpha_star(p64 / p64.sum(), q64 / q64.sum(), 2)
    assert exact.value == pytest.approx(one, abs=SOLVER) and bound.value == pytest.approx(one, abs=SOLVER)


@pytest.mark.parametrize("where", ["target", "draft"])
def test_complex_laws_are_refused_by_the_optimum_and_the_bound(where):
    real = lambda c: np.array([0.5, 0.5])  # noqa: E731
    laws = {"target": real, "draft": real, where: lambda c: np.array([0.5 + 0.1j, 0.5])}
    with pytest.raises(InvalidDistributionError, match="complex"):
        md.optimal_block_efficiency(laws["target"], laws["draft"], n=2, length=2)
    with pytest.raises(InvalidDistributionError, match="complex"):
        block_efficiency_bound(laws["target"], laws["draft"], 2, 2)
    # a zero imaginary part is complex too: the dtype is refused, as at the front door
    with pytest.raises(InvalidDistributionError, match="complex"):
        block_efficiency_bound(lambda c: np.array([0.5, 0.5], dtype=complex), real, 2, 2)


@pytest.mark.parametrize("context", [(1.5,), ("a",), (None,), 3])
def test_a_non_integer_context_is_a_named_error(context):
    calls = []

    def law(c):
        calls.append(c)
        return np.array([0.5, 0.5])
    with pytest.raises(InvalidInputError, match="context must be a sequence of integer tokens"):
        block_efficiency_bound(law, law, 2, 2, context=context)
    assert calls == []


@pytest.mark.parametrize("limit", [{"max_seconds": float("nan")}, {"max_bytes": float("nan")},
                                   {"max_seconds": -1.0}, {"max_seconds": "10"}])
def test_bad_limits_are_named_errors_in_the_optimum_and_the_bound(limit):
    calls = []

    def law(c):
        calls.append(c)
        return np.array([0.5, 0.5])
    with pytest.raises(InvalidInputError, match=f"{next(iter(limit))} must be a positive number"):
        md.optimal_block_efficiency(law, law, n=2, length=2, **limit)
    with pytest.raises(InvalidInputError, match=f"{next(iter(limit))} must be a positive number"):
        block_efficiency_bound(law, law, 2, 2, **limit)
    assert calls == []


def test_none_is_no_limit_in_the_optimum_and_the_bound():
    target, draft = sun_toy()
    a = md.optimal_block_efficiency(target, draft, n=1, length=2, max_seconds=None, max_bytes=None)
    b = block_efficiency_bound(target, draft, 1, 2, max_seconds=None, max_bytes=None)
    assert a.value == pytest.approx(20 / 9, abs=SOLVER) and b.value == pytest.approx(20 / 9, abs=ROUNDING)


def test_no_runtime_warning_where_a_prefix_set_holds_all_the_draft_mass(recwarn):
    """The first cell in the order of q/p has q = 1e-20 and p = 1e-40; the rest holds q's mass
    1.0 in floats, so log1p(-q) meets -1."""
    res = block_efficiency_bound(lambda c: np.array([1e-40, 1.0]), lambda c: np.array([1e-20, 1.0]), 2, 1)
    assert [str(w.message) for w in recwarn] == []
    assert res.value == pytest.approx(2.0, abs=ROUNDING)


@pytest.mark.parametrize(("V", "length"), [(4000, 1), (32000, 1), (465, 4), (2, 10**6)])
def test_the_bound_estimate_counts_only_the_nodes_it_can_expand(V, length):
    """Only prefixes of fewer than L tokens are expanded: at L = 1 the root alone, whatever the
    expansions asked for; the estimate follows (V = 4,000 and 32,000 at L = 1 run in about 1 and
    10 ms; counting 256 expansions would estimate 102 s and 819 s)."""
    rng = np.random.default_rng(V)
    p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
    res = block_efficiency_bound(ConstantLaw(p), ConstantLaw(q), 2, length, expansions=16)
    est = bound_estimate(V, length, 16)
    expanded = 1 if length == 1 else 16  # the root alone, or all 16 (V >= 2, L >= 2: 1 + V >= 3)
    assert res.expansions == expanded
    assert f"{float(expanded):.3g} expansions" in est.what
    assert est.bytes >= 400 * (1 + res.expansions * V)
    if length == 1:
        assert bound_estimate(V, 1, 256).seconds < 0.1 and bound_estimate(V, 1, 256).bytes < 2e7
