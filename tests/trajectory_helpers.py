"""Trajectory lines as `cudaperf bench run` writes them (valid records, no samples), for tests
of scripts that read run folders."""

from __future__ import annotations

from cudaperf.refine.trajectory import SummaryRecord, TurnRecord


def turn_line(task_id: str, turn: int = 1, model: str = "m") -> str:
    rec = TurnRecord(
        task_id=task_id,
        turn=turn,
        model=model,
        messages=[],
        samples=[],
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
