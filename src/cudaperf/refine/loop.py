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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cudaperf.refine import episode
from cudaperf.refine.backends import Backend, Message
from cudaperf.refine.pending import Pending, draw_key
from cudaperf.refine.prompts import SYSTEM
from cudaperf.refine.trajectory import SummaryRecord, TrajectoryWriter, TurnRecord
from cudaperf.reward.scorer import RewardScorer
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


def generate(backend: Backend, convs: list[list[Message]], n: int) -> list[list[str]]:
    """`n` replies per conversation; one batched call when the backend offers one."""
    batch = getattr(backend, "generate_batch", None)
    if batch is not None and len(convs) > 1:
        return batch(convs, n)
    return [backend.generate(m, n) for m in convs]


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
    resume: Sequence[TurnRecord | SummaryRecord] = (),
    clock: dict[str, float] | None = None,
    pending: str | Path | None = None,
) -> list[RefineResult]:
    """Refine every task for up to `turns` turns in lockstep; results in the order of `tasks`.

    Each task is one `refine.episode` chain. `on_turn` is called after each task's turn,
    `on_done` when a task has stopped (its summary is then written). A crash or Ctrl-C keeps
    every turn and summary already written to `out`; passing those records back as `resume`
    (`read_trajectory(out)`) continues each unfinished episode where it stopped (its earlier
    turns are not redone or rewritten); finished episodes are refined anew. `clock`, when
    given, gets the seconds spent generating (`generate_s`) and scoring (`score_s`: the
    evaluator and the analyzer) added to it, also when the run is interrupted.

    `pending` (a file, `refine.pending`): each turn's replies are written there before they
    are scored and dropped once the turn is recorded, so a run stopped while scoring keeps
    them; a resumed run scores the ones of the draw it is about to make instead of
    generating them again (`clock["reused_sets"]` counts them)."""
    if turns < 1 or samples < 1 or patience < 1:
        raise ValueError(f"turns={turns}, samples={samples}, patience={patience}: use >= 1 each")
    if len({t.id for t in tasks}) != len(tasks):
        raise ValueError("refine_many: task ids must be unique")
    rules = episode.Rules(
        turns=turns, patience=patience, keep_exchanges=keep_exchanges, screen_keep=screen_keep
    )
    held = Pending(pending) if pending is not None else None
    writer = TrajectoryWriter(out) if out is not None else None
    chains = [
        episode.resume(t, episode.unfinished_turns(resume, t.id, backend.name), rules, system)
        for t in tasks
    ]
    results = [RefineResult(t.id, turns=list(c.turns)) for t, c in zip(tasks, chains, strict=True)]
    if held is not None:
        held.drop_stale({c.task.id: len(c.turns) + 1 for c in chains})
    try:
        for c, res in zip(chains, results, strict=True):
            if episode.done(c):  # every turn was made before the stop; only the summary is due
                _finish(c, res, backend, scorer, writer, on_done)
        while live := [i for i, c in enumerate(chains) if not episode.done(c)]:
            t0 = time.perf_counter()
            try:
                replies = _replies(backend, [chains[i] for i in live], samples, held, clock)
            finally:
                t1 = time.perf_counter()
                _tick(clock, "generate_s", t1 - t0)
            try:
                recs = episode.step([chains[i] for i in live], replies, scorer, rules, backend.name)
            finally:
                _tick(clock, "score_s", time.perf_counter() - t1)
            for i, rec in zip(live, recs, strict=True):
                results[i].turns.append(rec)
                if writer:
                    writer.write(rec)
                if on_turn:
                    on_turn(rec)
                if episode.done(chains[i]):
                    _finish(chains[i], results[i], backend, scorer, writer, on_done)
            if held is not None:
                held.settle()
    finally:
        if writer:
            writer.close()
    return results


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
    resume: Sequence[TurnRecord | SummaryRecord] = (),
    pending: str | Path | None = None,
) -> RefineResult:
    """Refine one task for up to `turns` turns of `samples` replies each; see the module doc.

    `scorer` should analyse every candidate (`analyze="always"`) so feedback can show
    structural findings. `on_turn` is called after each turn (CLI progress)."""
    (res,) = refine_many(
        [task],
        backend,
        scorer,
        turns=turns,
        samples=samples,
        screen_keep=screen_keep,
        patience=patience,
        out=out,
        on_turn=on_turn,
        system=system,
        keep_exchanges=keep_exchanges,
        resume=resume,
        pending=pending,
    )
    return res


def _replies(
    backend: Backend,
    chains: list[episode.Chain],
    samples: int,
    held: Pending | None,
    clock: dict[str, float] | None,
) -> list[list[str]]:
    """`samples` replies for each chain's next turn: the pending ones of the same draw when
    `held` has them, the rest generated (in one call) and held before they are scored."""
    if held is None:
        return generate(backend, [c.messages for c in chains], samples)
    turns = [len(c.turns) + 1 for c in chains]  # the turn each chain draws now
    keys = [
        draw_key(c.task.id, n, backend.name, c.messages) for c, n in zip(chains, turns, strict=True)
    ]
    out = [held.take(k, samples) for k in keys]
    fresh = [j for j, r in enumerate(out) if r is None]
    if len(fresh) < len(chains):
        n = len(chains) - len(fresh)
        log.info("scoring %d task(s)' replies generated before an interruption", n)
        _tick(clock, "reused_sets", n)
    made = generate(backend, [chains[j].messages for j in fresh], samples) if fresh else []
    for j, rs in zip(fresh, made, strict=True):
        out[j] = rs
    held.hold(
        [
            (keys[j], chains[j].task.id, turns[j], backend.name, list(rs))
            for j, rs in zip(fresh, made, strict=True)
        ]
    )
    return out  # type: ignore[return-value]


def _tick(clock: dict[str, float] | None, key: str, seconds: float) -> None:
    if clock is not None:
        clock[key] = clock.get(key, 0.0) + seconds


def _finish(chain, res: RefineResult, backend: Backend, scorer, writer, on_done) -> None:
    res.summary = episode.summary(chain, scorer, backend.name)
    if writer:
        writer.write(res.summary)
    if on_done:
        on_done(res)
    log.info("refine %s: %s after %d turns", chain.task.id, chain.stopped, len(res.turns))
