import shutil
from pathlib import Path

import pytest

from cudaperf.execute.torch_build import (
    candidate_form,
    extensions_dir,
    prebuild_torch_candidate,
)

CORPUS = Path(__file__).parents[1] / "adversarial" / "torch"
HONEST = (CORPUS / "honest.py").read_text()
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def test_form_detection():
    assert candidate_form(HONEST) == "native"
    inline = "from torch.utils.cpp_extension import load_inline\nm = load_inline(name='x')\n"
    assert candidate_form(inline) == "load_inline"
    assert candidate_form("class ModelNew: pass\n") == "unknown"
    assert candidate_form("class (:") == "unknown"


@needs_nvcc
def test_native_prebuild_fills_the_cache(tmp_path):
    b = prebuild_torch_candidate(HONEST, "sm_90", tmp_path, 60, native_cache=tmp_path / "n")
    assert b.ok and b.form == "native", b.log
    assert len(list((tmp_path / "n").glob("*/lib.so"))) == 1


@needs_nvcc
def test_native_prebuild_reports_compile_errors(tmp_path):
    bad = HONEST.replace("fmaxf(x[i], 0.0f)", "fmaxf(x[i], undefined_name)")
    b = prebuild_torch_candidate(bad, "sm_90", tmp_path, 60, native_cache=tmp_path / "n")
    assert not b.ok and "undefined_name" in b.log


def test_inline_build_runs_the_module_and_times_out(tmp_path):
    slow = "import time\nload_inline = None\ntime.sleep(30)\nload_inline(name='x')\n"
    b = prebuild_torch_candidate(slow, "sm_90", tmp_path, timeout_s=1)
    assert b.timed_out and b.form == "load_inline"
    failing = "load_inline = None\nraise SystemExit('boom: build failed')\nload_inline()\n"
    b = prebuild_torch_candidate(failing, "sm_90", tmp_path, timeout_s=30)
    assert not b.ok and "boom" in b.log
    assert b.ext_dir == str(extensions_dir(tmp_path, failing))


def test_unknown_form_is_a_build_failure(tmp_path):
    b = prebuild_torch_candidate("class ModelNew: pass\n", "sm_90", tmp_path, 5)
    assert not b.ok and "no kernel loader" in b.log


def test_native_sources_follow_load_cuda_arguments():
    from cudaperf.execute.torch_build import native_sources

    doc = '"""Mentions extern "C" launchers and __global__ kernels in prose."""\n'
    src = doc + HONEST
    (only,) = native_sources(src)
    assert only.lstrip().startswith("__global__ void affine_relu_kernel")
    inline = src.replace(
        "load_cuda(CUDA_SRC)", 'load_cuda("""__global__ void k() {}\nextern "C" void f() {}""")'
    )
    assert native_sources(inline) == ['__global__ void k() {}\nextern "C" void f() {}']


@needs_nvcc
def test_docstring_mentioning_extern_c_is_not_built(tmp_path):
    src = '"""Native form: extern "C" launchers."""\n' + HONEST
    b = prebuild_torch_candidate(src, "sm_90", tmp_path, 60, native_cache=tmp_path / "n")
    assert b.ok, b.log
