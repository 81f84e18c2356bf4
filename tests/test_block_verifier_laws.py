"""Block verifiers on hard inputs: laws of tiny probability, exact fallback, validation, and GBV."""

from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from mdtheory.audit.statistics import law_test
from mdtheory.blocks import (
    ConstantLaw,
    GreedyMultiPath,
    RandomLaw,
    audit_block,
    block_efficiency,
    block_law_tv,
    exact_block_law,
    make_verifier,
    optimal_block_efficiency,
    random_instance,
    sun_toy,
)
from mdtheory.blocks.verifiers import FLOAT_FLOOR, VERIFIERS
from mdtheory.errors import InvalidDistributionError, InvalidInputError
from tests.tolerances import ROUNDING

ALL = [("token", {}), ("token", {"rule": "optimal"}), ("block", {}), ("multipath", {}),
       ("multipath", {"rule": "optimal"}), ("gbv", {}), ("trie", {}), ("traversal", {})]


def _every_verifier():
    return [make_verifier(name, **kw) for name, kw in ALL]


def _exact_law(probs):
    row = np.array([Fraction(x) for x in probs], dtype=object)
    return lambda ctx: row


def _chi_square_p(verifier, target, draft, drafts, draws, seed):
    """p-value of ``draws`` samples of the verifier against its own law (the audits' Pearson test,
    sparse cells pooled until each expects 5 draws)."""
    law = verifier.law(target, draft, drafts)
    rng = np.random.default_rng(seed)
    counts = Counter(tuple(int(t) for t in verifier.sample(target, draft, drafts, rng))
                     for _ in range(draws))
    assert set(counts) <= set(law), f"sampled blocks {set(counts) - set(law)} missing from the law"
    keys = list(law)
    probs = np.array([float(law[k]) for k in keys])
    return law_test(np.array([counts.get(k, 0) for k in keys], dtype=float), probs / probs.sum())


# ------------------------------------------------------------------ the two known failures
KNOWN_TRAVERSAL = (ConstantLaw([9.9999998643249433e-01, 1.3567505757975351e-08]),
                   ConstantLaw([9.9997058496960600e-01, 2.9415030393904616e-05]),
                   np.array([[1], [1], [1]]))
KNOWN_MULTIPATH = (ConstantLaw([1e-300, 1.0]), ConstantLaw([1e-300, 1 - 1e-300]), np.array([[1], [0]]))


@pytest.mark.parametrize("case", [KNOWN_TRAVERSAL, KNOWN_MULTIPATH], ids=["traversal", "multipath"])
def test_every_law_sums_to_one_on_the_known_tiny_probability_drafts(case):
    target, draft, drafts = case
    for v in _every_verifier():
        law = v.law(target, draft, drafts)
        assert abs(sum(law.values()) - 1) <= ROUNDING, (v, law)
        assert all(w > 0 for w in law.values())


def test_traversal_keeps_the_root_mass_at_one():
    # the three drafts all offer token 1 of ratio 4.6e-4: the first rejects, the root's residual is
    # then (1, 0) and the later two cannot move it; the block is (0,) unless the first accepts
    target, draft, drafts = KNOWN_TRAVERSAL
    law = make_verifier("traversal").law(target, draft, drafts)
    a = target()[1] / draft()[1]
    assert law[(0,)] == pytest.approx(1 - a, abs=ROUNDING)
    assert law[(1, 0)] + law[(1, 1)] == pytest.approx(a, abs=ROUNDING)


def test_multipath_optimal_law_has_the_block_its_sampler_emits():
    target, draft, drafts = KNOWN_MULTIPATH
    v = make_verifier("multipath", rule="optimal")
    law = v.law(target, draft, drafts)
    assert abs(sum(law.values()) - 1) <= ROUNDING and (1,) in law
    assert _chi_square_p(v, target, draft, drafts, 3000, seed=0) > 1e-4


def test_block_verification_keeps_a_residual_below_float_resolution():
    # q = (1.5e-300, 1): w_1 = 2/3 on the draft 0, so the block stops at the root w.p. 1/3 and
    # corrects from r_0 = (p - q)^+ of mass 5e-301 next to entries of size 1 (0 in floats): exactly,
    # r_0 is on token 1 (q normalised exactly is 1 - 1.5e-300 there), so (1,) has probability 1/3
    target, draft = ConstantLaw([1e-300, 1.0]), ConstantLaw([1.5e-300, 1.0])
    v = make_verifier("block")
    law = v.law(target, draft, np.array([[0]]))
    assert law[(1,)] == pytest.approx(1 / 3, abs=ROUNDING)
    assert law[(0, 1)] == pytest.approx(2 / 3, abs=ROUNDING)
    assert _chi_square_p(v, target, draft, np.array([[0]]), 3000, seed=0) > 1e-4


def test_exact_audit_accepts_the_package_verifier_on_tiny_laws():
    target, draft, _ = KNOWN_MULTIPATH
    v = make_verifier("multipath", rule="optimal")
    res = audit_block(v.law, target, draft, n=2, length=1, exact=True)
    assert res.verdict == "lossless" and res.tv <= ROUNDING


# ------------------------------------------------------------------ cases the fuzz found
# Draft arrays found by benchmarks/fuzz_block_verifiers.py --cases 1000 --seed 7 where a law computed
# with float divisions by cancelling residual sums goes wrong: it would sum to 4.8e-5 (traversal),
# 1e70 (traversal), 9.8e-7 (traversal), 0.254 (multipath:optimal, p = q) or have a mass of -1.1e-16
# (block). Rows by context: (p, q).
FUZZ_FOUND = [
    ("traversal", "dirichlet0.1", [[0], [0], [0], [0]], {
        (): ([9.62811933667755e-13, 0.9999999999990372],
             [2.0227800026035113e-08, 0.9999999797722]),
        (0,): ([2.0844749166062672e-18, 1.0],
               [0.4907074788039827, 0.5092925211960173]),
        (1,): ([0.999800831509282, 0.00019916849071803806],
               [0.2361962947138118, 0.7638037052861882]),
    }),
    ("traversal", "tiny", [[2, 1], [0, 0]], {
        (): ([1.0, 1e-100, 1e-300],
             [0.606847429694376, 0.3349348825582231, 0.05821768774740093]),
        (0,): ([1e-300, 9.999999999999999e-31, 1.0],
               [1e-100, 1e-100, 1.0]),
        (1,): ([0.021900982329547382, 1e-08, 0.9780990076704527],
               [0.9783267468692229, 0.021673253130777108, 9.999999999999999e-31]),
        (2,): ([0.9991040049987889, 1e-100, 0.000895995001211023],
               [0.44944352735320103, 0.01626734857809102, 0.5342891240687079]),
        (0, 0): ([1.0000000000000001e-100, 0.688262823840932, 0.3117371761590681],
                 [0.9167396953489341, 9.999999999999999e-31, 0.08326030465106599]),
        (0, 1): ([1e-300, 9.999999999999999e-31, 1.0],
                 [1e-100, 0.992218217015295, 0.007781782984705022]),
        (0, 2): ([1e-08, 0.999999989999, 1e-12],
                 [1e-300, 1e-12, 0.999999999999]),
        (1, 0): ([0.9200167674700594, 1e-100, 0.07998323252994062],
                 [1.0, 1e-30, 1.0000000000000002e-300]),
        (1, 1): ([1.0000000000000002e-12, 0.977182472790426, 0.02281752720857405],
                 [0.8946462613053519, 0.10535373869464804, 9.999999999999997e-31]),
        (1, 2): ([9.999999999999999e-31, 0.2434461925522795, 0.7565538074477205],
                 [1e-12, 1e-300, 0.999999999999]),
        (2, 0): ([1e-12, 0.999999999999, 1e-100],
                 [1e-12, 0.999999989999, 1e-08]),
        (2, 1): ([0.9179265047207498, 9.999999999999999e-09, 0.08207348527925014],
                 [0.8287909308533615, 0.1712090591466384, 1e-08]),
        (2, 2): ([1e-300, 0.9251170008012374, 0.07488299919876261],
                 [0.40666177091095895, 0.5933382290880409, 9.999999999999998e-13]),
    }),
    ("traversal", "tiny", [[1, 0, 0], [1, 0, 0], [0, 0, 1]], {
        (): ([1.0, 9.999999999999999e-31],
             [0.999999999999, 1e-12]),
        (0,): ([0.6829076740901536, 0.3170923259098465],
               [1.0, 1e-100]),
        (1,): ([1.0, 1.0000000000000002e-300],
               [1e-12, 0.999999999999]),
        (0, 0): ([9.999999999999999e-31, 1.0],
                 [1e-08, 0.99999999]),
        (0, 1): ([1.0, 9.999999999999999e-31],
                 [0.99999999, 1e-08]),
        (1, 0): ([0.9632633022181222, 0.03673669778187788],
                 [0.9784370516272117, 0.021562948372788212]),
        (1, 1): ([1.0000000000000001e-100, 1.0],
                 [9.999999999999999e-31, 1.0]),
        (0, 0, 0): ([1.0, 9.999999999999999e-31],
                    [8.612968258236695e-12, 0.999999999991387]),
        (0, 0, 1): ([0.7003740301073745, 0.2996259698926256],
                    [0.9783452712513075, 0.021654728748692495]),
        (0, 1, 0): ([0.5600669391128404, 0.4399330608871596],
                    [0.9094366369358332, 0.09056336306416675]),
        (0, 1, 1): ([1.0, 9.999999999999999e-31],
                    [0.24202228527574726, 0.7579777147242528]),
        (1, 0, 0): ([1e-300, 1.0],
                    [0.12837750430782915, 0.8716224956921708]),
        (1, 0, 1): ([0.637071892560937, 0.36292810743906306],
                    [0.31732427620881887, 0.6826757237911811]),
        (1, 1, 0): ([0.7853829741523977, 0.2146170258476024],
                    [0.540188337070574, 0.45981166292942605]),
        (1, 1, 1): ([0.9999999900000001, 1e-08],
                    [9.999999999999999e-31, 1.0]),
    }),
    ("multipath:optimal", "equal", [[0, 1, 0], [1, 0, 0], [0, 1, 1], [1, 0, 0]], {
        (): ([1e-300, 1.0],
             [1e-300, 1.0]),
        (0,): ([1.0, 9.999999999999999e-31],
               [1.0, 9.999999999999999e-31]),
        (1,): ([0.09795333287744847, 0.9020466671225514],
               [0.09795333287744847, 0.9020466671225514]),
        (0, 0): ([1.0, 1e-300],
                 [1.0, 1e-300]),
        (0, 1): ([1e-300, 1.0],
                 [1e-300, 1.0]),
        (1, 0): ([1.0, 9.999999999999999e-31],
                 [1.0, 9.999999999999999e-31]),
        (1, 1): ([0.3711719835631479, 0.6288280164368522],
                 [0.3711719835631479, 0.6288280164368522]),
        (0, 0, 0): ([1.0, 1.0000000000000001e-100],
                    [1.0, 1.0000000000000001e-100]),
        (0, 0, 1): ([0.13845387650068014, 0.8615461234993199],
                    [0.13845387650068014, 0.8615461234993199]),
        (0, 1, 0): ([0.5182756861636724, 0.48172431383632774],
                    [0.5182756861636724, 0.48172431383632774]),
        (0, 1, 1): ([0.05245105104146774, 0.9475489489585323],
                    [0.05245105104146774, 0.9475489489585323]),
        (1, 0, 0): ([0.7946106901280062, 0.2053893098719938],
                    [0.7946106901280062, 0.2053893098719938]),
        (1, 0, 1): ([0.47040445937149455, 0.5295955406285054],
                    [0.47040445937149455, 0.5295955406285054]),
        (1, 1, 0): ([0.4731352906878796, 0.5268647093121204],
                    [0.4731352906878796, 0.5268647093121204]),
        (1, 1, 1): ([0.41065297049071686, 0.5893470295092831],
                    [0.41065297049071686, 0.5893470295092831]),
    }),
    ("block", "dirichlet1", [[1, 0], [2, 1], [0, 0]], {
        (): ([0.5722127828139106, 0.18412314930118642, 0.24366406788490302],
             [0.4676735222446532, 0.14166499383167483, 0.390661483923672]),
        (0,): ([0.25450934069248626, 0.17801106823162355, 0.5674795910758902],
               [0.5467118978152672, 0.10394866006851901, 0.34933944211621387]),
        (1,): ([0.40479141653112016, 0.20639392777575577, 0.3888146556931241],
               [0.631255243266127, 0.21749600268229485, 0.15124875405157814]),
        (2,): ([0.7920717205241088, 0.0781374807021603, 0.12979079877373095],
               [0.25290366038855655, 0.5209586476939972, 0.22613769191744615]),
        (0, 0): ([0.5864499191051393, 0.2808961381557993, 0.13265394273906142],
                 [0.08539985255330775, 0.8158877295230355, 0.09871241792365687]),
        (0, 1): ([0.4349255003015125, 0.11526507305147164, 0.4498094266470159],
                 [0.06495698839864966, 0.7278540488369426, 0.20718896276440782]),
        (0, 2): ([0.19772255812298214, 0.3665631809800655, 0.43571426089695225],
                 [0.007184401659358382, 0.7224113057273167, 0.2704042926133249]),
        (1, 0): ([0.3457670226717824, 0.3756469400212383, 0.2785860373069793],
                 [0.36824830455976615, 0.5058578193595588, 0.1258938760806751]),
        (1, 1): ([0.6001970823607105, 0.24033197233342815, 0.15947094530586145],
                 [0.7582596469400902, 0.054925412931980104, 0.18681494012792982]),
        (1, 2): ([0.19516427668610373, 0.39358954139454916, 0.4112461819193471],
                 [0.11400123737602176, 0.6443361397210932, 0.24166262290288512]),
        (2, 0): ([0.47132307183668254, 0.3189030902841088, 0.20977383787920864],
                 [0.8761303978978803, 0.046209846308957116, 0.07765975579316266]),
        (2, 1): ([0.058965137569735454, 0.6085307622365675, 0.3325041001936971],
                 [0.08740077903715522, 0.42423840912975663, 0.4883608118330881]),
        (2, 2): ([0.27643821510761646, 0.5807149468880726, 0.14284683800431103],
                 [0.5207476539636571, 0.3202448012838386, 0.1590075447525045]),
    }),
]


@pytest.mark.parametrize("name, kind, drafts, rows", FUZZ_FOUND,
                         ids=[f"{c[0]}-{c[1]}" for c in FUZZ_FOUND])
def test_fuzz_found_laws_sum_to_one_and_match_their_samplers(name, kind, drafts, rows):
    target = lambda ctx: np.array(rows[tuple(ctx)][0])  # noqa: E731
    draft = lambda ctx: np.array(rows[tuple(ctx)][1])  # noqa: E731
    v = make_verifier(*name.split(":")[:1], **({"rule": name.split(":")[1]} if ":" in name else {}))
    drafts = np.array(drafts)
    law = v.law(target, draft, drafts)
    assert abs(sum(law.values()) - 1) <= ROUNDING
    assert min(law.values()) > 0
    assert _chi_square_p(v, target, draft, drafts, 2000, seed=1) > 1e-4


# ------------------------------------------------------------------ the exact fallback
def test_float_law_equals_the_exact_law_where_it_falls_back():
    # p = q makes every residual empty: float arithmetic cannot tell an empty residual from one
    # that cancelled, so the law is computed exactly, and equals the law of the fraction laws
    pf = _exact_law(["1/4", "3/4"])
    p = ConstantLaw([0.25, 0.75])
    drafts = np.array([[1, 0], [0, 1]])
    for v in _every_verifier():
        if v.name == "token":  # the token rules compute in floats whatever the input
            continue
        exact = v.law(pf, pf, drafts)
        floats = v.law(p, p, drafts)
        assert set(exact) == set(floats), v
        for k in exact:
            assert abs(float(exact[k]) - floats[k]) <= ROUNDING, (v, k)
        assert all(isinstance(w, Fraction) for w in exact.values()), v
        assert all(isinstance(w, float) for w in floats.values()), v


@pytest.mark.parametrize("d", [4 * FLOAT_FLOOR, FLOAT_FLOOR / 4])
def test_residual_mass_below_the_float_floor_switches_to_exact(d):
    # one draft of token 1 with p = (1/2 + d, 1/2 - d), q = (1/2, 1/2): the block stops at the root
    # w.p. 2d and corrects from a residual of mass d, float above the floor, exact below it
    target, draft = ConstantLaw([0.5 + d, 0.5 - d]), ConstantLaw([0.5, 0.5])
    law = make_verifier("block").law(target, draft, np.array([[1]]))
    exact = d < FLOAT_FLOOR
    assert all(type(w) is float for w in law.values()) == exact  # exact results come back as floats
    assert law[(0,)] == pytest.approx(2 * d, rel=1e-9)
    assert abs(sum(law.values()) - 1) <= ROUNDING


def test_exact_block_efficiency_is_unchanged_on_float_laws():
    # the draft-weighted sums were never affected: every verifier's exact efficiency on the toy
    # equals its value on the fraction laws
    p, q = sun_toy()
    pf, qf = _exact_law(["1/3", "2/3"]), _exact_law(["2/3", "1/3"])
    for v in _every_verifier():
        if v.name == "token":
            continue
        assert abs(float(block_efficiency(v, p, q, 2, 2)) - float(block_efficiency(v, pf, qf, 2, 2))) \
            <= ROUNDING, v


# ------------------------------------------------------------------ input validation
GOOD = ConstantLaw([0.5, 0.5])


class _Unconvertible:
    """A law's return value whose conversion to an array raises."""

    def __array__(self, *args, **kwargs):
        raise RuntimeError("cannot convert")


@pytest.mark.parametrize("bad, match", [
    (lambda ctx: np.array([0.5, 0.6]), "not a probability vector"),
    (lambda ctx: np.array([1.5, -0.5]), "not a probability vector"),
    (lambda ctx: np.array([np.nan, 1.0]), "not a probability vector"),
    (lambda ctx: np.array([0.5, 0.5]) if len(ctx) == 0 else np.array([0.2, 0.2, 0.6]), "length 2"),
    (lambda ctx: "abc", "not a vector"),
    (lambda ctx: None, "not a vector"),
    (lambda ctx: np.array([0.5 + 1j, 0.5]), "not a vector"),
    (lambda ctx: _Unconvertible(), "not a vector"),
])
@pytest.mark.parametrize("which", ["target", "draft"])
def test_bad_laws_are_named_errors(bad, match, which):
    target, draft = (bad, GOOD) if which == "target" else (GOOD, bad)
    for v in _every_verifier():
        with pytest.raises(InvalidDistributionError, match=f"the {which} .*{match}"):
            v.law(target, draft, np.array([[0, 1], [1, 1]]))
        with pytest.raises(InvalidDistributionError, match=f"the {which}"):
            v.sample(target, draft, np.array([[0, 1], [1, 1]]), 0)


def test_unnormalised_law_no_longer_inflates_block_efficiency():
    # p = (0.5, 0.6), read unchecked, gives E|B| = 3.3 > L + 1
    with pytest.raises(InvalidDistributionError, match="the target at context"):
        block_efficiency(make_verifier("block"), lambda c: np.array([0.5, 0.6]), GOOD, 1, 2)


@pytest.mark.parametrize("rng", ["abc", -1, 1.5, True])
def test_a_bad_random_generator_is_a_named_error(rng):
    for v in _every_verifier():
        with pytest.raises(InvalidInputError, match="rng"):
            v.sample(GOOD, GOOD, np.array([[0, 1], [1, 1]]), rng)


def test_raising_law_is_one_named_error():
    def boom(ctx):
        if len(ctx) == 1:
            raise KeyError("no such context")
        return np.array([0.5, 0.5])

    for v in _every_verifier():
        with pytest.raises(InvalidInputError, match=r"the target raised KeyError at context \(\d,\)"):
            v.law(boom, GOOD, np.array([[0, 1], [1, 1]]))
    with pytest.raises(InvalidInputError, match="must be a callable"):
        make_verifier("block").law(3, GOOD, np.array([[0, 1]]))


@pytest.mark.parametrize("drafts, match", [
    (np.array([[0.0, 1.0]]), "int array"),
    ([[0, 1], [1]], "ragged|int array"),
    (np.zeros((2, 2, 2), dtype=int), "int array"),
    (np.zeros((0, 2), dtype=int), "int array"),
    (np.array([[0, 2]]), "outside 0 .. 1"),
    (np.array([[-1, 0]]), "outside 0 .. 1"),
    (np.array([[True, False]]), "int array"),
])
def test_bad_drafts_are_named_errors(drafts, match):
    for v in _every_verifier():
        with pytest.raises(InvalidInputError, match=match):
            v.law(GOOD, GOOD, drafts)


def test_float32_laws_are_accepted_by_the_verifiers_and_the_audit():
    # a float32 softmax misses sum 1 by more than float64's 1e-6 but within float32's rule
    p32 = np.array([0.3, 0.7 + 2e-5], dtype=np.float32)
    q32 = np.array([0.6, 0.4], dtype=np.float32)
    target, draft = (lambda c: p32), (lambda c: q32)
    v = make_verifier("block")
    assert abs(sum(v.law(target, draft, np.array([[0, 1]])).values()) - 1) <= ROUNDING
    res = audit_block(v.law, target, draft, n=1, length=2, exact=True)
    assert res.verdict == "lossless"


# ------------------------------------------------------------------ GBV
def test_gbv_is_registered_and_refuses_trees():
    from mdtheory.blocks import DraftTree

    assert isinstance(make_verifier("gbv"), GreedyMultiPath) and "gbv" in VERIFIERS
    assert make_verifier("gbv", tree=DraftTree((2, 1), "iid")).tree is None  # K iid drafts
    with pytest.raises(InvalidInputError, match="gbv verifies K iid drafts"):
        make_verifier("gbv", tree=DraftTree((2, 2), "iid"))


def test_gbv_at_one_draft_is_block_verification_exactly():
    pf, qf = _exact_law(["1/3", "2/3"]), _exact_law(["2/3", "1/3"])
    for L in (1, 2, 3):
        assert block_efficiency(make_verifier("gbv"), pf, qf, 1, L) == \
            block_efficiency(make_verifier("block"), pf, qf, 1, L)


def test_gbv_toy_values_exactly():
    # toy, K = 2: L = 2 gives 212/81 and L = 3 gives 2350/729, the LP optimum's values there
    pf, qf = _exact_law(["1/3", "2/3"]), _exact_law(["2/3", "1/3"])
    assert block_efficiency(make_verifier("gbv"), pf, qf, 2, 2) == Fraction(212, 81)
    assert block_efficiency(make_verifier("gbv"), pf, qf, 2, 3) == Fraction(2350, 729)
    p, q = sun_toy()
    assert optimal_block_efficiency(p, q, n=2, length=2).value == pytest.approx(212 / 81, abs=1e-7)


@pytest.mark.parametrize("inst", ["toy", (2, 0), (3, 1), (3, 2)])
def test_gbv_is_lossless_by_enumeration(inst):
    target, draft = sun_toy() if inst == "toy" else random_instance(*inst)
    v = make_verifier("gbv")
    for K, L in [(1, 2), (2, 1), (2, 2), (3, 1), (3, 2), (4, 1), (2, 3)]:
        law = exact_block_law(v, target, draft, K, L)
        assert block_law_tv(law, target, L) <= ROUNDING, (K, L)


def test_gbv_sampler_matches_its_law():
    target, draft = random_instance(3, 2)
    v = make_verifier("gbv")
    for drafts in (np.array([[0, 1], [2, 2], [0, 0]]), np.array([[1, 2], [1, 0]])):
        assert _chi_square_p(v, target, draft, drafts, 2000, seed=3) > 1e-4


@pytest.mark.parametrize("name, kw", [("gbv", {}), ("multipath", {"rule": "optimal"})])
def test_closed_form_selections_run_at_a_large_vocabulary(name, kw):
    # gbv's skewed law and the optimal rule's candidate law are closed forms over V: no n-tuples
    from mdtheory.blocks import iid_drafts

    target, draft = RandomLaw(465, seed=1, stream=0), RandomLaw(465, seed=1, stream=1, concentration=0.5)
    rng = np.random.default_rng(0)
    v = make_verifier(name, **kw)
    for _ in range(2):
        drafts = iid_drafts(4, 4).sample(draft, rng)
        block = v.sample(target, draft, drafts, rng)
        assert 1 <= block.size <= 5
        law = v.law(target, draft, drafts)
        assert abs(sum(law.values()) - 1) <= ROUNDING


# ------------------------------------------------------------------ the sampled audit's pass
@pytest.mark.slow
def test_sampled_pass_is_lossless_only_to_within_detect_tv():
    # block verification that emits (0,) 4.5% of the time: exact TV 0.03. A run sized to detect TV
    # 0.1 passes it (lossless to within 0.1, by design); one sized for 0.02 rejects it
    bv = make_verifier("block")
    eps = 0.045

    def lossy_law(target, draft, drafts):
        law = {k: (1 - eps) * v for k, v in bv.law(target, draft, drafts).items()}
        law[(0,)] = law.get((0,), 0) + eps
        return law

    def lossy_sample(target, draft, drafts, rng):
        return np.array([0]) if rng.random() < eps else bv.sample(target, draft, drafts, rng)

    p, q = sun_toy()
    exact = audit_block(lossy_law, p, q, n=1, length=1, exact=True)
    assert exact.verdict == "lossy" and exact.tv == pytest.approx(0.03, abs=ROUNDING)
    coarse = audit_block(lossy_sample, p, q, n=1, length=1, detect_tv=0.1, seed=0)
    assert coarse.verdict == "passed" and coarse.lossless and coarse.detectable_tv <= 0.1
    assert exact.tv < coarse.detect_tv
    fine = audit_block(lossy_sample, p, q, n=1, length=1, detect_tv=0.02, seed=0)
    assert fine.verdict == "lossy" and not fine.lossless


# ------------------------------------------------------------------ the command
def _run_cli(argv, capsys):
    from mdtheory.cli import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_gbv_rows(capsys):
    import json

    code, out, _ = _run_cli(["block-efficiency", "--instance", "toy", "-n", "2", "-L", "2",
                             "--verifier", "gbv,block", "--json"], capsys)
    assert code == 0
    rows = {r["rule"]: r for r in map(json.loads, out.splitlines())}
    assert abs(rows["gbv"]["block_efficiency"] - 212 / 81) <= ROUNDING
    assert rows["gbv"]["validity_tv"] <= ROUNDING
    code, _, err = _run_cli(["block-efficiency", "--instance", "toy", "--tree", "2,1", "--sampling",
                             "without-replacement", "--verifier", "gbv"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "gbv" in err
