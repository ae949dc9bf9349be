"""Scripted backends: replies taken from a task's own implementations, not from a model.

- `ScriptedBackend`: replays given replies in order (how the loop is tested without a model).
- `scripted:implementations` (`scripted_from_task`): one task's implementations by strategy
  tags, `n` consecutive ones per call.
- `scripted:weakest-first` (`WeakestFirstBackend`): each task's implementations slowest-first
  (`weakest_first`), one per turn: a stand-in for a model that improves every turn.
- `scripted:best` / `scripted:naive` (`ReferenceBackend`): every sample of every turn gets one
  fixed implementation of the task (`pick_reference`), so a benchmark of them measures the
  task set and the evaluator rather than a model: `best` is the fastest known implementation
  (an upper reference), `naive` the naive one (a lower reference).

What they see, and what they must never be used for:

- They are built from the whole `Task`, but what they return is only an implementation's
  code; prompts come from `refine.prompts`, which never shows held-out configs.
- The choice of implementation reads the task's stored measurements, held-out configs
  included by default (`weakest_first(..., held_out=True)`): the evaluator scores a
  candidate on every config, so the fastest over every config is the right upper reference
  for a benchmark. It is a reference, not a decision of anything being evaluated or trained.
- On the test families (`bench --suite heldout`) they replay test-family implementations.
  That is what an upper/lower reference of those tasks is, and it is allowed only as a
  benchmark reference: their replies and trajectories must never become training data, a
  training target, a prompt, feedback or any choice made for training (a trajectory they
  wrote carries their `name`, `scripted:*`, so it can be told apart). Code that picks
  training targets from implementations should call `weakest_first(task, held_out=False)`,
  which orders by the visible configs only.

Tasks without implementations (KernelBench, PolyBench) cannot be replayed: `replayable`
says which can.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence

from cudaperf.refine.prompts import Message, task_prompt
from cudaperf.tasks.model import Implementation, Task
from cudaperf.tasks.reply import fenced

log = logging.getLogger(__name__)

__all__ = [
    "REFERENCE_SPECS",
    "SCRIPTED",
    "ReferenceBackend",
    "ScriptedBackend",
    "WeakestFirstBackend",
    "make_scripted",
    "pick_reference",
    "replayable",
    "scripted_from_task",
    "weakest_first",
]

REFERENCE_SPECS = ("scripted:best", "scripted:naive")  # one fixed implementation per task
SCRIPTED = ("scripted:implementations", "scripted:weakest-first", *REFERENCE_SPECS)


class ScriptedBackend:
    """Replays `replies` in order, `n` per call; the last one repeats once they run out."""

    def __init__(self, replies: Sequence[str], name: str = "scripted") -> None:
        if not replies:
            raise ValueError("ScriptedBackend needs at least one reply")
        self.replies = list(replies)
        self.name = name
        self.calls: list[list[Message]] = []  # every conversation it was given
        self._next = 0

    def generate(self, messages: list[Message], n: int) -> list[str]:
        self.calls.append(list(messages))
        out = []
        for _ in range(n):
            out.append(self.replies[min(self._next, len(self.replies) - 1)])
            self._next += 1
        return out


def _reply(task: Task, impl: Implementation, lead: str = "Implementation") -> str:
    """An implementation wrapped like a model reply: one sentence and one fenced block."""
    return f"{lead} `{impl.id}`.\n{fenced(task.kind, impl.code)}"


def _by_strategies(impl: Implementation) -> tuple[int, int]:
    """Naive first, then fewer strategy tags first (a guess at slow-to-fast)."""
    return (0 if "naive" in impl.strategies or impl.id == "naive" else 1, len(impl.strategies))


def weakest_first(
    task: Task, gpu: str | None = None, held_out: bool = True
) -> list[Implementation]:
    """The task's implementations, slowest first.

    Measured: when every implementation has measurements on one GPU (`gpu`, or the GPU with
    the most measurements) for a common set of configs, they are ordered by the geometric
    mean of their median times over those configs — the same average the evaluator's
    geomean speedups use, so a later reply is expected to earn a higher speed term. The
    configs averaged are all of them with `held_out=True` (what the evaluator scores: right
    for a benchmark reference) and only the task's visible ones with `held_out=False` (what
    anything that feeds training must use: no held-out size or time reaches the choice).
    Otherwise (last resort): naive first, then by number of strategy tags. Ties keep the
    task's order."""
    impls = list(task.implementations)
    allowed = None if held_out else {c.name for c in task.visible_configs}
    gpus = Counter(m.gpu for i in impls for m in i.measurements)
    name = gpu or (gpus.most_common(1)[0][0] if gpus else None)
    times = [
        {
            m.config: m.median_us
            for m in i.measurements
            if m.gpu == name and (allowed is None or m.config in allowed)
        }
        for i in impls
    ]
    common = set.intersection(*(set(t) for t in times)) if times else set()
    if not common:
        if len(impls) > 1:
            log.info("%s: no common measurements; ordering by strategy tags", task.id)
        return sorted(impls, key=_by_strategies)
    mean_log = {
        i.id: sum(math.log(t[c]) for c in common) / len(common)
        for i, t in zip(impls, times, strict=True)
    }
    return sorted(impls, key=lambda i: -mean_log[i.id])


def scripted_from_task(task: Task) -> ScriptedBackend:
    """Replays the task's implementations by strategy tags (naive first, most strategies
    last), `n` consecutive ones per call, each as a fenced reply."""
    impls = sorted(task.implementations, key=_by_strategies)
    if not impls:
        raise ValueError(f"task {task.id} has no implementations to replay")
    return ScriptedBackend([_reply(task, i) for i in impls], name="scripted:implementations")


def _task_of(replies: dict[str, object], messages: list[Message], name: str):
    """The replies of the task whose prompt is the conversation's first user message."""
    prompt = next((m["content"] for m in messages if m["role"] == "user"), "")
    if prompt not in replies:
        raise ValueError(
            f"{name} was asked about a task it was not built with; pass every task to it"
        )
    return prompt, replies[prompt]


class WeakestFirstBackend:
    """Replays each task's implementations slowest-first (`weakest_first`), one per turn.

    Every sample of a task's k-th call is its k-th slowest implementation (the fastest repeats
    once they run out), so best-of-n cannot skip ahead and the reward can only rise as the
    loop moves on. It does not read feedback: it shows that the evaluator and reward rank the
    dataset's kernels as their measurements do, and that the loop keeps the best. A
    conversation is matched to its task by its first user message (the task prompt)."""

    def __init__(self, tasks: Sequence[Task], gpu: str | None = None) -> None:
        self.name = "scripted:weakest-first"
        self._replies: dict[str, list[str]] = {}
        self.order: dict[str, list[str]] = {}  # task id -> implementation ids, as replayed
        for t in tasks:
            impls = weakest_first(t, gpu)
            if not impls:
                raise ValueError(f"task {t.id} has no implementations to replay")
            self._replies[task_prompt(t)] = [_reply(t, i) for i in impls]
            self.order[t.id] = [i.id for i in impls]
        self._calls: Counter[str] = Counter()

    def generate(self, messages: list[Message], n: int) -> list[str]:
        prompt, replies = _task_of(self._replies, messages, self.name)
        k = self._calls[prompt]
        self._calls[prompt] += 1
        return [replies[min(k, len(replies) - 1)]] * n

    def generate_batch(self, conversations: list[list[Message]], n: int) -> list[list[str]]:
        """`generate` for each conversation (what `refine_many` calls once per turn)."""
        return [self.generate(m, n) for m in conversations]


def pick_reference(task: Task, which: str, gpu: str | None = None) -> Implementation | None:
    """The implementation `scripted:<which>` replays for `task` (None: it has none).

    best: `weakest_first`'s last (the fastest by the geomean of its measured median times
    over every config when the implementations have common measurements, else the one with
    the most strategy tags). naive: the implementation with id or strategy tag `naive` (the
    one the evaluator times as the naive baseline), else the slowest known one."""
    if which not in ("best", "naive"):
        raise ValueError(f"unknown reference {which!r}; use best or naive")
    order = weakest_first(task, gpu)  # slowest first
    if not order:
        return None
    if which == "best":
        return order[-1]
    naive = [i for i in task.implementations if i.id == "naive" or "naive" in i.strategies]
    return naive[0] if naive else order[0]


def replayable(tasks: Sequence[Task]) -> list[Task]:
    """The tasks that have at least one implementation to replay."""
    return [t for t in tasks if t.implementations]


class ReferenceBackend:
    """Replies with each task's `best` or `naive` implementation to every sample and turn.

    A conversation is matched to its task by its first user message (refine's task prompt),
    so it works under `refine_many` with any number of tasks in flight. See the module doc
    for why its replies must never be training data."""

    def __init__(self, tasks: Sequence[Task], which: str, gpu: str | None = None) -> None:
        self.name = f"scripted:{which}"
        self.chosen: dict[str, str] = {}  # task id -> implementation id replayed
        self._by_prompt: dict[str, str] = {}
        for t in tasks:
            impl = pick_reference(t, which, gpu)
            if impl is None:
                raise ValueError(
                    f"{self.name}: task {t.id} has no implementation to replay; give tasks with "
                    "implementations (the benchmark leaves such tasks out)"
                )
            self._by_prompt[task_prompt(t)] = _reply(t, impl, "Reference implementation")
            self.chosen[t.id] = impl.id

    def generate(self, messages: list[Message], n: int) -> list[str]:
        _, reply = _task_of(self._by_prompt, messages, self.name)
        return [reply] * n

    def generate_batch(self, conversations: list[list[Message]], n: int) -> list[list[str]]:
        """`generate` for each conversation (what `refine_many` calls once per turn)."""
        return [self.generate(m, n) for m in conversations]


def make_scripted(spec: str, tasks: Sequence[Task], **options):
    """The scripted backend `spec` (one of SCRIPTED) names, over `tasks`; ValueError saying
    what to give when the spec or the tasks do not fit."""
    if spec not in SCRIPTED:
        raise ValueError(f"unknown scripted backend {spec!r}; use one of {', '.join(SCRIPTED)}")
    if not tasks:
        raise ValueError(f"{spec} replays a task's implementations: give one")
    if spec == "scripted:implementations":
        if len(tasks) != 1:
            raise ValueError("scripted:implementations replays one task; give exactly one")
        return scripted_from_task(tasks[0])
    if spec == "scripted:weakest-first":
        return WeakestFirstBackend(tasks, **options)
    return ReferenceBackend(tasks, spec.split(":", 1)[1], **options)
