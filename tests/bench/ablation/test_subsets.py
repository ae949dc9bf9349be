"""The ablation's subsets were fixed before any main run: the code must still draw them."""

from __future__ import annotations

import json

from tests.script_helpers import ROOT, load_script

subsets = load_script("bench/ablation/subsets.py")


def test_the_committed_subsets_are_what_the_bench_arguments_draw(capsys):
    assert subsets.main(["--check"]) == 0
    doc = json.loads((ROOT / "bench/ablation/subsets.json").read_text())["subsets"]
    assert [len(v["tasks"]) for v in doc.values()] == [60, 60]
    splits = json.loads((ROOT / "data/splits.json").read_text())["families"]
    primary = doc["train_unseen"]
    assert {splits[f] for f in primary["families"]} == {"train"}
    held = json.loads((ROOT / subsets.MANIFEST).read_text())["unseen_tasks"]
    assert set(primary["tasks"]) <= set(held)  # tasks the SFT start never trained on
    assert {splits[f] for f in doc["test_families"]["families"]} == {"test"}


def test_a_changed_draw_is_refused(monkeypatch, tmp_path, capsys):
    import cudaperf.report.suites as suites
    from tests.data_helpers import read_tasks_once

    # each draw loads the dataset (7 s); the four draws here differ in seeds, not in data
    monkeypatch.setattr(suites, "load_tasks", read_tasks_once)
    out = tmp_path / "subsets.json"
    assert subsets.main(["--out", str(out)]) == 0
    moved = {**subsets.SUBSETS["train_unseen"], "seed": 1}
    monkeypatch.setitem(subsets.SUBSETS, "train_unseen", moved)
    assert subsets.main(["--check", "--out", str(out)]) == 1
    assert "train_unseen no longer drawn" in capsys.readouterr().err
    assert subsets.main(["--out", str(out)]) == 1  # never replaced without --force
    assert subsets.main(["--out", str(out), "--force"]) == 0
