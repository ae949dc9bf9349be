"""Trajectory lines as `cudaperf bench run` writes them (valid records; a turn's samples are
replies only, none scored), for tests of scripts that read run folders."""

from __future__ import annotations

from collections.abc import Sequence

from cudaperf.refine.trajectory import SampleRecord, SummaryRecord, TurnRecord


def turn_line(task_id: str, turn: int = 1, model: str = "m", replies: Sequence[str] = ()) -> str:
    rec = TurnRecord(
        task_id=task_id,
        turn=turn,
        model=model,
        messages=[],
        samples=[SampleRecord(index=i, reply=r, code=None) for i, r in enumerate(replies)],
        chosen=None,
        best_total=None,
    )
    return rec.model_dump_json() + "\n"


def summary_line(task_id: str, turns: int = 1, model: str = "m", total: float | None = None) -> str:
    rec = SummaryRecord(
        task_id=task_id,
        model=model,
        turns=turns,
        stopped="turns",
        best_turn=None,
        best_index=None,
        best_total=total,
        best_status=None,
        best_speedup=None,
        best_code=None,
        reward_config="r",
        mode="",
    )
    return rec.model_dump_json() + "\n"
