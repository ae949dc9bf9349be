"""Merge what a `bench/device_bg.sh` job of `bench/bench_suite.sh` brought back (its
`bg_NAME.tar.gz`) into the committed bench runs of one checkpoint, keeping every measured
record: nothing committed is replaced unless the job's copy holds it unchanged.

    python bench/ablation/merge_bench.py --job /work/.device/9/bg_grpoA.tar.gz \\
        --into bench/results/ablation/bench/abl_unified_s0 \\
        --log /work/.device/9/bg_grpoA.log --log-name bg_grpoA_session32.log

The tar holds `out/bench/MODE/...` (bench_suite's RUNS folder of the job's `ROOT`), which goes
to `INTO/MODE/...`. Checked before anything is written (one line naming the problem, exit 2):
- a run folder (one with run.json) already committed has the same settings and tasks in the
  job's run.json, is not packed (a packed run is finished), and every record of a task it had
  finished is in the job's trajectory, unchanged and in order; records of unfinished tasks
  may go (`bench run` drops those it cannot replay and runs the task again);
- its timing.jsonl, calls.log and logs/*.log only grew (the job's copy begins with the
  committed one byte for byte: bench_suite appends to them);
- any other committed file is unchanged, except gpu.txt (the card of the job's last call,
  shown when it differs) and a run's working files, pending_replies.jsonl and
  scored_results.jsonl (the replies and evaluator results of a chunk the job stopped in,
  which a resume takes instead of redoing them: not records; the job's copy replaces each,
  and when the job's run has none, the chunk was recorded, so it goes).
Then the files are written (and pending files that went, removed), the job's log (`--log`)
goes to `INTO/MODE/logs/LOG_NAME`, and each run's finished tasks are shown before and after.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from cudaperf.refine.trajectory import finished_tasks  # noqa: E402
from cudaperf.report.run import PACKED, PENDING, SCORED, read_records, trajectory_file  # noqa: E402

GROWS = ("timing.jsonl", "calls.log")  # appended to; logs/*.log too
REPLACED = ("gpu.txt",)
WORKING = (PENDING, SCORED)  # a stopped chunk's replies and results: the job's copy wins


class Refused(ValueError):
    """One line naming what does not fit, and what to do."""


def _records(folder: Path) -> list:
    """A run folder's trajectory records (plain or packed), as `bench report` reads them."""
    try:
        return read_records(trajectory_file(folder))
    except ValueError as e:
        raise Refused(str(e)) from None


def _in_order(needles: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(h == n for h in it) for n in needles)


def _run_json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return {"settings": doc["settings"], "tasks": doc["tasks"]}
    except (ValueError, KeyError, TypeError) as e:
        raise Refused(f"{path}: not a run.json of cudaperf bench run ({e!r})") from None


def _same_as_packed(old: Path, new: Path) -> set[Path]:
    """The job's files of a run committed packed (`cudaperf bench pack`: finished), each the
    same as the committed one (a job copies every run of its ROOT, the finished ones too);
    Refused if one differs or is new."""
    files = {f for f in new.rglob("*") if f.is_file()}
    for f in sorted(files):
        dest = old / f.relative_to(new)
        if not dest.is_file() or dest.read_bytes() != f.read_bytes():
            raise Refused(
                f"{old}: packed, so finished, but the job's {f.relative_to(new)} "
                f"{'differs from the committed one' if dest.is_file() else 'is not committed'}; "
                "a finished run takes nothing new"
            )
    return files


def check_run(old: Path, new: Path, new_json: dict, new_records: list) -> int:
    """A committed run folder `old` against the job's `new` (its run.json's settings and
    tasks, its records): the tasks `old` had finished."""
    if _run_json(old / "run.json") != new_json:
        raise Refused(
            f"{new / 'run.json'}: other settings or tasks than the committed {old / 'run.json'}; "
            "the job ran another run into this folder"
        )
    old_records = _records(old)
    done_old = finished_tasks(old_records)
    lines_old = [r.model_dump_json() for r in old_records if r.task_id in done_old]
    if not _in_order(lines_old, [r.model_dump_json() for r in new_records]):
        lost = sorted(done_old - finished_tasks(new_records)) or ["a record changed"]
        raise Refused(
            f"{new}: the job's trajectory lacks committed records of finished tasks "
            f"({', '.join(lost[:3])}); was it seeded from this repository's runs?"
        )
    return len(done_old)


def plan(job_out: Path, into: Path) -> tuple[list[tuple[Path | None, Path]], list[str]]:
    """(source, destination) of every file to write (source None: remove the destination),
    and lines to show; Refused otherwise."""
    src_root = job_out / "bench"
    if not src_root.is_dir() or not any(src_root.iterdir()):
        raise Refused(f"{job_out}: no bench/ folder in the job's files; give a bench_suite job")
    copies, shown = [], []
    runs = sorted(p.parent for p in src_root.rglob("run.json"))
    # not copied: working files of finished runs (left by a copy, not pending) and the job's
    # unchanged copies of packed runs
    skip: set[Path] = set()
    for new in runs:
        old = into / new.relative_to(src_root)
        if trajectory_file(old).name == PACKED:
            skip.update(_same_as_packed(old, new))  # a job of another suite of the same ROOT
            shown.append(
                f"{new.relative_to(src_root)}: packed (finished); the job's copy is the same"
            )
            continue
        new_json, new_records = _run_json(new / "run.json"), _records(new)
        before = check_run(old, new, new_json, new_records) if (old / "run.json").is_file() else 0
        after, n = len(finished_tasks(new_records)), len(new_json["tasks"])
        shown.append(f"{new.relative_to(src_root)}: {before}/{n} -> {after}/{n} tasks finished")
        for name in WORKING:
            # `run_bench` removes both when its last task is recorded, so a finished run's copy
            # of one is stale (session 34: bench_suite's copy into $OUT never deleted)
            finished, has_new, has_old = after == n, (new / name).is_file(), (old / name).is_file()
            if finished and has_new:
                skip.add(new / name)
            if has_old and (finished or not has_new):
                copies.append((None, old / name))
            if has_old and not has_new:
                shown.append(f"{new.relative_to(src_root) / name}: recorded since, removed")
            elif finished and has_new:
                shown.append(f"{new.relative_to(src_root) / name}: the run is finished, not kept")
    for f in sorted(p for p in src_root.rglob("*") if p.is_file() and p not in skip):
        rel = f.relative_to(src_root)
        dest = into / rel
        if dest.is_file():
            old, data = dest.read_bytes(), f.read_bytes()
            if f.name in GROWS or (f.parent.name == "logs" and f.suffix == ".log"):
                if not data.startswith(old):
                    raise Refused(
                        f"{f}: does not begin with the committed {dest} (bench_suite only "
                        "appends to it); was the job seeded from this repository's runs?"
                    )
            elif f.name in REPLACED:
                if old != data:
                    shown.append(f"{rel}: {old.decode().strip()} -> {data.decode().strip()}")
            elif f.name in ("trajectories.jsonl", "run.json", *WORKING):
                pass  # checked above, run by run; working files are not records
            elif old != data:
                raise Refused(f"{f}: differs from the committed {dest}; nothing is replaced")
        copies.append((f, dest))
    return copies, shown


def _extract(job: Path, into: Path) -> Path:
    """The job's out/ folder: `job` itself when it is one, else unpacked from its tar."""
    if job.is_dir():
        return job / "out" if (job / "out").is_dir() else job
    try:
        with tarfile.open(job, "r:gz") as tar:
            tar.extractall(into, filter="data")
    except (OSError, tarfile.TarError, EOFError) as e:
        raise Refused(f"--job {job}: not a device_bg.sh job archive ({e})") from None
    return into / "out"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--job", required=True, type=Path, help="bg_NAME.tar.gz (or its out/ folder)")
    ap.add_argument("--into", required=True, type=Path, help="the checkpoint's bench ROOT")
    ap.add_argument("--log", type=Path, help="the job's bg_NAME.log from the device call")
    ap.add_argument("--log-name", help="its name under MODE/logs/, e.g. bg_grpoA_session32.log")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if not args.into.parent.is_dir():  # INTO itself is new at a checkpoint's first job
                raise Refused(f"--into {args.into}: no folder {args.into.parent}; give the ROOT")
            if (args.log is None) != (args.log_name is None):
                raise Refused("give --log and --log-name together (or neither)")
            if args.log is not None and not args.log.is_file():
                raise Refused(f"--log {args.log}: no such file")
            out = _extract(args.job, Path(tmp))
            copies, shown = plan(out, args.into)
            modes = sorted({d.relative_to(args.into).parts[0] for _, d in copies})
            if args.log_name is not None:
                if len(modes) != 1:
                    raise Refused(f"the job wrote {len(modes)} mode folders; its log goes in one")
                log_dest = args.into / modes[0] / "logs" / args.log_name
                if log_dest.exists():
                    raise Refused(f"--log-name: {log_dest} exists; name this call's log anew")
                copies.append((args.log, log_dest))
        except Refused as e:
            print(f"merge_bench: {e}", file=sys.stderr)
            return 2
        for src, dest in copies:
            if src is None:
                dest.unlink()
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            part = dest.with_name(dest.name + ".tmp")
            shutil.copyfile(src, part)
            part.replace(dest)
    for line in shown:
        print(line)
    print(f"merged {sum(s is not None for s, _ in copies)} file(s) into {args.into}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
