"""Shared validation (cli/common.py) gives the same answer in every command: ambiguous task
ids, output paths, option bounds, the default task set."""

from __future__ import annotations

import copy
import json

import pytest

from tests.cli.helpers import cli, package_copy, user_error
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
        (["eval", "--implementations"], "--workers-per-gpu", "0"),
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


def test_outputs_inside_the_installed_package_are_refused(tmp_path):
    """An output named inside the package would change the bundled sample set or the
    packaged ranker (eval rows appended to a sample task's measurements.jsonl break every
    command that reads the sample set). Checked against a copy of the package."""
    src = package_copy(tmp_path)
    pkg = src / "cudaperf"
    saxpy = pkg / "tasks" / "sample" / "c2cuda_saxpy"
    weights = pkg / "rank" / "weights"
    before = {p: p.read_bytes() for p in (*saxpy.iterdir(), *weights.iterdir()) if p.is_file()}
    runs = {
        "--out": cli(
            "eval",
            "--implementations",
            "-t",
            "saxpy",
            "--out",
            saxpy / "measurements.jsonl",
            src=src,
        ),
        "--out ": cli(
            "rank", "train", "--tasks", pkg / "tasks" / "sample", "--out", weights, src=src
        ),
        "--best-out": cli(
            "refine",
            "saxpy",
            "--model",
            "scripted:best",
            "--out",
            tmp_path / "t.jsonl",
            "--best-out",
            saxpy / "naive.cu",
            src=src,
        ),
        "--out  ": cli("tasks", "export", "--out", pkg / "tasks" / "sample" / "x.jsonl", src=src),
    }
    for opt, r in runs.items():
        user_error(r, opt.strip(), "inside the installed cudaperf package", str(pkg), code=2)
    after = {p: p.read_bytes() for p in (*saxpy.iterdir(), *weights.iterdir()) if p.is_file()}
    assert after == before
    # a task folder inside the package is updated in place only with --force
    res = tmp_path / "r.jsonl"
    res.write_text(
        json.dumps(
            {"task_id": "t", "candidate_hash": "h", "status": "compiled", "mode": "compile-only"}
        )
        + "\n"
    )
    r = cli("tasks", "attach", res, pkg / "tasks" / "sample", src=src)
    user_error(r, "inside the installed cudaperf package", "--force", code=2)


def test_an_empty_task_file_is_refused_not_run_with_nothing(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for cmd in (
        ["eval", empty, "--implementations"],
        ["tasks", "list", empty],
        ["tasks", "overlap", empty, empty],
        ["data", "verify", empty],
    ):
        user_error(cli(*cmd), f"{empty} holds no tasks", code=2)
    user_error(cli("tasks", "validate", empty), "holds no tasks", code=1)


def test_an_out_that_holds_other_data_is_not_appended_to(tmp_path):
    """eval and data measure append their rows to --out and resume from it: a candidates or
    task file named there (by a slip) would get result rows, binary data a traceback."""
    cands = tmp_path / "cands.jsonl"
    cands.write_text(json.dumps({"task_id": "saxpy", "code": "__global__ void k() {}"}) + "\n")
    before = cands.read_text()
    r = cli("eval", "--candidates", cands, "--out", cands)
    user_error(r, f"--out {cands}:1 is not an evaluation result", "give a new file", code=2)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(C_TASK) + "\n")
    r = cli("data", "measure", tasks, "--compile-only", "--out", tasks)
    user_error(r, f"--out {tasks}:1 is not an evaluation result", code=2)
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    user_error(cli("eval", "--implementations", "--out", binary), "not UTF-8", code=2)
    user_error(cli("data", "measure", "--compile-only", "--out", binary), "not UTF-8", code=2)
    assert cands.read_text() == before and tasks.read_text() == json.dumps(C_TASK) + "\n"


def test_a_model_folder_or_file_that_is_no_checkpoint_is_named(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    for model, needle in ((folder, "holds no config.json"), (gguf, "the file is empty")):
        r = cli("refine", "saxpy", "--model", model, "--out", tmp_path / "t.jsonl")
        user_error(r, f"--model {model}", needle, "smollm2", code=2)


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "{f}"],
        ["rank", "score", "saxpy", "{f}"],
        ["reward", "saxpy", "{f}", "--compile-only"],
    ],
    ids=["analyze", "rank-score", "reward"],
)
@pytest.mark.parametrize("name", ["tasks.jsonl", "tasks.txt"])
def test_a_data_file_given_as_a_candidate_is_refused(tmp_path, args, name):
    """A task file (by its suffix, or JSON under another name) given where a candidate's source
    goes was read as CUDA: `rank score` printed 'score 1.000', `analyze` a table of the
    kernels in its strings."""
    f = tmp_path / name
    f.write_text(json.dumps(C_TASK) + "\n")
    r = cli(*(a.format(f=f) for a in args))
    user_error(r, str(f), "not source code", ".cu or .py", code=2)


def test_a_default_cache_dir_that_cannot_be_written_is_one_line(tmp_path):
    """Without --cache-dir the evaluator builds under ~/.cache/cudaperf: a home where nothing
    can be written gave a traceback per candidate (reward, refine, bench run, train grpo)."""
    (tmp_path / "file").write_text("")
    home = tmp_path / "file" / "home"
    cand = tmp_path / "k.cu"
    cand.write_text("__global__ void k() {}\n")
    for args in (
        ("reward", "saxpy", cand, "--compile-only"),
        (
            "bench",
            "run",
            "--model",
            "scripted:best",
            "--suite",
            "sample",
            "--limit",
            "1",
            "--samples",
            "1",
            "--compile-only",
            "--out",
            tmp_path / "b",
        ),
        ("train", "grpo", "--out", tmp_path / "g"),
    ):
        r = cli(*args, HOME=str(home))
        user_error(r, "the default --cache-dir", "give --cache-dir DIR", code=2)
    assert not (tmp_path / "b").exists() and not (tmp_path / "g").exists()


@pytest.mark.parametrize("spec", ["nope:x", "a model", "runs/x/final", "-x"])
def test_a_model_that_is_no_path_nor_hub_name_is_named_with_the_fix(tmp_path, spec):
    """The hub's own validation message came out instead ("Repo id must use alphanumeric
    chars ..."), naming no fix, or a relative folder that does not exist went to the hub."""
    r = cli("refine", "saxpy", "--model", spec, "--out", tmp_path / "t.jsonl", timeout=60)
    user_error(r, f"--model {spec}: no such file or folder, nor a Hugging Face model name")
    assert "a Hugging Face model name (org/name)" in r.stderr


def test_hub_names_pass_the_model_name_check():
    from cudaperf.cli.common import _HUB_NAME

    for name in ("gpt2", "HuggingFaceTB/SmolLM2-135M-Instruct", "Qwen/Qwen2.5-0.5B"):
        assert _HUB_NAME.fullmatch(name), name


def test_a_model_file_that_is_not_gguf_is_named_with_the_fix(tmp_path):
    """A regular file as --model (not .gguf) went to transformers, whose line ("the config
    file ... is not a valid JSON file") named no fix."""
    f = tmp_path / "weights.bin"
    f.write_bytes(b"\x00\x01garbage")
    r = cli("refine", "saxpy", "--model", f, "--out", tmp_path / "t.jsonl")
    user_error(r, f"--model {f}", "not a .gguf model file", "smollm2", code=2)
    r = cli("bench", "run", "--model", f, "--suite", "sample", "--out", tmp_path / "r")
    user_error(r, f"--model {f}", "not a .gguf model file", code=2)
    assert not (tmp_path / "t.jsonl").exists() and not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "cmd",
    [
        ["tasks", "list"],
        ["eval", "--implementations", "--compile-only", "--tasks-file"],
        ["tasks", "overlap", "{sample}"],
    ],
    ids=["tasks-list", "eval", "tasks-overlap"],
)
def test_results_given_as_a_task_file_are_named_with_the_fix(tmp_path, cmd):
    """A results JSONL given where tasks go listed three 'required field is missing' and
    '(and 28 more)': nothing said it was the wrong kind of file, nor what to give."""
    res = tmp_path / "res.jsonl"
    row = {"task_id": "sample/c2cuda/saxpy", "candidate_id": "a", "status": "compiled"}
    res.write_text(json.dumps(row | {"configs": []}) + "\n")
    sample = tmp_path / "sample.jsonl"
    assert cli("tasks", "export", "--sample", "--out", sample).returncode == 0
    args = [str(sample) if a == "{sample}" else a for a in cmd if a != "--tasks-file"]
    r = cli(*args, res)
    user_error(r, "res.jsonl:1: not a task but an evaluation result", "tasks export", code=2)
    cand = tmp_path / "cand.jsonl"
    cand.write_text(json.dumps({"task_id": "saxpy", "code": "x", "id": "a"}) + "\n")
    user_error(cli(*args, cand), "cand.jsonl:1: not a task", "'task_id'", code=2)


def test_a_parquet_task_file_with_a_nested_column_that_is_not_json_is_one_line(tmp_path):
    """Parquet keeps nested fields as JSON text; a cell that was not JSON ended in a
    JSONDecodeError traceback."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "t.parquet"
    row = {k: [v] for k, v in C_TASK.items() if isinstance(v, str)}
    pq.write_table(pa.table(row | {"configs": ["{not json"]}), p)
    r = cli("tasks", "list", p)
    user_error(r, "t.parquet: row 0: column 'configs' is not JSON", "tasks export", code=2)


def test_results_whose_last_line_a_stopped_run_cut_are_read_without_it(tmp_path):
    """`eval --out` appends: a run stopped mid-write leaves a cut last line, which every
    writer and the library's readers leave out; `report` and `tasks attach` refused the whole
    file ("not valid JSON; give the JSONL that `cudaperf eval --out` wrote": it was)."""
    row = {"task_id": "sample/c2cuda/saxpy", "candidate_id": "naive", "candidate_hash": "h"}
    row |= {"status": "compiled", "mode": "compile-only", "configs": []}
    res = tmp_path / "res.jsonl"
    res.write_text(json.dumps(row) + "\n" + json.dumps(row)[:40])
    r = cli("report", res, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"] == 1
    assert "last line is cut short" in r.stderr and "Traceback" not in r.stderr
    r = cli("tasks", "attach", res, "--out", tmp_path / "t.jsonl")
    user_error(r, "no GPU-timed `ok` result", code=1)  # read: the rows were compile-only
    res.write_text(json.dumps(row) + "\n{not json\n" + json.dumps(row) + "\n")
    user_error(cli("report", res), "res.jsonl:2: not valid JSON", code=2)  # inside: refused
