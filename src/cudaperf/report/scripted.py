"""Reference backends for benchmarks: `scripted:best` and `scripted:naive`.

They reply to every sample of every turn with one fixed implementation of the task, so a
benchmark of them measures the task set and the evaluator rather than a model:

- `scripted:best`: the task's fastest known implementation (`refine.weakest_first`'s last:
  by the geomean of its measured median times when the implementations have common
  measurements, else the one with the most strategy tags) — an upper reference.
- `scripted:naive`: the task's naive implementation (id or strategy tag `naive`, the one the
  evaluator times as the naive baseline), else its slowest known one — a lower reference.

Tasks without implementations (KernelBench, PolyBench) cannot be replayed: `replayable`
says which can, and the benchmark leaves the others out and says how many.
"""

from __future__ import annotations

from collections.abc import Sequence

from cudaperf.refine.backends import Message, weakest_first
from cudaperf.refine.prompts import task_prompt
from cudaperf.tasks.model import Implementation, Task, TaskKind

__all__ = ["REFERENCE_SPECS", "ReferenceBackend", "pick_reference", "replayable"]

REFERENCE_SPECS = ("scripted:best", "scripted:naive")


def pick_reference(task: Task, which: str) -> Implementation | None:
    """The implementation `scripted:<which>` replays for `task` (None: it has none)."""
    if which not in ("best", "naive"):
        raise ValueError(f"unknown reference {which!r}; use best or naive")
    order = weakest_first(task)  # slowest first
    if not order:
        return None
    if which == "best":
        return order[-1]
    naive = [i for i in task.implementations if i.id == "naive" or "naive" in i.strategies]
    return naive[0] if naive else order[0]


def replayable(tasks: Sequence[Task]) -> list[Task]:
    """The tasks that have at least one implementation to replay."""
    return [t for t in tasks if t.implementations]


def _reply(task: Task, impl: Implementation) -> str:
    tag = "cuda" if task.kind is TaskKind.C2CUDA else "python"
    return f"Reference implementation `{impl.id}`.\n```{tag}\n{impl.code.rstrip()}\n```"


class ReferenceBackend:
    """Replies with each task's `best` or `naive` implementation to every sample and turn.

    A conversation is matched to its task by its first user message (refine's task prompt),
    so it works under `refine_many` with any number of tasks in flight."""

    def __init__(self, tasks: Sequence[Task], which: str) -> None:
        self.name = f"scripted:{which}"
        self.chosen: dict[str, str] = {}  # task id -> implementation id replayed
        self._by_prompt: dict[str, str] = {}
        for t in tasks:
            impl = pick_reference(t, which)
            if impl is None:
                raise ValueError(
                    f"{self.name}: task {t.id} has no implementation to replay; give tasks with "
                    "implementations (the benchmark leaves such tasks out)"
                )
            self._by_prompt[task_prompt(t)] = _reply(t, impl)
            self.chosen[t.id] = impl.id

    def generate(self, messages: list[Message], n: int) -> list[str]:
        prompt = next((m["content"] for m in messages if m["role"] == "user"), "")
        reply = self._by_prompt.get(prompt)
        if reply is None:
            raise ValueError(f"{self.name} was asked about a task it was not built with")
        return [reply] * n

    def generate_batch(self, conversations: list[list[Message]], n: int) -> list[list[str]]:
        """`generate` for each conversation (what `refine_many` calls once per turn)."""
        return [self.generate(m, n) for m in conversations]
