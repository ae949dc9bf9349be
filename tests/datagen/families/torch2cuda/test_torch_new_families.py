"""The PyTorch→CUDA fusion families: deterministic, the required shape (4 configs, one held
out; >= 3 implementations, >= 2 strategies), every implementation passes the static
anti-hacking checks, the reference runs on the CPU, and one unit per family compiles."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from cudaperf.datagen import FAMILIES, generate_one
from cudaperf.datagen.verify import cuda_units, smallest_config
from cudaperf.execute.pytorch.static import check_torch_candidate
from cudaperf.execute.types import Severity
from cudaperf.tasks.model import TaskKind

NEW = [
    "torch_cross_entropy",
    "torch_cumsum",
    "torch_eltwise_chain",
    "torch_embedding",
    "torch_masked_softmax",
    "torch_pool2d",
    "torch_residual_norm",
    "torch_row_reduce",
]
REF_NAMES = {"Model", "get_inputs", "get_init_inputs"}


@pytest.mark.parametrize("name", NEW)
def test_registered_and_deterministic(name):
    fam = FAMILIES[name]
    assert fam.kind is TaskKind.TORCH2CUDA
    a, b = generate_one(fam, 7, 3), generate_one(fam, 7, 3)
    assert a.model_dump_json() == b.model_dump_json()
    assert generate_one(fam, 7, 4).source != a.source or generate_one(fam, 8, 3).source != a.source


@pytest.mark.parametrize("name", NEW)
def test_shape_and_static_checks(name):
    sources = set()
    for index in range(6):
        t = generate_one(FAMILIES[name], 0, index)
        sources.add(t.source)
        assert [c.name for c in t.configs] == ["small", "medium", "large", "heldout"]
        assert [c.held_out for c in t.configs] == [False, False, False, True]
        assert len(t.implementations) >= 3
        assert len({s for i in t.implementations for s in i.strategies}) >= 2
        for i in t.implementations:
            found = check_torch_candidate(i.code, REF_NAMES)
            fatal = [f for f in found if f.severity is Severity.ERROR]
            assert not fatal, (t.id, i.id, fatal)
            assert "load_cuda(CUDA_SRC)" in i.code and "__global__" in i.code
    assert len(sources) >= 4  # tasks differ in substance, not only in sizes


@pytest.mark.parametrize("name", NEW)
def test_reference_runs_on_cpu(name):
    torch = pytest.importorskip("torch")
    from cudaperf.tasks.pymodule import exec_with_sizes

    for index in range(3):
        t = generate_one(FAMILIES[name], 0, index)
        cfg = smallest_config(t)
        mod = exec_with_sizes(t.source, cfg.sizes, "cudaperf_new_family_ref")
        torch.manual_seed(0)
        with torch.no_grad():
            out = mod.Model(*mod.get_init_inputs())(*mod.get_inputs())
        for y in out if isinstance(out, tuple) else (out,):
            assert torch.isfinite(y).all() and y.abs().max() > 1e-6, t.id


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_one_unit_per_family_compiles():
    srcs = []
    for k, name in enumerate(NEW):
        units = cuda_units(generate_one(FAMILIES[name], 0, 0))
        srcs.append(units[k % len(units)][1])  # a different implementation in turn
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for k, src in enumerate(srcs):
            (Path(tmp) / f"u{k}.cu").write_text(src)
            files.append(f"u{k}.cu")
        procs = [
            subprocess.Popen(
                ["nvcc", "-arch=sm_90", "-c", "-o", f.replace(".cu", ".o"), f],
                cwd=tmp,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for f in files
        ]
        for name, p in zip(NEW, procs, strict=True):
            out, _ = p.communicate(timeout=300)
            assert p.returncode == 0, (name, out[-2000:])
