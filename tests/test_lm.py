"""The pretrained char-LSTM (textgenrnn 2.0.0 weights in numpy), its drafters and its commands."""

from dataclasses import replace

import numpy as np
import pytest

from mdtheory import lm
from mdtheory.errors import InvalidInputError, MdtheoryError
from mdtheory.logits import to_probs

try:
    lm.textgenrnn_files()
    import h5py  # noqa: F401
    HAVE_MODEL = True
except (MdtheoryError, ImportError):
    HAVE_MODEL = False
needs_model = pytest.mark.skipif(not HAVE_MODEL, reason=f"textgenrnn's data absent: {lm.INSTALL}")

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


@needs_model
def test_forward_pass_is_faithful(model):
    ids = model.encode(PARAGRAPH)
    assert (ids != lm.PAD).all()
    bits = model.bits_per_char(PARAGRAPH)
    assert 1.5 < bits < 2.3  # measured 1.91; the best unigram code is 4.19
    assert bits < _unigram_bits(ids) - 1.5
    assert abs(model.with_dtype(np.float64).bits_per_char(PARAGRAPH) - bits) < 1e-4


@needs_model
def test_a_mislaid_kernel_is_obvious(model):
    """Without Keras' CuDNN re-layout the same weights score tens of bits per char."""
    w = dict(model.weights)
    for k in (1, 2):  # undo the conversion: the per-gate blocks as stored in the file
        w[f"kernel{k}"] = np.hstack([b.reshape(b.shape[::-1], order="F").T
                                     for b in np.hsplit(w[f"kernel{k}"], 4)])
        w[f"recurrent{k}"] = np.hstack([b.T for b in np.hsplit(w[f"recurrent{k}"], 4)])
    assert replace(model, weights=w).bits_per_char(PARAGRAPH) > 20  # measured 69


@needs_model
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


def test_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(lm.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MdtheoryError, match="pip install --no-deps textgenrnn==2.0.0"):
        lm.textgenrnn_files()
