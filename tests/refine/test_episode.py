from __future__ import annotations

import pytest

from cudaperf.execute.types import Status
from cudaperf.refine import episode
from cudaperf.reward import RewardScorer
from cudaperf.tasks.io import load_sample
from tests.refine.helpers import result


def _scorer(task, statuses):
    seen = iter(statuses)

    def ev(jobs):
        return [result(next(seen), c.code, t.id) for t, c in jobs]

    return RewardScorer([task], evaluator=ev, analyzer=lambda code: [])


def _reply(i: int) -> str:
    return f"```cuda\n__global__ void k{i}() {{}}\n```"


def test_a_chain_advances_on_its_turns_best_reply_and_stops_at_turns():
    task = load_sample()[0]
    chain = episode.start(task)
    assert not episode.done(chain) and len(chain.messages) == 2
    scorer = _scorer(task, [Status.COMPILE_ERROR, Status.OK, Status.OK])
    rules = episode.Rules(turns=2, patience=2)
    (rec,) = episode.step([chain], [[_reply(0), _reply(1)]], scorer, rules, "m")
    assert rec.turn == 1 and rec.chosen == 1 and not episode.done(chain)
    assert chain.messages[-2]["content"] == _reply(1) and chain.messages[-1]["role"] == "user"
    episode.step([chain], [[_reply(2)]], scorer, rules, "m")
    assert chain.stopped == "turns" and chain.best[0] == 1
    s = episode.summary(chain, scorer, "m")
    assert s.turns == 2 and s.best_status == "ok"


def test_no_valid_reward_stops_and_keeps_the_conversation():
    task = load_sample()[0]
    chain = episode.start(task)
    before = list(chain.messages)
    episode.step([chain], [[_reply(0)]], _scorer(task, [Status.INFRA_ERROR]))
    assert chain.stopped == "no valid reward" and chain.messages == before
    with pytest.raises(ValueError, match="reply lists"):
        episode.step([chain], [], _scorer(task, []))
    with pytest.raises(ValueError, match=">= 1"):
        episode.Rules(turns=0)


def _count_extractions(monkeypatch) -> list[str]:
    """Every call of extract_candidate, wherever refine or reward imported it."""
    from cudaperf.refine import episode as ep
    from cudaperf.reward import scorer
    from cudaperf.tasks import reply as extract

    seen: list[str] = []
    real = extract.extract_candidate

    def counting(reply, kind):
        seen.append(reply)
        return real(reply, kind)

    for mod in (ep, scorer, extract):
        monkeypatch.setattr(mod, "extract_candidate", counting)
    return seen


def test_each_reply_is_extracted_once_on_its_way_to_a_reward(monkeypatch):
    task = load_sample()[0]
    seen = _count_extractions(monkeypatch)
    chain = episode.start(task)
    replies = [_reply(0), _reply(1), "no code"]
    (rec,) = episode.step([chain], [replies], _scorer(task, [Status.OK, Status.OK]))
    assert sorted(seen) == sorted(replies)
    assert [s.code is None for s in rec.samples] == [False, False, True]
    assert "Format error" in rec.samples[2].feedback
