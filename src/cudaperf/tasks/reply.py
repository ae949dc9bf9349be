"""A model's reply: the candidate in it (the last complete fenced code block) and the one
form cudaperf writes replies in (`fenced`: scripted backends, SFT targets).

A reply is plain text or a chat message list (TRL passes either). The candidate is the last
complete ```lang ... ``` block whose language fits the task kind (C→CUDA: cuda/cu/cpp/c++/c;
PyTorch→CUDA: python/py) or that names no language. When there is none, `Extraction.error`
is a message the model can act on. Guaranteed: `code` is None exactly when `error` is set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cudaperf.tasks.model import TaskKind

__all__ = ["LANGS", "Extraction", "completion_text", "extract_candidate", "fenced"]

LANGS: dict[TaskKind, tuple[str, ...]] = {
    TaskKind.C2CUDA: ("cuda", "cu", "cpp", "c++", "cxx", "c"),
    TaskKind.TORCH2CUDA: ("python", "py", "python3"),
}


def fenced(kind: TaskKind, code: str) -> str:
    """`code` in the fenced block `extract_candidate` reads back for `kind` (its first tag)."""
    return f"```{LANGS[kind][0]}\n{code.rstrip()}\n```"


_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.\-]*)[^\n]*\n(.*?)^[ \t]*```", re.M | re.S)


@dataclass(frozen=True)
class Extraction:
    """The candidate code taken from a reply, or why there is none."""

    code: str | None  # the block's text (None: no usable block)
    language: str = ""  # the fence's language tag, lower case ("" when untagged)
    error: str = ""  # a format-error message for the model ("" when code was found)


def completion_text(completion: Any) -> str:
    """The text of a completion: a string, a message dict, or a list of message dicts."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, list | tuple):
        msgs = [m for m in completion if isinstance(m, dict)]
        mine = [m for m in msgs if m.get("role", "assistant") == "assistant"] or msgs
        return "\n".join(str(m.get("content") or "") for m in mine)
    raise TypeError(f"a completion must be a string or chat messages, not {type(completion)}")


def extract_candidate(reply: Any, kind: TaskKind) -> Extraction:
    """The last complete fenced block in a language that fits `kind` (or untagged)."""
    text = completion_text(reply)
    want = LANGS[kind]
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    fitting = [(lang, code) for lang, code in blocks if lang in want or not lang]
    fitting = [(lang, code) for lang, code in fitting if code.strip()]
    if fitting:
        lang, code = fitting[-1]
        return Extraction(code=code.rstrip() + "\n", language=lang)
    return Extraction(code=None, error=_format_error(text, blocks, kind))


def _format_error(text: str, blocks: list[tuple[str, str]], kind: TaskKind) -> str:
    tag = LANGS[kind][0]
    how = (
        f"Reply with the whole candidate file in one fenced block that starts with ```{tag} "
        "on its own line and ends with ``` on its own line."
    )
    if blocks:
        langs = sorted({lang or "(untagged)" for lang, _ in blocks})
        return (
            f"Format error: your code block is tagged {', '.join(langs)} and is empty or not "
            f"{tag} code. {how}"
        )
    if "```" in text:
        return f"Format error: your code block was never closed with ```. {how}"
    return f"Format error: your reply has no code block. {how}"
