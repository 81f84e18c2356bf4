"""Bad input to the library raises a named error with a message naming the culprit."""

import numpy as np
import pytest

import mdtheory as md

P = [0.5, 0.5]


@pytest.mark.parametrize("q,err,msg", [
    ([0.5, -0.2, 0.7], md.InvalidDistributionError, r"q\[1\] = -0.2 is negative"),
    ([0.5, np.nan, 0.5], md.InvalidDistributionError, r"q\[1\] = nan is not finite"),
    ([np.inf, 0.5, 0.5], md.InvalidDistributionError, r"q\[0\] = inf is not finite"),
    ([0.0, 0.0, 0.0], md.InvalidDistributionError, "q is all zeros"),
    ([0.5, 0.3, 0.13], md.InvalidDistributionError, r"q sums to 0.93, not 1 .*normalize"),
    ([[[0.5, 0.5]]], md.InvalidDistributionError, r"q has 3 dimension\(s\)"),  # (B, V): a batch
    ([], md.InvalidDistributionError, "q is empty"),
    (["a", "b", "c"], md.InvalidDistributionError, "q has dtype <U1; expected real numbers"),
    (np.array([0.5, 0.5, None], dtype=object), md.InvalidDistributionError, "dtype object"),
])
def test_bad_q(q, err, msg):
    with pytest.raises(err, match=msg):
        md.optimal_acceptance([1 / 3] * 3, q, 2)


def test_length_mismatch():
    with pytest.raises(md.InvalidDistributionError, match="p has length 2 but q has length 3"):
        md.optimal_acceptance(P, [0.2, 0.3, 0.5], 2)


@pytest.mark.parametrize("n,msg", [(0, "at least 1, got 0"), (-3, "at least 1, got -3"),
                                   (2.5, "must be an integer, got 2.5"), (True, "integer")])
def test_bad_drafts(n, msg):
    with pytest.raises(md.InvalidInputError, match=msg):
        md.optimal_acceptance(P, P, n)


def test_unknown_method_lists_choices():
    with pytest.raises(md.InvalidInputError, match="unknown method 'simplex'; valid choices: auto, prefix"):
        md.optimal_acceptance(P, P, 2, method="simplex")


def test_prefix_refused_where_not_exact():
    with pytest.raises(md.InvalidInputError, match="exact only for iid, without-replacement"):
        md.optimal_acceptance(P, np.full((2, 2), 0.5), sampling="independent", method="prefix")


def test_normalize_rescales():
    assert md.alpha_star([2, 2], [1, 3], 1, normalize=True) == pytest.approx(0.75)


def test_too_large_is_refused_with_size_and_route():
    V = 40
    with pytest.raises(md.ProblemTooLargeError, match=r"2\^40 .*use the prefix method"):
        md.optimal_acceptance(np.full(V, 1 / V), np.full(V, 1 / V), 2, method="subsets")
    with pytest.raises(md.ProblemTooLargeError,
                       match=r"2.56e\+06 draft tuples x 40 tokens = 1.02e\+08 variables"):
        md.optimal_acceptance(np.full(V, 1 / V), np.full(V, 1 / V), 4, method="otlp-literal")


def test_errors_are_valueerrors():
    assert issubclass(md.InvalidDistributionError, ValueError)
    assert issubclass(md.ProblemTooLargeError, md.MdtheoryError)
    assert issubclass(md.SolverError, md.MdtheoryError)


def test_normalize_when_the_float64_sum_overflows():
    """Finite entries whose sum overflows: normalize=True divides each such vector by its largest
    entry first (not by an infinite sum: all zeros, alpha* = 0). Without normalize: refused."""
    from mdtheory._validate import as_distribution

    big = np.array([1e308, 1e308])
    assert as_distribution(big, "p", normalize=True).tolist() == [0.5, 0.5]
    rows = as_distribution(np.array([[1e308, 1e308, 0.0], [1.0, 2.0, 1.0]]), "q", normalize=True,
                           ndim=2)
    assert rows.tolist() == [[0.5, 0.5, 0.0], [0.25, 0.5, 0.25]]
    assert md.alpha_star(big, np.array([0.5, 0.5]), 2, normalize=True) == 1.0
    with pytest.raises(md.InvalidDistributionError, match="float64 range"):
        md.alpha_star(big, np.array([0.5, 0.5]), 2)


@pytest.mark.parametrize("dtype", ["timedelta64[s]", "datetime64[s]", "bool"])
def test_non_number_dtypes_are_refused(dtype):
    """numpy counts timedelta64 as an integer type; times are not probabilities."""
    with pytest.raises(md.InvalidDistributionError, match="expected real numbers"):
        md.alpha_star(np.array([1, 1]).astype(dtype), np.array([0.5, 0.5]), 2, normalize=True)


def test_batched_torch_rows_like_single_rows():
    """(B, V) tensors in bfloat16, float16 or with requires_grad: each row is validated as a single
    p (same dtype tolerance), so a batch gives the single problems' values, not a TypeError or
    RuntimeError from np.asarray."""
    torch = pytest.importorskip("torch")
    rows = [[0.2, 0.3, 0.5], [0.5, 0.3, 0.2]]
    q = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    for P in (torch.tensor(rows, dtype=torch.bfloat16), torch.tensor(rows, dtype=torch.float16),
              torch.tensor(rows, dtype=torch.float64, requires_grad=True)):
        Q = q.to(P.dtype)
        assert list(md.alpha_star(P, Q, 2)) == [md.alpha_star(row, Q, 2) for row in P]
        assert list(md.alpha_star(Q, P.detach(), 2)) == [md.alpha_star(Q, row, 2) for row in P.detach()]


@pytest.mark.parametrize("call, match", [
    (lambda q: md.alpha_star([[0.5, 0.5], [1.0]], q, 2), "not a rectangular array"),
    (lambda q: md.alpha_star(q, q, 2, method=["prefix"]), "unknown method"),
    (lambda q: md.alpha_star(q, md.IID(q, 2), 2, "without-replacement"), "contradicts the draft model"),
    (lambda q: md.alpha_star(q, md.IID(q, 2), 2, "no-such-sampling"), "unknown sampling"),
])
def test_library_bad_input_is_an_input_error(call, match):
    with pytest.raises(md.InvalidInputError, match=match):
        call(np.array([0.5, 0.3, 0.2]))
    q = np.array([0.5, 0.3, 0.2])
    model = md.make_draft_model(q, 2, "without-replacement")
    assert md.alpha_star(q, model, 2) == md.alpha_star(q, model, 2, "without-replacement")


def test_long_vectors_take_one_compiled_pass_with_the_same_bits_and_messages(monkeypatch):
    """From COMPILED_MIN_V tokens on, with numba loaded, a float64 vector is checked and divided
    in one compiled pass: the same array as the general path (divided by numpy's sum), and every
    bad entry still named by the general path's message."""
    import numba  # noqa: F401  (the compiled pass runs once numba is loaded)

    from mdtheory import _validate
    from mdtheory._validate import COMPILED_MIN_V, as_distribution

    calls = []
    scaled = _validate._scaled
    monkeypatch.setattr(_validate, "_scaled", lambda *a: calls.append(a[0].size) or scaled(*a))
    rng = np.random.default_rng(0)
    x = rng.dirichlet(np.ones(COMPILED_MIN_V + 3)) * (1 + 3e-7)
    got = as_distribution(x, "p")
    assert calls == [x.size]
    assert got is not x and np.array_equal(got, x / x.sum())
    assert np.array_equal(got, as_distribution(x[::-1].copy()[::-1], "p"))  # a strided view: numpy
    assert np.array_equal(as_distribution(2 * x, "p", normalize=True), 2 * x / (2 * x).sum())
    big = np.zeros(COMPILED_MIN_V)
    big[0] = 1 + 5e-7  # an entry above one within the sum tolerance: accepted, as by the general path
    assert as_distribution(big, "p")[0] == 1.0
    for bad, msg in [(np.nan, r"p\[7\] = nan is not finite"), (-1e-9, r"p\[7\] = -1e-09 is negative"),
                     (np.inf, r"p\[7\] = inf is not finite")]:
        y = x.copy()
        y[7] = bad
        with pytest.raises(md.InvalidDistributionError, match=msg):
            as_distribution(y, "p")
        with pytest.raises(md.InvalidDistributionError, match=msg):
            as_distribution(y, "p", normalize=True)
    with pytest.raises(md.InvalidDistributionError, match="p sums to 1.5, not 1"):
        as_distribution(1.5 * x / x.sum(), "p")
