"""Hugging Face causal language models as :class:`mdtheory.language.langmodel.LanguageModel` objects.

Needs the ``hf`` extra (``pip install 'mdtheory[hf]'``: ``transformers`` and torch). A model is
named ``hf:PATH``: a local checkpoint directory (``config.json`` and weights, as ``save_pretrained``
writes them), or a model name already in the local Hugging Face cache. Nothing is downloaded at run
time (``local_files_only``).

Incremental steps reuse the transformer's KV cache, which is exact: the law after appending tokens
equals a full recompute up to float rounding. Texts of different lengths in one batch are
left-padded, with the attention mask hiding the padding and explicit position ids (the position of a
token is the number of real tokens before it), so each text's law is that of the text alone.
Logits are taken in the model's dtype (float32 or float64), converted to float64 and made laws by
:func:`mdtheory.language.logits.to_probs`: temperature, then top-k, then top-p, as ``transformers``'
``TemperatureLogitsWarper``, ``TopKLogitsWarper`` and ``TopPLogitsWarper`` apply them.
"""

from __future__ import annotations

import copy
import inspect
from pathlib import Path

import numpy as np

from ..errors import InvalidInputError
from .langmodel import LanguageModel, State, _as_contexts, _as_tokens
from .logits import check_sampling, to_probs

__all__ = ["HFModel", "load_hf", "is_hf", "INSTALL", "PREFIX"]

#: The command that installs the extra.
INSTALL = "pip install 'mdtheory[hf]'"
#: How a Hugging Face model is named on the command line.
PREFIX = "hf:"
_DTYPES = ("float32", "float64")


def is_hf(spec) -> bool:
    """Whether ``spec`` names a Hugging Face model (``hf:PATH``)."""
    return isinstance(spec, str) and spec.startswith(PREFIX)


def _imports():
    try:
        import torch
        import transformers
    except ImportError:
        raise InvalidInputError(f"Hugging Face models need the hf extra (transformers and torch); "
                                f"install it with {INSTALL}") from None
    return torch, transformers


class HFModel(LanguageModel):
    """A causal language model of ``transformers`` with its KV cache.

    Parameters
    ----------
    net : transformers.PreTrainedModel
        A causal LM (``AutoModelForCausalLM``), in eval mode, on its device.
    tokenizer : transformers tokenizer or None
        Its vocabulary is compared with another model's
        (:func:`mdtheory.language.langmodel.check_same_vocab`).
    name : str
        For messages.
    temperature, top_k, top_p : sampling parameters of the law.
    """

    def __init__(self, net, tokenizer=None, name: str = "hf", temperature: float = 1.0,
                 top_k: int | None = None, top_p: float | None = None):
        check_sampling(temperature, top_k, top_p)
        self.net, self.tokenizer, self.name = net, tokenizer, name
        self.temperature, self.top_k, self.top_p = temperature, top_k, top_p
        self.V = int(net.config.vocab_size)
        cfg = net.config
        self.max_length = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions",
                                                                                   None)
        candidates = [getattr(cfg, "bos_token_id", None), getattr(tokenizer, "bos_token_id", None),
                      getattr(cfg, "eos_token_id", None), getattr(tokenizer, "eos_token_id", None)]
        self.bos = next((int(c) for c in candidates if isinstance(c, int) and 0 <= c < self.V), None)
        params = inspect.signature(net.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"

    @property
    def vocabulary(self) -> dict | None:
        return None if self.tokenizer is None else dict(self.tokenizer.get_vocab())

    @property
    def device(self):
        return self.net.device

    @property
    def dtype(self):
        return self.net.dtype

    def with_sampling(self, temperature: float | None = None, top_k: int | None = None,
                      top_p: float | None = None) -> HFModel:
        """The same network at another temperature / top-k / top-p (``None``: 1, no filter)."""
        out = copy.copy(self)
        out.temperature = 1.0 if temperature is None else temperature
        out.top_k, out.top_p = top_k, top_p
        check_sampling(out.temperature, top_k, top_p)
        return out

    def _forward(self, ids, mask, cache=None):
        torch, _ = _imports()
        positions = (mask.cumsum(1) - 1).clamp(min=0)[:, -ids.shape[1]:]
        kwargs = {self._cache_arg: cache} if cache is not None else {}
        with torch.no_grad():
            out = self.net(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                           **kwargs)
        new_cache = getattr(out, "past_key_values", None)
        if new_cache is None:
            new_cache = out.cache
        z = out.logits[:, -1, : self.V].double().cpu().numpy()
        return to_probs(z, self.temperature, self.top_k, self.top_p), new_cache

    def laws_bytes(self, batch: int, length: int) -> float:
        """Peak bytes of one :meth:`laws` call on ``batch`` contexts of ``length`` tokens (at most the
        model's positions), from its configuration: the logits at every position (B T V), the KV
        cache (2 layers B T d), one layer's attention scores (B heads T^2) and activations (8 B T d),
        in the model's dtype, and the float64 laws: 0.56 to 1.6 times the measured peak on a 2-layer
        GPT-2 (V = 2,000, d = 64) at B = 4 .. 64, T = 100 .. 1,000
        (``python benchmarks/bench_lm_estimates.py --hf``)."""
        cfg = self.net.config
        B = float(max(int(batch), 1))
        T = float(max(1, min(int(length), self.max_length or int(length))))
        d = float(getattr(cfg, "hidden_size", 0) or 0)
        layers = float(getattr(cfg, "num_hidden_layers", 0) or 0)
        heads = float(getattr(cfg, "num_attention_heads", 0) or 0)
        size = float(self.net.dtype.itemsize) if hasattr(self.net.dtype, "itemsize") else 4.0
        per_call = B * T * self.V + 2 * layers * B * T * d + B * heads * T * T + 8 * B * T * d
        return size * per_call + super().laws_bytes(batch, length)

    def _check_length(self, n: int) -> None:
        if self.max_length is not None and n > self.max_length:
            raise InvalidInputError(f"{self.name}: a context of {n} tokens is longer than the model's "
                                    f"{self.max_length} positions")

    def start(self, contexts) -> State:
        torch, _ = _imports()
        contexts = _as_contexts(contexts)
        if not contexts or min(len(c) for c in contexts) == 0:
            raise InvalidInputError(f"{self.name}: every context needs at least one token (a "
                                    "transformer has no law before its first token)")
        T = max(len(c) for c in contexts)
        self._check_length(T)
        for c in contexts:
            if min(c) < 0 or max(c) >= self.V:
                raise InvalidInputError(f"{self.name}: token ids must be in 0 .. {self.V - 1}")
        ids = torch.zeros((len(contexts), T), dtype=torch.long)
        mask = torch.zeros((len(contexts), T), dtype=torch.long)
        for b, c in enumerate(contexts):
            ids[b, T - len(c):] = torch.tensor(c, dtype=torch.long)
            mask[b, T - len(c):] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        probs, cache = self._forward(ids, mask)
        return State(contexts, probs, {"kv": cache, "mask": mask})

    def step(self, state: State, tokens) -> State:
        torch, _ = _imports()
        if state.cache is None or state.cache.get("kv") is None:
            raise InvalidInputError(f"{self.name}: this state was already stepped (its KV cache "
                                    "moved on); step each state once, select() copies one")
        tokens = _as_tokens(tokens, len(state.contexts), self.V)
        self._check_length(max(len(c) for c in state.contexts) + 1)
        mask = state.cache["mask"]
        mask = torch.cat([mask, torch.ones((mask.shape[0], 1), dtype=mask.dtype, device=mask.device)], 1)
        ids = torch.as_tensor(tokens, dtype=torch.long, device=self.device)[:, None]
        kv, state.cache = state.cache["kv"], None
        probs, cache = self._forward(ids, mask, kv)
        contexts = [c + (int(t),) for c, t in zip(state.contexts, tokens, strict=True)]
        return State(contexts, probs, {"kv": cache, "mask": mask})

    def select(self, state: State, rows) -> State:
        torch, _ = _imports()
        if state.cache is None or state.cache.get("kv") is None:
            raise InvalidInputError(f"{self.name}: this state was already stepped")
        rows = np.asarray(rows, dtype=np.int64).ravel()
        index = torch.as_tensor(rows, device=self.device)
        kv = copy.deepcopy(state.cache["kv"])
        kv.reorder_cache(index)
        return State([state.contexts[r] for r in rows], state.probs[rows],
                     {"kv": kv, "mask": state.cache["mask"][index]})


def load_hf(spec: str, device: str = "cpu", dtype: str = "float32", temperature: float = 1.0,
            top_k: int | None = None, top_p: float | None = None) -> HFModel:
    """The model ``hf:PATH`` (or a bare PATH): a local checkpoint directory or a name in the local
    Hugging Face cache, on ``device`` ("cpu", "cuda", "cuda:1" ...) in ``dtype`` ("float32" or
    "float64").

    Raises
    ------
    InvalidInputError
        The extra is absent; the path is not a checkpoint; the name is not in the local cache (no
        download is tried); the device is not available; a bad dtype or sampling parameter.
    """
    check_sampling(temperature, top_k, top_p)
    path = spec[len(PREFIX):] if is_hf(spec) else spec
    name = PREFIX + path
    if dtype not in _DTYPES:
        raise InvalidInputError(f"dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
    if not path:
        raise InvalidInputError("hf: needs a path, e.g. hf:./my-checkpoint")
    torch, transformers = _imports()
    try:
        torch_device = torch.device(device)
    except (RuntimeError, TypeError):
        raise InvalidInputError(f"unknown device {device!r}; use cpu or cuda") from None
    if torch_device.type == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError(f"device {device!r}: CUDA is not available on this machine")
    local = Path(path).expanduser()
    if local.exists():
        if not local.is_dir():
            raise InvalidInputError(f"{name}: not a checkpoint directory (a file)")
        if not (local / "config.json").is_file():
            raise InvalidInputError(f"{name}: not a checkpoint directory (no config.json)")
    elif path.startswith((".", "/", "~")) or path.count("/") > 1:
        raise InvalidInputError(f"{name}: no such directory")
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    try:
        net = transformers.AutoModelForCausalLM.from_pretrained(
            str(local) if local.exists() else path, local_files_only=True,
            dtype=getattr(torch, dtype))
    except OSError as exc:
        if local.exists():
            raise InvalidInputError(f"{name}: not a loadable checkpoint: "
                                    f"{str(exc).splitlines()[0]}") from None
        raise InvalidInputError(f"{name}: not a local directory and not in the local Hugging Face "
                                "cache; mdtheory never downloads at run time (download it first, "
                                f"e.g. hf download {path})") from None
    except (ValueError, KeyError, RuntimeError) as exc:
        raise InvalidInputError(f"{name}: not a causal language model checkpoint transformers can "
                                f"load: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                                ) from None
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            str(local) if local.exists() else path, local_files_only=True)
    except (OSError, ValueError, KeyError, TypeError):
        tokenizer = None
    net.eval()
    net.to(torch_device)
    return HFModel(net, tokenizer, name, temperature, top_k, top_p)
