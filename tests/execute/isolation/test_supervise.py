"""The one supervisor of GPU child processes: pipes, deadlines, deaths, process groups."""

import os
import signal
import sys
import textwrap
import time

import pytest

from cudaperf.execute.isolation.supervise import LineChild, death_message, gpu_env
from tests.proc_helpers import pid_gone

# A child that answers each request line {"do": ...} on its reply fd.
_CHILD = textwrap.dedent("""
    import json, os, subprocess, sys, time
    r, w = os.fdopen(int(sys.argv[1])), os.fdopen(int(sys.argv[2]), "w")
    for line in r:
        req = json.loads(line)
        do = req["do"]
        if do == "echo":
            print("to stdout, not the protocol", flush=True)
            w.write("not json\\n" + json.dumps({"echo": req["x"]}) + "\\n")
        elif do == "fork":
            p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            w.write(json.dumps({"pid": p.pid}) + "\\n")
        elif do == "segv":
            os.kill(os.getpid(), 11)
        elif do == "exit":
            open(req["mark"], "w").write("bye")
            sys.exit(0)
        elif do == "hang":
            time.sleep(60)
        w.flush()
""")


def _child(tmp_path) -> LineChild:
    return LineChild(
        lambda r, w: [sys.executable, "-c", _CHILD, str(r), str(w)],
        dict(os.environ),
        tmp_path / "child.log",
    )


def test_requests_and_replies_travel_over_the_passed_pipes_only(tmp_path):
    c = _child(tmp_path)
    try:
        assert c.send({"do": "echo", "x": 7})
        assert c.read_json(time.monotonic() + 30) == {"echo": 7}  # the non-JSON line skipped
    finally:
        c.kill()
    assert "to stdout, not the protocol" in (tmp_path / "child.log").read_text()


def test_a_silent_child_times_out_at_its_deadline(tmp_path):
    c = _child(tmp_path)
    try:
        c.send({"do": "hang"})
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            c.readline(t0 + 0.5)
        assert time.monotonic() - t0 < 5
    finally:
        c.kill()


def test_a_crash_reads_as_eof_and_is_explained_from_the_signal(tmp_path):
    c = _child(tmp_path)
    c.send({"do": "segv"})
    assert c.readline(time.monotonic() + 30) is None
    rc = c.exit_status(10)
    assert rc == -signal.SIGSEGV
    assert death_message(rc, "the worker") == "the worker crashed in host code (segmentation fault)"
    c.kill()
    assert not c.send({"do": "echo", "x": 1})  # a dead child: False, never an exception


def test_kill_takes_the_child_s_whole_process_group(tmp_path):
    c = _child(tmp_path)
    c.send({"do": "fork"})
    pid = c.read_json(time.monotonic() + 30)["pid"]
    os.kill(pid, 0)  # the grandchild runs
    c.kill()
    c.kill()  # idempotent
    deadline = time.monotonic() + 5
    while not pid_gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_gone(pid), "the grandchild outlived the kill"


def test_stop_lets_the_child_end_by_itself_first(tmp_path):
    c = _child(tmp_path)
    mark = tmp_path / "mark"
    c.stop({"do": "exit", "mark": str(mark)}, grace_s=30)
    assert mark.read_text() == "bye" and c.proc.returncode == 0


def test_death_messages():
    assert death_message(None, "the runner") == "the runner stopped answering"
    assert death_message(3, "the worker").startswith("the worker exited with code 3")
    assert "output limit of 2 MiB" in death_message(-signal.SIGXFSZ, "the worker", 2)
    assert death_message(-signal.SIGKILL, "x") == "x was killed (out of host memory?)"
    assert death_message(-signal.SIGTERM, "x") == "x died from SIGTERM"


def test_gpu_env_binds_one_gpu_in_nvidia_smi_order_with_the_prebuild_arch_list():
    from cudaperf.execute.build import torch_arch_list

    assert torch_arch_list("sm_90", {}) == "9.0" and torch_arch_list("sm_90a", {}) == "9.0a"
    assert torch_arch_list("sm_100", {}) == "10.0"
    env = {"TORCH_CUDA_ARCH_LIST": "9.0a"}
    assert torch_arch_list("sm_90", env) == "9.0a"  # the GPU machine's own value wins
    assert gpu_env(dict(env), 0, "sm_90")["TORCH_CUDA_ARCH_LIST"] == "9.0a"
    assert gpu_env({}, 1, "sm_90a") == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": "1",
        "TORCH_CUDA_ARCH_LIST": torch_arch_list("sm_90a", {}),
    }
    assert gpu_env({"A": "b"}, None) == {"A": "b"}  # no GPU named, no arch: left as it is


# A child that watches its parent, starts a grandchild and hangs, like a worker in the middle
# of a hanging kernel; the parent reports both pids and is then killed.
_ORPHAN = textwrap.dedent("""
    import json, os, subprocess, sys, time
    from cudaperf.execute.isolation.supervise import exit_with_parent
    r, w = int(sys.argv[1]), int(sys.argv[2])
    exit_with_parent(r, every_s=0.1)
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    os.write(w, (json.dumps({"pids": [os.getpid(), p.pid]}) + "\\n").encode())
    time.sleep(60)
""")
_PARENT = textwrap.dedent("""
    import json, os, sys, time
    from cudaperf.execute.isolation.supervise import LineChild
    c = LineChild(lambda r, w: [sys.executable, "-c", sys.argv[1], str(r), str(w)],
                  dict(os.environ))
    print(json.dumps(c.read_json(time.monotonic() + 30)), flush=True)
    time.sleep(60)
""")


def test_a_killed_parent_takes_its_child_and_what_the_child_started_along():
    import json
    import subprocess

    parent = subprocess.Popen([sys.executable, "-c", _PARENT, _ORPHAN], stdout=subprocess.PIPE)
    pids = json.loads(parent.stdout.readline())["pids"]
    assert not any(pid_gone(p) for p in pids)
    parent.kill()  # SIGKILL: no cleanup runs in the parent
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(pid_gone(p) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if not pid_gone(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, "the child (or its grandchild) outlived its killed parent"
