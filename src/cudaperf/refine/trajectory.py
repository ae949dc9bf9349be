"""The trajectory format: what `refine` writes, one JSON object per line, as it goes.

A file holds, per task, one `TurnRecord` line per turn (`"type": "turn"`) and then one
`SummaryRecord` line (`"type": "summary"`). A turn holds the exact prompt messages the model
saw and every sample: its reply, the extracted code, the evaluator's result, the reward
breakdown and the feedback rendered for it. Training reads (messages, reply, reward.total)
triples from it; samples with `reward.valid == false` or `screened == true` carry no reward.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from cudaperf.execute.types import ExecResult
from cudaperf.jsonl import complete_lines, open_append, read_text
from cudaperf.rank.types import RankScore
from cudaperf.reward.formula import RewardBreakdown

__all__ = [
    "SampleRecord",
    "SummaryRecord",
    "TrajectoryWriter",
    "TurnRecord",
    "finished_tasks",
    "parse_trajectory",
    "read_trajectory",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SampleRecord(_Frozen):
    """One reply of one turn."""

    index: int  # position among the turn's samples
    reply: str  # the model's full reply
    code: str | None  # the extracted candidate (None: format error)
    screened: bool = False  # the ranker screened it out before evaluation (no result/reward)
    rank: RankScore | None = None  # the ranker's opinion, when there is a ranker
    result: ExecResult | None = None  # the evaluator's result (None: format error or screened)
    reward: RewardBreakdown | None = None  # None only when screened out
    feedback: str = ""  # the feedback text rendered for this sample


class TurnRecord(_Frozen):
    """One turn: the prompt and its samples."""

    type: Literal["turn"] = "turn"
    task_id: str  # Task.id
    turn: int  # 1-based
    model: str  # Backend.name
    messages: list[dict[str, str]]  # the exact conversation the model was given
    samples: list[SampleRecord]  # in generation order
    chosen: int | None  # index of the sample the next turn continues from (None: no reward)
    best_total: float | None  # best reward of this turn (None: no valid reward)


class SummaryRecord(_Frozen):
    """The end of one task's refinement."""

    type: Literal["summary"] = "summary"
    task_id: str  # Task.id
    model: str  # Backend.name
    turns: int  # turns run
    stopped: str  # why it stopped: "turns", "no improvement", "no valid reward"
    best_turn: int | None  # 1-based turn of the best sample (None: none was valid)
    best_index: int | None  # the best sample's index in that turn
    best_total: float | None  # its reward
    best_status: str | None  # its status
    best_speedup: float | None  # the speedup its reward used
    best_code: str | None  # its code
    reward_config: str  # RewardConfig.name
    mode: str  # "full" or "compile-only" (of the best sample's result; "" when none)


class TrajectoryWriter:
    """Appends records to a JSONL file, flushing each line (a crash keeps earlier turns)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fh = open_append(self.path)  # a cut last line (an interruption) is removed first

    def write(self, record: TurnRecord | SummaryRecord) -> None:
        self._fh.write(record.model_dump_json() + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def finished_tasks(records: Iterable[TurnRecord | SummaryRecord]) -> set[str]:
    """The ids of the tasks with a summary record: a task is finished once its summary is
    written (resumes skip it, reports count it)."""
    return {r.task_id for r in records if isinstance(r, SummaryRecord)}


def read_trajectory(path: str | Path) -> list[TurnRecord | SummaryRecord]:
    """Every record of a trajectory file (gzipped when its name ends in `.gz`), validated."""
    return parse_trajectory(read_text(path), path)


def parse_trajectory(text: str, path: str | Path) -> list[TurnRecord | SummaryRecord]:
    """Every record of a trajectory's text (read from `path`, which errors name), validated."""
    out: list[TurnRecord | SummaryRecord] = []
    # a last line cut by an interruption is skipped (the writer removes it before appending)
    for n, line in enumerate(complete_lines(text), 1):
        if not line.strip():
            continue
        try:
            data: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not valid JSON ({e.msg})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}:{n}: expected a JSON object (a turn or summary record)")
        kind = data.get("type")
        record = {"turn": TurnRecord, "summary": SummaryRecord}.get(kind)  # type: ignore[arg-type]
        if record is None:
            raise ValueError(f"{path}:{n}: unknown record type {kind!r}; expected turn or summary")
        try:
            out.append(record.model_validate(data))
        except ValidationError as e:  # one line: the first bad field
            err = e.errors()[0]
            where = ".".join(map(str, err["loc"])) or "record"
            raise ValueError(f"{path}:{n}: {kind} record, field '{where}': {err['msg']}") from None
    return out
