"""PolyBench-ACC importer on hand-written kernels in the suite's CUDA/ folder layout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cudaperf.tasks.importers.polybench import import_polybench, parse_cuh
from cudaperf.tasks.model import Role

ROOT = Path(__file__).parents[2] / "fixtures" / "polybench-acc"


@pytest.fixture(scope="module")
def report():
    return import_polybench(ROOT)


def test_kernels_imported_and_broken_ones_skipped(report):
    assert [t.id for t in report.tasks] == ["polybench-acc/rowsum", "polybench-acc/blur1d"]
    assert report.summary()["reasons"] == {
        "no CPU reference function with POLYBENCH_nD parameters": 1,
        "no <name>.cuh with the dataset sizes next to the .cu file": 1,
    }
    assert all(t.provenance["license"].startswith("BSD-3-Clause") for t in report.tasks)


def test_signature_from_polybench_macros(report):
    rowsum, blur = report.tasks
    assert rowsum.entry == "rowsum_cpu"
    sig = {p.name: (p.role, p.length) for p in rowsum.signature}
    assert sig == {
        "ni": (Role.SCALAR, None),
        "nj": (Role.SCALAR, None),
        "alpha": (Role.SCALAR, None),
        "A": (Role.IN, "ni*nj"),
        "s": (Role.INOUT, "ni"),
    }
    assert {p.name: p.length for p in blur.signature}["weights"] == "tsteps"  # TSTEPS → tsteps
    assert blur.signature[2].ctype == "double"  # the .cuh's DATA_TYPE


def test_configs_are_the_dataset_table(report):
    rowsum, blur = report.tasks
    assert [c.name for c in rowsum.configs] == ["mini", "small", "standard", "large", "extralarge"]
    assert [c.name for c in rowsum.configs if c.held_out] == ["standard"]
    assert rowsum.config("extralarge").sizes == {"ni": 2048, "nj": 4096, "alpha": 3.0}
    assert [c.name for c in blur.configs] == ["mini", "standard", "extralarge"]


def test_reference_is_self_contained(report):
    src = report.tasks[0].source
    assert "POLYBENCH_2D(" not in src and "#define _PB_NI ni" in src
    assert "float A[ni][nj]" in src
    assert "#define WEIGHT 0.25" in report.tasks[1].source  # constants it uses come along


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_references_compile_with_gcc(report, tmp_path):
    for t in report.tasks:
        f = tmp_path / "ref.c"
        f.write_text(t.source)
        cmd = ["gcc", "-O2", "-shared", "-fPIC", str(f), "-o", str(tmp_path / "ref.so")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, (t.id, r.stderr)


def test_parse_cuh_sizes():
    sizes, defines = parse_cuh((ROOT / "CUDA/stencils/blur1d/blur1d.cuh").read_text())
    assert sizes == {
        "MINI": {"TSTEPS": 2, "N": 100},
        "STANDARD": {"TSTEPS": 10, "N": 10000},
        "EXTRALARGE": {"TSTEPS": 20, "N": 1000000},
    }
    assert "DATA_TYPE" in defines


def test_missing_checkout(tmp_path):
    with pytest.raises(FileNotFoundError, match="PolyBench-ACC"):
        import_polybench(tmp_path)
