"""Draft models: containment, set law and tuple law agree; known values."""

import itertools

import numpy as np
import pytest

import mdtheory as md
from mdtheory.rules import make_rule

ALL_MASKS = {V: np.array(list(itertools.product([False, True], repeat=V))) for V in range(1, 8)}


def containment_from_set_law(model):
    law = model.set_law()
    masks = ALL_MASKS[model.V]
    return np.array([law.probs[~(law.members & ~T).any(axis=1)].sum() for T in masks])


def models(rng, V, n, concentration):
    q = rng.dirichlet(np.full(V, concentration))
    out = [md.IID(q, n), md.Independent(rng.dirichlet(np.ones(V), size=n))]
    if np.count_nonzero(q) >= n:
        out += [md.WithoutReplacement(q, n), md.ConditionalPoisson(q, n)]
    return out


@pytest.mark.parametrize("V,n", [(3, 2), (4, 3), (5, 3), (6, 4), (7, 3), (5, 5)])
@pytest.mark.parametrize("concentration", [0.05, 0.5, 3.0])
def test_containment_equals_set_law(V, n, concentration):
    rng = np.random.default_rng(V * 100 + n + int(concentration * 10))
    for model in models(rng, V, n, concentration):
        direct = model.containment(ALL_MASKS[V])
        assert np.abs(direct - containment_from_set_law(model)).max() <= 1e-13, model


@pytest.mark.parametrize("V,n", [(3, 2), (4, 3), (5, 2)])
def test_tuple_law_aggregates_to_set_law(V, n):
    rng = np.random.default_rng(V + n)
    for model in models(rng, V, n, 1.0):
        tl, sl = model.tuple_law(), model.set_law()
        assert tl.probs.sum() == pytest.approx(1.0, abs=1e-14)
        agg = {}
        for tup, pr in zip(tl.tuples, tl.probs, strict=True):
            key = tuple(sorted(set(tup.tolist())))
            agg[key] = agg.get(key, 0.0) + pr
        want = {tuple(np.flatnonzero(m).tolist()): w for m, w in zip(sl.members, sl.probs, strict=True)}
        assert agg.keys() == want.keys()
        for key, value in agg.items():
            assert value == pytest.approx(want[key], abs=1e-14), (model, key)


def test_without_replacement_tuple_probabilities_are_successive_sampling():
    q = np.array([0.5, 0.3, 0.2])
    tl = md.WithoutReplacement(q, 2).tuple_law()
    got = {tuple(t): pr for t, pr in zip(tl.tuples.tolist(), tl.probs, strict=True)}
    for i, j in itertools.permutations(range(3), 2):
        assert got[(i, j)] == pytest.approx(q[i] * q[j] / (1 - q[i]), abs=1e-15)


def test_without_replacement_containment_extreme_scales():
    """1 - q(T) near 1e-8 and masses near 1e-300: the quadrature still matches the exact set law."""
    cases = [np.array([1.6e-2, 3.4e-8, 1.9e-2, 8.9e-5, 0.147, 0.817]),
             np.array([1e-300, 0.25, 0.25, 0.5 - 1e-300, 1e-12])]
    for q in cases:
        q = q / q.sum()
        for n in (3, 4):
            model = md.WithoutReplacement(q, n)
            assert np.abs(model.containment(ALL_MASKS[q.size]) -
                          containment_from_set_law(model)).max() <= 1e-13


def test_without_replacement_monte_carlo():
    """The set law matches simulated successive sampling (Gumbel-top-k)."""
    rng = np.random.default_rng(0)
    q = np.array([0.4, 0.25, 0.2, 0.1, 0.05])
    n, N = 3, 200_000
    keys = np.log(q)[None, :] + rng.gumbel(size=(N, q.size))
    drafted = np.argsort(-keys, axis=1)[:, :n]
    codes = (np.bitwise_or.reduce(1 << drafted, axis=1))
    law = md.WithoutReplacement(q, n).set_law()
    for members, w in zip(law.members, law.probs, strict=True):
        code = int(np.sum(1 << np.flatnonzero(members)))
        freq = np.mean(codes == code)
        assert abs(freq - w) <= 5 * np.sqrt(w * (1 - w) / N) + 1e-4, (members, freq, w)


def test_coverage_is_one_minus_containment_of_complement():
    m = md.IID([0.5, 0.25, 0.25], 2)
    assert m.coverage([True, False, False]) == pytest.approx(1 - 0.5**2)


def test_make_draft_model_errors():
    with pytest.raises(md.InvalidInputError, match="unknown sampling 'bogus'; valid choices: iid"):
        md.make_draft_model([0.5, 0.5], 2, "bogus")
    with pytest.raises(md.InvalidInputError, match="needs the number of drafts"):
        md.make_draft_model([0.5, 0.5], None, "iid")
    with pytest.raises(md.InvalidInputError, match=r"n = 3 contradicts .* n = 2 drafts"):
        md.make_draft_model(np.full((2, 3), 1 / 3), 3, "independent")
    with pytest.raises(md.InvalidInputError, match=r"n <= the number of tokens with q > 0 \(2\), got n = 3"):
        md.WithoutReplacement([0.5, 0.5, 0.0], 3)
    with pytest.raises(md.InvalidDistributionError, match=r"shape \(2, 3\); expected n equal axes"):
        md.Joint(np.full((2, 3), 1 / 6))


def test_size_guards():
    with pytest.raises(md.ProblemTooLargeError, match=r"tuple law has up to 1e\+10 tuples"):
        md.IID(np.full(100, 0.01), 5).tuple_law()
    with pytest.raises(md.ProblemTooLargeError, match="set law has up to"):
        md.IID(np.full(2000, 1 / 2000), 4).set_law()


def test_iid_containment_of_a_few_sets_is_exactly_summed():
    """q(T)^n for the certificate's cut: q(T) within log2(V) u by the pairwise sum at small n, and
    correctly rounded where n would amplify that past 1e-13 (the power multiplies its relative
    error by n; the BLAS dot product erred by 3e-13 at V = 10^6, failing the certificate at
    n = 10^6). Reference: the exact rational sum of the floats."""
    from fractions import Fraction

    V = 200_000
    q = np.full(V, 0.1 / V)
    q[: V // 2] = 1.9 / V
    T = np.zeros(V, dtype=bool)
    T[: V // 2] = True
    exact = float(sum((Fraction(x) for x in q[T]), Fraction(0)))
    assert md.IID(q, 1, normalize=True).containment(T) == pytest.approx(exact / q.sum(), rel=1e-15)
    assert md.IID(q, 1).containment(T) == pytest.approx(exact, rel=18 * 2.0 ** -53, abs=0.0)
    T[:] = True
    T[0] = False  # q(T) = 1 - 9.5e-6: (q(T))^(10^6) = e^-9.5
    exact = float(sum((Fraction(x) for x in q[T]), Fraction(0)))
    assert md.IID(q, 10**6).containment(T) == pytest.approx(exact ** 10**6, rel=1e-9)


@pytest.mark.slow
def test_conditional_poisson_set_law_beyond_the_float_range():
    """Two heavy tokens and a subnormal rest: the set weights, even rescaled, overflow float64, so
    the set law is computed in logarithms (else a NaN set law, a NaN acceptance, a refused prefix
    certificate). Every set holds both heavy tokens and 3 of the 6 subnormal ones, each with
    probability 1/20."""
    q = np.full(8, 1e-323)
    q[:2] = 0.6, 0.4
    model = md.ConditionalPoisson(q, 5)
    law = model.set_law()
    both = law.members[:, :2].all(axis=1)
    assert np.abs(law.probs - np.where(both, 1 / 20, 0.0)).max() <= 1e-15
    assert np.abs(model.containment(np.ones((600, 8), bool)) - 1.0).max() <= 1e-15  # many sets
    p = np.random.default_rng(3).dirichlet(np.full(8, 0.5))
    values = [md.optimal_acceptance(p, q, 5, "conditional-poisson", method=m).value
              for m in ("prefix", "subsets", "dual", "mnp")]
    rule = make_rule("optimal", p, q, 5, sampling="conditional-poisson")
    acceptance, output = rule.enumerate()
    assert max(values) - min(values) <= 1e-12 and abs(acceptance - values[0]) <= 1e-9
    assert np.abs(output - p).sum() <= 1e-12


def test_conditional_poisson_set_law_with_subnormal_partial_products():
    """q = (3 subnormal tokens, 0.887, 0.113), n = 4: the rescaled weights' products passed through
    subnormals (set probabilities 0.322 / 0.339 instead of 1/3 each), so the set-law routes proved
    alpha* = 0.7426 while the prefix route's cut gave 0.7311; exact: every set holding both heavy
    tokens has probability 1/3."""
    q = np.array([1.5e-323, 1.5e-323, 0.8871210113377904, 1.5e-323, 0.11287898866220959])
    p = np.array([0.0, 0.0, 0.06444495390947043, 0.9355550460905295, 0.0])
    law = md.ConditionalPoisson(q, 4).set_law()
    both = law.members[:, [2, 4]].all(axis=1)
    assert np.abs(law.probs - np.where(both, 1 / 3, 0.0)).max() <= 1e-15
    values = [md.optimal_acceptance(p, q, 4, "conditional-poisson", method=m).value
              for m in ("prefix", "subsets", "dual", "mnp")]
    assert max(values) - min(values) <= 1e-12
    assert abs(make_rule("optimal", p, q, 4, sampling="conditional-poisson").exact_acceptance()
               - values[0]) <= 1e-9


def exact_cp_inclusion(q, n):
    """Conditional Poisson inclusion probabilities over the exact values of the floats q, by
    enumerating the n-sets in rationals."""
    from fractions import Fraction

    w = [Fraction(float(x)) for x in q]
    sets = [A for A in itertools.combinations(range(len(w)), n) if all(w[i] for i in A)]
    weights = [np.prod([w[i] for i in A], dtype=object) for A in sets]
    total = sum(weights)
    return [float(sum(wt for A, wt in zip(sets, weights, strict=True) if i in A) / total)
            for i in range(len(w))]


@pytest.mark.parametrize("q,n", [
    ([0.6, 0.4, 1e-320, 1e-320], 3),  # weights ~5e-321 through subnormals: pi = 0.9993, 1.0003
    ([0.6, 0.4, 3e-310, 1e-320, 2e-318, 5e-324], 4),
    ([0.5, 1e-200, 0.25, 1e-200, 0.25 - 4e-200, 2e-200], 4),  # e_3 ~ 1e-400 underflows
    ([0.3, 0.2, 0.5], 2),  # common input: the plain-double tables
])
def test_conditional_poisson_first_draft_law_beside_subnormal_weights(q, n):
    """Inclusion probabilities over n against exact rationals. Plain-double tables would pass the
    weights of (0.6, 0.4, 1e-320, 1e-320), n = 3, through subnormals (inclusion probabilities
    0.9993 / 1.0003 instead of 1, 1, 1/2, 1/2, unseen by a sum check); the tables are scaled per
    entry there."""
    model = md.ConditionalPoisson(np.array(q), n, normalize=True)
    want = np.array(exact_cp_inclusion(model.q, n)) / n
    got = model.first_draft_law()
    assert np.all(np.abs(got - want) <= 8 * 2.0**-53 * want), (got * n, want * n)


def test_invalid_orders_token_sets_and_sample_sizes_are_refused():
    """A bad order, token set or sample size is an InvalidInputError naming it, never a numba error
    or a silently wrong answer (a repeated token in an order, (0, 0, 1), would give IID's prefix
    containment Q({0}) = (2 q_0)^n)."""
    q = np.array([0.5, 0.3, 0.2])
    for model in (md.IID(q, 2), md.WithoutReplacement(q, 2), md.ConditionalPoisson(q, 2),
                  md.Greedy(q, 2), md.Independent(np.stack([q, q[::-1]])),
                  md.Joint(np.outer(q, q))):
        for order, message in (([0, 5], r"holds 5, outside 0\.\.2"), ([1, -1], "holds -1, outside"),
                               ([0, 0, 1], "repeats a token"), ([0.0, 1.0], "1-D array of integers"),
                               ([[0, 1]], "1-D array of integers")):
            with pytest.raises(md.InvalidInputError, match=message):
                model.prefix_containment(order)
        with pytest.raises(md.InvalidInputError, match=r"shape \(2, 2, 3\); expected \(V,\) or \(M, V\)"):
            model.containment(np.ones((2, 2, 3), dtype=bool))
        with pytest.raises(md.InvalidInputError, match="non-negative integer, got -1"):
            model.sample(0, size=-1)
        assert model.sample(None, 2).shape == (2, 2)  # numpy's usual random sources
        assert model.sample(np.random.default_rng(0), 0).shape[0] == 0


@pytest.mark.parametrize("fn", ["successive_prefix_containment", "conditional_poisson_prefix_containment"])
def test_prefix_functions_refuse_invalid_input(fn):
    from mdtheory.models import containment

    f = getattr(containment, fn)
    q = np.array([0.5, 0.3, 0.2])
    for args, message in (((q, [0, 1, 2], 0), "at least 1, got 0"),
                          ((q, [0, 1, 2], 2.5), "must be an integer, got 2.5"),
                          ((np.array([0.5, -0.1, 0.6]), [0, 1, 2], 2), r"q\[1\] = -0.1 is not a finite"),
                          ((np.array([0.5, np.nan, 0.6]), [0, 1, 2], 2), r"q\[1\] = nan"),
                          ((np.array([0.5, np.inf, 0.6]), [0, 1, 2], 2), r"q\[1\] = inf"),
                          ((np.ones((2, 3)) / 6, [0, 1, 2], 2), r"shape \(2, 3\); expected \(V,\)"),
                          ((q, [0, 0, 1], 2), "repeats a token"), ((q, [0, 3], 1), "outside 0..2")):
        with pytest.raises(md.InvalidInputError, match=message):
            f(*args)
    assert f([0.5, 0.3, 0.2], [2, 0], 1).tolist() == pytest.approx([0.2, 0.7])  # a list is fine


def test_greedy_prefix_containment_is_the_per_set_containment():
    """The one-pass prefix containment of the greedy draft set (O(V), where one containment per
    prefix is O(V^2)) against the per-set containment, full and partial orders."""
    rng = np.random.default_rng(5)
    q = rng.dirichlet(np.full(40, 0.3))
    for n in (1, 2, 5):
        model = md.Greedy(q, n)
        for order in (np.argsort(-q), rng.permutation(40), rng.permutation(40)[:25]):
            masks = np.zeros((order.size, 40), dtype=bool)
            for k in range(order.size):
                masks[k:, order[k]] = True
            assert np.abs(model.prefix_containment(order) - model.containment(masks)).max() <= 1e-15


def test_conditional_poisson_containment_when_the_scale_overflows():
    """q = (1, 5e-324 x 21), n = V = 22: the scale c = 1 / (geometric mean of the n largest masses)
    overflowed (math.exp: OverflowError), and containment computed it for every call, one set
    included; every set must hold all 22 tokens."""
    q = np.r_[1.0, np.full(21, 5e-324)]
    model = md.ConditionalPoisson(q, 22)
    assert model.containment(np.ones(22, dtype=bool)) == 1.0
    masks = np.ones((20, 22), dtype=bool)
    masks[1:, 1:] = np.eye(19, 21, dtype=bool) == 0  # rows 1..19 leave out one subnormal token
    assert model.containment(masks).tolist() == [1.0] + [0.0] * 19


def test_without_replacement_two_drafts_containment_at_most_one():
    """q = (0.835, 1 - 0.835, 1e-300), n = 2: the containment of T = {0, 1} (exactly 1 - ~1e-300)
    is at most one; a closed form summed in float64 gives 1 + 2^-52, a negative coverage of the third
    token."""
    model = md.WithoutReplacement(np.array([0.835, 1 - 0.835, 1e-300]), 2)
    assert model.containment(np.array([True, True, False])) == 1.0
    assert model.coverage(np.array([False, False, True])) == 0.0


def test_containment_never_exceeds_one():
    """Greedy, independent and joint containments summed a normalised q over the full set to
    1 + 2^-52 on common input (a Dirichlet q: 76, 97 and 22 of 400 seeds), so coverage went
    negative; each is capped at one, as IID's and the prefix passes already were."""
    rng = np.random.default_rng(0)
    for _ in range(40):
        V = int(rng.integers(3, 40))
        q = rng.dirichlet(np.full(V, 0.5))
        full = np.ones((20, V), dtype=bool)
        for model in (md.Greedy(q, 2), md.Independent(rng.dirichlet(np.ones(V), size=2)),
                      md.Joint(np.outer(q, rng.dirichlet(np.ones(V))))):
            assert model.containment(full).max() <= 1.0 and model.containment(full[0]) <= 1.0
            assert model.coverage(~full).min() >= 0.0


def test_without_replacement_one_draft_and_set_law_at_most_one():
    """One draft: Q(T) = q(T) sums to 1 + 2^-52 in float64 beside two masses 1e-200 (T = the three
    heavy tokens); three drafts of three tokens: the one sure set's probability, summed over its six
    orders, too. Both are at most one."""
    raw = np.array([0.8735534453962619, 0.005265304565574724, 0.8212284183827663, 1e-200, 1e-200])
    model = md.WithoutReplacement(raw, 1, normalize=True)
    assert model.containment(raw > 1e-100) == 1.0
    q = np.array([0.5085563390129583, 0.05767187025722211, 0.4337717907298197])
    assert md.WithoutReplacement(q, 3).set_law().probs.tolist() == [1.0]
