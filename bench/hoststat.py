"""How fast and how busy the host is, for bench_suite.sh's step logs.

`dynamic` generation (the ablation's bench runs) decodes a 135M model through the eager model,
one Python step and some hundreds of kernel launches per token, so its speed is the host's:
27 of the 28 committed chunks decode to the 1,024-token cap (some reply reaches it), and a
decode step took a median 24 ms (23-53) in a process's later chunk of the same size and
54-112 ms in its first chunk or one of a new size
(bench/results/ablation/bench/decode_steps.json). Two figures tell a slow host from a busy one:

    python bench/hoststat.py speed          # "python loop N ms" (a fixed loop of this interpreter)
    python bench/hoststat.py stat           # the aggregate `cpu` line of /proc/stat, now
    python bench/hoststat.py over "LINE"    # the CPUs' time shares since LINE was read

`over` says how busy all CPUs were between the two readings and how much of their time the
hypervisor gave to other guests (`steal`): a step slow with a low steal share and a fast
loop is not explained by the host.
"""

from __future__ import annotations

import os
import sys
import time

STAT = "/proc/stat"
# /proc/stat's cpu fields, in order (proc(5)); guest time is already counted in user
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
LOOP = 1_000_000


def cpu_line(path: str = STAT) -> str:
    """The aggregate `cpu ` line of /proc/stat (the sum over every CPU, in clock ticks)."""
    with open(path) as f:
        for line in f:
            if line.startswith("cpu "):
                return line.strip()
    raise ValueError(f"{path} has no aggregate 'cpu ' line")


def ticks(line: str) -> dict[str, int]:
    """The named fields of a `cpu ` line; missing trailing fields (old kernels) count 0."""
    parts = line.split()
    if not parts or parts[0] != "cpu":
        raise ValueError(f"not a /proc/stat cpu line: {line!r}")
    values = [int(x) for x in parts[1:]]
    return {name: values[i] if i < len(values) else 0 for i, name in enumerate(FIELDS)}


def shares(before: str, after: str) -> dict[str, float]:
    """Percent of all CPUs' time between two `cpu ` lines: busy (neither idle nor waiting on
    I/O nor stolen), iowait and steal; empty when no tick passed."""
    a, b = ticks(before), ticks(after)
    d = {k: b[k] - a[k] for k in FIELDS}
    if any(v < 0 for v in d.values()):
        raise ValueError("the second /proc/stat reading is older than the first")
    total = sum(d.values())
    if total == 0:
        return {}
    busy = total - d["idle"] - d["iowait"] - d["steal"]
    return {
        "busy": round(100 * busy / total, 1),
        "iowait": round(100 * d["iowait"] / total, 1),
        "steal": round(100 * d["steal"] / total, 1),
    }


def loop_ms(n: int = LOOP) -> float:
    """Milliseconds this interpreter takes for a fixed loop of `n` additions (the best of 3):
    a proxy for the per-token Python overhead of eager decoding."""
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        s = 0
        for i in range(n):
            s += i
        best = min(best, time.perf_counter() - t)
    return round(1000 * best, 1)


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else ""
    try:
        if cmd == "speed":
            print(f"python loop {loop_ms():g} ms")
        elif cmd == "stat":
            print(cpu_line())
        elif cmd == "over" and len(argv) == 2:
            s = shares(argv[1], cpu_line())
            cpus = os.cpu_count()
            print(
                ", ".join(f"{k} {v:g}%" for k, v in s.items()) + f" of {cpus} CPUs"
                if s
                else "no CPU time passed"
            )
        else:
            print("usage: hoststat.py speed | stat | over 'CPU LINE'", file=sys.stderr)
            return 2
    except (OSError, ValueError) as e:
        print(f"hoststat: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
