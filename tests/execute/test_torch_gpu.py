"""GPU: every cheating or faulty PyTorch→CUDA candidate of the adversarial corpus ends with an
allowed status, the honest ones pass, and the evaluator keeps serving after each fault; the
sample set's PyTorch→CUDA implementations pass through the full evaluator."""

import json
from pathlib import Path

import pytest
from conftest import needs_gpu

from cudaperf.execute import Candidate, EvalConfig, evaluate_batch
from cudaperf.tasks.io import load_sample
from cudaperf.tasks.model import Task

pytestmark = [pytest.mark.gpu, needs_gpu]

CORPUS = Path(__file__).parents[1] / "adversarial" / "torch"
MANIFEST = json.loads((CORPUS / "expected.json").read_text())


def _task(name: str) -> Task:
    spec = MANIFEST["tasks"][name]
    return Task(
        id=f"adversarial/{name}", kind="torch2cuda", family=name, entry="Model",
        source=(CORPUS / spec["module"]).read_text(), configs=spec["configs"],
        tolerance=spec["tolerance"],
    )  # fmt: skip


def _config(tmp_path: Path, **kw) -> EvalConfig:
    base = dict(trials=20, warmup=3, run_timeout_s=30, baseline_timeout_s=60,
                cache_dir=tmp_path, use_result_cache=False, compile_baseline=False)  # fmt: skip
    return EvalConfig(**(base | kw))


def test_adversarial_corpus(tmp_path):
    tasks = {name: _task(name) for name in MANIFEST["tasks"]}
    names = sorted(MANIFEST["candidates"]) + ["honest.py"]  # honest again, after every fault
    jobs = [
        (
            tasks[MANIFEST["candidates"][n]["task"]],
            Candidate(code=(CORPUS / n).read_text(), id=f"{k}:{n}"),
        )
        for k, n in enumerate(names)
    ]
    results = {r.candidate_id: r for r in evaluate_batch(jobs, _config(tmp_path))}
    wrong = []
    for k, n in enumerate(names):
        r = results[f"{k}:{n}"]
        allowed = MANIFEST["candidates"][n]["final"]
        print(f"{n:24s} {r.status.value:14s} {r.feedback[:1]}")
        if r.status.value not in allowed:
            wrong.append(f"{n}: {r.status.value} (allowed {allowed}): {r.feedback[:2]}")
    assert not wrong, "\n".join(wrong)


def test_sample_torch_implementations_pass_the_evaluator(tmp_path):
    tasks = [t for t in load_sample() if t.kind.value == "torch2cuda"]
    jobs = [
        (t, Candidate(code=i.code, id=f"{t.id}:{i.id}")) for t in tasks for i in t.implementations
    ]
    results = list(evaluate_batch(jobs, _config(tmp_path, compile_baseline=True)))
    bad = [f"{r.candidate_id}: {r.status.value} {r.feedback[:2]}" for r in results if not r.ok]
    assert not bad, "\n".join(bad)
    for r in results:
        assert r.speedup_vs_eager is not None and all(c.eager_timing for c in r.configs)
