"""Kernel isolation for processes that run candidate code: namespaces, read-only host, seccomp.

`apply(policy)` confines the calling process (call it first thing in a fresh, single-threaded
process; `command(...)` builds the argv that does this and then runs a Python module or file,
or execs any program: the compilers):

1. a new mount namespace (a user namespace too when not root), all mounts private;
2. an empty private tmpfs on every `Policy.private` path (`/tmp`, `/dev/shm`, the evaluator's
   cache dir): other candidates' folders and the evaluator's files are not visible there, and
   what is written there never reaches the host;
3. `Policy.writable` / `Policy.readable` host paths bound back at their own path;
4. every other mount remounted read-only (device nodes such as /dev/nvidia* stay usable:
   a read-only mount forbids changing files, not writing to a device), except procfs: the
   CUDA driver writes to /proc when it starts (`cuInit` fails with 304,
   CUDA_ERROR_OPERATING_SYSTEM, on an H200 under a read-only /proc: bench/diag/confine_cuda.py),
   and with every capability dropped a process can write only its own /proc entries anyway;
5. a new network namespace (no interface but a down loopback) unless `Policy.network`;
6. no new privileges (`PR_SET_NO_NEW_PRIVS`), not dumpable (other processes of the same user
   cannot read its memory or its `/proc/<pid>/root`), every capability dropped (so root inside
   cannot remount anything read-write), and a seccomp filter that refuses mount, unshare,
   setns, ptrace, process_vm_*, bpf, kexec, module loading and namespace flags on clone.

Uses only the standard library and `ctypes` (works as root on a machine where nothing can be
installed; Python 3.11 has no `os.unshare`). Every step that the kernel refuses is skipped and
named in the returned `Protections` (logged once per process); nothing raises. Landlock is not
used: its ABI differs between kernels, and the read-only mount view already refuses writes.
This module imports nothing from cudaperf, so `command` can load it before any other import.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import platform
import resource
import signal
import struct
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["Policy", "Protections", "apply", "command", "limit_cpu", "log_once"]

_NEWNS, _NEWUSER, _NEWNET = 0x00020000, 0x10000000, 0x40000000
_NS_FLAGS = 0x7E020000  # every CLONE_NEW* flag (ns, cgroup, uts, ipc, user, pid, net)
_MS = {
    "ro": 1,
    "nosuid": 2,
    "nodev": 4,
    "noexec": 8,
    "noatime": 1024,
    "nodiratime": 2048,
    "relatime": 1 << 21,
}
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_SECCOMP, _PR_SET_NO_NEW_PRIVS = 4, 24, 22, 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4

# Syscalls refused with EPERM (seccomp): ways to undo the mounts, leave the namespaces, read
# other processes, or reach the kernel. clone is checked for namespace flags; clone3 answers
# ENOSYS so that libc falls back to clone (its flags sit in memory seccomp cannot read).
_DENY = (
    "mount umount2 pivot_root chroot unshare setns ptrace process_vm_readv "
    "process_vm_writev kexec_load kexec_file_load init_module finit_module delete_module "
    "bpf keyctl add_key request_key swapon swapoff reboot open_by_handle_at "
    "name_to_handle_at open_tree move_mount fsopen fsconfig fsmount fspick mount_setattr "
    "userfaultfd"
).split()
_NR = {
    "x86_64": (
        0xC000003E,
        dict(
            mount=165,
            umount2=166,
            pivot_root=155,
            chroot=161,
            unshare=272,
            setns=308,
            ptrace=101,
            process_vm_readv=310,
            process_vm_writev=311,
            kexec_load=246,
            kexec_file_load=320,
            init_module=175,
            finit_module=313,
            delete_module=176,
            bpf=321,
            keyctl=250,
            add_key=248,
            request_key=249,
            swapon=167,
            swapoff=168,
            reboot=169,
            open_by_handle_at=304,
            name_to_handle_at=303,
            open_tree=428,
            move_mount=429,
            fsopen=430,
            fsconfig=431,
            fsmount=432,
            fspick=433,
            mount_setattr=442,
            userfaultfd=323,
            clone=56,
            clone3=435,
        ),
    ),
    "aarch64": (
        0xC00000B7,
        dict(
            mount=40,
            umount2=39,
            pivot_root=41,
            chroot=51,
            unshare=97,
            setns=268,
            ptrace=117,
            process_vm_readv=270,
            process_vm_writev=271,
            kexec_load=104,
            kexec_file_load=294,
            init_module=105,
            finit_module=273,
            delete_module=106,
            bpf=280,
            keyctl=219,
            add_key=217,
            request_key=218,
            swapon=224,
            swapoff=225,
            reboot=142,
            open_by_handle_at=265,
            name_to_handle_at=264,
            open_tree=428,
            move_mount=429,
            fsopen=430,
            fsconfig=431,
            fsmount=432,
            fspick=433,
            mount_setattr=442,
            userfaultfd=282,
            clone=220,
            clone3=435,
        ),
    ),
}


@dataclass(frozen=True)
class Policy:
    """What a confined process sees. Paths are absolute; missing ones are skipped (noted)."""

    private: tuple[str, ...] = ("/tmp", "/dev/shm")  # each gets an empty private tmpfs
    writable: tuple[str, ...] = ()  # host paths (under a private one or not) left writable
    readable: tuple[str, ...] = ()  # host paths under a private one, bound back read-only
    network: bool = False  # False: a new, empty network namespace
    tmpfs_mb: int = 2048  # size limit of each private tmpfs (RAM is used only as written)
    chdir: str | None = None  # working directory after confinement
    python: bool = True  # the process goes on running Python: its installation and import
    # folders under a private path are bound back read-only (not needed before an exec)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Policy:
        d = json.loads(text)
        for k in ("private", "writable", "readable"):
            d[k] = tuple(d.get(k, ()))
        return cls(**d)


@dataclass
class Protections:
    """Which protections are active in the confined process, and why any is missing."""

    active: list[str] = field(default_factory=list)  # e.g. mount_ns, readonly_root, seccomp
    missing: dict[str, str] = field(default_factory=dict)  # protection -> the kernel's answer

    def summary(self) -> str:
        miss = "; ".join(f"{k}: {v}" for k, v in self.missing.items()) or "none"
        return f"active: {', '.join(self.active) or 'none'}; missing: {miss}"


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]


def _err() -> str:
    e = ctypes.get_errno()
    return f"{os.strerror(e)} (errno {e})"


def _mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str | None) -> str:
    """'' on success, else the error text."""
    enc = [s.encode() if s is not None else None for s in (src, dst, fstype, data)]
    if _libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) == 0:
        return ""
    return _err()


def _unshare(p: Policy, prot: Protections) -> bool:
    """New mount (+user when not root) (+net) namespaces; False when none could be made."""
    uid, gid = os.geteuid(), os.getegid()
    user = _NEWUSER if uid != 0 else 0
    net = 0 if p.network else _NEWNET
    for flags in (_NEWNS | user | net, _NEWNS | user):
        if _libc.unshare(flags) == 0:
            break
        why = _err()
    else:
        prot.missing["mount_ns"] = f"unshare(CLONE_NEWNS) refused: {why}"
        return False
    prot.active.append("mount_ns")
    if user:
        try:
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
            Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
            prot.active.append("user_ns")
        except OSError as e:
            prot.missing["user_ns"] = f"uid map not written: {e}"
    if net and flags & net:
        prot.active.append("net_ns")
    elif net:
        prot.missing["net_ns"] = f"unshare(CLONE_NEWNET) refused: {why}"
    return True


def _mount_private(p: Policy, prot: Protections) -> list[str]:
    """An empty tmpfs on each private path (nested ones are created inside the outer tmpfs)."""
    done: list[str] = []
    for path in sorted(set(p.private), key=len):
        if not os.path.isdir(path):
            if not any(path.startswith(d + "/") for d in done):
                continue  # never create a mount point on the host's own filesystem
            os.makedirs(path, exist_ok=True)
        mode = "1777" if path in ("/tmp", "/dev/shm") else "0755"
        err = _mount("tmpfs", path, "tmpfs", 2 | 4, f"size={p.tmpfs_mb}m,mode={mode}")
        if err:
            prot.missing[f"private:{path}"] = err
        else:
            done.append(path)
    if done:
        prot.active.append("private_tmpfs")
    return done


def _bind_back(fds: dict[str, int], private: list[str], prot: Protections) -> None:
    """Bind each kept host path (opened before the tmpfs covered it) at its own path."""
    for path, fd in sorted(fds.items(), key=lambda kv: len(kv[0])):
        if not os.path.lexists(path):
            if not any(path.startswith(d + "/") for d in private):
                continue
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                Path(path).touch()
        err = _mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC, None)
        if err:
            prot.missing[f"bind:{path}"] = err
        os.close(fd)


def _mountinfo() -> list[tuple[str, int, str]]:
    """(mount point, flags to keep, filesystem type) of every mount, in mount order."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        mp = parts[4].encode().decode("unicode_escape")
        keep = sum(_MS.get(o, 0) for o in parts[5].split(",") if o != "ro")
        fstype = parts[parts.index("-") + 1] if "-" in parts[6:] else ""
        out.append((mp, keep, fstype))
    return out


def _readonly(rw: set[str], prot: Protections, hidden: set[str] = frozenset()) -> None:
    """Remount every mount read-only except the private tmpfs, the writable binds, procfs
    (the CUDA driver needs a writable /proc to start; see the module docstring) and the
    `hidden` ones (covered by a private tmpfs: no path reaches them any more)."""
    failed = []
    for mp, keep, fstype in _mountinfo():
        if mp in rw or fstype == "proc" or mp in hidden:
            continue
        err = _mount(None, mp, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | keep, None)
        if err and mp == "/":
            prot.missing["readonly_root"] = f"remounting / read-only refused: {err}"
            return
        if err:
            failed.append(mp)
    prot.active.append("readonly_root")
    if failed:
        prot.missing["readonly_submounts"] = f"{len(failed)} left as they were: {failed[:3]}"


def _drop_privileges(prot: Protections) -> None:
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
        prot.active.append("no_new_privs")
    else:
        prot.missing["no_new_privs"] = _err()
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2): all empty
    if _libc.capset(header, data) == 0:
        prot.active.append("no_capabilities")
    else:
        prot.missing["no_capabilities"] = _err()


def _seccomp_program() -> bytes | None:
    """The BPF filter for this machine's architecture (None: unknown architecture)."""
    if platform.machine() not in _NR:
        return None
    arch, nr = _NR[platform.machine()]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, errno_ = 0x7FFF0000, 0x00050000
    # (code, jump-if-true label, jump-if-false label, k); labels resolve to relative offsets.
    prog: list[tuple[int, str | None, str | None, int]] = [
        (ld, None, None, 4),  # seccomp_data.arch
        (jeq, None, "deny", arch),
        (ld, None, None, 0),  # seccomp_data.nr
    ]
    if platform.machine() == "x86_64":
        prog.append((jge, "deny", None, 0x40000000))  # the x32 ABI
    prog += [(jeq, "deny", None, nr[n]) for n in _DENY]
    prog += [(jeq, "clone", None, nr["clone"]), (jeq, "enosys", None, nr["clone3"])]
    labels = {"clone": len(prog) + 1, "enosys": len(prog) + 4, "deny": len(prog) + 5}
    prog += [
        (ret, None, None, allow),
        (ld, None, None, 16),  # clone's flags (low 32 bits of the first argument)
        (jset, "deny", None, _NS_FLAGS),
        (ret, None, None, allow),
        (ret, None, None, errno_ | 38),  # ENOSYS
        (ret, None, None, errno_ | 1),  # EPERM
    ]

    def off(i: int, label: str | None) -> int:
        return 0 if label is None else labels[label] - i - 1

    return b"".join(
        struct.pack("=HBBI", code, off(i, jt), off(i, jf), k)
        for i, (code, jt, jf, k) in enumerate(prog)
    )


def _seccomp(prot: Protections) -> None:
    code = _seccomp_program()
    if code is None:
        prot.missing["seccomp"] = f"no syscall table for {platform.machine()}"
        return
    buf = ctypes.create_string_buffer(code, len(code))
    fprog = struct.pack("=HxxxxxxQ", len(code) // 8, ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog, len(fprog))
    if _libc.prctl(_PR_SET_SECCOMP, 2, ctypes.addressof(fbuf), 0, 0) == 0:
        prot.active.append("seccomp")
    else:
        prot.missing["seccomp"] = _err()


_logged: set[str] = set()


def log_once(where: str, prot: Protections | dict) -> None:
    """Log which protections `where` runs under, once per distinct summary (a warning when
    there is no mount namespace, i.e. no filesystem isolation)."""
    p = prot if isinstance(prot, Protections) else Protections(**prot) if prot else Protections()
    key = f"{where}: {p.summary()}"
    if key in _logged:
        return
    _logged.add(key)
    level = logging.WARNING if "mount_ns" not in p.active else logging.INFO
    log.log(level, "candidate sandbox of the %s: %s", where, p.summary())


def _import_dirs(private: tuple[str, ...]) -> list[str]:
    """What the confined interpreter needs that a private tmpfs would hide, bound back
    read-only: its own installation (a venv or a checkout under /tmp), cudaperf's package
    folder, and the folders it imports from (PYTHONPATH, site-packages; e.g. wheels installed
    into /tmp/site). The start folder (sys.path[0]) is not among them."""
    import site

    own = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    package = str(Path(__file__).resolve().parents[2])  # cudaperf itself
    env = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    paths = [*own, package, *env, *site.getsitepackages()]
    out = []
    for p in paths:
        a = os.path.abspath(p) if p else ""
        if (
            a
            and os.path.isdir(a)
            and any(a == d or a.startswith(d.rstrip("/") + "/") for d in private)
        ):
            out.append(a)
    return list(dict.fromkeys(out))


def limit_cpu(seconds: int) -> None:
    """Let this process use at most `seconds` more CPU-seconds (RLIMIT_CPU, soft limit: the
    kernel sends SIGXCPU, then SIGKILL at the hard limit), never above the hard limit."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime) + seconds
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def limit_output(mb: int) -> None:
    """Let this process write files of at most `mb` MiB (RLIMIT_FSIZE, soft and hard, so it
    cannot be raised again; SIGXFSZ kills at the limit). For a candidate's process only, before
    its code loads: the limit also applies to `ftruncate`, so a trusted process under it could
    not size the shared call segments that carry a large config's arrays (`c_proc`)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it; the limit must kill
    size = int(mb) << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def apply(policy: Policy, quiet: bool = False) -> Protections:
    """Confine this process (see the module docstring); never raises. Call it before any
    thread starts. Returns what is active; unless `quiet`, the summary is logged once."""
    prot = Protections()
    if _unshare(policy, prot):
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE, None)
        fds = {}  # opened in the new namespace (a bind source must be one of its mounts)
        own = _import_dirs(policy.private) if policy.python else []
        for path in [*policy.writable, *policy.readable, *own]:
            try:
                fds[os.path.abspath(path)] = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError as e:
                prot.missing[f"bind:{path}"] = str(e)
        before = [mp for mp, _, _ in _mountinfo()]
        private = _mount_private(policy, prot)
        _bind_back(fds, private, prot)
        # mounts under a private tmpfs that nothing was bound back to are out of reach now
        hidden = {
            m
            for m in before
            if m not in fds and any(m.startswith(d.rstrip("/") + "/") for d in private)
        }
        _readonly({*private, *(os.path.abspath(w) for w in policy.writable)}, prot, hidden)
    else:
        prot.missing.setdefault("readonly_root", "no mount namespace")
    if policy.chdir:
        os.chdir(policy.chdir)
    _drop_privileges(prot)
    _seccomp(prot)
    if not quiet:
        log_once("process", prot)
    return prot


_BOOT = (
    "import importlib.util as u, sys; s = u.spec_from_file_location('cudaperf_confine', "
    "sys.argv[1]); m = u.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m); "
    "sys.exit(m.main(sys.argv[2:]))"
)


def command(policy: Policy | None, target: list[str], report_fd: int | None = None) -> list[str]:
    """argv that confines a fresh Python per `policy` (None: not at all), then runs `target`:
    ["-m", module, *args] or [path.py, *args] in that interpreter, or ["--exec", program,
    *args]: execs `program` (looked up on PATH) in its place, so the program and everything it
    starts stay confined (namespaces, mounts, seccomp and no_new_privs survive exec; a
    program that cannot be started exits 127). With `report_fd`, the `Protections` go there
    as one JSON line (keep that fd in `pass_fds`)."""
    rep = [] if report_fd is None else ["--report", str(report_fd)]
    pol = policy.to_json() if policy is not None else "null"
    return [sys.executable, "-c", _BOOT, __file__, pol, *rep, "--", *target]


def main(argv: list[str]) -> int:
    """`command`'s entry point: confine, report, then run the target in this interpreter."""
    import runpy

    policy = Policy.from_json(argv[0]) if argv[0] != "null" else None
    rest = argv[1:]
    report = None
    if rest[:1] == ["--report"]:
        report, rest = int(rest[1]), rest[2:]
    rest = rest[1:] if rest[:1] == ["--"] else rest
    quiet = report is not None  # the parent logs what the report says
    prot = (
        apply(policy, quiet)
        if policy is not None
        else Protections(missing={"all": "not requested"})
    )
    if report is not None:
        with os.fdopen(report, "w") as f:
            f.write(json.dumps(asdict(prot)) + "\n")
    if rest[0] == "--exec":
        try:
            os.execvp(rest[1], rest[1:])
        except OSError as e:
            print(f"cannot run {rest[1]}: {e}", file=sys.stderr)
            return 127
    if rest[0] == "-m":
        sys.argv = [rest[1], *rest[2:]]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(rest)
        runpy.run_path(rest[0], run_name="__main__")
    return 0
