"""Generation backends: a small `Backend` protocol, the OpenAI-compatible client, and
`make_backend`, which picks one from a spec string.

A backend turns chat messages into `n` replies. `OpenAIBackend` talks to any
OpenAI-compatible server (vLLM, llama.cpp, TGI, the OpenAI API) through the `openai` client;
`HFBackend` (in `refine.hf`) runs a Hugging Face model in-process; the scripted backends
(`refine.scripted`: `scripted:implementations`, `scripted:weakest-first`, `scripted:best`,
`scripted:naive`) replay a task's own implementations. The scripted names are re-exported
here for the callers that import them from this module.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from cudaperf.refine.prompts import Message
from cudaperf.refine.scripted import (
    REFERENCE_SPECS,
    SCRIPTED,
    ReferenceBackend,
    ScriptedBackend,
    WeakestFirstBackend,
    make_scripted,
    scripted_from_task,
    weakest_first,
)
from cudaperf.tasks.model import Task

log = logging.getLogger(__name__)

__all__ = [
    "REFERENCE_SPECS",
    "SCRIPTED",
    "Backend",
    "Message",
    "OpenAIBackend",
    "ReferenceBackend",
    "ScriptedBackend",
    "WeakestFirstBackend",
    "make_backend",
    "scripted_from_task",
    "weakest_first",
]


@runtime_checkable
class Backend(Protocol):
    """Anything that writes `n` replies to a conversation."""

    name: str  # model id recorded in trajectories

    def generate(self, messages: list[Message], n: int) -> list[str]:
        """`n` independent replies (sampled) to `messages`."""
        ...


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
            model=self.name,
            messages=messages,
            n=n,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
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
    """A backend from a spec: a scripted one (`refine.scripted.SCRIPTED`:
    `scripted:implementations`, `scripted:weakest-first`, `scripted:best`, `scripted:naive`;
    they replay the implementations of `task`, or of every task in `tasks`; `gpu` in options
    picks whose measurements order them), an http(s) URL of an OpenAI-compatible server
    (`model`, `api_key`, ... in options), or a Hugging Face model name or path, `smollm2`
    being the bundled default (`gguf_file`, `device`, ... in options). `scripted:best`
    replays test-family implementations on test-family tasks: a benchmark reference only,
    never a source of training data (`refine.scripted`'s module doc)."""
    if spec.startswith("scripted:"):
        return make_scripted(spec, [*tasks, *([task] if task is not None else [])], **options)
    if spec.startswith(("http://", "https://")):
        return OpenAIBackend(base_url=spec, **options)
    from cudaperf.refine.hf import HFBackend

    return HFBackend(spec, **options)
