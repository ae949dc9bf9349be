"""Shared helpers of the BabelTower importer tests: hand-written rows in the test set's format."""

from __future__ import annotations

import json
import shutil

import pytest

from cudaperf.tasks.importers.babeltower import check as refcheck
from cudaperf.tasks.importers.babeltower.importer import import_babeltower

needs_gcc = pytest.mark.skipif(
    shutil.which("gcc") is None or refcheck.sanitizer_available() != "",
    reason="gcc with AddressSanitizer/UBSan not available",
)


def row(i: int, cpp: str, cuda: str, tests: list[str], wrapper: str) -> dict:
    """One row: C code, CUDA code, the C tests and the CUDA wrapper (tokenised like the set)."""
    return {
        "id": i,
        "cpp_code": cpp,
        "cuda_code": cuda,
        "consistent_cpp_inputs": tests,
        "consistent_cuda_inputs": [],
        "cuda_wrapper": wrapper,
        "consistent_outputs": [],
    }


def wrapper(i: int, params: str, body: str) -> str:
    return f"void w{i}_invoke_in_cpp({params}) {{\n{body}\n}}"


def import_rows(tmp_path, rows: list[dict], **kw):
    """(report, {row id: task}) of importing `rows` from a JSONL file under `tmp_path`."""
    f = tmp_path / "bt.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = import_babeltower(f, **kw)
    return report, {t.id.split("/")[1].split("_")[0]: t for t in report.tasks}


def imported(rows: list[dict], name: str, **kw):
    """A module-scoped fixture called `name`: `import_rows(rows, **kw)` once per test module
    (importing runs the sanitized reference check, seconds per row)."""

    def once(tmp_path_factory):
        return import_rows(tmp_path_factory.mktemp("bt"), rows, **kw)

    return pytest.fixture(once, scope="module", name=name)
