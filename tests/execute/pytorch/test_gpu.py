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

CORPUS = Path(__file__).parents[2] / "adversarial" / "torch"
MANIFEST = json.loads((CORPUS / "expected.json").read_text())


def _task(name: str) -> Task:
    spec = MANIFEST["tasks"][name]
    return Task(
        id=f"adversarial/{name}",
        kind="torch2cuda",
        family=name,
        entry="Model",
        source=(CORPUS / spec["module"]).read_text(),
        configs=spec["configs"],
        tolerance=spec["tolerance"],
    )


def _config(tmp_path: Path, **kw) -> EvalConfig:
    base = dict(
        trials=20,
        warmup=3,
        run_timeout_s=30,
        baseline_timeout_s=60,
        cache_dir=tmp_path,
        use_result_cache=False,
        compile_baseline=False,
    )
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


# --- fault recovery: every fault followed by an honest candidate ----------------------------


def test_torch_faults_get_their_status_and_the_next_candidate_is_ok(tmp_path):
    from torch_catalog import FAULTS, affine_relu_task, honest

    task = affine_relu_task()
    jobs = []
    for k, name in enumerate(sorted(FAULTS)):
        jobs.append((task, Candidate(code=FAULTS[name][0], id=name)))
        jobs.append((task, Candidate(code=honest(k), id=f"honest{k}")))
    res = {r.candidate_id: r for r in evaluate_batch(jobs, _config(tmp_path))}
    bad = [
        f"{n}: {res[n].status.value} {res[n].feedback[:1]}"
        for n, (_, allowed) in FAULTS.items()
        if res[n].status.value not in allowed
    ]
    bad += [
        f"{i}: {r.status.value} {r.feedback[:1]}"
        for i, r in res.items()
        if i.startswith("honest") and not r.ok
    ]
    assert not bad, "\n".join(bad)
    for name in ("illegal_write", "illegal_null_read", "misaligned_write", "device_assert"):
        assert "CUDA error" in res[name].feedback[0], res[name].feedback  # the CUDA message
    assert all(res[f"honest{k}"].launched == ["affine_relu_kernel"] for k in range(len(FAULTS)))


# --- the trusted side against cheating candidates, on the GPU (no static checks here) ------


def _direct(code: str, task=None, **kw) -> tuple[dict, str]:
    """Run one candidate through the trusted side in this process, on the GPU."""
    from torch_cpu import run

    return run(code, task, device="cuda", **kw)


@pytest.mark.parametrize(
    "name", ["FRAME_WALK", "GC_SCAN", "IMPORT_REF", "ENV_AND_MEMORY", "COPY", "POINTER_CACHE"]
)
def test_cheats_that_need_the_answer_end_wrong_on_the_gpu(name):
    from torch_cpu import SALT

    from tests.execute.pytorch import test_trusted as c

    reply, log = _direct(getattr(c, name))
    assert reply["status"] == "wrong_output", reply["message"]
    assert str(SALT) not in log


@pytest.mark.parametrize(
    ("name", "words"),
    [("INPLACE", ""), ("PATCHED_TIMER", "time.perf_counter"), ("LYING_TIMES", "trusted clock")],
)
def test_cheats_the_dynamic_checks_reject_on_the_gpu(name, words):
    from tests.execute.pytorch import test_trusted as c

    reply, _ = _direct(getattr(c, name))
    assert reply["status"] == "rejected" and words in reply["message"], reply["message"]


def test_output_aliasing_an_input_is_rejected_on_the_gpu():
    from torch_cpu import relu_task

    from tests.execute.pytorch import test_trusted as c

    reply, _ = _direct(c.RETURNS_INPUT, relu_task(c.IDENTITY_REF))
    assert reply["status"] == "rejected" and "shares memory" in reply["message"]


def _native(forward: str) -> str:
    from torch_catalog import native

    return native(forward=forward.replace("\n", "\n        "))


def test_stale_outputs_after_timing_are_caught_on_the_gpu():
    from torch_catalog import affine_relu_task

    code = _native(
        "self.calls = getattr(self, 'calls', 0) + 1\n"
        "if self.calls > 4:\n    return torch.full_like(x, 1.0)"
    )
    reply, _ = _direct(code, affine_relu_task())
    assert reply["status"] == "wrong_output" and "after timing" in reply["message"]


def test_timed_trials_get_fresh_inputs_on_the_gpu():
    """Memoising on a content probe pays nothing: every timed trial has new inputs."""
    from torch_catalog import affine_relu_task

    code = _native(
        "probe = float(x[0])\nseen = self.__dict__.setdefault('seen', set())\n"
        "if probe not in seen:\n    __import__('time').sleep(0.003)\n"
        "    seen.add(probe)"
    )
    reply, _ = _direct(code, affine_relu_task())
    assert reply["status"] == "ok", reply["message"]
    assert reply["configs"][0]["timing"]["median_us"] > 2500
    assert reply["launched"] == ["affine_relu_kernel"]


def test_held_out_configs_are_checked_on_the_gpu_and_feedback_has_no_size():
    from torch_catalog import affine_relu_task

    reply, _ = _direct(_native("if x.numel() == 3000017:\n    x = x * 0.5"), affine_relu_task())
    assert reply["status"] == "wrong_output"
    held = reply["configs"][-1]
    assert held["held_out"] and not held["correct"] and "3000017" not in held["message"]
