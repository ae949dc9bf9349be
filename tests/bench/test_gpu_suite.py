"""bench/gpu_suite.sh runs the whole `-m gpu` suite in call-sized groups: every test file
with a GPU test must be in one of its groups (tests/bench's smoke was in none until
2026-12-05, so "the whole suite passed" did not include it)."""

from __future__ import annotations

import re

from tests.script_helpers import ROOT


def _group_paths() -> list[str]:
    text = (ROOT / "bench" / "gpu_suite.sh").read_text()
    paths = []
    for line in re.findall(r"^\s+\w+\) run \w+ \d+ \d+ (.*?);;", text, re.M):
        for word in line.split():
            if word.startswith("tests/"):
                paths.append(word)
            elif word.startswith('"${HEAVY'):
                paths.append("tests/execute/pytorch/test_gpu.py")
    return paths


def test_every_file_with_a_gpu_test_is_in_a_group():
    paths = _group_paths()
    assert "tests/execute" in paths and "tests/bench" in paths, paths
    gpu_files = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "tests").rglob("test_*.py")
        if "pytest.mark.gpu" in p.read_text()
    ]
    assert len(gpu_files) >= 10
    missing = [f for f in gpu_files if not any(f == g or f.startswith(g + "/") for g in paths)]
    assert not missing, f"not in any bench/gpu_suite.sh group: {missing}"
