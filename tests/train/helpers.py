"""Shared test helpers: a tiny random causal LM with a chat template, and a small task file
with its splits (sample tasks; saxpy, transpose and reduce_sum families are training
families, histogram is a test family)."""

from __future__ import annotations

import json
from pathlib import Path

from cudaperf.refine.prompts import first_messages
from cudaperf.tasks.io import load_sample, save_jsonl

TRAIN = ("saxpy", "transpose", "reduce_sum", "stencil2d", "matmul")
TEST = ("histogram",)
TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def sample_c_tasks():
    return [t for t in load_sample() if t.kind.value == "c2cuda"]


def write_task_file(folder: Path, families=TRAIN + TEST, splits=None) -> Path:
    """tasks.jsonl + splits.json (TRAIN families train, TEST families test) in `folder`."""
    tasks = [t for t in sample_c_tasks() if t.family in families]
    path = folder / "tasks.jsonl"
    save_jsonl(tasks, path)
    fams = splits or {f: ("test" if f in TEST else "train") for f in families}
    (folder / "splits.json").write_text(json.dumps({"families": fams}), encoding="utf-8")
    return path


def make_tiny_model(folder: Path, vocab: int = 600) -> Path:
    """A 2-layer hidden-32 Llama and a BPE tokenizer trained on the sample tasks' prompts and
    code, with a chat template whose turns end in the EOS token `</s>`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    texts = []
    for t in sample_c_tasks():
        texts += [m["content"] for m in first_messages(t)] + [i.code for i in t.implementations]
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(texts, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="</s>",
        chat_template=TEMPLATE,
    )
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def read_steps(folder: Path, kind: str | None = None) -> list[dict]:
    """The rows of a run folder's steps.jsonl (only those of `kind` when given)."""
    rows = [json.loads(x) for x in (Path(folder) / "steps.jsonl").read_text().splitlines()]
    return [r for r in rows if kind is None or r["kind"] == kind]


def grpo_options(tmp_path: Path, model=None, **kw):
    """GrpoOptions of a one-step, one-turn, one-group run of 2 rows on the sample task file
    written into `tmp_path`, no ranker and no held-out share; `kw` overrides any field."""
    from cudaperf.train.grpo import GrpoOptions

    base = dict(
        out=tmp_path / "run",
        pool=2,
        turns=1,
        num_generations=2,
        groups_per_step=1,
        max_steps=1,
        max_new_tokens=12,
        val_families=0,
        holdout_share=0.0,
        ranker="none",
        save_steps=1,
        prepare=False,
    )
    if model is not None:
        base["model"] = str(model)
    if "tasks" not in kw:
        base["tasks"] = write_task_file(tmp_path)
    return GrpoOptions(**(base | kw))
