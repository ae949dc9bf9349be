"""The evaluator's own feedback lines (`ExecResult.feedback`), the one place they are written.

Every track writes them here: the evaluator (`Evaluator.finish`), the bulk measurement's rows
(`bulk.rows`, `bulk.torch_tasks`) and the rows rebuilt from stored measurements (`api`,
`train.data`). They are short facts kept with a result: the status with the first failing
config, and where the time went. The text a model reads in a refinement turn is
`refine.feedback.render_feedback`, which writes its words from `ExecResult`'s fields and quotes
these lines only where a fact lives in no field.

Held-out configs never give their size away: `redact_held_out` (called once, in
`Evaluator.finish`, for every track) strips the numbers of their messages, and the timing
lines leave them out.
"""

from __future__ import annotations

import re

from cudaperf.execute.types import ConfigResult, Status

__all__ = ["redact_held_out", "redact_sizes", "status_feedback", "timing_feedback"]


def status_feedback(status: Status, configs: list[ConfigResult], runtime: str) -> list[str]:
    """The first thing a model should fix, naming the config and by how much."""
    if status is Status.OK:
        return [f"correct on all {len(configs)} configs (held-out included)"]
    bad = next((c for c in configs if c.message), None)
    where = f" on config {bad.config}" if bad else ""
    if status is Status.WRONG_OUTPUT and bad:
        return [f"wrong output{where}: {bad.message}"]
    if status is Status.TIMEOUT:
        return [
            f"timeout{where}: {runtime or 'the run did not finish in time'} (hang or deadlock?)"
        ]
    if status is Status.REJECTED and bad:
        return [f"rejected{where}: {bad.message}"]
    if status is Status.RUNTIME_ERROR:
        return [f"runtime error{where}: {(bad.message if bad else '') or runtime}"]
    return [f"{status.value}: {runtime}"]


def timing_feedback(configs: list[ConfigResult]) -> list[str]:
    """Where the time went: per config time, speedups, and the dominant config. Held-out
    configs are left out (a time gives a size away as well as an element count does)."""
    timed = [c for c in configs if c.timing is not None and not c.held_out]
    if not timed:
        return []
    parts = []
    for c in timed:
        s = f"{c.config}: {c.timing.median_us:.1f} us"
        if c.naive_timing:
            s += f" ({c.naive_timing.median_us / c.timing.median_us:.2f}x vs naive CUDA"
            s += (
                f", {c.cpu_timing.median_us / c.timing.median_us:.1f}x vs CPU)"
                if c.cpu_timing
                else ")"
            )
        elif c.cpu_timing:
            s += f" ({c.cpu_timing.median_us / c.timing.median_us:.1f}x vs CPU)"
        parts.append(s)
    msgs = ["time per config: " + "; ".join(parts)]
    slow = [c for c in timed if c.naive_timing and c.timing.median_us > c.naive_timing.median_us]
    if slow:
        msgs.append(f"slower than the naive CUDA version on: {', '.join(c.config for c in slow)}")
    spread = [c for c in timed if c.timing.iqr_us > 0.2 * c.timing.median_us]
    if spread:
        msgs.append(
            f"timing is noisy (IQR > 20% of median) on: {', '.join(c.config for c in spread)}"
        )
    return msgs


_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d_]*(?:\.\d*)?(?:[eE][-+]?\d+)?(?![\w])")


def redact_sizes(message: str) -> str:
    """A held-out config's message without its numbers: element counts, indices, shapes and
    values all give its size away ("1 of 5000011 elements"). Names such as float32 are kept.
    Guaranteed: no run of digits outside a word is left."""
    return _NUMBER.sub("#", message)


def redact_held_out(configs: list[ConfigResult], message: str) -> tuple[list[ConfigResult], str]:
    """The one place held-out configs lose their sizes, for every track (`Evaluator.finish`):
    each held-out config's message through `redact_sizes`, and that message wherever it is
    quoted in the run's `message` (which feedback and the runtime log repeat). Guaranteed: no
    held-out config's message reaches a result with a digit outside a word."""
    out = []
    for c in configs:
        if c.held_out and c.message:
            red = redact_sizes(c.message)
            message = message.replace(c.message, red)
            c = c.model_copy(update={"message": red})
        out.append(c)
    return out, message
