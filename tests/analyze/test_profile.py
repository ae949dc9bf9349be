"""Nsight Compute CSV parsing (CPU) and a real profile of the known-answer kernels (GPU)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cudaperf.analyze import AnalyzeConfig, analyze
from cudaperf.analyze.profile import ProfileError, ncu_features, parse_ncu_csv, profile_program

KERNELS = Path(__file__).parent / "kernels"

CSV = (Path(__file__).parent / "data" / "ncu_raw.csv").read_text()  # shape of ncu --page raw


def test_parse_ncu_csv_and_features():
    m = parse_ncu_csv(CSV)
    assert set(m) == {"copy_strided", "tk"}
    f = ncu_features(m["copy_strided"])
    assert f["ncu_sectors_per_request_ld"] == 32.0
    assert f["ncu_dram_bytes"] == 33554432 + 1048576
    assert f["ncu_achieved_occupancy"] == pytest.approx(0.855)
    assert f["ncu_sectors_per_request_st"] is None
    assert ncu_features(m["tk"])["ncu_flops"] == 2000.0


def test_profile_needs_a_main():
    with pytest.raises(ProfileError, match="main"):
        profile_program("__global__ void k() {}", ["k"], AnalyzeConfig())


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU visible")
def test_ncu_sectors_agree_with_static_class(tmp_path):
    cfg = AnalyzeConfig(cache_dir=str(tmp_path))
    for name, want_ld in (("coalesced.cu", 4), ("strided.cu", 32)):
        (r,) = analyze((KERNELS / name).read_text(), config=cfg, profile=True)
        assert r.features["ncu_sectors_per_request_ld"] == pytest.approx(want_ld, rel=0.25)


def test_parse_real_h200_output():
    """ncu 2025.3 raw CSV from the H200 run (bench/results/analyze_gpu_h200.json)."""
    text = (Path(__file__).parent / "data" / "ncu_raw_h200_strided.csv").read_text()
    f = ncu_features(parse_ncu_csv(text)["copy_strided"])
    assert f["ncu_sectors_per_request_ld"] == 32.0
    assert f["ncu_sectors_per_request_st"] == 32.0
    assert f["ncu_stall_long_scoreboard"] is not None
