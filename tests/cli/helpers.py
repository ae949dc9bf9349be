"""Drive the real `cudaperf` command line in a subprocess, as a user's shell would."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.proc_helpers import kill_group

SRC = Path(__file__).resolve().parents[2] / "src"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")


def env(**extra: str) -> dict[str, str]:
    """The environment of a CLI run: this checkout's package first, wide non-terminal output."""
    e = dict(os.environ, PYTHONPATH=str(SRC), PYTHONUNBUFFERED="1")
    e.pop("COLUMNS", None)
    e.update(extra)
    return e


# Where commands run unless a test says otherwise: a broken check must not leave files (a
# default traj.jsonl, a best kernel) in the checkout.
_SCRATCH = Path(tempfile.mkdtemp(prefix="cudaperf-cli-test-"))


def cli(*args, timeout: float = 120, cwd: Path | None = None, src: Path = SRC, **extra_env: str):
    """Run `python -m cudaperf ARGS` (the package under `src`); the CompletedProcess."""
    cmd = [sys.executable, "-m", "cudaperf", *map(str, args)]
    e = env(**extra_env) | {"PYTHONPATH": str(src)}
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=e, cwd=cwd or _SCRATCH
    )


def package_copy(tmp_path: Path) -> Path:
    """A throwaway copy of the package (its `src` folder), for tests whose failure would
    write into the package itself (the shipped ranker, the sample set)."""
    dst = tmp_path / "src"
    shutil.copytree(
        SRC / "cudaperf", dst / "cudaperf", ignore=shutil.ignore_patterns("__pycache__")
    )
    return dst


def start(*args, cwd: Path | None = None, **extra_env: str) -> subprocess.Popen:
    """Start `python -m cudaperf ARGS` without waiting (for the Ctrl-C tests)."""
    cmd = [sys.executable, "-m", "cudaperf", *map(str, args)]
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(**extra_env),
        cwd=cwd or _SCRATCH,
        start_new_session=True,  # interrupt's cleanup kills the group
    )


def interrupt(p: subprocess.Popen, limit_s: float) -> tuple[float, str, str]:
    """Send SIGINT (Ctrl-C) once; seconds until the process exited, its stdout and stderr.
    Fails the test when it is still running after `limit_s`."""
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        dead = p.poll() is not None  # then its children hold the pipes: they outlived it
        # the group: communicate() returns, nothing is left (a group with no member left is
        # fine: the pipes' holders are elsewhere)
        kill_group(p, wait_s=30)
        pytest.fail(
            f"children of the process still running {limit_s} s after Ctrl-C"
            if dead
            else f"still running {limit_s} s after Ctrl-C"
        )
    return time.monotonic() - t0, out, err


def wait_for(cond, limit_s: float, what: str) -> None:
    """Poll `cond()` until it is true; fail the test after `limit_s`."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > limit_s:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def user_error(r, *needles: str, code: int | None = None) -> str:
    """Assert `r` is a user error: non-zero exit, no traceback, one `error:` line on stderr
    naming every needle; returns that line."""
    assert r.returncode != 0, (r.stdout, r.stderr)
    if code is not None:
        assert r.returncode == code, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("error:", "Error:"))]
    assert len(errors) == 1, r.stderr
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    return errors[0]


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def slow_nvcc_path(tmp_path: Path) -> str:
    """A PATH whose nvcc takes 2 s more per compile (the real one behind it), so that a batch
    is still running when the test presses Ctrl-C."""
    real = shutil.which("nvcc")
    fake = tmp_path / "slowbin" / "nvcc"
    fake.parent.mkdir()
    fake.write_text(
        f'#!/bin/sh\ncase "$*" in *--version*) ;; *) sleep 2 ;; esac\nexec "{real}" "$@"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return f"{fake.parent}{os.pathsep}{os.environ['PATH']}"


def finished_lines(path: Path) -> int:
    """How many complete lines a file that another process is appending to holds so far
    (a line still being written has no newline yet)."""
    return Path(path).read_text().count("\n") if Path(path).is_file() else 0
