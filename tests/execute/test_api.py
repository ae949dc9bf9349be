"""evaluate / evaluate_batch in compile-only mode (real nvcc), caching and incremental JSONL."""

import json
from pathlib import Path

from catalog import FAULTS, ROWSUM_WARP, SAXPY_NAIVE, rowsum_task, saxpy_task
from conftest import needs_nvcc

from cudaperf.execute import Candidate, Status, evaluate, evaluate_batch
from cudaperf.tasks.model import Task

pytestmark = needs_nvcc


def test_compile_only_never_pretends_to_run(cpu_config):
    r = evaluate(saxpy_task(), SAXPY_NAIVE, cpu_config)
    assert r.status is Status.COMPILED and r.mode == "compile-only" and not r.ok
    assert r.configs == [] and r.speedup_vs_cpu is None and "compile-only" in r.feedback[0]


def test_batch_statuses_jsonl_and_cache(cpu_config, tmp_path):
    jobs = [
        (saxpy_task(), Candidate(code=SAXPY_NAIVE, id="naive")),
        (saxpy_task(), Candidate(code="int x = ;", id="syntax")),
        (saxpy_task(), Candidate(code=FAULTS["fork"][0], id="fork")),
        (rowsum_task(), Candidate(code=ROWSUM_WARP, id="warp")),
    ]
    out = tmp_path / "r.jsonl"
    first = {r.candidate_id: r for r in evaluate_batch(jobs, cpu_config, out=out)}
    assert {k: v.status.value for k, v in first.items()} == {
        "naive": "compiled",
        "syntax": "compile_error",
        "fork": "rejected",
        "warp": "compiled",
    }
    assert first["syntax"].feedback[0].startswith("compile error at line 1")
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 4 and all(x["cache_key"] for x in lines)
    again = list(evaluate_batch(jobs, cpu_config, out=out))  # resumed from the JSONL
    assert all(r.cached for r in again) and len(out.read_text().splitlines()) == 4
    fresh = list(evaluate_batch(jobs[:1], cpu_config))  # served by the result cache
    assert fresh[0].cached


def test_torch_candidates_are_checked_and_built_without_a_gpu(cpu_config):
    corpus = Path(__file__).parents[1] / "adversarial" / "torch"
    t = Task(
        id="x/t",
        kind="torch2cuda",
        family="f",
        entry="Model",
        source=(corpus / "ref_affine_relu.py").read_text(),
        configs=[{"name": "a", "sizes": {"N": 1000}}],
    )
    r = evaluate(t, "code", cpu_config)
    assert r.status is Status.REJECTED and "ModelNew" in r.feedback[0]
    r = evaluate(t, "class ModelNew(:\n", cpu_config)  # a mistake, not a hack
    assert r.status is Status.COMPILE_ERROR and "syntax error at line 1" in r.feedback[0]
    r = evaluate(t, (corpus / "try_fallback.py").read_text(), cpu_config)
    assert r.status is Status.REJECTED and "try/except" in r.feedback[0]
    r = evaluate(t, (corpus / "honest.py").read_text(), cpu_config)
    assert r.status is Status.COMPILED and r.form == "native" and r.mode == "compile-only"
    broken = (corpus / "honest.py").read_text().replace("fmaxf(x[i], 0.0f)", "fmaxf(x[i], oops)")
    r = evaluate(t, broken, cpu_config)
    assert r.status is Status.COMPILE_ERROR and "oops" in r.feedback[0]


class _CountingBackend:
    """A full-mode backend that answers every job `ok` and records what it was asked to run."""

    def __init__(self):
        self.ran: list[str] = []
        self.evaluator = type("E", (), {"env": type("Env", (), {"mode": "full"})(), "key": None})()
        self.evaluator.key = lambda t, c: f"{t.id}:{c.hash}"

    def run(self, jobs):
        from cudaperf.execute.types import ConfigResult, ExecResult, Timing

        for i, (t, c) in enumerate(jobs):
            self.ran.append(c.id)
            timing = Timing.of([10.0 if c.id == "naive" else 5.0])
            cfg = ConfigResult(config="a", held_out=False, correct=True, timing=timing)
            yield (
                i,
                ExecResult(
                    status="ok",
                    mode="full",
                    task_id=t.id,
                    candidate_hash=c.hash,
                    candidate_id=c.id,
                    configs=[cfg],
                ),
            )

    def close(self):
        pass


def test_the_naive_implementation_runs_once_and_is_written_at_once(cpu_config, tmp_path):
    from cudaperf.tasks.model import Implementation

    t = saxpy_task().model_copy(
        update={"implementations": [Implementation(id="naive", code=SAXPY_NAIVE)]}
    )
    jobs = [(t, Candidate(code=SAXPY_NAIVE, id="naive")), (t, Candidate(code="x", id="other"))]
    backend = _CountingBackend()
    out = tmp_path / "r.jsonl"
    got = {r.candidate_id: r for r in evaluate_batch(jobs, cpu_config, out=out, backend=backend)}
    assert backend.ran == ["naive", "other"]  # not naive twice
    assert got["naive"].speedup_vs_naive == 1.0 and got["other"].speedup_vs_naive == 2.0
    assert len(out.read_text().splitlines()) == 2
