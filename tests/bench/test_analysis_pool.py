"""bench/analysis_pool.py on a hand-made run folder: the candidates read in chunks of tasks,
both analyses timed, the reports checked equal, the file written."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from tests.rank.helpers import kernel
from tests.script_helpers import load_script

pool = load_script("bench/analysis_pool.py")


def _run(tmp_path, tasks: int = 3):
    run = tmp_path / "run"
    run.mkdir()
    recs = []
    for i in range(tasks):
        samples = [{"index": 0, "code": kernel(i + 1)}, {"index": 1, "code": None}]
        recs.append(
            {"type": "turn", "task_id": f"gen/c2cuda/f/{i:05d}", "turn": 1, "samples": samples}
        )
        recs.append(
            {"type": "turn", "task_id": f"gen/c2cuda/f/{i:05d}", "turn": 2, "samples": samples}
        )
    with gzip.open(run / "trajectories.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs))
    return run


def test_turn_one_codes_are_read_in_chunks_of_tasks(tmp_path):
    run = _run(tmp_path)
    assert pool.chunks_of(run, 2, None) == [[kernel(1), kernel(2)], [kernel(3)]]
    assert pool.chunks_of(run, 2, 1) == [[kernel(1)]]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="the default analysis runs ptxas")
def test_both_analyses_are_timed_and_give_the_same_reports(tmp_path, capsys):
    out = tmp_path / "a.json"
    assert (
        pool.main([str(_run(tmp_path)), "--chunk", "2", "--workers", "2", "--out", str(out)]) == 0
    )
    doc = json.loads(out.read_text())
    assert doc["candidates"] == 3 and doc["chunks"] == 2 and doc["workers"] == 2
    assert doc["same_reports"] is True and doc["serial_s"] > 0 and doc["pooled_s"] > 0
    assert "reports the same" in capsys.readouterr().out


def test_a_folder_without_trajectories_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no trajectories"):
        pool.main([str(tmp_path), "--out", str(tmp_path / "a.json")])
