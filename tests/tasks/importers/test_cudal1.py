"""CUDA-L1 importer on hand-written release files attached to the KernelBench fixture tasks,
and against upstream changes: KernelBench problems reworked under the same number since
CUDA-L1's release, and the release's `codes/<gpu>.json` layout (one JSON object keyed by
level)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cudaperf.cli import app
from cudaperf.tasks.importers.cudal1 import import_cudal1, kernel_reason, problem_reason
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


# A KernelBench-format problem as the task file has it (after an upstream rework).
NORM_NOW = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Divides each row by the mean of its absolute values."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / torch.mean(torch.abs(x), dim=1, keepdim=True)


batch_size = 64
dim = 4096


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
'''

# The same number before the rework: a sum, not a mean.
NORM_BEFORE = NORM_NOW.replace("mean of", "sum of").replace("torch.mean(", "torch.sum(")

# The same problem as NORM_NOW written differently only where it does not matter: docstring,
# comments, sizes, input distribution, a `device=` argument.
NORM_SAME = (
    NORM_NOW.replace('"""Divides each row by the mean of its absolute values."""', "# L1 norm")
    .replace("torch.abs(x)", "torch.abs(x * torch.tensor(1.0, device=x.device))")
    .replace("batch_size = 64", "batch_size = 16  # older size")
    .replace("torch.rand(", "torch.randn(")
)
NORM_SAME_NOW = NORM_NOW.replace("torch.abs(x)", "torch.abs(x * torch.tensor(1.0))")

KERNEL = (
    "import torch\n"
    "from torch.utils.cpp_extension import load_inline\n"
    'SRC = """__global__ void scale(float* x, int n) {\n'
    "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }\n"
    "void run(float* x, int n) { scale<<<(n + 255) / 256, 256>>>(x, n); }\n"
    '"""\n'
    "ext = load_inline(name='scale', cpp_sources='', cuda_sources=SRC)\n"
    "class ModelNew(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        return x\n"
)


def _kb_file(tmp_path: Path, problems: dict[str, str]) -> Path:
    level = tmp_path / "KernelBench" / "KernelBench" / "level1"
    level.mkdir(parents=True)
    for name, src in problems.items():
        (level / name).write_text(src)
    path = tmp_path / "kb.jsonl"
    save_jsonl(import_kernelbench(tmp_path / "KernelBench", validate=False).tasks, path)
    return path


def _row(task_id: int, ref_code: str, level: int | None = 1) -> dict:
    row = {"task_id": task_id, "ref_code": ref_code, "custom_code": KERNEL, "score": 1.5}
    return row if level is None else {"level_id": level, **row}


def test_entry_written_for_a_reworked_problem_is_not_attached(tmp_path):
    kb = _kb_file(tmp_path, {"1_L1Norm_.py": NORM_NOW, "2_Other_norm.py": NORM_SAME_NOW})
    rel = tmp_path / "h100.json"
    rows = [_row(1, NORM_BEFORE), _row(2, NORM_SAME)]
    rel.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = import_cudal1(rel, kernelbench=kb)
    assert [t.id for t in r.tasks] == ["kernelbench/level1/2_Other_norm"]
    assert r.skipped == [
        (
            "h100.json:1",
            "ref_code is not this KernelBench task's problem (KernelBench changed it since "
            "CUDA-L1's release)",
        )
    ]


def test_problem_reason_compares_definitions_only():
    assert problem_reason(NORM_NOW, NORM_NOW) == ""
    assert problem_reason(NORM_SAME, NORM_SAME_NOW) == ""
    assert problem_reason(NORM_BEFORE, NORM_NOW).startswith("ref_code is not")
    init = NORM_NOW.replace("return []", "return [4]")  # the constructor gets other arguments
    assert problem_reason(init, NORM_NOW).startswith("ref_code is not")
    for nothing_to_compare in (None, "...", "x = (", "def f(): pass"):
        assert problem_reason(nothing_to_compare, NORM_NOW) == ""


@pytest.mark.parametrize("as_folder", [False, True])
def test_codes_layout_one_object_keyed_by_level(tmp_path, as_folder):
    kb = _kb_file(tmp_path, {"1_L1Norm_.py": NORM_NOW, "2_Other_norm.py": NORM_SAME_NOW})
    codes = tmp_path / "codes"
    codes.mkdir()
    release = {
        "1": [_row(1, NORM_NOW, None), _row(2, NORM_BEFORE, None), _row(9, NORM_NOW, None)],
        "2": [{"task_id": 1, "ref_code": "...", "custom_code": ""}],
    }
    (codes / "a100.json").write_text(json.dumps(release, indent=2))
    r = import_cudal1(codes if as_folder else codes / "a100.json", kernelbench=kb)
    assert [t.id for t in r.tasks] == ["kernelbench/level1/1_L1Norm_"]
    assert [i.id for i in r.tasks[0].implementations] == ["cudal1-a100"]
    assert dict(r.skipped) == {
        "a100.json:1[1]": "ref_code is not this KernelBench task's problem (KernelBench "
        "changed it since CUDA-L1's release)",
        "a100.json:1[2]": "no matching KernelBench task in the --kernelbench file",
        "a100.json:2[0]": "custom_code is empty (CUDA-L1 found nothing faster than the reference)",
    }
