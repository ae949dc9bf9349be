"""CUDA-L1 importer on hand-written release files attached to the KernelBench fixture tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cudaperf.cli import app
from cudaperf.tasks.importers.cudal1 import import_cudal1, kernel_reason
from cudaperf.tasks.importers.kernelbench import import_kernelbench
from cudaperf.tasks.io import save_jsonl

FIXTURES = Path(__file__).parents[2] / "fixtures"
CUDAL1 = FIXTURES / "cudal1"


@pytest.fixture(scope="module")
def kb_file(tmp_path_factory) -> Path:
    """KernelBench tasks level1/1, level1/2 and level2/1 (from the KernelBench fixture)."""
    tasks = import_kernelbench(FIXTURES / "kernelbench", validate=False).tasks
    path = tmp_path_factory.mktemp("kb") / "kb.jsonl"
    save_jsonl(tasks, path)
    return path


def test_one_file_attaches_real_kernels_and_skips_the_rest(kb_file):
    r = import_cudal1(CUDAL1 / "h100.json", kernelbench=kb_file)
    assert [t.id for t in r.tasks] == ["kernelbench/level1/1_Scaled_copy"]
    impl = r.tasks[0].implementations[-1]
    assert impl.id == "cudal1-h100" and "CUDA-L1 h100.json" in impl.provenance
    assert "MIT" in r.tasks[0].provenance["implementations"]
    assert r.tasks[0].provenance["license"].startswith("MIT")  # KernelBench's own stays
    assert r.summary() == {
        "imported": 1,
        "skipped": 7,
        "reasons": {
            "no __global__ kernel in custom_code": 1,
            "kernel never launched with <<<...>>> (called through a binding or not at all)": 1,
            "custom_code is empty (CUDA-L1 found nothing faster than the reference)": 1,
            "no matching KernelBench task in the --kernelbench file": 1,
            "not valid JSON": 1,
            "level_id / task_id are not integers": 1,
            "missing field(s) level_id": 1,
        },
    }


def test_folder_gives_one_implementation_per_gpu(kb_file):
    r = import_cudal1(CUDAL1, kernelbench=kb_file)
    ids = [i.id for i in r.tasks[0].implementations]
    assert ids == ["cudal1-a100", "cudal1-h100"]


def test_kernel_reason_needs_compile_and_launch():
    src = 'S = """__global__ void k(float* x) { x[0] = 1; }\n'
    src += 'void run(float* x) { k<<<1, 1>>>(x); }"""'
    assert kernel_reason(src).startswith("CUDA source never compiled")
    assert kernel_reason(src + "\nm = load_inline(name='k', cuda_sources=S)") == ""


def test_needs_the_kernelbench_file(tmp_path, kb_file):
    with pytest.raises(ValueError, match="--kernelbench"):
        import_cudal1(CUDAL1)
    with pytest.raises(FileNotFoundError, match="CUDA-L1 release file"):
        import_cudal1(tmp_path, kernelbench=kb_file)
    out = tmp_path / "out.jsonl"
    args = ["tasks", "import", "cudal1", str(CUDAL1), "--kernelbench", str(kb_file)]
    r = CliRunner().invoke(app, [*args, "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["imported"] == 1
    again = ["tasks", "import", "cudal1", str(CUDAL1), "--out", str(out), "--force"]
    r = CliRunner().invoke(app, again)
    assert r.exit_code != 0 and "--kernelbench" in r.output
