"""`cudaperf analyze`: JSON shape, human output, and one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cudaperf.cli import app

KERNELS = Path(__file__).parent / "kernels"
runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, ["analyze", *args])


def test_json_document(monkeypatch):
    r = _run(str(KERNELS / "transpose_smem.cu"), "--json", "--arch", "sm_80")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    names = [k["name"] for k in doc["kernels"]]
    assert names == ["transpose_padded", "transpose_unpadded"]
    k = doc["kernels"][1]
    assert set(k) >= {"name", "features", "findings", "score"}
    assert k["features"]["shared_bank_conflict_degree_max"] == 32
    assert k["findings"][0]["rule"] == "bank-conflict"


def test_human_output_has_table_and_findings():
    r = _run(str(KERNELS / "strided.cu"), "--block-size", "128")
    assert r.exit_code == 0, r.output
    assert "copy_strided" in r.stdout and "[uncoalesced-access]" in r.stdout
    assert "line 9" in r.stdout


def test_errors_exit_2_with_one_line(tmp_path):
    r = _run(str(tmp_path / "missing.cu"))
    assert r.exit_code == 2 and "does not exist" in r.output
    r = _run(str(KERNELS / "coalesced.cu"), "--arch", "sm_42")
    assert r.exit_code == 2 and "use one of" in r.output
    empty = tmp_path / "empty.cu"
    empty.write_text("int main() { return 0; }\n")
    r = _run(str(empty))
    assert r.exit_code == 2 and "no __global__ kernel" in r.output
    assert "Traceback" not in r.output
