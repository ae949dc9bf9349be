import json

from typer.testing import CliRunner

from cudaperf.cli import app
from cudaperf.tasks.io import save_jsonl
from tests.rank.helpers import SPLITS, kernel, task, unroll_tasks

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _data(tmp_path, tasks):
    p = tmp_path / "tasks.jsonl"
    save_jsonl(tasks, p)
    (tmp_path / "splits.json").write_text(json.dumps({"families": SPLITS}))
    return p


def test_no_default_weights_error(monkeypatch, tmp_path):
    import cudaperf.rank.formats as formats

    monkeypatch.setattr(formats, "default_weights_path", lambda: tmp_path / "none.json")
    r = run("rank", "eval", "--json")
    assert r.exit_code == 2 and "not been trained on measured data" in r.output


def test_train_without_measurements_says_how_to_get_them(tmp_path):
    p = _data(tmp_path, [task("t/fam0/0", "fam0", {"a": (kernel(0), {}), "b": (kernel(1), {})})])
    r = run("rank", "train", "--tasks", p, "--out", tmp_path / "m", "--no-resources")
    assert r.exit_code == 2
    assert "no measured pairs" in r.output and "--implementations --out r.jsonl" in r.output
    assert "tasks attach r.jsonl" in r.output


def test_train_eval_score(tmp_path):
    p = _data(tmp_path, unroll_tasks())
    r = run("rank", "train", "--tasks", p, "--out", tmp_path / "m", "--no-resources", "--json")
    assert r.exit_code == 0, r.output
    model = tmp_path / "m" / "feature_ranker.json"
    assert json.loads(r.stdout)["path"] == str(model) and model.is_file()
    trained = model.read_text()
    model.write_text(trained.replace('"id"', '"id" ', 1))  # what a later rerun would replace
    kept = model.read_text()
    r = run("rank", "train", "--tasks", p, "--out", tmp_path / "m", "--no-resources")
    assert r.exit_code == 2 and "already holds a trained ranker" in r.output
    assert "--force" in r.output and model.read_text() == kept
    r = run("rank", "train", "--tasks", p, "--out", tmp_path / "m", "--no-resources", "--force")
    assert r.exit_code == 0 and model.read_text() != kept, r.output
    r = run("rank", "eval", "--tasks", p, "--model", model, "--json", "--plot", tmp_path / "c.png")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["families"] == ["fam4", "fam5"] and rep["pairwise_accuracy"] == 1.0
    assert (tmp_path / "c.png").is_file()
    cand = tmp_path / "cand.cu"
    cand.write_text(kernel(3))
    r = run("rank", "score", "t/fam5/0", cand, "--model", model, "--tasks", p, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert 0.5 < out["score"] <= 1 and out["compared"] == 3
    r = run("rank", "score", "t/fam5/0", tmp_path / "none.cu", "--model", model, "--tasks", p)
    assert r.exit_code == 2 and "does not exist" in r.output
    r = run("rank", "eval", "--tasks", p, "--model", tmp_path / "nope.json")
    assert r.exit_code == 2 and "rank train" in r.output


def test_ship_writes_packaged_weights_with_provenance(tmp_path, monkeypatch):
    import cudaperf.rank.formats as formats

    target = tmp_path / "pkg" / "feature_ranker.json"
    monkeypatch.setattr(formats, "default_weights_path", lambda: target)
    p = _data(tmp_path, unroll_tasks())
    r = run(
        "rank",
        "train",
        "--tasks",
        p,
        "--out",
        tmp_path / "m",
        "--no-resources",
        "--ship",
        "--json",
        "--cache-dir",
        tmp_path / "cache",
        "--workers",
        1,
    )
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["shipped"] == str(target) and rep["heldout"]["pairwise_accuracy"] == 1.0
    doc = json.loads(target.read_text())["training"]
    assert doc["dataset"] == str(p) and len(doc["dataset_sha256"]) == 64
    assert doc["splits"] == str(tmp_path / "splits.json") and doc["date"]
    assert doc["heldout_metrics"]["pairs"] == 12 and "rank train" in doc["command"]
    monkeypatch.setattr(formats, "default_weights_path", lambda: target)
    r = run("rank", "eval", "--tasks", p, "--json", "--cache-dir", tmp_path / "cache")
    assert r.exit_code == 0 and json.loads(r.stdout)["pairwise_accuracy"] == 1.0


def test_exclude_keeps_the_named_tasks_out_of_training_and_records_it(tmp_path):
    """`--exclude holdout.json`: the SFT run's unseen tasks (the ablation's primary subset)
    are not trained on; the saved ranker records the file, its hash and the count."""
    tasks = unroll_tasks()
    train_ids = [t.id for t in tasks if SPLITS[t.family] == "train"]
    p = _data(tmp_path, tasks)
    full = run("rank", "train", "--tasks", p, "--out", tmp_path / "a", "--no-resources", "--json")
    assert full.exit_code == 0, full.output
    hold = tmp_path / "holdout.json"
    hold.write_text(json.dumps({"unseen_tasks": train_ids[:2], "fit_tasks": train_ids[2:]}))
    r = run(
        "rank",
        "train",
        "--tasks",
        p,
        "--out",
        tmp_path / "b",
        "--no-resources",
        "--json",
        "--exclude",
        hold,
    )
    assert r.exit_code == 0, r.output
    rep, base = json.loads(r.stdout), json.loads(full.stdout)
    assert rep["tasks"] == base["tasks"] - 2 and rep["pairs"] < base["pairs"]
    saved = json.loads((tmp_path / "b" / "feature_ranker.json").read_text())["training"]
    assert saved["excluded_tasks"]["tasks"] == 2 and len(saved["excluded_tasks"]["sha256"]) == 64
    assert saved["dataset"] == str(p) and "--exclude" in saved["command"]
    # a list of ids works too; ids the task set lacks, or a non-list, are one clear line
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps(train_ids[:1]))
    r = run(
        "rank",
        "train",
        "--tasks",
        p,
        "--out",
        tmp_path / "c",
        "--no-resources",
        "--json",
        "--exclude",
        ids,
    )
    assert r.exit_code == 0 and json.loads(r.stdout)["tasks"] == base["tasks"] - 1
    ids.write_text(json.dumps(["t/nope/0"]))
    r = run("rank", "train", "--tasks", p, "--out", tmp_path / "d", "--exclude", ids)
    assert r.exit_code == 2 and "not in the task set" in r.output
    ids.write_text(json.dumps({"fit_tasks": train_ids}))
    r = run("rank", "train", "--tasks", p, "--out", tmp_path / "e", "--exclude", ids)
    assert r.exit_code == 2 and "unseen_tasks" in r.output and "Traceback" not in r.output
