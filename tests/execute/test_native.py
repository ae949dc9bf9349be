"""cudaperf.execute.native: prototype parsing, argument conversion, build cache, build errors.

CPU tests use fake ctypes functions and fake tensors, plus real nvcc builds of host-only
extern "C" functions (callable without a GPU). The GPU test launches a kernel on tensors.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from cudaperf.execute.native import (
    CParam,
    CPrototype,
    NativeBuildError,
    NativeCallError,
    NativeFunction,
    _regex_prototypes,
    load_cuda,
    parse_prototypes,
)

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

SOURCE = r"""
#include <cstdint>
template <int B> __global__ void k(const float* __restrict__ x, float* y) { y[0] = x[0]; }

extern "C" void launch(const float* __restrict__ x, float* y, int n, float a) {
    k<256><<<1, 32>>>(x, y);
}

extern "C" {
void decl_only(unsigned long long n, const double *p, size_t s);
int add(int a, int b) { return a + b; }
double scale(double x, float f) { return x * f; }
int64_t big(int64_t v) { return v + 1; }
}

extern "C" int no_args(void) { return 7; }
extern "C" float* get_ptr(int n);
static int helper(int a) { return a; }  // not extern "C": not bound
"""


def test_parse_prototypes_finds_every_extern_c_function():
    protos = parse_prototypes(SOURCE)
    assert set(protos) == {"launch", "decl_only", "add", "scale", "big", "no_args", "get_ptr"}
    assert protos["launch"] == CPrototype(
        "launch",
        "void",
        (
            CParam("x", "float", True),
            CParam("y", "float", True),
            CParam("n", "int", False),
            CParam("a", "float", False),
        ),
    )
    assert [(p.ctype, p.pointer) for p in protos["decl_only"].params] == [
        ("unsigned long long", False),
        ("double", True),
        ("size_t", False),
    ]
    assert protos["add"].restype == "int"
    assert protos["big"].params == (CParam("v", "int64_t", False),)
    assert protos["no_args"].params == ()
    assert protos["get_ptr"].restype == "pointer"


def test_regex_fallback_parses_plain_heads():
    protos = _regex_prototypes(
        'extern "C" void f(const float* x, unsigned int n) { /* ( */ }\nextern "C" double g(void);'
    )
    assert protos["f"].params == (CParam("x", "float", True), CParam("n", "unsigned int", False))
    assert protos["g"] == CPrototype("g", "double", ())


class FakeCFunc:
    """Stands in for a ctypes function: records argtypes/restype and the converted arguments."""

    argtypes = None
    restype = None

    def __call__(self, *args):
        self.args = args
        return 0


class FakeTensor:
    def __init__(self, ptr=4096, cuda=True, contiguous=True):
        self.ptr, self.is_cuda, self.contiguous = ptr, cuda, contiguous
        self.device = "cuda:0" if cuda else "cpu"

    def data_ptr(self):
        return self.ptr

    def is_contiguous(self):
        return self.contiguous


@pytest.fixture
def launch():
    cfunc = FakeCFunc()
    return NativeFunction(parse_prototypes(SOURCE)["launch"], cfunc), cfunc


def test_argtypes_follow_the_prototype(launch):
    _, cfunc = launch
    assert cfunc.argtypes == [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_float]
    assert cfunc.restype is None


def test_tensors_become_device_pointers_and_numbers_are_converted(launch):
    fn, cfunc = launch
    fn(FakeTensor(1024), FakeTensor(2048), 5, 2)  # int given for a float parameter is fine
    x, y, n, a = cfunc.args
    assert (x.value, y.value, n, a) == (1024, 2048, 5, 2.0)
    assert isinstance(a, float) and isinstance(n, int)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((FakeTensor(), FakeTensor(), 5), "takes 4 arguments, got 3"),
        ((FakeTensor(cuda=False), FakeTensor(), 5, 1.0), "must be a CUDA tensor"),
        ((FakeTensor(), FakeTensor(contiguous=False), 5, 1.0), "must be contiguous"),
        ((3, FakeTensor(), 5, 1.0), "pass a CUDA tensor, got int"),
        ((FakeTensor(), FakeTensor(), 5.5, 1.0), "is an integer (int); got 5.5"),
        ((FakeTensor(), FakeTensor(), True, 1.0), "got bool"),
        ((FakeTensor(), FakeTensor(), 5, "1.0"), "got str"),
    ],
)
def test_bad_arguments_raise_a_clear_error(launch, args, message):
    fn, _ = launch
    with pytest.raises(NativeCallError, match=None) as err:
        fn(*args)
    assert message in str(err.value)


def test_unsupported_parameter_type_is_refused_at_bind_time():
    proto = CPrototype("f", "void", (CParam("s", "my_struct", False),))
    with pytest.raises(NativeCallError, match="my_struct"):
        NativeFunction(proto, FakeCFunc())


def test_module_imports_without_torch():
    code = "import sys, cudaperf.execute.native; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- real builds (no GPU needed: host-only functions are called directly) ----------------


@needs_nvcc
def test_build_calls_host_functions_and_is_cached(tmp_path):
    lib = load_cuda(SOURCE, arch="sm_90", cache_dir=tmp_path)
    assert lib.add(2, 3) == 5
    assert lib.scale(1.5, 2.0) == pytest.approx(3.0)
    assert lib.big(2**40) == 2**40 + 1
    assert lib.no_args() == 7
    with pytest.raises(AttributeError, match="helper"):
        lib.helper  # noqa: B018 - not extern "C"

    mtime = lib.path.stat().st_mtime_ns
    again = load_cuda(SOURCE, arch="sm_90", cache_dir=tmp_path)
    assert again.path == lib.path and again.path.stat().st_mtime_ns == mtime
    assert [p.name for p in tmp_path.iterdir()] == [lib.path.parent.name]  # no temp dirs left

    other = load_cuda(SOURCE, arch="sm_90", cache_dir=tmp_path, extra_flags=("-lineinfo",))
    assert other.path != lib.path


@needs_nvcc
def test_concurrent_builds_of_one_source_agree(tmp_path):
    src = 'extern "C" int seven(void) { return 7; }\n'
    with ThreadPoolExecutor(4) as pool:
        libs = list(pool.map(lambda _: load_cuda(src, arch="sm_90", cache_dir=tmp_path), range(4)))
    assert {lib.path for lib in libs} == {libs[0].path}
    assert all(lib.seven() == 7 for lib in libs)
    assert len(list(tmp_path.iterdir())) == 1


@needs_nvcc
def test_bad_cuda_raises_build_error_with_the_log(tmp_path):
    bad = 'extern "C" void f(int n) { int x = undefined_thing(n); }\n'
    with pytest.raises(NativeBuildError) as err:
        load_cuda(bad, arch="sm_90", cache_dir=tmp_path)
    assert "undefined_thing" in err.value.log and "nvcc failed" in str(err.value)
    assert not list(tmp_path.glob("*/lib.so")), "a failed build must leave nothing cached"


def test_source_without_extern_c_is_refused(tmp_path):
    with pytest.raises(NativeBuildError, match='no extern "C"'):
        load_cuda("__global__ void k() {}\n", arch="sm_90", cache_dir=tmp_path)


# ---- GPU ---------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs an NVIDIA GPU")
@needs_nvcc
def test_kernel_runs_on_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    src = r"""
    __global__ void axpy(int n, float a, const float* x, float* y) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }
    extern "C" void run_axpy(int n, float a, const float* x, float* y) {
        axpy<<<(n + 255) / 256, 256>>>(n, a, x, y);
    }
    """
    lib = load_cuda(src, cache_dir=tmp_path)
    x = torch.rand(1001, device="cuda")
    y = torch.rand(1001, device="cuda")
    want = 2.5 * x + y
    lib.run_axpy(x.numel(), 2.5, x, y)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, want)
    with pytest.raises(NativeCallError, match="CUDA tensor"):
        lib.run_axpy(4, 1.0, torch.zeros(4), y)
    with pytest.raises(NativeCallError, match="contiguous"):
        lib.run_axpy(4, 1.0, x.view(7, 143).t(), y)
