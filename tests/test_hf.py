"""Hugging Face checkpoints as language models: tiny randomly initialised GPT-2 and Llama
configurations with a tiny character tokenizer, built into a temporary directory (no download)."""

import json
import types

import numpy as np
import pytest
from scipy import stats

from mdtheory.cli import main
from mdtheory.errors import InvalidInputError
from mdtheory.language import hf, langmodel
from mdtheory.language.langmodel import check_same_vocab, sample

from .cli_helpers import one_line_error, run_main
from .tolerances import BATCH_FLOAT32, KV_CACHE, ROUNDING

torch = pytest.importorskip("torch", reason="the hf extra needs torch")
transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) is absent")

CHARS = "abcdefgh"  # ids 1 .. 8; id 0 is <s> (begin, end and padding)


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """The tiny networks' products (16 x 16) run on one thread: with two, torch's thread
    synchronisation took 8 ms a product on this 2-core machine under load, 1000 times the work."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _tokenizer(chars: str):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<s>": 0, **{c: i + 1 for i, c in enumerate(chars)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<s>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>",
                                                eos_token="<s>", pad_token="<s>")


def _save(path, net, tokenizer):
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    net.save_pretrained(path)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    return path


def _gpt2(seed: int, V: int = 9):
    torch.manual_seed(seed)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=V, n_positions=64, n_embd=16, n_layer=2, n_head=2, bos_token_id=0,
        eos_token_id=0, pad_token_id=0))


def _llama(seed: int, V: int = 9):
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=V, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=64, bos_token_id=0, eos_token_id=0,
        pad_token_id=0))


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """Checkpoint directories: GPT-2 and Llama targets/drafters sharing one tokenizer, a GPT-2 with
    another vocabulary of the same size, one with another size, and one without a tokenizer."""
    root = tmp_path_factory.mktemp("ckpt")
    tok = _tokenizer(CHARS)
    return {
        "gpt2": _save(root / "gpt2", _gpt2(0), tok),
        "llama": _save(root / "llama", _llama(1), tok),
        "gpt2-other-tokens": _save(root / "gpt2-other", _gpt2(2), _tokenizer(CHARS[::-1])),
        "gpt2-V10": _save(root / "gpt2-v10", _gpt2(3, V=10), None),
    }


ARCHS = ["gpt2", "llama"]


def _direct_law(net, ids, temperature=1.0, top_k=None, top_p=None):
    """softmax of model(ids).logits[0, -1] after transformers' own warpers."""
    from transformers.generation import logits_process as lp

    with torch.no_grad():
        z = net(torch.tensor([ids])).logits[:, -1].double()
    warpers = [lp.TemperatureLogitsWarper(temperature)] if temperature != 1.0 else []
    if top_k is not None:
        warpers.append(lp.TopKLogitsWarper(top_k))
    if top_p is not None:
        warpers.append(lp.TopPLogitsWarper(top_p))
    for w in warpers:
        z = w(torch.tensor([ids]), z)
    return z.softmax(-1)[0].numpy()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sampling", [{}, {"temperature": 0.7}, {"temperature": 1.3, "top_k": 3},
                                      {"top_p": 0.8}])
def test_law_equals_the_direct_softmax(ckpt, arch, dtype, sampling):
    model = hf.load_hf(f"hf:{ckpt[arch]}", dtype=dtype, **sampling)
    assert model.V == 9 and model.bos == 0 and model.net.dtype == getattr(torch, dtype)
    ids = [0, 3, 1, 4, 1, 5]
    p = model(tuple(ids))
    ref = _direct_law(model.net, ids, **sampling)
    assert p.dtype == np.float64 and abs(p.sum() - 1) < ROUNDING
    assert np.abs(p - ref).max() < BATCH_FLOAT32
    if "top_k" in sampling:
        assert (p > 0).sum() == sampling["top_k"]


@pytest.mark.parametrize("arch", ARCHS)
def test_kv_cache_steps_equal_a_full_recompute(ckpt, arch):
    model = hf.load_hf(f"hf:{ckpt[arch]}", temperature=0.9)
    rng = np.random.default_rng(0)
    contexts = [(0,), (0, 2, 7), (0, 5, 5, 1, 8, 2)]  # lengths differ: left padding in the batch
    state = model.start(contexts)
    worst = 0.0
    for _ in range(6):
        full = np.stack([model.laws([c])[0] for c in state.contexts])  # each alone, no padding
        worst = max(worst, np.abs(state.probs - full).max())
        state = model.step(state, rng.integers(1, 9, size=len(state.contexts)))
    branch = model.select(state, [2, 0, 0])
    assert branch.contexts == [state.contexts[2], state.contexts[0], state.contexts[0]]
    stepped = model.step(branch, [1, 2, 3])
    full = model.laws(stepped.contexts)
    worst = max(worst, np.abs(stepped.probs - full).max())
    assert worst < KV_CACHE
    again = model.step(state, [1, 1, 1])  # select copied the cache: the state still steps once
    assert np.abs(again.probs - model.laws(again.contexts)).max() < KV_CACHE
    with pytest.raises(InvalidInputError, match="already stepped"):
        model.step(state, [1, 1, 1])


def test_sampled_text_follows_generate(ckpt):
    """Two tokens after a fixed context: mdtheory's sampler and transformers' generate, by a
    two-sample chi-square test (cells with under 10 draws in all pooled)."""
    model = hf.load_hf(f"hf:{ckpt['gpt2']}", temperature=0.8, top_k=6)
    N, context = 4000, [0, 1, 2]
    ours = sample(model, [tuple(context)] * N, 2, np.random.default_rng(1))
    torch.manual_seed(1)
    ids = torch.tensor([context])
    gen = model.net.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, max_new_tokens=2,
                             num_return_sequences=N, temperature=0.8, top_k=6, top_p=1.0,
                             eos_token_id=None, pad_token_id=0)[:, len(context):].numpy()
    assert _two_sample_pvalue(ours, gen) > 1e-3
    # and the same test tells apart another law (top-5: a random tiny network's logits are nearly
    # flat, so a change of temperature alone moves its law little)
    other = sample(model.with_sampling(0.8, 5), [tuple(context)] * N, 2, np.random.default_rng(2))
    assert _two_sample_pvalue(other, gen) < 1e-6


def _two_sample_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    """Chi-square test that two samples of token pairs (N, 2) have one law (cells with under 10
    draws in all pooled into one)."""
    cells = np.zeros((2, 81))
    for row, draws in enumerate((a, b)):
        np.add.at(cells[row], draws[:, 0] * 9 + draws[:, 1], 1)
    big = cells.sum(axis=0) >= 10
    assert big.sum() >= 10
    table = cells[:, big]
    if cells[:, ~big].sum() > 0:
        table = np.column_stack([table, cells[:, ~big].sum(axis=1)])
    return stats.chi2_contingency(table).pvalue


def test_vocabularies_checked(ckpt):
    gpt2, llama = hf.load_hf(f"hf:{ckpt['gpt2']}"), hf.load_hf(f"hf:{ckpt['llama']}")
    check_same_vocab(gpt2, llama)  # one tokenizer: fine
    with pytest.raises(InvalidInputError, match="different vocabularies"):
        check_same_vocab(gpt2, hf.load_hf(f"hf:{ckpt['gpt2-other-tokens']}"))
    with pytest.raises(InvalidInputError, match="has 9 tokens but the drafter has 10"):
        check_same_vocab(gpt2, hf.load_hf(f"hf:{ckpt['gpt2-V10']}"))


# ---------------------------------------------------------------- commands on the checkpoints
def test_lm_pairs_then_check_acceptance_and_block_efficiency(ckpt, tmp_path, capsys):
    out = tmp_path / "pairs"
    argv = ["lm-pairs", "--target", f"hf:{ckpt['gpt2']}", "--draft", f"hf:{ckpt['llama']}",
            "--positions", "40", "--seed", "3", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    P, Q = np.load(out / "P.npy"), np.load(out / "Q.npy")
    assert P.shape == Q.shape == (40, 9)
    assert np.abs(P.sum(axis=1) - 1).max() < ROUNDING and np.abs(Q.sum(axis=1) - 1).max() < ROUNDING
    gpt2, llama = hf.load_hf(f"hf:{ckpt['gpt2']}"), hf.load_hf(f"hf:{ckpt['llama']}")
    assert np.abs(P[0] - gpt2((0,))).max() < BATCH_FLOAT32
    assert np.abs(Q[0] - llama((0,))).max() < BATCH_FLOAT32
    assert np.abs(P - Q).sum(axis=1).min() > 0  # two different networks
    capsys.readouterr()
    assert main(["check-acceptance", str(out / "P.npy"), str(out / "Q.npy"), "-n", "2", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 40 and all(0 < r["alpha_star"] <= 1 for r in rows)
    argv = ["block-efficiency", "--target", f"hf:{ckpt['gpt2']}", "--draft", f"hf:{ckpt['llama']}",
            "--drafts", "2", "--length", "2", "--rules", "rrs", "--steps", "5", "--json", "--quiet"]
    assert main(argv) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert row["target_calls"] == 5 and 5 <= row["tokens"] <= 15


def test_block_efficiency_estimates_checkpoints_by_their_own_calls(ckpt, capsys, monkeypatch):
    """The estimate times the checkpoints' own calls at the run's context length: each call of a
    model is made to cost 50 ms more (counted), so 20 target calls of 3 model calls each are
    refused under a 1 s limit that the sizes alone fit, before any drafting."""
    from mdtheory.blocks import simulation as blockeff

    calls = []
    forward = hf.HFModel._forward

    def slow_forward(self, ids, mask, cache=None):
        calls.append(ids.shape)
        return forward(self, ids, mask, cache)

    clock = types.SimpleNamespace(now=0.0)
    clock.perf_counter = lambda: clock.now + 0.05 * len(calls)
    monkeypatch.setattr(hf.HFModel, "_forward", slow_forward)
    monkeypatch.setattr(langmodel, "time", clock)
    monkeypatch.setattr(blockeff, "speculative_step", None)  # never reached
    code, out, err = run_main(capsys, "block-efficiency", "--target", f"hf:{ckpt['gpt2']}", "--draft",
                              f"hf:{ckpt['llama']}", "-n", "2", "-L", "2", "--rules", "rrs", "--steps",
                              "20", "--max-seconds", "1", "--quiet")
    one_line_error(code, err, r"block-efficiency with rrs: 20 target calls", r"the models 0.15 s a call "
                   r"\(measured\)", "over the limit of 1 s")
    # the pilots: two calls per batch size (the drafter at depths 0 and 1, the target), at the
    # mean context length of 8 texts of 2 or 3 calls (mean_context: 2 tokens)
    assert len(calls) == 6 and {shape[1] for shape in calls} == {2, 3}
    assert blockeff.estimate("rrs", 9, 2, 2, 20).seconds < 1  # the sizes alone fit


def test_lm_pairs_with_an_ngram_drafter_of_a_checkpoint(ckpt, tmp_path):
    out = tmp_path / "pairs"
    assert main(["lm-pairs", "--target", f"hf:{ckpt['llama']}", "--draft", "ngram", "--positions",
                 "10", "--out", str(out), "--quiet"]) == 0
    assert np.load(out / "Q.npy").shape == (10, 9)


@pytest.mark.parametrize("spec, culprit", [
    ("hf:{tmp}", "no config.json"),
    ("hf:{tmp}/weights.bin", "a file"),
    ("hf:{tmp}/missing/dir", "no such directory"),
    ("hf:nobody-has-this/tiny-model", "not in the local Hugging Face cache"),
])
def test_bad_checkpoint_exits_2_with_one_line(spec, culprit, tmp_path, capsys):
    (tmp_path / "weights.bin").write_bytes(b"x")
    argv = ["lm-pairs", "--target", spec.format(tmp=tmp_path), "--draft", "tempered", "--positions",
            "5", "--out", str(tmp_path / "o"), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and culprit in err


@pytest.mark.parametrize("other, culprit", [("gpt2-other-tokens", "different vocabularies"),
                                            ("gpt2-V10", "has 9 tokens but the drafter has 10")])
def test_mismatched_vocabularies_exit_2(ckpt, other, culprit, tmp_path, capsys):
    argv = ["lm-pairs", "--target", f"hf:{ckpt['gpt2']}", "--draft", f"hf:{ckpt[other]}",
            "--positions", "5", "--out", str(tmp_path / "o"), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and culprit in err


def test_missing_extra_exits_2_naming_the_install(monkeypatch, tmp_path, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    argv = ["lm-pairs", "--target", f"hf:{tmp_path}", "--draft", "tempered", "--positions", "5",
            "--out", str(tmp_path / "o"), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'mdtheory[hf]'" in err


def test_the_quantized_drafter_is_the_char_lstms(ckpt, tmp_path, capsys):
    argv = ["lm-pairs", "--target", f"hf:{ckpt['gpt2']}", "--draft", "quantized", "--positions", "5",
            "--out", str(tmp_path / "o"), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "quantized drafter is the char-LSTM's" in err
