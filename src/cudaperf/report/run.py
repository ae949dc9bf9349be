"""`run_bench`: a model over a suite, every sample of every turn evaluated, resumable.

A run folder holds:

- `run.json`: the settings (model, suite, samples, turns, seed, subset), the metadata of
  every selected task (`rows.TaskMeta`), when it started, the measurement setup (GPU,
  evaluator, toolchain) and how replies were sampled (`sampling`: temperature, reply length,
  generation mode; a model's, not a scripted replay's);
- `trajectories.jsonl`: refine's trajectory (`refine.trajectory`), one turn record per task
  and turn as soon as that turn is scored, then the task's summary record;
- `timing.jsonl`: one line per chunk of tasks as it ends (also one cut by Ctrl-C or an
  error, `"complete": false`): its wall seconds, the seconds spent generating and scoring,
  how many tasks it held and how many task-turns it scored (`turns`; a resumed or seeded
  task's earlier turns are not this chunk's), so a run's wall time adds up over every process
  that resumed it and a turn's cost can be read from it (`reused_sets`: tasks whose replies
  an earlier, interrupted process had generated) and the host's CPU model (`host_cpu`: the
  serial C reference is timed on it, so a run resumed on other hosts mixes them, and the
  reports say so);
- `pending_replies.jsonl`, only while a turn is scored or after a run stopped then: the
  replies being scored (`refine.pending`), which a resumed run scores instead of generating
  that turn again;
- `scored_results.jsonl`, only while a chunk runs or after a run stopped in one: each
  evaluator result of the chunk as it finishes (`KeptResults`, when the command's evaluator
  session is wrapped in it, as `bench run` does), so a resumed run takes the candidates a
  stopped batch had finished instead of running them again.

Tasks go through `refine_many` in chunks of `batch_tasks` (one generation batch and one
evaluator batch per turn and chunk), with `patience = turns` so that no task stops before its
last turn. The unit of resume is the turn: a rerun skips every task with a summary record and
continues each task that never finished (a crash or Ctrl-C mid-task) after its last recorded
turn (`refine_many`'s `resume`: the next prompt is rebuilt from the recorded replies and
feedback, as the stopped run would have built it). Turn records that do not replay (written
by other prompts or rules) are dropped, and their task runs again from turn 1.

A run of more turns can begin from a finished run of fewer (`turns_from`, `bench run
--turns-from`): same model, suite, settings, tasks, setup and sampling, only `turns` lower. Each
task that has no record here yet gets that run's turn records of the task, and resume continues
it after them, so a 4-turn run after a 1-turn one generates and scores turns 2-4 only.
`run.json`'s `turns_from` names the run and how many tasks began from it (their earlier turns'
time is that run's), and the reports say so.

A wall budget (`bench run --wall-budget`) stops a run between chunks, never inside one: a chunk
starts only when the run's own complete chunks (`timing.jsonl`, every process that ran it)
predict that it ends inside the budget (`chunk_seconds`); else `run_bench` raises `WallBudget`
and a rerun resumes. A chunk cut by an outside limit loses its generation in flight, so a
caller that stops the process at a deadline (`bench/bench_suite.sh`) gives the same seconds as
the budget and the run ends before a chunk it could not finish, not in it.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pydantic import ValidationError

from cudaperf.fields import wall_budget_problem
from cudaperf.jsonl import append_lines, complete_lines, cut_line, read_text, replace_text
from cudaperf.refine.trajectory import (
    SummaryRecord,
    TurnRecord,
    finished_tasks,
    parse_trajectory,
)
from cudaperf.report.rows import TaskMeta
from cudaperf.tasks.model import Task
from cudaperf.toolchain import host_cpu

log = logging.getLogger(__name__)

__all__ = [
    "BenchSettings",
    "ConcurrentBatch",
    "KeptResults",
    "RunFiles",
    "WallBudget",
    "check_resume",
    "chunk_seconds",
    "check_turns_from",
    "make_bench_backend",
    "pack_run",
    "read_run",
    "run_bench",
    "sampling_diff",
    "setup_diff",
    "trajectory_file",
]

TRAJECTORY = "trajectories.jsonl"
PENDING = "pending_replies.jsonl"  # replies being scored (`refine.pending`); gone when recorded
SCORED = "scored_results.jsonl"  # the evaluator's results of the chunk being run (`KeptResults`)
PACKED = TRAJECTORY + ".gz"  # a finished run's trajectory after `pack_run` (read, never appended)
RUN_JSON = "run.json"
TIMING = "timing.jsonl"


@dataclass(frozen=True)
class BenchSettings:
    """What defines a run; a rerun into the same folder must give the same values."""

    model: str  # backend spec: HF name/path, http(s) URL, scripted:best|naive|weakest-first
    suite: str  # suite spec (`report.suites.load_suite`)
    samples: int = 4  # replies per task and turn
    turns: int = 1  # turns per task (every one is run: patience = turns)
    seed: int = 0  # subset selection seed
    limit: int | None = None  # at most this many tasks
    tasks_per_family: int | None = None  # at most this many tasks per family
    adapter: str | None = None  # a trained adapter on top of `model` (HF models only)
    preset: str = "unified"  # reward preset (which sample a turn continues from)
    reward: str = ""  # --reward FIELD=VALUE overrides of the preset, space-separated, in order
    compile_baseline: bool = True  # PyTorch tasks: torch.compile timed (False: the baseline
    # is absent from the run and its reports, to save device time)
    kind: str | None = None  # only tasks of this kind (c2cuda | torch2cuda), before the subset

    def __post_init__(self) -> None:
        if self.samples < 1 or self.turns < 1:
            raise ValueError(f"samples={self.samples}, turns={self.turns}: use at least 1 of each")
        if self.kind not in (None, "c2cuda", "torch2cuda"):
            raise ValueError(f"--kind {self.kind}: use c2cuda or torch2cuda (or leave it out)")
        if self.adapter and self.model.startswith(("scripted:", "http://", "https://")):
            raise ValueError(
                "--adapter loads on top of a Hugging Face model; drop it for scripted or URL models"
            )


@dataclass(frozen=True)
class RunFiles:
    """A run folder as read back: settings, task metadata and trajectory records."""

    path: Path
    settings: dict  # BenchSettings fields (as JSON)
    meta: dict[str, TaskMeta]  # task id -> metadata, in run order
    info: dict  # the rest of run.json (suite source, skipped counts, started, notes)
    records: list[TurnRecord | SummaryRecord]
    timing: list[dict] = field(default_factory=list)  # timing.jsonl's chunk lines


class ConcurrentBatch:
    """Gives a backend without `generate_batch` (the OpenAI-compatible one) a batched form:
    the conversations of one turn are sent as concurrent requests (up to `workers`), so a
    server such as vLLM batches them, instead of one after another."""

    def __init__(self, inner, workers: int = 16) -> None:
        self.inner, self.name, self.workers = inner, inner.name, workers

    def generate(self, messages, n: int) -> list[str]:
        return self.inner.generate(messages, n)

    def generate_batch(self, conversations, n: int) -> list[list[str]]:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(conversations))))
        try:
            return list(pool.map(lambda m: self.inner.generate(m, n), conversations))
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: do not wait for the rest


def make_bench_backend(spec: str, tasks: Sequence[Task], adapter: str | None = None, **options):
    """The backend `spec` names, as `refine.make_backend` builds it (a scripted one over
    `tasks`; `adapter=` passed through when given); one without `generate_batch` is wrapped
    in `ConcurrentBatch`."""
    from cudaperf.refine.backends import make_backend

    if spec.startswith("scripted:"):
        return make_backend(spec, tasks=tasks, **options)
    if adapter:
        options["adapter"] = adapter
    backend = make_backend(spec, **options)
    return backend if hasattr(backend, "generate_batch") else ConcurrentBatch(backend)


# What run.json records about how a run was measured (cli.bench._info): runs that differ in
# any of these measure different things. Machine-local evaluator options are left out.
_SETUP = ("gpu", "mode", "evaluator", "versions")
_LOCAL_OPTIONS = ("cache_dir", "gpus")


def setup_diff(old: dict, new: dict, keys: Sequence[str] | None = None) -> list[tuple]:
    """(name, old value, new value) for each measurement-setup entry of two run.json
    documents that differs (dict entries, e.g. `versions`, compared key by key as
    "versions nvcc"); `keys` limits the comparison to those top-level keys."""
    out = []
    for key in keys if keys is not None else _SETUP:
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) or isinstance(b, dict):
            a, b = a or {}, b or {}
            out += [
                (f"{key} {k}", a.get(k), b.get(k))
                for k in sorted(set(a) | set(b))
                if k not in _LOCAL_OPTIONS and a.get(k) != b.get(k)
            ]
        elif a != b:
            out.append((key, a, b))
    return out


def sampling_diff(old: dict, new: dict) -> list[tuple]:
    """(name, old value, new value) for each sampling option (`run.json`'s `sampling`) that
    differs between two run.json documents; [] when either does not record it (a scripted
    replay samples nothing; a run.json written before it was recorded cannot be checked)."""
    a, b = old.get("sampling"), new.get("sampling")
    if not isinstance(a, dict) or not isinstance(b, dict):
        return []
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _settings_shown(old: dict, new: BenchSettings) -> str:
    """ "k=old there, new now" for each setting of `new` that `old` (run.json's settings)
    gives otherwise ("" when none does); a setting an older run.json lacks counts as its
    default."""
    defaults = asdict(BenchSettings(model="", suite=""))
    old = defaults | {k: v for k, v in old.items() if k in defaults}
    diff = [k for k, v in asdict(new).items() if old.get(k) != v]
    return ", ".join(f"{k}={old.get(k)!r} there, {getattr(new, k)!r} now" for k in diff)


def _settings_problem(old: dict, new: BenchSettings) -> str:
    """Why a run of settings `old` cannot be resumed with `new` ("" when it can)."""
    if not (shown := _settings_shown(old, new)):
        return ""
    return f"it holds a run with other settings ({shown}); rerun with those or use a new --out"


def check_resume(out: Path, settings: BenchSettings, meta: dict[str, TaskMeta], info: dict) -> None:
    """ValueError in one line when `out` holds a run that these settings, tasks, setup or
    sampling cannot resume (nothing when it holds none): called before a model is loaded,
    and again by `run_bench`."""
    rj = Path(out) / RUN_JSON
    if not rj.is_file():
        return
    old_doc, old_settings, old_meta = _read_run_json(rj)
    problem = _settings_problem(old_settings, settings)
    if not problem and list(old_meta) != list(meta):
        problem = "it holds a run of other tasks (the suite changed?); use a new --out"
    # a run's tasks are all measured on one setup: resuming on another card, toolchain
    # or evaluator would mix them silently (keys the caller does not give are not checked)
    diff = setup_diff(old_doc, info, [k for k in _SETUP if k in info])
    if not problem and diff:
        problem = (
            f"it holds a run measured on another setup ({_shown(diff)}); resume it where it "
            "started, or use a new --out"
        )
    sampled = sampling_diff(old_doc, info)
    if not problem and sampled:
        problem = (
            f"it holds a run whose replies were sampled otherwise ({_shown(sampled)}); rerun "
            "with those options or use a new --out"
        )
    if not problem:
        problem = _packed_problem(Path(out), list(meta))
    was = (old_doc.get("turns_from") or {}).get("run")
    now = (info.get("turns_from") or {}).get("run")
    if not problem and was and now and Path(was) != Path(now):
        problem = (
            f"its first turns came from {was}; give --turns-from {was} (or leave it out) to "
            "resume it"
        )
    if problem:
        raise ValueError(f"{out}: {problem}")


def _shown(diffs: list[tuple]) -> str:
    """ "name old there, new now" for each (name, old, new) of `setup_diff`/`sampling_diff`."""
    return ", ".join(f"{k} {a!r} there, {b!r} now" for k, a, b in diffs)


def _packed_problem(out: Path, ids: list[str]) -> str:
    """Why a packed run cannot be resumed ("" when it has every task finished, or is not
    packed): `pack_run` packs finished runs only, and nothing appends to a packed file."""
    packed = out / PACKED
    if not packed.is_file() or (out / TRAJECTORY).is_file():
        return ""
    done = finished_tasks(read_records(packed))
    if all(i in done for i in ids):
        return ""
    return (
        f"its trajectory is packed ({PACKED}) but {sum(i not in done for i in ids)} task(s) "
        f"are unfinished; gunzip it to {TRAJECTORY} to resume"
    )


def trajectory_file(folder: str | Path) -> Path:
    """A run folder's trajectory: `trajectories.jsonl`, or its packed `.gz` once packed."""
    p = Path(folder)
    packed = (p / PACKED).is_file() and not (p / TRAJECTORY).is_file()
    return p / PACKED if packed else p / TRAJECTORY


def pack_run(folder: str | Path) -> tuple[int, int]:
    """Gzip a finished run's trajectory in place (`trajectories.jsonl.gz`, byte-identical
    text, no timestamp), so finished runs take a tenth of the room; (bytes before, after).
    ValueError when the folder is not a finished run or is packed already."""
    p = Path(folder)
    run = read_run(p)  # validates run.json and every record
    plain, packed = p / TRAJECTORY, p / PACKED
    if not plain.is_file():
        what = "packed already" if packed.is_file() else f"without {TRAJECTORY}"
        raise ValueError(f"{p}: {what}; nothing to pack")
    done = finished_tasks(run.records)
    left = [i for i in run.meta if i not in done]
    if left:
        raise ValueError(
            f"{p}: {len(left)} of {len(run.meta)} task(s) unfinished; pack a finished run "
            "(rerun bench run to finish it)"
        )
    text = plain.read_text(encoding="utf-8")
    tmp = p / (PACKED + ".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(text.encode("utf-8"))
    if gzip.decompress(tmp.read_bytes()).decode("utf-8") != text:
        tmp.unlink()
        raise ValueError(f"{p}: the packed copy did not read back the same; nothing changed")
    tmp.replace(packed)
    plain.unlink()
    return len(text.encode("utf-8")), packed.stat().st_size


def check_turns_from(
    source: str | Path, settings: BenchSettings, meta: dict[str, TaskMeta], info: dict
) -> RunFiles:
    """The run a run of `settings` may begin from (`run_bench`'s `turns_from`): ValueError in
    one line unless it is a run folder of the same model, suite, settings and tasks with fewer
    turns, measured on the same setup (the keys `info` gives) and sampled alike (where both
    record how). Called before a model is loaded."""
    where = f"--turns-from {source}"
    try:
        src = read_run(source)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    turns = src.settings["turns"]
    if turns >= settings.turns:
        raise ValueError(
            f"{where}: it ran {turns} turn(s); a run of --turns {settings.turns} begins from a "
            "run of fewer turns"
        )
    if shown := _settings_shown({**src.settings, "turns": settings.turns}, settings):
        raise ValueError(f"{where}: it ran other settings ({shown}); give a run of these")
    if list(src.meta) != list(meta):
        raise ValueError(f"{where}: it ran other tasks (another suite or subset)")
    if diff := setup_diff(src.info, info, [k for k in _SETUP if k in info]):
        raise ValueError(f"{where}: it was measured on another setup ({_shown(diff)})")
    if sampled := sampling_diff(src.info, info):
        raise ValueError(f"{where}: its replies were sampled otherwise ({_shown(sampled)})")
    return src


def _seed_turns(
    traj: Path, src: RunFiles, records: list[TurnRecord | SummaryRecord]
) -> list[TurnRecord]:
    """Append to `traj` (whose records are `records`) the turn records of each task `src`
    finished that has no record here yet (resume then continues each after them); those
    appended."""
    have = {r.task_id for r in records}
    done = finished_tasks(src.records)
    take = [
        r
        for r in src.records
        if isinstance(r, TurnRecord) and r.task_id in done and r.task_id not in have
    ]
    if take:
        append_lines(traj, [r.model_dump_json() for r in take])
        log.info("%d task(s) begin from the turns of %s", len({r.task_id for r in take}), src.path)
    return take


def _note_turns_from(out: Path, src: RunFiles, records: list[TurnRecord | SummaryRecord]) -> None:
    """run.json's `turns_from`: the run, its turns, when it started, and how many of this
    run's tasks begin with its turn-1 record (counted from the trajectory's `records` as
    resume kept them, so a record that did not replay, and was dropped, is not counted)."""
    first = {
        r.task_id: r.model_dump_json()
        for r in src.records
        if isinstance(r, TurnRecord) and r.turn == 1
    }
    n = sum(
        1
        for r in records
        if isinstance(r, TurnRecord) and r.turn == 1 and first.get(r.task_id) == r.model_dump_json()
    )
    rj = out / RUN_JSON
    doc = json.loads(rj.read_text(encoding="utf-8"))
    doc["turns_from"] = {
        "run": str(src.path),
        "turns": src.settings["turns"],
        "started": src.info.get("started"),
        "tasks": n,
    }
    replace_text(rj, json.dumps(doc, indent=1))


def _prepare(out: Path, settings: BenchSettings, meta: dict[str, TaskMeta], info: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rj = out / RUN_JSON
    if rj.is_file():
        check_resume(out, settings, meta, info)
        return
    doc = {
        "settings": asdict(settings),
        "tasks": {k: m.model_dump(mode="json") for k, m in meta.items()},
        "started": _now(),
        **info,
    }
    replace_text(rj, json.dumps(doc, indent=1))


def read_records(path: Path) -> list[TurnRecord | SummaryRecord]:
    """The trajectory's records; a last line cut short (the process was killed while writing
    it) is skipped with a warning (the file is not changed: a report only reads it, and a
    resumed run's writer removes the fragment), any other bad line raises ValueError."""
    if not path.is_file():
        return []
    try:
        text = read_text(path)
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path}: not UTF-8 text (byte {e.start}), so not a trajectory written by "
            "cudaperf bench; give a run folder it wrote"
        ) from None
    except (OSError, EOFError) as e:  # a .gz that is not gzip, or cut short
        if path.suffix != ".gz":
            raise
        raise ValueError(f"{path}: not a gzipped trajectory ({e}); give a run folder") from None
    if (cut := cut_line(text)) is not None:
        log.warning("%s: skipping a last line cut short (%d chars)", path, len(cut))
    try:
        return parse_trajectory(text, path)  # the text read above: one read, one gunzip
    except (ValueError, KeyError) as e:
        raise ValueError(f"{path}: not a trajectory written by cudaperf bench ({e})") from None


def _resume_state(
    path: Path, records: list[TurnRecord | SummaryRecord], tasks: Sequence[Task], model: str, rules
) -> tuple[set[str], list[TurnRecord], list[TurnRecord | SummaryRecord]]:
    """From the trajectory `path`'s `records`: task ids with a summary record, the turn
    records of unfinished tasks that replay (`refine.episode.resume` rebuilds the chain from
    them: `refine_many`'s `resume`), and every record kept; the trajectory is rewritten
    without the others, whose tasks run again from turn 1."""
    from cudaperf.refine import episode

    if not records:
        return set(), [], []
    done = finished_tasks(records)
    replay = set()
    for t in tasks:
        if t.id in done:
            continue
        earlier = episode.unfinished_turns(records, t.id, model)
        if earlier and len(episode.resume(t, earlier, rules).turns) == len(earlier):
            replay.add(t.id)
    keep = [r for r in records if r.task_id in done or r.task_id in replay]
    if len(keep) < len(records):
        log.info("dropping %d turn record(s) that do not replay", len(records) - len(keep))
        replace_text(path, "".join(r.model_dump_json() + "\n" for r in keep))
    if replay:
        log.info("continuing %d unfinished task(s) after their last recorded turn", len(replay))
    return done, [r for r in keep if isinstance(r, TurnRecord) and r.task_id in replay], keep


class WallBudget(Exception):
    """`run_bench` stopped before a chunk that would not end inside its wall budget."""

    def __init__(self, finished: int, total: int, need_s: float, left_s: float, budget_s: float):
        self.finished, self.total = finished, total
        self.need_s, self.left_s, self.budget_s = need_s, left_s, budget_s
        why = (
            "; a chunk takes longer than the whole budget here: give a larger --wall-budget or "
            "a smaller --batch-tasks"
            if need_s > budget_s
            else ""
        )
        super().__init__(
            f"stopped by the wall budget ({budget_s:g} s): the next chunk is expected to take "
            f"{need_s:.0f} s and {max(left_s, 0):.0f} s are left; {finished} of {total} tasks "
            f"finished{why}"
        )


def complete_chunks(timing: Sequence[dict]) -> list[dict]:
    """The `timing.jsonl` lines of chunks that completed, with a task count above 0 and wall
    seconds: the ones `chunk_seconds` and `fitting_tasks` predict from."""
    return [
        r
        for r in timing
        if r.get("complete")
        and isinstance(r.get("tasks"), int)
        and r["tasks"] > 0
        and isinstance(r.get("wall_s"), (int, float))
    ]


def chunk_seconds(timing: Sequence[dict], tasks: int) -> float | None:
    """Seconds a chunk of `tasks` tasks is expected to take, from a run's `timing.jsonl` lines:
    `tasks` times the slowest seconds per task of its complete chunks that held at least as
    many tasks (of all its complete chunks when none did: a small chunk's fixed costs, such as
    a generation call, weigh more per task, so it over-predicts a larger one). None before a
    chunk completed. The slowest, not the mean: chunks of the same run differ by a third
    between hosts (16-task chunks of 224-342 s on H100 leases, 2026-12-06), and a chunk
    predicted too short is cut at the caller's deadline and loses its generation."""
    done = [(r["tasks"], r["wall_s"]) for r in complete_chunks(timing)]
    if not done:
        return None
    big = [(n, s) for n, s in done if n >= tasks] or done
    return tasks * max(s / n for n, s in big)


def fitting_tasks(timing: Sequence[dict], most: int, left_s: float) -> int:
    """The most tasks (up to `most`) a chunk can hold and still end inside `left_s` seconds,
    0 when not even one can, from a run's `timing.jsonl` lines (0 before a chunk completed).

    For a chunk smaller than the run's usual, each complete chunk predicts its generation
    seconds whole (one generation call decodes until its longest reply ends, however few
    sequences it holds; the first chunk of a process also compiles) plus its other seconds
    per task; the slowest prediction counts, as in `chunk_seconds`. The time a budget stop
    would leave unused at the end of a call runs the tasks that fit instead."""
    done = [
        (r["tasks"], r["wall_s"], min(float(r.get("generate_s") or 0.0), r["wall_s"]))
        for r in complete_chunks(timing)
    ]
    if not done:
        return 0
    gen = max(g for _, _, g in done)
    per_task = max((s - g) / n for n, s, g in done)
    if per_task <= 0:
        return most if gen <= left_s else 0
    return max(0, min(most, int((left_s - gen) // per_task)))


def run_bench(
    settings: BenchSettings,
    tasks: Sequence[Task],
    meta: dict[str, TaskMeta],
    out: Path,
    backend,
    scorer,
    batch_tasks: int = 16,
    info: dict | None = None,
    on_turn: Callable[[TurnRecord], None] | None = None,
    on_done: Callable | None = None,
    turns_from: RunFiles | None = None,
    wall_budget_s: float | None = None,
    started: float | None = None,
) -> int:
    """Run every not-yet-finished task of `tasks` into the folder `out`; returns how many
    tasks were run now (0: everything was already done). Raises ValueError when `out`
    holds a run of other settings or tasks. `turns_from` (from `check_turns_from`): a run
    of fewer turns whose turn records begin each task that has none here yet.
    `wall_budget_s`: seconds from `started` (a `time.perf_counter()` value; default: this
    call), loading the model included; a chunk that `chunk_seconds` says would not end inside
    it is cut to the tasks that `fitting_tasks` says would, and `WallBudget` is raised
    before a chunk of which not one task would (a chunk with no complete one before it starts
    anyway)."""
    from cudaperf.refine.episode import Rules
    from cudaperf.refine.loop import refine_many

    if batch_tasks < 1:
        raise ValueError(f"batch_tasks={batch_tasks}; use >= 1")
    if problem := wall_budget_problem(wall_budget_s):
        raise ValueError(problem)
    t_start = time.perf_counter() if started is None else started
    _prepare(Path(out), settings, meta, info or {})  # refuses a packed unfinished run
    if trajectory_file(out).name == PACKED:
        return 0  # packed: every task finished (pack_run packs nothing else)
    traj = Path(out) / TRAJECTORY
    records = read_records(traj)  # read once: seeding appends to them, resume filters them
    if turns_from is not None:
        records = records + _seed_turns(traj, turns_from, records)
    rules = Rules(turns=settings.turns, patience=settings.turns)  # what refine_many builds
    done, earlier, kept = _resume_state(traj, records, tasks, backend.name, rules)
    if turns_from is not None:
        _note_turns_from(Path(out), turns_from, kept)
    todo = [t for t in tasks if t.id not in done]
    if done:
        log.info("resuming: %d of %d task(s) already finished", len(tasks) - len(todo), len(tasks))
    i = 0
    while i < len(todo):
        chunk = todo[i : i + batch_tasks]
        if wall_budget_s is not None:
            timing = read_timing(Path(out) / TIMING)
            need = chunk_seconds(timing, len(chunk))
            left = wall_budget_s - (time.perf_counter() - t_start)
            if need is not None and need > left:
                fit = fitting_tasks(timing, len(chunk) - 1, left)
                if not fit:
                    finished = len(tasks) - len(todo) + i
                    raise WallBudget(finished, len(tasks), need, left, wall_budget_s)
                log.info("%d of the next %d task(s) fit the %.0f s left", fit, len(chunk), left)
                chunk = chunk[:fit]
        i += len(chunk)
        clock: dict[str, float] = {}
        scored: list[TurnRecord] = []  # the chunk's task-turns, for timing.jsonl
        began, t0, complete = _now(), time.perf_counter(), False
        spent = dict(getattr(scorer, "seconds", {}))  # the scorer's clocks (`RewardScorer`)
        try:
            refine_many(
                chunk,
                backend,
                scorer,
                turns=settings.turns,
                samples=settings.samples,
                patience=rules.patience,
                keep_exchanges=rules.keep_exchanges,
                out=traj,
                resume=earlier,
                on_turn=_counting(scored, on_turn),
                on_done=on_done,
                clock=clock,
                pending=Path(out) / PENDING,
            )
            complete = True
        finally:
            line = {
                "started": began,
                "host_cpu": host_cpu(),  # the C reference's host: speedups vs cpu are its
                "tasks": len(chunk),
                "turns": len(scored),
                "complete": complete,
                "wall_s": round(time.perf_counter() - t0, 3),
                **{k: round(v, 3) for k, v in sorted(clock.items())},
                # of score_s: the evaluator's, the analysis' and the ranker's seconds
                **{
                    k: round(v - spent.get(k, 0.0), 3)
                    for k, v in sorted(getattr(scorer, "seconds", {}).items())
                },
            }
            append_lines(Path(out) / TIMING, [json.dumps(line)])
        (Path(out) / SCORED).unlink(missing_ok=True)  # the chunk's turns are all recorded
    for done_with in (PENDING, SCORED):  # every task recorded: nothing is pending
        (Path(out) / done_with).unlink(missing_ok=True)
    return len(todo)


class KeptResults:
    """A command's evaluator session (`execute.session.EvalSession`) whose results are also
    appended to `path` as each finishes (`execute.api.evaluate_batch`'s `out`). A batch cut
    short (Ctrl-C, a call's budget) keeps the candidates it had finished; a later session, a
    resumed run's, takes each from the file instead of running it again (the same task,
    candidate, evaluator settings, GPU and toolchain: the evaluator's result key; marked
    `cached`, as a hit of the evaluator's own result cache is). Anything else is the
    session's. Its `__call__` repeats `EvalSession.__call__` with `out` added; an `out` option
    on the session is to replace it once the ablation no longer pins the evaluator's code
    (bench/ablation/PROTOCOL.md)."""

    def __init__(self, session, path: str | Path) -> None:
        self.session = session
        self.path = Path(path)

    def __call__(self, jobs: list) -> list:
        from cudaperf.execute.api import evaluate_batch

        s, t0 = self.session, time.perf_counter()
        got = list(evaluate_batch(jobs, s.config, out=self.path, backend=s.backend))
        s.batches += 1
        s.seconds += time.perf_counter() - t0
        by_key = {(r.task_id, r.candidate_hash): r for r in got}
        return [by_key[(task.id, c.hash)] for task, c in jobs]

    def __getattr__(self, name: str):
        return getattr(self.session, name)


def _counting(into: list, then: Callable | None) -> Callable[[TurnRecord], None]:
    """An `on_turn` that keeps each turn record in `into`, then calls `then` (if any)."""

    def call(rec: TurnRecord) -> None:
        into.append(rec)
        if then is not None:
            then(rec)

    return call


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def read_timing(path: Path) -> list[dict]:
    """timing.jsonl's lines ([] when the file is absent, as in runs older than it); a last
    line cut by a kill mid-write is skipped (`jsonl.complete_lines`), any other bad line is
    a ValueError naming the file."""
    if not path.is_file():
        return []
    try:
        recs = [json.loads(x) for x in complete_lines(path.read_text(encoding="utf-8")) if x]
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a timing file written by cudaperf bench ({e})") from None
    if not all(isinstance(r, dict) for r in recs):
        raise ValueError(f"{path}: a line is not a JSON object; not written by cudaperf bench")
    return recs


def _read_run_json(rj: Path) -> tuple[dict, dict, dict[str, TaskMeta]]:
    """run.json's other keys, its settings and its tasks' metadata; ValueError in one line
    naming the file and the first problem when it is not one that `run_bench` wrote."""
    try:
        doc = json.loads(rj.read_text(encoding="utf-8"))
        if not isinstance(doc, dict):
            raise TypeError("not a JSON object")
        tasks = doc.pop("tasks")
        if not isinstance(tasks, dict):
            raise TypeError("'tasks' is not an object")
        meta = {k: TaskMeta.model_validate(v) for k, v in tasks.items()}
        settings = doc.pop("settings")
        if not isinstance(settings, dict):
            raise TypeError("'settings' is not an object")
        for k in ("model", "suite", "samples", "turns"):  # every report and compare reads them
            if k not in settings:
                raise KeyError(f"settings.{k}")
        if not all(isinstance(settings[k], int) for k in ("samples", "turns")):
            raise TypeError("'settings.samples' or 'settings.turns' is not a whole number")
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # one line, the first cause
        if isinstance(e, ValidationError):
            err = e.errors()[0]
            why = f"task field '{'.'.join(map(str, err['loc']))}': {err['msg']}"
        else:
            first = (str(e).splitlines() or [type(e).__name__])[0]
            why = f"no {e} field" if isinstance(e, KeyError) else first
        raise ValueError(
            f"{rj}: not a {RUN_JSON} written by `cudaperf bench run` ({why}); give a run "
            "folder it wrote, or run it again into a new --out"
        ) from None
    return doc, settings, meta


def read_run(path: str | Path) -> RunFiles:
    """A run folder written by `run_bench`; ValueError naming the problem if it is not one."""
    p = Path(path)
    rj = p / RUN_JSON
    if not rj.is_file():
        raise ValueError(f"{p}: no {RUN_JSON}; give a folder written by `cudaperf bench run --out`")
    doc, settings, meta = _read_run_json(rj)
    records = read_records(trajectory_file(p))
    return RunFiles(p, settings, meta, doc, records, read_timing(p / TIMING))
