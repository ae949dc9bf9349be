import pytest
from catalog import FAULTS, SAXPY_NAIVE

from cudaperf.execute.checks import CHECKS, FATAL, run_checks

CHEATS = {
    "process_calls": 'system("ls");',
    "file_io": 'FILE* f = fopen("/tmp/x", "w");',
    "dynamic_loading": 'void* h = dlopen("libref.so", 1);',
    "network": "int s = socket(2, 1, 0);",
    "device_reset": "cudaDeviceReset();",
    "process_exit": "exit(0);",
    "harness_tampering": "cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }",
    "proc_files": 'const char* p = "/proc/self/mem";',
    "environment": 'const char* s = getenv("SEED");',
    "host_fallback": "cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost);",
    "side_stream": "cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);",
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_each_check_fires_on_its_cheat(name):
    assert name in [n for n, _ in run_checks(CHEATS[name])]


def test_clean_candidate_and_comments_pass():
    assert run_checks(SAXPY_NAIVE) == []
    assert run_checks("// never call fork() or system()\n/* exit(1) */") == []


def test_fatal_list_names_checks():
    assert set(FATAL) <= set(CHECKS) and "side_stream" not in FATAL
    assert any(n == "process_calls" for n, _ in run_checks(FAULTS["fork"][0]))
