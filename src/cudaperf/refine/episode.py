"""The episode API: one task's conversation with the evaluator, turn by turn.

    chains = [start(task) for task in tasks]
    while live := [c for c in chains if not done(c)]:
        replies = backend.generate_batch([c.messages for c in live], n)
        records = step(live, replies, scorer, model=backend.name)

`start` opens a chain (system message and the task prompt). `step` scores the replies of one
turn for several chains in one evaluator batch, records the turn (`TurnRecord`), keeps each
chain's best sample, decides whether it stops (no valid reward, `patience` turns without
improvement, `turns` reached) and builds its next conversation from the turn's best reply and
its feedback. `done` says whether a chain has stopped; `summary` gives its `SummaryRecord`.

Both `refine_many` (inference-time refinement) and the GRPO trainer's multi-turn rollout
(`cudaperf.train.rollout`) run their turns through these functions, so a trained policy sees
exactly the conversations it will see at inference. Guaranteed: the feedback a chain's next
prompt carries comes from `render_feedback` (visible configurations only); a chain whose turn
has no valid reward keeps its conversation unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cudaperf.refine.backends import Message
from cudaperf.refine.feedback import render_feedback
from cudaperf.refine.prompts import SYSTEM, first_messages, next_messages
from cudaperf.refine.trajectory import SampleRecord, SummaryRecord, TurnRecord
from cudaperf.reward.scorer import RewardScorer, Scored
from cudaperf.tasks.model import Task
from cudaperf.tasks.reply import Extraction, extract_candidate

__all__ = [
    "Chain",
    "Rules",
    "done",
    "extract_turn",
    "resume",
    "start",
    "step",
    "summary",
    "unfinished_turns",
]


@dataclass(frozen=True)
class Rules:
    """When a chain stops and how its context is bounded."""

    turns: int = 3  # most turns per chain
    patience: int = 1  # stop after this many turns in a row without a better reward
    keep_exchanges: int = 2  # earlier (reply, feedback) exchanges kept in the next prompt
    screen_keep: int | None = None  # with a ranker: evaluate only its top k replies per turn

    def __post_init__(self) -> None:
        if self.turns < 1 or self.patience < 1 or self.keep_exchanges < 1:
            raise ValueError(
                f"turns={self.turns}, patience={self.patience}, "
                f"keep_exchanges={self.keep_exchanges}: use >= 1 each"
            )


@dataclass
class Chain:
    """One task's conversation state between turns."""

    task: Task
    messages: list[Message]  # the conversation the next turn is generated from
    turns: list[TurnRecord] = field(default_factory=list)  # every turn so far, in order
    best: tuple[int, SampleRecord] | None = None  # (turn, sample) of the best reward so far
    stale: int = 0  # turns in a row without improvement
    stopped: str = ""  # why it stopped ("" while running)


def start(task: Task, system: str = SYSTEM) -> Chain:
    """A fresh chain: the system message and the task prompt (visible configs only)."""
    return Chain(task=task, messages=first_messages(task, system))


def unfinished_turns(
    records: Sequence[TurnRecord | SummaryRecord], task_id: str, model: str
) -> list[TurnRecord]:
    """The turns of `task_id` by `model` after its last summary: an episode a stopped run did
    not finish ([] when there is none)."""
    mine = [r for r in records if r.task_id == task_id and r.model == model]
    last = max((k for k, r in enumerate(mine) if isinstance(r, SummaryRecord)), default=-1)
    return [r for r in mine[last + 1 :] if isinstance(r, TurnRecord)]


def resume(task: Task, earlier: Sequence[TurnRecord], rules: Rules, system: str = SYSTEM) -> Chain:
    """A chain continued from the turns a stopped run recorded (`unfinished_turns`): the same
    best, stopping and next-conversation decisions are replayed, so the next turn is the one
    the run would have made. Turns that do not follow from the ones before (another prompt,
    other rules, a gap) are not trusted: the chain starts afresh."""
    chain = start(task, system)
    for rec in earlier:
        if done(chain) or rec.turn != len(chain.turns) + 1 or rec.messages != chain.messages:
            return start(task, system)
        chain.turns.append(rec)
        _advance(chain, rec.turn, best_sample(list(rec.samples)), rules)
    return chain


def done(chain: Chain) -> bool:
    """Whether the chain has stopped (see `Chain.stopped` for why)."""
    return bool(chain.stopped)


def step(
    chains: Sequence[Chain],
    replies: Sequence[Sequence[str]],
    scorer: RewardScorer,
    rules: Rules = Rules(),
    model: str = "",
    extractions: Sequence[Sequence[Extraction]] | None = None,
) -> list[TurnRecord]:
    """Score one turn's replies (one list per chain) in one evaluator batch, record the turn
    in each chain and advance it; the turn records in chain order. `extractions`, when the
    caller already has them (`extract_turn`), are the replies' candidates, so no reply is
    extracted twice."""
    if len(chains) != len(replies):
        raise ValueError(f"{len(chains)} chains but {len(replies)} reply lists")
    if extractions is None:
        extractions = extract_turn(chains, replies)
    for c in chains:
        scorer.tasks.setdefault(c.task.id, c.task)
    batch = [
        (c.task, list(rs), list(ex)) for c, rs, ex in zip(chains, replies, extractions, strict=True)
    ]
    out = []
    for chain, records in zip(chains, score_turn(scorer, batch, rules.screen_keep), strict=True):
        top = best_sample(records)
        turn = len(chain.turns) + 1
        rec = TurnRecord(
            task_id=chain.task.id,
            turn=turn,
            model=model,
            messages=chain.messages,
            samples=records,
            chosen=top.index if top else None,
            best_total=top.reward.total if top else None,  # type: ignore[union-attr]
        )
        chain.turns.append(rec)
        _advance(chain, turn, top, rules)
        out.append(rec)
    return out


def extract_turn(
    chains: Sequence[Chain], replies: Sequence[Sequence[str]]
) -> list[list[Extraction]]:
    """The candidate of every reply of one turn (one list per chain), taken out once."""
    return [
        [extract_candidate(r, c.task.kind) for r in rs]
        for c, rs in zip(chains, replies, strict=True)
    ]


def score_turn(
    scorer: RewardScorer,
    batch: list[tuple[Task, list[str], list[Extraction]]],
    screen_keep: int | None,
) -> list[list[SampleRecord]]:
    """Sample records for each (task, replies, their extractions) of one turn, scored in one
    evaluator batch."""
    picks: list[tuple[Task, list[str], list[str | None], list[int]]] = []
    items: list[tuple[Task, Extraction]] = []
    for task, replies, ex in batch:
        codes = [e.code for e in ex]
        chosen = _screen(scorer, task, codes, screen_keep if screen_keep else len(replies))
        idx = [i for i in range(len(replies)) if i in chosen or codes[i] is None]
        picks.append((task, replies, codes, idx))
        items.extend((task, ex[i]) for i in idx)
    flat = iter(scorer.score_extracted(items))
    out = []
    for task, replies, codes, idx in picks:
        scored: dict[int, Scored] = {i: next(flat) for i in idx}
        out.append(
            [_record(scorer, task, i, r, codes[i], scored.get(i)) for i, r in enumerate(replies)]
        )
    return out


def _screen(scorer: RewardScorer, task: Task, codes: list[str | None], keep: int) -> set[int]:
    """Indices to evaluate: extracted candidates the ranker likes best (all without ranker)."""
    have = [i for i, c in enumerate(codes) if c is not None]
    if scorer.ranker is None or keep >= len(have):
        return set(have)
    scores = {i: scorer.rank(task, codes[i]) for i in have}  # type: ignore[arg-type]
    order = sorted(have, key=lambda i: -(scores[i].score if scores[i] else 0.0))
    return set(order[:keep])


def _record(
    scorer: RewardScorer, task: Task, i: int, reply: str, code: str | None, s: Scored | None
) -> SampleRecord:
    if s is None:
        rk = scorer.rank(task, code) if code is not None else None
        return SampleRecord(index=i, reply=reply, code=code, screened=True, rank=rk)
    return SampleRecord(
        index=i,
        reply=reply,
        code=s.extraction.code,
        rank=s.rank,
        result=s.result,
        reward=s.breakdown,
        feedback=render_feedback(s, task),
    )


def best_sample(records: list[SampleRecord]) -> SampleRecord | None:
    """The sample with the highest valid reward (None when none has one)."""
    valid = [r for r in records if r.reward is not None and r.reward.valid]
    return max(valid, key=lambda r: r.reward.total, default=None)  # type: ignore[union-attr]


def _advance(chain: Chain, turn: int, top: SampleRecord | None, rules: Rules) -> None:
    """Update the best, the stopping state and the next conversation after one turn."""
    if top is None:
        chain.stopped = "no valid reward"
        return
    if chain.best is None or top.reward.total > chain.best[1].reward.total + 1e-9:  # type: ignore[union-attr]
        chain.best, chain.stale = (turn, top), 0
    else:
        chain.stale += 1
        if chain.stale >= rules.patience:
            chain.stopped = "no improvement"
    if not chain.stopped:
        chain.messages = next_messages(
            chain.messages, top.reply, top.feedback, rules.keep_exchanges
        )
    if not chain.stopped and turn >= rules.turns:
        chain.stopped = "turns"


def summary(chain: Chain, scorer: RewardScorer, model: str = "") -> SummaryRecord:
    """The end of a chain: its best sample and why it stopped."""
    s = chain.best[1] if chain.best else None
    rw = s.reward if s else None
    return SummaryRecord(
        task_id=chain.task.id,
        model=model,
        turns=len(chain.turns),
        stopped=chain.stopped,
        best_turn=chain.best[0] if chain.best else None,
        best_index=s.index if s else None,
        best_total=rw.total if rw else None,
        best_status=rw.status if rw else None,
        best_speedup=rw.speedup if rw else None,
        best_code=s.code if s else None,
        reward_config=scorer.config.name,
        mode=s.result.mode if s and s.result else "",
    )
