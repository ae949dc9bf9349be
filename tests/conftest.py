"""Settings for the whole test run.

A test runner started in the background by a shell without job control (`pytest ... &` in a
script, as CI wrappers and `nohup` setups do) starts with SIGINT ignored, and an ignored signal
stays ignored in every process it starts: the Ctrl-C tests (`tests/test_procpool.py`, the CLI
and trainer interrupt tests) would send a SIGINT that nobody receives and fail. A Python
handler is reset to the default in a child at exec, so installing Python's own handler here
gives every child the ordinary Ctrl-C behaviour again.
"""

from __future__ import annotations

import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
