"""Helpers shared by the CLI commands: the one error path, output, paths, the task set.

Every user mistake ends in `fail` (or a `UserError` raised anywhere under a command), which the
app's root group (`cudaperf.cli.group.CliGroup`) turns into one `error: ...` line on
stderr and a non-zero exit; a traceback appears only with `cudaperf --debug`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console

from cudaperf.fields import wall_budget_problem
from cudaperf.tasks.io import TaskFileError, dataset_path, load_sample, load_tasks
from cudaperf.tasks.model import Task

# Human output and progress go to stderr so that `--json` leaves stdout to one JSON document.
console = Console(stderr=True)
stdout = Console()

GenerationOpt = typer.Option(
    "auto",
    "--generation",
    help="Hugging Face models' sampling: auto (compile on CUDA, dynamic elsewhere), dynamic, "
    "static, compile (static cache + torch.compile) or continuous (continuous batching).",
)
SAMPLE_DEFAULT = "the bundled sample set (a demo)"
DATASET_DEFAULT = "the measured dataset data/tasks.jsonl.gz (or $CUDAPERF_DATASET)"


class UserError(Exception):
    """A mistake the user can fix; the message names the file/field/option and the fix."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = 2) -> NoReturn:
    """Stop the command with a one-line error (what is wrong and how to fix it)."""
    raise UserError(message, code)


def emit_json(obj: Any) -> None:
    """Print exactly one JSON document to stdout."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def load_task_set(path: Path | None, sample: bool = False, default: str = "sample") -> list[Task]:
    """The tasks at PATH; with no PATH the command's default task set.

    `default`: "sample" (demo commands: the bundled sample set) or "dataset" (commands that
    need measurements: the measured dataset, an error naming the fix when this install has
    none). `sample` (--sample) forces the sample set.
    """
    if path is not None and sample:
        fail("give either a PATH or --sample, not both")
    try:
        if path is not None:
            return read_tasks(path)
        if sample or default == "sample":
            return load_sample()
        return read_tasks(measured_dataset())
    except TaskFileError as e:
        fail(str(e))


def read_tasks(path: Path) -> list[Task]:
    """The tasks of a task file or folder the user named: a `TaskFileError` for a file that
    cannot be read, and one for a file that holds no task (an empty file would otherwise
    make every command succeed with nothing done)."""
    tasks = load_tasks(path)
    if not tasks:
        raise TaskFileError(
            f"{path} holds no tasks; give a task file with at least one task "
            "(one JSON object per line)"
        )
    return tasks


def measured_dataset() -> Path:
    """The measured dataset (default of the commands that need measurements), or a one-line
    error saying how to name a task file instead."""
    found = dataset_path()
    if found is None:
        fail(
            "no measured dataset here (data/tasks.jsonl.gz of a source checkout, or "
            "$CUDAPERF_DATASET); pass the task file explicitly (PATH or --tasks)"
        )
    return found


def select_tasks(tasks: list[Task], ids: list[str] | None) -> list[Task]:
    """Tasks whose id equals, or ends with, one of `ids` (all when none are given); each id
    must name exactly one task (an exact id wins over suffix matches)."""
    if not ids:
        return tasks
    return [select_task(tasks, i) for i in dict.fromkeys(ids)]


def select_task(tasks: list[Task], task_id: str, option: str = "task id") -> Task:
    """The one task `task_id` names: its full id, or a unique ending such as `saxpy`."""
    exact = [t for t in tasks if t.id == task_id]
    if exact:
        return exact[0]
    found = [t for t in tasks if t.id.endswith("/" + task_id)]
    if not found:
        fail(
            f"no task {task_id!r} ({option}): no id equals it or ends with /{task_id}; run "
            "`cudaperf tasks list` to see the ids"
        )
    if len(found) > 1:
        shown = ", ".join(t.id for t in found[:3])
        fail(
            f"{option} {task_id!r} is ambiguous: it matches {len(found)} tasks ({shown}, ...); "
            "give the full id"
        )
    return found[0]


def package_dir() -> Path:
    """The installed cudaperf package: the bundled sample set and the packaged ranker."""
    return Path(__file__).resolve().parents[1]


def in_package(path: Path) -> bool:
    """Whether `path` is the installed package's folder or lies inside it."""
    pkg, p = package_dir(), Path(path).expanduser().resolve()
    return p == pkg or pkg in p.parents


def check_outside_package(path: Path, option: str) -> None:
    """Fail when `path` lies inside the installed package: an output written there would
    change the bundled sample set or the packaged ranker (updating them on purpose has its
    own flags: `tasks attach --force`, `rank train --ship --force`)."""
    if in_package(path):
        pkg = package_dir()
        fail(
            f"{option} {path} is inside the installed cudaperf package ({pkg}), which holds "
            "the bundled sample set and the packaged ranker; choose a path outside it"
        )


def check_out_file(path: Path | None, option: str, suffixes: tuple[str, ...] = ()) -> None:
    """Fail before any work when `path` cannot be written as a file: an existing folder, a
    path under a file, a place this user cannot write, a name without one of `suffixes`, or
    a place inside the installed package."""
    if path is None:
        return
    check_outside_package(path, option)
    if suffixes and not str(path).endswith(suffixes):
        names = " or ".join(filter(None, (", ".join(suffixes[:-1]), suffixes[-1])))
        fail(f"{option} {path}: use a {names} file name")
    if path.is_dir():
        fail(f"{option} {path} is a folder; give a file name inside it")
    _check_parent(path, option)
    if path.exists() and not os.access(path, os.W_OK):
        fail(f"{option} {path}: the file is not writable; choose another path")


def check_not_replacing(path: Path, option: str, force: bool) -> None:
    """Fail before any work when `path` already holds something (a file, or a folder with
    anything in it) and `force` is off: a default that replaces what a user made (a measured
    task set, results) loses it; --force says that is meant."""
    p = path.expanduser()
    full = p.is_file() or (p.is_dir() and any(p.iterdir()))
    if full and not force:
        held = "a folder with files" if p.is_dir() else "a file"
        fail(f"{option} {path} already holds {held}; give a new path, or add --force to replace it")


def check_out_dir(path: Path | None, option: str) -> None:
    """Fail before any work when `path` cannot be used as a (possibly new) folder, or lies
    inside the installed package."""
    if path is None:
        return
    path = path.expanduser()
    check_outside_package(path, option)
    if path.exists() and not path.is_dir():
        fail(f"{option} {path} is a file; give a folder path")
    if path.is_dir():
        _check_parent(path / "x", option)
        return
    _check_parent(path, option)


def check_wall_budget(seconds: float | None) -> None:
    """`--wall-budget` (train sft, bench run), before any work: seconds > 0 and finite, or
    absent."""
    if problem := wall_budget_problem(seconds):
        fail(problem)


def check_cache_dir(path: Path | None) -> None:
    """--cache-dir as check_out_dir checks it, and the evaluator's default when it is not
    given (a home that cannot be written failed later with a traceback per candidate)."""
    if path is not None:
        check_out_dir(path, "--cache-dir")
        return
    from cudaperf.execute.config import EvalConfig

    try:
        check_out_dir(EvalConfig().cache_dir, "the default --cache-dir")
    except UserError as e:
        fail(f"{e}; or give --cache-dir DIR", e.code)


def _check_parent(path: Path, option: str) -> None:
    """The nearest existing ancestor of `path` must be a writable folder."""
    anc = path.expanduser().absolute().parent
    while not anc.exists():
        anc = anc.parent
    if not anc.is_dir():
        fail(f"{option} {path}: {anc} is a file, so nothing can be written under it")
    try:  # a real attempt: os.access says yes to root even where nothing can be created
        tempfile.TemporaryFile(dir=anc, prefix=".cudaperf-write-check-").close()
    except OSError:
        fail(f"{option} {path}: nothing can be written in {anc}; choose another path")


def read_text(path: Path, what: str) -> str:
    """A UTF-8 text file, or a one-line error naming it and the fix."""
    if not path.is_file():
        fail(f"{what} {path} does not exist or is not a file; give the path of a text file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        fail(f"{what} {path} is not UTF-8 text (byte {e.start}); save it as UTF-8")
    except OSError as e:
        fail(f"{what} {path} cannot be read ({e.strerror}); check its permissions")


def read_source(path: Path, what: str) -> str:
    """A candidate's source file (.cu, .py, a reply), or one line when it is a data file: a
    task, results or candidates file once went through as CUDA ('score 1.000', a kernel table
    of the strings inside it)."""
    if path.name.endswith((".jsonl", ".json", ".gz", ".parquet")):
        fail(f"{what} {path} is a data file, not source code; give the candidate's .cu or .py")
    text = read_text(path, what)
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    try:
        is_json = isinstance(json.loads(first), dict)
    except ValueError:
        is_json = False
    if is_json:
        fail(f"{what} {path} holds JSON, not source code; give the candidate's .cu or .py")
    return text


def read_gzip_text(path: Path, what: str) -> str:
    """A gzipped UTF-8 text file (the project's `*.jsonl.gz`), or one line naming the problem."""
    import gzip
    import zlib

    if not path.is_file():
        fail(f"{what} {path} does not exist or is not a file; give the path of a text file")
    try:
        with gzip.open(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError, zlib.error) as e:
        fail(f"{what} {path}: not a readable gzip file ({e}); give a .jsonl or a .jsonl.gz")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"{what} {path} is not gzipped UTF-8 text (byte {e.start}); give a .jsonl.gz of text")


def check_toolchain(compile_only: bool | None, nvcc: str = "nvcc") -> None:
    """Fail before any work when the evaluator cannot run here: `--full` without a GPU, or no
    nvcc (every candidate would fail to build, and the toolchain, not the code, is at fault)."""
    from cudaperf.execute.build import detect_gpus

    if compile_only is False and not detect_gpus():
        fail(
            "--full needs an NVIDIA GPU and nvidia-smi lists none; drop --full (or pass "
            "--compile-only) to only compile here, or run on a GPU machine",
            code=1,
        )
    if shutil.which(nvcc) is None:
        fail(
            f"{nvcc} is not on PATH: candidates cannot be compiled; install the CUDA toolkit "
            "or add its bin/ folder (e.g. /usr/local/cuda/bin) to PATH",
            code=1,
        )


def check_arch(arch: str | None, nvcc: str = "nvcc", option: str = "--arch") -> None:
    """Fail before any work when nvcc cannot build for `arch` (every candidate would end
    compile_error "Unsupported gpu architecture", blamed on the code); nothing to check when
    `arch` is not given or nvcc is missing (check_toolchain says so) or cannot list codes."""
    import re
    import subprocess

    exe = shutil.which(nvcc) if arch else None
    if exe is None:
        return
    try:
        out = subprocess.run(
            [exe, "--list-gpu-code"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return
    codes = re.findall(r"\bsm_\w+", out)
    base = re.sub(r"(?<=\d)[af]$", "", arch)  # sm_90a, sm_100f: the family of sm_90, sm_100
    if codes and arch not in codes and base not in codes:
        fail(
            f"{option} {arch}: this nvcc cannot build for it; give one of "
            f"{', '.join(sorted(set(codes), key=lambda c: (len(c), c)))}"
        )


# a hub model id as the hub accepts it: name or org/name, letters, digits, '-', '_', '.'
_HUB_NAME = re.compile(r"(?![-.])[\w.-]{1,96}(?<![-.])(/(?![-.])[\w.-]{1,96}(?<![-.]))?")


def check_model_spec(spec: str, option: str, gguf_file: str | None = None) -> None:
    """Fail when a model that names a local path (a .gguf file, or a name that starts with /,
    ./, ../ or ~) does not exist, instead of letting the hub reject it as a model id, and
    when a folder is no checkpoint (no config.json; a --gguf-file inside it aside)."""
    if spec.startswith(("http://", "https://", "scripted:")) or spec == "smollm2":
        return
    p = Path(spec).expanduser()
    looks_local = spec.startswith(("/", "./", "../", "~")) or spec.endswith(".gguf")
    fix = "give a checkpoint folder, a .gguf file, a Hugging Face model name (org/name), or smollm2"
    if looks_local and not p.exists():
        fail(f"{option} {spec}: no such file or folder; {fix}")
    if not looks_local and not p.exists() and not _HUB_NAME.fullmatch(spec):
        fail(f"{option} {spec}: no such file or folder, nor a Hugging Face model name; {fix}")
    if p.is_file() and not p.stat().st_size:
        fail(f"{option} {spec}: the file is empty; {fix}")
    if p.is_file() and p.suffix != ".gguf":  # from_pretrained read it as a config.json
        fail(f"{option} {spec}: a file, but not a .gguf model file; {fix}")
    if p.is_dir() and gguf_file is None and not (p / "config.json").is_file():
        what = (
            "a LoRA adapter (pass it with --adapter, on top of its base model)"
            if (p / "adapter_config.json").is_file()
            else "no checkpoint"
        )
        fail(f"{option} {spec}: the folder holds no config.json, so it is {what}; {fix}")


def check_adapter(adapter: str | Path | None, model: str, option: str = "--adapter") -> None:
    """Fail before any model is loaded when `adapter` is no adapter folder (no
    adapter_config.json there), or when `model` cannot take one (a server or scripted model)."""
    if adapter is None:
        return
    if model.startswith(("http://", "https://", "scripted:")):
        fail(f"{option} works with a Hugging Face --model (name or path), not {model!r}")
    p = Path(adapter).expanduser()
    if not (p / "adapter_config.json").is_file():
        what = "no such folder" if not p.exists() else "no adapter_config.json there"
        fail(
            f"{option} {adapter}: {what}; give the folder `cudaperf train` saved the adapter "
            "to (its final/ or a checkpoint-N/ folder)"
        )


def check_server(url: str) -> None:
    """Fail at once when nothing answers at an OpenAI-compatible server's URL."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(url.rstrip("/") + "/models", timeout=5).close()  # noqa: S310
    except urllib.error.HTTPError:
        return  # something answers (maybe asking for a key): the server is up
    except (urllib.error.URLError, OSError) as e:
        why = getattr(e, "reason", e)
        fail(
            f"--model {url}: no server answers there ({why}); start the OpenAI-compatible "
            "server (e.g. `vllm serve MODEL`) or fix the URL",
            code=1,
        )


def jsonl_rows(path: Path, what: str, hint: str, cut_ok: bool = False):
    """(line number, parsed value) for every non-blank line of a JSONL file; a line that is
    not JSON fails naming the file, the line and `hint` (what to give instead). `cut_ok`: a
    file that a run appends to, whose last line a run stopped mid-write (or one still
    writing) may have cut short (`cudaperf.jsonl.cut_line`): that line is left out, with a
    note, as the library's own readers leave it out."""
    from cudaperf.jsonl import cut_line

    text = read_gzip_text(path, what) if path.name.endswith(".gz") else read_text(path, what)
    if cut_ok and (cut := cut_line(text)) is not None:
        text = text[: len(text) - len(cut)]
        console.print(
            f"note: {what} {path}: its last line is cut short (a run stopped, or still "
            "running, in the middle of writing it); it is left out",
            highlight=False,
            soft_wrap=True,
        )
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            fail(f"{what} {path}:{n}: not valid JSON ({e.msg}); {hint}")
        yield n, row


def read_eval_results(path: Path, what: str = "RESULTS", allow_empty: bool = False) -> list[dict]:
    """The rows of a results JSONL written by `cudaperf eval --out`: each a JSON object with
    a `status` of the evaluator's. Fails on a file that is not one (a task file, a trajectory,
    garbage) or, unless `allow_empty`, holds no results."""
    rows = []
    hint = "give the JSONL that `cudaperf eval --out` wrote"
    for n, row in jsonl_rows(path, what, hint, cut_ok=True):  # eval appends: a cut last line
        if why := _not_a_result(row):
            fail(
                f"{what} {path}:{n} is not an evaluation result ({why}); give the JSONL that "
                "`cudaperf eval --out` wrote"
            )
        if bad := _bad_result_field(row):
            fail(
                f"{what} {path}:{n}: {bad}; give the JSONL that `cudaperf eval --out` wrote "
                "(unedited)"
            )
        rows.append(row)
    if not rows and not allow_empty:
        fail(f"{what} {path} holds no results; run `cudaperf eval ... --out {path}` first")
    return rows


def check_results_out(path: Path | None, option: str = "--out") -> list[dict]:
    """Fail before any work when `path`, a results JSONL that a run appends to (and resumes
    from: rows already there are skipped), exists and holds something other than
    evaluation results: a task or candidates file, a trajectory, text, binary data. Lines
    that are not JSON (cut short by an interrupted run) are allowed beside result rows.
    Returns the result rows already there (for `check_results_settings`)."""
    if path is None or not path.is_file() or not path.stat().st_size:
        return []
    fix = (
        f"{option} is appended to and resumed from, so give a new file (or the JSONL an "
        "earlier run of this command wrote)"
    )
    results = []
    for n, line in enumerate(read_text(path, option).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by an interruption (or a file of text: refused below)
        if why := _not_a_result(row):
            fail(f"{option} {path}:{n} is not an evaluation result ({why}); {fix}")
        results.append(row)
    if not results:
        fail(f"{option} {path} holds no evaluation results; {fix}")
    return results


def check_results_settings(
    rows: list[dict],
    path: Path | None,
    compile_only: bool | None,
    arch: str | None,
    option: str = "--out",
) -> None:
    """Fail before any work when the results already in `path` (which this run appends to;
    `rows`, as `check_results_out` returned them) were made in another mode (compile-only vs
    on a GPU) or for another --arch: appended, they would be counted beside these (a
    candidate twice, compile-only rows as failures). `compile_only` None: the evaluator's
    choice here (compile-only without a GPU)."""
    if not rows:
        return
    from cudaperf.execute.build import detect_gpus

    if compile_only is None:
        compile_only = not detect_gpus()
    mode = "compile-only" if compile_only else "full"
    other = [f"mode {m}" for m in sorted({str(r.get("mode") or "") for r in rows} - {mode, ""})]
    if arch:
        archs = {str(r.get("arch") or "") for r in rows}
        other += [f"--arch {a}" for a in sorted(archs - {arch, ""})]
    if other:
        fail(
            f"{option} {path} holds results made with other settings ({', '.join(other)}; this "
            f"run: mode {mode}{f', --arch {arch}' if arch else ''}); give a new {option}"
        )


def _not_a_result(row) -> str | None:
    """Why a parsed JSONL row is no evaluation result (no `status` of the evaluator's), or
    None when it is one."""
    from cudaperf.execute.types import Status

    status = row.get("status") if isinstance(row, dict) else None
    if status in {s.value for s in Status}:
        return None
    return "no 'status'" if status is None else f"status {status!r}"


_FIELD_CHECKS: dict[str, Any] = {}


def _bad_result_field(row: dict) -> str | None:
    """What is wrong with a result row's fields, by the evaluator's own types (`ExecResult`):
    a top-level field of the wrong type, `configs` that are not a list of objects (their
    insides, missing fields and fields from other versions are left alone); None when
    nothing is."""
    from pydantic import TypeAdapter, ValidationError

    from cudaperf.execute.types import ExecResult

    configs = row.get("configs", [])
    if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs):
        return "field 'configs' is not a list of objects"
    for key, value in row.items():
        field = ExecResult.model_fields.get(key)
        if field is None or key in ("configs", "protections"):
            continue
        if key not in _FIELD_CHECKS:
            _FIELD_CHECKS[key] = TypeAdapter(field.annotation)
        try:  # as JSON, strictly: as the evaluator wrote it (no "1.5" for a number)
            _FIELD_CHECKS[key].validate_json(json.dumps(value), strict=True)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(map(str, (key, *err["loc"])))
            return f"field '{where}': {err['msg']}"
    return None
