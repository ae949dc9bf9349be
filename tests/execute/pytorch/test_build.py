import os
import shutil
import tempfile
from pathlib import Path

import pytest

from cudaperf.execute.pytorch.build import (
    candidate_form,
    extensions_dir,
    prebuild_torch_candidate,
    torch_arch_list,
)
from tests.execute.isolation.test_confine import WHY

CORPUS = Path(__file__).parents[2] / "adversarial" / "torch"
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


# A load_inline-form candidate whose module code prints the arch list its build was given.
ARCH_PROBE = """import os
print("TORCH_CUDA_ARCH_LIST=" + os.environ.get("TORCH_CUDA_ARCH_LIST", "<unset>"))
load_inline = None
if False:
    load_inline(name="x")
"""


@pytest.mark.parametrize(
    ("arch", "environ_list", "expected"),
    [
        ("sm_90", None, "9.0"),
        ("sm_80", None, "8.0"),
        ("sm_90a", None, "9.0a"),
        ("sm_90", "7.5+PTX", "7.5+PTX"),
    ],
)
def test_inline_build_gets_the_arch_list_of_its_arch(
    tmp_path, monkeypatch, arch, environ_list, expected
):
    """The load_inline build process runs with TORCH_CUDA_ARCH_LIST = torch_arch_list(arch),
    the environment's value when it names one (what the worker gets: test_sandbox's
    test_the_prebuild_and_the_worker_get_the_same_arch_list)."""
    if environ_list is None:
        monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    else:
        monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", environ_list)
    assert candidate_form(ARCH_PROBE) == "load_inline"
    b = prebuild_torch_candidate(ARCH_PROBE, arch, tmp_path, timeout_s=60)
    assert b.ok and b.form == "load_inline", b.log
    assert expected == torch_arch_list(arch, os.environ)
    assert f"TORCH_CUDA_ARCH_LIST={expected}" in b.log.splitlines(), b.log


def test_unknown_form_is_a_build_failure(tmp_path):
    b = prebuild_torch_candidate("class ModelNew: pass\n", "sm_90", tmp_path, 5)
    assert not b.ok and "no kernel loader" in b.log


def test_native_sources_follow_load_cuda_arguments():
    from cudaperf.execute.pytorch.build import native_sources

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


ESCAPING_BUILD = """
import ctypes, io, os, pathlib
host, secret = {host!r}, {secret!r}
def attempt(name, fn):
    try:
        fn()
        print(name, "ok")
    except OSError as e:
        print(name, "blocked", type(e).__name__)
attempt("pathlib", lambda: pathlib.Path(host, "a").write_text("pwned"))
attempt("io_open", lambda: io.open(os.path.join(host, "b"), "w").write("pwned"))
attempt("os_open", lambda: os.open(os.path.join(host, "c"), os.O_WRONLY | os.O_CREAT))
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.open(os.path.join(host, "d").encode(), os.O_WRONLY | os.O_CREAT, 0o644)
print("ctypes", "ok" if fd >= 0 else "blocked")
attempt("read_results", lambda: open(secret).read())
attempt("poison_results", lambda: open(secret, "w").write("forged"))
ext = os.environ["TORCH_EXTENSIONS_DIR"]
attempt("own_ext_dir", lambda: pathlib.Path(ext, "built.txt").write_text("mine"))
load_inline = None
raise SystemExit(0)
load_inline(name="x")
"""


@pytest.mark.skipif(bool(WHY), reason=f"unshare(CLONE_NEWNS) not permitted: {WHY}")
def test_inline_build_step_cannot_write_or_read_outside_its_scratch():
    host = Path(tempfile.mkdtemp(prefix="build-host-", dir="/var/tmp"))
    cache = Path(tempfile.mkdtemp(prefix="build-cache-", dir="/var/tmp"))
    try:
        (cache / "results").mkdir()
        secret = cache / "results" / "other.json"
        secret.write_text('{"status": "ok"}')
        code = ESCAPING_BUILD.format(host=str(host), secret=str(secret))
        b = prebuild_torch_candidate(code, "sm_90", cache, timeout_s=60)
        assert b.ok, b.log
        for name in ("pathlib", "io_open", "os_open", "ctypes", "read_results", "poison_results"):
            assert f"{name} blocked" in b.log, b.log
        assert "own_ext_dir ok" in b.log
        assert list(host.iterdir()) == [] and secret.read_text() == '{"status": "ok"}'
        assert (Path(b.ext_dir) / "built.txt").read_text() == "mine"
        plain = prebuild_torch_candidate(code, "sm_90", cache, timeout_s=60, isolate=False)
        assert "pathlib ok" in plain.log and (host / "a").exists()  # the control escapes
    finally:
        shutil.rmtree(host, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)


CTOR = r"""#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
  FILE* f = fopen("%s", "w");
  if (f) { fprintf(f, "%%d", (int)getpid()); fclose(f); }
}
"""


@needs_nvcc
@pytest.mark.skipif(bool(WHY), reason=f"unshare(CLONE_NEWNS) not permitted: {WHY}")
def test_native_prebuild_runs_confined_and_never_in_the_evaluator(tmp_path):
    """Loading a native library runs its constructors (candidate host code): the prebuild
    does that in a confined child, so the host file it tries to write stays unwritten; with
    isolation off it is written, by another process than this one."""
    import os

    outside = Path(tempfile.mkdtemp(prefix="native-ctor-", dir="/var/tmp"))
    try:
        target = outside / "pwned"
        code = HONEST.replace("__global__", CTOR % target + "__global__", 1)
        b = prebuild_torch_candidate(code, "sm_90", tmp_path, 120, native_cache=tmp_path / "n")
        assert b.ok, b.log
        assert {"mount_ns", "readonly_root", "seccomp"} <= set(b.protections["active"])
        assert not target.exists()
        code = code.replace("__global__", "// unconfined\n__global__", 1)  # a new build
        off = prebuild_torch_candidate(
            code, "sm_90", tmp_path, 120, native_cache=tmp_path / "m", isolate=False
        )
        assert off.ok and off.protections["missing"] == {"all": "isolate_files is off"}
        assert target.is_file() and int(target.read_text()) != os.getpid()
    finally:
        shutil.rmtree(outside, ignore_errors=True)


PLANT = r"""#include <stdio.h>
#include <sys/stat.h>
__attribute__((constructor)) static void plant(void) {  /* runs in the scratch folder */
  mkdir("plantedkey", 0755);
  FILE* f = fopen("plantedkey/kernel.cu", "w");
  if (f) { fputs("__global__ void other(){}", f); fclose(f); }
  FILE* g = fopen("plantedkey/lib.so", "w"); if (g) { fputs("not a library", g); fclose(g); }
  mkdir("../plantedroot", 0755);  /* straight into the native cache: read-only there */
}
"""


@needs_nvcc
@pytest.mark.skipif(bool(WHY), reason=f"unshare(CLONE_NEWNS) not permitted: {WHY}")
def test_a_library_planted_for_another_source_never_reaches_the_native_cache(tmp_path):
    root = tmp_path / "n"
    code = HONEST.replace("__global__", PLANT + "__global__", 1)
    b = prebuild_torch_candidate(code, "sm_90", tmp_path, 120, native_cache=root)
    assert b.ok, b.log
    assert not (root / "plantedkey").exists() and not (root / "plantedroot").exists()
    assert len(list(root.glob("*/lib.so"))) == 1  # its own build was adopted
    again = prebuild_torch_candidate(code, "sm_90", tmp_path, 120, native_cache=root)
    assert again.ok and len(list(root.glob("*/lib.so"))) == 1  # a hit, loaded read-only
    assert not (root / "plantedkey").exists()
