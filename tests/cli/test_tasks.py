import json

from typer.testing import CliRunner

from cudaperf.cli import app
from tests.cli.helpers import cli, user_error
from tests.tasks.helpers import C_TASK, c_task

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_stats_json_on_sample_is_one_document():
    r = run("tasks", "stats", "--sample", "--json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["tasks"] >= 1 and set(s["by_kind"]) == {"c2cuda", "torch2cuda"}


def test_list_and_show(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(C_TASK) + "\n")
    r = run("tasks", "list", str(p), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["id"] == C_TASK["id"]
    r = run("tasks", "show", "scale", str(p), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["entry"] == "scale"
    r = run("tasks", "show", "nope", str(p))
    assert r.exit_code == 2 and "no task 'nope'" in r.output


def test_validate_reports_file_line_field(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(C_TASK) + "\n")
    assert run("tasks", "validate", str(good)).exit_code == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(C_TASK) + "\n" + json.dumps(c_task(id="x", kind="nope")) + "\n")
    r = run("tasks", "validate", str(bad))
    assert r.exit_code == 1
    assert "bad.jsonl:2" in r.output and "field 'kind'" in r.output
    assert "Traceback" not in r.output
    r = run("tasks", "validate", str(bad), "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["valid"] is False


def test_export_round_trip(tmp_path):
    out = tmp_path / "s.parquet"
    r = run("tasks", "export", "--sample", "--out", str(out), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["written"] >= 1
    r = run("tasks", "export", "--sample", "--out", str(tmp_path / "s.csv"))
    assert r.exit_code == 2 and "use a .jsonl, .jsonl.gz or .parquet file name" in r.output


def test_export_and_import_never_replace_an_existing_out_unless_forced(tmp_path):
    """A task set (the measured dataset, an import) or a results file at --out is kept: one
    line names it and --force; with --force it is replaced."""
    from pathlib import Path

    out = tmp_path / "tasks.jsonl"
    out.write_text(json.dumps(C_TASK) + "\n")
    kept = out.read_text()
    r = run("tasks", "export", "--sample", "--out", str(out))
    assert r.exit_code == 2 and "already holds a file" in r.output and "--force" in r.output
    assert out.read_text() == kept and "Traceback" not in r.output
    r = run("tasks", "export", "--sample", "--out", str(out), "--force", "--json")
    assert r.exit_code == 0 and out.read_text() != kept, r.output
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "mine.txt").write_text("x")
    r = run("tasks", "export", "--sample", "--hf", "--out", str(folder))
    assert r.exit_code == 2 and "already holds a folder with files" in r.output
    assert [p.name for p in folder.iterdir()] == ["mine.txt"]
    src = Path(__file__).parents[1] / "fixtures" / "babeltower" / "test.jsonl"
    results = tmp_path / "results.jsonl"
    results.write_text('{"task_id": "t", "status": "ok"}\n')
    r = run("tasks", "import", "babeltower", str(src), "--out", str(results), "--no-validate")
    assert r.exit_code == 2 and "already holds a file" in r.output
    assert results.read_text() == '{"task_id": "t", "status": "ok"}\n'


def test_import_kernelbench_fixture(tmp_path):
    import pytest

    pytest.importorskip("torch")
    from pathlib import Path

    root = Path(__file__).parents[1] / "fixtures" / "kernelbench"
    out = tmp_path / "kb.jsonl"
    r = run(
        "tasks",
        "import",
        "kernelbench",
        str(root),
        "--out",
        str(out),
        "--levels",
        "1,2,4",
        "--json",
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {
        "imported": 3,
        "skipped": 2,
        "reasons": {
            "missing Model, get_inputs or get_init_inputs": 1,
            "level 4 needs pretrained models from a hub (offline)": 1,
        },
    }
    assert run("tasks", "validate", str(out)).exit_code == 0
    r = run("tasks", "import", "polybench", str(root), "--out", str(out))
    assert r.exit_code == 2 and "unknown suite" in r.output
    new = tmp_path / "kb2.jsonl"
    r = run("tasks", "import", "kernelbench", str(tmp_path), "--out", str(new))
    assert r.exit_code == 2 and "no KernelBench levelN folders" in r.output
    assert not new.exists()


def test_overlap_command(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(C_TASK) + "\n")
    r = run("tasks", "overlap", str(p), str(p), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["max_overlap"] == 1.0
    r = run("tasks", "overlap", str(p), str(p), "--ngram", "1000000")
    assert r.exit_code == 0, r.output
    assert "1 task(s) of B have fewer than 1000000 tokens and were not compared" in r.output
    assert "give a smaller --ngram" in r.output


def test_attach_measurements_from_results(tmp_path):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps(C_TASK) + "\n")
    timing = {"median_us": 2.0, "iqr_us": 0.1, "min_us": 2, "max_us": 3, "trials": 100}
    row = {
        "status": "ok",
        "mode": "full",
        "task_id": C_TASK["id"],
        "candidate_id": "naive",
        "gpu": "G",
        "versions": {},
        "configs": [{"config": c["name"], "timing": timing} for c in C_TASK["configs"]],
    }
    results = tmp_path / "r.jsonl"
    results.write_text(json.dumps(row) + "\n")
    out = tmp_path / "measured.jsonl"
    r = run("tasks", "attach", str(results), str(tasks), "--out", str(out), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"implementations_measured": 1, "measured_fraction": 1.0}
    r = run("tasks", "attach", str(results), str(tasks))
    assert r.exit_code == 2 and "give --out" in r.output
    # gzipped results, as the project commits them, read the same (once "not UTF-8 text")
    import gzip

    gz = tmp_path / "r.jsonl.gz"
    gz.write_bytes(gzip.compress(results.read_bytes()))
    r = run("tasks", "attach", str(gz), str(tasks), "--out", str(out), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["implementations_measured"] == 1
    gz.write_bytes(b"\x1f\x8b" + b"junk")  # a cut or corrupt gzip: one line naming it
    r = run("tasks", "attach", str(gz), str(tasks), "--out", str(out))
    assert r.exit_code == 2 and "not a readable gzip file" in r.output
    # The one task has one implementation: verified, but a task needs 3 to stay. No task
    # left is an error, not an empty file (or emptied splits) reported as a success.
    out.unlink()
    r = run(
        "tasks", "attach", str(results), str(tasks), "--out", str(out), "--json", "--verified-only"
    )
    assert r.exit_code == 1 and "--verified-only keeps no task" in r.output
    assert "task left with fewer than 3 verified implementations: 1" in r.output
    r = run(
        "tasks",
        "attach",
        str(results),
        str(tasks),
        "--out",
        str(out),
        "--verified-only",
        "--min-implementations",
        "1",
    )
    assert r.exit_code == 1 and "fewer than 2 distinct strategies: 1" in r.output
    assert not out.exists()
    # results that measure nothing (compile-only, or of other tasks): nothing is written
    results.write_text(json.dumps(row | {"status": "compiled", "mode": "compile-only"}) + "\n")
    r = run("tasks", "attach", str(results), str(tasks), "--out", str(out))
    assert (
        r.exit_code == 1 and "no GPU-timed `ok` result" in r.output and "0 from a GPU" in r.output
    )
    assert not out.exists()


def _two_tasks(tmp_path):
    """A task set of two tasks in tmp_path (the first with two implementations of two
    strategies), results that time both of the first's, and the splits of the set."""
    timing = {"median_us": 2.0, "iqr_us": 0.1, "min_us": 2, "max_us": 3, "trials": 100}
    first = dict(C_TASK)
    tiled = dict(C_TASK["implementations"][0], id="tiled", strategies=["tiling"])
    first["implementations"] = [*C_TASK["implementations"], tiled]
    second = c_task(id="test/c2cuda/other")
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in (first, second)))
    rows = [
        {
            "status": "ok",
            "mode": "full",
            "task_id": first["id"],
            "candidate_id": impl,
            "gpu": "G",
            "versions": {},
            "configs": [{"config": c["name"], "timing": timing} for c in first["configs"]],
        }
        for impl in ("naive", "tiled")
    ]
    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    splits = tmp_path / "splits.json"
    doc = {"families": {first["family"]: "test"}, "tasks": {"test": [first["id"], second["id"]]}}
    splits.write_text(json.dumps(doc))
    return tasks, results, splits, doc, first["id"]


def test_attach_verified_only_prunes_the_splits_of_the_set_it_rewrites(tmp_path):
    tasks, results, splits, doc, kept = _two_tasks(tmp_path)
    verified = ["--json", "--verified-only", "--min-implementations", "2"]
    # a new file beside the input: the splits are the input's, which stays whole
    new = tmp_path / "measured.jsonl"
    r = run("tasks", "attach", str(results), str(tasks), "--out", str(new), *verified)
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert (
        rep["tasks"] == 1
        and rep["splits"] == f"{splits} unchanged: another task set's (the input's)"
    )
    assert json.loads(splits.read_text()) == doc
    # a folder of its own whose splits list another set's tasks: not this run's to prune
    other = tmp_path / "other"
    other.mkdir()
    theirs = {"families": {}, "tasks": {"train": ["x/y/z"]}}
    (other / "splits.json").write_text(json.dumps(theirs))
    r = run("tasks", "attach", str(results), str(tasks), "--out", str(other / "m.jsonl"), *verified)
    assert r.exit_code == 0 and "unchanged" in json.loads(r.stdout)["splits"], r.output
    assert json.loads((other / "splits.json").read_text()) == theirs
    # the input rewritten in place: its splits lose the dropped task's id
    r = run("tasks", "attach", str(results), str(tasks), "--out", str(tasks), *verified)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["splits"] == str(splits)
    assert json.loads(splits.read_text()) == {
        "families": doc["families"],
        "tasks": {"test": [kept]},
    }


def test_attach_without_a_path_does_not_touch_the_installed_sample_set(tmp_path):
    import hashlib

    from cudaperf.tasks.io import sample_path
    from tests.cli.helpers import SRC, cli, package_copy, user_error

    src = package_copy(tmp_path)  # were the check broken, only the copy would be rewritten
    sample = src / sample_path().relative_to(SRC)

    def digest() -> str:
        h = hashlib.sha256()
        for f in sorted(sample.rglob("*")):
            if f.is_file():
                h.update(f.name.encode() + f.read_bytes())
        return h.hexdigest()

    results = tmp_path / "r.jsonl"
    row = {
        "task_id": "sample/c2cuda/saxpy",
        "candidate_hash": "h",
        "candidate_id": "naive",
        "status": "compiled",
        "mode": "compile-only",
    }
    results.write_text(json.dumps(row) + "\n")
    before = digest()
    r = cli("tasks", "attach", results, src=src)
    user_error(r, "rewrite the installed sample set", "--force", "--out", code=2)
    assert digest() == before
    out = tmp_path / "measured.jsonl"
    r = cli("tasks", "attach", results, "--out", out, src=src)  # compile-only: nothing to store
    user_error(r, "no GPU-timed `ok` result", code=1)
    assert not out.exists()
    from cudaperf.tasks.io import load_sample

    saxpy = next(t for t in load_sample() if t.id == "sample/c2cuda/saxpy")
    timing = {"median_us": 2.0, "iqr_us": 0.1, "min_us": 2, "max_us": 3, "trials": 100}
    configs = [{"config": c.name, "timing": timing} for c in saxpy.configs]
    row |= {"status": "ok", "mode": "full", "gpu": "G", "versions": {}, "configs": configs}
    results.write_text(json.dumps(row) + "\n")
    r = cli("tasks", "attach", results, "--out", out, src=src)  # the sample set, elsewhere
    assert r.returncode == 0, r.stderr
    assert digest() == before and out.is_file()
    assert "{'" not in r.stdout + r.stderr and "implementations_measured" in r.stdout


def test_attach_refuses_a_file_that_is_not_eval_results(tmp_path):
    tasks = tmp_path / "t.jsonl"
    tasks.write_text(json.dumps(C_TASK) + "\n")
    r = cli("tasks", "attach", tasks, tasks, "--out", tmp_path / "o.jsonl")
    user_error(r, "is not an evaluation result", code=2)


def test_import_of_nothing_or_of_binary_data_is_one_line(tmp_path):
    out = tmp_path / "bt.jsonl"
    for content in (b"", b'{"id": 1}\n'):  # nothing to import: no empty file is written
        src = tmp_path / "mono_cases.jsonl"
        src.write_bytes(content)
        r = cli("tasks", "import", "babeltower", src, "--out", out)
        user_error(r, f"nothing imported from {src}", "nothing was written", code=2)
        assert not out.exists()
    src.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    r = cli("tasks", "import", "babeltower", src, "--out", out)
    user_error(r, str(src), "not UTF-8 text", code=2)


def test_attach_refuses_a_date_that_is_not_one(tmp_path):
    res = tmp_path / "r.jsonl"
    res.write_text(json.dumps({"task_id": "t", "status": "compiled", "mode": "compile-only"}))
    r = cli("tasks", "attach", res, "--out", tmp_path / "t.jsonl", "--date", "yesterday")
    user_error(r, "--date 'yesterday'", "YYYY-MM-DD", code=2)
    assert not (tmp_path / "t.jsonl").exists()


def test_export_hf_to_a_file_name_is_refused(tmp_path):
    """`--hf --out tasks.jsonl` wrote a dataset folder named tasks.jsonl."""
    r = cli("tasks", "export", "--sample", "--hf", "--out", tmp_path / "tasks.jsonl")
    user_error(r, "--hf writes a folder", "drop --hf", code=2)
    assert not (tmp_path / "tasks.jsonl").exists()
