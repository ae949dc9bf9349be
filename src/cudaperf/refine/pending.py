"""Replies generated but not yet scored, kept on disk while a turn is scored.

`refine_many` generates one turn's replies for every live chain, then scores them all in one
evaluator batch; a turn's records are written only when that batch ends. An interruption
(Ctrl-C, a call's time budget, a crash) while scoring used to throw the replies away, and the
resumed run generated the turn again: minutes of a GPU lease, or paid API calls, redone.

A `Pending` file holds each in-flight reply set from before scoring starts until the turn's
records are written, when it is dropped again. A resumed run takes a set instead of
generating only when it is the same draw the run was about to make: same task, turn number,
model and conversation (`key`), and as many replies as the turn asks for. Which sets survive
depends only on when the run was stopped, never on what the replies say, so a resumed turn is
one draw of the same model under the same sampling, as a regenerated one would be.

Format: JSON lines `{"key", "task_id", "turn", "model", "replies"}`; the file is rewritten whole
(temporary file, then rename) and removed once nothing is pending.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cudaperf.jsonl import replace_text
from cudaperf.refine.prompts import Message

__all__ = ["Pending", "draw_key"]


def draw_key(task_id: str, turn: int, model: str, messages: list[Message]) -> str:
    """What makes two draws the same: the task, the turn, the model and the conversation."""
    doc = json.dumps([task_id, turn, model, messages], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()


class Pending:
    """The reply sets of `path` (absent: none), taken by key, held while scored, settled after."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._waiting: dict[str, dict] = self._read()  # from an earlier, interrupted process
        self._held: dict[str, dict] = {}  # this process's sets being scored now

    def _read(self) -> dict[str, dict]:
        if not self.path.is_file():
            return {}
        out = {}
        lines = self.path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines, 1):
            try:
                doc = json.loads(line)
                key, replies = doc["key"], doc["replies"]
                if not isinstance(key, str) or not isinstance(replies, list):
                    raise TypeError("a text key and a list of replies")
                if not all(isinstance(r, str) for r in replies):
                    raise TypeError("every reply must be text")
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(
                    f"{self.path}:{n}: not a pending reply set ({e}); delete the file to "
                    "generate those replies again"
                ) from None
            out[key] = doc
        return out

    def __len__(self) -> int:
        return len(self._waiting)

    def drop_stale(self, next_turn: dict[str, int]) -> None:
        """Forget sets of a task in `next_turn` for a turn before its next one: recorded
        already (a run stopped after writing a turn's records but before `settle`)."""
        stale = [
            k
            for k, d in self._waiting.items()
            if d.get("task_id") in next_turn and d.get("turn", 0) < next_turn[d["task_id"]]
        ]
        for k in stale:
            del self._waiting[k]
        if stale:
            self._write()

    def take(self, key: str, n: int) -> list[str] | None:
        """The `n` replies pending under `key` (they stay on disk until `settle`), else None."""
        doc = self._waiting.get(key)
        if doc is None or len(doc["replies"]) != n:
            return None
        del self._waiting[key]
        self._held[key] = doc
        return list(doc["replies"])

    def hold(self, sets: list[tuple[str, str, int, str, list[str]]]) -> None:
        """Record (key, task_id, turn, model, replies) sets before they are scored."""
        for key, task_id, turn, model, replies in sets:
            self._held[key] = {
                "key": key,
                "task_id": task_id,
                "turn": turn,
                "model": model,
                "replies": replies,
            }
        self._write()

    def settle(self) -> None:
        """The held sets were scored and recorded: drop them from the file."""
        if self._held:
            self._held.clear()
            self._write()

    def _write(self) -> None:
        docs = [*self._waiting.values(), *self._held.values()]
        if not docs:
            self.path.unlink(missing_ok=True)
            return
        replace_text(self.path, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs))
