"""refine.pending: reply sets kept from before scoring until their turn is recorded, taken back
only for the same draw (task, turn, model, conversation, number of replies)."""

from __future__ import annotations

import json

import pytest

from cudaperf.refine.pending import Pending, draw_key

CONV = [{"role": "user", "content": "write saxpy"}]


def test_a_held_set_survives_a_new_process_and_is_taken_once(tmp_path):
    path = tmp_path / "pending.jsonl"
    key = draw_key("t", 1, "m", CONV)
    first = Pending(path)
    first.hold([(key, "t", 1, "m", ["a", "b"])])
    assert path.is_file()  # on disk before scoring starts
    again = Pending(path)  # the run was stopped while scoring
    assert len(again) == 1
    assert again.take(key, 2) == ["a", "b"]
    assert again.take(key, 2) is None  # taken once
    assert Pending(path).take(key, 2) == ["a", "b"]  # still on disk until the turn is recorded
    again.settle()
    assert not path.exists()


def test_another_draw_does_not_take_a_set(tmp_path):
    path = tmp_path / "pending.jsonl"
    key = draw_key("t", 1, "m", CONV)
    Pending(path).hold([(key, "t", 1, "m", ["a", "b"])])
    p = Pending(path)
    assert p.take(key, 3) is None  # a turn of another number of samples
    for other in (
        draw_key("u", 1, "m", CONV),
        draw_key("t", 2, "m", CONV),
        draw_key("t", 1, "m2", CONV),
        draw_key("t", 1, "m", [{"role": "user", "content": "write saxpy fast"}]),
    ):
        assert other != key and p.take(other, 2) is None
    assert p.take(key, 2) == ["a", "b"]


def test_settle_keeps_the_sets_of_other_draws(tmp_path):
    path = tmp_path / "pending.jsonl"
    k1, k2 = draw_key("t", 1, "m", CONV), draw_key("u", 1, "m", CONV)
    Pending(path).hold([(k1, "t", 1, "m", ["a"]), (k2, "u", 1, "m", ["b"])])
    p = Pending(path)
    assert p.take(k1, 1) == ["a"]
    p.settle()  # t's turn recorded; u's set waits for the chunk that runs u
    assert [json.loads(line)["key"] for line in path.read_text().splitlines()] == [k2]


def test_sets_of_turns_already_recorded_are_dropped(tmp_path):
    path = tmp_path / "pending.jsonl"
    k1, k2 = draw_key("t", 1, "m", CONV), draw_key("t", 2, "m", CONV)
    k3 = draw_key("u", 1, "m", CONV)
    sets = [(k1, "t", 1, "m", ["a"]), (k2, "t", 2, "m", ["b"]), (k3, "u", 1, "m", ["c"])]
    Pending(path).hold(sets)
    p = Pending(path)
    p.drop_stale({"t": 2})  # t's turn 1 is recorded; u is not in this call
    assert p.take(k1, 1) is None and p.take(k2, 1) == ["b"]
    assert len(p) == 1 and len(Pending(path)) == 2  # k2 stays on disk until settled


def test_a_file_that_is_not_pending_sets_is_one_named_error(tmp_path):
    path = tmp_path / "pending.jsonl"
    path.write_text('{"key": "k", "replies": ["a"]}\nnot json\n')
    with pytest.raises(ValueError, match=r"pending.jsonl:2: not a pending reply set .*delete"):
        Pending(path)
    for bad in ('{"key": "k", "replies": [1]}', '{"key": "k", "replies": "ab"}', "[1]"):
        path.write_text(bad + "\n")
        with pytest.raises(ValueError, match=r":1: not a pending reply set"):
            Pending(path)
