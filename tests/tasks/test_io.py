import json

import pytest

from cudaperf.tasks.io import (
    TaskFileError,
    load_sample,
    load_tasks,
    save_jsonl,
    save_parquet,
    to_hf_dataset,
)
from cudaperf.tasks.model import Task

from .helpers import C_TASK, TORCH_TASK, c_task


@pytest.fixture
def tasks():
    return [Task.model_validate(C_TASK), Task.model_validate(TORCH_TASK)]


def test_jsonl_round_trip(tmp_path, tasks):
    p = tmp_path / "t.jsonl"
    assert save_jsonl(tasks, p) == 2
    assert load_tasks(p) == tasks


def test_parquet_round_trip(tmp_path, tasks):
    p = tmp_path / "t.parquet"
    assert save_parquet(tasks, p) == 2
    assert load_tasks(p) == tasks


def test_sample_round_trips_through_both_formats(tmp_path):
    sample = load_sample()
    save_jsonl(sample, tmp_path / "s.jsonl")
    save_parquet(sample, tmp_path / "s.parquet")
    assert load_tasks(tmp_path / "s.jsonl") == sample
    assert load_tasks(tmp_path / "s.parquet") == sample


def _write_lines(tmp_path, *objs):
    p = tmp_path / "bad.jsonl"
    p.write_text("\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs) + "\n")
    return p


def test_bad_json_names_file_and_line(tmp_path):
    p = _write_lines(tmp_path, C_TASK, '{"id": "x", ')
    with pytest.raises(TaskFileError, match=r"bad\.jsonl:2: not valid JSON"):
        load_tasks(p)


def test_missing_field_names_field(tmp_path):
    d = c_task()
    del d["family"]
    with pytest.raises(TaskFileError, match=r"bad\.jsonl:1 .*field 'family': required field"):
        load_tasks(_write_lines(tmp_path, d))


def test_wrong_type_names_field(tmp_path):
    d = c_task(configs=[{"name": "a", "sizes": {"n": "ten", "a": 1.0}}])
    with pytest.raises(TaskFileError, match=r"field 'configs\.0\.sizes\.n"):
        load_tasks(_write_lines(tmp_path, d))


def test_unknown_kind(tmp_path):
    with pytest.raises(TaskFileError, match=r"field 'kind'.*'c2cuda' or 'torch2cuda'"):
        load_tasks(_write_lines(tmp_path, c_task(kind="rust2cuda")))


def test_unknown_field(tmp_path):
    with pytest.raises(TaskFileError, match=r"field 'famly': unknown field"):
        load_tasks(_write_lines(tmp_path, c_task(famly="x")))


def test_duplicate_ids(tmp_path):
    with pytest.raises(TaskFileError, match="appears more than once"):
        load_tasks(_write_lines(tmp_path, C_TASK, C_TASK))


def test_not_an_object(tmp_path):
    with pytest.raises(TaskFileError, match="expected a JSON object"):
        load_tasks(_write_lines(tmp_path, "[1, 2]"))


def test_missing_path_and_bad_suffix(tmp_path):
    with pytest.raises(TaskFileError, match="no such file"):
        load_tasks(tmp_path / "nope.jsonl")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(TaskFileError, match="unknown file type"):
        load_tasks(tmp_path / "x.csv")


def test_task_dir_missing_file(tmp_path):
    d = c_task()
    d["source_file"] = "missing.c"
    del d["source"]
    (tmp_path / "task.json").write_text(json.dumps(d))
    with pytest.raises(TaskFileError, match="names 'missing.c', which is not a file"):
        load_tasks(tmp_path)


def test_hf_export(tasks):
    datasets = pytest.importorskip("datasets")
    ds = to_hf_dataset(tasks)
    assert isinstance(ds, datasets.Dataset)
    assert ds.num_rows == 2 and ds[0]["id"] == tasks[0].id


def test_task_dir_measurements_round_trip(tmp_path):
    import shutil

    from cudaperf.tasks.io import sample_path, write_dir_measurements
    from cudaperf.tasks.model import Measurement

    src = sample_path() / "c2cuda_saxpy"
    shutil.copytree(src, tmp_path / "saxpy")
    (tmp_path / "saxpy" / "measurements.jsonl").unlink(missing_ok=True)
    (task,) = load_tasks(tmp_path / "saxpy")
    m = Measurement(gpu="G", config="small", median_us=1.5, trials=3)
    impl = task.implementations[0].model_copy(update={"measurements": [m]})
    task = task.model_copy(update={"implementations": [impl, *task.implementations[1:]]})
    assert write_dir_measurements(tmp_path / "saxpy", [task]) == 1
    before = (src / "task.json").read_text()
    (again,) = load_tasks(tmp_path / "saxpy")
    assert again == task and (tmp_path / "saxpy" / "task.json").read_text() == before
    (tmp_path / "saxpy" / "measurements.jsonl").write_text('{"implementation": "nope"}\n')
    with pytest.raises(TaskFileError, match="measurements.jsonl:1"):
        load_tasks(tmp_path / "saxpy")


def test_save_tasks_picks_format_by_suffix(tmp_path, tasks):
    from cudaperf.tasks.io import save_tasks

    assert save_tasks(tasks, tmp_path / "a.jsonl") == 2
    assert load_tasks(tmp_path / "a.jsonl") == tasks
    with pytest.raises(TaskFileError, match="use a .jsonl or .parquet"):
        save_tasks(tasks, tmp_path / "a.csv")
