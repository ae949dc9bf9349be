"""Which confinement step stops CUDA from starting on this machine (device diagnostic).

python3 bench/diag/confine_cuda.py      # one line per variant: cuInit rc, device count
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

_SRC = Path(__file__).resolve().parents[2] / "src/cudaperf/execute/isolation/confine.py"
_spec = importlib.util.spec_from_file_location("confine", _SRC)
c = sys.modules["confine"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(c)

VARIANTS = [
    "none",
    "ns",
    "ns_net",
    "ns_private",
    "ns_private_ro",
    "ns_all_ro_caps",
    "full",
    "ro_except:/dev",
    "ro_except:/proc",
    "ro_except:/sys",
    "ro_except:/dev,/dev/shm,/dev/pts",
    "ro_except:/sys,/sys/fs/cgroup",
    "ro_except:/",
    "ro_only:/dev",
    "ro_only:/proc",
    "ro_only:/sys",
    "ro_only:/",
]


def cuda() -> str:
    lib = ctypes.CDLL("libcuda.so.1")
    rc = lib.cuInit(0)
    n = ctypes.c_int(-1)
    rc2 = lib.cuDeviceGetCount(ctypes.byref(n))
    return f"cuInit={rc} count_rc={rc2} n={n.value}"


def child(v: str) -> None:
    prot = c.Protections()
    pol = c.Policy(
        network=v == "full_but_net",
        private=("/dev/shm",) if v == "full_tmp_kept" else ("/tmp", "/dev/shm"),
    )
    if v.startswith("ro_"):
        c._unshare(pol, prot)
        c._mount(None, "/", None, c._MS_REC | c._MS_PRIVATE, None)
        priv = c._mount_private(pol, prot)
        paths = set(v.split(":", 1)[1].split(","))
        if v.startswith("ro_except"):
            c._readonly(set(priv) | paths, prot)
        else:
            for mp, keep, _ in c._mountinfo():
                if mp in paths:
                    c._mount(None, mp, None, c._MS_REMOUNT | c._MS_BIND | c._MS_RDONLY | keep, None)
    elif v.startswith("ns") or v.startswith("full"):
        if v in ("ns",):
            c._libc.unshare(c._NEWNS)
        elif v.startswith("full"):
            prot = c.apply(pol, quiet=True)
        else:
            c._unshare(pol, prot)
            c._mount(None, "/", None, c._MS_REC | c._MS_PRIVATE, None)
            if v != "ns_net":
                priv = c._mount_private(pol, prot)
                if v.endswith("ro") or v.endswith("caps"):
                    c._readonly(set(priv), prot)
                if v.endswith("caps"):
                    c._drop_privileges(prot)
    elif v == "caps_only":
        c._drop_privileges(prot)
    elif v == "seccomp_only":
        c._seccomp(prot)
    try:
        r = cuda()
    except Exception as e:  # noqa: BLE001
        r = f"error {e}"
    print(json.dumps({"variant": v, "cuda": r, "active": prot.active, "missing": prot.missing}))


def main() -> None:
    if len(sys.argv) > 1:
        child(sys.argv[1])
        return
    for cmd in (
        "ls -la /dev | grep -i nvidia",
        "ls -la /tmp /dev/shm | head -20",
        "env | grep -i -E 'cuda|nvidia|mps'",
        "cat /proc/self/mountinfo | head -40",
        "nvidia-smi -q | grep -i -E 'compute mode|mps|mig mode' | head",
        "uname -a",
        "id",
    ):
        print("$", cmd, flush=True)
        subprocess.run(cmd, shell=True, timeout=20)
    for v in VARIANTS:
        try:
            p = subprocess.run(
                [sys.executable, __file__, v], capture_output=True, text=True, timeout=40
            )
            print(p.stdout.strip() or f"{v}: rc={p.returncode} {p.stderr[-300:]}", flush=True)
        except subprocess.TimeoutExpired:
            print(f"{v}: timeout", flush=True)


if __name__ == "__main__":
    main()
