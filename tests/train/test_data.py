from __future__ import annotations

import pytest

from cudaperf.tasks.reply import extract_candidate
from cudaperf.train.data import load_training_tasks, sft_rows, split_training, target_reply
from tests.train.helpers import TEST, write_task_file


def test_only_training_split_tasks_are_loaded(tmp_path):
    tasks = load_training_tasks(write_task_file(tmp_path))
    assert tasks and all(t.family not in TEST for t in tasks)


def test_a_task_file_without_training_tasks_is_a_clear_error(tmp_path):
    path = write_task_file(tmp_path, families=TEST)
    with pytest.raises(ValueError, match="training-split"):
        load_training_tasks(path)
    with pytest.raises(ValueError, match="no such task file"):
        load_training_tasks(tmp_path / "nope.jsonl")
    with pytest.raises(ValueError, match="unknown task kind"):
        load_training_tasks(write_task_file(tmp_path), kinds=("cuda",))


def test_rows_carry_refines_prompt_and_an_extractable_fastest_target(tmp_path):
    tasks = load_training_tasks(write_task_file(tmp_path))
    rows = sft_rows(tasks)
    assert len(rows) == len(tasks)
    for r, t in zip(rows, tasks, strict=True):
        assert r["prompt"][0]["role"] == "system" and r["prompt"][1]["role"] == "user"
        assert r["completion"][0]["role"] == "assistant"
        code = extract_candidate(r["completion"][0]["content"], t.kind).code
        assert code.rstrip() in {i.code.rstrip() for i in t.implementations}
    assert len(sft_rows(tasks, "all")) == sum(len(t.implementations) for t in tasks)
    reply = target_reply(tasks[0], tasks[0].implementations[0])
    assert reply.startswith("Plan:") and reply.rstrip().endswith("```")


def test_holdout_keeps_families_and_tasks_apart(tmp_path):
    tasks = load_training_tasks(write_task_file(tmp_path))
    h = split_training(tasks, val_families=1, holdout_share=0.5, seed=1)
    fit_fams = {t.family for t in h.fit}
    assert len({t.family for t in h.val_families}) == 1
    assert not fit_fams & {t.family for t in h.val_families}
    assert not {t.id for t in h.fit} & {t.id for t in h.unseen}
    assert not {t.family for t in h.unseen} & {t.family for t in h.val_families}
    assert len(h.fit) + len(h.val_families) + len(h.unseen) == len(tasks)
    assert split_training(tasks, 1, 0.5, 1).manifest() == h.manifest()  # deterministic
    n = len({t.family for t in tasks})
    with pytest.raises(ValueError, match=rf"all {n} .*give at most {n - 1} \(--val-families 0"):
        split_training(tasks, val_families=len(tasks))


def test_pairs_add_a_second_turn_row_without_held_out_configs(tmp_path):
    from cudaperf.refine.backends import weakest_first

    tasks = load_training_tasks(write_task_file(tmp_path))
    rows = sft_rows(tasks, "pairs")
    pairs = [r for r in rows if len(r["prompt"]) == 4]
    assert len(pairs) == len(tasks) and len(rows) == 2 * len(tasks)
    for r in pairs:
        task = next(t for t in tasks if t.id == r["task_id"])
        order = weakest_first(task, held_out=False)  # what training may see
        assert extract_candidate(r["prompt"][2]["content"], task.kind).code.rstrip() == (
            order[0].code.rstrip()
        )
        fb = r["prompt"][3]["content"]
        assert fb.startswith("## Result: ok") and "Time per visible config" in fb
        code = extract_candidate(r["completion"][0]["content"], task.kind).code
        assert code.rstrip() == order[-1].code.rstrip()
        text = " ".join(m["content"] for m in r["prompt"])
        for cfg in (c for c in task.configs if c.held_out):
            assert f"`{cfg.name}`" not in text
            held = {
                m.median_us
                for i in task.implementations
                for m in i.measurements
                if m.config == cfg.name
            }
            assert not any(f"{t:.1f} us" in text for t in held)
    with pytest.raises(ValueError, match="targets"):
        sft_rows(tasks, "best")


def test_the_fastest_target_and_the_pair_are_chosen_on_visible_configs_only():
    # sample stencil2d: naive is faster on the visible configs, smem_tiled on the held-out one;
    # an SFT target chosen with the held-out time would let that time steer training
    from cudaperf.tasks.io import load_sample

    stencil = next(t for t in load_sample() if t.id.endswith("stencil2d"))
    (row,) = sft_rows([stencil])
    code = extract_candidate(row["completion"][0]["content"], stencil.kind).code
    assert code.rstrip() == stencil.implementation("naive").code.rstrip()
    pair = sft_rows([stencil], "pairs")[1]  # second-turn row: weak reply, feedback, strong one
    strong = extract_candidate(pair["completion"][0]["content"], stencil.kind).code
    assert strong.rstrip() == stencil.implementation("naive").code.rstrip()
