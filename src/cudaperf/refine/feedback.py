"""Feedback text a model can act on, one renderer per outcome.

Every message names what went wrong, where (source line, config), and what to change. It
never reveals a held-out configuration's sizes: a failure there is reported as "a held-out
configuration". Guaranteed: the text is plain Markdown, deterministic for a given input.

Where the words come from: this module writes the text from `ExecResult`'s fields (status,
per-config results, timings, speedups, the compile log, which it parses with execute's
`COMPILER_ERROR`), the reports and the rank score. It quotes execute's own sentences
(`ExecResult.feedback`) only where execute keeps the fact in no field of its own: a timeout's
message (compile or run), the run's message of a runtime error, wrong output or rejection that
no config carries (with the static checks' notes), the static checks' messages of a rejection,
and compile errors the log parse does not find (the first error of the full log, a PyTorch
syntax error). The texts are pinned in tests/refine/golden/feedback.json.
"""

from __future__ import annotations

from cudaperf.analyze.types import Finding, Severity
from cudaperf.execute.build import COMPILER_ERROR
from cudaperf.execute.types import SPEEDUPS, ConfigResult, ExecResult, Status, speedup_over
from cudaperf.rank.types import RankScore
from cudaperf.reward.scorer import Scored
from cudaperf.tasks.model import Task, TaskKind

__all__ = ["compile_errors", "render_feedback"]

_SEVERITY = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
_LABELS = {
    "cpu": "the serial C reference on the CPU",
    "naive": "the naive CUDA implementation",
    "eager": "eager PyTorch",
    "compile": "torch.compile",
}
_SPEEDUPS = tuple((SPEEDUPS[k][1], label) for k, label in _LABELS.items())


def render_feedback(scored: Scored, task: Task, max_findings: int = 5) -> str:
    """The feedback for one evaluated reply: outcome, structure, ranker, reward, next step."""
    bd = scored.breakdown
    head = (
        f"## Result: {bd.status} (reward {bd.total:+.2f})"
        if bd.valid
        else (f"## Result: {bd.status}")
    )
    if scored.result is None:
        return "\n\n".join([head, scored.extraction.error])
    code = scored.extraction.code or ""
    parts = [head, _outcome(scored.result, task, code)]
    findings = _findings(scored, code, max_findings)
    if findings:
        parts.append(findings)
    if scored.rank is not None:
        parts.append(_ranker(scored.rank))
    parts.append(_next_step(scored.result.status, task))
    return "\n\n".join(parts)


def compile_errors(log: str, code: str, limit: int = 3) -> list[str]:
    """The first `limit` compiler errors as 'line N: `source`: message' (candidate lines)."""
    out = []
    for m in COMPILER_ERROR.finditer(log):
        line = int(m.group("l1") or m.group("l2"))
        msg = m.group("msg").strip()
        if "candidate" in m.group("file") or m.group("file").endswith(".py"):
            src = _line(code, line)
            out.append(f"line {line}: `{src}`: {msg}" if src else f"line {line}: {msg}")
        else:
            out.append(f"in the harness (your entry point's prototype does not match): {msg}")
        if len(out) >= limit:
            break
    return out


def _outcome(res: ExecResult, task: Task, code: str) -> str:
    bad = next((c for c in res.configs if not c.correct or c.message), None)
    if res.status is Status.COMPILE_ERROR:
        errs = compile_errors(res.compile_log, code) or res.feedback or [res.compile_log[:500]]
        return "It did not compile. First errors:\n" + "\n".join(f"- {e}" for e in errs)
    if res.status is Status.RUNTIME_ERROR:
        log = res.runtime_log.strip()[-600:]
        msg = (bad.message if bad else "") or (res.feedback[0] if res.feedback else "")
        tail = f"\nRuntime log (end):\n```\n{log}\n```" if log else ""
        return f"It compiled but failed at run time{_where(bad, task)}: {msg}{tail}"
    if res.status is Status.TIMEOUT:
        msg = res.feedback[0] if res.feedback else "it did not finish in time"
        return (
            f"Timeout{_where(bad, task)}: {msg}. Look for loops that never end, a barrier not "
            "every thread of the block reaches, or a launch far larger than the data."
        )
    if res.status is Status.WRONG_OUTPUT:
        return _wrong(bad, task, res)
    if res.status is Status.REJECTED:
        why = (bad.message if bad else "") or "; ".join(res.feedback) or "a check fired"
        ids = f" (checks: {', '.join(res.findings)})" if res.findings else ""
        return (
            f"Rejected by the anti-hacking checks{ids}: {why}. Compute every output in your own "
            "kernels on every call, on the default stream, without touching the inputs."
        )
    if res.status is Status.COMPILED:
        return (
            "It compiled. Compile-only mode (no GPU here): it was not run, checked or timed, "
            "so correctness and speed are unknown."
        )
    if res.status is Status.INFRA_ERROR:
        return "The evaluator itself failed (not your code's fault); nothing is known about it."
    return _ok(res, task)


def _where(c: ConfigResult | None, task: Task) -> str:
    if c is None:
        return ""
    if c.held_out:
        return " on a held-out configuration (its sizes are not shown)"
    sizes = ", ".join(f"{k}={v}" for k, v in task.config(c.config).sizes.items())
    return f" on config `{c.config}` ({sizes})"


def _wrong(c: ConfigResult | None, task: Task, res: ExecResult) -> str:
    if c is None:
        return "Wrong output: " + ("; ".join(res.feedback) or "some config did not match")
    errs = []
    if c.max_abs_err is not None:
        errs.append(f"max abs error {c.max_abs_err:.3g}")
    if c.max_rel_err is not None:
        errs.append(f"max rel error {c.max_rel_err:.3g}")
    tol = f"tolerance atol={task.tolerance.atol:g}, rtol={task.tolerance.rtol:g}"
    text = f"Wrong output{_where(c, task)}: {c.message or ', '.join(errs)} ({tol})."
    if c.held_out:
        text += (
            " Check sizes that are not multiples of your block size or vector width, and "
            "do not specialise on the sizes you were shown."
        )
    return text


def _ok(res: ExecResult, task: Task) -> str:
    lines = [f"Correct on all {len(res.configs)} configs (held-out included)."]
    visible = [c for c in res.configs if not c.held_out and c.timing is not None]
    # held-out times stay out: they move with sizes the model is not shown
    speed = {name: speedup_over(visible, base) for base, name in _SPEEDUPS}
    sp = [f"{v:.2f}x vs {name}" for name, v in speed.items() if v]
    if sp:
        lines.append("Speedups (geomean over the visible configs): " + "; ".join(sp) + ".")
    times = [
        f"`{c.config}` {c.timing.median_us:.1f} us"
        for c in res.configs
        if c.timing is not None and not c.held_out
    ]
    if times:
        lines.append("Time per visible config: " + ", ".join(times) + ".")
    slow = [k for k in (_LABELS["naive"], _LABELS["eager"]) if (speed.get(k) or 2) < 1]
    if slow:
        lines.append("It is slower than a baseline above: that is the first thing to fix.")
    return "\n".join(lines)


def _findings(scored: Scored, code: str, limit: int) -> str:
    found: list[Finding] = [f for r in scored.reports for f in r.findings]
    found.sort(key=lambda f: (_SEVERITY[f.severity], f.line))
    if not scored.reports:
        return ""
    score = sum(r.score for r in scored.reports) / len(scored.reports)
    head = f"Structure: score {score:.2f} of 1 over {len(scored.reports)} kernel(s)"
    if not found:
        return head + "; no structural issues found."
    rows = []
    for f in found[:limit]:
        src = _line(code, f.line) if f.line else ""
        at = f"line {f.line}" + (f" `{src}`" if src else "") if f.line else "kernel"
        rows.append(f"- {at} [{f.severity.value} {f.rule}]: {f.message}")
    more = f"\n({len(found) - limit} more not shown)" if len(found) > limit else ""
    return head + ". Top findings:\n" + "\n".join(rows) + more


def _ranker(rank: RankScore) -> str:
    return (
        f"Ranker: predicts it is faster than {rank.score:.0%} of the {rank.compared} known "
        f"implementation(s) of this task (model {rank.model or 'unnamed'}; an opinion, not a "
        "measurement)."
    )


def _next_step(status: Status, task: Task) -> str:
    tag = "cuda" if task.kind is TaskKind.C2CUDA else "python"
    if status is Status.OK:
        what = "Make it faster while keeping it correct on every size"
    elif status is Status.COMPILED:
        what = "Improve it if you can"
    else:
        what = "Fix the first problem above"
    return f"{what}, and reply with the complete file in one ```{tag} block."


def _line(code: str, n: int) -> str:
    lines = code.splitlines()
    return lines[n - 1].strip()[:160] if 1 <= n <= len(lines) else ""
