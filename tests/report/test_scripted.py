"""scripted:best and scripted:naive: which implementation each replays, and to whom."""

from __future__ import annotations

import pytest

from cudaperf.refine.prompts import first_messages
from cudaperf.report.scripted import ReferenceBackend, pick_reference, replayable
from cudaperf.tasks.io import load_sample

from .helpers import stored_speedup

SAMPLE = load_sample()


def test_best_is_the_fastest_measured_and_naive_the_naive_one():
    for task in SAMPLE:
        best, naive = pick_reference(task, "best"), pick_reference(task, "naive")
        speeds = {i.id: stored_speedup(task, i.code) for i in task.implementations}
        assert speeds[best.id] == max(speeds.values()), task.id
        assert naive.id == "naive"


def test_every_sample_of_every_turn_gets_the_tasks_reference():
    be = ReferenceBackend(SAMPLE[:3], "best")
    convs = [first_messages(t) for t in SAMPLE[:3]]
    later = [*convs[1], {"role": "assistant", "content": "x"}, {"role": "user", "content": "fb"}]
    out = be.generate_batch([*convs, later], 3)
    for t, replies in zip([*SAMPLE[:3], SAMPLE[1]], out, strict=True):
        impl = t.implementation(be.chosen[t.id])
        assert len(replies) == 3 and all(impl.code.strip() in r for r in replies)


def test_tasks_without_implementations_are_refused_and_filtered():
    bare = SAMPLE[0].model_copy(update={"implementations": []})
    assert replayable([bare, SAMPLE[1]]) == [SAMPLE[1]]
    with pytest.raises(ValueError, match="no implementation to replay"):
        ReferenceBackend([bare], "naive")
    with pytest.raises(ValueError, match="not built with"):
        ReferenceBackend([SAMPLE[1]], "best").generate(first_messages(SAMPLE[2]), 1)
