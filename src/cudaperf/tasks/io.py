"""Reading and writing task sets: JSONL, Parquet, task directories, Hugging Face datasets.

Formats:
- **JSONL**: one `Task` as a JSON object per line (the canonical interchange format);
  `.jsonl.gz` is the same, gzip-compressed (written with a zero timestamp, so the same tasks
  always give the same bytes).
- **Parquet**: one row per task; top-level strings as columns, nested fields as JSON strings
  (so every field round-trips exactly and the file stays queryable by id/kind/family);
  zstd-compressed.
- **Task directory**: a folder with `task.json` (the task's fields, with `source_file` in
  place of `source` and `file` in place of each implementation's `code`) beside the files it
  names. This is how hand-written tasks (the bundled sample set) are authored. An optional
  `measurements.jsonl` beside it holds machine-written timings (one `Measurement` per line,
  with an `implementation` id). A folder of such folders is a task set.

Every reader raises `TaskFileError`, whose message names the file, the line (JSONL) or
task, the field, and what was expected — never a bare pydantic or JSON traceback.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cudaperf.tasks.model import Task

__all__ = [
    "TaskFileError",
    "explain",
    "dataset_path",
    "load_sample",
    "load_tasks",
    "sample_path",
    "save_jsonl",
    "save_parquet",
    "save_tasks",
    "to_hf_dataset",
]

_NESTED = ("signature", "configs", "tolerance", "implementations", "provenance")
MEASUREMENTS_FILE = "measurements.jsonl"  # per task folder: one Measurement per line


class TaskFileError(ValueError):
    """A task file that cannot be read; the message says where and how to fix it."""


def explain(err: ValidationError) -> str:
    """A task's validation errors in one line (the first three, each with its field)."""
    parts = []
    for e in err.errors()[:3]:
        loc = ".".join(str(x) for x in e["loc"]) or "(task)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "missing":
            msg = "required field is missing"
        elif e["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling)"
        elif e["type"] == "enum":
            msg = f"{msg}; got {e.get('input')!r}"
        parts.append(f"field '{loc}': {msg}")
    more = len(err.errors()) - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _validate(data: Any, where: str) -> Task:
    if not isinstance(data, dict):
        raise TaskFileError(
            f"{where}: expected a JSON object (one task), got {type(data).__name__}"
        )
    other = "task_id" in data or not any(k in data for k in ("id", "kind", "source", "entry"))
    if other:  # a row of another JSONL (results, candidates, a trajectory) or no task at all
        if "status" in data:
            what = "an evaluation result (`cudaperf eval --out`)"
        elif "task_id" in data:
            what = "a row about a task (its 'task_id'), such as a candidate or trajectory"
        else:
            what = f"a JSON object with fields {', '.join(sorted(data)[:5]) or '(none)'}"
        need = ", ".join(n for n, f in Task.model_fields.items() if f.is_required())
        raise TaskFileError(
            f"{where}: not a task but {what}; a task has the fields {need}: give a task file "
            "(e.g. one `cudaperf tasks export --out FILE` wrote)"
        )
    try:
        return Task.model_validate(data)
    except ValidationError as e:
        tid = data.get("id", "?")
        raise TaskFileError(f"{where} (task {tid!r}): {explain(e)}") from None


def _is_jsonl_gz(path: Path) -> bool:
    return path.name.endswith(".jsonl.gz")


def _read_jsonl(path: Path) -> list[Task]:
    try:
        return _read_jsonl_lines(path)
    except gzip.BadGzipFile:
        raise TaskFileError(
            f"{path}: not gzip data although the name ends in .gz; rename it to .jsonl if it "
            "is plain JSONL, or recompress it with gzip"
        ) from None
    except (EOFError, zlib.error):
        raise TaskFileError(f"{path}: the gzip data is cut short or corrupt; rewrite it") from None
    except UnicodeDecodeError as e:
        raise TaskFileError(
            f"{path}: not UTF-8 text (byte {e.object[e.start : e.start + 1]!r}: {e.reason}); "
            "save the file as UTF-8"
        ) from None
    except OSError as e:
        msg = f"{path}: cannot be read ({e.strerror}); check its permissions"
        raise TaskFileError(msg) from None


def _read_jsonl_lines(path: Path) -> list[Task]:
    tasks = []
    opener = gzip.open(path, "rt", encoding="utf-8") if _is_jsonl_gz(path) else None
    with opener or path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as e:
                raise TaskFileError(
                    f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno}); each line "
                    "must be one task as a JSON object"
                ) from None
            tasks.append(_validate(data, f"{path}:{lineno}"))
    return tasks


def _read_parquet(path: Path) -> list[Task]:
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as e:  # pyarrow raises several unrelated types for a bad file
        raise TaskFileError(f"{path}: not a readable Parquet file ({e})") from None
    tasks = []
    for i, row in enumerate(rows):
        for key in _NESTED:
            if isinstance(row.get(key), str):
                try:
                    row[key] = json.loads(row[key])
                except json.JSONDecodeError as e:
                    raise TaskFileError(
                        f"{path}: row {i}: column '{key}' is not JSON ({e.msg}); each nested "
                        "field is stored as JSON text: rewrite the file with `cudaperf tasks "
                        "export`"
                    ) from None
        tasks.append(_validate(row, f"{path}: row {i}"))
    return tasks


def _read_task_dir(folder: Path) -> Task:
    meta_path = folder / "task.json"
    try:
        data = json.loads(meta_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise TaskFileError(f"{meta_path}:{e.lineno}: not valid JSON ({e.msg})") from None
    except UnicodeDecodeError:
        raise TaskFileError(f"{meta_path}: not UTF-8 text; save it as UTF-8") from None
    if not isinstance(data, dict):
        raise TaskFileError(f"{meta_path}: expected a JSON object")

    def read(name: str, field: str) -> str:
        p = folder / name
        if not p.is_file():
            raise TaskFileError(f"{meta_path}: field '{field}' names {name!r}, which is not a file")
        try:
            return p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            msg = f"{p} (field '{field}'): not UTF-8 text; save it as UTF-8"
            raise TaskFileError(msg) from None

    if "source_file" in data:
        data["source"] = read(data.pop("source_file"), "source_file")
    impls = []
    for k, impl in enumerate(data.get("implementations", [])):
        if isinstance(impl, dict) and "file" in impl:
            impl = dict(impl)
            impl["code"] = read(impl.pop("file"), f"implementations.{k}.file")
        impls.append(impl)
    _merge_measurements(folder / MEASUREMENTS_FILE, impls)
    if impls:
        data["implementations"] = impls
    return _validate(data, str(meta_path))


def _merge_measurements(path: Path, impls: list) -> None:
    """Add the rows of a task folder's measurements.jsonl to its implementations' dicts."""
    if not path.is_file():
        return
    by_id = {i.get("id"): i for i in impls if isinstance(i, dict)}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            impl = by_id[row.pop("implementation")]
        except (json.JSONDecodeError, KeyError, AttributeError, TypeError):
            raise TaskFileError(
                f"{path}:{n}: expected a JSON object whose 'implementation' names one of "
                f"{sorted(k for k in by_id if k)}"
            ) from None
        impl.setdefault("measurements", []).append(row)


def load_tasks(path: str | Path) -> list[Task]:
    """Load a task set from a .jsonl, .jsonl.gz or .parquet file, a task directory, or a folder
    of them."""
    p = Path(path)
    if not p.exists():
        raise TaskFileError(
            f"{p}: no such file or directory; pass a .jsonl, .parquet or task folder"
        )
    if p.is_dir():
        if (p / "task.json").is_file():
            return [_read_task_dir(p)]
        subdirs = sorted(d for d in p.iterdir() if (d / "task.json").is_file())
        files = sorted(
            f for f in p.iterdir() if f.suffix in (".jsonl", ".parquet") or _is_jsonl_gz(f)
        )
        if not subdirs and not files:
            raise TaskFileError(f"{p}: folder holds no task.json folders, .jsonl or .parquet files")
        tasks = [_read_task_dir(d) for d in subdirs]
        for f in files:
            tasks.extend(load_tasks(f))
        _check_unique_ids(tasks, p)
        return tasks
    if p.suffix == ".jsonl" or _is_jsonl_gz(p):
        tasks = _read_jsonl(p)
    elif p.suffix == ".parquet":
        tasks = _read_parquet(p)
    elif p.name == "task.json":
        return [_read_task_dir(p.parent)]
    else:
        raise TaskFileError(
            f"{p}: unknown file type {p.suffix!r}; use .jsonl, .jsonl.gz, .parquet or a folder"
        )
    _check_unique_ids(tasks, p)
    return tasks


def _check_unique_ids(tasks: list[Task], where: Path) -> None:
    seen: set[str] = set()
    for t in tasks:
        if t.id in seen:
            raise TaskFileError(
                f"{where}: task id {t.id!r} appears more than once; ids must be unique"
            )
        seen.add(t.id)


def sample_path() -> Path:
    """The folder of the bundled sample set (inside the installed package)."""
    return Path(str(resources.files("cudaperf.tasks") / "sample"))


def dataset_path() -> Path | None:
    """The measured CudaPerf dataset: $CUDAPERF_DATASET, else `data/tasks.jsonl.gz` of the
    source checkout this package runs from, else of the current folder; None when absent
    (a wheel install without the checkout)."""
    env = os.environ.get("CUDAPERF_DATASET")
    if env:
        return Path(env)
    for root in (Path(__file__).resolve().parents[3], Path.cwd()):
        p = root / "data" / "tasks.jsonl.gz"
        if p.is_file():
            return p
    return None


def load_sample() -> list[Task]:
    """The bundled sample set: hand-written C→CUDA and PyTorch→CUDA tasks."""
    return load_tasks(sample_path())


def task_row(task: Task) -> dict[str, Any]:
    """A flat row: strings as they are, nested fields as JSON strings (Parquet / HF)."""
    data = task.model_dump(mode="json")
    for key in _NESTED:
        data[key] = json.dumps(data[key], sort_keys=True)
    return data


def save_jsonl(tasks: Iterable[Task], path: str | Path) -> int:
    """Write tasks as JSONL (one per line), gzip-compressed when the name ends in .jsonl.gz
    (deterministic bytes: no timestamp or file name in the gzip header). Returns the number
    written."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with p.open("wb") as raw:
        gz = (
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if _is_jsonl_gz(p) else None
        )
        sink = gz or raw
        for t in tasks:
            sink.write((json.dumps(t.model_dump(mode="json"), sort_keys=True) + "\n").encode())
            n += 1
        if gz is not None:
            gz.close()
    return n


def save_parquet(tasks: Iterable[Task], path: str | Path) -> int:
    """Write tasks as Parquet (one row per task). Returns the number written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [task_row(t) for t in tasks]
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), p, compression="zstd")
    return len(rows)


def save_tasks(tasks: Iterable[Task], path: str | Path) -> int:
    """Write tasks as JSONL, gzipped JSONL or Parquet, chosen by the file's name (.jsonl,
    .jsonl.gz, .parquet). Returns the number written."""
    suffix = Path(path).suffix
    if suffix == ".jsonl" or _is_jsonl_gz(Path(path)):
        return save_jsonl(tasks, path)
    if suffix == ".parquet":
        return save_parquet(tasks, path)
    raise TaskFileError(
        f"{path}: unknown file type {suffix!r}; use a .jsonl or .parquet name (or .jsonl.gz)"
    )


def to_hf_dataset(tasks: Iterable[Task]):
    """A Hugging Face `datasets.Dataset` with one row per task (needs `datasets`)."""
    try:
        import datasets
    except ImportError:
        raise ImportError(
            "exporting to a Hugging Face dataset needs the `datasets` package: "
            "pip install 'cudaperf[train]' (or pip install datasets)"
        ) from None
    return datasets.Dataset.from_list([task_row(t) for t in tasks])


def write_dir_measurements(folder: str | Path, tasks: list[Task]) -> int:
    """Write `tasks`' implementation measurements as `measurements.jsonl` in each task folder.

    task.json stays as it was written by hand; the loader merges the measurements file back
    into the implementations. Returns the number of files written.
    """
    by_id = {t.id: t for t in tasks}
    folder = Path(folder)
    metas = [folder / "task.json"] if (folder / "task.json").is_file() else []
    metas += sorted(folder.glob("*/task.json"))
    n = 0
    for meta in metas:
        task = by_id.get(json.loads(meta.read_text(encoding="utf-8")).get("id"))
        if task is None:
            continue
        lines = [
            json.dumps({"implementation": impl.id, **m.model_dump(mode="json")}, sort_keys=False)
            for impl in task.implementations
            for m in impl.measurements
        ]
        (meta.parent / MEASUREMENTS_FILE).write_text("".join(x + "\n" for x in lines))
        n += 1
    return n
