"""`cudaperf reward` on the CPU: each component explained, compile-only said plainly."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from cudaperf.cli import app
from cudaperf.tasks.io import sample_path

runner = CliRunner()
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
VEC4 = sample_path() / "c2cuda_saxpy" / "grid_stride_vec4.cu"


@needs_nvcc
def test_reward_explains_components_in_compile_only_mode(tmp_path):
    cache = ["--compile-only", "--cache-dir", str(tmp_path / "cache")]
    res = runner.invoke(app, ["reward", "c2cuda/saxpy", str(VEC4), *cache])
    assert res.exit_code == 0, res.output
    for word in ("outcome", "speed", "structure", "ranker", "total", "compile-only"):
        assert word in res.stdout
    res = runner.invoke(app, ["reward", "c2cuda/saxpy", str(VEC4), "--json", *cache])
    doc = json.loads(res.stdout)
    assert doc["reward"]["status"] == "compiled" and doc["reward"]["total"] == -0.25
    assert doc["result"]["mode"] == "compile-only" and doc["structure"]


@needs_nvcc
def test_reward_of_a_reply_that_does_not_compile(tmp_path):
    reply = tmp_path / "reply.md"
    reply.write_text("Try:\n```cuda\n__global__ void k() { oops }\n```\n")
    res = runner.invoke(
        app,
        [
            "reward",
            "c2cuda/saxpy",
            str(reply),
            "--json",
            "--compile-only",
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
    )
    assert json.loads(res.stdout)["reward"]["status"] == "compile_error"


def test_reward_errors(tmp_path):
    res = runner.invoke(app, ["reward", "c2cuda/saxpy", str(tmp_path / "missing.cu")])
    assert res.exit_code == 2 and "does not exist" in res.output
    res = runner.invoke(app, ["reward", "c2cuda/saxpy", str(VEC4), "--preset", "nope"])
    assert res.exit_code == 2 and "unknown reward preset" in res.output
    empty = tmp_path / "r.md"
    empty.write_text("```python\nprint(1)\n```\n")
    res = runner.invoke(app, ["reward", "c2cuda/saxpy", str(empty)])
    assert res.exit_code == 2 and "Format error" in res.output


def test_ranker_option_picks_the_packaged_ranker_none_or_a_file(tmp_path):
    from cudaperf.cli.reward import scorer_for
    from cudaperf.tasks.io import load_sample

    (task,) = [t for t in load_sample() if t.id.endswith("c2cuda/saxpy")]
    s = scorer_for(task, "unified", True, tmp_path, "default")
    rs = s.rank(task, VEC4.read_text())
    assert rs is not None and 0.0 <= rs.score <= 1.0 and rs.model.startswith("feature-")
    assert scorer_for(task, "unified", True, tmp_path, "none").ranker is None
    assert scorer_for(task, "outcome_only", True, tmp_path, "default").ranker is None
    res = runner.invoke(
        app, ["reward", "c2cuda/saxpy", str(VEC4), "--ranker", str(tmp_path / "nope.json")]
    )
    assert res.exit_code == 2 and "--ranker" in res.output
