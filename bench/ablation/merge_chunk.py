"""Merge one training chunk of an ablation run, as the GPU machine's watch calls brought it
back, into the run's committed folder, after checking that it continues what is committed.

A chunk is one `bench/train_h200.sh bgstart` process (PROTOCOL.md, session-26 note: 15 steps
of a run) followed by `bgwatch` calls; each watch call brings back `grpo_steps.jsonl` (the
run's whole steps file), `grpo_stderr.txt`, `stage.log` and the newest checkpoint in pieces
(`ckpt/`: adapter_model.safetensors.part000.. and rest.tar.gz, which holds the checkpoint
folder, steps.jsonl and completions.jsonl); the last one, after the process ended, also
`grpo_report.json`. Give the watch calls' folders in the order they ran:

    python bench/ablation/merge_chunk.py --run abl_outcome_only_s0 --lease 3 \\
        --watch /work/.device/7/out --watch /work/.device/8/out --env /work/.device/5/out/env.txt

Checked before anything is written (one line naming the problem, exit 2): the last watch saw
the process end (its report); the new steps.jsonl and completions.jsonl begin with the
committed ones byte for byte and hold steps 1..N with N the report's steps; the checkpoint
is checkpoint-N; no file of this lease exists yet. Then written under
bench/results/ablation/<run>/: steps.jsonl, completions.jsonl.gz (gzip -9, no timestamp),
grpo_report_lease<L>.json, grpo_stderr_lease<L>_tail.txt (the last 6,000 bytes),
stage_bgwatch_lease<L>.log (the watch calls' stage logs joined), env.txt (with --env),
curves.png (`cudaperf train report --plot`), after-checkpoint-N/steps.jsonl and
completions.jsonl.gz for each such folder in the archive (what a process that died after
checkpoint-N wrote, set aside when a second process resumed it; each must begin with its
committed copy); and the checkpoint under
bench/results/ablation/weights/<run>_ckpt<N>/ with its SHA256SUMS, to commit once and remove
in the next commit (restore_weights.sh brings it back). The run's README stays for a person.
Last, for each other main run of the same seed, whether each step both ran drew the same
tasks (the arms of a seed are paired by step); "NOT PAIRED", on stderr, names the first step
that did not. Then the numbers the README's section on the chunk quotes (`chunk_numbers`):
phase means, nvcc seconds a candidate against the steps before, groups with >= 2 correct
and turn 2 below turn 1 (the chunk's and so far), the `ok` share, canaries against step 1,
and each pool task's first score against its last.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import re
import shutil
import statistics
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from status import resumed_step  # noqa: E402  (bench/ablation/status.py)
from summarise import groups_2_correct, turn2_below_turn1  # noqa: E402  (its counts, per run)

from cudaperf.train.curves import (  # noqa: E402
    first_last_by_task,
    plot_runs,
    read_steps,
    trained_steps,
)
from cudaperf.train.grpo import GrpoOptions  # noqa: E402
from cudaperf.train.layout import option_defaults  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path("bench/results/ablation")
TAIL = 6000  # bytes of the process's stderr kept (its last steps' logs and its last line)


class Refused(ValueError):
    """One line naming what does not fit, and what to do."""


ASIDE = re.compile(r"after-checkpoint-\d+/(steps|completions)\.jsonl")


def _read_tar(tar_path: Path) -> tuple[int, bytes, dict[str, bytes]]:
    """The checkpoint step, completions.jsonl and the logs set aside at resumes
    (`after-checkpoint-N/`: what a process that died after checkpoint-N had written,
    `cudaperf.train.runlog.set_aside_after`) inside a watch call's rest.tar.gz."""
    try:
        with tarfile.open(tar_path, "r:gz") as tar:
            names = tar.getnames()
            steps = {int(m.group(1)) for n in names if (m := re.match(r"checkpoint-(\d+)/", n))}
            member = tar.extractfile("completions.jsonl") if "completions.jsonl" in names else None
            data = member.read() if member is not None else None
            aside = {n: tar.extractfile(n).read() for n in names if ASIDE.fullmatch(n)}
    except (OSError, tarfile.TarError, EOFError) as e:
        raise Refused(f"{tar_path}: not a checkpoint archive of train_h200.sh ({e})") from None
    if len(steps) != 1 or data is None:
        raise Refused(f"{tar_path}: needs one checkpoint-N folder and completions.jsonl")
    return steps.pop(), data, aside


def _continues(new: bytes, old: bytes, what: str) -> None:
    if not new.startswith(old):
        at = next((i for i, (a, b) in enumerate(zip(new, old, strict=False)) if a != b), len(new))
        raise Refused(
            f"{what}: the chunk's file does not begin with the committed one (they differ at "
            f"byte {at} of {len(old)}); was it resumed from this run's newest checkpoint?"
        )


# Options a chunk may change against the run's earlier leases: where it resumed from, how far it
# trains, its wall budget, whether it resumed, and where the process read the task file (the
# same file, from the machine's tree or, since session 40, bgstart's copy of it: compared by
# its path inside the tree below)
CHUNK_OPTIONS = {"adapter", "max_steps", "resume", "wall_budget_s", "tasks"}
# and what a run's first chunk may change against another run's first chunk: its arm (the
# reward), its seed and its folder on the machine (PROTOCOL.md: the runs differ in nothing else)
RUN_OPTIONS = CHUNK_OPTIONS | {"reward", "seed", "out"}
ABL_RUN = re.compile(r"abl_(\w+?)_s(\d+)")


# the options' defaults as a report writes them (a path as its string, JSON values)
DEFAULTS = json.loads(json.dumps(option_defaults(GrpoOptions), default=str))


def _options(path: Path) -> dict | None:
    """A lease report's options; an option the report lacks (added to `cudaperf train grpo`
    after that lease ran, e.g. `sampler`) as its default, the value that lease ran with."""
    try:
        opts = json.loads(path.read_text(encoding="utf-8"))["options"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not a report this check can read: the others still count
    return DEFAULTS | opts if isinstance(opts, dict) else None


def _same_options(report: dict, folder: Path, rep_path: Path) -> None:
    """Refused unless `report`'s options are the run's earlier leases' options but for
    CHUNK_OPTIONS (a chunk started with another seed, preset, pool or ranker is not this run's
    next chunk, whatever its steps say); a run's first chunk, unless they are every other
    ablation run's first chunk's options but for RUN_OPTIONS, and its reward and seed are the
    ones the run's name (abl_ARM_sSEED) says."""
    new = report.get("options")
    if not isinstance(new, dict):
        raise Refused(f"{rep_path}: not a report of cudaperf train grpo (no options)")
    new = DEFAULTS | new  # an option the report lacks ran with its default
    earlier = sorted(folder.glob("grpo_report_lease*.json"))
    if earlier:
        against, free = earlier, CHUNK_OPTIONS
    else:
        against = sorted(
            p
            for p in folder.parent.glob("*/grpo_report_lease1.json")
            if ABL_RUN.fullmatch(p.parent.name)  # the main runs, not the pilots
        )
        free = RUN_OPTIONS
        m = ABL_RUN.fullmatch(folder.name)
        said = ((new.get("reward") or {}).get("name"), new.get("seed"))
        if m and said != (m.group(1), int(m.group(2))):
            raise Refused(
                f"{rep_path}: trained {said[0]} with seed {said[1]}, but the run "
                f"{folder.name} is {m.group(1)} with seed {m.group(2)}"
            )
    for old_path in against:
        old = _options(old_path)
        if old is None:
            continue
        keys = sorted(k for k in (set(old) | set(new)) - free if old.get(k) != new.get(k))
        tail = [str(Path(str(o.get("tasks", ""))).parts[-2:]) for o in (old, new)]
        if tail[0] != tail[1]:
            keys.append("tasks")
        if keys:
            said = ", ".join(f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in keys[:3])
            whose = old_path.name if earlier else f"{old_path.parent.name}'s {old_path.name}"
            raise Refused(
                f"{rep_path}: trained with other options than {whose} ({said}); "
                "a chunk must continue its run's command (only where it resumed, its steps "
                "and its budget change), and a run's first chunk differs from the other "
                "runs' only in its reward and seed"
            )


def plan(root: Path, run: str, lease: int, watches: list[Path], env: Path | None) -> dict:
    """What to write, every check passed; Refused otherwise."""
    folder = root / RESULTS / run
    if not folder.is_dir() and not (lease == 1 and ABL_RUN.fullmatch(run)):
        raise Refused(
            f"--run {run}: no folder {folder}; give a run of {RESULTS} (only a main run's "
            "first lease, --lease 1 of abl_ARM_sSEED, starts its folder)"
        )
    names = {
        "report": f"grpo_report_lease{lease}.json",
        "stderr": f"grpo_stderr_lease{lease}_tail.txt",
        "stage": f"stage_bgwatch_lease{lease}.log",
    }
    there = [n for n in names.values() if (folder / n).exists()]
    if there:
        raise Refused(f"--lease {lease}: {folder / there[0]} exists; this lease is merged already")
    if not watches:
        raise Refused("give --watch DIR for each bgwatch call, in the order they ran")
    for w in watches:
        if not (w / "grpo_steps.jsonl").is_file():
            raise Refused(f"--watch {w}: no grpo_steps.jsonl; give a bgwatch call's files folder")
    last = watches[-1]
    rep_path = last / "grpo_report.json"
    if not rep_path.is_file():
        raise Refused(
            f"--watch {last}: no grpo_report.json, so the process had not ended at that call; "
            "run bgwatch again and give its folder last"
        )
    try:
        report = json.loads(rep_path.read_text(encoding="utf-8"))
        n = int(report["steps"])
        seconds = float(report["seconds"])
    except (ValueError, KeyError, TypeError) as e:
        raise Refused(f"{rep_path}: not a report of cudaperf train grpo ({e!r})") from None
    _same_options(report, folder, rep_path)
    ckpt = last / "ckpt"
    parts = sorted(ckpt.glob("adapter_model.safetensors.part*"))
    if not parts or not (ckpt / "rest.tar.gz").is_file():
        raise Refused(f"--watch {last}: no checkpoint pieces under {ckpt}")
    ck_step, completions, aside = _read_tar(ckpt / "rest.tar.gz")
    if ck_step != n:
        raise Refused(f"{ckpt}: holds checkpoint-{ck_step}, but the report says {n} steps")
    weights = root / RESULTS / "weights" / f"{run}_ckpt{n}"
    if weights.exists():
        raise Refused(f"{weights} exists; checkpoint-{n} of {run} is merged already")
    steps = (last / "grpo_steps.jsonl").read_bytes()
    old_steps = (folder / "steps.jsonl").read_bytes() if (folder / "steps.jsonl").is_file() else b""
    _continues(steps, old_steps, "steps.jsonl")
    old_gz = folder / "completions.jsonl.gz"
    _continues(
        completions,
        gzip.decompress(old_gz.read_bytes()) if old_gz.is_file() else b"",
        "completions.jsonl",
    )
    for name, data in aside.items():  # kept whole by the machine: only ever appended to
        old = folder / _aside_name(name)
        if old.is_file():
            _continues(data, _unpack(old), str(old))
    new_steps, had = trained_steps(last / "grpo_steps.jsonl"), trained_steps(folder / "steps.jsonl")
    if new_steps != list(range(1, n + 1)):
        raise Refused(f"{last / 'grpo_steps.jsonl'}: holds steps {_span(new_steps)}, not 1..{n}")
    if len(had) >= n:
        raise Refused(f"the chunk adds no step: {folder / 'steps.jsonl'} holds {len(had)} already")
    if env is not None and not env.is_file():
        raise Refused(f"--env {env}: no such file; give the probe call's env.txt")
    stage = b"".join((w / "stage.log").read_bytes() for w in watches if (w / "stage.log").is_file())
    stderr = last / "grpo_stderr.txt"
    return {
        "folder": folder,
        "weights": weights,
        "names": names,
        "steps": steps,
        "completions": completions,
        "report": rep_path.read_bytes(),
        "stderr": stderr.read_bytes()[-TAIL:] if stderr.is_file() else b"",
        "stage": stage,
        "aside": aside,
        "env": env,
        "ckpt": [*parts, ckpt / "rest.tar.gz"],
        "span": (len(had) + 1, n),
        "seconds": seconds,
        # the report's process trained from the checkpoint it resumed; an earlier process of
        # this chunk (one that died, its steps kept up to its last checkpoint) the steps before
        "own_first": max(len(had), resumed_step(report)) + 1,
        "processes": steps[len(old_steps) :].count(b'"kind": "layout"'),
        "step_s": {
            r["step"]: r["step_s"]
            for r in read_steps(last / "grpo_steps.jsonl")
            if r["step"] > len(had) and "step_s" in r
        },
    }


def _tasks(folder: Path) -> dict[int, list]:
    """Each step's tasks, per process, as the run's rollout records name them."""
    if not (folder / "steps.jsonl").is_file():
        return {}
    return {r["step"]: r["tasks_by_process"] for r in read_steps(folder) if "tasks_by_process" in r}


def pairing(root: Path, run: str) -> list[tuple[bool, str]]:
    """Per other main run of `run`'s seed: whether every step both have drew the same tasks,
    and the line that says so. The arms of a seed are compared step by step (PROTOCOL.md):
    the task order follows the seed and the steps where processes resumed, so a chunk that
    stopped elsewhere than its pair breaks the pairing from there on, and a person must say
    so in PROTOCOL.md."""
    m = ABL_RUN.fullmatch(run)
    if not m:
        return []
    mine, lines = _tasks(root / RESULTS / run), []
    for other in sorted((root / RESULTS).iterdir()):
        o = ABL_RUN.fullmatch(other.name)
        if not o or other.name == run or o[2] != m[2]:
            continue
        theirs = _tasks(other)
        both = sorted(set(mine) & set(theirs))
        if not both:
            continue
        differ = [s for s in both if mine[s] != theirs[s]]
        same = f"{len(both) - len(differ)} of {len(both)} steps both ran drew the same tasks"
        if not differ:
            lines.append((True, f"paired with {other.name}: {same}"))
            continue
        s = differ[0]
        lines.append(
            (
                False,
                f"NOT PAIRED with {other.name}: {same}; step {s} drew {theirs[s]} there and "
                f"{mine[s]} here (say so in PROTOCOL.md: the arms of a seed are compared "
                "step by step)",
            )
        )
    return lines


def _aside_name(name: str) -> str:
    """Where a set-aside log goes in the run's folder (completions gzipped, as the run's)."""
    return name + ".gz" if name.endswith("completions.jsonl") else name


def _unpack(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


def _gzip(data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
        gz.write(data)
    return buf.getvalue()


def _span(steps: list[int]) -> str:
    return f"{steps[0]}..{steps[-1]} ({len(steps)} distinct)" if steps else "none"


def write(p: dict) -> list[Path]:
    """Write what `plan` checked; the paths written."""
    folder, names = p["folder"], p["names"]
    out = []

    def put(name: str, data: bytes) -> None:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        out.append(path)

    put("completions.jsonl.gz", _gzip(p["completions"]))
    for name, data in sorted(p["aside"].items()):
        put(_aside_name(name), _gzip(data) if name.endswith("completions.jsonl") else data)
    put("steps.jsonl", p["steps"])
    put(names["report"], p["report"])
    put(names["stderr"], p["stderr"])
    put(names["stage"], p["stage"])
    if p["env"] is not None:
        put("env.txt", p["env"].read_bytes())
    out.append(plot_runs([folder / "steps.jsonl"], folder / "curves.png"))
    w = p["weights"]
    w.mkdir(parents=True)
    sums = []
    for f in p["ckpt"]:
        shutil.copyfile(f, w / f.name)
        (w / f.name).chmod(0o644)
        sums.append(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.name}\n")
    (w / "SHA256SUMS").write_text("".join(sorted(sums, key=lambda s: s.split()[1])))
    (w / "SHA256SUMS").chmod(0o644)
    out.append(w)
    return out


def _nvcc_per_candidate(rows: list[dict]) -> float | None:
    """Seconds of nvcc per candidate compiled: the evaluator's `compile` phase summed over the
    rows, divided by the candidates not answered from its cache (the host's compile speed,
    which moves step times from lease to lease)."""
    secs = sum((r.get("eval_phases_s") or {}).get("compile", 0.0) for r in rows)
    n = sum(r.get("candidates", 0) - r.get("cached", 0) for r in rows)
    return round(secs / n, 2) if n > 0 else None


def chunk_numbers(rows: list[dict], first: int, last: int) -> dict:
    """What a run README's section on steps `first`-`last` quotes, from the run's step rows
    (`read_steps`: 1-based, each with its rollout merged in): phase means, nvcc speed against
    the earlier steps, groups with at least 2 correct samples and steps whose turn 2 scored
    below turn 1 (the chunk's and all so far), the row share of `ok`, the canaries of the
    chunk's steps against step 1's, and each pool task's first against its last score."""
    chunk = [r for r in rows if first <= r["step"] <= last]
    upto = [r for r in rows if r["step"] <= last]
    if not chunk:
        raise Refused(f"steps {first}-{last}: no step row in the run's steps.jsonl")

    def groups(rs):
        with_2, n = groups_2_correct(rs)
        return round(with_2), n

    def mean(key):
        vals = [r[key] for r in chunk if r.get(key) is not None]
        return round(statistics.mean(vals), 1) if vals else None

    start = {
        (c["task"], c["config"]): c["median_us"] for r in rows[:1] for c in r.get("canary") or []
    }
    canaries = {
        r["step"]: [
            {**c, "step1_us": start[k], "change": round(c["median_us"] / start[k] - 1, 4)}
            for c in r["canary"]
            if (k := (c["task"], c["config"])) in start
        ]
        for r in chunk
        if r.get("canary") and r["step"] > 1
    }
    n_rows = sum(r.get("rows", 0) for r in chunk)
    ok = sum(r.get("status_share", {}).get("ok", 0.0) * r.get("rows", 0) for r in chunk)
    return {
        "steps": [first, last],
        "step_s_mean": mean("step_s"),
        "generate_s_mean": mean("generate_s"),
        "eval_s_mean": mean("eval_s"),
        "analyse_s_mean": mean("analyse_s"),
        "nvcc_s_per_candidate": _nvcc_per_candidate(chunk),
        "nvcc_s_per_candidate_before": _nvcc_per_candidate([r for r in rows if r["step"] < first]),
        "groups_2_correct": groups(chunk),
        "groups_2_correct_so_far": groups(upto),
        "turn2_below_turn1": turn2_below_turn1(chunk),
        "turn2_below_turn1_so_far": turn2_below_turn1(upto),
        "ok_share": round(ok / n_rows, 4) if n_rows else None,
        "canaries": canaries,
        "first_last_by_task": first_last_by_task(upto),
    }


def show_numbers(n: dict) -> list[str]:
    """`chunk_numbers` as the lines merge_chunk prints."""
    a, b = n["steps"]
    g, gs = n["groups_2_correct"], n["groups_2_correct_so_far"]
    t, ts = n["turn2_below_turn1"], n["turn2_below_turn1_so_far"]
    ok = "n/a" if n["ok_share"] is None else f"{100 * n['ok_share']:.1f}%"
    fl = n["first_last_by_task"]
    lines = [
        f"steps {a}-{b}: mean step {n['step_s_mean']} s (generation {n['generate_s_mean']} s, "
        f"evaluation {n['eval_s_mean']} s, analysis {n['analyse_s_mean']} s); nvcc "
        f"{n['nvcc_s_per_candidate']} s a candidate (steps before: "
        f"{n['nvcc_s_per_candidate_before']} s)",
        f"  groups with >= 2 correct: {g[0]} of {g[1]} ({gs[0]} of {gs[1]} over steps 1-{b}); "
        f"turn 2 below turn 1 in {t[0]} of {t[1]} steps ({ts[0]} of {ts[1]} so far); "
        f"ok rows {ok}",
    ]
    if fl.get("tasks"):
        lines.append(
            f"  per pool task, first step against last: {fl['first_mean']} -> {fl['last_mean']}"
            f", difference {fl['diff_mean']} +- {fl['diff_se']} (se); rose on {fl['rose']}, "
            f"fell on {fl['fell']} of {fl['tasks']}"
        )
    for step, cs in n["canaries"].items():
        moved = ", ".join(
            f"{c['task'].rsplit('/', 2)[-2]}/{c['task'].rsplit('/', 1)[-1]}:{c['config']} "
            f"{c['median_us']:g} us ({100 * c['change']:+.1f}%)"
            for c in cs
        )
        lines.append(f"  canaries at step {step} against step 1: {moved}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="the run's folder name, e.g. abl_outcome_only_s0")
    ap.add_argument("--lease", required=True, type=int, help="this chunk's lease number (1, 2, ..)")
    ap.add_argument(
        "--watch",
        action="append",
        type=Path,
        default=[],
        help="a bgwatch call's files folder (repeat, in the order the calls ran)",
    )
    ap.add_argument("--env", type=Path, help="the probe call's env.txt (replaces env.txt)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = ap.parse_args(argv)
    try:
        if args.lease < 1:
            raise Refused(f"--lease {args.lease}: give the chunk's lease number, 1 or more")
        p = plan(args.root, args.run, args.lease, args.watch, args.env)
    except Refused as e:
        print(f"merge_chunk: {e}", file=sys.stderr)
        return 2
    written = write(p)
    first, last = p["span"]
    own = p["own_first"]  # the last process's first step: its seconds are the report's
    s = [t for step, t in sorted(p["step_s"].items()) if step >= own]
    # a process's first step prepares more (compiles, warms): shown apart
    rest = f", steps {own + 1}-{last} median {statistics.median(s[1:]):.1f} s" if s[1:] else ""
    head = f", step {own} {s[0]:.1f} s" if s else ""
    took = f"{last - first + 1} steps in {p['seconds']:.1f} s"
    if own > first:  # the chunk took several processes; the report has the last one's time
        took = (
            f"{last - first + 1} steps by {max(p['processes'], 2)} processes; the last "
            f"trained steps {own}-{last} in {p['seconds']:.1f} s"
        )
    print(
        f"{args.run}: steps {first}-{last} merged ({took}{head}{rest}); "
        f"checkpoint-{last} in {p['weights']}"
    )
    for path in written:
        print(f"  wrote {path}")
    for paired, line in pairing(args.root, args.run):
        print(line, file=sys.stdout if paired else sys.stderr)
    rows = read_steps(args.root / RESULTS / args.run)
    for line in show_numbers(chunk_numbers(rows, first, last)):
        print(line)
    print(
        "next: the run's README from the numbers above (bench/ablation/summarise.py adds the "
        "rejected share, one-thread launches and correct replies without a launch), "
        f"commit, then `git rm -r {p['weights'].relative_to(args.root)}` in the next commit"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
