"""`cudaperf eval` on the CPU (compile-only): JSON output, errors, skipped PyTorch tasks."""

import json

from catalog import SAXPY_NAIVE, saxpy_task
from conftest import needs_nvcc
from typer.testing import CliRunner

from cudaperf.cli import app
from cudaperf.tasks.io import save_jsonl
from tests.execute.isolation.test_confine import WHY

runner = CliRunner()


@needs_nvcc
def test_eval_candidates_json(tmp_path, cache_dir):
    tasks = tmp_path / "tasks.jsonl"
    save_jsonl([saxpy_task()], tasks)
    cands = tmp_path / "c.jsonl"
    rows = [{"task_id": "saxpy", "code": SAXPY_NAIVE, "id": "a"}, {"task_id": "saxpy", "code": "x"}]
    cands.write_text("\n".join(json.dumps(r) for r in rows))
    args = ["eval", str(tasks), "--candidates", str(cands), "--json", "--compile-only"]
    res = runner.invoke(
        app, [*args, "--cache-dir", str(cache_dir), "--out", str(tmp_path / "o.jsonl")]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["summary"]["statuses"] == {"compiled": 1, "compile_error": 1}
    assert doc["summary"]["mode"] == "compile-only"
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 2


def test_eval_bad_input_exits_2(tmp_path):
    res = runner.invoke(app, ["eval", "--candidates", str(tmp_path / "missing.jsonl")])
    assert res.exit_code == 2 and "does not exist" in res.output
    res = runner.invoke(app, ["eval"])
    assert res.exit_code == 2 and "exactly one of" in res.output
    res = runner.invoke(app, ["eval", "--implementations", "--trials", "0"])
    assert res.exit_code == 2 and "trials" in res.output


@needs_nvcc
def test_eval_names_missing_protections_in_one_line_and_in_the_jsonl(tmp_path, cache_dir):
    tasks = tmp_path / "tasks.jsonl"
    save_jsonl([saxpy_task()], tasks)
    cands = tmp_path / "c.jsonl"
    cands.write_text(json.dumps({"task_id": "saxpy", "code": SAXPY_NAIVE, "id": "a"}))
    out = tmp_path / "o.jsonl"
    args = ["eval", str(tasks), "--candidates", str(cands), "--compile-only", "--no-isolation"]
    res = runner.invoke(app, [*args, "--cache-dir", str(cache_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("sandbox:")]
    assert len(lines) == 1 and "1 of 1 results ran with protections missing" in lines[0]
    assert "isolate_files is off" in lines[0]
    row = json.loads(out.read_text().splitlines()[0])
    assert row["protections"][0]["stage"] == "build" and row["protections"][0]["missing"]
    confined = runner.invoke(app, [*args[:-1], "--cache-dir", str(cache_dir), "--no-cache"])
    assert confined.exit_code == 0, confined.output
    if not WHY:  # the compiler ran confined: nothing to say
        assert "sandbox:" not in confined.stdout, confined.stdout
