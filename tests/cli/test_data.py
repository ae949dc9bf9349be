"""`cudaperf data ...`: no default that overwrites the measured dataset, a `verify` default
that exists, and Ctrl-C during `build` that exits at once without a half-written file."""

from __future__ import annotations

import json
import time

from tests.cli.helpers import (
    cli,
    finished_lines,
    interrupt,
    needs_nvcc,
    slow_nvcc_path,
    start,
    user_error,
    wait_for,
)
from tests.tasks.helpers import C_TASK


def test_build_without_out_writes_nothing(tmp_path):
    (tmp_path / "data").mkdir()
    r = cli("data", "build", "--per-family", "1", cwd=tmp_path)
    user_error(r, "give --out FILE", "data/tasks.jsonl.gz holds the measured dataset", code=2)
    assert list(tmp_path.rglob("*")) == [tmp_path / "data"]


def test_build_with_out_writes_tasks_and_splits_there(tmp_path):
    out = tmp_path / "t.jsonl"
    r = cli(
        "data",
        "build",
        "--per-family",
        "1",
        "--families",
        "gemv",
        "--max-family-share",
        "1",
        "--out",
        out,
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["out"] == str(out)
    assert out.is_file() and (tmp_path / "splits.json").is_file()


def test_build_never_takes_over_another_task_sets_splits(tmp_path):
    """The default --splits (splits.json beside --out) is written only for the set it
    describes: a new file beside another set's splits, or a rebuild that would drop tasks the
    splits list, is refused before anything is written; --splits NEW.json goes ahead."""
    gemv = ["data", "build", "--per-family", "1", "--max-family-share", "1", "--families"]
    first = tmp_path / "tasks.jsonl"
    assert cli(*gemv, "gemv", "--out", first).returncode == 0
    splits = tmp_path / "splits.json"
    before = splits.read_text()
    new = tmp_path / "new.jsonl"
    r = cli(*gemv, "histogram", "--out", new)
    user_error(r, f"--splits {splits}", "holds another task set's splits", "--splits NEW.json")
    assert not new.exists() and splits.read_text() == before
    r = cli(*gemv, "histogram", "--out", first)  # the same file, other tasks than its splits list
    user_error(r, "lists tasks this build does not make", "nothing written")
    assert splits.read_text() == before
    assert cli(*gemv, "gemv", "--out", first).returncode == 0  # a rebuild of the same set
    assert splits.read_text() == before
    r = cli(*gemv, "histogram", "--out", new, "--splits", tmp_path / "new_splits.json")
    assert r.returncode == 0 and new.is_file() and splits.read_text() == before, r.stderr


def test_verify_defaults_to_the_dataset_that_exists(tmp_path):
    data = tmp_path / "tasks.jsonl"
    data.write_text(json.dumps(C_TASK) + "\n")
    r = cli("data", "verify", "--no-nvcc", "--json", CUDAPERF_DATASET=str(data))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["references"] == 1
    r = cli("data", "verify", "--help", COLUMNS="300")
    assert "data/tasks.jsonl.gz" in r.stdout and "data/tasks.jsonl " not in r.stdout


def test_measure_without_a_gpu_says_so_after_checking_its_outputs(tmp_path):
    d = tmp_path / "dir.jsonl"
    d.mkdir()
    user_error(cli("data", "measure", "--out", d), "--out", "is a folder")
    r = cli("data", "measure", "--out", tmp_path / "m.jsonl")
    user_error(r, "needs an NVIDIA GPU", "--compile-only", code=1)


def test_ctrl_c_stops_build_at_once_and_leaves_no_partial_file(tmp_path):
    out = tmp_path / "big.jsonl.gz"
    p = start("data", "build", "--c-tasks", "20000", "--torch-tasks", "5000", "--out", out)
    time.sleep(4)  # importing and generating
    assert p.poll() is None, p.communicate()
    seconds, _, err = interrupt(p, limit_s=10)
    assert p.returncode == 130 and seconds < 5, (seconds, err)
    assert "Traceback" not in err and "interrupted" in err
    assert not out.exists() and not (tmp_path / "splits.json").exists()


@needs_nvcc
def test_ctrl_c_during_measure_writes_a_partial_summary_and_keeps_the_rows(tmp_path):
    out, summary = tmp_path / "m.jsonl", tmp_path / "summary.json"
    p = start(
        "data",
        "measure",
        "--compile-only",
        "--kinds",
        "c2cuda",
        "--limit",
        "40",
        "--batch-tasks",
        "1",
        "--jobs",
        "1",
        "--out",
        out,
        "--summary",
        summary,
        "--cache-dir",
        tmp_path / "cache",
        PATH=slow_nvcc_path(tmp_path),
    )
    wait_for(lambda: finished_lines(out) >= 1, 180, "the first measured row")
    seconds, _, err = interrupt(p, limit_s=30)
    assert p.returncode == 130 and seconds < 10, (seconds, err)
    assert "Traceback" not in err
    doc = json.loads(summary.read_text())
    assert doc["interrupted"] is True and doc["out"] == str(out)
    assert finished_lines(out) >= 1


def test_build_families_that_name_none_or_one_twice_are_refused(tmp_path):
    """`--families ,,` once built every family and `gemm,gemm` wrote duplicate task ids."""
    out = tmp_path / "t.jsonl"
    r = cli("data", "build", "--families", ",,", "--out", out)
    user_error(r, "--families ',,' names no family", code=2)
    r = cli("data", "build", "--families", "gemm,gemm", "--out", out)
    user_error(r, "['gemm'] twice", code=2)
    assert not out.exists()


def test_build_refuses_counts_no_machine_holds(tmp_path):
    """`--per-family 1000000000` once ran until memory ran out."""
    out = tmp_path / "t.jsonl"
    for opt, most in (("--per-family", 100000), ("--c-tasks", 1000000), ("--torch-tasks", 1000000)):
        r = cli("data", "build", opt, str(10**9), "--out", out)
        user_error(r, f"'{opt}': Input should be less than or equal to {most}", code=2)
    assert not out.exists()


def test_measure_kinds_that_name_no_kind_are_refused(tmp_path):
    """`--kinds ,` measured nothing and exited 0."""
    r = cli("data", "measure", "--kinds", ",", "--compile-only", "--out", tmp_path / "m.jsonl")
    user_error(r, "--kinds ',' names no kind", code=2)


def test_measure_refuses_gpus_with_compile_only(tmp_path):
    """`--gpus 0 --compile-only` was accepted and silently ignored (nothing is timed)."""
    out = tmp_path / "m.jsonl"
    r = cli("data", "measure", "--gpus", "0", "--compile-only", "--out", out)
    user_error(r, "--gpus picks the GPUs", "drop --compile-only", code=2)
    assert not out.exists()


def test_measure_names_bad_numbers_by_their_flag_before_any_work(tmp_path):
    """--progress-every took -5 and nan; the others were named by the bulk config's fields
    (`silence_timeout_s=0.0 must be > 0` for --run-timeout 0)."""
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps(C_TASK) + "\n")
    out = tmp_path / "m.jsonl"
    base = ("data", "measure", tasks, "--compile-only", "--out", out)
    for flag, value in (
        ("--progress-every", "-5"),
        ("--progress-every", "nan"),
        ("--run-timeout", "0"),
        ("--max-inflight-gb", "-1"),
        ("--warmup", "-1"),
        ("--cpu-trials", "-1"),
    ):
        line = user_error(cli(*base, flag, value), flag, code=2)
        assert "silence_timeout_s" not in line and "max_inflight_gb" not in line
    assert not out.exists()


def test_build_names_a_bad_family_share_by_its_flag(tmp_path):
    out = tmp_path / "t.jsonl"
    for value in ("0", "2", "nan"):
        r = cli("data", "build", "--out", out, "--max-family-share", value)
        user_error(r, f"--max-family-share {value}", "(0, 1]", code=2)
    assert not out.exists()


def test_tolerances_of_a_task_set_the_generator_did_not_make_names_the_fix(tmp_path):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps(C_TASK) + "\n")
    r = cli("data", "tolerances", tasks, "--out", tmp_path / "o.jsonl")
    user_error(r, "not a task this generator draws", "`cudaperf data build` wrote", code=2)
    assert not (tmp_path / "o.jsonl").exists()
