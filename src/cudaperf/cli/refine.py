"""`cudaperf refine`: multi-turn refinement of one task with a model; writes the trajectory."""

from __future__ import annotations

import itertools
from pathlib import Path

import typer
from pydantic import ValidationError
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from cudaperf.cli.common import (
    SAMPLE_DEFAULT,
    check_adapter,
    check_model_spec,
    check_out_dir,
    check_out_file,
    check_server,
    console,
    fail,
    load_task_set,
    select_task,
    stdout,
)
from cudaperf.cli.options import PresetOpt, RewardOpt, reward_config
from cudaperf.cli.reward import RankerOpt, scorer_for
from cudaperf.refine.scripted import SCRIPTED
from cudaperf.tasks.io import explain
from cudaperf.tasks.model import Task, TaskKind

__all__ = ["refine_command"]


def _lengths(items: list[str]) -> dict[str, str]:
    """--length ARRAY=EXPR items; one that is not NAME=EXPR (an item without '=' was dropped
    without a word) or names an array twice is one line."""
    lens: dict[str, str] = {}
    for kv in items:
        name, eq, expr = (x.strip() for x in kv.partition("="))
        if not eq or not name or not expr:
            fail(f"--length {kv!r}: write ARRAY=EXPR, e.g. x=n (the array's element count)")
        if name in lens:
            fail(f"--length: array {name!r} is given twice; give each array's length once")
        lens[name] = expr
    return lens


def _target(target: str, tasks_path, function, sizes, lengths) -> Task:
    from cudaperf.refine.target import parse_sizes, task_from_c_file, task_from_torch_file

    p = Path(target)
    if p.is_dir():
        fail(
            f"TARGET {target} is a folder; give a task id, a .c file or a PyTorch module .py "
            "file (a task file or folder goes in --tasks)"
        )
    if p.suffix in (".c", ".py") and not p.is_file():
        fail(f"TARGET {target}: no such file; give an existing .c or .py file, or a task id")
    if p.is_file() and p.suffix not in (".c", ".py"):
        fail(
            f"TARGET {target}: refine starts from a task id, a C function (.c) or a PyTorch "
            "module (.py); to score a kernel, use `cudaperf reward TASK FILE`"
        )
    try:
        if p.suffix == ".c" and p.is_file():
            if not function or not sizes:
                fail("a .c TARGET needs --function NAME and --sizes n=1048576,...")
            lens = _lengths(lengths or [])
            task = task_from_c_file(p, function, parse_sizes(sizes), lens)
            arrays = [q.name for q in task.signature if q.length is not None]
            if unknown := [name for name in lens if name not in arrays]:  # was ignored
                fail(
                    f"--length {unknown[0]}=...: {function}() has no array parameter "
                    f"{unknown[0]!r}; its arrays are {', '.join(arrays) or 'none'}"
                )
            return task
        if p.suffix == ".py" and p.is_file():
            return task_from_torch_file(p)
    except UnicodeDecodeError as e:  # a ValueError whose message names no file
        fail(f"TARGET {target} is not UTF-8 text (byte {e.start}); save it as UTF-8")
    except ValidationError as e:  # the task built from the file and the options
        fail(f"TARGET {target}: {explain(e)}; check --sizes and --length")
    except SyntaxError as e:  # a module file that Python cannot parse
        fail(f"TARGET {target}: line {e.lineno}: {e.msg}; fix the module's syntax")
    except (ValueError, OSError) as e:
        fail(str(e))
    given = [
        o for o, v in (("--function", function), ("--sizes", sizes), ("--length", lengths)) if v
    ]
    if given:  # they shape a task built from a .c file; a task id's configs are its own
        fail(
            f"{', '.join(given)} describe a .c TARGET; TARGET {target} is a task id, whose sizes "
            "are its configs: drop them"
        )
    return select_task(load_task_set(tasks_path), target, option="TARGET")


def _backend(
    model: str,
    task: Task,
    server_model: str,
    api_key: str,
    temperature: float,
    max_tokens: int,
    gguf_file: str | None,
    model_cache: Path | None = None,
    adapter: Path | None = None,
):
    from cudaperf.refine.backends import make_backend

    if model.startswith(("http://", "https://")):
        check_server(model)
        opts = dict(
            model=server_model, api_key=api_key, temperature=temperature, max_tokens=max_tokens
        )
    elif model.startswith("scripted:"):
        opts = {}
    else:
        opts = dict(
            gguf_file=gguf_file,
            temperature=temperature,
            max_new_tokens=max_tokens,
            cache_dir=model_cache,
            adapter=adapter,
        )
    try:
        return make_backend(model, task=task, **opts)
    except (ImportError, ValueError, OSError) as e:  # the first line says what went wrong
        fail(f"--model {model}: {(str(e).splitlines() or [type(e).__name__])[0]}")


def _earlier_records(out: Path) -> list:
    """The trajectory records already in `out` (a stopped run's turns resume from them)."""
    from cudaperf.refine.trajectory import read_trajectory

    if not out.is_file() or not out.stat().st_size:
        return []
    try:
        return read_trajectory(out)
    except (ValueError, UnicodeDecodeError) as e:
        fail(
            f"--out {out}: not a refine trajectory ({str(e).splitlines()[0][:200]}); give "
            "another --out or remove the file"
        )


def _connection_errors() -> tuple[type[BaseException], ...]:
    """openai's connection error, when the package is installed."""
    try:
        import openai
    except ImportError:
        return ()
    return (openai.APIConnectionError,)


def _best_path(task: Task, target: str, best_out: Path | None, out: Path) -> Path:
    """--best-out, or by default `<task>_best.cu` (.py for PyTorch tasks) in a folder beside
    the trajectory named after it (`traj.jsonl` -> `traj_best/`), so a run never writes
    into the current folder's files."""
    ext = ".cu" if task.kind is TaskKind.C2CUDA else ".py"
    if best_out is not None and best_out.suffix != ext:  # CUDA in a .py file, or the reverse
        fail(f"--best-out {best_out}: the best kernel of {task.id} is a {ext} file; name it so")
    name = Path(target).stem.replace("/", "_") + "_best" + ext
    return best_out or out.parent / f"{out.stem}_best" / name


def _write_new(path: Path, text: str, overwrite: bool, numbered: bool, out: Path) -> Path:
    """Write `text` to `path` without replacing a file there (unless `overwrite`): with
    `numbered` (the default --best-out) to the first free one of `path`, `<stem>-2<ext>`, ...;
    else an existing file (one that appeared during the run: an existing one was refused
    before it) is one line. The file is created exclusively, so nothing is replaced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if overwrite:
        path.write_text(text, encoding="utf-8")
        return path
    for n in itertools.count(1):
        p = path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")
        try:
            with p.open("x", encoding="utf-8") as f:
                f.write(text)
            return p
        except FileExistsError:
            if not numbered:
                fail(
                    f"--best-out {path} was made while refine ran; it is left as it is (the "
                    f"best kernel is in the trajectory {out}); add --overwrite to replace "
                    "it",
                    code=1,
                )
    raise AssertionError("unreachable")


_MODEL_HELP = (
    "smollm2 (the bundled SmolLM2-135M-Instruct), a Hugging Face name (org/name), checkpoint "
    "folder or .gguf file (with --adapter), an http(s):// URL of an OpenAI-compatible server "
    f"(with --server-model), or a scripted backend: {', '.join(SCRIPTED)} (they replay the "
    "task's implementations: all in order, weakest first, its fastest, its naive one)."
)


def refine_command(
    target: str = typer.Argument(
        ..., help="Task id, a .c file (with --function/--sizes) or a PyTorch module .py file."
    ),
    model: str = typer.Option(
        "smollm2",
        "--model",
        help=_MODEL_HELP,
    ),
    turns: int = typer.Option(3, "--turns", min=1, help="Maximum turns."),
    samples: int = typer.Option(
        4, "--samples", min=1, help="Replies sampled per turn (best-of-n)."
    ),
    out: Path = typer.Option(Path("traj.jsonl"), "--out", help="Trajectory JSONL (appended)."),
    best_out: Path = typer.Option(
        None,
        "--best-out",
        help="Best kernel file; an existing one is refused unless --overwrite. Default: "
        "<task>_best.cu (or .py) in a folder named after --out (traj.jsonl -> traj_best/), "
        "numbered <task>_best-2.cu, ... when taken, so no run replaces another's kernel.",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace the --best-out file if it exists."
    ),
    tasks_path: Path = typer.Option(
        None, "--tasks", help=f"Task file or folder (default: {SAMPLE_DEFAULT})."
    ),
    function: str = typer.Option(None, "--function", help="C TARGET: the function to port."),
    sizes: str = typer.Option(None, "--sizes", help="C TARGET: scalar values, n=1048576,a=2."),
    lengths: list[str] = typer.Option(None, "--length", help="C TARGET: array length, x=n."),
    patience: int = typer.Option(
        1, "--patience", min=1, help="Stop after this many turns without gain."
    ),
    preset: str = PresetOpt,
    reward: list[str] | None = RewardOpt,
    server_model: str = typer.Option("default", "--server-model", help="Model name on the server."),
    api_key: str = typer.Option("EMPTY", "--api-key", envvar="OPENAI_API_KEY", help="Server key."),
    gguf_file: str = typer.Option(None, "--gguf-file", help="HF: GGUF file inside --model."),
    adapter: Path = typer.Option(
        None, "--adapter", help="HF: a LoRA adapter folder `cudaperf train` saved (its final/)."
    ),
    model_cache: Path = typer.Option(
        None,
        "--model-cache",
        envvar="CUDAPERF_MODEL_CACHE",
        help="HF: where GGUF models are converted once (default ~/.cache/cudaperf/models).",
    ),
    temperature: float = typer.Option(
        0.8, "--temperature", min=0.0, max=10.0, help="Sampling temperature."
    ),
    max_tokens: int = typer.Option(2048, "--max-tokens", min=1, help="Tokens per reply."),
    compile_only: bool = typer.Option(None, "--compile-only/--full", help="Default: when no GPU."),
    cache_dir: Path = typer.Option(None, "--cache-dir", help="Build and result cache directory."),
    ranker: str = RankerOpt,
) -> None:
    """Refine a kernel over several turns: sample, evaluate, analyse, reward, feed back."""
    from cudaperf.refine.loop import refine

    check_out_file(out, "--out", (".jsonl",))
    check_out_dir(cache_dir, "--cache-dir")
    check_out_dir(model_cache, "--model-cache")
    check_model_spec(model, "--model", gguf_file)
    check_adapter(adapter, model)
    reward_cfg = reward_config(preset, reward)
    task = _target(target, tasks_path, function, sizes, lengths)
    best_path = _best_path(task, target, best_out, out)
    check_out_file(best_path, "--best-out")
    if best_out is not None and best_out.exists() and not overwrite:
        fail(
            f"--best-out {best_out} exists; add --overwrite to replace it, or give another "
            "--best-out (or leave it out: the default never replaces a file)"
        )
    scorer = scorer_for(task, reward_cfg, compile_only, cache_dir, ranker)
    if gguf_file is not None and (model.startswith(("http://", "https://", "scripted:"))):
        fail(f"--gguf-file works with a Hugging Face --model (name or path), not {model!r}")
    backend = _backend(
        model,
        task,
        server_model,
        api_key,
        temperature,
        max_tokens,
        gguf_file,
        model_cache,
        adapter,
    )
    prior = _earlier_records(out)
    from cudaperf.refine.episode import unfinished_turns

    if done := unfinished_turns(prior, task.id, backend.name):
        console.print(
            f"resuming {task.id} after turn {done[-1].turn} (recorded in {out})", highlight=False
        )
    cols = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*cols, console=console, transient=True) as bar:
        tid = bar.add_task(f"turn 1/{turns}: generating {samples} replies", total=None)

        def on_turn(rec) -> None:
            top = next((s for s in rec.samples if s.index == rec.chosen), None)
            rw = top.reward if top else None
            sp = f"{rw.speedup:.2f}x vs {rw.baseline}" if rw and rw.speedup else "-"
            stdout.print(
                f"turn {rec.turn}: best reward {rw.total:+.3f} ({rw.status}), speedup {sp}"
                if rw
                else f"turn {rec.turn}: no valid reward"
            )
            bar.update(tid, description=f"turn {rec.turn + 1}/{turns}: generating")

        try:
            res = refine(
                task,
                backend,
                scorer,
                turns=turns,
                samples=samples,
                patience=patience,
                out=out,
                on_turn=on_turn,
                resume=prior,
                pending=out.with_name(out.stem + ".pending.jsonl"),  # kept if stopped scoring
            )
        except ValueError as e:
            fail(str(e))
        except _connection_errors() as e:  # the server went away mid-run
            fail(
                f"--model {model}: the server stopped answering ({e}); the turns finished "
                f"so far are in {out}",
                code=1,
            )
        finally:
            scorer.close()  # the command's one evaluator session and the analyzer's pool
    _finish(res, best_path, out, overwrite, numbered=best_out is None)


def _finish(res, path: Path, out: Path, overwrite: bool, numbered: bool) -> None:
    s = res.summary
    if s.mode == "compile-only":
        stdout.print(
            "[bold yellow]compile-only[/]: no GPU here, so candidates were compiled but "
            "not run, checked or timed; rewards only tell compiling from failing"
        )
    stdout.print(f"stopped: {s.stopped} after {s.turns} turn(s); trajectory: {out}")
    if s.best_code is None:
        stdout.print("no reply held a candidate with a valid reward; no kernel written")
        raise typer.Exit(1)
    path = _write_new(path, s.best_code, overwrite, numbered, out)
    stdout.print(
        f"best: turn {s.best_turn}, reward {s.best_total:+.3f} ({s.best_status}) -> {path}"
    )
