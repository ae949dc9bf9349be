"""Generation backends: a small `Backend` protocol and its scripted and OpenAI implementations.

A backend turns chat messages into `n` replies. `ScriptedBackend` replays given replies (how
the loop is tested without a model); `WeakestFirstBackend` replays each task's implementations
slowest-first, one per turn (a stand-in for a model that improves every turn);
`OpenAIBackend` talks to any OpenAI-compatible server (vLLM, llama.cpp, TGI, the OpenAI API)
through the `openai` client; `HFBackend` (in `refine.hf`) runs a Hugging Face model
in-process. `make_backend` picks one from a spec string.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from cudaperf.refine.prompts import task_prompt
from cudaperf.tasks.model import Implementation, Task, TaskKind

log = logging.getLogger(__name__)

__all__ = [
    "SCRIPTED",
    "Backend",
    "OpenAIBackend",
    "ScriptedBackend",
    "WeakestFirstBackend",
    "make_backend",
    "scripted_from_task",
    "weakest_first",
]

SCRIPTED = ("scripted:implementations", "scripted:weakest-first")  # replay specs of make_backend

Message = dict[str, str]


@runtime_checkable
class Backend(Protocol):
    """Anything that writes `n` replies to a conversation."""

    name: str  # model id recorded in trajectories

    def generate(self, messages: list[Message], n: int) -> list[str]:
        """`n` independent replies (sampled) to `messages`."""
        ...


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


def _reply(task: Task, impl: Implementation) -> str:
    """An implementation wrapped like a model reply: one sentence and one fenced block."""
    tag = "cuda" if task.kind is TaskKind.C2CUDA else "python"
    return f"Implementation `{impl.id}`.\n```{tag}\n{impl.code.rstrip()}\n```"


def _by_strategies(impl: Implementation) -> tuple[int, int]:
    """Naive first, then fewer strategy tags first (a guess at slow-to-fast)."""
    return (0 if "naive" in impl.strategies or impl.id == "naive" else 1, len(impl.strategies))


def weakest_first(task: Task, gpu: str | None = None) -> list[Implementation]:
    """The task's implementations, slowest first.

    Measured: when every implementation has measurements on one GPU (`gpu`, or the GPU with
    the most measurements) for a common set of configs, they are ordered by the geometric
    mean of their median times over those configs (held-out included) — the same average the
    evaluator's geomean speedups use, so a later reply is expected to earn a higher speed
    term. Otherwise (last resort): naive first, then by number of strategy tags. Ties keep the
    task's order."""
    impls = list(task.implementations)
    gpus = Counter(m.gpu for i in impls for m in i.measurements)
    name = gpu or (gpus.most_common(1)[0][0] if gpus else None)
    times = [{m.config: m.median_us for m in i.measurements if m.gpu == name} for i in impls]
    common = set.intersection(*(set(t) for t in times)) if times else set()
    if not common:
        if len(impls) > 1:
            log.info("%s: no common measurements; ordering by strategy tags", task.id)
        return sorted(impls, key=_by_strategies)
    mean_log = {i.id: sum(math.log(t[c]) for c in common) / len(common)
                for i, t in zip(impls, times, strict=True)}  # fmt: skip
    return sorted(impls, key=lambda i: -mean_log[i.id])


def scripted_from_task(task: Task) -> ScriptedBackend:
    """Replays the task's implementations by strategy tags (naive first, most strategies
    last), `n` consecutive ones per call, each as a fenced reply."""
    impls = sorted(task.implementations, key=_by_strategies)
    if not impls:
        raise ValueError(f"task {task.id} has no implementations to replay")
    return ScriptedBackend([_reply(task, i) for i in impls], name="scripted:implementations")


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
        prompt = next((m["content"] for m in messages if m["role"] == "user"), "")
        replies = self._replies.get(prompt)
        if replies is None:
            raise ValueError(
                "scripted:weakest-first was asked about a task it was not built with; pass "
                "every task to WeakestFirstBackend(tasks)"
            )
        k = self._calls[prompt]
        self._calls[prompt] += 1
        return [replies[min(k, len(replies) - 1)]] * n

    def generate_batch(self, conversations: list[list[Message]], n: int) -> list[list[str]]:
        """`generate` for each conversation (what `refine_many` calls once per turn)."""
        return [self.generate(m, n) for m in conversations]


class OpenAIBackend:
    """Any OpenAI-compatible chat-completions server, through the `openai` client."""

    def __init__(
        self,
        base_url: str,
        model: str = "default",
        api_key: str = "EMPTY",
        temperature: float = 0.8,
        max_tokens: int = 2048,
        timeout_s: float = 600.0,
        n_per_request: bool = True,
    ) -> None:
        """`n_per_request`: ask for all `n` samples in one request (`n=`); servers that do not
        support `n` (llama.cpp) need False, which sends `n` requests."""
        try:
            import openai
        except ImportError:
            raise ImportError(
                "the OpenAI-compatible backend needs the `openai` package: pip install openai"
            ) from None
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s)
        self.name = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.n_per_request = n_per_request

    def _request(self, messages: list[Message], n: int) -> list[str]:
        resp = self.client.chat.completions.create(
            model=self.name, messages=messages, n=n, temperature=self.temperature,
            max_tokens=self.max_tokens,
        )  # fmt: skip
        return [c.message.content or "" for c in resp.choices]

    def generate(self, messages: list[Message], n: int) -> list[str]:
        if self.n_per_request:
            out = self._request(messages, n)
            if len(out) == n:
                return out
            log.info("server returned %d of %d choices; requesting one at a time", len(out), n)
            return out + [self._request(messages, 1)[0] for _ in range(n - len(out))]
        return [self._request(messages, 1)[0] for _ in range(n)]


def make_backend(
    spec: str, task: Task | None = None, tasks: Sequence[Task] = (), **options
) -> Backend:
    """A backend from a spec: `scripted:implementations` or `scripted:weakest-first` (replay
    the implementations of `task`, or of every task in `tasks`), an http(s) URL of an
    OpenAI-compatible server (`model`, `api_key`, ... in options), or a Hugging Face model
    name or path, `smollm2` being the bundled default (`gguf_file`, `device`, ... in
    options)."""
    if spec.startswith("scripted:"):
        given = [*tasks, *([task] if task is not None else [])]
        if spec not in SCRIPTED:
            raise ValueError(f"unknown scripted backend {spec!r}; use one of {', '.join(SCRIPTED)}")
        if not given:
            raise ValueError(f"{spec} replays a task's implementations: give one")
        if spec == "scripted:implementations":
            if len(given) != 1:
                raise ValueError("scripted:implementations replays one task; give exactly one")
            return scripted_from_task(given[0])
        return WeakestFirstBackend(given, **options)
    if spec.startswith(("http://", "https://")):
        return OpenAIBackend(base_url=spec, **options)
    from cudaperf.refine.hf import HFBackend

    return HFBackend(spec, **options)
