"""The CUPTI shim (`execute.c.trace`): which toolkit and record structs it builds against,
that it builds where CUPTI is installed, and how the trusted side reads the child's trace.
Its verdicts through the worker are in test_trusted.py (fake shims); on a GPU, in
tests/execute/test_gpu.py (host fallbacks written in CUDA)."""

from __future__ import annotations

import ctypes
import os
import shutil
import stat

import pytest
from conftest import needs_nvcc

from cudaperf.execute.c import trace
from cudaperf.execute.c.proc import _kernel_trace
from cudaperf.execute.isolation.child_proc import ChildError


def _header(d, kernels: list[str], memcpys: list[str], memsets: list[str]) -> None:
    """A cupti_activity.h declaring the given versions ("" is the unnumbered first one)."""
    ends = [f"}} CUpti_ActivityKernel{k};" for k in kernels]
    ends += [f"}} CUpti_ActivityMemcpy{c};" for c in memcpys]
    ends += [f"}}  CUpti_ActivityMemset{s} ;" for s in memsets]
    (d / "cupti_activity.h").write_text(
        "\n".join(f"typedef struct {{\n  int kind;\n{e}" for e in ends)
    )


def test_the_newest_declared_record_struct_of_each_kind_is_chosen(tmp_path):
    _header(tmp_path, ["3", "10", "9", ""], ["5", "6"], ["4"])
    assert trace.record_structs(tmp_path) == (
        "CUpti_ActivityKernel10",
        "CUpti_ActivityMemcpy6",
        "CUpti_ActivityMemset4",
    )
    _header(tmp_path, ["2"], [], ["4"])  # no memcpy record at all: no shim
    assert trace.record_structs(tmp_path) is None
    _header(tmp_path, [""], ["2"], [""])  # only first versions: the unnumbered names
    assert trace.record_structs(tmp_path)[::2] == ("CUpti_ActivityKernel", "CUpti_ActivityMemset")
    assert trace.record_structs(tmp_path / "missing") is None


def test_the_toolkit_is_found_through_a_wrapper_script(tmp_path):
    """nvcc is often a wrapper (`exec /opt/cuda/bin/nvcc "$@"`): the toolkit is where nvcc
    says it is (`--dryrun`'s TOP=), not next to the script."""
    kit = tmp_path / "cuda-x"
    (kit / "extras" / "CUPTI" / "include").mkdir(parents=True)
    (kit / "extras" / "CUPTI" / "include" / "cupti.h").write_text("")
    (kit / "extras" / "CUPTI" / "lib64").mkdir()
    (kit / "extras" / "CUPTI" / "lib64" / "libcupti.so").write_text("")
    wrapper = tmp_path / "bin" / "nvcc"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\necho '#$ TOP={kit}/bin/..' >&2\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    inc, lib = trace.cupti_dirs(str(wrapper))
    assert inc == kit / "extras" / "CUPTI" / "include" and lib == kit / "extras" / "CUPTI" / "lib64"
    assert trace.cupti_dirs(str(tmp_path / "no-nvcc")) is None


def test_no_cupti_means_no_shim_and_says_why(tmp_path, cpu_config):
    from dataclasses import replace

    wrapper = tmp_path / "nvcc"
    wrapper.write_text("#!/bin/sh\nexit 1\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    path, why = trace.build_trace(replace(cpu_config, nvcc=str(wrapper)))
    assert path is None and "no CUPTI" in why


def _has_cupti() -> bool:
    nvcc = shutil.which("nvcc")
    return nvcc is not None and trace.cupti_dirs(nvcc) is not None


@needs_nvcc
@pytest.mark.skipif(not _has_cupti(), reason="no CUPTI in this CUDA toolkit")
def test_the_shim_builds_against_this_toolkits_cupti(cpu_config):
    path, why = trace.build_trace(cpu_config)
    assert path and why == "" and os.path.isfile(path)
    lib = ctypes.CDLL(path)
    for sym in ("cp_trace_begin", "cp_trace_hook", "cp_trace_end", "cp_trace_read"):
        assert getattr(lib, sym)
    out = (ctypes.c_double * 4)()
    names = ctypes.create_string_buffer(64)
    assert lib.cp_trace_read(out, names, 64) == -1  # no window opened: nothing to report


def test_the_childs_trace_is_checked_before_it_is_believed():
    good = {"wall_us": 10.0, "device_us": 9.0, "kernels": 2, "names": ["k"]}
    t = _kernel_trace(good)
    assert (t.wall_us, t.device_us, t.kernels, t.names, t.error) == (10.0, 9.0, 2, ("k",), "")
    assert _kernel_trace(None) is None
    assert _kernel_trace({"error": "no CUPTI"}).error == "no CUPTI"
    assert "more device records" in _kernel_trace(good | {"dropped": 3}).error  # no verdict
    for bad in (
        [1],
        {"error": 3},
        good | {"wall_us": float("nan")},
        good | {"device_us": -1.0},
        good | {"kernels": True},
        good | {"names": "k"},
        good | {"dropped": 1.5},
        {"wall_us": 1.0},
    ):
        with pytest.raises(ChildError, match="malformed kernel trace"):
            _kernel_trace(bad)
