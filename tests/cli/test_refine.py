"""`cudaperf refine`: a server that is not running, a model path that does not exist and bad
sampling options are each one line, before any model is loaded."""

from __future__ import annotations

import socket

from tests.cli.helpers import (
    cli,
    finished_lines,
    interrupt,
    lines,
    needs_nvcc,
    slow_nvcc_path,
    start,
    user_error,
    wait_for,
)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends


def test_no_server_at_the_url(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    r = cli("refine", "saxpy", "--model", url, "--out", tmp_path / "t.jsonl", timeout=60)
    user_error(r, f"--model {url}", "no server answers", "start the OpenAI-compatible", code=1)
    assert not (tmp_path / "t.jsonl").exists()


def test_model_path_that_does_not_exist(tmp_path):
    for spec in (str(tmp_path / "ckpt"), "./nope", "model.gguf"):
        r = cli("refine", "saxpy", "--model", spec, cwd=tmp_path)
        user_error(r, f"--model {spec}", "no such file or folder", code=2)


def test_target_file_that_does_not_exist(tmp_path):
    r = cli("refine", tmp_path / "kernel.c", "--function", "f", "--sizes", "n=4")
    user_error(r, "TARGET", "no such file")


def test_default_best_out_is_checked_before_the_work(tmp_path):
    (tmp_path / "traj_best").write_text("x")  # where the best kernel would go by default
    r = cli("refine", "saxpy", "--model", "scripted:implementations", cwd=tmp_path)
    user_error(r, "--best-out", "traj_best", "is a file")
    assert not (tmp_path / "traj.jsonl").exists()


def test_an_existing_best_out_is_refused_before_the_work_unless_overwrite(tmp_path):
    mine = tmp_path / "saxpy_best.cu"
    mine.write_text("my kernel")
    r = cli(
        "refine",
        "saxpy",
        "--model",
        "scripted:best",
        "--out",
        tmp_path / "t.jsonl",
        "--best-out",
        mine,
    )
    user_error(r, f"--best-out {mine} exists", "--overwrite", code=2)
    assert mine.read_text() == "my kernel" and not (tmp_path / "t.jsonl").exists()


def _fake_refine(monkeypatch, make_file=None):
    """`refine` replaced by one that returns a best kernel at once (after making `make_file`,
    as another process could while refine runs)."""
    from cudaperf.refine import loop
    from cudaperf.refine.trajectory import SummaryRecord

    def fake(task, backend, scorer, **kw):
        if make_file is not None:
            make_file.parent.mkdir(parents=True, exist_ok=True)
            make_file.write_text("theirs")
        summary = SummaryRecord(
            task_id=task.id,
            model="m",
            turns=1,
            stopped="turns",
            best_turn=1,
            best_index=0,
            best_total=1.0,
            best_status="ok",
            best_speedup=2.0,
            best_code="// new",
            reward_config="unified",
            mode="full",
        )
        return loop.RefineResult(task.id, summary=summary)

    monkeypatch.setattr(loop, "refine", fake)


def _invoke(tmp_path, *extra):
    from typer.testing import CliRunner

    from cudaperf.cli import app

    args = [
        "refine",
        "saxpy",
        "--model",
        "scripted:best",
        "--compile-only",
        "--ranker",
        "none",
        "--out",
        str(tmp_path / "t.jsonl"),
        *map(str, extra),
    ]
    return CliRunner().invoke(app, args)


def test_the_default_best_kernel_never_replaces_a_file(tmp_path, monkeypatch):
    """The default goes beside the trajectory (t.jsonl -> t_best/), numbered when taken, even
    when the name was taken while refine ran; --overwrite replaces."""
    first = tmp_path / "t_best" / "saxpy_best.cu"
    _fake_refine(monkeypatch, make_file=first)
    res = _invoke(tmp_path)
    assert res.exit_code == 0, res.output
    assert first.read_text() == "theirs"
    assert (tmp_path / "t_best" / "saxpy_best-2.cu").read_text() == "// new"
    assert "saxpy_best-2.cu" in res.stdout
    _fake_refine(monkeypatch)
    assert _invoke(tmp_path).exit_code == 0
    assert (tmp_path / "t_best" / "saxpy_best-3.cu").read_text() == "// new"
    assert _invoke(tmp_path, "--overwrite").exit_code == 0
    assert first.read_text() == "// new" and not (tmp_path / "t_best" / "saxpy_best-4.cu").exists()


def test_a_best_out_made_during_the_run_is_not_replaced(tmp_path, monkeypatch):
    best = tmp_path / "best.cu"
    _fake_refine(monkeypatch, make_file=best)
    res = _invoke(tmp_path, "--best-out", best)
    assert res.exit_code == 1 and f"--best-out {best} was made while refine ran" in res.output
    assert best.read_text() == "theirs"


@needs_nvcc
def test_ctrl_c_stops_refine_and_keeps_the_finished_turns(tmp_path):
    out = tmp_path / "traj.jsonl"
    p = start(
        "refine",
        "c2cuda/matmul",
        "--model",
        "scripted:weakest-first",
        "--turns",
        "4",
        "--samples",
        "2",
        "--compile-only",
        "--cache-dir",
        tmp_path / "cache",
        "--out",
        out,
        "--best-out",
        tmp_path / "best.cu",
        PATH=slow_nvcc_path(tmp_path),
    )
    wait_for(lambda: finished_lines(out) >= 1, 120, "the first turn")
    seconds, stdout, err = interrupt(p, limit_s=10)
    assert p.returncode == 130 and seconds < 10, (seconds, err)  # a few seconds, under load
    assert "Traceback" not in err
    kept = lines(out)
    assert kept and kept[0]["type"] == "turn" and kept[0]["turn"] == 1
    assert all(r["type"] == "turn" for r in kept) and len(kept) < 4
    # the rerun continues the stopped episode after its last recorded turn
    r = cli(
        "refine",
        "c2cuda/matmul",
        "--model",
        "scripted:weakest-first",
        "--turns",
        "4",
        "--samples",
        "2",
        "--compile-only",
        "--cache-dir",
        tmp_path / "cache",
        "--out",
        out,
        "--best-out",
        tmp_path / "best.cu",
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert f"resuming sample/c2cuda/matmul after turn {len(kept)}" in r.stdout + r.stderr
    turns = [x["turn"] for x in lines(out) if x["type"] == "turn"]
    assert turns == list(range(1, len(turns) + 1)) and lines(out)[-1]["type"] == "summary"


def test_adapter_is_checked_and_reaches_the_hf_backend(tmp_path, monkeypatch):
    """`--adapter` loads a trained LoRA adapter on top of a Hugging Face model: a folder with
    no adapter or a non-HF model is one line before any work; a real one reaches the backend."""
    r = cli("refine", "saxpy", "--model", "scripted:implementations", "--adapter", tmp_path)
    user_error(r, "--adapter works with a Hugging Face --model", code=2)
    r = cli("refine", "saxpy", "--model", "org/name", "--adapter", tmp_path)
    user_error(r, f"--adapter {tmp_path}", "no adapter_config.json", code=2)

    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.refine import backends

    (tmp_path / "adapter_config.json").write_text("{}")
    seen = {}

    def fake(spec, task=None, tasks=(), **options):
        seen.update(options, spec=spec)
        raise ValueError("stop here")

    monkeypatch.setattr(backends, "make_backend", fake)
    out = CliRunner().invoke(
        app,
        [
            "refine",
            "saxpy",
            "--model",
            "org/name",
            "--adapter",
            str(tmp_path),
            "--out",
            str(tmp_path / "t.jsonl"),
            "--compile-only",
            "--ranker",
            "none",
        ],
    )
    assert out.exit_code == 2 and "stop here" in out.output
    assert seen["spec"] == "org/name" and seen["adapter"] == tmp_path


def test_model_help_lists_every_spec_make_backend_accepts():
    from cudaperf.refine.scripted import SCRIPTED

    r = cli("refine", "--help", COLUMNS="400")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.replace("│", " ").split())
    for spec in (*SCRIPTED, "smollm2", "http(s)://", "Hugging Face", ".gguf"):
        assert spec in text, spec


def test_a_target_that_is_binary_or_a_folder_is_one_line(tmp_path):
    for name in ("port.c", "model.py"):
        bad = tmp_path / name
        bad.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
        r = cli(
            "refine",
            bad,
            "--function",
            "f",
            "--sizes",
            "n=4",
            "--model",
            "scripted:best",
            "--out",
            tmp_path / "t.jsonl",
        )
        user_error(r, f"TARGET {bad} is not UTF-8 text", "save it as UTF-8", code=2)
    r = cli("refine", tmp_path, "--model", "scripted:best", "--out", tmp_path / "t.jsonl")
    user_error(r, f"TARGET {tmp_path} is a folder", "--tasks", code=2)


def test_an_out_whose_lines_are_not_records_is_named(tmp_path):
    for content, needle in (
        ("[1]\n", "expected a JSON object"),
        ('{"type": "turn"}\n', "turn record, field 'task_id'"),
    ):
        out = tmp_path / "t.jsonl"
        out.write_text(content)
        r = cli("refine", "saxpy", "--model", "scripted:best", "--out", out)
        user_error(r, f"--out {out}", "t.jsonl:1", needle, code=2)


def test_reward_overrides_reach_the_scorer_and_a_bad_one_is_one_line(tmp_path, monkeypatch):
    """`refine --reward FIELD=VALUE` as `train grpo` and `bench run` have it."""
    import cudaperf.cli.refine as refine_cli

    seen = []
    real = refine_cli.scorer_for
    monkeypatch.setattr(
        refine_cli, "scorer_for", lambda task, cfg, *a: seen.append(cfg) or real(task, cfg, *a)
    )
    _fake_refine(monkeypatch)
    res = _invoke(tmp_path, "--reward", "structure_weight=0.25")
    assert res.exit_code == 0, res.output
    assert [c.structure_weight for c in seen] == [0.25]
    bad = _invoke(tmp_path, "--reward", "structure_weight=lots")
    assert bad.exit_code == 2 and "structure_weight" in bad.output
    assert len(bad.output.strip().splitlines()) == 1, bad.output


def test_a_target_module_with_bad_syntax_or_a_c_file_with_bad_sizes_is_one_line(tmp_path):
    """A module Python cannot parse was a SyntaxError traceback; sizes that build no valid task
    were pydantic's three-line dump with a URL."""
    mod = tmp_path / "m.py"
    mod.write_text("class Model(:\n    pass\ndef get_inputs(:\n    return []\n")
    out = ["--model", "scripted:best", "--out", tmp_path / "t.jsonl"]
    r = cli("refine", mod, *out)
    user_error(r, f"TARGET {mod}: line 1", "fix the module's syntax", code=2)
    c = tmp_path / "ax.c"
    c.write_text("void scale(int n, float a, const float* x, float* y) { y[0] = a * x[0]; }\n")
    fn = ["--function", "scale"]
    r = cli("refine", c, *fn, "--sizes", "n=16", *out)
    user_error(r, f"TARGET {c}", "no value for scalar parameter(s) ['a']", "--sizes", code=2)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr  # not pydantic's dump
    r = cli("refine", c, *fn, "--sizes", "n=16,a=2", "--length", "x=m", *out)
    user_error(r, f"TARGET {c}", "('m') names ['m']", code=2)
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "t.jsonl").exists()


def test_an_infinite_temperature_is_refused(tmp_path):
    r = cli("refine", "saxpy", "--model", "scripted:best", "--temperature", "inf")
    assert r.returncode == 2 and "--temperature" in r.stderr and "Traceback" not in r.stderr


def test_a_gguf_file_with_a_model_that_has_none_is_refused(tmp_path):
    """`--gguf-file` with a scripted model or a server URL was ignored without a word."""
    out = tmp_path / "t.jsonl"
    r = cli("refine", "saxpy", "--model", "scripted:best", "--gguf-file", "m.gguf", "--out", out)
    user_error(r, "--gguf-file works with a Hugging Face --model", code=2)
    assert not out.exists()


def test_options_a_task_id_would_ignore_are_refused(tmp_path):
    """--sizes/--function/--length shape a task built from a .c file and did nothing with a
    task id; a --best-out of another extension got CUDA in a .py file."""
    base = ("refine", "saxpy", "--model", "scripted:best", "--out", tmp_path / "t.jsonl")
    r = cli(*base, "--sizes", "n=5")
    user_error(r, "--sizes describe a .c TARGET", "drop them", code=2)
    r = cli(*base, "--function", "f", "--length", "x=n")
    user_error(r, "--function, --length describe a .c TARGET", code=2)
    r = cli(*base, "--best-out", tmp_path / "best.py")
    user_error(r, "--best-out", "is a .cu file", code=2)
    assert not (tmp_path / "t.jsonl").exists() and not (tmp_path / "best.py").exists()


def test_a_length_that_is_not_array_equals_expr_or_names_no_array_is_refused(tmp_path):
    """`--length x` (no '=') and `--length y=n` (no array y) were dropped without a word: the
    task was built as if they had not been given."""
    c = tmp_path / "f.c"
    c.write_text("void f(int n, int m, float* x) { x[0] = 2; }\n")
    out = tmp_path / "t.jsonl"
    base = ("refine", c, "--function", "f", "--sizes", "n=16,m=2", "--model", "scripted:best")
    r = cli(*base, "--length", "x", "--out", out)
    user_error(r, "--length 'x'", "ARRAY=EXPR", code=2)
    r = cli(*base, "--length", "x=n", "--length", "y=n", "--out", out)
    user_error(r, "--length y=", "no array parameter 'y'", "its arrays are x", code=2)
    r = cli(*base, "--length", "x=n", "--length", "x=m", "--out", out)
    user_error(r, "array 'x' is given twice", code=2)
    assert not out.exists()
