"""`cudaperf bench` on the CPU: scripted references over the bundled sample set, compile-only
(nvcc, no GPU), resume, report, compare, and one-line errors for bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cudaperf.cli import app
from tests.cli.helpers import cli, user_error

runner = CliRunner()
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def bench_run(tmp_path, model: str, out: str, *extra: str):
    args = [
        "bench",
        "run",
        "--model",
        model,
        "--suite",
        "sample",
        "--samples",
        "2",
        "--turns",
        "2",
        "--limit",
        "4",
        "--compile-only",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--ranker",
        "none",
        "--out",
        str(tmp_path / out),
        *extra,
    ]
    return runner.invoke(app, args)


@needs_nvcc
def test_bench_run_resume_report_and_compare_compile_only(tmp_path):
    res = bench_run(tmp_path, "scripted:best", "best")
    assert res.exit_code == 0, res.output
    assert "compile rate (turn 1)" in res.stdout and "100.0%" in res.stdout
    assert "compile-only" in res.stdout and "no correctness or speedup" in res.stdout
    assert "correct rate" not in res.stdout  # not measured without a GPU: not shown as 0
    assert "time: " in res.stdout and "in 1 chunk(s) (generation" in res.stdout
    run = json.loads((tmp_path / "best/run.json").read_text())
    assert len(run["tasks"]) == 4 and run["command"].startswith("cudaperf bench run")
    lines = (tmp_path / "best/trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 4 * 3  # 2 turn records + 1 summary per task

    again = bench_run(tmp_path, "scripted:best", "best")  # resume: nothing left to do
    assert again.exit_code == 0 and "already finished" in again.output
    assert (tmp_path / "best/trajectories.jsonl").read_text().splitlines() == lines

    html = (tmp_path / "best/report.html").read_text()
    assert "Compile-only run: there was no GPU" in html
    rep = runner.invoke(app, ["bench", "report", str(tmp_path / "best")])
    assert rep.exit_code == 0 and "report:" in rep.stdout

    assert bench_run(tmp_path, "scripted:naive", "naive").exit_code == 0
    cmp = runner.invoke(
        app,
        [
            "bench",
            "compare",
            str(tmp_path / "naive"),
            str(tmp_path / "best"),
            "--out",
            str(tmp_path / "cmp"),
        ],
    )
    assert cmp.exit_code == 0, cmp.output
    assert "paired on 4 task(s)" in cmp.stdout and (tmp_path / "cmp/report.html").is_file()
    assert "naive vs best" in cmp.stdout  # the folder names, by default

    # --label names the runs (two checkpoints' folders are often both called `grpo`)
    args = ["bench", "compare", tmp_path / "naive", tmp_path / "best", "--out"]
    named = cli(*args, tmp_path / "cmpl", "--label", "start", "--label", "step 60")
    assert named.returncode == 0, named.stderr
    assert "step 60 vs start" in named.stdout
    assert "start vs step 60" in (tmp_path / "cmpl/report.html").read_text()
    user_error(cli(*args, tmp_path / "cmpb", "--label", "x"), "one --label per run", code=2)
    user_error(cli(*args, tmp_path / "cmpb", "--label", "x", "--label", "x"), "distinct", code=2)
    assert not (tmp_path / "cmpb").exists()

    # a run measured with other evaluator code is refused, unless asked, and then flagged
    doc = json.loads((tmp_path / "best/run.json").read_text())
    doc["versions"]["cudaperf"] += "-other"
    (tmp_path / "best/run.json").write_text(json.dumps(doc))
    args = ["bench", "compare", str(tmp_path / "naive"), str(tmp_path / "best"), "--out"]
    user_error(cli(*args, tmp_path / "cmp2"), "measured differently", "cudaperf", code=2)
    assert not (tmp_path / "cmp2").exists()
    ok = runner.invoke(app, [*args, str(tmp_path / "cmp3"), "--allow-setup-mismatch"])
    assert ok.exit_code == 0, ok.output
    assert "measured differently" in (tmp_path / "cmp3/report.html").read_text()


def test_compare_says_when_the_c_reference_was_timed_on_other_hosts(tmp_path):
    """Full-mode runs (stored measurements) whose chunks ran on different host CPUs: the
    terminal says the speedups vs cpu are not comparable, beside the table."""
    from tests.report.test_run import _rehost
    from tests.report.test_run import bench as stored_bench

    for name, model, host in (("a", "scripted:naive", "CPU-A"), ("b", "scripted:best", "CPU-B")):
        stored_bench(tmp_path / name, model=model, samples=1, turns=1)
        _rehost(tmp_path / name, host, host, host)
    args = ["bench", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out"]
    r = runner.invoke(app, [*args, str(tmp_path / "cmp")])
    assert r.exit_code == 0, r.output
    assert "note: speedups vs cpu are not comparable" in " ".join(r.stdout.split())
    _rehost(tmp_path / "b", "CPU-A", "CPU-A", "CPU-A")
    r = runner.invoke(app, [*args, str(tmp_path / "cmp2")])
    assert r.exit_code == 0 and "note:" not in r.stdout


def test_an_adapter_that_is_no_adapter_folder_is_refused_before_the_model_loads(tmp_path):
    """It was read only when the backend attached it, after the model had loaded, and the
    line named --model instead of --adapter."""
    for adapter, said in ((tmp_path / "none", "no such folder"), (tmp_path, "no adapter_config")):
        args = ["bench", "run", "--model", "smollm2", "--suite", "sample", "--limit", "1"]
        r = cli(*args, "--adapter", adapter, "--out", tmp_path / "r", timeout=120)
        user_error(r, f"--adapter {adapter}: {said}", code=2)
        assert "Loading weights" not in r.stdout + r.stderr
        assert not (tmp_path / "r").exists()


def test_bad_input_gives_one_line_errors(tmp_path):
    cases = [
        (["--suite", "nosuch"], "nor a suite name"),
        (["--suite", "kernelbench:1"], "--suite-path"),
        (["--suite", "sample", "--adapter", "a"], "--adapter loads on top of a Hugging Face"),
        (["--suite", "sample", "--samples", "0"], "'--samples': Input should be greater than"),
        (["--suite", "sample", "--turns", "0"], "'--turns': Input should be greater than"),
        (["--suite", "sample", "--batch-tasks", "0"], "'--batch-tasks': Input should be great"),
        (["--suite", "sample", "--limit", "0"], "'--limit': Input should be greater than"),
        (["--suite", "sample", "--tasks-per-family", "0"], "'--tasks-per-family': Input should"),
        (["--suite", "sample", "--gpus", "a,b"], "give GPU indices such as 0,1"),
        (["--suite", "sample", "--gpus", "0,0"], "GPU 0 is named twice"),
        (["--suite", "sample", "--gpus", "0", "--compile-only"], "or drop --compile-only"),
        (["--suite", "sample", "--gpus", "99"], "no GPU 99 here"),
        (["--suite", "sample", "--kind", "fortran"], "use c2cuda or torch2cuda"),
        (["--suite", "sample", "--max-tokens", "0"], "'--max-tokens': Input should be greater"),
        (["--suite", "sample", "--max-batch", "0"], "'--max-batch': Input should be greater"),
        (["--suite", "sample", "--wall-budget", "0"], "--wall-budget 0.0: give seconds > 0"),
        (["--suite", "sample", "--wall-budget", "inf"], "--wall-budget inf: give seconds > 0"),
    ]
    for extra, message in cases:
        args = ["bench", "run", "--model", "scripted:best", "--out", str(tmp_path / "r"), *extra]
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (extra, res.output)
        assert message in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["bench", "report", str(tmp_path / "none")])
    assert res.exit_code == 2 and "no run.json" in res.output
    res = runner.invoke(app, ["bench", "compare", str(tmp_path / "x"), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "at least two run folders" in res.output


@needs_nvcc
def test_several_suites_in_one_run_and_scripted_models_leave_out_bare_tasks(tmp_path):
    kb = Path(__file__).resolve().parents[1] / "fixtures/kernelbench/KernelBench"
    res = bench_run(
        tmp_path,
        "scripted:naive",
        "r",
        "--suite",
        "kernelbench:1",
        "--suite-path",
        str(kb),
        "--trials",
        "7",
    )
    assert res.exit_code == 0, res.output
    assert "leaving out 2 task(s) without implementations" in res.output
    run = json.loads((tmp_path / "r/run.json").read_text())
    assert run["settings"]["suite"] == "sample + kernelbench:1" and len(run["tasks"]) == 4
    assert "--suite sample --suite kernelbench:1 --suite-path" in run["command"]
    assert run["evaluator"]["trials"] == "7" and run["mode"] == "compile-only"


@needs_nvcc
def test_no_compile_baseline_is_recorded_and_kept_by_the_resume_command(tmp_path):
    args = [
        "bench",
        "run",
        "--model",
        "scripted:naive",
        "--suite",
        "sample",
        "--samples",
        "1",
        "--turns",
        "1",
        "--limit",
        "1",
        "--compile-only",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--ranker",
        "none",
        "--no-compile-baseline",
        "--out",
        str(tmp_path / "r"),
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    run = json.loads((tmp_path / "r/run.json").read_text())
    assert run["settings"]["compile_baseline"] is False
    assert run["evaluator"]["compile_baseline"] == "False"
    assert "--no-compile-baseline" in run["command"]
    assert all("compile" not in m["baselines"] for m in run["tasks"].values())
    res = runner.invoke(app, args[:-3] + ["--out", str(tmp_path / "r")])  # the flag dropped
    assert res.exit_code == 2 and "compile_baseline=False there, True now" in res.output


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_run_checks_its_outputs_model_ranker_and_gpu_before_any_work(tmp_path):
    f = tmp_path / "plain.txt"
    f.write_text("x")
    broken = tmp_path / "ranker.json"
    broken.write_text('{"format": ')
    folder = tmp_path / "model"
    folder.mkdir()
    base = ("bench", "run", "--suite", "sample", "--limit", "1", "--samples", "1")
    cases = [
        (["--model", "scripted:best", "--out", f], ["--out", "is a file"], 2),
        (
            ["--model", "scripted:best", "--out", tmp_path / "r", "--cache-dir", f],
            ["--cache-dir", "is a file"],
            2,
        ),
        (["--model", "./no/such/model", "--out", tmp_path / "r"], ["no such file or folder"], 2),
        (  # before the model is looked at (and loaded: minutes for a large one)
            ["--model", "./no/such/model", "--out", tmp_path / "r", "--wall-budget", "0"],
            ["--wall-budget 0.0: give seconds > 0"],
            2,
        ),
        (["--model", folder, "--out", tmp_path / "r"], ["holds no config.json"], 2),
        (
            ["--model", f"http://127.0.0.1:{_closed_port()}/v1", "--out", tmp_path / "r"],
            ["no server answers there"],
            1,
        ),
        (
            [
                "--model",
                "scripted:best",
                "--out",
                tmp_path / "r",
                "--compile-only",
                "--ranker",
                broken,
            ],
            ["--ranker", "cannot read the ranker model"],
            2,
        ),
        (["--model", "scripted:best", "--out", tmp_path / "r", "--full"], ["--full needs"], 1),
    ]
    for extra, needles, code in cases:
        user_error(cli(*base, *extra, CUDA_VISIBLE_DEVICES=""), *needles, code=code)
    assert not (tmp_path / "r").exists()


def test_compare_checks_its_out_and_never_writes_into_a_run(tmp_path):
    f = tmp_path / "plain.txt"
    f.write_text("x")
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    user_error(cli("bench", "compare", run, run, "--out", f), "--out", "is a file", code=2)
    settings = {"model": "m", "suite": "s", "samples": 1, "turns": 1}
    (run / "run.json").write_text(json.dumps({"settings": settings, "tasks": {}}))
    r = cli("bench", "compare", run, tmp_path / "." / "run", "--out", tmp_path / "c")
    user_error(r, "is given twice", "compare different run folders", code=2)
    assert not (tmp_path / "c").exists()
    (run / "run.json").write_text("{}")
    r = cli("bench", "compare", run, run, "--out", run)
    user_error(r, f"--out {run} is a run folder", "new folder", code=2)
    assert sorted(p.name for p in run.iterdir()) == ["run.json"]


def test_run_files_that_are_not_what_bench_wrote_are_named(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    cases = [
        ("run.json", b"[1]", "run.json: not a run.json written by `cudaperf bench run`"),
        ("run.json", b"\x89PNG\r\n\xff", "run.json: not a run.json written by"),
        ("trajectories.jsonl", b"[1]\n", "trajectories.jsonl:1: expected a JSON object"),
        ("trajectories.jsonl", b"\xff\xfe\n", "trajectories.jsonl: not UTF-8 text"),
    ]
    for name, content, needle in cases:
        settings = {"model": "m", "suite": "s", "samples": 1, "turns": 1}
        if name != "run.json":
            (run / "run.json").write_text(json.dumps({"settings": settings, "tasks": {}}))
        (run / name).write_bytes(content)
        user_error(cli("bench", "report", run), needle, code=2)
        user_error(cli("bench", "compare", run, run, "--out", tmp_path / "c"), needle, code=2)


@needs_nvcc
def test_kind_keeps_one_kind_before_the_subset_and_the_command_repeats_it(tmp_path):
    res = bench_run(tmp_path, "scripted:best", "c", "--kind", "c2cuda")
    assert res.exit_code == 0, res.output
    run = json.loads((tmp_path / "c/run.json").read_text())
    assert len(run["tasks"]) == 4
    assert {v["kind"] for v in run["tasks"].values()} == {"c2cuda"}
    assert "--kind c2cuda" in run["command"] and run["settings"]["kind"] == "c2cuda"
    torch = bench_run(tmp_path, "scripted:best", "t", "--kind", "torch2cuda")
    assert torch.exit_code == 0, torch.output
    kinds = {v["kind"] for v in json.loads((tmp_path / "t/run.json").read_text())["tasks"].values()}
    assert kinds == {"torch2cuda"}


@needs_nvcc
def test_a_run_uses_one_evaluator_for_every_turn_and_chunk(tmp_path, monkeypatch):
    """One EvalSession per `bench run`: its workers, secret salt, input sets and C baselines
    are made once. Before, every evaluator call (each turn of each --batch-tasks chunk) started
    a new backend with a new salt."""
    import cudaperf.execute.pool as pool

    made, real = [], pool.LocalBackend

    class Counting(real):
        def __init__(self, *a, **k):
            made.append(1)
            super().__init__(*a, **k)

    import cudaperf.execute.api as api
    import cudaperf.execute.session as session

    for module in (pool, api, session):  # every place a backend is made from
        monkeypatch.setattr(module, "LocalBackend", Counting)
    res = bench_run(tmp_path, "scripted:best", "one", "--batch-tasks", "2")  # 2 chunks x 2 turns
    assert res.exit_code == 0, res.output
    assert len(made) == 1


@needs_nvcc
def test_reward_overrides_reach_the_scorer_and_are_recorded_for_the_resume(tmp_path, monkeypatch):
    """`bench run --reward FIELD=VALUE` as `train grpo` has it: the scorer gets the changed
    reward, run.json and its resume command keep the override, a resume without it is refused."""
    import cudaperf.cli.bench as bench_cli

    seen, real = [], bench_cli._scorer

    def scorer(tasks, reward, *a, **k):
        seen.append(reward)
        return real(tasks, reward, *a, **k)

    monkeypatch.setattr(bench_cli, "_scorer", scorer)
    res = bench_run(tmp_path, "scripted:naive", "r", "--reward", "structure_weight=0.5")
    assert res.exit_code == 0, res.output
    assert [r.structure_weight for r in seen] == [0.5] and seen[0].name.startswith("unified")
    run = json.loads((tmp_path / "r/run.json").read_text())
    assert run["settings"]["reward"] == "structure_weight=0.5"
    assert "--reward structure_weight=0.5" in run["command"]
    again = bench_run(tmp_path, "scripted:naive", "r")
    assert again.exit_code == 2 and "reward='structure_weight=0.5' there, '' now" in again.output
    bad = bench_run(tmp_path, "scripted:naive", "x", "--reward", "no_such_field=1")
    assert bad.exit_code == 2 and "no_such_field" in bad.output
    assert len(bad.output.strip().splitlines()) == 1, bad.output


def test_an_infinite_temperature_is_refused(tmp_path):
    r = cli("bench", "run", "--suite", "sample", "--model", "scripted:best", "--temperature", "inf")
    assert r.returncode == 2 and "--temperature" in r.stderr and "Traceback" not in r.stderr


@needs_nvcc
def test_workers_per_gpu_is_recorded_and_a_resume_with_another_count_is_refused(tmp_path):
    res = bench_run(tmp_path, "scripted:best", "w2", "--workers-per-gpu", "2")
    assert res.exit_code == 0, res.output
    run = json.loads((tmp_path / "w2/run.json").read_text())
    assert run["evaluator"]["workers_per_gpu"] == "2"
    again = bench_run(tmp_path, "scripted:best", "w2")  # the default, 1 worker: another setup
    assert again.exit_code != 0
    err = " ".join(again.output.split())
    assert "another setup" in err and "workers_per_gpu" in err and "Traceback" not in err
    assert bench_run(tmp_path, "scripted:best", "w2", "--workers-per-gpu", "2").exit_code == 0


@needs_nvcc
def test_how_a_model_was_sampled_is_recorded_repeated_and_checked_on_resume(tmp_path):
    """run.json records a model's sampling (temperature, reply length, the generation mode
    that ran), its command repeats them (the bench_suite runs passed --max-tokens 1024 and
    --generation dynamic, which the recorded command dropped), a resume sampling otherwise
    is refused in one line, and a scripted replay records none."""
    from tests.train.helpers import make_tiny_model

    model = str(make_tiny_model(tmp_path / "tiny"))
    args = ("--samples", "1", "--turns", "1", "--limit", "1")
    opts = ("--temperature", "0.7", "--max-tokens", "8", "--generation", "auto")
    res = bench_run(tmp_path, model, "m", *args, *opts)
    assert res.exit_code == 0, res.output
    run = json.loads((tmp_path / "m/run.json").read_text())
    assert run["sampling"] == {
        "temperature": 0.7,
        "max_tokens": 8,
        "generation": "dynamic",  # auto on a CPU
        "gguf_file": None,
    }
    assert "--temperature 0.7 --max-tokens 8 --generation dynamic" in run["command"]
    assert "--gguf-file" not in run["command"]
    for change, shown in (
        (("--max-tokens", "9"), "max_tokens 8 there, 9 now"),
        (("--temperature", "0.8"), "temperature 0.7 there, 0.8 now"),
        (("--generation", "static"), "generation 'dynamic' there, 'static' now"),
    ):
        swapped = dict(zip(opts[::2], opts[1::2], strict=True)) | dict([change])
        again = bench_run(tmp_path, model, "m", *args, *[x for kv in swapped.items() for x in kv])
        assert again.exit_code == 2 and shown in again.output, again.output
        assert "sampled otherwise" in again.output
        assert len(again.output.strip().splitlines()) == 1, again.output
    bad = bench_run(tmp_path, model, "b", *args, "--generation", "fastest")
    assert bad.exit_code == 2 and "--generation 'fastest': unknown" in bad.output, bad.output
    assert len(bad.output.strip().splitlines()) == 1, bad.output
    same = bench_run(tmp_path, model, "m", *args, *opts)  # the same options resume
    assert same.exit_code == 0 and "already finished" in same.output, same.output
    res = bench_run(tmp_path, "scripted:best", "s", *args)
    assert res.exit_code == 0, res.output
    run = json.loads((tmp_path / "s/run.json").read_text())
    assert "sampling" not in run and "--max-tokens" not in run["command"]


@needs_nvcc
def test_max_batch_sets_the_sequences_of_one_generate_call(tmp_path, monkeypatch):
    import cudaperf.generation as generation
    from tests.train.helpers import make_tiny_model

    model = str(make_tiny_model(tmp_path / "tiny"))
    rows, real = [], generation.generate_ids

    def counting(model_, prompts, *a, **k):
        rows.append(len(prompts))
        return real(model_, prompts, *a, **k)

    monkeypatch.setattr(generation, "generate_ids", counting)
    args = ("--samples", "2", "--turns", "1", "--limit", "2", "--max-tokens", "4")
    for out, extra, calls in (("one", (), [4]), ("two", ("--max-batch", "2"), [2, 2])):
        rows.clear()
        res = bench_run(tmp_path, model, out, *args, *extra)
        assert res.exit_code == 0, res.output
        assert rows == calls


@needs_nvcc
def test_bench_pack_gzips_a_finished_run_and_names_what_it_cannot_pack(tmp_path):
    res = bench_run(tmp_path, "scripted:best", "done")
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["bench", "pack", str(tmp_path / "done")])
    assert res.exit_code == 0 and "packed " in res.output and " -> " in res.output, res.output
    assert (tmp_path / "done/trajectories.jsonl.gz").is_file()
    report = runner.invoke(app, ["bench", "report", str(tmp_path / "done")])
    assert report.exit_code == 0 and "compile rate (turn 1)" in report.output
    for folder, message in (
        (tmp_path / "done", "packed already; nothing to pack"),
        (tmp_path / "none", "no run.json"),
    ):
        res = runner.invoke(app, ["bench", "pack", str(folder)])
        assert res.exit_code == 2 and message in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1, res.output


@needs_nvcc
def test_turns_from_begins_a_run_of_more_turns_and_the_command_repeats_it(tmp_path):
    one = bench_run(tmp_path, "scripted:best", "one", "--turns", "1")
    assert one.exit_code == 0, one.output
    three = bench_run(
        tmp_path, "scripted:best", "three", "--turns", "3", "--turns-from", str(tmp_path / "one")
    )
    assert three.exit_code == 0, three.output
    assert "first turns: 4 task(s) begin with the turn 1 recorded by" in three.stdout
    run = json.loads((tmp_path / "three/run.json").read_text())
    assert run["turns_from"]["tasks"] == 4 and run["settings"]["turns"] == 3
    assert f"--turns-from {tmp_path / 'one'}" in run["command"]
    lines = (tmp_path / "three/trajectories.jsonl").read_text().splitlines()
    assert lines[0] == (tmp_path / "one/trajectories.jsonl").read_text().splitlines()[0]
    for source, message in (
        (tmp_path / "none", "--turns-from"),
        (tmp_path / "three", "it ran 3 turn(s)"),
    ):
        res = bench_run(tmp_path, "scripted:best", "t4", "--turns", "3", "--turns-from", source)
        assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output
    assert not (tmp_path / "t4" / "trajectories.jsonl").exists()
    shutil.copytree(tmp_path / "one", tmp_path / "one2")  # the same turns, another run folder
    res = bench_run(
        tmp_path, "scripted:best", "three", "--turns", "3", "--turns-from", tmp_path / "one2"
    )
    assert res.exit_code == 2 and "its first turns came from" in res.output


@needs_nvcc
def test_a_run_keeps_each_evaluator_result_until_its_chunk_is_recorded(tmp_path, monkeypatch):
    """`bench run` wraps its evaluator session in `KeptResults`: every batch appends its
    results to RUN/scored_results.jsonl as they finish (so a batch cut by Ctrl-C or a call's
    budget is not evaluated again), and the file is gone once the run's chunks are recorded."""
    import cudaperf.execute.api as api

    outs, real = [], api.evaluate_batch

    def recording(jobs, config, out=None, **kw):
        outs.append(out)
        yield from real(jobs, config, out=out, **kw)

    monkeypatch.setattr(api, "evaluate_batch", recording)
    res = bench_run(tmp_path, "scripted:best", "one", "--batch-tasks", "2")  # 2 chunks x 2 turns
    assert res.exit_code == 0, res.output
    assert outs and set(outs) == {tmp_path / "one/scored_results.jsonl"}
    assert not (tmp_path / "one/scored_results.jsonl").exists()


def test_a_suite_file_whose_every_row_the_importer_skips_says_why(tmp_path):
    """It said "no task to run (after --kind/--limit ...)", which pointed at the wrong options."""
    bt = tmp_path / "bt.jsonl"
    bt.write_text('not json\n{"id": 4, "cpp_code": "int f();"}\n')
    suite = ["--suite", "babeltower", "--suite-path", bt, "--out", tmp_path / "r"]
    r = cli("bench", "run", "--model", "scripted:naive", *suite, timeout=60)
    user_error(r, f"--suite babeltower: {bt} gave no task", "not a JSON object: 1", code=2)
    assert "missing field(s) cuda_code" in r.stderr


@needs_nvcc
def test_a_wall_budget_stop_exits_75_with_one_line_and_the_same_command_resumes(tmp_path):
    """A run whose earlier chunks took 500 s does not start one with 100 s of budget: exit 75
    (sysexits' "try again"), one line saying why and how to resume, nothing run; the same
    command with room for a chunk finishes the run."""
    out = tmp_path / "r"
    out.mkdir()
    slow = {"tasks": 4, "complete": True, "wall_s": 500.0, "generate_s": 1.0, "score_s": 499.0}
    (out / "timing.jsonl").write_text(json.dumps(slow) + "\n")
    res = bench_run(tmp_path, "scripted:best", "r", "--wall-budget", "100")
    assert res.exit_code == 75, res.output
    assert "stopped by the wall budget (100 s): the next chunk is expected to take 500 s" in (
        res.output
    )
    assert f"the same command resumes the run in {out}" in res.output.replace("\n", "")
    assert "Traceback" not in res.output and not (out / "trajectories.jsonl").exists()
    res = bench_run(tmp_path, "scripted:best", "r", "--wall-budget", "1000")
    assert res.exit_code == 0, res.output
    assert len((out / "timing.jsonl").read_text().splitlines()) == 2  # the seeded chunk + 1


def test_a_dataset_that_the_suites_do_not_read_is_refused(tmp_path):
    """--dataset is read by test-families and train-unseen only: with another suite it was
    ignored (exit 0, the run on other tasks than named); a dataset with no splits.json beside
    it named no fix."""
    tasks = tmp_path / "t.jsonl"
    assert cli("tasks", "export", "--sample", "--out", tasks).returncode == 0
    base = ("bench", "run", "--model", "scripted:best", "--compile-only", "--out", tmp_path / "r")
    r = cli(*base, "--suite", "sample", "--dataset", tasks)
    user_error(r, f"--dataset {tasks}", "test-families and train-unseen", code=2)
    r = cli(*base, "--suite", "test-families", "--dataset", tasks)
    user_error(r, "no splits file beside the dataset", "data build", code=2)
    assert not (tmp_path / "r").exists()
