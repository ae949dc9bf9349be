"""bench/device_bg.sh: one long job in a process session of its own, followed call by call.
Its promises: the job outlives the command that started it; each `watch` brings back the log
and the job's out/ folder (also while it runs), ends when the job ends and exits with its
status; `stop` ends the whole job, grandchildren included; bad input is one line."""

from __future__ import annotations

import os
import subprocess
import tarfile
import time
import uuid

import pytest

from tests.script_helpers import ROOT

SCRIPT = ROOT / "bench" / "device_bg.sh"


def _bg(tmp_path, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    e = dict(os.environ, BG_ROOT=str(tmp_path / "bg"), OUT=str(tmp_path / "out"))
    e |= {"BG_START_CHECK_S": "1", "BG_POLL_S": "1"} | env
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env=e, capture_output=True, text=True, timeout=timeout
    )


def _members(tmp_path, name: str) -> dict[str, bytes]:
    with tarfile.open(tmp_path / "out" / f"bg_{name}.tar.gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_a_job_outlives_its_start_and_watch_brings_back_its_files_and_status(tmp_path):
    job = 'echo started; echo a > "$OUT/a.json"; sleep 3; echo b > "$OUT/b.json"; exit 3'
    t0 = time.monotonic()
    r = _bg(tmp_path, "start", "j1", "--", "bash", "-c", job)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 3  # start returns; the job goes on without it
    assert "watch j1" in r.stdout
    w = _bg(tmp_path, "watch", "j1", WATCH_S="30")
    assert w.returncode == 3, w.stdout + w.stderr  # the job's own status
    assert "j1 ended, rc 3" in w.stdout and "started" in w.stdout
    files = _members(tmp_path, "j1")
    assert files["out/a.json"] == b"a\n" and files["out/b.json"] == b"b\n"
    assert files["out/rc"].strip() == b"3"
    assert b"started" in (tmp_path / "out" / "bg_j1.log").read_bytes()


def test_watch_brings_back_what_a_running_job_wrote_and_stop_ends_all_of_it(tmp_path):
    marker = f"cudaperf-bg-{uuid.uuid4().hex}"
    # a grandchild in a process group of timeout's own: `stop` must reach it too
    job = f'echo x > "$OUT/early.txt"; bash -c "exec -a {marker} sleep 300" & wait'
    assert _bg(tmp_path, "start", "j2", "--", "bash", "-c", job).returncode == 0
    time.sleep(1)
    with pytest.raises(subprocess.TimeoutExpired):  # a call cut at its limit mid-watch ...
        _bg(tmp_path, "watch", "j2", timeout=3)
    assert _members(tmp_path, "j2")["out/early.txt"] == b"x\n"  # ... brought the files back
    (tmp_path / "out" / "bg_j2.tar.gz").unlink()
    w = _bg(tmp_path, "watch", "j2", WATCH_S="2")
    assert w.returncode == 0 and "still running" in w.stdout, w.stdout + w.stderr
    assert _members(tmp_path, "j2")["out/early.txt"] == b"x\n"
    assert "running already" in _bg(tmp_path, "start", "j2", "--", "true").stderr
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0
    pid = int((tmp_path / "bg" / "j2" / "pid").read_text())
    assert os.getsid(pid) == pid  # the job's shell leads its session: what `stop` ends
    s = _bg(tmp_path, "stop", "j2")
    assert s.returncode == 0 and "stopped" in s.stdout
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "stop left the job's grandchild running"
        time.sleep(0.2)
    assert _bg(tmp_path, "watch", "j2", WATCH_S="5").returncode == 143


def test_the_budget_ends_a_job_and_a_job_that_fails_at_once_says_so(tmp_path):
    r = _bg(tmp_path, "start", "j3", "--", "sleep", "60", BG_BUDGET_S="2")
    assert r.returncode == 0
    assert _bg(tmp_path, "watch", "j3", WATCH_S="30").returncode == 124  # timeout's status
    f = _bg(tmp_path, "start", "j4", "--", "bash", "-c", "echo broken >&2; exit 7")
    assert f.returncode == 4 and "rc 7" in f.stderr and "broken" in f.stderr


@pytest.mark.parametrize(
    "args",
    [("start", "a/b", "--", "true"), ("watch", "none"), ("start", "j5"), ("bogus", "j5")],
)
def test_bad_input_is_one_line(tmp_path, args):
    r = _bg(tmp_path, *args)
    assert r.returncode in (2, 3) and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stdout == ""


def test_the_job_sees_the_callers_environment_unchanged(tmp_path):
    # bench_suite.sh reads ROOT (where its runs go); the script once set its own ROOT and the
    # job wrote to /tmp/cudaperf_bg instead of the folder the command line named
    job = 'echo "ROOT=$ROOT" > "$OUT/env.txt"'
    r = _bg(tmp_path, "start", "j9", "--", "bash", "-c", job, ROOT="/somewhere/else")
    assert r.returncode == 0, r.stderr
    assert _bg(tmp_path, "watch", "j9", WATCH_S="20").returncode == 0
    assert _members(tmp_path, "j9")["out/env.txt"] == b"ROOT=/somewhere/else\n"


def test_the_job_is_told_it_outlives_the_call(tmp_path):
    # bench_suite.sh keeps a job's runs outside the tree that each device call copies anew
    job = 'echo "BG_JOB=$BG_JOB" > "$OUT/env.txt"'
    r = _bg(tmp_path, "start", "j10", "--", "bash", "-c", job)
    assert r.returncode == 0, r.stderr
    assert _bg(tmp_path, "watch", "j10", WATCH_S="20").returncode == 0
    assert _members(tmp_path, "j10")["out/env.txt"] == b"BG_JOB=j10\n"


def test_the_job_imports_the_package_from_a_copy_that_later_calls_leave_alone(tmp_path):
    """Each device call copies the working tree anew; a background run's late import once
    found its module missing mid-copy (session 40). The job's package is a copy of src/."""
    job = 'python3 -c "import cudaperf, sys; print(cudaperf.__file__)" > "$OUT/where.txt"'
    assert _bg(tmp_path, "start", "j6", "--", "bash", "-c", job).returncode == 0
    w = _bg(tmp_path, "watch", "j6", WATCH_S="30")
    assert w.returncode == 0, w.stdout + w.stderr
    where = _members(tmp_path, "j6")["out/where.txt"].decode().strip()
    assert where == str(tmp_path / "bg" / "j6" / "src" / "cudaperf" / "__init__.py"), where
