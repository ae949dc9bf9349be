"""Feedback rendering for every outcome: what went wrong, where, and what to change."""

from __future__ import annotations

from cudaperf.execute.types import ConfigResult, Status, Timing
from cudaperf.refine import render_feedback
from cudaperf.reward import RewardScorer, Scored, extract_candidate
from cudaperf.tasks.io import load_sample

from .helpers import finding, rank, report, result

SAXPY = next(t for t in load_sample() if t.id.endswith("saxpy"))
CODE = "\n".join(
    [
        "__global__ void k(int n, float a, const float* x, float* y) {",
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;",
        "    if (i < n) y[i * 32] = a * x[i * 32] + y[i];",
        "    undefined_thing;",
        "}",
    ]
)


def render(res, reports=(), rk=None) -> str:
    sc = RewardScorer(
        [SAXPY],
        evaluator=lambda jobs: [res],
        analyzer=lambda c: list(reports),
        ranker=(lambda t, c: rk) if rk else None,
        analyze="always",
    )
    (s,) = sc.score_code(SAXPY, [CODE])
    return render_feedback(s, SAXPY)


def cfg(name, held_out=False, **kw):
    return ConfigResult(config=name, held_out=held_out, correct=False, **kw)


def test_compile_error_shows_first_errors_with_source_lines():
    log = (
        '/tmp/b/candidate.cu(4): error: identifier "undefined_thing" is undefined\n'
        "1 error detected in the compilation of candidate.cu."
    )
    text = render(result(Status.COMPILE_ERROR, CODE, SAXPY.id, compile_log=log))
    assert "did not compile" in text
    assert 'line 4: `undefined_thing;`: identifier "undefined_thing" is undefined' in text
    assert "Fix the first problem" in text and "```cuda" in text


def test_runtime_error_and_timeout_name_the_config():
    rt = result(
        Status.RUNTIME_ERROR,
        CODE,
        SAXPY.id,
        configs=[cfg("medium", message="an illegal memory access was encountered")],
        runtime_log="CUDA error 700",
    )
    text = render(rt)
    assert "failed at run time on config `medium` (n=1048576, a=-1.25)" in text
    assert "illegal memory access" in text and "CUDA error 700" in text
    to = result(
        Status.TIMEOUT,
        CODE,
        SAXPY.id,
        configs=[cfg("small", message="hang")],
        feedback=["timeout on config small: killed after 120 s"],
    )
    assert "Timeout on config `small`" in render(to) and "barrier" in render(to)


def test_wrong_output_names_config_and_error_but_hides_held_out_sizes():
    wrong = result(
        Status.WRONG_OUTPUT,
        CODE,
        SAXPY.id,
        configs=[cfg("small", max_abs_err=0.5, max_rel_err=0.2)],
    )
    text = render(wrong)
    assert "Wrong output on config `small` (n=4097, a=2.5)" in text and "max abs error 0.5" in text
    held = result(
        Status.WRONG_OUTPUT,
        CODE,
        SAXPY.id,
        configs=[cfg("heldout", held_out=True, message="element 5000010 differs")],
    )
    text = render(held)
    assert "held-out configuration" in text and "5000011" not in text and "`heldout`" not in text


def test_rejected_says_why():
    rej = result(
        Status.REJECTED,
        CODE,
        SAXPY.id,
        findings=["side-stream"],
        feedback=["work on a non-default stream escapes the timer"],
    )
    text = render(rej)
    assert "anti-hacking" in text and "side-stream" in text and "non-default stream" in text


def test_ok_shows_speedups_findings_and_ranker():
    """The speedups are geomeans over the visible configs: the held-out config's times (10x
    vs naive here, which would make it 2.83x over all configs) stay out of the text."""
    t = lambda v: Timing.of([v])  # noqa: E731
    configs = [
        ConfigResult(
            config="small",
            held_out=False,
            correct=True,
            timing=t(10.0),
            cpu_timing=t(400.0),
            naive_timing=t(8.0),
        ),
        ConfigResult(
            config="heldout",
            held_out=True,
            correct=True,
            timing=t(100.0),
            cpu_timing=t(100.0),
            naive_timing=t(1000.0),
        ),
    ]
    ok = result(
        Status.OK, CODE, SAXPY.id, configs=configs, speedup_vs_cpu=20.0, speedup_vs_naive=2.83
    )
    text = render(ok, [report(0.4, [finding(3)])], rank(0.25))
    assert "2.83x" not in text and "20.00x" not in text
    assert "Correct on all 2 configs" in text
    assert "40.00x vs the serial C reference" in text and "0.80x vs the naive CUDA" in text
    assert "slower than a baseline" in text
    assert (
        "line 3 `if (i < n) y[i * 32] = a * x[i * 32] + y[i];` [warning uncoalesced-access]" in text
    )
    assert "faster than 25% of the 2 known" in text
    assert "Make it faster" in text


def test_compiled_and_infra_and_format_error():
    text = render(result(Status.COMPILED, CODE, SAXPY.id, mode="compile-only"))
    assert "Compile-only mode" in text and "not run" in text
    assert "evaluator itself failed" in render(result(Status.INFRA_ERROR, CODE, SAXPY.id))
    ex = extract_candidate("no code, sorry", SAXPY.kind)
    from cudaperf.reward import format_error_reward

    s = Scored(SAXPY.id, ex, None, (), None, format_error_reward())
    assert "Format error" in render_feedback(s, SAXPY)
