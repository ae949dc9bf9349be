"""Profiling candidates on their task's inputs: drivers, ncu command line, cache (CPU, with a
fake ncu), and real profiles of sample implementations (GPU)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cudaperf.analyze import AnalyzeConfig, analyze, drivers
from cudaperf.analyze.drivers import (
    c_driver_source,
    largest_config,
    pick_config,
    profile_candidate,
    torch_driver_spec,
    write_c_inputs,
)
from cudaperf.analyze.profile import (
    ProfileError,
    explain_failure,
    ncu_args,
    ncu_features,
    parse_ncu_csv,
)
from cudaperf.tasks.io import load_sample

DATA = Path(__file__).parent / "data"
NVCC = shutil.which("nvcc")


def _task(name: str):
    return next(t for t in load_sample() if t.id.endswith("/" + name))


def _impl(task, impl_id: str) -> str:
    return next(i.code for i in task.implementations if i.id == impl_id)


def test_largest_visible_config_and_errors():
    t = _task("saxpy")
    assert largest_config(t).name == "large"  # heldout is never picked by default
    assert pick_config(t, "small").name == "small"
    with pytest.raises(ProfileError, match="has no config 'huge'; it has small"):
        pick_config(t, "huge")
    assert largest_config(_task("softmax")).name == "large"  # torch: product of sizes


def test_c_inputs_file_layout(tmp_path):
    t = _task("saxpy")
    cfg = pick_config(t, "small")
    path = tmp_path / "in.bin"
    size = write_c_inputs(t, cfg, path)
    raw = path.read_bytes()
    assert len(raw) == size
    (n,) = struct.unpack_from("<i", raw, 0)
    assert n == len(t.signature)
    off, seen = 4, []
    for _ in range(n):
        role, nbytes = struct.unpack_from("<iq", raw, off)
        off += 12 + nbytes
        seen.append((role, nbytes))
    assert off == len(raw)
    sizes = dict(zip([p.name for p in t.signature], seen, strict=True))
    assert sizes["n"] == (3, 4) and sizes["a"] == (3, 4)  # scalars: role 3, their bytes
    assert sizes["x"] == (0, 4097 * 4)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_c_driver_compiles_with_the_harness(tmp_path):
    t = _task("matmul")
    src = c_driver_source(t, _impl(t, "register_blocked"))
    assert "__cudaperf_run" in src and "cudaProfilerStart" in src and "int main(" in src
    exe = drivers.build_c_driver(t, _impl(t, "register_blocked"), "sm_90", NVCC, tmp_path)
    assert exe.is_file()
    p = subprocess.run([str(exe)], capture_output=True, text=True)
    assert p.returncode == 2 and "usage" in p.stderr


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_c_driver_build_error_names_the_candidate_line(tmp_path):
    t = _task("saxpy")
    bad = 'extern "C" void saxpy(int n, float a, const float* x, float* y) { oops; }'
    with pytest.raises(ProfileError, match="line 1"):
        drivers.build_c_driver(t, bad, "sm_90", NVCC, tmp_path)


def test_ncu_command_line():
    args = ncu_args(
        "ncu", ["k1", "my_k"], ["a.sum"], ["./driver", "in.bin"], ["--profile-from-start", "off"]
    )
    assert args[:3] == ["ncu", "--clock-control", "none"]
    assert args[args.index("-k") + 1] == "regex:^(k1|my_k)(<.*)?$"
    assert args[args.index("--profile-from-start") + 1] == "off"
    assert args[args.index("--metrics") + 1] == "a.sum"
    assert args[-2:] == ["./driver", "in.bin"]
    assert "--csv" in args and args[args.index("--page") + 1] == "raw"


def test_parse_candidate_csv_fixture():
    m = parse_ncu_csv((DATA / "ncu_raw_candidate.csv").read_text())
    assert set(m) == {"swish_bias_vec4"}
    f = ncu_features(m["swish_bias_vec4"])
    assert f["ncu_launches"] == 2
    assert f["ncu_sectors_per_request_ld"] == 8.0
    assert f["ncu_achieved_occupancy"] == pytest.approx(0.85)
    assert f["ncu_duration_ns"] == 302000
    assert f["ncu_dram_bytes"] == 4 * 268435456


def test_failure_messages_say_what_to_do():
    perm = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access counters"
    assert "NVreg_RestrictProfilingToAdminUsers=0" in explain_failure("", perm, ["k"])
    none = "==WARNING== No kernels were profiled.\nthe candidate failed: illegal address"
    msg = explain_failure("", none, ["k1", "k2"])
    assert "k1, k2" in msg and "illegal address" in msg


def test_missing_ncu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(drivers, "find_ncu", lambda: None)
    t = _task("saxpy")
    with pytest.raises(ProfileError, match="ncu not found"):
        profile_candidate(_impl(t, "naive"), t, ["saxpy_kernel"], AnalyzeConfig())


def _fake_ncu(tmp_path: Path, csv: str) -> Path:
    """An `ncu` that records its arguments and prints `csv` (no GPU needed)."""
    (tmp_path / "out.csv").write_text(csv)
    script = tmp_path / "ncu"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "Version 2025.3.0.0 (fake)"; exit 0; fi\n'
        f'echo "$@" >> {tmp_path}/calls.txt\n'
        f"cat {tmp_path}/out.csv\n"
    )
    script.chmod(0o755)
    return script


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_profile_candidate_c_end_to_end_with_fake_ncu(tmp_path, monkeypatch):
    monkeypatch.setattr(drivers, "_gpu_name", lambda: "Fake GPU")
    t = _task("transpose")
    csv = (DATA / "ncu_raw.csv").read_text().replace("copy_strided", "transpose_naive")
    ncu = _fake_ncu(tmp_path, csv)
    cfg = AnalyzeConfig(cache_dir=str(tmp_path / "cache"))
    code = _impl(t, "naive")
    m = profile_candidate(code, t, ["transpose_naive"], cfg, "small", ncu=str(ncu))
    assert m["transpose_naive"]["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 262144
    call = (tmp_path / "calls.txt").read_text().split()
    assert "--profile-from-start" in call and call[-1].endswith("inputs.bin")
    assert "regex:^(transpose_naive)(<.*)?$" in call
    # cached: a second call does not run ncu; another config or GPU is another key
    assert profile_candidate(code, t, ["transpose_naive"], cfg, "small", ncu=str(ncu)) == m
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 1
    monkeypatch.setattr(drivers, "_gpu_name", lambda: "Other GPU")
    profile_candidate(code, t, ["transpose_naive"], cfg, "small", ncu=str(ncu))
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 2


def test_profile_candidate_torch_runs_the_python_driver(tmp_path, monkeypatch):
    monkeypatch.setattr(drivers, "_gpu_name", lambda: "Fake GPU")
    t = _task("swish_bias")
    ncu = _fake_ncu(tmp_path, (DATA / "ncu_raw_candidate.csv").read_text())
    code = _impl(t, "grid_stride_vec4")
    seen = {}
    real = drivers._driver_command

    def spy(*a):
        cmd = real(*a)
        seen["spec"] = json.loads(Path(cmd[-1]).read_text())
        return cmd

    monkeypatch.setattr(drivers, "_driver_command", spy)
    cfg = AnalyzeConfig(cache_dir=str(tmp_path / "cache"))
    m = profile_candidate(code, t, ["swish_bias_vec4"], cfg, ncu=str(ncu))
    assert ncu_features(m["swish_bias_vec4"])["ncu_launches"] == 2
    call = (tmp_path / "calls.txt").read_text().split()
    assert call[call.index("-m") + 1] == "cudaperf.analyze.drivers"
    assert seen["spec"] == torch_driver_spec(t, pick_config(t, "large"), code)


def test_cli_needs_a_known_task(tmp_path):
    from typer.testing import CliRunner

    from cudaperf.cli import app

    f = tmp_path / "k.cu"
    f.write_text(_impl(_task("saxpy"), "naive"))
    r = CliRunner().invoke(app, ["analyze", str(f), "--profile", "--task", "no/such/task"])
    assert r.exit_code != 0 and "no task 'no/such/task'" in r.output


GPU = pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA GPU visible")


@pytest.mark.gpu
@GPU
def test_profile_sample_c_candidate_on_the_gpu(tmp_path):
    t = _task("transpose")
    cfg = AnalyzeConfig(cache_dir=str(tmp_path))
    reports = analyze(_impl(t, "naive"), config=cfg, profile=True, task=t)
    (r,) = reports
    assert r.features["ncu_launches"] == 1  # the warm-up call is not profiled
    assert r.features["ncu_sectors_per_request_ld"] == pytest.approx(4, rel=0.25)
    assert r.features["ncu_sectors_per_request_st"] == pytest.approx(32, rel=0.25)


@pytest.mark.gpu
@GPU
def test_profile_sample_torch_candidate_on_the_gpu(tmp_path):
    pytest.importorskip("torch")
    t = _task("swish_bias")
    cfg = AnalyzeConfig(cache_dir=str(tmp_path))
    code = _impl(t, "naive")
    reports = analyze(code, config=cfg, profile=True, task=t, input_config="medium")
    profiled = [r for r in reports if "ncu_launches" in r.features]
    assert profiled, "no kernel of the candidate was profiled"
    for r in profiled:
        assert r.features["ncu_launches"] >= 1
        assert r.features["ncu_dram_bytes"] > 0
