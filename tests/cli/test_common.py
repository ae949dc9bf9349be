"""Shared validation (cli/common.py) gives the same answer in every command: ambiguous task
ids, output paths, option bounds, the default task set."""

from __future__ import annotations

import copy
import json

import pytest

from tests.cli.helpers import cli, user_error
from tests.tasks.helpers import C_TASK


@pytest.fixture
def twins(tmp_path):
    """Two tasks whose ids both end in `/scale`."""
    p = tmp_path / "twins.jsonl"
    rows = []
    for prefix in ("a", "b"):
        t = copy.deepcopy(C_TASK)
        t["id"] = f"{prefix}/c2cuda/scale"
        rows.append(json.dumps(t))
    p.write_text("\n".join(rows) + "\n")
    cand = tmp_path / "cand.cu"
    cand.write_text(C_TASK["implementations"][0]["code"])
    return p, cand


def test_ambiguous_task_ids_are_refused_everywhere_the_same_way(twins, tmp_path):
    tasks, cand = twins
    cands = tmp_path / "c.jsonl"
    cands.write_text(json.dumps({"task_id": "scale", "code": cand.read_text()}) + "\n")
    runs = {
        "tasks show": cli("tasks", "show", "scale", tasks),
        "eval --task": cli("eval", tasks, "--task", "scale", "--implementations"),
        "eval --candidates": cli("eval", tasks, "--candidates", cands),
        "reward": cli("reward", "scale", cand, "--tasks", tasks),
        "refine": cli("refine", "scale", "--tasks", tasks, "--model", "scripted:implementations"),
        "rank score": cli("rank", "score", "scale", cand, "--tasks", tasks),
    }
    for name, r in runs.items():
        line = user_error(r, "'scale' is ambiguous", "matches 2 tasks", "give the full id")
        assert "a/c2cuda/scale" in line, name
    # the full id is never ambiguous
    r = cli("tasks", "show", "a/c2cuda/scale", tasks, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["id"] == "a/c2cuda/scale"


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "--implementations", "--out", "{dir}"],
        ["refine", "saxpy", "--model", "scripted:implementations", "--out", "{dir}"],
        ["report", "{results}", "--plot", "{dir}"],
        ["rank", "eval", "--plot", "{dir}"],
        ["data", "build", "--out", "{dir}"],
        ["tasks", "export", "--sample", "--out", "{dir}"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_an_output_that_is_a_folder_is_refused_before_any_work(tmp_path, args):
    results = tmp_path / "r.jsonl"
    row = {"task_id": "t", "candidate_hash": "h", "status": "compiled", "mode": "compile-only"}
    results.write_text(json.dumps(row) + "\n")
    folder = tmp_path / "out.png" if "--plot" in args else tmp_path / "out.jsonl"
    folder.mkdir()
    r = cli(*[a.format(dir=folder, results=results) for a in args])
    user_error(r, str(folder), "is a folder")


@pytest.mark.parametrize(
    ("opt", "value", "extra"),
    [
        ("--out", "{file}/x.jsonl", ["eval", "--implementations"]),
        (
            "--best-out",
            "{file}/best.cu",
            ["refine", "saxpy", "--model", "scripted:implementations"],
        ),
        ("--cache-dir", "{file}", ["reward", "saxpy", "{file}"]),
        ("--cache-dir", "{file}/c", ["rank", "eval"]),
        ("--splits", "{file}/s.json", ["data", "build", "--out", "{tmp}/t.jsonl"]),
        ("--summary", "{file}/s.json", ["data", "measure", "--compile-only"]),
    ],
    ids=lambda v: v if isinstance(v, str) and v.startswith("--") else "",
)
def test_a_path_under_a_file_is_refused_before_any_work(tmp_path, opt, value, extra):
    f = tmp_path / "plain.txt"
    f.write_text("x")
    fill = {"file": f, "tmp": tmp_path}
    r = cli(*[a.format(**fill) for a in extra], opt, value.format(**fill))
    user_error(r, opt, str(f))
    assert "is a file" in r.stderr


def test_unwritable_places_and_wrong_suffixes_are_refused(tmp_path):
    user_error(cli("eval", "--implementations", "--out", "/proc/cudaperf.jsonl"), "/proc", "--out")
    user_error(cli("eval", "--implementations", "--cache-dir", "/proc/c"), "--cache-dir")
    user_error(cli("rank", "eval", "--plot", tmp_path / "cal.txt"), ".png", "--plot")
    user_error(cli("report", tmp_path / "r.jsonl", "--plot", tmp_path / "s.pdf"), ".png")
    user_error(cli("data", "build", "--out", tmp_path / "t.csv"), ".jsonl.gz")
    assert not list(tmp_path.iterdir())  # nothing was written anywhere


@pytest.mark.parametrize(
    ("cmd", "opt", "bad"),
    [
        (["rank", "eval"], "--min-ratio", "-1"),
        (["rank", "train"], "--min-ratio", "0.5"),
        (["rank", "eval"], "--workers", "0"),
        (["rank", "train"], "--workers", "0"),
        (["refine", "saxpy"], "--temperature", "-1"),
        (["refine", "saxpy"], "--max-tokens", "0"),
        (["refine", "saxpy"], "--turns", "0"),
        (["eval", "--implementations"], "--jobs", "0"),
        (["data", "measure", "--compile-only"], "--jobs", "0"),
    ],
)
def test_option_bounds_are_checked_the_same_way_everywhere(cmd, opt, bad):
    r = cli(*cmd, opt, bad)
    user_error(r, f"Invalid value for '{opt}'", "greater than or equal to", code=2)


def test_each_command_states_its_default_task_set():
    sample = ["eval", "reward", "refine", "tasks list", "tasks show", "rank score", "analyze"]
    dataset = ["rank train", "rank eval", "data verify", "data measure", "tasks stats"]
    for names, phrase in ((sample, "sample set"), (dataset, "data/tasks.jsonl.gz")):
        for name in names:
            r = cli(*name.split(), "--help", COLUMNS="400")
            assert phrase in " ".join(r.stdout.split()), name


def test_commands_that_need_measurements_default_to_the_dataset(tmp_path):
    missing = tmp_path / "none.jsonl.gz"
    for cmd in (["rank", "eval"], ["rank", "train"], ["data", "verify"]):
        r = cli(*cmd, CUDAPERF_DATASET=str(missing))
        user_error(r, str(missing))
