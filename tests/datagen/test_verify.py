"""nvcc compiles a sample of the generated implementations (one per family, rotating); the C
reference check fails a task whose reference crashes, hangs or lacks its entry function."""

from __future__ import annotations

import json
import shutil

import pytest

from cudaperf.datagen import FAMILIES, generate_one
from cudaperf.datagen.verify import check_reference, cuda_units, nvcc_compile
from cudaperf.tasks.model import Task, TaskKind

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


@needs_nvcc
def test_sampled_implementations_compile():
    units = []
    for k, name in enumerate(sorted(FAMILIES)):
        t = generate_one(FAMILIES[name], 0, k % 3)
        all_units = cuda_units(t)
        units.append(all_units[k % len(all_units)])
    results = nvcc_compile(units, jobs=2)
    bad = [(r.name, r.message[:800]) for r in results if not r.ok]
    assert not bad


@needs_nvcc
def test_c_implementation_compiles_inside_the_evaluator_harness():
    from cudaperf.execute.c.harness import harness_source

    name = next(f for f in sorted(FAMILIES) if FAMILIES[f].kind is TaskKind.C2CUDA)
    t = generate_one(FAMILIES[name], 0, 0)
    impl = t.implementations[-1]
    [r] = nvcc_compile([(impl.id, harness_source(t, impl.code))], jobs=1)
    assert r.ok, r.message


def _scale_task(body: str, entry: str = "scale") -> Task:
    src = f"void scale(int n, const float* x, float* y) {{ {body} }}"
    return Task(
        id="t/c2cuda/scale",
        kind="c2cuda",
        family="scale",
        entry=entry,
        description="y = 2x",
        source=src,
        signature=[
            {"name": "n", "ctype": "int", "role": "scalar"},
            {"name": "x", "ctype": "float", "role": "in", "length": "n"},
            {"name": "y", "ctype": "float", "role": "out", "length": "n"},
        ],
        configs=[{"name": "small", "sizes": {"n": 64}}],
    )


_GOOD = "for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i] + 1.0f;"


@needs_gcc
@pytest.mark.parametrize(
    "body, entry, timeout, want",
    [
        (_GOOD, "scale", 60.0, None),
        ("volatile int* p = 0; *p = 1; (void)x; (void)y; (void)n;", "scale", 60.0, "SIGSEGV"),
        ("volatile int k = 1; while (k) {} (void)x; (void)y; (void)n;", "scale", 1.0, "within 1 s"),
        (_GOOD, "missing", 60.0, "defines no function 'missing'"),
    ],
    ids=["ok", "crash", "hang", "no_entry"],
)
def test_a_reference_that_crashes_hangs_or_lacks_its_entry_fails_its_task(
    body, entry, timeout, want
):
    """The reference runs in a child process: a crash or a hang fails the task (before, the
    caller died or hung), and so does an entry the source does not define (was a traceback)."""
    r = check_reference(_scale_task(body, entry), timeout_s=timeout)
    if want is None:
        assert r.ok, r.message
    else:
        assert not r.ok and want in r.message, r.message


@needs_gcc
def test_data_verify_reports_a_crashing_reference_as_a_failure(tmp_path):
    from typer.testing import CliRunner

    from cudaperf.cli import app
    from cudaperf.tasks.io import save_tasks

    f = tmp_path / "t.jsonl"
    save_tasks([_scale_task("volatile int* p = 0; *p = 1; (void)x; (void)y; (void)n;")], f)
    r = CliRunner().invoke(app, ["data", "verify", str(f), "--no-nvcc", "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["references_ok"] == 0 and "SIGSEGV" in doc["failures"][0]["message"]
