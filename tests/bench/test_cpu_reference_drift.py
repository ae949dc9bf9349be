"""bench/cpu_reference_drift.py on two runs of the sample set with stored measurements, one of
them with its C-reference times scaled as another host would."""

from __future__ import annotations

import json

import pytest

from tests.report.test_run import bench
from tests.script_helpers import load_script

drift = load_script("bench/cpu_reference_drift.py")


def _scale(run_dir, factor, fields=("speedup_vs_cpu",)):
    """Every recorded speedup of `fields` times `factor` (speedup vs cpu alone: the C reference
    `factor` x slower; both: the candidate `factor` x faster)."""
    path = run_dir / "trajectories.jsonl"
    out = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        for s in rec.get("samples", []):
            for f in fields:
                if (s.get("result") or {}).get(f):
                    s["result"][f] *= factor
        out.append(json.dumps(rec))
    path.write_text("\n".join(out) + "\n")


def test_the_ratio_is_1_on_one_host_and_the_hosts_factor_on_another(tmp_path, capsys):
    bench(tmp_path / "a", model="scripted:best", samples=1, turns=1)
    bench(tmp_path / "b", model="scripted:best", samples=1, turns=1)
    same = drift.drift(tmp_path / "a", tmp_path / "b")
    assert same["tasks"] > 0 and same["geomean_ratio"] == pytest.approx(1.0)
    _scale(tmp_path / "b", 2.0, ("speedup_vs_cpu", "speedup_vs_naive"))  # a faster kernel
    assert drift.drift(tmp_path / "a", tmp_path / "b")["geomean_ratio"] == pytest.approx(1.0)
    _scale(tmp_path / "b", 1.5)
    d = drift.drift(tmp_path / "a", tmp_path / "b")
    assert d["tasks"] == same["tasks"]
    assert d["geomean_ratio"] == pytest.approx(1.5) and d["min_ratio"] == pytest.approx(1.5)
    assert drift.main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "d")]) == 0
    printed = capsys.readouterr().out
    assert "geomean 1.500" in printed
    counts = d["reward_baselines"][1]
    assert sum(counts.values()) > 0 and set(counts) <= {"naive", "cpu", "eager", "compile"}
    assert "run B: samples whose reward speed term used each baseline: " in printed
    assert json.loads((tmp_path / "d").read_text())["tasks"] == d["tasks"]


def test_bad_folders_are_one_line(tmp_path, capsys):
    assert drift.main([str(tmp_path / "nope"), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no run.json" in err
