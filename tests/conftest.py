"""Settings for the whole test run.

A test runner started in the background by a shell without job control (`pytest ... &` in a
script, as CI wrappers and `nohup` setups do) starts with SIGINT ignored, and an ignored signal
stays ignored in every process it starts: the Ctrl-C tests (`tests/test_procpool.py`, the CLI
and trainer interrupt tests) would send a SIGINT that nobody receives and fail. A Python
handler is reset to the default in a child at exec, so installing Python's own handler here
gives every child the ordinary Ctrl-C behaviour again.

Under pytest-xdist (`-n auto`, the README's test command) each worker and each process a test
starts gets one math thread (OMP/MKL/OpenBLAS), unless the caller set a count: torch's default
of one thread per core, in every worker at once, oversubscribed CI's two cores (the Ctrl-C
checkpoint test took 130 s beside another worker, 35 s alone).
"""

from __future__ import annotations

import os
import signal

import pytest

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

if os.environ.get("PYTEST_XDIST_WORKER"):
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")


@pytest.fixture()
def shared_ptxas_cache(tmp_path_factory, monkeypatch):
    """ptxas reports (`cudaperf.analyze.resources`) cached on disk for this test run and shared
    by its xdist workers: the tests that analyse every sample implementation with ptxas
    (tests/analyze/test_types.py, tests/rank/test_features.py) run ptxas on the same 44
    sources, ~17 s each on CI's cores. Only where the analyzer was given no cache directory;
    the reports are the ones ptxas printed for the same source, arch and nvcc."""
    import cudaperf.analyze.api as api

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # this run's
    real = api.ptxas_resources

    def shared(code, arch, nvcc="nvcc", cache_dir=None, timeout_s=60):
        return real(code, arch, nvcc, cache_dir or str(root / "ptxas-shared"), timeout_s)

    monkeypatch.setattr(api, "ptxas_resources", shared)
    return root / "ptxas-shared"
