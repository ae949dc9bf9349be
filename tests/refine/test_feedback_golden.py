"""Golden texts: the exact feedback a model sees for a fixed set of results, pinned so that a
change of who renders it (execute's messages, refine's renderer) cannot change what it reads.

Regenerate only for an intended change of the text: `python -m tests.refine.test_feedback_golden`
(from the checkout root, with PYTHONPATH=src), then review the diff of golden/feedback.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaperf.execute.types import ConfigResult, Status, Timing
from cudaperf.refine import render_feedback
from cudaperf.reward import RewardScorer, Scored, extract_candidate, format_error_reward
from cudaperf.tasks.io import load_sample
from tests.refine.helpers import finding, rank, report, result

GOLDEN = Path(__file__).parent / "golden" / "feedback.json"
SAMPLE = load_sample()
SAXPY = next(t for t in SAMPLE if t.id.endswith("saxpy"))
SOFTMAX = next(t for t in SAMPLE if t.id.endswith("softmax"))
CODE = "\n".join(
    [
        "__global__ void k(int n, float a, const float* x, float* y) {",
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;",
        "    if (i < n) y[i * 32] = a * x[i * 32] + y[i];",
        "    undefined_thing;",
        "}",
    ]
)
LOG = (
    '/tmp/b/candidate.cu(4): error: identifier "undefined_thing" is undefined\n'
    "/tmp/b/harness.cu(12): error: too few arguments in function call\n"
    "2 errors detected in the compilation of candidate.cu."
)


def _cfg(name, held_out=False, correct=False, **kw) -> ConfigResult:
    return ConfigResult(config=name, held_out=held_out, correct=correct, **kw)


def _ok_configs(torch: bool = False) -> list[ConfigResult]:
    """Visible configs at 40x the CPU and 0.8x naive (C), or 1.7x eager and 1.1x torch.compile
    (PyTorch); the held-out one far off all four (the feedback's speedups must not move with
    it)."""
    t = lambda *v: Timing.of(list(v))  # noqa: E731
    base = (
        [
            dict(eager_timing=t(17.85), compile_timing=t(11.55)),
            dict(eager_timing=t(212.5), compile_timing=t(137.5)),
            dict(eager_timing=t(90.0), compile_timing=t(90000.0)),
        ]
        if torch
        else [
            dict(cpu_timing=t(420.0), naive_timing=t(8.4)),
            dict(cpu_timing=t(5000.0), naive_timing=t(100.0)),
            dict(cpu_timing=t(9.0), naive_timing=t(9000.0)),
        ]
    )
    return [
        _cfg("small", correct=True, timing=t(10.0, 11.0), **base[0]),
        _cfg("medium", correct=True, timing=t(120.0, 125.0, 130.0), **base[1]),
        _cfg("heldout", held_out=True, correct=True, timing=t(900.0), **base[2]),
    ]


def cases() -> dict[str, tuple]:
    """Name -> (task, result or None for a format error, reports, rank score)."""
    r = lambda st, **kw: result(st, CODE, SAXPY.id, **kw)  # noqa: E731
    return {
        "compile_error": (SAXPY, r(Status.COMPILE_ERROR, compile_log=LOG), (), None),
        "compile_error_unparsed": (
            SAXPY,
            r(
                Status.COMPILE_ERROR,
                compile_log="nvcc fatal",
                feedback=["nvcc: fatal error, no line"],
            ),
            (),
            None,
        ),
        "runtime_error": (
            SAXPY,
            r(
                Status.RUNTIME_ERROR,
                runtime_log="CUDA error 700\n",
                configs=[_cfg("medium", message="illegal memory access")],
            ),
            (),
            None,
        ),
        "runtime_error_no_config": (
            SAXPY,
            r(Status.RUNTIME_ERROR, feedback=["the entry point crashed"]),
            (),
            None,
        ),
        "timeout": (
            SAXPY,
            r(
                Status.TIMEOUT,
                configs=[_cfg("small", message="hang")],
                feedback=["timeout on config small: killed after 120 s"],
            ),
            (),
            None,
        ),
        "wrong_output": (
            SAXPY,
            r(
                Status.WRONG_OUTPUT,
                configs=[
                    _cfg("small", correct=True),
                    _cfg("medium", max_abs_err=0.5, max_rel_err=0.2),
                ],
            ),
            (),
            None,
        ),
        "wrong_output_held_out": (
            SAXPY,
            r(
                Status.WRONG_OUTPUT,
                configs=[_cfg("heldout", held_out=True, message="element 5000010 differs")],
            ),
            (),
            None,
        ),
        "wrong_output_no_config": (
            SAXPY,
            r(Status.WRONG_OUTPUT, feedback=["outputs were all zero"]),
            (),
            None,
        ),
        "rejected": (
            SAXPY,
            r(
                Status.REJECTED,
                findings=["side_stream", "timer_patching"],
                feedback=["rejected: work on a non-default stream"],
            ),
            (),
            None,
        ),
        "ok": (
            SAXPY,
            r(Status.OK, configs=_ok_configs(), speedup_vs_cpu=40.0, speedup_vs_naive=0.8),
            (report(0.4, [finding(3), finding(0, "low-occupancy")]), report(0.9)),
            rank(0.25),
        ),
        "ok_torch": (
            SOFTMAX,
            result(
                Status.OK,
                CODE,
                SOFTMAX.id,
                configs=_ok_configs(True),
                speedup_vs_eager=1.7,
                speedup_vs_compile=1.1,
            ),
            (report(1.0),),
            None,
        ),
        "compiled": (SAXPY, r(Status.COMPILED, mode="compile-only"), (), None),
        "infra_error": (SAXPY, r(Status.INFRA_ERROR), (), None),
        "format_error": (SOFTMAX, None, (), None),
    }


def render(task, res, reports, rk) -> str:
    if res is None:
        ex = extract_candidate("```cuda\n__global__ void k() {}\n```", task.kind)
        return render_feedback(Scored(task.id, ex, None, (), None, format_error_reward()), task)
    sc = RewardScorer(
        [task],
        evaluator=lambda jobs: [res],
        analyzer=lambda c: list(reports),
        ranker=(lambda t, c: rk) if rk else None,
        analyze="always",
    )
    (s,) = sc.score_code(task, [CODE])
    return render_feedback(s, task)


def texts() -> dict[str, str]:
    return {name: render(*case) for name, case in cases().items()}


@pytest.mark.parametrize("name", list(cases()))
def test_the_feedback_text_is_the_pinned_one(name):
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert set(want) == set(cases())
    assert render(*cases()[name]) == want[name]


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(texts(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")
