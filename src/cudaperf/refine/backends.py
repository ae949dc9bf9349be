"""Generation backends: a small `Backend` protocol and its scripted and OpenAI implementations.

A backend turns chat messages into `n` replies. `ScriptedBackend` replays given replies (how
the loop is tested without a model); `OpenAIBackend` talks to any OpenAI-compatible server
(vLLM, llama.cpp, TGI, the OpenAI API) through the `openai` client; `HFBackend` (in
`refine.hf`) runs a Hugging Face model in-process. `make_backend` picks one from a spec string.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from cudaperf.tasks.model import Task, TaskKind

log = logging.getLogger(__name__)

__all__ = ["Backend", "OpenAIBackend", "ScriptedBackend", "make_backend", "scripted_from_task"]

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


def scripted_from_task(task: Task) -> ScriptedBackend:
    """Replays the task's implementations weakest-first (naive first, most strategies last),
    each as a fenced reply — a stand-in for a model that improves every turn."""
    tag = "cuda" if task.kind is TaskKind.C2CUDA else "python"
    impls = sorted(
        task.implementations,
        key=lambda i: (0 if "naive" in i.strategies or i.id == "naive" else 1, len(i.strategies)),
    )
    if not impls:
        raise ValueError(f"task {task.id} has no implementations to replay")
    replies = [f"Implementation `{i.id}`.\n```{tag}\n{i.code.rstrip()}\n```" for i in impls]
    return ScriptedBackend(replies, name="scripted:implementations")


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


def make_backend(spec: str, task: Task | None = None, **options) -> Backend:
    """A backend from a spec: `scripted:implementations` (needs `task`), an http(s) URL of an
    OpenAI-compatible server (`model`, `api_key`, ... in options), or a Hugging Face model
    name or path (`gguf_file`, `device`, ... in options)."""
    if spec == "scripted:implementations":
        if task is None:
            raise ValueError("scripted:implementations replays a task's implementations: give one")
        return scripted_from_task(task)
    if spec.startswith(("http://", "https://")):
        return OpenAIBackend(base_url=spec, **options)
    from cudaperf.refine.hf import HFBackend

    return HFBackend(spec, **options)
