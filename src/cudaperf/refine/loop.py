"""`refine`: the multi-turn loop — generate n, (screen), evaluate, analyse, reward, feed back.

Per turn: the backend writes `samples` replies to the conversation; candidates are extracted;
with a ranker and `screen_keep < samples`, only the ranker's top `screen_keep` are evaluated
(the rest are recorded as screened); the rest go through `RewardScorer` (evaluate, analyse,
rank, reward); the best of the turn is fed back with its feedback text and the next turn
continues from it. It stops after `turns`, or when `patience` turns in a row did not beat the
best reward so far. The best candidate over all turns is kept. Each turn is appended to the
JSONL trajectory as soon as it is done (see `refine.trajectory`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cudaperf.refine.backends import Backend
from cudaperf.refine.feedback import render_feedback
from cudaperf.refine.prompts import SYSTEM, first_messages, next_messages
from cudaperf.refine.trajectory import SampleRecord, SummaryRecord, TrajectoryWriter, TurnRecord
from cudaperf.reward.extract import extract_candidate
from cudaperf.reward.scorer import RewardScorer, Scored
from cudaperf.tasks.model import Task

log = logging.getLogger(__name__)

__all__ = ["RefineResult", "refine"]


@dataclass
class RefineResult:
    """The outcome of refining one task."""

    task_id: str  # Task.id
    turns: list[TurnRecord] = field(default_factory=list)  # every turn, in order
    summary: SummaryRecord | None = None  # the best candidate and why the loop stopped

    @property
    def best_code(self) -> str | None:
        return self.summary.best_code if self.summary else None


def _screen(scorer: RewardScorer, task: Task, codes: list[str | None], keep: int) -> set[int]:
    """Indices to evaluate: extracted candidates the ranker likes best (all without ranker)."""
    have = [i for i, c in enumerate(codes) if c is not None]
    if scorer.ranker is None or keep >= len(have):
        return set(have)
    scores = {i: scorer.rank(task, codes[i]) for i in have}  # type: ignore[arg-type]
    order = sorted(have, key=lambda i: -(scores[i].score if scores[i] else 0.0))
    return set(order[:keep])


def _turn_samples(
    scorer: RewardScorer, task: Task, replies: list[str], screen_keep: int | None
) -> tuple[list[SampleRecord], dict[int, Scored]]:
    codes = [extract_candidate(r, task.kind).code for r in replies]
    chosen = _screen(scorer, task, codes, screen_keep if screen_keep else len(replies))
    idx = [i for i in range(len(replies)) if i in chosen or codes[i] is None]
    scored = dict(zip(idx, scorer.score([(task.id, replies[i]) for i in idx]), strict=True))
    records = []
    for i, reply in enumerate(replies):
        s = scored.get(i)
        if s is None:
            rk = scorer.rank(task, codes[i]) if codes[i] is not None else None
            records.append(SampleRecord(index=i, reply=reply, code=codes[i], screened=True,
                                        rank=rk))  # fmt: skip
            continue
        records.append(SampleRecord(
            index=i, reply=reply, code=s.extraction.code, rank=s.rank, result=s.result,
            reward=s.breakdown, feedback=render_feedback(s, task),
        ))  # fmt: skip
    return records, scored


def _best(records: list[SampleRecord]) -> SampleRecord | None:
    valid = [r for r in records if r.reward is not None and r.reward.valid]
    return max(valid, key=lambda r: r.reward.total, default=None)  # type: ignore[union-attr]


def refine(
    task: Task,
    backend: Backend,
    scorer: RewardScorer,
    turns: int = 3,
    samples: int = 4,
    screen_keep: int | None = None,
    patience: int = 1,
    out: str | Path | None = None,
    on_turn: Callable[[TurnRecord], None] | None = None,
    system: str = SYSTEM,
    keep_exchanges: int = 2,
) -> RefineResult:
    """Refine one task for up to `turns` turns of `samples` replies each; see the module doc.

    `scorer` should analyse every candidate (`analyze="always"`) so feedback can show
    structural findings. `on_turn` is called after each turn (CLI progress)."""
    if turns < 1 or samples < 1 or patience < 1:
        raise ValueError(f"turns={turns}, samples={samples}, patience={patience}: use >= 1 each")
    scorer.tasks.setdefault(task.id, task)
    writer = TrajectoryWriter(out) if out is not None else None
    res = RefineResult(task.id)
    messages = first_messages(task, system)
    best: tuple[int, SampleRecord] | None = None
    stale, stopped = 0, "turns"
    try:
        for turn in range(1, turns + 1):
            replies = backend.generate(messages, samples)
            records, _ = _turn_samples(scorer, task, replies, screen_keep)
            top = _best(records)
            rec = TurnRecord(
                task_id=task.id, turn=turn, model=backend.name, messages=messages,
                samples=records, chosen=top.index if top else None,
                best_total=top.reward.total if top else None,  # type: ignore[union-attr]
            )  # fmt: skip
            res.turns.append(rec)
            if writer:
                writer.write(rec)
            if on_turn:
                on_turn(rec)
            if top is None:
                stopped = "no valid reward"
                break
            if best is None or top.reward.total > best[1].reward.total + 1e-9:  # type: ignore[union-attr]
                best, stale = (turn, top), 0
            else:
                stale += 1
                if stale >= patience:
                    stopped = "no improvement"
                    break
            messages = next_messages(messages, top.reply, top.feedback, keep_exchanges)
        res.summary = _summary(task, backend, res, best, stopped, scorer)
        if writer:
            writer.write(res.summary)
    finally:
        if writer:
            writer.close()
    log.info("refine %s: %s after %d turns", task.id, stopped, len(res.turns))
    return res


def _summary(task, backend, res, best, stopped, scorer) -> SummaryRecord:
    s = best[1] if best else None
    rw = s.reward if s else None
    return SummaryRecord(
        task_id=task.id, model=backend.name, turns=len(res.turns), stopped=stopped,
        best_turn=best[0] if best else None, best_index=s.index if s else None,
        best_total=rw.total if rw else None, best_status=rw.status if rw else None,
        best_speedup=rw.speedup if rw else None, best_code=s.code if s else None,
        reward_config=scorer.config.name, mode=s.result.mode if s and s.result else "",
    )  # fmt: skip
