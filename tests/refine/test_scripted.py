"""Scripted backends: every spec through make_backend, and what the choice of implementation
may read (held-out configs only where asked for)."""

from __future__ import annotations

import pytest

from cudaperf.refine.backends import make_backend
from cudaperf.refine.prompts import first_messages
from cudaperf.refine.scripted import (
    SCRIPTED,
    ReferenceBackend,
    pick_reference,
    replayable,
    weakest_first,
)
from cudaperf.tasks.io import load_sample
from tests.report.helpers import stored_speedup

SAMPLE = load_sample()
STENCIL = next(t for t in SAMPLE if t.id.endswith("stencil2d"))


@pytest.mark.parametrize("which", ["best", "naive"])
def test_make_backend_builds_the_references_from_task_or_tasks(which):
    one = make_backend(f"scripted:{which}", task=SAMPLE[0])
    many = make_backend(f"scripted:{which}", tasks=SAMPLE[:3])
    assert isinstance(one, ReferenceBackend) and one.name == f"scripted:{which}"
    assert set(many.chosen) == {t.id for t in SAMPLE[:3]}
    for t in SAMPLE[:3]:
        impl = pick_reference(t, which)
        assert many.chosen[t.id] == impl.id
        (reply,) = many.generate(first_messages(t), 1)
        assert impl.code.strip() in reply and reply.startswith("Reference implementation")


def test_unknown_or_taskless_scripted_specs_say_what_to_give():
    with pytest.raises(ValueError, match="use one of .*scripted:best, scripted:naive"):
        make_backend("scripted:fastest", task=SAMPLE[0])
    with pytest.raises(ValueError, match="give one"):
        make_backend("scripted:best")
    assert set(SCRIPTED) >= {"scripted:best", "scripted:naive", "scripted:weakest-first"}


def test_visible_only_ordering_ignores_held_out_measurements():
    # stencil2d's naive kernel is faster on the visible configs, smem_tiled on the held-out
    # one: the benchmark's best (every config, what the evaluator scores) and the visible-only
    # order (what anything feeding training must use) differ
    assert [i.id for i in weakest_first(STENCIL)] == ["naive", "smem_tiled"]
    assert [i.id for i in weakest_first(STENCIL, held_out=False)] == ["smem_tiled", "naive"]
    # a held-out time changed beyond recognition moves the default order, never the visible one
    held = {c.name for c in STENCIL.configs if c.held_out}
    slow = STENCIL.model_copy(
        update={
            "implementations": [
                i.model_copy(
                    update={
                        "measurements": [
                            m.model_copy(
                                update={
                                    "median_us": m.median_us * (1e6 if i.id == "smem_tiled" else 1)
                                }
                            )
                            if m.config in held
                            else m
                            for m in i.measurements
                        ]
                    }
                )
                for i in STENCIL.implementations
            ]
        }
    )
    assert [i.id for i in weakest_first(slow)] == ["smem_tiled", "naive"]
    assert [i.id for i in weakest_first(slow, held_out=False)] == ["smem_tiled", "naive"]


def test_a_reference_sees_prompts_without_held_out_configs_and_returns_only_code():
    be = ReferenceBackend(SAMPLE, "best")
    for t in SAMPLE:
        prompt = first_messages(t)[-1]["content"]
        assert prompt in be._by_prompt  # what it is matched on: the prompt a model gets

        def line(c):
            return f"- `{c.name}`: " + ", ".join(f"{k}={v}" for k, v in c.sizes.items())

        assert all(line(c) in prompt for c in t.visible_configs)
        assert not [c for c in t.configs if c.held_out and line(c) in prompt], t.id
        impl = t.implementation(be.chosen[t.id])
        tag = "cuda" if t.kind.value == "c2cuda" else "python"
        want = f"Reference implementation `{impl.id}`.\n```{tag}\n{impl.code.rstrip()}\n```"
        assert be.generate(first_messages(t), 1) == [want]


def test_a_reference_picks_by_the_named_gpu():
    assert pick_reference(STENCIL, "best", gpu="no such gpu").id == "smem_tiled"  # tags order
    with pytest.raises(ValueError, match="use best or naive"):
        pick_reference(STENCIL, "fastest")


# scripted:best and scripted:naive: which implementation each replays, and to whom.


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
