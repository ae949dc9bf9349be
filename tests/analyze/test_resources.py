"""ptxas parsing, demangling, the occupancy calculator, and (with nvcc) real ptxas runs."""

from __future__ import annotations

import shutil  # noqa: E402  (kept next to its use below)
from pathlib import Path

import pytest

from cudaperf.analyze import AnalyzeConfig, StructuralReport, analyze
from cudaperf.analyze.resources import demangle_base, occupancy, parse_ptxas, ptxas_resources

KERNELS = Path(__file__).parent / "kernels"
needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None, reason="nvcc not on PATH: ptxas resource tests need CUDA"
)

PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z11spill_heavyPKfPfi' for 'sm_90'
ptxas info    : Function properties for _Z11spill_heavyPKfPfi
    672 bytes stack frame, 904 bytes spill stores, 1204 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 672 bytes cumulative stack size
ptxas info    : Compiling entry function 'ck' for 'sm_90'
ptxas info    : Function properties for ck
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 4224 bytes smem, 380 bytes cmem[0]
"""


def test_parse_ptxas():
    r = parse_ptxas(PTXAS)
    assert r["_Z11spill_heavyPKfPfi"].spill_store_bytes == 904
    assert r["_Z11spill_heavyPKfPfi"].spill_load_bytes == 1204
    assert r["_Z11spill_heavyPKfPfi"].stack_bytes == 672
    assert (r["ck"].registers, r["ck"].smem_bytes, r["ck"].cmem_bytes) == (10, 4224, 380)


@pytest.mark.parametrize(
    "mangled,name",
    [
        ("_Z11spill_heavyPKfPfi", "spill_heavy"),
        ("_Z2tkILi4EEvPf", "tk"),
        ("_ZN2ns2nkEPKfi", "nk"),
        ("extern_c_kernel", "extern_c_kernel"),
    ],
)
def test_demangle_base(mangled, name):
    assert demangle_base(mangled) == name


def test_occupancy_limits_sm90():
    assert occupancy("sm_90", 256, 32, 0).occupancy == 1.0
    smem = occupancy("sm_90", 256, 14, 40960)  # (40960 + 1024) -> 5 blocks of 8 warps
    assert (smem.blocks_per_sm, smem.occupancy, smem.limiter) == (5, 0.625, "shared memory")
    regs = occupancy("sm_90", 256, 128, 0)  # 4096 regs/warp -> 4 warps/partition -> 2 blocks
    assert (regs.blocks_per_sm, regs.limiter) == (2, "registers")
    assert occupancy("sm_90", 32, 16, 0).blocks_per_sm == 32  # the block-count limit
    assert occupancy("sm_90", 256, 16, 0, dynamic_smem=60000).blocks_per_sm == 0  # no opt-in


def test_occupancy_other_archs():
    assert occupancy("sm_86", 256, 32, 0).occupancy == 1.0  # 48 warps = 6 blocks
    assert occupancy("sm_89", 1024, 32, 0).blocks_per_sm == 1
    assert occupancy("sm_80", 128, 64, 0).blocks_per_sm == 8  # 2048 regs/warp: 8 per partition


@needs_nvcc
def test_spill_under_launch_bounds_and_smem_limited_occupancy():
    cfg = AnalyzeConfig()
    spill: StructuralReport = analyze((KERNELS / "spill.cu").read_text(), config=cfg)[0]
    assert spill.features["registers"] <= 32
    assert spill.features["spill_bytes"] > 0
    assert [f.rule for f in spill.findings] == ["register-spill"]
    smem = analyze((KERNELS / "smem_limited.cu").read_text(), config=cfg)[0]
    assert smem.features["smem_bytes"] == 40960
    assert smem.features["blocks_per_sm"] == 5
    assert smem.features["theoretical_occupancy"] == 0.625


@needs_nvcc
def test_ptxas_error_becomes_an_info_finding(tmp_path):
    bad = "__global__ void k(float* a) { a[threadIdx.x] = undefined_name; }"
    (r,) = analyze(bad, config=AnalyzeConfig(cache_dir=str(tmp_path)))
    assert r.features["registers"] is None
    assert any(f.rule == "resources" and "nvcc failed" in f.message for f in r.findings)


@needs_nvcc
def test_disk_cache_round_trip(tmp_path):
    code = (KERNELS / "coalesced.cu").read_text()
    a = ptxas_resources(code, "sm_80", cache_dir=str(tmp_path))
    assert list((tmp_path / "ptxas").glob("*.json"))
    assert ptxas_resources(code, "sm_80", cache_dir=str(tmp_path)) == a
