"""Successive sampling's lower bounds from majorants of its containment (papers/theory.md,
"Successive sampling: lower bounds from majorants of the containment"), checked against exact
enumerations: the partial-replacement model's draw sequences in rationals, every token set, and the
exhaustive route's α*."""

import json
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from mdtheory import certify, optimal_acceptance
from mdtheory.certify import CERT_TOL
from mdtheory.cli import main
from mdtheory.models.majorant import (
    MAJORANT_WORK,
    _small_min,
    best_prefix,
    exact_tokens,
    face_bound,
    partial_replacement_coefficients,
    race_excess,
)
from mdtheory.models.registry import make_draft_model
from mdtheory.models.vertices import model_vertex
from mdtheory.models.without_replacement import WithoutReplacement
from mdtheory.routes import mnp
from mdtheory.routes.subsets import exact_ratio_order

from .tolerances import QUADRATURE_EXACT, ROUNDING


def _rational(rng, V):
    w = rng.integers(1, 20, size=V)
    return [Fraction(int(x), int(w.sum())) for x in w]


def _partial_containment(q, W, T, n):
    """Q_{M_W}(T) in rationals: every draw sequence inside T, tokens of W removed once drawn."""
    def walk(left, drawn):
        if left == 0:
            return Fraction(1)
        rest = 1 - sum((q[i] for i in drawn), Fraction(0))
        return sum((q[y] / rest * walk(left - 1, drawn | ({y} if y in W else set()))
                    for y in T if y not in drawn), Fraction(0))
    return walk(n, frozenset())


def _subsets(V):
    return [set(c) for k in range(V + 1) for c in combinations(range(V), k)]


@pytest.mark.parametrize("seed", range(4))
def test_the_coefficients_are_the_partial_replacement_containment(seed):
    """coef[C] evaluated at r = q(R) is Q_{M_W}(C ∪ R), enumerated in rationals."""
    rng = np.random.default_rng(seed)
    V, n = 6, 3
    q = _rational(rng, V)
    W = [int(i) for i in rng.choice(V, size=3, replace=False)]
    coef = partial_replacement_coefficients(np.array([float(q[i]) for i in W]), n)
    outside = [y for y in range(V) if y not in W]
    for C in range(1 << len(W)):
        part = {W[i] for i in range(len(W)) if C >> i & 1}
        for k in range(len(outside) + 1):
            for R in combinations(outside, k):
                r = float(sum((q[y] for y in R), Fraction(0)))
                exact = _partial_containment(q, set(W), part | set(R), n)
                assert np.polyval(coef[C][::-1], r) == pytest.approx(float(exact), abs=ROUNDING)


@pytest.mark.parametrize("seed", range(4))
def test_the_majorant_lies_between_successive_sampling_and_iid(seed):
    """Q(T) <= Q_{M_W}(T) <= Q_{M_W'}(T) <= q(T)^n for W' ⊆ W, on every token set (rationals)."""
    rng = np.random.default_rng(10 + seed)
    V, n = 5, 3
    q = _rational(rng, V)
    law = WithoutReplacement.exact_set_law(q, n)
    W = {int(i) for i in rng.choice(V, size=3, replace=False)}
    smaller = set(list(W)[:1])
    for T in _subsets(V):
        wor = sum((w for U, w in law.items() if U <= T), Fraction(0))
        big, small = (_partial_containment(q, W, T, n), _partial_containment(q, smaller, T, n))
        assert wor <= big <= small <= sum((q[y] for y in T), Fraction(0)) ** n


def _majorant_minimum(p, q, n, W):
    """min over all 2^V sets of p(T) - Q_{M_W}(T), by the coefficients (no prefix theorem)."""
    coef = partial_replacement_coefficients(q[W], n)
    best = 0.0
    for T in _subsets(p.size):
        C = sum(1 << i for i, y in enumerate(W) if y in T)
        r = sum(q[y] for y in T if y not in W)
        best = min(best, p[list(T)].sum() - np.polyval(coef[C][::-1], r))
    return best


def _small_case(seed):
    rng = np.random.default_rng(100 + seed)
    V, n = 8, int(rng.integers(2, 5))
    q = rng.dirichlet(np.full(V, 0.7))
    p = rng.dirichlet(np.full(V, 0.7)) * rng.uniform(0.9, 1.0)
    if seed % 3 == 0:
        p[rng.choice(V, 2, replace=False)] = 0.0
    if seed % 3 == 1:
        p[:3] = q[:3] * p[:3].sum() / q[:3].sum()  # a class of equal ratio
    return p, q, n


def _parts(p, q, n, W):
    """The arguments of the minimum over the parts of W: W's masses, the other tokens of positive
    mass in the order of p/q."""
    order = exact_ratio_order(p, q)
    rest = [y for y in order if y not in W and q[y] > 0]
    return (partial_replacement_coefficients(q[W], n), partial_replacement_coefficients(q[W], n),
            p[W].copy(), q[W].copy(), np.concatenate(([0.0], np.cumsum(p[rest]))),
            np.concatenate(([0.0], np.cumsum(q[rest]))))


@pytest.mark.parametrize("seed", range(12))
def test_the_minimum_over_parts_and_prefixes_is_the_minimum_over_every_set(seed):
    """The prefix theorem for the tokens outside W: with the partial-replacement majorant alone,
    the minimum over (part of W, prefix in the order of q/p) equals the minimum over all 2^V sets
    (ties, p = 0 and sub-probability targets included); with a threshold s0 (the tangent beyond
    r* = s0 - q(C)) it is at most the minimum over the sets of mass below s0."""
    p, q, n = _small_case(seed)
    W = list(np.argsort(-q, kind="stable")[:3])
    parts = _parts(p, q, n, W)
    low = _majorant_minimum(p, q, n, W)
    assert _small_min(*parts, np.inf, 0.0, 0.0, 1.0, True) == pytest.approx(low, abs=ROUNDING)
    coef = partial_replacement_coefficients(q[W], n)
    for s0 in (0.2, 0.5, 0.8):
        below = min((p[list(T)].sum() - np.polyval(
            coef[sum(1 << i for i, y in enumerate(W) if y in T)][::-1],
            sum(q[y] for y in T if y not in W)) for T in _subsets(p.size) if q[list(T)].sum() < s0),
            default=np.inf)
        assert _small_min(*parts, s0, 0.0, 0.0, 1.0, True) <= below + ROUNDING


def _exact_laws(q, n):
    """Q(B) of every token set B (a frozenset), in rationals, from the exact set law."""
    w = [Fraction(float(x)) for x in q]
    law = WithoutReplacement.exact_set_law([x / sum(w) for x in w], n)
    return {frozenset(B): sum((w for U, w in law.items() if U <= set(B)), Fraction(0))
            for B in _subsets(len(q))}


def _race_cases():
    """(p, q, n) on 7 tokens: Dirichlet pairs, targets inside successive sampling's coverage
    polytope (α* = 1) and just outside it, a dominant draft token beside rare ones (the shape of
    the char-LSTM rows where α* falls short of one by 1e-5), ties, zeros, sub-probability targets,
    n up to V - 1."""
    for seed in range(10):
        rng = np.random.default_rng(300 + seed)
        V, n = 7, int(rng.integers(2, 7))
        q = rng.dirichlet(np.full(V, 0.6))
        kind = seed % 5
        if kind == 3:
            q = np.concatenate(([0.8], 0.2 * rng.dirichlet(np.ones(V - 3)), [1e-6, 1e-7]))
            q /= q.sum()
        model = make_draft_model(q, n, "without-replacement")
        if kind in (1, 3):
            p = 0.5 * (model_vertex(model, rng.permutation(V)) + model_vertex(model, rng.permutation(V)))
            if kind == 3:
                p[-2:] += rng.uniform(0, 1e-4, 2)
        elif kind == 2:
            p = model_vertex(model, rng.permutation(V)) + 0.05 * rng.dirichlet(np.ones(V))
        else:
            p = rng.dirichlet(np.full(V, 0.5))
        p /= p.sum()
        if kind == 4:
            q[:3] = q[0]
            q /= q.sum()
            p[:3] = q[:3] * p[:3].sum() / q[:3].sum()
            p[4] = 0.0
            p *= 0.95
        yield p, q, n


@pytest.mark.parametrize("case", range(10))
def test_the_excess_bounds_the_contraction_on_every_cut(case):
    """race_excess on every prefix T of the ratio order (T = Ω included) is a Hall excess:
    p(A) <= Q(T) - Q(T \\ A) + ε for every A ⊆ T, Q in exact rationals; with T = Ω it is never
    above the partial-replacement majorant's alone (W the same tokens)."""
    p, q, n = list(_race_cases())[case]
    Q = _exact_laws(q, n)
    order = exact_ratio_order(p, q)
    V = p.size
    for length in range(V + 1):
        T = [int(y) for y in order[:length]]
        if np.count_nonzero(q[T]) < n:
            continue
        for work in ((1 << 2) * V * (n + 1), MAJORANT_WORK):
            eps = race_excess(p, q, n, order[:length], float(q[order[length:]].sum()), work)
            worst = max(float(p[sorted(set(T) - set(B))].sum() - (Q[frozenset(T)] - Q[frozenset(B)]))
                        for B in _subsets(V) if B <= set(T))
            assert worst <= eps + ROUNDING, (length, work)
            if length == V:
                W = list(np.argsort(-q, kind="stable")[:exact_tokens(q, n, V, work)])
                assert eps <= max(0.0, p.sum() - 1.0 - _majorant_minimum(p, q, n, W)) + ROUNDING


def test_the_clock_majorant_lies_above_the_containment():
    """Q(B) <= E[exp(-q(Ω \\ B) τ_n(T))] for every B ⊆ T, with equality at B = T, in rationals: the
    right side is T's containment when one token of mass q(Ω \\ B) joins T."""
    rng = np.random.default_rng(21)
    q = [Fraction(int(x)) for x in rng.integers(1, 30, size=6)]
    q = [x / sum(q) for x in q]
    n, T = 3, {0, 1, 2, 3, 4}
    law = WithoutReplacement.exact_set_law(q, n)
    for B in _subsets(6):
        if not B <= T:
            continue
        Q = sum((w for U, w in law.items() if U <= B), Fraction(0))
        rest = 1 - sum((q[y] for y in B), Fraction(0))
        joined = [q[y] for y in sorted(T)] + [rest]  # T's tokens, then the one outside
        law_joined = WithoutReplacement.exact_set_law([x / sum(joined) for x in joined], n)
        psi = sum((w for U, w in law_joined.items() if len(T) not in U), Fraction(0))
        assert Q <= psi
        if B == T:
            assert Q == psi


def _exhaustive(p, q, n):
    return optimal_acceptance(p, q, n, "without-replacement", method="subsets").value


@pytest.mark.parametrize("seed", range(16))
def test_the_face_bound_never_exceeds_alpha_star(seed):
    """The face certificate is a lower bound at the best prefix and at every other cut length,
    on Dirichlet pairs and on targets that are successive sampling's own marginals (α* = 1)."""
    rng = np.random.default_rng(200 + seed)
    V, n = 9, int(rng.integers(2, 5))
    q = rng.dirichlet(np.full(V, 0.5))
    if seed % 2:  # a mixture of two vertices: acceptance one, usually not for iid drafts
        model = make_draft_model(q, n, "without-replacement")
        p = 0.5 * (model_vertex(model, rng.permutation(V)) + model_vertex(model, rng.permutation(V)))
        p /= p.sum()
    else:
        p = rng.dirichlet(np.full(V, 0.5))
    model = make_draft_model(q, n, "without-replacement")
    alpha = _exhaustive(p, q, n)
    order = exact_ratio_order(p, q)
    upper, length = best_prefix(p, model, order)
    assert upper == pytest.approx(alpha, abs=QUADRATURE_EXACT)
    for cut in {length, 0, V // 2, V - 1}:
        bound = face_bound(p, model, order, cut, work=(1 << 4) * V * (n + 1))
        assert bound is None or bound <= alpha + QUADRATURE_EXACT


def test_the_face_bound_is_exact_when_every_token_is_drawn_without_replacement():
    """With W all of the tokens the majorant is the model itself: the bound meets α* = 1 on a
    target that iid drafts cannot accept with probability one."""
    q = np.array([0.5, 0.2, 0.15, 0.1, 0.05])
    model = make_draft_model(q, 2, "without-replacement")
    p = model_vertex(model, np.arange(5))  # a vertex: α* = 1
    assert optimal_acceptance(p, q, 2).value < 1.0 - 0.04  # iid drafts
    order = exact_ratio_order(p, q)
    assert face_bound(p, model, order, 0) == pytest.approx(1.0, abs=ROUNDING)


def _no_wolfe(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("Wolfe's method ran")
    monkeypatch.setattr(mnp, "min_norm_base", refuse)


def _beyond_iid():
    """V = 30, three drafts: 0.9 of the vertex of q's order plus 0.1 of q, in successive
    sampling's coverage polytope (α* = 1) but not in the iid drafts' (α* 0.9988)."""
    q = np.random.default_rng(5).dirichlet(np.full(30, 0.4))
    model = make_draft_model(q, 3, "without-replacement")
    p = 0.9 * model_vertex(model, np.argsort(-q)) + 0.1 * q
    return p / p.sum(), q


def test_the_front_door_proves_acceptance_one_by_the_majorant(monkeypatch):
    """V = 30, three drafts (4,060 draft sets: beyond the flow proof's default size): a target in
    successive sampling's coverage polytope whose iid α* is below one is proven α* = 1 by the
    face certificate, without the flow or Wolfe's method."""
    p, q = _beyond_iid()
    assert optimal_acceptance(p, q, 3).value < 1.0 - 1e-3  # iid drafts
    _no_wolfe(monkeypatch)
    res = optimal_acceptance(p, q, 3, "without-replacement")
    assert (res.status, res.certificate, res.method) == ("optimal", "majorant", "prefix")
    assert res.value == pytest.approx(1.0, abs=ROUNDING) and abs(res.certificate_gap) <= CERT_TOL


def test_the_front_door_proves_by_the_iid_base(monkeypatch):
    """Where iid drafts already reach α* (here acceptance one), their base is the certificate."""
    rng = np.random.default_rng(8)
    p = rng.dirichlet(np.ones(40))
    q = 0.8 * p + 0.2 / 40
    _no_wolfe(monkeypatch)
    res = optimal_acceptance(p, q, 4, "without-replacement")
    assert (res.status, res.certificate) == ("optimal", "iid-base")
    assert res.value == pytest.approx(1.0, abs=ROUNDING)


def test_acceptance_one_is_claimed_only_when_proven(tmp_path, monkeypatch, capsys):
    """check-acceptance says "acceptance one: yes" only with a proof; a cut of value one alone (the
    prefix route without its majorant certificates, beyond the flow's size) says it is not proven,
    and its JSON row has acceptance_one null."""
    p, q = _beyond_iid()
    np.save(tmp_path / "p.npy", p)
    np.save(tmp_path / "q.npy", q)
    argv = ["check-acceptance", str(tmp_path / "p.npy"), str(tmp_path / "q.npy"), "-n", "3",
            "--sampling", "without-replacement", "--method", "prefix"]
    assert main(argv) == 0
    assert "acceptance one: yes" in capsys.readouterr().out
    monkeypatch.setattr(certify, "_successive_bounds", lambda *args: None)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "alpha* <= 1" in out and "acceptance one: not proven" in out and ": yes" not in out
    assert main(argv + ["--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["status"] == "upper-bound" and row["acceptance_one"] is None


def test_a_char_lstm_row_at_acceptance_one_is_proven_without_wolfe(monkeypatch):
    """The pretrained char-LSTM at temperature 0.7 against itself at 1.2, position 8 of seed 0, two
    drafts without replacement: iid α* 0.9942, α* = 1 proven by the face certificate (Wolfe's method
    took 7 s of CPU on it, and on a loaded machine ran out of time)."""
    from mdtheory.errors import MdtheoryError
    from mdtheory.language import drafters, lm

    try:
        lm.textgenrnn_files()
        import h5py  # noqa: F401
    except (MdtheoryError, ImportError) as exc:
        pytest.skip(f"the pretrained char-LSTM cannot be read: {exc}")
    target = drafters.load_model("char-lstm", 0.7)
    drafter = drafters.make_drafter("tempered", target, np.random.default_rng(0), temperature=1.2)
    P, Q = drafters.lm_pairs(9, target, drafter, np.random.default_rng(0))
    assert optimal_acceptance(P[8], Q[8], 2).value < 0.995  # iid drafts
    _no_wolfe(monkeypatch)
    res = optimal_acceptance(P[8], Q[8], 2, "without-replacement")
    assert (res.status, res.certificate) == ("optimal", "majorant")
    assert res.value == pytest.approx(1.0, abs=ROUNDING)


def test_the_coefficients_keep_their_precision_beside_a_dominant_token():
    """q = (1 - 3e-12, 1e-12, 1e-12, 5e-13, 5e-13): after the first token is drawn the mass left
    is 3e-12, summed from the others (1 - q(D) would lose 5 digits to cancellation): with W all
    the tokens the polynomial of every part C is Q(C), exact in rationals to 1e-12 relative."""
    q = np.array([1 - 3e-12, 1e-12, 1e-12, 5e-13, 5e-13])
    n = 3
    w = [Fraction(float(x)) for x in q]
    law = WithoutReplacement.exact_set_law([x / sum(w) for x in w], n)
    coef = partial_replacement_coefficients(q, n, 0.0)
    for C in range(1, 1 << q.size):
        part = {i for i in range(q.size) if C >> i & 1}
        exact = float(sum((v for U, v in law.items() if U <= part), Fraction(0)))
        assert coef[C, 0] == pytest.approx(exact, rel=ROUNDING, abs=0.0), part


def _rare_tokens():
    """V = 60, six drafts: q with a token of 0.8 and three of 1e-6, p a mixture of two vertices of
    successive sampling's coverage polytope plus up to 3e-5 on the three rare tokens: α* falls
    short of one by 1.4e-7, the cut all tokens but two rare ones (the shape of the char-LSTM rows
    on which Wolfe's method needs 4,000 - 5,700 iterations)."""
    rng = np.random.default_rng(8)
    V, n = 60, int(rng.integers(4, 8))
    q = np.concatenate([[0.8], 0.2 * rng.dirichlet(np.full(V - 1, 0.3))])
    q[-3:] = 1e-6
    q /= q.sum()
    model = make_draft_model(q, n, "without-replacement")
    p = 0.5 * (model_vertex(model, rng.permutation(V)) + model_vertex(model, rng.permutation(V)))
    p[-3:] += rng.uniform(0, 3e-5, 3)
    return p / p.sum(), q, n


def test_the_clock_majorant_proves_a_cut_that_the_contraction_factor_misses(monkeypatch):
    """On :func:`_rare_tokens` the majorant with the contraction factor δ alone leaves an excess of
    9e-6 at the best prefix; with Ψ (exact at the cut) the excess is 0 and the front door proves
    α* by the face certificate without Wolfe's method, at the value the order mixture proves."""
    p, q, n = _rare_tokens()
    model = make_draft_model(q, n, "without-replacement")
    order = exact_ratio_order(p, q)
    upper, length = best_prefix(p, model, order)
    assert 0 < length < p.size and 1.0 - upper > 1e-7
    kept, outside = order[:length], float(q[order[length:]].sum())
    assert race_excess(p, q, n, kept, outside, enough=np.inf) > 10 * CERT_TOL  # δ alone
    assert race_excess(p, q, n, kept, outside) <= ROUNDING
    mixture = optimal_acceptance(p, q, n, "without-replacement", method="mnp")
    _no_wolfe(monkeypatch)
    res = optimal_acceptance(p, q, n, "without-replacement")
    assert (res.status, res.certificate, res.method) == ("optimal", "majorant", "prefix")
    assert res.value == pytest.approx(mixture.value, abs=CERT_TOL)


@pytest.fixture(scope="module")
def three_gram_pairs(tmp_path_factory):
    """The char-LSTM at temperature 1.0 and its 3-gram drafter on 32 positions (``mdtheory
    lm-pairs --positions 32 --target-temperature 1.0 --draft ngram --seed 0``, as
    ``benchmarks/bench_wor_rows.py`` writes them)."""
    out = tmp_path_factory.mktemp("pairs")
    argv = ["lm-pairs", "--positions", "32", "--target-temperature", "1.0", "--draft", "ngram",
            "--seed", "0", "--out", str(out), "--quiet", "--max-seconds", "inf"]
    assert main(argv) == 0
    return np.load(out / "P.npy", allow_pickle=False), np.load(out / "Q.npy", allow_pickle=False)


@pytest.mark.slow
@pytest.mark.char_lstm
@pytest.mark.parametrize("position,n", [(10, 7), (17, 5)])
def test_char_lstm_rows_near_one_are_proven_without_wolfe(three_gram_pairs, monkeypatch, position, n):
    """Rows 10 (n = 7) and 17 (n = 5) of :func:`three_gram_pairs`: α* = 1 - 8.0e-6 and 1 - 3.8e-5,
    iid α* 0.99963 and 0.99982. The face certificate proves both with one face bound and no
    iteration of Wolfe's method (which needs 4,000 - 5,700 on them)."""
    p, q = three_gram_pairs[0][position], three_gram_pairs[1][position]
    calls = []
    real = certify.face_bound
    monkeypatch.setattr(certify, "face_bound", lambda *a, **k: calls.append(a[3]) or real(*a, **k))
    _no_wolfe(monkeypatch)
    res = optimal_acceptance(p, q, n, "without-replacement")
    assert (res.status, res.certificate) == ("optimal", "majorant") and len(calls) == 1
    assert 1e-6 < 1.0 - res.value < 1e-4 and optimal_acceptance(p, q, n).value < res.value - 1e-4
