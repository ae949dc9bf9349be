"""`cudaperf reward`: unreadable candidates and environment problems are one line."""

from __future__ import annotations

import shutil

import pytest

from tests.cli.helpers import cli, user_error


def test_candidate_missing_empty_or_not_utf8(tmp_path):
    user_error(cli("reward", "saxpy", tmp_path / "none.cu"), "does not exist", code=2)
    empty = tmp_path / "empty.cu"
    empty.write_text("  \n")
    user_error(cli("reward", "saxpy", empty), "is empty", code=2)
    latin = tmp_path / "latin.cu"
    latin.write_bytes(b"// caf\xe9\n__global__ void k() {}\n")
    user_error(cli("reward", "saxpy", latin), "not UTF-8", code=2)


def test_full_without_a_gpu(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine may have a GPU")
    cand = tmp_path / "k.cu"
    cand.write_text("__global__ void k() {}\n")
    r = cli("reward", "saxpy", cand, "--full", "--cache-dir", tmp_path / "c")
    user_error(r, "--full needs an NVIDIA GPU", code=1)
