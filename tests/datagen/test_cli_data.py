"""`cudaperf data build / measure`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from cudaperf.cli import app
from cudaperf.datagen import FAMILIES
from cudaperf.tasks.io import load_tasks


def test_build_writes_tasks_splits_and_stats(tmp_path):
    out = tmp_path / "t.jsonl"
    r = CliRunner().invoke(app, ["data", "build", "--per-family", "1", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    stats = json.loads(r.stdout)
    assert stats["tasks"] == len(FAMILIES) == len(load_tasks(out))
    assert stats["duplicate_implementations"] == 0 and stats["measured_fraction"] == 0.0
    assert json.loads((tmp_path / "splits.json").read_text())["families"]


def test_build_rejects_a_share_above_the_limit(tmp_path):
    r = CliRunner().invoke(
        app, ["data", "build", "--families", "poly_eval", "--out", str(tmp_path / "t.jsonl")]
    )
    assert r.exit_code == 2 and "--max-family-share" in r.output


def test_measure_says_it_needs_a_gpu():
    r = CliRunner().invoke(app, ["data", "measure"])
    assert r.exit_code == 1 and "GPU" in r.output


def test_build_writes_gzipped_jsonl_with_per_kind_totals(tmp_path):
    out = tmp_path / "t.jsonl.gz"
    args = ["data", "build", "--c-tasks", "40", "--torch-tasks", "10", "--out", str(out), "--json"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    stats = json.loads(r.stdout)
    assert stats["by_kind"]["c2cuda"] >= 40 and stats["by_kind"]["torch2cuda"] >= 10
    assert len(load_tasks(out)) == stats["tasks"]
    again = tmp_path / "again" / "t.jsonl.gz"
    assert CliRunner().invoke(app, [*args[:-3], "--out", str(again), "--json"]).exit_code == 0
    assert again.read_bytes() == out.read_bytes()


def test_emulator_tests_skip_saying_what_to_set_and_why():
    """`pytest -rs` is where people read it: the variable, its value, and that it is slow."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDAPERF_EMULATE")}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "tests/datagen/families/torch2cuda/test_torch_emulated.py",
        ],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        timeout=120,
    )
    skips = [ln for ln in r.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert skips, r.stdout
    assert all("set CUDAPERF_EMULATE=1 to run it" in ln and "slow" in ln for ln in skips)


def test_tolerances_gives_each_task_the_generators_and_refuses_other_drift(tmp_path):
    from cudaperf.datagen import generate_one
    from cudaperf.tasks.io import save_tasks
    from cudaperf.tasks.model import Tolerance

    a, b = (generate_one(FAMILIES[f], 0, 0) for f in ("spmv_csr", "gemm"))
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl.gz"
    save_tasks([a.model_copy(update={"tolerance": Tolerance(atol=1.0, rtol=1.0)}), b], src)
    r = CliRunner().invoke(app, ["data", "tolerances", str(src)])
    assert r.exit_code == 2 and "--out" in r.output and not out.exists()  # nothing in place
    r = CliRunner().invoke(app, ["data", "tolerances", str(src), "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"tasks": 2, "changed": 1, "by_family": {"spmv_csr": 1}}
    assert [t.tolerance for t in load_tasks(out)] == [a.tolerance, b.tolerance]
    save_tasks([a.model_copy(update={"description": "edited"})], src)
    r = CliRunner().invoke(
        app, ["data", "tolerances", str(src), "--out", str(tmp_path / "x.jsonl")]
    )
    assert r.exit_code == 2 and a.id in r.output and "Traceback" not in r.output
