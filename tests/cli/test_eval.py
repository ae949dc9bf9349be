"""`cudaperf eval` as a user runs it: bad candidates files, a missing GPU or nvcc, reruns that
never duplicate rows, and Ctrl-C that stops at once, keeps finished rows and resumes."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from cudaperf.tasks.io import load_sample
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


def _saxpy_naive() -> str:
    (t,) = [t for t in load_sample() if t.id.endswith("/saxpy")]
    return next(i.code for i in t.implementations if i.id == "naive")


def _cands(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        ('{"task_id": "saxpy", "code": 123}\n', ["c.jsonl:1", "field 'code'", "got int"]),
        ('{"task_id": ["saxpy"], "code": "x"}\n', ["field 'task_id'", "got list"]),
        ('{"task_id": "saxpy"}\n', ["c.jsonl:1", "'task_id' and 'code'"]),
        ("[1, 2]\n", ["c.jsonl:1", "not a JSON object"]),
        ('{"task_id": "saxpy", "code": "x"\n', ["c.jsonl:1", "not valid JSON"]),
        ("\n\n", ["holds no candidates"]),
        ('{"task_id": "no_such_task", "code": "x"}\n', ["no task 'no_such_task'"]),
        (
            '{"task_id": "saxpy", "code": "Here it is:\\n```cuda\\n__global__ void k(){}\\n```"}\n',
            ["c.jsonl:1", "model reply with a ``` fence", "cudaperf reward"],
        ),
        ('{"task_id": "saxpy", "code": "x", "name": "mine"}\n', ["field 'name' is not read"]),
        (
            '{"task_id": "saxpy", "code": "x", "id": "a"}\n'
            '{"task_id": "saxpy", "code": "y", "id": "a"}\n',
            ["c.jsonl:2", "id 'a' of task 'saxpy' is also on line 1"],
        ),
    ],
    ids=[
        "code-int",
        "task-id-list",
        "no-code",
        "not-object",
        "bad-json",
        "empty",
        "unknown",
        "fenced-reply",
        "name-for-id",
        "duplicate-id",
    ],
)
def test_bad_candidates_files_name_the_line_and_field(tmp_path, content, needles):
    p = tmp_path / "c.jsonl"
    p.write_text(content)
    user_error(cli("eval", "--candidates", p, "--compile-only"), *needles, code=2)


def test_candidates_that_are_not_utf8_or_missing(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_bytes(b'{"task_id": "saxpy", "code": "\xff\xfe"}\n')
    user_error(cli("eval", "--candidates", p), "not UTF-8", "save it as UTF-8")
    user_error(cli("eval", "--candidates", tmp_path / "none.jsonl"), "does not exist")


def test_full_without_a_gpu_is_an_environment_error(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine may have a GPU")
    c = _cands(tmp_path / "c.jsonl", [{"task_id": "saxpy", "code": _saxpy_naive()}])
    r = cli("eval", "--candidates", c, "--full", "--cache-dir", tmp_path / "cache")
    user_error(r, "--full needs an NVIDIA GPU", "--compile-only", code=1)


def test_no_nvcc_on_path_blames_the_toolchain_not_the_candidate(tmp_path):
    """Neither a `compile_error` for the candidate nor a logged traceback."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("gcc", "cc", "g++"):  # keep the C compiler, drop nvcc
        if shutil.which(tool):
            os.symlink(shutil.which(tool), bindir / tool)
    c = _cands(tmp_path / "c.jsonl", [{"task_id": "saxpy", "code": _saxpy_naive()}])
    out = tmp_path / "o.jsonl"
    r = cli("eval", "--candidates", c, "--out", out, PATH=str(bindir))
    user_error(r, "nvcc is not on PATH", "install the CUDA toolkit", code=1)
    assert not out.exists()


@pytest.mark.parametrize("kind", ["c2cuda/saxpy", "torch2cuda/softmax"])
def test_missing_nvcc_inside_the_evaluator_is_an_infra_error_without_traceback(
    tmp_path, monkeypatch, kind
):
    """Library path (no CLI pre-check): a ToolchainError is INFRA_ERROR, logged in one line,
    for C→CUDA (nvcc from the config) and PyTorch→CUDA (nvcc from PATH) candidates alike."""
    import logging

    from cudaperf.execute import Candidate, EvalConfig, Status, evaluate_batch

    (task,) = [t for t in load_sample() if t.id.endswith(kind)]
    code = task.implementations[0].code
    if kind.startswith("torch"):
        monkeypatch.setenv("PATH", str(tmp_path))  # its kernels are built by the nvcc on PATH
    cfg = EvalConfig(compile_only=True, nvcc=str(tmp_path / "no-nvcc"), cache_dir=tmp_path / "c")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("cudaperf.execute.pool").addHandler(handler)
    try:
        (res,) = list(evaluate_batch([(task, Candidate(code=code))], cfg))
    finally:
        logging.getLogger("cudaperf.execute.pool").removeHandler(handler)
    assert res.status is Status.INFRA_ERROR and "nvcc not found" in res.feedback[0]
    assert records and all(r.exc_info is None for r in records)


@needs_nvcc
def test_no_cache_rerun_with_the_same_out_does_not_duplicate_rows(tmp_path):
    c = _cands(tmp_path / "c.jsonl", [{"task_id": "saxpy", "code": _saxpy_naive(), "id": "a"}])
    out = tmp_path / "o.jsonl"
    args = [
        "eval",
        "--candidates",
        c,
        "--compile-only",
        "--out",
        out,
        "--cache-dir",
        tmp_path / "cache",
        "--no-cache",
    ]
    assert cli(*args).returncode == 0
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    assert "kept, not recomputed" in r.stderr
    assert len(lines(out)) == 1


@needs_nvcc
def test_ctrl_c_stops_eval_keeps_finished_rows_and_a_rerun_resumes(tmp_path):
    code = _saxpy_naive()
    rows = [{"task_id": "saxpy", "code": f"// v{k}\n{code}", "id": f"v{k}"} for k in range(8)]
    c = _cands(tmp_path / "c.jsonl", rows)
    out, cache = tmp_path / "o.jsonl", tmp_path / "cache"
    args = [
        "eval",
        "--candidates",
        c,
        "--compile-only",
        "--jobs",
        "1",
        "--out",
        out,
        "--cache-dir",
        cache,
    ]
    path = slow_nvcc_path(tmp_path)
    p = start(*args, PATH=path)
    wait_for(lambda: finished_lines(out) >= 1, 90, "the first result")
    seconds, _, err = interrupt(p, limit_s=30)
    assert p.returncode == 130, err
    # Stopped, not finished: the 6+ compiles left take >= 2 s each one at a time (>= 12 s), so
    # a run that waited for them cannot pass; the bound leaves room for a loaded machine.
    assert seconds < 10, f"took {seconds:.1f} s to stop"
    assert "Traceback" not in err and "run the same command again to resume" in err
    kept = lines(out)
    assert 1 <= len(kept) < 8 and all(r["status"] == "compiled" for r in kept)
    # nothing half-done was cached: the rerun compiles the rest and every row is a real verdict
    r = cli(*args, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["summary"]["statuses"] == {"compiled": 8}
    assert sum(x["cached"] for x in doc["results"]) == len(kept)
    assert sorted(x["candidate_id"] for x in lines(out)) == [f"v{k}" for k in range(8)]


def test_no_isolation_reaches_the_evaluator_config(monkeypatch, tmp_path):
    """`--no-isolation` is the escape hatch for machines where the sandbox breaks the worker:
    it must turn `EvalConfig.isolate_files` off, and the default must keep it on."""
    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.cli import eval as eval_cli

    seen = []
    monkeypatch.setattr(eval_cli, "_run", lambda jobs, cfg, *a, **k: seen.append(cfg) or [])
    monkeypatch.setattr(eval_cli, "check_toolchain", lambda *a: None)
    args = [
        "eval",
        "--implementations",
        "--task",
        "saxpy",
        "--compile-only",
        "--cache-dir",
        str(tmp_path / "c"),
    ]
    for extra in ([], ["--no-isolation"], ["--workers-per-gpu", "3"]):
        r = CliRunner().invoke(app, [*args, *extra])
        assert r.exit_code == 0, r.output
    assert [c.isolate_files for c in seen] == [True, False, True]
    assert [c.workers_per_gpu for c in seen] == [1, 1, 3]
    r = CliRunner().invoke(app, [*args, "--workers-per-gpu", "2", "--backend", "ray"])
    assert r.exit_code == 2 and "local backend" in r.output and len(seen) == 3


@needs_nvcc
def test_ctrl_c_stops_eval_on_the_ray_backend_and_keeps_finished_rows(tmp_path):
    pytest.importorskip("ray")
    code = _saxpy_naive()
    rows = [{"task_id": "saxpy", "code": f"// r{k}\n{code}", "id": f"r{k}"} for k in range(16)]
    c = _cands(tmp_path / "c.jsonl", rows)
    out = tmp_path / "o.jsonl"
    args = [
        "eval",
        "--candidates",
        c,
        "--compile-only",
        "--jobs",
        "1",
        "--backend",
        "ray",
        "--out",
        out,
        "--cache-dir",
        tmp_path / "cache",
    ]
    p = start(*args, PATH=slow_nvcc_path(tmp_path))
    wait_for(lambda: finished_lines(out) >= 1, 180, "the first result")
    seconds, _, err = interrupt(p, limit_s=45)
    assert p.returncode == 130, err
    # Stopped, not finished: the 14+ compiles left take >= 2 s each one at a time (>= 28 s);
    # the bound leaves room for Ray's own shutdown on a loaded machine (11.6 s was seen).
    assert seconds < 20, f"took {seconds:.1f} s to stop"
    assert "Traceback" not in err and "run the same command again to resume" in err
    kept = lines(out)
    assert 1 <= len(kept) < 16 and all(r["status"] == "compiled" for r in kept)


def test_the_summary_has_a_geomean_per_speedup_field_in_order():
    from cudaperf.cli.eval import _summary
    from cudaperf.execute.types import ExecResult, Status

    ok = ExecResult(
        status=Status.OK,
        mode="full",
        task_id="t",
        candidate_hash="h",
        speedup_vs_cpu=4.0,
        speedup_vs_naive=2.0,
    )
    s = _summary([ok, ok.model_copy(update={"speedup_vs_cpu": 1.0})], [])
    keys = [k for k in s if k.startswith("geomean_")]
    assert keys == [
        "geomean_speedup_vs_cpu",
        "geomean_speedup_vs_naive",
        "geomean_speedup_vs_eager",
        "geomean_speedup_vs_compile",
    ]
    assert s["geomean_speedup_vs_cpu"] == pytest.approx(2.0)
    assert s["geomean_speedup_vs_naive"] == pytest.approx(2.0)
    assert s["geomean_speedup_vs_eager"] is None


@pytest.mark.parametrize("flag", ["--run-timeout", "--timing-budget"])
def test_an_infinite_time_setting_is_one_line(tmp_path, flag):
    """inf passes the evaluator's `> 0` checks: `--run-timeout inf` was taken (a hung
    candidate would hold its worker for ever)."""
    c = _cands(tmp_path / "c.jsonl", [{"task_id": "saxpy", "code": _saxpy_naive()}])
    r = cli("eval", "--candidates", c, "--compile-only", flag, "inf", "--out", tmp_path / "o.jsonl")
    user_error(r, f"{flag} inf", "finite", code=2)
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize(
    ("flag", "value", "field"),
    [
        ("--timing-budget", "-1", "time_budget_s"),
        ("--cpu-time-budget", "0", "cpu_time_budget_s"),
        ("--run-timeout", "-5", "run_timeout_s"),
        ("--arch", "sm_1", "arch"),
    ],
)
def test_a_bad_evaluator_setting_is_named_by_its_flag(tmp_path, flag, value, field):
    """The evaluator's check named its own field (`time_budget_s=-1.0 must be > 0`), a name
    the user never typed; the line names the flag."""
    c = _cands(tmp_path / "c.jsonl", [{"task_id": "saxpy", "code": _saxpy_naive()}])
    r = cli("eval", "--candidates", c, "--compile-only", flag, value)
    line = user_error(r, flag, code=2)
    assert f"{field}=" not in line


def test_an_address_without_the_ray_backend_is_refused(tmp_path):
    """`--address` belongs to `--backend ray`; with the local backend it was ignored."""
    c = _cands(tmp_path / "c.jsonl", [{"task_id": "saxpy", "code": _saxpy_naive()}])
    r = cli("eval", "--candidates", c, "--compile-only", "--address", "host:6379")
    user_error(r, "--address host:6379", "--backend ray", code=2)


def test_a_ray_address_where_nothing_listens_is_one_line_in_seconds(tmp_path):
    """`--backend ray --address bogus:1` waited in ray.init for minutes, printing only Ray's
    retries."""
    pytest.importorskip("ray")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends
    c = _cands(tmp_path / "c.jsonl", [{"task_id": "saxpy", "code": _saxpy_naive()}])
    base = ["eval", "--candidates", c, "--compile-only", "--backend", "ray", "--address"]
    r = cli(*base, f"127.0.0.1:{port}", timeout=60)  # a hang ends the test in TimeoutExpired
    user_error(r, f"--address 127.0.0.1:{port}", "nothing answers", "ray start --head", code=1)
    r = cli(*base, "nohost-and-no-port", timeout=60)
    user_error(r, "--address nohost-and-no-port", "HOST:PORT", code=2)


@needs_nvcc
def test_an_arch_this_nvcc_cannot_build_is_refused_before_any_candidate(tmp_path):
    """--arch sm_70 with nvcc 13 made every candidate a compile_error (exit 0), blamed on the
    code, and the rows stayed in --out; the arch-specific and family forms (sm_90a, sm_100f)
    of a listed code are accepted."""
    from cudaperf.cli.common import UserError, check_arch

    out = tmp_path / "r.jsonl"
    r = cli("eval", "--implementations", "-t", "saxpy", "--arch", "sm_70", "--out", out)
    user_error(r, "--arch sm_70: this nvcc cannot build for it", "sm_90", code=2)
    assert not out.exists()
    r = cli("data", "measure", "--compile-only", "--arch", "sm_70", "--out", out)
    user_error(r, "--arch sm_70", code=2)
    for ok in (None, "sm_90", "sm_90a", "sm_100f"):
        check_arch(ok)
    with pytest.raises(UserError, match="sm_3"):
        check_arch("sm_35")


def test_one_id_may_label_a_candidate_of_each_task(tmp_path):
    from cudaperf.cli.eval import _read_candidates

    tasks = load_sample()
    a, b = tasks[0].id, tasks[1].id
    p = tmp_path / "c.jsonl"
    rows = [{"task_id": a, "code": "x", "id": "naive"}, {"task_id": b, "code": "y", "id": "naive"}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    jobs = _read_candidates(p, tasks)
    assert [(t.id, c.id) for t, c in jobs] == [(a, "naive"), (b, "naive")]


@needs_nvcc
def test_an_out_of_results_made_in_another_mode_or_arch_is_refused(tmp_path):
    """Rows appended to results of another mode or --arch were counted beside them (a
    candidate twice; compile-only rows as failures next to GPU ones)."""
    out = tmp_path / "r.jsonl"
    row = {"status": "ok", "mode": "full", "task_id": "sample/c2cuda/saxpy"}
    out.write_text(json.dumps(row | {"candidate_hash": "h", "arch": "sm_90"}) + "\n")
    kept = out.read_text()
    args = ("eval", "--implementations", "-t", "saxpy", "--out", out)
    user_error(cli(*args, "--compile-only"), "other settings (mode full", "give a new --out")
    out.write_text(kept.replace('"full"', '"compile-only"'))
    kept = out.read_text()
    r = cli(*args, "--compile-only", "--arch", "sm_80")
    user_error(r, "other settings (--arch sm_90; this run: mode compile-only, --arch sm_80)")
    assert out.read_text() == kept
