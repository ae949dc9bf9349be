"""Backends: scripted replay, and the OpenAI client against a real local HTTP server."""

from __future__ import annotations

import pytest

from cudaperf.refine import OpenAIBackend, ScriptedBackend, make_backend, refine, scripted_from_task
from cudaperf.reward import RewardScorer
from cudaperf.tasks.io import load_sample

pytest.importorskip("openai")
pytest.importorskip("transformers")

from .openai_server import Server, generate_text  # noqa: E402

SAXPY = next(t for t in load_sample() if t.id.endswith("saxpy"))
MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "write saxpy"}]


def test_scripted_replays_in_order_and_repeats_the_last():
    b = ScriptedBackend(["a", "b"])
    assert b.generate(MSGS, 3) == ["a", "b", "b"] and b.calls == [MSGS]
    s = scripted_from_task(SAXPY)
    assert s.name == "scripted:implementations" and "```cuda" in s.replies[0]
    assert SAXPY.implementation("naive").code.strip() in s.replies[0]
    assert make_backend("scripted:implementations", task=SAXPY).replies == s.replies
    with pytest.raises(ValueError):
        make_backend("scripted:implementations")


def test_openai_backend_against_a_local_server():
    with Server() as srv:
        be = make_backend(srv.url, model="tiny-gpt2", api_key="sk-test", max_tokens=12)
        assert isinstance(be, OpenAIBackend)
        replies = be.generate(MSGS, 3)
        want = [generate_text(srv.model, MSGS, 12, srv.seed + i) for i in range(3)]
        assert replies == want and len(set(replies)) > 1
        req = srv.requests[0]
        assert req["auth"] == "Bearer sk-test"
        assert req["body"]["model"] == "tiny-gpt2" and req["body"]["n"] == 3
        assert req["body"]["messages"] == MSGS


def test_openai_backend_when_the_server_ignores_n():
    with Server() as srv:
        be = OpenAIBackend(srv.url, model="no-n", max_tokens=4)
        assert len(be.generate(MSGS, 3)) == 3 and len(srv.requests) == 3


def test_refine_through_the_server_records_format_errors(tmp_path):
    sc = RewardScorer([SAXPY], evaluator=lambda jobs: [], analyzer=lambda c: [])
    with Server() as srv:
        be = OpenAIBackend(srv.url, model="tiny-gpt2", max_tokens=8)
        res = refine(SAXPY, be, sc, turns=2, samples=2, out=tmp_path / "t.jsonl")
    assert all(s.reward.status == "format_error" for t in res.turns for s in t.samples)
    assert res.summary.stopped == "no improvement" and len(res.turns) == 2
    assert "Format error" in srv.requests[1]["body"]["messages"][-1]["content"]
