"""The next lease of the GPU machine for the ablation, from committed files only: which run's
chunk to train and which bench runs to continue in the spare minutes (the first one left,
and the next one if the first ends with a whole chunk's time to spare), in the order
PROTOCOL.md's session-30 note (6) fixes, with the commands to run here before, on the
machine (call by call, back to back), and here after (merge_chunk.py, merge_bench.py).

    python bench/ablation/lease_plan.py            # the plan, printed
    python bench/ablation/lease_plan.py --json     # the same as JSON
    python bench/ablation/lease_plan.py --left S   # S device s left: train only if a chunk fits

The order: (a) one training chunk, the unfinished run first, else the next run not started
(seed 0 of both arms, then seeds 1 and 2, arm A before arm B of a seed); (b) after it, the
turn-1 bench on the primary subset of each finished run, then the turn-1 test-family benches;
(c) the 4-turn runs on the primary subset, the SFT start's and seed 0's first. A run resumes
from its newest checkpoint in history, which must be the step its steps.jsonl reached (else
the plan says so: the steps after it were trained but not kept, and train again). A lease
that cannot train is also told what to run if its machine is an H200, where no bench run of
the ablation may go (BENCH_CARD): issue #42's scripted references. Nothing is run here.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import status  # noqa: E402  (bench/ablation/status.py: the board of committed files)

from cudaperf.report.run import chunk_seconds  # noqa: E402  (status.py put src/ on the path)

CHUNK = 15  # PROTOCOL.md, session-26 note (6) as amended: 15-step chunks in every run
# Steps where both arms of a seed also stop and resume (PROTOCOL.md, session-39 note (5)): a
# run's task order follows where its processes resumed (TRL's RepeatSampler draws one
# permutation per epoch from a generator seeded once per process; seed 0's arms, resumed at
# 15, 30 and 45, saw the same tasks at all 60 steps), and arm A seed 1 resumed at 40 too
EXTRA_STOPS = {1: (40,)}
RANKER = "bench/ablation/ranker/feature_ranker.json"  # arm A's ranker (PROTOCOL 2026-12-05)
WEIGHTS = "bench/results/ablation/weights"
BENCH_ROOT = "bench/results/ablation/bench"
ORDER = [f"abl_{arm}_s{seed}" for seed in status.SEEDS for arm in status.ARMS]
SETUP = [  # a fresh checkout: the venv, the wheels and the GGUF's parts
    "bash scripts/setup.sh    # if .venv is missing",
    "bash scripts/device_wheels.sh    # if .whl is missing",
    "bash bench/train_parts.sh    # if .models/smollm2.gguf.xz.part00... are missing",
]
MIB = 1 << 20
CALL_MIB = 63  # what one call may carry with the tree: the device's 64 MiB, 1 MiB spare
PARTS = ".models/smollm2.gguf.xz.part"  # bench/train_parts.sh's pieces of the packed GGUF
BENCH_CARD = "H100"  # every committed bench run's card; `bench compare` refuses another GPU
SETUP_S = 60  # the wheel and GGUF calls of a lease (session 37: 17 to 18 s each, held time)
CHUNK_MARGIN_S = 150  # bgstart's GRPO_BUDGET is the seconds left less 120; 30 s for its call
# Issue #42's reference runs on the H200 (scripted naive and best: no model, no GGUF) on the
# ablation's two fixed subsets: what a lease given an H200 runs when it cannot train, since
# no bench run of the ablation may run on that card (BENCH_CARD)
REFERENCE_ROOT = "bench/results/bench/h200"
REFERENCE_JOB = "h200ref"
REFERENCE_STEPS = ("heldout/naive", "heldout/best", "train-unseen/naive", "train-unseen/best")
# A lease runs the first bench job left and, when that one ends early enough, the next one:
# session 42's job finished its run's last chunk but one with 140 device s left, and a job
# that finishes a run (12 tasks, one chunk) leaves most of a lease idle
BENCHES_PER_LEASE = 2
BATCH_TASKS = 16  # bench/bench_suite.sh's BATCH_TASKS default: the tasks of a whole chunk
DEADLINE_MARGIN_S = 100  # _suite_job's DEADLINE: the device seconds left less 100
BENCH_START_S = 30  # a job's restore, imports and model load before its first chunk (12 s in
# session 42's job)
# Once, on the first H100 lease that trains: bench/decode_warm.py, the probe of why a process's
# first `dynamic` chunk decodes at about 3x a later chunk's ms a step (PROTOCOL.md, session-45
# note (3)). Every bench job is a new process, so its first chunk pays that; if the allocator is
# the cause, a setting that changes no token could cut every later bench job. About 200 s: two
# processes, each 2 calls of 64 rows and one of 48, 512 steps each
PROBE_DIR = "bench/results/decode_warm"
PROBE_S = 280
PROBE_CMD = (
    "source scripts/device_env.sh >/dev/null 2>&1 && "
    "export PYTHONPATH=/root/smollm2:$PYTHONPATH && "
    "timeout 135 python bench/decode_warm.py --new 512 --then-batch 48 "
    "--out $OUT/warm_default.json; "
    "timeout 135 python bench/decode_warm.py --new 512 --then-batch 48 --expandable "
    "--out $OUT/warm_expandable.json"
)


def tree_bytes(root: Path) -> int | None:
    """What every call carries besides its `carry`: tracked and untracked-not-ignored files
    (the device README), in bytes; None where `root` is not a git checkout."""
    try:
        out = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    files = [root / n for n in out.decode().split("\0") if n]
    return sum(f.stat().st_size for f in files if f.is_file() and not f.is_symlink())


def carried_bytes(root: Path, path: str) -> int | None:
    """The size of a carried path here (a file, or a folder's files); None if absent."""
    f = root / path
    if f.is_file():
        return f.stat().st_size
    if f.is_dir():
        return sum(g.stat().st_size for g in f.rglob("*") if g.is_file())
    return None


def machine_calls(root: Path, tree: int | None) -> list[tuple[list[str], str]]:
    """Every lease's first calls: the wheels and each part of the GGUF that
    bench/train_parts.sh made here (as many as fit beside the tree, at least two), one call
    per part: probe parks part00 and installs the wheels (in a call of their own when both
    would not fit beside the tree), part parks a middle one, model joins them with the last."""
    found = sorted(str(f.relative_to(root)) for f in root.glob(PARTS + "*"))
    parts = found if len(found) >= 2 else [f"{PARTS}00", f"{PARTS}01"]
    probe = "PROBE_TESTS=0 timeout 120 bash bench/train_h200.sh probe"
    first = [".whl", parts[0]]
    sizes = [carried_bytes(root, c) for c in first]
    calls: list[tuple[list[str], str]]
    if tree is None or None in sizes or tree + sum(sizes) > CALL_MIB * MIB:
        calls = [([".whl"], "source scripts/device_env.sh"), ([parts[0]], probe)]
    else:
        calls = [(first, probe)]
    calls += [([part], "timeout 60 bash bench/train_h200.sh part") for part in parts[1:-1]]
    calls.append(([parts[-1]], "timeout 150 bash bench/train_h200.sh model"))
    return calls


def oversize(root: Path, tree: int | None, calls: list[tuple[list[str], str]]) -> list[str]:
    """A line for each call whose carry, with the tree, is over what one call takes."""
    if tree is None:
        return []
    out = []
    for carry, cmd in calls:
        sizes = [carried_bytes(root, c) for c in carry]
        total = tree + sum(s for s in sizes if s is not None)
        if carry and total > CALL_MIB * MIB:
            out.append(
                f"carry {' '.join(carry)} ({cmd.split('    #')[0][:60]}...): {total / MIB:.1f} MiB "
                f"with the tree ({tree / MIB:.1f} MiB), over {CALL_MIB} MiB: the call is refused; "
                "cut the parts smaller (bash bench/train_parts.sh) or move large files out of "
                "the tree"
            )
    return out


def _train(row: dict, root: Path) -> dict:
    """The chunk of `row`'s run: its restore, its bgstart and bgwatch, its merge."""
    run, steps, kept = row["run"], row["steps"], row["checkpoint"] or 0
    arm, seed = row["arm"], row["seed"]
    to = min((kept // CHUNK + 1) * CHUNK, status.STEPS)
    to = min([s for s in EXTRA_STOPS.get(seed, ()) if kept < s < to], default=to)
    # a chunk that ends at an extra stop names its last step; every other, CHUNK and TOTAL
    span = f"CHUNK={CHUNK} TOTAL={status.STEPS}" if to % CHUNK == 0 else f"STEPS={to}"
    env = (
        f"RUN={run} PRESET={arm} SEED={seed} NGEN=8 NGROUPS=4 POOLFITS=1 {span} "
        f"RANKER={RANKER} GENWEIGHTS=merged GRPO_BUDGET=<device s left - 120>"
    )
    if kept:
        here = f"bash bench/ablation/restore_weights.sh {run}_ckpt{kept} grpo_ckpt"
        carry, first = ".models/grpo_ckpt", f"RUN={run} bash bench/train_h200.sh restore"
    else:
        here = "bash bench/ablation/restore_weights.sh sft_pairs_s0 sft_final"
        carry, first = ".models/sft_final", "bash bench/train_h200.sh restoresft"
    warn = None
    if steps != kept:
        warn = (
            f"{run}: steps.jsonl reached step {steps} but the newest checkpoint in history is "
            f"{kept}; the chunk trains steps {kept + 1}-{to} again from checkpoint {kept} and "
            "merge_chunk.py refuses it until steps.jsonl is cut back to step "
            f"{kept} (a person's decision, said in PROTOCOL.md)"
        )
    return {
        "what": f"train {run} steps {kept + 1}-{to}",
        "run": run,
        "from_step": kept,
        "to_step": to,
        "here": here,
        "calls": [
            ([carry], f"{first} && {env} bash bench/train_h200.sh bgstart"),
            (
                [],
                f"RUN={run} WATCH_S=540 bash bench/train_h200.sh bgwatch    # back to back "
                "until it brings grpo_report.json",
            ),
        ],
        "after": f"python bench/ablation/merge_chunk.py --run {run} --lease "
        f"{_next_lease(row, root)} --watch <each bgwatch call's folder, in order> "
        "--env <the probe call's env.txt>",
        "recover": (
            f"If a bgwatch says '{run} DIED without a report' (no grpo_report.json): "
            "on the same machine, give the bgstart call again without its restore (it resumes "
            "the newest checkpoint; what the dead process logged after it goes to "
            "after-checkpoint-N/); on a new machine, here `rm -rf .models/grpo_ckpt && cp -r "
            "<that watch's folder>/ckpt .models/grpo_ckpt`, then the setup calls and the "
            "restore and bgstart call again. Merge with every watch folder of both processes, "
            "in order, and say in PROTOCOL.md where the optimizer restarted."
        ),
        "warning": warn,
    }


def _next_lease(row: dict, root: Path) -> int:
    """The lease number of the run's next chunk: one more than its committed reports."""
    folder = root / status.RESULTS / row["run"]
    return len(list(folder.glob("grpo_report_lease*.json"))) + 1


def _suite_job(job: str, root: str, env: str, steps: str, carry: list[str], first: str) -> dict:
    """A `device_bg.sh` job of `bench_suite.sh ablation STEPS` into `root`: its start call
    (carrying `carry`, after `first`, with `env`), the watch call, and the merge after.

    BUDGET_S as well as DEADLINE: bench_suite's budget defaults to 540 s (one device call) and
    DEADLINE only lowers it, so a job meant to span several watch calls stopped at 540 s
    (session 44: stopped at 41 of 60 tasks after 440 of the 980 s its DEADLINE allowed)."""
    start = (
        f"{first}source scripts/device_env.sh >/dev/null 2>&1 && {env}"
        f"DEADLINE=$(( $(date +%s) + <device s left - 100> )) BUDGET_S=<device s left - 100> "
        f"ROOT={root} "
        f"BG_BUDGET_S=<device s left - 70> bash bench/device_bg.sh start {job} -- "
        f"bash bench/bench_suite.sh ablation {steps}"
    )
    watch = (
        f"WATCH_S=<540, or device s left - 30 if less> bash bench/device_bg.sh watch "
        f"{job}    # back to back until it ends"
    )
    return {
        "calls": [(carry, start), ([], watch)],
        "after": f"python bench/ablation/merge_bench.py --job <the last watch call's folder>/"
        f"bg_{job}.tar.gz --into {root} --log <that folder>/bg_{job}.log --log-name "
        f"bg_{job}_session<N>.log",
    }


def _bench(row: dict, key: str, prog: str) -> dict:
    """The bench job that continues `key` (mode/subset) of `row`'s run or of the SFT start."""
    run, mode, subset = row["run"], *key.split("/")
    sft = run == status.START
    name = "sft" if sft else "grpo"
    short = {"train-unseen": "tu", "heldout": "tf"}.get(subset, subset)  # tf: test families
    job = f"{'sft' if sft else run.removeprefix('abl_')}_{short}"
    job += "_t4" if mode == status.T4 else ""
    root = f"{BENCH_ROOT}/{run}"
    if sft:
        here = "bash bench/ablation/restore_weights.sh sft_pairs_s0 sft_final"
        carry, first, var = (
            ".models/sft_final",
            "bash bench/train_h200.sh restoresft",
            "SFT_ADAPTER=/root/work/sft/final",
        )
    else:
        dest = f"ckpt_{run.removeprefix('abl_')}"
        here = f"bash bench/ablation/restore_weights.sh {run}_ckpt{status.STEPS} {dest}"
        carry = f".models/{dest}"
        first = f"CKPT=.models/{dest} RUN={run} bash bench/train_h200.sh restore"
        var = f"GRPO_ADAPTER=/root/work/{run}/checkpoint-{status.STEPS}"
    turns = "TURNS=4 TURNS_FROM=1 " if mode == status.T4 else ""
    env = f"export PYTHONPATH=/root/smollm2:$PYTHONPATH && {turns}{var} WALL_X=1 "
    return {
        "what": f"bench {run} {key} ({prog} tasks finished)",
        "run": run,
        "key": key,
        "here": here,
        **_suite_job(job, root, env, f"{subset}/{name}", [carry], f"{first} && "),
    }


def bench_chunk_s(root: Path, key: str) -> float | None:
    """Seconds a whole chunk of `key` (mode/subset) is expected to take, from every committed
    bench run of that key (`report.run.chunk_seconds` over their `timing.jsonl` lines: the
    slowest seconds per task); None before one completed."""
    lines = []
    for t in sorted((root / status.RESULTS / "bench").glob(f"*/{key}/*/timing.jsonl")):
        lines += status.read_timing(t)
    return chunk_seconds(lines, BATCH_TASKS)


def next_bench_needs(root: Path, bench: dict) -> tuple[float | None, str]:
    """The device seconds that must be left when the job before it ends for `bench` to start
    (a whole chunk, the DEADLINE margin and the job's start), with the line that says so."""
    chunk = bench_chunk_s(root, bench["key"])
    if chunk is None:
        return None, (
            f"only if the job above ended with time to spare: no committed chunk of {bench['key']} "
            "says what one costs"
        )
    need = chunk + DEADLINE_MARGIN_S + BENCH_START_S
    return need, (
        f"only if {need:.0f} device s or more are left when the job above ends (a whole "
        f"{BATCH_TASKS}-task chunk of {bench['key']}, {chunk:.0f} s at the slowest committed "
        f"rate, + {DEADLINE_MARGIN_S} s DEADLINE margin + {BENCH_START_S} s start); else stop"
    )


def reference(root: Path) -> dict | None:
    """The job that continues #42's H200 reference runs, None once all are finished."""
    runs = root / REFERENCE_ROOT / "ablation"
    prog = {st: status.bench_progress(runs / st) for st in REFERENCE_STEPS}
    left = [st for st in REFERENCE_STEPS if not status.finished_all(prog[st])]
    if not left:
        return None
    return {
        "what": "#42's reference runs on the H200: "
        + ", ".join(f"{st} ({prog[st]})" for st in left),
        **_suite_job(REFERENCE_JOB, REFERENCE_ROOT, "", " ".join(left), [".whl"], ""),
    }


def slowest_chunk(root: Path) -> float | None:
    """The most seconds a committed training process took (`grpo_report_lease*.json`)."""
    seconds = [s for _, s in status.lease_reports(root)]
    return max(seconds) if seconds else None


def chunk_fits(left: float | None, root: Path) -> tuple[bool, str]:
    """Whether a 15-step chunk fits `left` device seconds (counted before the setup calls):
    the setup calls (SETUP_S), the slowest committed chunk and the bgstart margin (the chunk's
    wall budget is the seconds left less 120, and a call starts in seconds). A chunk the wall
    budget stops early moves the step where the optimizer restarts (PROTOCOL.md, session-26
    note (6) as amended), so a lease too short for the slowest chunk runs benches instead."""
    if left is None:
        return True, ""
    slow = slowest_chunk(root)
    if slow is None:
        return True, ""
    need = SETUP_S + slow + CHUNK_MARGIN_S
    if left >= need:
        return True, ""
    return False, (
        f"{left:.0f} s left is under a chunk's {need:.0f} s (setup {SETUP_S} s + the slowest "
        f"committed chunk {slow:.1f} s + {CHUNK_MARGIN_S} s): no training this lease, "
        "bench runs only (a chunk cut by its wall budget moves the optimizer's restart)"
    )


def probe(root: Path) -> dict | None:
    """The decode_warm probe's call, until its results are committed under PROBE_DIR."""
    if (root / PROBE_DIR / "warm_default.json").is_file():
        return None
    return {
        "what": f"decode_warm (once; about {PROBE_S - 80} s, after the training chunk "
        "and before the bench jobs, which take the seconds left)",
        "calls": [([], f"timeout {PROBE_S} bash -c '{PROBE_CMD}'")],
        "after": f"mkdir -p {PROBE_DIR} && cp <its folder>/warm_*.json {PROBE_DIR}/",
    }


def plan(rows: list[dict], root: Path, left: float | None = None) -> dict:
    by_run = {r["run"]: r for r in rows}
    train = None
    unfinished = [r for r in ORDER if 0 < by_run[r]["steps"] < status.STEPS]
    fresh = [r for r in ORDER if by_run[r]["steps"] == 0]
    fits, why = chunk_fits(left, root)
    if (unfinished or fresh) and fits:
        train = _train(by_run[(unfinished or fresh)[0]], root)
    benches = []
    finished = [by_run[r] for r in ORDER if by_run[r]["steps"] >= status.STEPS]
    start = by_run[status.START]
    t1 = [k for k in start["bench"] if not k.startswith(status.T4 + "/")]
    t4 = [k for k in start["bench"] if k.startswith(status.T4 + "/")]
    for key in t1:  # (b): the primary subset's first (BENCHES lists it first), run by run
        for row in finished:
            if not status.finished_all(row["bench"][key]):
                benches.append(_bench(row, key, row["bench"][key]))
    seed0 = [r for r in finished if r["seed"] == 0]
    for key in t4:  # (c): the SFT start's and seed 0's first, then the other seeds'
        for row in [start, *seed0, *[r for r in finished if r["seed"] != 0]]:
            if not status.finished_all(row["bench"][key]):
                benches.append(_bench(row, key, row["bench"][key]))
    for b in benches[1:BENCHES_PER_LEASE]:
        b["needs_left_s"], b["when"] = next_bench_needs(root, b)
    tree = tree_bytes(root)
    machine = machine_calls(root, tree)
    warm = probe(root) if train and benches else None  # a lease that trains has the time
    steps = [s for s in [train, warm, *benches[:BENCHES_PER_LEASE]] if s]
    calls = [*machine, *[c for s in steps for c in s["calls"]]]
    return {
        "train": train,
        "probe": warm,
        "benches": benches,
        "machine": machine,
        "tree_mib": None if tree is None else round(tree / MIB, 1),
        "oversize": oversize(root, tree, calls) if steps else [],
        "no_training": why,
        "h200": None if train else reference(root),
    }


def _call_line(n: int, carry: list[str], cmd: str) -> str:
    return f"  {n}. carry {' '.join(carry)}: {cmd}" if carry else f"  {n}. {cmd}"


def show(p: dict) -> str:
    out = ["Here, first (each only if missing):", *[f"  {c}" for c in SETUP]]
    steps = [s for s in [p["train"], p.get("probe"), *p["benches"][:BENCHES_PER_LEASE]] if s]
    if not steps:
        return "Nothing left: every run is trained and every bench run finished."
    if p.get("no_training"):
        out = [f"Training: {p['no_training']}.", "", *out]
    for s in steps:
        if s.get("here"):
            out.append(f"  {s['here']}")
    out.append("")
    out.append("On the machine, back to back (it goes back after 30 s idle):")
    n = 0
    for carry, cmd in p["machine"]:
        n += 1
        out.append(_call_line(n, carry, cmd))
    for s in steps:
        out.append(f"  -- {s['what']}")
        if "key" in s:  # a bench run: compared with runs of one card kind only
            out.append(f"     (only on an {BENCH_CARD}, the card of every committed bench run)")
        if s.get("when"):
            out.append(f"     ({s['when']})")
        for carry, cmd in s["calls"]:
            n += 1
            out.append(_call_line(n, carry, cmd))
        if s.get("recover"):
            out.append(f"     {s['recover']}")
    out.append("")
    out.append("Here, after:")
    for s in steps:
        out.append(f"  {s['after']}")
    if p.get("h200"):
        ref = p["h200"]
        out.append("")
        out.append(
            f"If the machine is an H200 (no {BENCH_CARD} bench run above may run on it), instead:"
        )
        out.append(f"  -- {ref['what']} (no GGUF: the wheels only)")
        out += [_call_line(i, *call) for i, call in enumerate(ref["calls"], 1)]
        out.append(f"  after: {ref['after']}")
    warnings = [s["warning"] for s in steps if s.get("warning")] + p["oversize"]
    if warnings:
        out.append("")
        out += [f"WARNING: {w}" for w in warnings]
    if len(p["benches"]) > BENCHES_PER_LEASE:
        out.append("")
        out.append("Bench runs after those, in order (later leases):")
        out += [f"  {b['what']}" for b in p["benches"][BENCHES_PER_LEASE:]]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=status.ROOT, help="the repository")
    ap.add_argument("--json", action="store_true", help="print the plan as JSON")
    ap.add_argument(
        "--left",
        type=float,
        help="device seconds left now (the device tool's status): train only if a whole chunk "
        "fits, else plan bench runs only",
    )
    args = ap.parse_args(argv)
    if args.left is not None and args.left < 0:
        print(
            f"lease_plan: --left {args.left:g}: give the device seconds left, 0 or more",
            file=sys.stderr,
        )
        return 2
    if not (args.root / status.RESULTS).is_dir():
        print(
            f"lease_plan: {args.root / status.RESULTS}: no such folder; give --root the repository",
            file=sys.stderr,
        )
        return 2
    try:
        p = plan(status.board(args.root), args.root, args.left)
    except ValueError as e:
        print(f"lease_plan: {e}", file=sys.stderr)
        return 2
    print(json.dumps(p, indent=1) if args.json else show(p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
