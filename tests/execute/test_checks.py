from pathlib import Path

import pytest
from catalog import FAULTS, SAXPY_NAIVE

import cudaperf.analyze
from cudaperf.execute.checks import CHECKS, FATAL, run_checks
from cudaperf.execute.pytorch.static import check_torch_candidate
from cudaperf.execute.types import Severity

CHEATS = {
    "process_calls": 'system("ls");',
    "file_io": 'FILE* f = fopen("/tmp/x", "w");',
    "dynamic_loading": 'void* h = dlopen("libref.so", 1);',
    "python_api": 'extern "C" int PyRun_SimpleString(const char*); PyRun_SimpleString("1");',
    "network": "int s = socket(2, 1, 0);",
    "signals": "kill(getppid(), SIGSTOP);",
    "device_reset": "cudaDeviceReset();",
    "process_exit": "exit(0);",
    "harness_tampering": "cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }",
    "proc_files": 'const char* p = "/proc/self/mem";',
    "environment": 'const char* s = getenv("SEED");',
    "host_fallback": "cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost);",
    "side_stream": "cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);",
    "include_outside": '#include "/root/.cache/cudaperf/results/a.json"\n',
}


@pytest.mark.parametrize(
    "src, bad",
    [
        ('#include "../../results/x.json"\n', True),
        ("#include </etc/hostname>\n", True),
        ('asm(".incbin \\"/etc/hostname\\"");', True),
        ("#include <cuda_runtime.h>\n#include <cstdio>\n", False),
        ('#include "cuda_fp16.h"\n', False),
    ],
)
def test_includes_outside_the_candidate_are_rejected(src, bad):
    assert ("include_outside" in [f.rule for f in run_checks(src)]) is bad


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_each_check_fires_on_its_cheat(name):
    assert name in [f.rule for f in run_checks(CHEATS[name])]


def test_signalling_a_process_is_fatal_and_names_stay_free():
    """A candidate could stop or kill a worker sharing its GPU; a kernel named `kill_mask`,
    or a variable `kill`, is not a call."""
    for src in ("killpg(0, 9);", "syscall_free(); tgkill(1, 2, 9);", "sigqueue(1, 19, v);"):
        assert [f.severity for f in run_checks(src) if f.rule == "signals"] == [Severity.ERROR]
    assert not [
        f for f in run_checks("__global__ void kill_mask(int* kill) {}") if f.rule == "signals"
    ]


def test_calls_into_the_python_interpreter_are_fatal():
    """The `peek` cheat of tests/execute/conftest.py (PyGILState_Ensure, PyRun_SimpleString)
    is refused before it is built; a pybind11 module and names that merely start with Py are
    not findings."""
    found = run_checks("void f() { int g = PyGILState_Ensure(); PyRun_SimpleString(c); }")
    assert [(f.rule, f.severity) for f in found] == [("python_api", Severity.ERROR)]
    assert run_checks('PYBIND11_MODULE(m, x) { x.def("f", &f); } int Pyramid = 1;') == []


def test_clean_candidate_and_comments_pass():
    assert run_checks(SAXPY_NAIVE) == []
    assert run_checks("// never call fork() or system()\n/* exit(1) */") == []


def test_fatal_list_names_checks():
    assert set(FATAL) <= set(CHECKS) and "side_stream" not in FATAL
    assert any(f.rule == "process_calls" for f in run_checks(FAULTS["fork"][0]))


def test_c_and_torch_findings_are_the_analyzer_s_finding():
    """Both static checkers return `cudaperf.analyze.Finding`: fatal checks as errors, the
    others as warnings, on the line their message names (0 when it names none)."""
    honest = (Path(__file__).parents[1] / "adversarial" / "torch" / "honest.py").read_text()
    launch = "        self.lib.affine_relu(x, y, x.numel())\n"
    guarded = "        try:\n    " + launch + "        except RuntimeError:\n            pass\n"
    torch_src = honest.replace(launch, guarded).replace(".contiguous()", ".contiguous().half()")
    lines = torch_src.splitlines()
    try_line = lines.index("        try:") + 1
    half_line = next(n for n, t in enumerate(lines, 1) if ".half()" in t)
    names = {"Model", "get_inputs", "get_init_inputs"}
    torch_found = {f.rule: f for f in check_torch_candidate(torch_src, names)}
    c_found = {
        f.rule: f for f in run_checks('void f() {\n  system("ls");\n}\n' + CHEATS["side_stream"])
    }
    (syntax,) = check_torch_candidate("import torch\nclass ModelNew(:\n", names)
    expected = {
        "process_calls": (c_found, Severity.ERROR, 0),
        "side_stream": (c_found, Severity.WARNING, 0),
        "try_fallback": (torch_found, Severity.ERROR, try_line),
        "half_precision": (torch_found, Severity.WARNING, half_line),
    }
    for rule, (found, severity, line) in expected.items():
        f = found[rule]
        assert type(f) is cudaperf.analyze.Finding, rule
        assert (f.rule, f.severity, f.line) == (rule, severity, line), f
    assert f"(line {try_line})" in torch_found["try_fallback"].message
    assert (syntax.rule, syntax.severity, syntax.line) == ("syntax_error", Severity.ERROR, 2)
    assert type(syntax) is cudaperf.analyze.Finding and cudaperf.analyze.Severity is Severity
    assert set(c_found) == {"process_calls", "side_stream"}


def test_only_runtime_names_count_as_tampering(monkeypatch):
    from cudaperf.execute import checks

    own_kernel = "__global__ void cudaBYUSimplified(float* x) { x[0] = 1.0f; }"
    fake_timer = "float cudaEventElapsedTime(float* ms, void* a, void* b) { return 0; }"
    macro = "#define cudaCheck(x) x"
    # With the toolkit's headers (read where nvcc is): a model's own kernel may be called cudaX.
    monkeypatch.setattr(checks, "runtime_api_names", lambda: frozenset({"cudaEventElapsedTime"}))
    assert checks.harness_tampering(own_kernel) is None and checks.harness_tampering(macro) is None
    assert "cudaEventElapsedTime" in checks.harness_tampering(fake_timer)
    assert checks.harness_tampering("#undef cudaEventElapsedTime")
    # Without headers every cudaX definition stays suspect.
    monkeypatch.setattr(checks, "runtime_api_names", lambda: None)
    assert checks.harness_tampering(own_kernel) and checks.harness_tampering(macro)
