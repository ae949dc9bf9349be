"""Kernel isolation (`confine`): a confined child that tries to write or read outside its
scratch (pathlib, io.open, os.open, ctypes into libc) fails and the host is unchanged; an
honest one works; the confinement cannot be undone from inside; it degrades with a reason."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from cudaperf.execute.isolation import confine

_SCRIPTS = Path(tempfile.mkdtemp(prefix="confine-scripts-", dir="/var/tmp"))  # outside /tmp:
atexit.register(shutil.rmtree, _SCRIPTS, True)  # a confined child's /tmp is private


def _script(code: str) -> str:
    p = _SCRIPTS / f"s{len(list(_SCRIPTS.iterdir()))}.py"
    p.write_text(textwrap.dedent(code))
    return str(p)


def _can_confine() -> str:
    """'' when a mount namespace can be made here, else why not."""
    rr, rw = os.pipe()
    cmd = confine.command(confine.Policy(), [_script("pass")], rw)
    r = subprocess.run(cmd, capture_output=True, text=True, pass_fds=(rw,))
    os.close(rw)
    with os.fdopen(rr) as f:
        report = f.read()
    if r.returncode != 0:
        return r.stderr[-300:]
    return "" if '"mount_ns"' in report.split('"missing"')[0] else report


WHY = _can_confine() if sys.platform == "linux" else "not Linux"
needs_ns = pytest.mark.skipif(bool(WHY), reason=f"unshare(CLONE_NEWNS) not permitted: {WHY}")

ESCAPES = """
import ctypes, io, json, os, pathlib, sys
host, secret, tmp_secret, scratch = sys.argv[1:5]
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = type(e).__name__
attempt("pathlib", lambda: pathlib.Path(host, "a").write_text("pwned"))
attempt("io_open", lambda: io.open(os.path.join(host, "b"), "w").write("pwned"))
attempt("os_open", lambda: os.close(os.open(os.path.join(host, "c"), os.O_WRONLY | os.O_CREAT)))
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.open(os.path.join(host, "d").encode(), os.O_WRONLY | os.O_CREAT, 0o644)
out["ctypes_open"] = "ok" if fd >= 0 else os.strerror(ctypes.get_errno())
attempt("read_hidden", lambda: open(secret).read())
attempt("read_host_tmp", lambda: open(tmp_secret).read())
attempt("scratch", lambda: pathlib.Path(scratch, "s").write_text("mine"))
attempt("scratch_read", lambda: pathlib.Path(scratch, "s").read_text())
attempt("tmp_write", lambda: pathlib.Path("/tmp/mine").write_text("mine"))
print(json.dumps(out))
"""


@pytest.fixture()
def host(tmp_path):
    """A visible host folder outside the scratch, a hidden one with a secret, a host /tmp
    secret; removed afterwards."""
    visible = Path(tempfile.mkdtemp(prefix="confine-host-", dir="/var/tmp"))
    hidden = Path(tempfile.mkdtemp(prefix="confine-eval-", dir="/var/tmp"))
    scratch = hidden / "scratch"
    scratch.mkdir()
    (hidden / "secret.json").write_text("the answer")
    (tmp_path / "other-candidate.txt").write_text("someone else's")
    yield visible, hidden, scratch, tmp_path / "other-candidate.txt"
    shutil.rmtree(visible, ignore_errors=True)
    shutil.rmtree(hidden, ignore_errors=True)


def _run(policy: confine.Policy | None, code: str, *args: str) -> tuple[dict, dict]:
    rr, rw = os.pipe()
    cmd = confine.command(policy, [_script(code), *args], rw)
    r = subprocess.run(cmd, capture_output=True, text=True, pass_fds=(rw,), timeout=60)
    os.close(rw)
    with os.fdopen(rr) as f:
        prot = json.loads(f.read() or "{}")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), prot


@needs_ns
def test_writes_and_reads_outside_the_scratch_fail_and_the_host_is_unchanged(host):
    visible, hidden, scratch, tmp_secret = host
    policy = confine.Policy(private=("/tmp", "/dev/shm", str(hidden)), writable=(str(scratch),))
    got, prot = _run(
        policy, ESCAPES, str(visible), str(hidden / "secret.json"), str(tmp_secret), str(scratch)
    )
    for name in ("pathlib", "io_open", "os_open"):
        assert got[name] == "OSError", got  # EROFS
    assert got["ctypes_open"] == "Read-only file system"
    assert got["read_hidden"] == "FileNotFoundError" and got["read_host_tmp"] == "FileNotFoundError"
    assert got["scratch"] == got["scratch_read"] == got["tmp_write"] == "ok"
    assert list(visible.iterdir()) == []
    assert (hidden / "secret.json").read_text() == "the answer"
    assert not Path("/tmp/mine").exists() and tmp_secret.read_text() == "someone else's"
    assert (scratch / "s").read_text() == "mine"  # the writable bind is the host folder
    assert {"mount_ns", "readonly_root", "private_tmpfs", "net_ns"} <= set(prot["active"])


def test_unconfined_control_can_write(host):
    """The same script without confinement writes the host: the test above is not vacuous."""
    visible, hidden, scratch, tmp_secret = host
    got, prot = _run(
        None, ESCAPES, str(visible), str(hidden / "secret.json"), str(tmp_secret), str(scratch)
    )
    assert got["pathlib"] == got["read_hidden"] == "ok" and len(list(visible.iterdir())) == 4
    Path("/tmp/mine").unlink(missing_ok=True)
    assert prot["active"] == []


HONEST = """
import json, math, pathlib, tempfile
d = tempfile.mkdtemp()
pathlib.Path(d, "x.txt").write_text("3.0")
v = float(pathlib.Path(d, "x.txt").read_text())
print(json.dumps({"sqrt": math.sqrt(v * 3)}))
"""


@needs_ns
def test_an_honest_child_runs_normally():
    got, prot = _run(confine.Policy(), HONEST)
    assert got == {"sqrt": 3.0} and "seccomp" in prot["active"]


MOUNTS = """
import json
ro = {}
for line in open("/proc/self/mountinfo"):
    parts = line.split()
    ro[parts[4]] = "ro" in parts[5].split(",")
print(json.dumps({"/": ro["/"], "/proc": ro["/proc"]}))
"""


@needs_ns
def test_proc_stays_writable_while_the_rest_is_read_only():
    """The CUDA driver writes to /proc when it starts (cuInit fails with 304 under a read-only
    /proc on the H200: bench/diag/confine_cuda.py), so procfs is the one mount left as it was."""
    got, prot = _run(confine.Policy(), MOUNTS)
    assert "readonly_root" in prot["active"]
    assert got == {"/": True, "/proc": False}


UNDO = """
import ctypes, json, os, pathlib, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
out = {}
out["remount_rw"] = libc.mount(None, b"/", None, 32, None) == 0
out["unshare_userns"] = libc.unshare(0x10000000 | 0x00020000) == 0
out["umount_tmp"] = libc.umount2(b"/tmp", 2) == 0
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
out["cap_eff"] = status["CapEff"].strip()
out["no_new_privs"] = status["NoNewPrivs"].strip()
out["seccomp"] = status["Seccomp"].strip()
out["dumpable"] = libc.prctl(3, 0, 0, 0, 0)
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()
    out["net"] = "connected"
except OSError as e:
    out["net"] = type(e).__name__
try:
    pathlib.Path("/etc/cudaperf-pwned").write_text("x")
    out["write_etc"] = "ok"
except OSError:
    out["write_etc"] = "blocked"
print(json.dumps(out))
"""


@needs_ns
def test_the_confinement_cannot_be_undone_from_inside():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    try:
        got, _ = _run(confine.Policy(), UNDO, str(srv.getsockname()[1]))
    finally:
        srv.close()
    assert not got["remount_rw"] and not got["umount_tmp"]
    assert not got["unshare_userns"]  # seccomp: no nested namespace to remount from
    assert int(got["cap_eff"], 16) == 0 and got["no_new_privs"] == "1" and got["seccomp"] == "2"
    assert got["dumpable"] == 0  # same-uid processes cannot read its memory or /proc/pid/root
    assert got["net"] != "connected" and got["write_etc"] == "blocked"
    assert not Path("/etc/cudaperf-pwned").exists()


DEGRADE = """
import importlib.util as u, json, logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
s = u.spec_from_file_location("cc", sys.argv[1]); m = u.module_from_spec(s)
sys.modules["cc"] = m; s.loader.exec_module(m)
pre = m.Protections()
m._seccomp(pre)  # stands in for a kernel that forbids namespaces: unshare now fails
prot = m.apply(m.Policy())
m.apply(m.Policy())
print(json.dumps({"active": prot.active, "missing": prot.missing}))
"""


def test_no_namespaces_degrades_with_a_reason_logged_once():
    r = subprocess.run(
        [sys.executable, _script(DEGRADE), confine.__file__],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert "mount_ns" not in got["active"] and "refused" in got["missing"]["mount_ns"]
    assert "no_new_privs" in got["active"]  # what can still be applied is applied
    assert r.stderr.count("candidate sandbox of the process") == 1
    assert "WARNING" in r.stderr


@needs_ns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a child as another user")
def test_a_non_root_process_gets_a_user_namespace():
    import pwd

    try:
        nobody = pwd.getpwnam("nobody").pw_uid
    except KeyError:
        pytest.skip("no user 'nobody' on this machine")
    try:
        probe = subprocess.run([sys.executable, "-c", "pass"], user=nobody, capture_output=True)
    except OSError as e:
        pytest.skip(f"{sys.executable} cannot run as nobody here: {e}")
    if probe.returncode != 0:
        pytest.skip(f"{sys.executable} cannot run as nobody: {probe.stderr[-200:]!r}")
    code = "import json, sys; print(json.dumps({'uid': __import__('os').geteuid()}))"
    rr, rw = os.pipe()
    os.set_inheritable(rw, True)
    r = subprocess.run(
        confine.command(confine.Policy(), [_script(code)], rw),
        user=nobody,
        capture_output=True,
        text=True,
        pass_fds=(rw,),
        timeout=60,
    )
    os.close(rw)
    with os.fdopen(rr) as f:
        prot = json.loads(f.read())
    assert r.returncode == 0, r.stderr
    assert {"user_ns", "mount_ns", "readonly_root", "seccomp"} <= set(prot["active"]), prot
    assert json.loads(r.stdout)["uid"] == nobody  # mapped to itself: file ownership unchanged


def test_seccomp_program_is_well_formed():
    code = confine._seccomp_program()
    if code is None:
        pytest.skip("no syscall table for this architecture")
    assert len(code) % 8 == 0 and len(code) // 8 < 256  # BPF jumps are 8-bit offsets


TORCH_CHILD = """
import json, tempfile, torch
x = torch.randn(64, 64)
d = tempfile.mkdtemp()
torch.save(x, d + "/x.pt")
y = torch.load(d + "/x.pt")
print(json.dumps({"sum": float((y @ y).abs().sum() > 0), "threads": torch.get_num_threads()}))
"""


@needs_ns
def test_torch_imports_and_computes_under_confinement():
    pytest.importorskip("torch")
    got, prot = _run(confine.Policy(), TORCH_CHILD)
    assert got["sum"] == 1.0 and {"seccomp", "no_capabilities"} <= set(prot["active"])


@needs_ns
def test_a_private_folder_that_holds_the_interpreter_is_left_readable():
    got, prot = _run(confine.Policy(private=("/tmp", sys.prefix)), HONEST)
    assert got == {"sqrt": 3.0}  # the child still ran, from its read-only interpreter
    assert "private_tmpfs" in prot["active"] and not prot["missing"]


@needs_ns
def test_an_interpreter_under_tmp_keeps_the_host_s_tmp_hidden(tmp_path):
    """A checkout (and its venv) under /tmp, as in a CI job: the private /tmp must still hide
    the host's files, with the interpreter bound back read-only (it used to leave /tmp open)."""
    venv = Path(tempfile.mkdtemp(prefix="confine-venv-", dir="/tmp"))
    secret = Path(tempfile.mkdtemp(prefix="confine-secret-", dir="/tmp")) / "s.txt"
    secret.write_text("the answer")
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
            check=True,
            timeout=120,
        )
        code = f"""
import json, pathlib
try:
    seen = pathlib.Path({str(secret)!r}).read_text()
except OSError as e:
    seen = type(e).__name__
print(json.dumps({{"seen": seen}}))
"""
        rr, rw = os.pipe()
        cmd = confine.command(confine.Policy(private=("/tmp",)), [_script(code)], rw)
        cmd[0] = str(venv / "bin" / "python")
        r = subprocess.run(cmd, capture_output=True, text=True, pass_fds=(rw,), timeout=60)
        os.close(rw)
        with os.fdopen(rr) as f:
            prot = json.loads(f.read() or "{}")
        assert r.returncode == 0, r.stderr[-500:]
        assert json.loads(r.stdout.strip().splitlines()[-1]) == {"seen": "FileNotFoundError"}
        assert "private_tmpfs" in prot["active"]
    finally:
        shutil.rmtree(venv, ignore_errors=True)
        shutil.rmtree(secret.parent, ignore_errors=True)


@needs_ns
def test_packages_on_pythonpath_under_a_private_folder_stay_importable(tmp_path):
    """Wheels installed under /tmp (the GPU machine's /tmp/site) must survive the private
    /tmp, read-only: without the bind-back every confined worker failed to start there."""
    site_dir = Path(tempfile.mkdtemp(prefix="confine-site-", dir="/tmp"))
    try:
        (site_dir / "cudaperf_probe_pkg.py").write_text("VALUE = 7\n")
        code = """
import json, pathlib, cudaperf_probe_pkg
try:
    pathlib.Path(cudaperf_probe_pkg.__file__).write_text("pwned")
    wrote = True
except OSError:
    wrote = False
print(json.dumps({"value": cudaperf_probe_pkg.VALUE, "wrote": wrote}))
"""
        env = {
            **os.environ,
            "PYTHONPATH": f"{site_dir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        }
        rr, rw = os.pipe()
        cmd = confine.command(confine.Policy(private=("/tmp",)), [_script(code)], rw)
        r = subprocess.run(cmd, capture_output=True, text=True, pass_fds=(rw,), env=env, timeout=60)
        os.close(rw)
        os.close(rr)
        assert r.returncode == 0, r.stderr[-500:]
        assert json.loads(r.stdout.strip().splitlines()[-1]) == {"value": 7, "wrote": False}
        assert (site_dir / "cudaperf_probe_pkg.py").read_text() == "VALUE = 7\n"
    finally:
        shutil.rmtree(site_dir, ignore_errors=True)
