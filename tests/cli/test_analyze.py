"""`cudaperf analyze`: syntax errors are named as such; --profile needs a GPU and says so;
the README's `--task saxpy` form resolves."""

from __future__ import annotations

import shutil

import pytest

from tests.cli.helpers import cli, user_error


def test_syntax_error_is_named_not_no_kernel_found(tmp_path):
    broken = tmp_path / "k.cu"
    broken.write_text("__global__ void k(float* x {\n  x[0] = 1;\n}\n")
    r = cli("analyze", broken)  # the kernel is still read: a warning names the line
    assert "k.cu:1: CUDA syntax error" in r.stderr and "Traceback" not in r.stderr
    py = tmp_path / "cand.py"
    py.write_text("import torch\ndef broken(:\n    pass\n")
    r = cli("analyze", py)
    user_error(r, "cand.py:2: Python syntax error", code=2)
    assert "no __global__ kernel" not in r.stderr


def test_profile_without_a_gpu_is_one_line(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine may have a GPU")
    cand = tmp_path / "cand.cu"
    cand.write_text("__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n")
    r = cli("analyze", cand, "--task", "saxpy", "--profile")  # as the README writes it
    user_error(r, "--profile", "needs an NVIDIA GPU", code=1)


def test_short_task_id_resolves(tmp_path):
    cand = tmp_path / "cand.cu"
    cand.write_text("__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n")
    r = cli("analyze", cand, "--task", "saxpy")
    assert r.returncode == 0, r.stderr
    assert "--task is only used with --profile" in r.stderr
    user_error(cli("analyze", cand, "--task", "nope"), "no task 'nope' (--task)")


def test_an_unknown_config_of_the_task_is_named(tmp_path):
    cand = tmp_path / "k.cu"
    cand.write_text("__global__ void k(float* x) { x[threadIdx.x] = 0; }\n")
    r = cli("analyze", cand, "--task", "saxpy", "--config", "huge", "--profile")
    user_error(r, "--config 'huge'", "sample/c2cuda/saxpy", "small", code=2)


def test_a_config_without_profile_is_refused_not_ignored(tmp_path):
    cand = tmp_path / "k.cu"
    cand.write_text("__global__ void k(float* x) { x[threadIdx.x] = 0; }\n")
    r = cli("analyze", cand, "--task", "saxpy", "--config", "large")
    user_error(r, "--config large picks the input --profile runs on", "add --profile", code=2)


def test_a_task_id_without_a_task_file_is_refused(tmp_path):
    """`--task-id` picks a task of a `--task` file: alone it was ignored (exit 0), and with a
    sample task id as --task it replaced that id without a word."""
    k = tmp_path / "k.cu"
    k.write_text("__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n")
    user_error(cli("analyze", k, "--task-id", "saxpy"), "--task-id saxpy", "--task FILE", code=2)
    r = cli("analyze", k, "--task", "saxpy", "--task-id", "matmul")
    user_error(r, "--task saxpy is a task id", "drop --task-id", code=2)
    tasks = tmp_path / "t.jsonl"
    assert cli("tasks", "export", "--sample", "--out", tasks).returncode == 0
    r = cli("analyze", k, "--task", tasks, "--task-id", "nosuch")
    user_error(r, "no task 'nosuch' (--task-id)", code=2)
