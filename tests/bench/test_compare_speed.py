"""bench/compare_speed.py: the table and the JSON of the comparison's timings."""

from __future__ import annotations

import json

from tests.script_helpers import load_script

speed = load_script("bench/compare_speed.py")


def test_it_times_both_comparisons_and_writes_the_rows(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert speed.main(["--sizes", "1", "--repeats", "1", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    (row,) = doc["rows"]
    assert row["elements"] == 1 << 20 and row["whole_s"] > 0 and row["sliced_s"] > 0
    assert "--sizes 1" in doc["command"] and "speedup" in capsys.readouterr().out
