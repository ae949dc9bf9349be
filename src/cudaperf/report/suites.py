"""Benchmark suites: what `--suite` names, and the fixed subsets `--limit` and friends take.

A suite is one of:

- a task file or folder (anything `tasks.io.load_tasks` reads); `sample`: the bundled sample
  set (12 hand-written tasks, for a quick check);
- `test-families` (formerly `heldout`, still accepted: `RENAMED`): the tasks of our dataset
  (`data/tasks.jsonl.gz`, or `dataset=`) whose family is in the **test** split of the
  `splits.json` beside it. Validation families are not in it:
  they are for choosing settings, and a benchmark number must not have been chosen on;
- `train-unseen`: unseen tasks of **training** families: exactly the `unseen_tasks` of the
  holdout manifest a training run wrote (`cudaperf train ... --out RUN` writes
  `RUN/holdout.json`; give it as the suite's path). Training held those tasks out of every
  row and decision, so the suite measures generalisation to new instances of trained
  families for that model; compare other models (untrained, scripted) on the same manifest.
  Every id must be a dataset task of a training-split family;
- an imported public suite, read from the user's own checkout at `suite_path` through
  `cudaperf.tasks.importers`: `kernelbench` (all of levels 1-3) or `kernelbench:1`,
  `kernelbench:1,2`; `babeltower` (the test-set JSONL); `polybench-acc`; `pareval`.

`select` draws the fixed subset: tasks ordered by a seeded hash of their id, families taken
round-robin (so a `--limit` covers as many families as it can), at most `per_family` each.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from cudaperf.tasks.io import dataset_path, load_sample, load_tasks, sample_path
from cudaperf.tasks.model import Task
from cudaperf.tasks.splits import read_splits

__all__ = [
    "NAMED",
    "RENAMED",
    "Suite",
    "load_suite",
    "load_suites",
    "needs_path",
    "select",
]

IMPORTED = ("kernelbench", "babeltower", "polybench-acc", "pareval")
NAMED = ("sample", "test-families", "train-unseen", *IMPORTED)
# Old suite names, still read: "heldout" also named held-out configs and, in `rank`, the
# validation + test families together; as a suite it meant the test families only.
RENAMED = {"heldout": "test-families"}
_WITH_PATH = (*IMPORTED, "train-unseen")  # suites that read a path the user gives


@dataclass(frozen=True)
class Suite:
    """The tasks of a suite and how they were found (recorded in run.json)."""

    label: str  # e.g. "test-families", "kernelbench:1", "tasks.jsonl"
    tasks: list[Task]  # in the suite's order, before `select`
    source: str  # where they were read from
    skipped: dict[str, int]  # importer skip reasons -> count (empty for files)


def _dataset(dataset: Path | None) -> tuple[list[Task], dict[str, str], Path]:
    if dataset is not None and not Path(dataset).exists():
        raise FileNotFoundError(
            f"--dataset {dataset}: no such file or folder; give the dataset's path "
            "(data/tasks.jsonl.gz of the cudaperf checkout, with splits.json beside it)"
        )
    path = dataset or dataset_path()
    if path is None or not Path(path).exists():
        raise FileNotFoundError(
            "the test-families and train-unseen suites read our dataset (data/tasks.jsonl.gz); run "
            "from the cudaperf checkout or pass --dataset PATH"
        )
    path = Path(path)
    split_file = (path if path.is_dir() else path.parent) / "splits.json"
    if not split_file.is_file():
        raise FileNotFoundError(
            f"{split_file}: no splits file beside the dataset {path}; give a dataset with the "
            "splits.json `cudaperf data build` wrote beside it (its test split picks the tasks)"
        )
    return load_tasks(path), read_splits(split_file), path


def _train_unseen(manifest: Path | None, dataset: Path | None) -> Suite:
    if manifest is None:
        raise ValueError(
            "--suite train-unseen reads a training run's holdout manifest: add --suite-path "
            "RUN/holdout.json (written by `cudaperf train`)"
        )
    try:
        ids = json.loads(Path(manifest).read_text(encoding="utf-8"))["unseen_tasks"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"{manifest}: not a holdout manifest with unseen_tasks ({e}); give the "
            "holdout.json of a `cudaperf train` run"
        ) from None
    tasks, splits, path = _dataset(dataset)
    by_id = {t.id: t for t in tasks}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise ValueError(
            f"{manifest}: {len(missing)} unseen task(s) are not in {path} (e.g. {missing[0]}); "
            "give the dataset the run trained on (--dataset)"
        )
    chosen = [by_id[i] for i in ids]
    bad = sorted({t.family for t in chosen if splits.get(t.family) != "train"})
    if bad:
        raise ValueError(
            f"{manifest}: tasks of non-training families ({', '.join(bad)}); a "
            "train-unseen suite holds training-family tasks only"
        )
    return Suite("train-unseen", chosen, f"{manifest} over {path}", {})


def _imported(name: str, levels: str, path: Path | None) -> Suite:
    from cudaperf.tasks.importers import IMPORTERS

    if path is None:
        raise ValueError(f"--suite {name} reads your own checkout: add --suite-path PATH")
    opts: dict = {}
    if name == "kernelbench":
        lv = tuple(int(x) for x in (levels or "1,2,3").split(","))
        if not set(lv) <= {1, 2, 3}:
            raise ValueError(
                f"kernelbench levels {levels!r}: use 1, 2 and/or 3, e.g. kernelbench:1"
            )
        opts["levels"] = lv
    report = IMPORTERS[name](path, **opts)
    label = f"{name}:{levels}" if levels else name
    return Suite(label, report.tasks, str(path), report.summary()["reasons"])


def load_suite(spec: str, suite_path: Path | None = None, dataset: Path | None = None) -> Suite:
    """The suite `spec` names (see the module doc). Raises ValueError or FileNotFoundError
    with a message that says how to fix the spec."""
    m = re.fullmatch(r"(kernelbench)(?::([\d,]+))?", spec)
    if m:
        return _imported("kernelbench", m.group(2) or "", suite_path)
    if spec in IMPORTED:
        return _imported(spec, "", suite_path)
    if spec == "sample":
        return Suite("sample", load_sample(), str(sample_path()), {})
    spec = RENAMED.get(spec, spec)
    if spec == "test-families":
        tasks, splits, path = _dataset(dataset)
        return Suite(spec, [t for t in tasks if splits.get(t.family) == "test"], str(path), {})
    if spec == "train-unseen":
        return _train_unseen(suite_path, dataset)
    p = Path(spec)
    if not p.exists():
        raise ValueError(
            f"--suite {spec}: not a task file or folder, nor a suite name; use a path or one of "
            f"{', '.join(NAMED)} (kernelbench:1 for one level)"
        )
    return Suite(p.name, load_tasks(p), str(p), {})


def needs_path(spec: str) -> bool:
    """True for the suites that read a path (`--suite-path`): the imported ones (the user's
    checkout) and train-unseen (a training run's holdout manifest)."""
    return spec.split(":", 1)[0] in _WITH_PATH


def load_suites(specs: list[str], paths: list[Path], dataset: Path | None = None) -> list[Suite]:
    """Several suites at once; `paths` go, in order, to the specs that need one
    (`needs_path`). Raises ValueError when the counts do not match or a task id repeats."""
    wanted = [s for s in specs if needs_path(s)]
    if len(paths) != len(wanted):
        raise ValueError(
            f"{len(wanted)} suite(s) read a checkout ({', '.join(wanted) or 'none'}) but "
            f"{len(paths)} --suite-path given; give one --suite-path per such --suite, in order"
        )
    given = iter(paths)
    suites = [load_suite(s, next(given) if needs_path(s) else None, dataset) for s in specs]
    ids = [t.id for s in suites for t in s.tasks]
    if len(set(ids)) < len(ids):
        raise ValueError("the suites share task ids (a suite given twice?); give each once")
    return suites


def _order(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def select(
    tasks: list[Task], limit: int | None = None, per_family: int | None = None, seed: int = 0
) -> list[Task]:
    """A fixed subset: per family, tasks in seeded-hash order, at most `per_family`; families
    interleaved round-robin (families in seeded-hash order); the first `limit` of that.
    The same arguments give the same tasks on any machine, whatever the input order."""
    for name, v in (("limit", limit), ("per_family", per_family)):
        if v is not None and v < 1:
            raise ValueError(f"{name}={v}; give a positive number")
    fams: dict[str, list[Task]] = {}
    for t in sorted(tasks, key=lambda t: _order(seed, t.id)):
        fams.setdefault(t.family, []).append(t)
    lists = [fams[f][:per_family] for f in sorted(fams, key=lambda f: _order(seed, f))]
    out = [lst[r] for r in range(max(map(len, lists), default=0)) for lst in lists if r < len(lst)]
    return out[:limit] if limit is not None else out
