"""A real pretrained language model in numpy: textgenrnn 2.0.0's character-level LSTM.

PyPI's ``textgenrnn`` 2.0.0 (MIT) ships pretrained weights (``textgenrnn_weights.hdf5``, trained on
Reddit titles) and a 465-token vocabulary (``textgenrnn_vocab.json``; index 0 is padding, 464 is the
title delimiter ``<s>``). This module reads the two files with h5py and runs the network in numpy,
without TensorFlow (importing ``textgenrnn`` itself would pull TensorFlow in; it is never imported).

Architecture (the package's ``model.py``): a window of 40 token ids, left-padded with 0; an
embedding of width 100; two LSTM layers of 128 units (saved from Keras' CuDNNLSTM: the bias of
length 1024 is two halves that add, the kernels are re-laid per gate as Keras does on load, gate
order i, f, c, o, sigmoid gates, tanh cell); an attention-weighted average over the 40 steps of the
concatenation (embedding, LSTM 1, LSTM 2) of width 356; a dense softmax 356 -> 465.

Install the data with ``pip install --no-deps textgenrnn==2.0.0 h5py`` (``scripts/setup.sh`` does).

The forward pass runs its matrix products on one BLAS thread (through ``threadpoolctl`` where it is
installed, as the ``lm`` extra does): its products are small (a batch x 128 by 128 x 512 per time
step), and a threaded BLAS spends more time synchronising than computing on them (measured on a
2-core machine: 7 ms a batch of 16 windows on one thread, 0.9 s with OpenBLAS' default threads under
load). The input is a sliding window, so there is no exact incremental state: each step recomputes
the window, batched over texts.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..errors import MdtheoryError
from .logits import to_probs

__all__ = ["CharLSTM", "load_char_lstm", "textgenrnn_files", "one_blas_thread", "INSTALL", "WINDOW",
           "PAD", "META"]

#: The command that installs the model's data files.
INSTALL = "pip install --no-deps textgenrnn==2.0.0 h5py"
#: Context window of the network.
WINDOW = 40
#: Padding id (left padding of short contexts; never emitted).
PAD = 0
#: The title delimiter token.
META = "<s>"
_UNITS = 128


def textgenrnn_files() -> tuple[Path, Path]:
    """Paths of ``textgenrnn_weights.hdf5`` and ``textgenrnn_vocab.json`` in the installed package.

    Raises
    ------
    MdtheoryError
        The package (or one of its files) is absent; the message names the install command.
    """
    spec = importlib.util.find_spec("textgenrnn")  # finds the package without importing it
    missing = MdtheoryError(f"the pretrained char-LSTM needs textgenrnn's data files; install them "
                            f"with {INSTALL}")
    if spec is None or not spec.submodule_search_locations:
        raise missing
    root = Path(next(iter(spec.submodule_search_locations)))
    weights, vocab = root / "textgenrnn_weights.hdf5", root / "textgenrnn_vocab.json"
    if not (weights.is_file() and vocab.is_file()):
        raise missing
    return weights, vocab


def _cudnn_kernel(k: np.ndarray) -> np.ndarray:
    """Keras' CuDNNLSTM -> LSTM kernel conversion: per gate block, ``k.T.reshape(k.shape, order='F')``."""
    return np.hstack([b.T.reshape(b.shape, order="F") for b in np.hsplit(k, 4)])


def _cudnn_recurrent(k: np.ndarray) -> np.ndarray:
    """Keras' CuDNNLSTM -> LSTM recurrent kernel conversion: per gate block, the transpose."""
    return np.hstack([b.T for b in np.hsplit(k, 4)])


_THREADS: dict = {}


def one_blas_thread():
    """A context in which BLAS runs on one thread (a no-op without ``threadpoolctl``)."""
    if "controller" not in _THREADS:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _THREADS["controller"] = None
        else:
            _THREADS["controller"] = ThreadpoolController()
    controller = _THREADS["controller"]
    if controller is None:
        return contextlib.nullcontext()
    return controller.limit(limits=1, user_api="blas")


@dataclass(frozen=True)
class CharLSTM:
    """The character LSTM's weights, ready for a batched forward pass.

    Attributes
    ----------
    vocab : dict
        Character -> id (ids 1 .. V - 1; 0 is padding).
    weights : dict
        ``embedding`` (V, 100); ``kernel1`` (100, 512), ``recurrent1`` (128, 512), ``bias1`` (512,);
        ``kernel2`` (128, 512), ``recurrent2`` (128, 512), ``bias2`` (512,); ``attention`` (356,);
        ``out_kernel`` (356, V), ``out_bias`` (V,), in Keras' layout (gates i, f, c, o).
    dtype : numpy dtype
        float32 or float64, the arithmetic of the forward pass.
    """

    vocab: dict
    weights: dict
    dtype: type = np.float32

    @property
    def V(self) -> int:
        return self.weights["out_bias"].size

    @property
    def chars(self) -> list[str]:
        """Id -> character (``""`` for padding)."""
        out = [""] * self.V
        for c, i in self.vocab.items():
            out[i] = c
        return out

    def encode(self, text: str) -> np.ndarray:
        """Character ids of ``text`` (characters outside the vocabulary map to padding, as in
        textgenrnn's own encoder)."""
        return np.array([self.vocab.get(c, PAD) for c in text], dtype=np.int64)

    def decode(self, ids) -> str:
        chars = self.chars
        return "".join(chars[i] if chars[i] != META else "\n" for i in np.asarray(ids).ravel())

    @staticmethod
    def windows(contexts) -> np.ndarray:
        """The last :data:`WINDOW` ids of each context, left-padded with :data:`PAD`: (B, 40)."""
        out = np.full((len(contexts), WINDOW), PAD, dtype=np.int64)
        for b, ctx in enumerate(contexts):
            tail = np.asarray(ctx[-WINDOW:], dtype=np.int64)  # slice first: contexts grow long
            if tail.size:
                out[b, WINDOW - tail.size:] = tail
        return out

    def with_dtype(self, dtype) -> CharLSTM:
        """The same model computing in another float type (its weights converted once, here)."""
        dtype = np.dtype(dtype).type
        return replace(self, dtype=dtype, weights={k: v.astype(dtype) for k, v in self.weights.items()})

    def logits(self, windows: np.ndarray) -> np.ndarray:
        """Forward pass of a batch of windows (B, 40) of ids: next-token logits (B, V).

        Padding gets logit -inf (textgenrnn never emits it).
        """
        with one_blas_thread():
            return self._forward(windows)

    def _forward(self, windows: np.ndarray) -> np.ndarray:
        # no copy where the weights already have the model's dtype (as with_dtype leaves them)
        w = {k: v.astype(self.dtype, copy=False) for k, v in self.weights.items()}
        windows = np.asarray(windows, dtype=np.int64)
        emb = w["embedding"][windows]  # (B, T, 100)
        h1 = self._lstm(emb, w["kernel1"], w["recurrent1"], w["bias1"])
        h2 = self._lstm(h1, w["kernel2"], w["recurrent2"], w["bias2"])
        seq = np.concatenate([emb, h1, h2], axis=-1)  # (B, T, 356)
        score = seq @ w["attention"]
        att = np.exp(score - score.max(axis=1, keepdims=True))
        att /= att.sum(axis=1, keepdims=True)
        pooled = np.einsum("bt,btd->bd", att, seq)
        z = pooled @ w["out_kernel"] + w["out_bias"]
        z[:, PAD] = -np.inf
        return z

    @staticmethod
    def _lstm(x, kernel, recurrent, bias):
        """One LSTM layer over (B, T, d). The sigmoid gates are 0.5 (1 + tanh(z / 2)): their columns
        of the weights are halved first (exact in binary floating point), so one tanh per step
        serves the four gates, with the same bits as 0.5 (1 + tanh(0.5 z)) of each gate."""
        B, T, _ = x.shape
        U = _UNITS
        half = np.full(4 * U, 0.5, dtype=x.dtype)
        half[2 * U:3 * U] = 1.0  # the cell candidate g keeps its scale (tanh)
        xw = x @ (kernel * half) + bias * half  # (B, T, 512)
        recurrent = recurrent * half
        h = np.zeros((B, U), dtype=x.dtype)
        c = np.zeros_like(h)
        out = np.empty((B, T, U), dtype=x.dtype)
        for t in range(T):
            a = np.tanh(xw[:, t] + h @ recurrent)
            c = 0.5 * (1.0 + a[:, U:2 * U]) * c + 0.5 * (1.0 + a[:, :U]) * a[:, 2 * U:3 * U]
            h = 0.5 * (1.0 + a[:, 3 * U:]) * np.tanh(c)
            out[:, t] = h
        return out

    def probs(self, windows: np.ndarray, temperature: float = 1.0, top_k: int | None = None,
              top_p: float | None = None) -> np.ndarray:
        """Next-token laws (B, V) in float64, rows summing to one, through
        :func:`mdtheory.language.logits.to_probs` (temperature, top-k, top-p)."""
        z = self.logits(windows).astype(np.float64)
        return to_probs(z, temperature, top_k, top_p)

    def bits_per_char(self, text: str, batch: int = 256) -> float:
        """Mean -log2 p(next char | preceding text) over ``text``, the first char after ``<s>``."""
        ids = np.concatenate([[self.vocab[META]], self.encode(text)])
        total = 0.0
        for start in range(1, ids.size, batch):
            stop = min(start + batch, ids.size)
            p = self.probs(self.windows([ids[:t] for t in range(start, stop)]))
            total -= np.log2(p[np.arange(stop - start), ids[start:stop]]).sum()
        return total / (ids.size - 1)

    def quantized(self, kind: str = "int8") -> CharLSTM:
        """The model with its weight matrices rounded as a compressed drafter would store them.

        ``float16``: every array rounded to half precision. ``int8``: every matrix rounded to 255
        levels per output channel (column) with a symmetric scale max|w| / 127; biases kept.
        """
        if kind == "float16":
            new = {k: v.astype(np.float16).astype(np.float64) for k, v in self.weights.items()}
        elif kind == "int8":
            new = {k: (_int8_columns(v) if v.ndim == 2 else v) for k, v in self.weights.items()}
        else:
            raise MdtheoryError(f"unknown quantization {kind!r}; valid choices: float16, int8")
        return replace(self, weights={k: v.astype(self.dtype) for k, v in new.items()})


def _int8_columns(w: np.ndarray) -> np.ndarray:
    scale = np.abs(w).max(axis=0, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    return np.clip(np.round(w / scale), -127, 127) * scale


_CACHE: dict = {}


def load_char_lstm(dtype=np.float32) -> CharLSTM:
    """Load textgenrnn 2.0.0's pretrained weights and vocabulary (cached per process).

    Raises
    ------
    MdtheoryError
        textgenrnn or h5py is not installed (the message names the install command).
    """
    if "model" not in _CACHE:
        weights_path, vocab_path = textgenrnn_files()
        try:
            import h5py
        except ImportError:
            raise MdtheoryError(f"reading the char-LSTM's weights needs h5py; install it with "
                                f"{INSTALL}") from None
        with h5py.File(weights_path, "r") as f:
            def raw(layer: str, name: str) -> np.ndarray:
                return np.asarray(f[f"{layer}/{layer}/{name}:0"][()], dtype=np.float64)

            w = {
                "embedding": raw("embedding", "embeddings"),
                "attention": raw("attention", "attention_W")[:, 0],
                "out_kernel": raw("output", "kernel"),
                "out_bias": raw("output", "bias"),
            }
            for k in (1, 2):
                w[f"kernel{k}"] = _cudnn_kernel(raw(f"rnn_{k}", "kernel"))
                w[f"recurrent{k}"] = _cudnn_recurrent(raw(f"rnn_{k}", "recurrent_kernel"))
                w[f"bias{k}"] = raw(f"rnn_{k}", "bias").reshape(2, -1).sum(axis=0)
        vocab = json.loads(vocab_path.read_text(encoding="utf-8"))
        _CACHE["model"] = CharLSTM(vocab=vocab, weights=w, dtype=np.float64)
    return _CACHE["model"].with_dtype(dtype)
