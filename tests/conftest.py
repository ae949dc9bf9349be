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

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

if os.environ.get("PYTEST_XDIST_WORKER"):
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")
