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
    best_prefix,
    face_bound,
    hall_excess,
    partial_replacement_coefficients,
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


@pytest.mark.parametrize("seed", range(12))
def test_hall_excess_is_the_minimum_over_every_set(seed):
    """The prefix theorem for the tokens outside W: the minimum over (part of W, prefix in the
    order of q/p) equals the minimum over all 2^V sets (ties, p = 0 and sub-probability targets
    included)."""
    rng = np.random.default_rng(100 + seed)
    V, n = 8, int(rng.integers(2, 5))
    q = rng.dirichlet(np.full(V, 0.7))
    p = rng.dirichlet(np.full(V, 0.7)) * rng.uniform(0.9, 1.0)
    if seed % 3 == 0:
        p[rng.choice(V, 2, replace=False)] = 0.0
    if seed % 3 == 1:
        p[:3] = q[:3] * p[:3].sum() / q[:3].sum()  # a class of equal ratio
    order = exact_ratio_order(p, q)
    work = (1 << 3) * V * (n + 1)  # W: the 2 or 3 most likely tokens
    eps = hall_excess(p, q, n, order, work=work)
    m = 3 if (1 << 3) * (V - 3 + 1) * (n + 1) <= work else 2
    W = list(np.argsort(-q, kind="stable")[:m])
    low = _majorant_minimum(p, q, n, W)
    assert eps == pytest.approx(max(0.0, p.sum() - 1.0 - low), abs=ROUNDING)


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
