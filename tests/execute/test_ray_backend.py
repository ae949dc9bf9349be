"""The Ray backend on the CPU with compile-only jobs (skipped when ray is not installed)."""

import pytest
from catalog import SAXPY_NAIVE, saxpy_task
from conftest import needs_nvcc

from cudaperf.execute import Candidate, Status, evaluate_batch

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'cudaperf[ray]')")


@needs_nvcc
def test_ray_compile_only(cpu_config):
    from cudaperf.execute.ray_backend import RayBackend

    jobs = [
        (saxpy_task(), Candidate(code=SAXPY_NAIVE + "// ray", id="good")),
        (saxpy_task(), Candidate(code="int y = ;", id="bad")),
        (saxpy_task(), Candidate(code='void f() { system("x"); }', id="cheat")),
    ]
    backend = RayBackend(
        cpu_config, num_actors=2, init_kwargs={"num_cpus": 2, "include_dashboard": False}
    )
    try:
        got = {r.candidate_id: r.status for r in evaluate_batch(jobs, cpu_config, backend=backend)}
    finally:
        backend.close()
        ray.shutdown()
    assert got == {"good": Status.COMPILED, "bad": Status.COMPILE_ERROR, "cheat": Status.REJECTED}
