"""tests/proc_helpers.py: the cleanup that every test of a child process relies on."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.proc_helpers import kill_group, pid_gone

# a parent that starts a child in a session of its own (as torchrun starts its workers),
# prints the child's pid and waits; the child holds the parent's stdout open and sleeps
PARENT = """
import subprocess, sys, time
c = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                     start_new_session=True)
print(c.pid, flush=True)
time.sleep(600)
"""


def test_kill_group_also_kills_descendants_in_sessions_of_their_own():
    """A torchrun worker outlived the kill of torchrun's group and kept its pipes open, so the
    test's `communicate` after the kill waited forever (CI hung, 2026-12-06)."""
    p = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    child = int(p.stdout.readline())
    t0 = time.monotonic()
    kill_group(p, wait_s=20)  # raises TimeoutExpired while the child holds the pipe
    assert time.monotonic() - t0 < 20
    deadline = time.monotonic() + 10
    while not pid_gone(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid_gone(child)
