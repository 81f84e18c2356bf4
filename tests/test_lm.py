"""The pretrained char-LSTM (textgenrnn 2.0.0 weights in numpy), its drafters and its commands."""

import json
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from mdtheory.blocks import simulation as blockeff
from mdtheory.cli import main
from mdtheory.errors import InvalidInputError, MdtheoryError
from mdtheory.language import drafters, lm
from mdtheory.language.logits import to_probs
from mdtheory.rules import make_rule

PARAGRAPH = (
    "The city council met on Tuesday night to discuss the new budget for the coming year. Several "
    "residents spoke about the need for better roads and more money for the public schools, while "
    "others asked the council to keep taxes low."
)


@pytest.fixture(scope="module")
def model():
    return lm.load_char_lstm()


def _unigram_bits(ids: np.ndarray) -> float:
    """The best unigram code for the text itself (its own character frequencies)."""
    freq = np.bincount(ids) / ids.size
    return float(-np.log2(freq[ids]).mean())


@pytest.mark.char_lstm
@pytest.mark.slow
def test_forward_pass_is_faithful(model):
    ids = model.encode(PARAGRAPH)
    assert (ids != lm.PAD).all()
    bits = model.bits_per_char(PARAGRAPH)
    assert 1.5 < bits < 2.3  # measured 1.91; the best unigram code is 4.19
    assert bits < _unigram_bits(ids) - 1.5
    assert abs(model.with_dtype(np.float64).bits_per_char(PARAGRAPH) - bits) < 1e-4


@pytest.mark.char_lstm
@pytest.mark.slow
def test_a_mislaid_kernel_is_obvious(model):
    """Without Keras' CuDNN re-layout the same weights score tens of bits per char."""
    w = dict(model.weights)
    for k in (1, 2):  # undo the conversion: the per-gate blocks as stored in the file
        w[f"kernel{k}"] = np.hstack([b.reshape(b.shape[::-1], order="F").T
                                     for b in np.hsplit(w[f"kernel{k}"], 4)])
        w[f"recurrent{k}"] = np.hstack([b.T for b in np.hsplit(w[f"recurrent{k}"], 4)])
    assert replace(model, weights=w).bits_per_char(PARAGRAPH) > 20  # measured 69


@pytest.mark.char_lstm
def test_probs_rows_and_padding(model):
    p = model.probs(model.windows([[], model.encode("Hello"), model.encode("x" * 60)]), 0.8, top_k=50)
    assert p.shape == (3, model.V) and p.dtype == np.float64
    assert np.allclose(p.sum(axis=1), 1.0, atol=1e-12, rtol=0)
    assert (p[:, lm.PAD] == 0).all() and ((p > 0).sum(axis=1) <= 50).all()


def test_to_probs_numpy_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    z = rng.normal(size=(5, 30)) * 3
    for kw in ({}, {"temperature": 0.7}, {"top_k": 4}, {"top_p": 0.8}, {"top_k": 10, "top_p": 0.5}):
        a = to_probs(z, **kw)
        b = to_probs(torch.from_numpy(z), **kw).numpy()
        assert np.abs(a - b).max() < 1e-12, kw
        assert np.allclose(a.sum(axis=1), 1.0)
    with pytest.raises(InvalidInputError, match="top_k"):
        to_probs(z, top_k=0)


@pytest.mark.parametrize("logits, kw, match", [
    ([1.0, 2.0, 3.0], {"temperature": float("inf")}, "temperature"),
    ([1.0, 2.0, 3.0], {"temperature": float("nan")}, "temperature"),
    ([1.0, float("nan")], {}, "NaN"),
    ([1.0, float("inf")], {}, r"\+inf"),
    ([-float("inf"), -float("inf")], {}, "all -inf"),
    ([1.0, 2.0], {"top_k": float("nan")}, "top_k"),
])
def test_to_probs_refuses_what_defines_no_law(logits, kw, match):
    with pytest.raises(InvalidInputError, match=match):
        to_probs(np.array(logits), **kw)


def test_to_probs_extreme_values_give_a_law():
    """Shifted by the row max before the division: no inf - inf, and a vanishing temperature gives
    the argmax (ties split evenly)."""
    assert to_probs(np.array([1e308, -1e308]), temperature=0.5).tolist() == [1.0, 0.0]
    assert to_probs(np.array([1.0, 3.0, 2.0]), temperature=1e-320).tolist() == [0.0, 1.0, 0.0]
    assert to_probs(np.array([3.0, 3.0, 1.0]), temperature=1e-320).tolist() == [0.5, 0.5, 0.0]
    p = to_probs(np.array([0.0, np.log(3.0), -np.inf]))
    assert np.allclose(p, [0.25, 0.75, 0.0], rtol=0, atol=1e-15)
    torch = pytest.importorskip("torch")
    assert to_probs(torch.tensor([1.0, 3.0, 2.0]), temperature=1e-30).tolist() == [0.0, 1.0, 0.0]


def test_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(lm.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MdtheoryError, match="pip install --no-deps textgenrnn==2.0.0"):
        lm.textgenrnn_files()


# ---------------------------------------------------------------- drafters and pairs
@pytest.mark.char_lstm
@pytest.mark.slow
def test_drafter_laws_sum_to_one(model):
    rng = np.random.default_rng(0)
    target = drafters.LSTMLaw(model, 1.0)
    contexts = [model.encode("Wh"), model.encode("The best "), np.array([model.vocab[lm.META]])]
    ngram = drafters.distill_ngram(target, rng, order=3, streams=8, length=40)
    assert ngram.strength in drafters.NGRAM_STRENGTHS
    for kind, law in (("tempered", drafters.make_drafter("tempered", target, rng, temperature=1.3,
                                                         top_k=20)),
                      ("quantized", drafters.make_drafter("quantized", target, rng)),
                      ("ngram", ngram)):
        q = law.laws(contexts)
        assert q.shape == (3, model.V), kind
        assert np.abs(q.sum(axis=1) - 1).max() < 1e-12, kind
        assert (q >= 0).all() and (q[:, lm.PAD] == 0).all(), kind
    p = target.laws(contexts)
    q8 = drafters.make_drafter("quantized", target, rng).laws(contexts)
    assert 0 < np.abs(p - q8).sum(axis=1).max() < 0.2  # int8 rounding moves the law, a little


@pytest.mark.char_lstm
@pytest.mark.slow
def test_lm_pairs_reproducible_by_seed(tmp_path):
    def pairs(seed, name):
        out = tmp_path / name
        argv = ["lm-pairs", "--positions", "70", "--target-temperature", "0.9", "--draft", "tempered",
                "--draft-temperature", "1.2", "--seed", str(seed), "--out", str(out), "--quiet"]
        assert main(argv) == 0
        return np.load(out / "P.npy"), np.load(out / "Q.npy")

    (P, Q), (P2, Q2), (P3, _) = pairs(3, "a"), pairs(3, "b"), pairs(4, "c")
    assert P.shape == Q.shape == (70, 465)
    assert np.abs(P.sum(axis=1) - 1).max() < 1e-12 and np.abs(Q.sum(axis=1) - 1).max() < 1e-12
    assert np.array_equal(P, P2) and np.array_equal(Q, Q2)
    assert not np.array_equal(P, P3)


@pytest.mark.parametrize("argv, culprit", [
    (["lm-pairs", "--positions", "0", "--draft", "tempered", "--out", "x"], "--positions"),
    (["lm-pairs", "--positions", "5", "--draft", "tempered", "--draft-temperature", "0", "--out", "x"],
     "temperature"),
    (["block-efficiency", "--drafts", "0", "--length", "3"], "--drafts"),
    (["block-efficiency", "--drafts", "2", "--length", "3", "--rules", "rrs,nope"], "nope"),
    (["block-efficiency", "--drafts", "2", "--length", "3", "--rules", "rrs-wor"], "rrs-wor"),
])
def test_bad_input_exits_2_with_one_line(argv, culprit, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and culprit in err


# ---------------------------------------------------------------- block efficiency
class MarkovLaw:
    """A toy law whose next token depends on the last one: rows of a fixed stochastic matrix."""

    def __init__(self, matrix):
        self.matrix = matrix

    def __call__(self, context):
        return self.matrix[context[-1]]


def _first_two_tokens_pvalue(rule, sampling, reps=2500):
    """Chi-square p-value of the first two tokens emitted from a fixed context against the target."""
    rng = np.random.default_rng(11)
    V = 4
    target = MarkovLaw(rng.dirichlet(np.ones(V), size=V))
    drafter = MarkovLaw(rng.dirichlet(np.ones(V) * 0.7, size=V))
    counts = np.zeros((V, V))
    longest, prepared = 0, {}
    for _ in range(reps):
        out: list[int] = []
        while len(out) < 2:  # bounded: every step emits at least one token
            out += blockeff.speculative_step(target, drafter, (0, *out), rule, 3, 2, rng, sampling,
                                             prepared=prepared)
        longest = max(longest, len(out))
        counts[out[0], out[1]] += 1
    assert longest > 2  # blocks of more than one token did happen
    expected = reps * target.matrix[0][:, None] * target.matrix
    return stats.chisquare(counts.ravel(), expected.ravel()).pvalue


@pytest.mark.parametrize("rule, sampling", [("rrs", "iid"), ("khisti-lp", "iid"), ("optimal", "iid"),
                                            ("rrs-wor", "without-replacement")])
def test_block_decoding_is_lossless(rule, sampling):
    assert _first_two_tokens_pvalue(rule, sampling) > 1e-3


def test_the_losslessness_check_catches_a_lossy_verifier(monkeypatch):
    """Accepting the first draft always (the drafter's law, not the target's) fails the same check."""
    class AcceptFirst:
        def __init__(self, *args, **kwargs):
            pass

        def select(self, drafts, rng):
            return int(drafts[0]), True

    from mdtheory import rules

    monkeypatch.setattr(rules, "make_rule", AcceptFirst)
    assert _first_two_tokens_pvalue("single", "iid") < 1e-6


@pytest.mark.char_lstm
@pytest.mark.slow
def test_block_efficiency_rows(capsys):
    argv = ["block-efficiency", "--drafts", "2", "--length", "2", "--rules", "single,optimal",
            "--steps", "4", "--draft-temperature", "1.2", "--json", "--quiet"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [r["rule"] for r in rows] == ["token:single", "token:optimal"]
    for r in rows:
        assert set(r) == {"rule", "drafts", "length", "block_efficiency", "ci95", "interval",
                          "replicates", "ci95_iid", "target_calls", "tokens", "status", "success",
                          "message"}
        assert r["status"] == "estimate" and r["success"] and r["message"].startswith("estimate: E|B| = ")
        assert r["target_calls"] == 4 and 4 <= r["tokens"] <= 12
        assert r["block_efficiency"] == r["tokens"] / 4


# ---------------------------------------------------------------- khisti-lp's default truncation
def test_khisti_default_guard_falls_back_losslessly():
    """Where the truncated tournament is below single-draft, the default keeps the first draft: a
    flat p at V = 50 and a q within 5% of it (the 5 tokens outside the truncation keep by their
    bucketed keys, which distorts the winner's law when q is nearly p)."""
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(50, 5.0))
    q = np.abs(p * (1 + 0.05 * rng.standard_normal(50)))
    rule = make_rule("khisti-lp", p, q, 2, normalize=True)
    single = 1 - 0.5 * np.abs(rule.p - rule.q).sum()
    unguarded = make_rule("khisti-lp", p, q, 2, s=rule.s, normalize=True)
    assert rule.fallback and unguarded.exact_acceptance() < single - 1e-4
    acceptance, law = rule.enumerate()
    assert abs(acceptance - single) < 1e-12 and abs(rule.exact_acceptance() - single) < 1e-12
    assert np.abs(law - rule.p).max() < 1e-12


@pytest.mark.char_lstm
def test_khisti_default_not_below_single_on_real_pairs(model):
    rng = np.random.default_rng(0)
    target = drafters.LSTMLaw(model, 1.0)
    P, Q = drafters.lm_pairs(12, target, drafters.make_drafter("quantized", target, rng), rng)
    below_s5 = 0
    for p, q in zip(P, Q, strict=True):
        single = 1 - 0.5 * np.abs(p - q).sum()
        assert make_rule("khisti-lp", p, q, 2).exact_acceptance() >= single - 1e-12
        below_s5 += make_rule("khisti-lp", p, q, 2, s=5).exact_acceptance() < single - 1e-9
    assert below_s5 > 0  # the fixed s = 5 of the first version does fall below on these pairs


class Memo:
    """A language law with its rows cached by context (the laws at a context never change)."""

    def __init__(self, law):
        self.law, self.rows = law, {}

    def __call__(self, context):
        if tuple(context) not in self.rows:
            self.rows[tuple(context)] = self.law(context)
        return self.rows[tuple(context)]


@pytest.mark.char_lstm
@pytest.mark.slow
def test_block_decoding_follows_the_real_target(model):
    """The char-LSTM as target: the next char after a fixed context, by chi-square (cells with an
    expected count under 5 pooled)."""
    rng = np.random.default_rng(5)
    context = (model.vocab[lm.META], *model.encode("The "))
    target = Memo(drafters.LSTMLaw(model, 1.0))
    drafter = Memo(drafters.LSTMLaw(model, 1.5))  # flatter: the drafts are often wrong
    reps, prepared = 600, {}
    first = [blockeff.speculative_step(target, drafter, context, "optimal", 2, 2, rng,
                                       prepared=prepared)[0] for _ in range(reps)]
    observed = np.bincount(first, minlength=model.V).astype(float)
    expected = reps * target(context)
    big = expected >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    assert big.sum() >= 5
    assert stats.chisquare(obs, exp).pvalue > 1e-3
