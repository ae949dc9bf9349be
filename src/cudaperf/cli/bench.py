"""`cudaperf bench run | compare | report`: benchmark a model over a suite, compare runs."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from cudaperf.cli.common import (
    GenerationOpt,
    check_adapter,
    check_cache_dir,
    check_model_spec,
    check_out_dir,
    check_server,
    check_toolchain,
    check_wall_budget,
    console,
    fail,
    stdout,
)
from cudaperf.cli.options import (
    OLD_TIMING_BUDGET,
    PresetOpt,
    RewardOpt,
    TimingBudgetOpt,
    eval_config,
    gpu_list,
    renamed,
    reward_config,
)
from cudaperf.cli.reward import RankerOpt, command_scorer

__all__ = ["bench_app"]

bench_app = typer.Typer(
    help="Benchmark a model over a suite (metrics with 95% intervals, HTML + Markdown report).",
    no_args_is_help=True,
)

WALL_BUDGET_EXIT = 75  # sysexits' EX_TEMPFAIL: stopped by --wall-budget, the same command resumes
_SUITE_HELP = (
    "A task file or folder, or a suite name: sample (bundled), test-families (the test "
    "split's families in data/tasks.jsonl.gz; formerly heldout), train-unseen (a training "
    "run's unseen tasks: --suite-path RUN/holdout.json), kernelbench, kernelbench:1 "
    "(levels 1-3), babeltower, polybench-acc, pareval (with --suite-path)."
)
_MODEL_HELP = (
    "smollm2, a Hugging Face name or checkpoint folder, an http(s):// OpenAI-compatible URL, "
    "scripted:best (each task's fastest known implementation), scripted:naive (its naive one) "
    "or scripted:weakest-first."
)


def _tasks(
    suites, suite_paths, dataset, limit, per_family, seed, model, compile_baseline=True, kind=None
):
    """(suites, tasks, meta, note on left-out tasks); `kind` filters, then the subset options
    apply per suite."""
    from cudaperf.refine.scripted import REFERENCE_SPECS, replayable
    from cudaperf.report.rows import task_meta
    from cudaperf.report.suites import RENAMED, load_suites, select

    def of_kind(ts):
        return [t for t in ts if kind is None or t.kind.value == kind]

    for old in sorted(set(suites) & set(RENAMED)):
        console.print(f"--suite {old} is now --suite {RENAMED[old]} (same tasks)", highlight=False)
    suites = [RENAMED.get(s, s) for s in suites]
    if dataset is not None and not {"test-families", "train-unseen"} & set(suites):
        fail(  # was ignored without a word: the run used other tasks than the user named
            f"--dataset {dataset} is read by --suite test-families and train-unseen only; "
            "drop it, or give the task file as --suite PATH"
        )
    try:
        loaded = load_suites(suites, suite_paths or [], dataset)
        picked = [(s, select(of_kind(s.tasks), limit, per_family, seed)) for s in loaded]
    except (ValueError, FileNotFoundError, ImportError) as e:
        fail(str(e))
    for s in loaded:  # an importer that kept nothing says why, not "no task to run"
        if not s.tasks and s.skipped:
            why = "; ".join(f"{reason}: {n}" for reason, n in sorted(s.skipped.items()))
            fail(
                f"--suite {s.label}: {s.source} gave no task; its importer skipped every row "
                f"({why}); check that --suite-path is that suite's own file or checkout"
            )
    left_out = ""
    if model in REFERENCE_SPECS or model == "scripted:weakest-first":
        n = sum(len(ts) for _, ts in picked)
        picked = [(s, replayable(ts)) for s, ts in picked]
        if sum(len(ts) for _, ts in picked) < n:
            left_out = f"{n - sum(len(ts) for _, ts in picked)} task(s) without implementations"
            console.print(f"{model}: leaving out {left_out} to replay")
    tasks = [t for _, ts in picked for t in ts]
    if not tasks:
        fail(
            f"--suite {' '.join(suites)}: no task to run (after --kind/--limit/"
            "--tasks-per-family and, for scripted models, dropping tasks without "
            "implementations)"
        )
    meta = {t.id: task_meta(t, s.label, compile_baseline) for s, ts in picked for t in ts}
    return loaded, tasks, meta, left_out


def _gpus(spec: str | None, compile_only: bool | None) -> tuple[int, ...] | None:
    """The --gpus indices (None: all visible): `gpu_list`'s checks, GPUs this machine has, and
    never with --compile-only."""
    if spec is not None and compile_only:
        fail("--gpus picks the GPUs that time candidates; drop it or drop --compile-only")
    return gpu_list(spec, "--gpus", present=True)


def _scorer(tasks, reward, ranker, **eval_opts):
    """The run's scorer (`command_scorer`: one evaluator session for the whole run, closed by
    `run`) and the evaluator's environment (GPU, mode, versions) for run.json."""
    from cudaperf.execute.evaluator import detect_env

    ev = eval_config(**eval_opts)
    try:
        env = detect_env(ev)
    except (ValueError, RuntimeError) as e:
        fail(str(e))
    return command_scorer(tasks, reward, ev, ranker), env


def _model_kind(model: str) -> str:
    """ "scripted" (a replay of stored implementations), "server" (an OpenAI-compatible URL)
    or "local" (a Hugging Face model loaded here): what a --model spec runs on."""
    if model.startswith("scripted:"):
        return "scripted"
    return "server" if model.startswith(("http://", "https://")) else "local"


def _backend(
    model,
    tasks,
    adapter,
    server_model,
    api_key,
    temperature,
    max_tokens,
    gguf_file,
    seed,
    generation="auto",
    max_batch=64,
):
    from cudaperf.report.run import make_bench_backend

    kind = _model_kind(model)
    if kind == "server":
        opts = dict(
            model=server_model, api_key=api_key, temperature=temperature, max_tokens=max_tokens
        )
    elif kind == "scripted":
        opts = {}
    else:
        opts = dict(
            gguf_file=gguf_file,
            temperature=temperature,
            max_new_tokens=max_tokens,
            seed=seed,
            generation=generation,
            max_batch=max_batch,
        )
    try:
        return make_bench_backend(model, tasks, adapter=adapter, **opts)
    except (ImportError, ValueError, OSError) as e:
        fail(f"--model {model}: {e}")


def _sampling(model: str, temperature, max_tokens, generation, gguf_file, server_model) -> dict:
    """How the model's replies are drawn, for run.json (`sampling`, checked on resume) and the
    recorded command; {} for a scripted replay, which samples nothing."""
    kind = _model_kind(model)
    if kind == "scripted":
        return {}
    out = {"temperature": temperature, "max_tokens": max_tokens}
    if kind == "server":
        return out | {"server_model": server_model}
    return out | {"generation": generation, "gguf_file": gguf_file}


_SAMPLING_FLAGS = {
    "temperature": "--temperature",
    "max_tokens": "--max-tokens",
    "generation": "--generation",
    "gguf_file": "--gguf-file",
    "server_model": "--server-model",
}


def _command(
    st, out: Path, suite_paths: list[Path] | None, dataset: Path | None, sampling: dict
) -> str:
    """The `cudaperf bench run` command line that selects the same tasks and settings and
    samples the same way."""
    args = ["--model", st.model]
    for spec in st.suite.split(" + "):
        args += ["--suite", spec]
    for p in suite_paths or []:
        args += ["--suite-path", str(p)]
    args += [
        "--samples",
        str(st.samples),
        "--turns",
        str(st.turns),
        "--seed",
        str(st.seed),
        "--preset",
        st.preset,
    ]
    for override in st.reward.split():
        args += ["--reward", override]
    for flag, v in (
        ("--limit", st.limit),
        ("--tasks-per-family", st.tasks_per_family),
        ("--adapter", st.adapter),
        ("--dataset", dataset),
        ("--kind", st.kind),
    ):
        if v is not None:
            args += [flag, str(v)]
    if not st.compile_baseline:
        args.append("--no-compile-baseline")
    for key, v in sampling.items():
        if v is not None:
            args += [_SAMPLING_FLAGS[key], str(v)]
    return "cudaperf bench run " + shlex.join([*args, "--out", str(out)])


def _info(suites, left_out: str, env, eval_opts: dict, command: str, sampling: dict) -> dict:
    """What run.json records beside the settings: where the tasks came from, the GPU, the
    evaluator's mode, options and toolchain versions, how replies were sampled (a model's
    run only) and the command."""
    return ({"sampling": sampling} if sampling else {}) | {
        "suite_label": " + ".join(s.label for s in suites),
        "source": "; ".join(s.source for s in suites),
        "import_skipped": {s.label: s.skipped for s in suites if s.skipped},
        "left_out": left_out,
        "gpu": env.gpu_name,
        "mode": env.mode,
        "evaluator": {k: str(v) for k, v in eval_opts.items() if v is not None},
        "versions": env.versions,
        "command": command,
    }


def _row(t: Table, *cells: str) -> None:
    """A table row of plain text: Rich would read "[x1.00, x2.45]" as markup and drop it."""
    t.add_row(*(Text(c) for c in cells))


def _print_summary(s: dict, html: Path) -> None:
    from cudaperf.report.render import turns_from_text
    from cudaperf.report.summary import fmt_ci, fmt_time, fmt_value

    t = Table(title=Text(s["title"]), title_justify="left")
    for col in ("metric", "value", "95% CI", "tasks"):
        t.add_column(col)
    for e in s["metrics"]:
        _row(
            t,
            e["metric"],
            fmt_value(e["value"], e["kind"]),
            fmt_ci(e["ci"], e.get("ci_note", ""), e["kind"]),
            str(e["tasks"]),
        )
    stdout.print(t)
    if line := fmt_time(s.get("time") or {}):
        stdout.print(Text(line))
    if line := turns_from_text((s.get("info") or {}).get("turns_from")):
        stdout.print(Text(line))
    if s["mode"] == "compile-only":
        stdout.print(
            "[bold yellow]compile-only[/]: no GPU here, so candidates were compiled "
            "but not run, checked or timed; no correctness or speedup is reported"
        )
    stdout.print(f"report: {html}")


@bench_app.command("run")
def run(
    model: str = typer.Option(..., "--model", help=_MODEL_HELP),
    suite: list[str] = typer.Option(..., "--suite", help=_SUITE_HELP + " Repeat for several."),
    out: Path = typer.Option(..., "--out", help="Run folder (created; a rerun resumes it)."),
    samples: int = typer.Option(
        4, "--samples", min=1, help="Replies per task and turn (pass@k's n)."
    ),
    turns: int = typer.Option(1, "--turns", min=1, help="Refinement turns per task (all are run)."),
    adapter: str = typer.Option(None, "--adapter", help="A trained adapter on top of --model."),
    suite_path: list[Path] = typer.Option(
        None, "--suite-path", help="Your checkout of each imported suite, in --suite order."
    ),
    dataset: Path = typer.Option(
        None, "--dataset", help="test-families/train-unseen: the dataset."
    ),
    limit: int = typer.Option(
        None, "--limit", min=1, help="At most this many tasks (fixed subset)."
    ),
    per_family: int = typer.Option(None, "--tasks-per-family", min=1, help="At most N per family."),
    seed: int = typer.Option(0, "--seed", help="Seed of the subset (same seed, same tasks)."),
    kind: str = typer.Option(
        None, "--kind", help="Only c2cuda or torch2cuda tasks (applied before --limit)."
    ),
    batch_tasks: int = typer.Option(
        16, "--batch-tasks", min=1, help="Tasks generated/scored at once."
    ),
    max_batch: int = typer.Option(
        64,
        "--max-batch",
        min=1,
        help="Hugging Face models: most sequences one generate call decodes together (a "
        "chunk's batch-tasks x samples above it take several calls); speed only.",
    ),
    preset: str = PresetOpt,
    reward_overrides: list[str] | None = RewardOpt,
    ranker: str = RankerOpt,
    compile_only: bool = typer.Option(None, "--compile-only/--full", help="Default: when no GPU."),
    gpus: str = typer.Option(
        None,
        "--gpus",
        help="GPU indices for the evaluator's workers, such as 0,1 (nvidia-smi "
        "numbering); default: every visible GPU.",
    ),
    workers_per_gpu: int = typer.Option(
        None,
        "--workers-per-gpu",
        min=1,
        help="Evaluator workers per GPU (default 1): C→CUDA checks overlap, timing stays one "
        "at a time; run.json records it and `compare` names it as a setup difference.",
    ),
    no_compile_baseline: bool = typer.Option(
        False,
        "--no-compile-baseline",
        help="PyTorch tasks: do not time torch.compile (it costs "
        "device time); run.json records it and the reports list the baseline as absent.",
    ),
    cache_dir: Path = typer.Option(None, "--cache-dir", help="Build and result cache directory."),
    trials: int = typer.Option(None, "--trials", help="Evaluator: timed trials per config."),
    timing_budget: float = TimingBudgetOpt,
    old_timing_budget: float = OLD_TIMING_BUDGET,
    cpu_time_budget: float = typer.Option(
        None, "--cpu-time-budget", help="Evaluator: s of C-reference timing per config."
    ),
    server_model: str = typer.Option("default", "--server-model", help="Model name on the server."),
    api_key: str = typer.Option("EMPTY", "--api-key", envvar="OPENAI_API_KEY", help="Server key."),
    gguf_file: str = typer.Option(None, "--gguf-file", help="HF: GGUF file inside --model."),
    temperature: float = typer.Option(
        0.8, "--temperature", min=0.0, max=10.0, help="Sampling temperature."
    ),
    max_tokens: int = typer.Option(2048, "--max-tokens", min=1, help="Tokens per reply."),
    generation: str = GenerationOpt,
    wall_budget: float = typer.Option(
        None,
        "--wall-budget",
        help="Seconds from the start, loading included: a chunk of --batch-tasks starts only "
        "when the run's complete chunks (timing.jsonl) predict it ends inside them; else it "
        "holds only the tasks predicted to fit, and with none the run stops (exit 75) and the "
        "same command resumes it. A run's first chunk always runs.",
    ),
    turns_from: Path = typer.Option(
        None,
        "--turns-from",
        help="A finished run of fewer --turns, otherwise the same (model, suite, settings, "
        "tasks, setup, sampling): each task new here begins with its turns, so only the "
        "later turns run (run.json and the report say so).",
    ),
) -> None:
    """Run a model over a suite; every sample of every turn evaluated on every config."""
    t_start = time.perf_counter()  # --wall-budget counts loading too
    from cudaperf.report.render import write_run_report
    from cudaperf.report.run import (
        SCORED,
        BenchSettings,
        KeptResults,
        WallBudget,
        check_resume,
        check_turns_from,
        read_run,
        run_bench,
    )
    from cudaperf.report.summary import summarize

    check_wall_budget(wall_budget)

    try:
        settings = BenchSettings(
            model=model,
            suite=" + ".join(suite),
            samples=samples,
            turns=turns,
            seed=seed,
            limit=limit,
            tasks_per_family=per_family,
            adapter=adapter,
            preset=preset,
            reward=" ".join(reward_overrides or ()),
            kind=kind,
            compile_baseline=not no_compile_baseline,
        )
    except ValueError as e:
        fail(str(e))
    check_out_dir(out, "--out")
    check_cache_dir(cache_dir)
    check_model_spec(model, "--model", gguf_file)
    check_adapter(adapter, model)
    gpu_ids = _gpus(gpus, compile_only)
    timing_budget = renamed("--time-budget", old_timing_budget, "--timing-budget", timing_budget)
    reward = reward_config(preset, reward_overrides)
    check_toolchain(compile_only)
    if _model_kind(model) == "server":
        check_server(model)
    suites, tasks, meta, left_out = _tasks(
        suite, suite_path, dataset, limit, per_family, seed, model, settings.compile_baseline, kind
    )
    eval_opts = dict(
        compile_only=compile_only,
        cache_dir=cache_dir,
        trials=trials,
        time_budget_s=timing_budget,
        cpu_time_budget_s=cpu_time_budget,
        gpus=gpu_ids,
        workers_per_gpu=workers_per_gpu,
        compile_baseline=False if no_compile_baseline else None,
    )
    scorer, env = _scorer(tasks, reward, ranker, **eval_opts)
    if _model_kind(model) == "local":  # the generation mode that runs on HFBackend's device
        from cudaperf.generation import resolve_mode
        from cudaperf.refine.hf import default_device

        try:
            generation = resolve_mode(generation, default_device())
        except ValueError as e:
            scorer.close()
            fail(str(e))
    sampling = _sampling(model, temperature, max_tokens, generation, gguf_file, server_model)
    command = _command(settings, out, suite_path, dataset, sampling)
    if turns_from is not None:
        command += " --turns-from " + shlex.quote(str(turns_from))
    info = _info(suites, left_out, env, eval_opts, command, sampling)
    if turns_from is not None:
        info["turns_from"] = {"run": str(turns_from)}
    try:  # before loading a model: a run this command cannot resume is named in one line
        check_resume(out, settings, meta, info)
        source = None if turns_from is None else check_turns_from(turns_from, settings, meta, info)
    except ValueError as e:
        scorer.close()
        fail(str(e))
    scorer.evaluator = KeptResults(scorer.evaluator, out / SCORED)  # a cut batch's work kept
    backend = _backend(
        model,
        tasks,
        adapter,
        server_model,
        api_key,
        temperature,
        max_tokens,
        gguf_file,
        seed,
        generation,
        max_batch,
    )
    cols = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*cols, console=console, transient=True) as bar:
            tid = bar.add_task(f"{len(tasks)} task(s) x {turns} turn(s)", total=len(tasks))
            n = run_bench(
                settings,
                tasks,
                meta,
                out,
                backend,
                scorer,
                batch_tasks,
                info,
                on_done=lambda res: bar.advance(tid),
                turns_from=source,
                wall_budget_s=wall_budget,
                started=t_start,
            )
    except ValueError as e:
        fail(str(e))
    except WallBudget as stop:
        console.print(f"{stop}; the same command resumes the run in {out}")
        raise typer.Exit(WALL_BUDGET_EXIT) from None
    except KeyboardInterrupt:
        console.print(
            f"interrupted: finished tasks and turns are kept in {out}; rerun the same command to "
            "resume"
        )
        raise typer.Exit(130) from None
    finally:
        scorer.close()  # the run's one evaluator session and the analyzer's pool
    if n == 0:
        console.print(f"every task was already finished in {out}; rebuilding the report")
    summary = summarize(read_run(out))
    _print_summary(summary, write_run_report(summary, out))


@bench_app.command("report")
def report(
    run_dir: Path = typer.Argument(..., help="A run folder of `cudaperf bench run`."),
) -> None:
    """Rebuild a run's report (report.html, report.md, summary.json) from its files."""
    from cudaperf.report.render import write_run_report
    from cudaperf.report.run import read_run
    from cudaperf.report.summary import summarize

    try:
        r = read_run(run_dir)
    except ValueError as e:
        fail(str(e))
    s = summarize(r)
    _print_summary(s, write_run_report(s, run_dir))


@bench_app.command("pack")
def pack(
    runs: list[Path] = typer.Argument(..., help="Finished run folders of `cudaperf bench run`."),
) -> None:
    """Gzip each finished run's trajectory in place (trajectories.jsonl.gz, about a tenth of
    the size); reports, compare and resumes read it as before."""
    from cudaperf.report.run import pack_run

    for r in runs:
        try:
            before, after = pack_run(r)
        except ValueError as e:
            fail(str(e))
        stdout.print(Text(f"packed {r}: {before:,} -> {after:,} bytes"))


@bench_app.command("compare")
def compare(
    runs: list[Path] = typer.Argument(..., help="Two or more run folders; the first is the base."),
    out: Path = typer.Option(..., "--out", help="Folder for the comparison report."),
    allow_setup_mismatch: bool = typer.Option(
        False,
        "--allow-setup-mismatch",
        help="Compare runs measured on another GPU, evaluator setting, toolchain or evaluator "
        "code (refused by default; the report then says how they differ).",
    ),
    label: list[str] = typer.Option(
        None,
        "--label",
        help="A name for each run, in their order (repeat once per run); default: the folder "
        "names, numbered where two are alike.",
    ),
) -> None:
    """The same metrics side by side, with paired differences and their 95% intervals."""
    from cudaperf.report.render import paired_text, write_compare_report
    from cudaperf.report.run import read_run
    from cudaperf.report.summary import compare as compare_runs
    from cudaperf.report.summary import fmt_value

    if len(runs) < 2:
        fail("give at least two run folders to compare")
    if label and len(label) != len(runs):
        fail(f"give one --label per run: {len(runs)} runs, {len(label)} --label")
    check_out_dir(out, "--out")
    if (out / "run.json").is_file():  # its report.html and report.md would be replaced
        fail(
            f"--out {out} is a run folder of `cudaperf bench run`; give a new folder for the "
            "comparison"
        )
    try:
        loaded = [read_run(r) for r in runs]
    except ValueError as e:
        fail(str(e))
    seen: dict[Path, Path] = {}
    for r in runs:  # a run against itself shows zero differences as if measured
        if (key := r.resolve()) in seen:
            fail(f"{r} is given twice (as {seen[key]} too); compare different run folders")
        seen[key] = r
    try:
        c = compare_runs(loaded, label or None)
    except ValueError as e:
        fail(str(e))
    diffs = c["setup_differences"]
    if diffs and not allow_setup_mismatch:
        more = f" (and {len(diffs) - 1} more)" if len(diffs) > 1 else ""
        fail(
            f"the runs were measured differently: {diffs[0]}{more}; compare runs of one GPU, "
            "evaluator and toolchain, or pass --allow-setup-mismatch"
        )
    html = write_compare_report(c, out)
    t = Table(title=Text(c["title"]), title_justify="left")
    for col in ["metric", *c["names"], *[f"{n} vs {c['names'][0]}" for n in c["names"][1:]]]:
        t.add_column(col)
    for m in c["metrics"]:
        diffs = [paired_text(d, m["kind"]) for d in m["diffs"]]
        _row(t, m["metric"], *[fmt_value(v, m["kind"]) for v in m["values"]], *diffs)
    stdout.print(t)
    if c["hosts_note"]:
        stdout.print(f"note: {c['hosts_note']}", markup=False)
    stdout.print(f"paired on {c['tasks']} task(s); report: {html}")
