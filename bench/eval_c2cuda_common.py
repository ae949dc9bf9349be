"""Shared helpers of the evaluator benchmarks (bench/eval_c2cuda_*.py)."""

from __future__ import annotations

import datetime
import json
import platform
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "execute"))  # the task/candidate catalog

import catalog  # noqa: E402,F401 - re-exported for the bench scripts

from cudaperf.execute.build import detect_gpus, toolchain_versions  # noqa: E402
from cudaperf.execute.config import EvalConfig  # noqa: E402


def header(config: EvalConfig) -> dict:
    """GPU name, versions, date, command, host: the provenance of a benchmark result."""
    gpus = detect_gpus()
    try:
        import numpy

        np_version = numpy.__version__
    except ImportError:  # pragma: no cover
        np_version = "missing"
    versions = toolchain_versions(config, gpus[0].driver if gpus else "")
    return {
        "gpu": gpus[0].name if gpus else "none",
        "gpus": len(gpus),
        "versions": versions | {"python": platform.python_version(), "numpy": np_version},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python " + shlex.join(sys.argv),
        "cpu_cores": __import__("os").cpu_count(),
    }


def write(path: str, doc: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
