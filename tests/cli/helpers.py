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
    """Run `python -m cudaperf ARGS` (the package under `src`); the CompletedProcess.

    With this checkout's package the command runs in a process forked from a server that has
    imported what `python -m cudaperf` imports before it reads its arguments (`cudaperf.cli`),
    so a call skips that import (~0.5 s of each of ~270 calls in the test run, most of them
    checks of one-line errors); the child gets the call's arguments, environment, folder,
    stdin from /dev/null, stdout and stderr into files, and runs `cudaperf.__main__` as
    `-m` does. CUDAPERF_TEST_CLI_FORK=0 runs every call as a fresh process instead."""
    cmd = [sys.executable, "-m", "cudaperf", *map(str, args)]
    e = env(**extra_env) | {"PYTHONPATH": str(src)}
    if src == SRC and os.environ.get("CUDAPERF_TEST_CLI_FORK", "1") != "0":
        return _forked(cmd, e, Path(cwd or _SCRATCH), timeout)
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=e, cwd=cwd or _SCRATCH
    )


# The fork server: reads one JSON request per line, forks, and answers with the child's pid
# and then its exit status (as a fresh interpreter would exit: SystemExit's code, 1 and a
# traceback on an uncaught exception, atexit handlers run).
_SERVER_CODE = r"""
import atexit, json, os, runpy, sys, traceback
import cudaperf.cli  # what `python -m cudaperf` imports first
channel = sys.stdout
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for fd, path, flags in (
                (0, os.devnull, os.O_RDONLY),
                (1, req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                (2, req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
            ):
                os.dup2(os.open(path, flags, 0o600), fd)
            os.chdir(req["cwd"])
            os.environ.clear()
            os.environ.update(req["env"])
            sys.argv = ["cudaperf", *req["args"]]
            try:
                runpy.run_module("cudaperf", run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as e:
                if e.code is None:
                    code = 0
                elif isinstance(e.code, int):
                    code = e.code
                else:
                    print(e.code, file=sys.stderr)
                    code = 1
            except BaseException:
                traceback.print_exc()
                code = 1
            try:
                atexit._run_exitfuncs()
            except BaseException:
                pass
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    channel.write(json.dumps({"pid": pid}) + "\n")
    channel.flush()
    _, status = os.waitpid(pid, 0)
    channel.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
    channel.flush()
"""
_server: subprocess.Popen | None = None
_pending = bytearray()  # what was read from the server past the last answer's newline


def _fork_server() -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        _pending.clear()
        _server = subprocess.Popen(
            [sys.executable, "-c", _SERVER_CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,  # answers are read from the pipe itself (select), not a buffer
            env=env(),
            cwd=_SCRATCH,
        )
    return _server


def _answer(server: subprocess.Popen, timeout: float) -> dict | None:
    """The server's next answer line; None when none came within `timeout` s. Both answers
    of a quick call may arrive in one read: the second waits in `_pending`."""
    import select

    deadline = time.monotonic() + timeout
    while b"\n" not in _pending:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([server.stdout], [], [], left)[0]:
            return None
        chunk = os.read(server.stdout.fileno(), 4096)
        if not chunk:
            raise RuntimeError("the CLI fork server ended (tests/cli/helpers.py)")
        _pending.extend(chunk)
    line, _, rest = bytes(_pending).partition(b"\n")
    _pending[:] = rest
    return json.loads(line)


def _forked(cmd: list[str], e: dict, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    server = _fork_server()
    with tempfile.TemporaryDirectory(prefix="cudaperf-cli-call-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        req = {"args": cmd[3:], "env": e, "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
        server.stdin.write((json.dumps(req) + "\n").encode())
        pid = _answer(server, 30)["pid"]
        done = _answer(server, timeout)
        if done is None:  # as subprocess.run: kill the command, then raise
            os.kill(pid, signal.SIGKILL)
            _answer(server, 30)
            raise subprocess.TimeoutExpired(cmd, timeout, out.read_text(), err.read_text())
        return subprocess.CompletedProcess(cmd, done["rc"], out.read_text(), err.read_text())


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
