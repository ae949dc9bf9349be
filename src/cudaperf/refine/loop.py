"""`refine` and `refine_many`: the multi-turn loop — generate n, (screen), evaluate, analyse,
reward, feed back.

Per turn: the backend writes `samples` replies to the conversation; candidates are extracted;
with a ranker and `screen_keep < samples`, only the ranker's top `screen_keep` are evaluated
(the rest are recorded as screened); the rest go through `RewardScorer` (evaluate, analyse,
rank, reward); the best of the turn is fed back with its feedback text and the next turn
continues from it. A task stops after `turns`, or when `patience` turns in a row did not beat
its best reward so far. The best candidate over all turns is kept. Each turn is appended to
the JSONL trajectory as soon as it is done (see `refine.trajectory`).

`refine_many` runs several tasks in lockstep: turn t of every task still running is generated
(in one `generate_batch` call when the backend has one) and then scored in one evaluator
batch, so compiles and GPU work of different tasks overlap. With a deterministic backend,
each task's turns and stopping are exactly what `refine` on that task alone would do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cudaperf.refine.backends import Backend, Message
from cudaperf.refine.feedback import render_feedback
from cudaperf.refine.prompts import SYSTEM, first_messages, next_messages
from cudaperf.refine.trajectory import SampleRecord, SummaryRecord, TrajectoryWriter, TurnRecord
from cudaperf.reward.extract import extract_candidate
from cudaperf.reward.scorer import RewardScorer, Scored
from cudaperf.tasks.model import Task

log = logging.getLogger(__name__)

__all__ = ["RefineResult", "refine", "refine_many"]


@dataclass
class RefineResult:
    """The outcome of refining one task."""

    task_id: str  # Task.id
    turns: list[TurnRecord] = field(default_factory=list)  # every turn, in order
    summary: SummaryRecord | None = None  # the best candidate and why the loop stopped

    @property
    def best_code(self) -> str | None:
        return self.summary.best_code if self.summary else None


@dataclass
class _Run:
    """One task's state between turns."""

    task: Task
    messages: list[Message]
    res: RefineResult
    best: tuple[int, SampleRecord] | None = None  # (turn, sample) of the best reward so far
    stale: int = 0  # turns in a row without improvement
    stopped: str = ""  # why it stopped ("" while running)


def _screen(scorer: RewardScorer, task: Task, codes: list[str | None], keep: int) -> set[int]:
    """Indices to evaluate: extracted candidates the ranker likes best (all without ranker)."""
    have = [i for i, c in enumerate(codes) if c is not None]
    if scorer.ranker is None or keep >= len(have):
        return set(have)
    scores = {i: scorer.rank(task, codes[i]) for i in have}  # type: ignore[arg-type]
    order = sorted(have, key=lambda i: -(scores[i].score if scores[i] else 0.0))
    return set(order[:keep])


def _score_turn(
    scorer: RewardScorer, batch: list[tuple[Task, list[str]]], screen_keep: int | None
) -> list[list[SampleRecord]]:
    """Sample records for each (task, replies) of one turn, scored in one evaluator batch."""
    picks: list[tuple[Task, list[str], list[str | None], list[int]]] = []
    items: list[tuple[str, str]] = []
    for task, replies in batch:
        codes = [extract_candidate(r, task.kind).code for r in replies]
        chosen = _screen(scorer, task, codes, screen_keep if screen_keep else len(replies))
        idx = [i for i in range(len(replies)) if i in chosen or codes[i] is None]
        picks.append((task, replies, codes, idx))
        items.extend((task.id, replies[i]) for i in idx)
    flat = iter(scorer.score(items))
    out = []
    for task, replies, codes, idx in picks:
        scored: dict[int, Scored] = {i: next(flat) for i in idx}
        out.append([_record(scorer, task, i, r, codes[i], scored.get(i))
                    for i, r in enumerate(replies)])  # fmt: skip
    return out


def _record(
    scorer: RewardScorer, task: Task, i: int, reply: str, code: str | None, s: Scored | None
) -> SampleRecord:
    if s is None:
        rk = scorer.rank(task, code) if code is not None else None
        return SampleRecord(index=i, reply=reply, code=code, screened=True, rank=rk)
    return SampleRecord(
        index=i, reply=reply, code=s.extraction.code, rank=s.rank, result=s.result,
        reward=s.breakdown, feedback=render_feedback(s, task),
    )  # fmt: skip


def _best(records: list[SampleRecord]) -> SampleRecord | None:
    valid = [r for r in records if r.reward is not None and r.reward.valid]
    return max(valid, key=lambda r: r.reward.total, default=None)  # type: ignore[union-attr]


def _generate(backend: Backend, convs: list[list[Message]], n: int) -> list[list[str]]:
    """`n` replies per conversation; one batched call when the backend offers one."""
    batch = getattr(backend, "generate_batch", None)
    if batch is not None and len(convs) > 1:
        return batch(convs, n)
    return [backend.generate(m, n) for m in convs]


def _advance(run: _Run, turn: int, top: SampleRecord | None, patience: int, keep: int) -> None:
    """Update the best, the stopping state and the next conversation after one turn."""
    if top is None:
        run.stopped = "no valid reward"
        return
    if run.best is None or top.reward.total > run.best[1].reward.total + 1e-9:  # type: ignore[union-attr]
        run.best, run.stale = (turn, top), 0
    else:
        run.stale += 1
        if run.stale >= patience:
            run.stopped = "no improvement"
            return
    run.messages = next_messages(run.messages, top.reply, top.feedback, keep)


def refine_many(
    tasks: Sequence[Task],
    backend: Backend,
    scorer: RewardScorer,
    turns: int = 3,
    samples: int = 4,
    screen_keep: int | None = None,
    patience: int = 1,
    out: str | Path | None = None,
    on_turn: Callable[[TurnRecord], None] | None = None,
    on_done: Callable[[RefineResult], None] | None = None,
    system: str = SYSTEM,
    keep_exchanges: int = 2,
) -> list[RefineResult]:
    """Refine every task for up to `turns` turns in lockstep; results in the order of `tasks`.

    `on_turn` is called after each task's turn, `on_done` when a task has stopped (its summary
    is then written). A crash keeps every turn and summary already written to `out`."""
    if turns < 1 or samples < 1 or patience < 1:
        raise ValueError(f"turns={turns}, samples={samples}, patience={patience}: use >= 1 each")
    if len({t.id for t in tasks}) != len(tasks):
        raise ValueError("refine_many: task ids must be unique")
    for t in tasks:
        scorer.tasks.setdefault(t.id, t)
    writer = TrajectoryWriter(out) if out is not None else None
    runs = [_Run(t, first_messages(t, system), RefineResult(t.id)) for t in tasks]
    try:
        for turn in range(1, turns + 1):
            active = [r for r in runs if not r.stopped]
            if not active:
                break
            replies = _generate(backend, [r.messages for r in active], samples)
            batch = [(r.task, rs) for r, rs in zip(active, replies, strict=True)]
            for run, records in zip(active, _score_turn(scorer, batch, screen_keep), strict=True):
                top = _best(records)
                rec = TurnRecord(
                    task_id=run.task.id, turn=turn, model=backend.name, messages=run.messages,
                    samples=records, chosen=top.index if top else None,
                    best_total=top.reward.total if top else None,  # type: ignore[union-attr]
                )  # fmt: skip
                run.res.turns.append(rec)
                if writer:
                    writer.write(rec)
                if on_turn:
                    on_turn(rec)
                _advance(run, turn, top, patience, keep_exchanges)
                if not run.stopped and turn == turns:
                    run.stopped = "turns"
                if run.stopped:
                    _finish(run, backend, scorer, writer, on_done)
    finally:
        if writer:
            writer.close()
    return [r.res for r in runs]


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
    (res,) = refine_many(
        [task], backend, scorer, turns=turns, samples=samples, screen_keep=screen_keep,
        patience=patience, out=out, on_turn=on_turn, system=system,
        keep_exchanges=keep_exchanges,
    )  # fmt: skip
    return res


def _finish(run: _Run, backend: Backend, scorer: RewardScorer, writer, on_done) -> None:
    run.res.summary = _summary(run.task, backend, run.res, run.best, run.stopped, scorer)
    if writer:
        writer.write(run.res.summary)
    if on_done:
        on_done(run.res)
    log.info("refine %s: %s after %d turns", run.task.id, run.stopped, len(run.res.turns))


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
