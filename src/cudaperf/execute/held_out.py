"""What a candidate may learn about held-out configs: nothing it could copy into a later reply.

A held-out config's sizes are never in a prompt; the evaluator still runs the candidate on
them, and anything the candidate writes while it runs there is candidate-controlled text that
may carry those sizes (a host function that prints `n` and then crashes on every size it was
not shown). Three rules, used by both tracks' trusted sides (`c.trusted`, `pytorch.trusted`),
which fold their per-config results the same way (`JobFold`):

- `visible_first`: the visible configs run first, the held-out ones after them, so everything
  the candidate printed before the first held-out call was written without knowing any
  held-out size.
- `visible_output`: before the first held-out call the trusted side asks the candidate's
  process to flush its stdio, then copies the end of `output.log`. That copy is the only
  candidate output a result carries (`JobReply.output`; the worker also sends it ahead as a
  `visible_output` line, so a job that then times out or kills the worker still has it). Text
  written later, or written over the file's start later, is never read.
- `held_out_message`: a held-out config's message keeps only the trusted side's own words
  (comparisons, limits, signals) with its numbers removed (`feedback.redact_sizes`); text that
  came from the candidate's process (a harness error string, an exception message) is
  replaced by a fixed sentence: letters can encode a size as well as digits can.

Guaranteed: with these, no text from the candidate's process written after a held-out
config's sizes reached it is in an `ExecResult`. Not guaranteed: the status itself, and
whether the candidate crashed, are still per job (one bit that any evaluation gives away).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cudaperf.execute.feedback import redact_sizes
from cudaperf.execute.isolation.child_proc import SpawnedChild, read_log
from cudaperf.execute.types import ConfigResult, Status
from cudaperf.tasks.model import InputConfig

__all__ = [
    "WITHHELD",
    "WITHHELD_OUTPUT",
    "JobFold",
    "held_out_message",
    "visible_first",
    "visible_output",
]

WITHHELD = (
    "the candidate failed on a held-out config; its own error text there is withheld "
    "(held-out sizes stay secret)"
)
WITHHELD_OUTPUT = "[output the candidate printed while held-out configs ran is withheld]"
_SNAPSHOT_BYTES = 64 << 10  # the end of output.log kept (results keep at most max_log_chars)


def visible_first(configs: list[InputConfig]) -> list[int]:
    """Indices of `configs` in run order: visible ones, then held-out ones (each in task
    order)."""
    return sorted(range(len(configs)), key=lambda i: (configs[i].held_out, i))


def held_out_message(message: str, trusted: bool, withheld: str = WITHHELD) -> str:
    """A held-out config's message (or any message written after held-out sizes reached the
    candidate): the trusted side's own text without its numbers, or `withheld` for text that
    came from the candidate's process."""
    if not message:
        return message
    return redact_sizes(message) if trusted else withheld


def visible_output(child: SpawnedChild, workdir: str, on_output=None) -> str:
    """What the candidate printed before any held-out call: its process's stdio flushed
    (ChildError when it does not answer), then the end of `output.log` in `workdir`, also
    handed to `on_output(text)` when given."""
    child.flush()
    out = read_log(workdir, _SNAPSHOT_BYTES)
    if on_output is not None:
        on_output(out)
    return out


@dataclass
class JobFold:
    """One job's per-config results, folded alike by both tracks as the configs run (in
    `visible_first` order): a held-out config's message is `held_out_message`'d before it is
    kept; the job's status and message are those of the first config that did not end OK (the
    message therefore always explains the status); `configs()` lists results in task order."""

    status: Status = Status.OK
    message: str = ""
    results: dict[int, ConfigResult] = field(default_factory=dict)

    def add(self, i: int, cfg: InputConfig, st: Status, cr: ConfigResult, trusted: bool) -> None:
        """Config `i` ended with `st` and `cr`; `trusted`: its message is the trusted side's
        own text (False: it came from the candidate's process)."""
        if cfg.held_out:  # feedback must not give a held-out config's size away
            cr = cr.model_copy(update={"message": held_out_message(cr.message, trusted)})
        self.results[i] = cr
        if self.status is Status.OK and st is not Status.OK:
            self.status, self.message = st, cr.message

    @property
    def started(self) -> bool:
        """Whether any config has ended (the job's first call has been made)."""
        return bool(self.results)

    def configs(self) -> list[ConfigResult]:
        return [self.results[i] for i in sorted(self.results)]
