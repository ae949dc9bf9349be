import json

import pytest
from typer.testing import CliRunner

from cudaperf.cli import app
from cudaperf.report import load_results, plot_speedups, summarise


def _rows():
    return [
        {"status": "ok", "speedup_vs_cpu": 8.0, "speedup_vs_naive": 2.0},
        {"status": "ok", "speedup_vs_cpu": 2.0, "speedup_vs_naive": 0.5},
        {"status": "wrong_output"},
        {"status": "compile_error"},
    ]


def test_summary_fast_p_and_geomeans():
    s = summarise(_rows())
    assert s["statuses"] == {"ok": 2, "wrong_output": 1, "compile_error": 1}
    assert s["correct_fraction"] == 0.5
    assert s["geomean_speedup_vs_cpu"] == pytest.approx(4.0)
    assert s["fast_1_speedup_vs_naive"] == 0.25 and s["fast_2_speedup_vs_cpu"] == 0.25
    assert s["geomean_speedup_vs_eager"] is None


def test_plot_writes_png(tmp_path):
    out = tmp_path / "s.png"
    assert plot_speedups(_rows(), out) == ["speedup_vs_cpu", "speedup_vs_naive"]
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert plot_speedups([{"status": "compiled"}], tmp_path / "none.png") == []


def test_cli_report(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in _rows()) + "\n")
    assert load_results(p)[0]["status"] == "ok"
    r = CliRunner().invoke(app, ["report", str(p), "--json", "--plot", str(tmp_path / "x.png")])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["plotted"] == ["speedup_vs_cpu", "speedup_vs_naive"]
    p.write_text("not json\n")
    r = CliRunner().invoke(app, ["report", str(p)])
    assert r.exit_code == 2 and "r.jsonl:1" in r.output


def test_the_speedup_fields_are_execute_types_speedups():
    from cudaperf.execute.types import SPEEDUP_FIELDS, SPEEDUPS
    from cudaperf.report.rows import BASELINE_FIELDS
    from cudaperf.report.speedups import BASELINES

    assert tuple(BASELINES) == SPEEDUP_FIELDS
    assert BASELINE_FIELDS == {b: SPEEDUPS[b][0] for b in ("eager", "compile", "naive", "cpu")}
