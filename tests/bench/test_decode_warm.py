"""bench/decode_warm.py on the CPU with a tiny random model: every call decodes `--new` steps,
is written as it ends, and one seed gives the same tokens whatever is reserved first."""

from __future__ import annotations

import json

import pytest

from tests.script_helpers import load_script

pytest.importorskip("transformers")
warm = load_script("bench/decode_warm.py")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tests.train.helpers import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("warm"))


def _run(tiny, out, *extra):
    args = ["--model", str(tiny), "--batch", "3", "--prompt", "5", "--new", "7", "--calls", "2"]
    assert warm.main([*args, "--out", str(out), *extra]) == 0
    return json.loads(out.read_text())


def test_calls_decode_every_step_and_the_tokens_do_not_depend_on_a_reserve(tiny, tmp_path):
    a = _run(tiny, tmp_path / "a.json")
    b = _run(tiny, tmp_path / "b.json", "--reserve-gib", "0.01")
    assert [c["steps"] for c in a["calls"]] == [7, 7]  # no reply ended early
    assert all(c["ms_per_step"] > 0 for c in a["calls"])
    assert [c["tokens_sha256"] for c in a["calls"]] == [c["tokens_sha256"] for c in b["calls"]]
    assert a["calls"][0]["tokens_sha256"] != a["calls"][1]["tokens_sha256"]  # a seed a call
    assert b["reserve_gib"] == 0.01 and a["device"] == "cpu"
    for c in a["calls"]:  # 7 steps: 6 intervals between the marks of the steps
        assert len(c["steps_ms"]) == len(c["allocs_at_step"]) == 6
        assert c["step_ms_median"] > 0 and c["step_ms_max"] >= c["step_ms_p90"]
        assert c["steps_with_alloc"] == 0  # the CPU has no caching allocator to count


def test_then_batch_adds_one_call_of_another_size(tiny, tmp_path):
    doc = _run(tiny, tmp_path / "a.json", "--then-batch", "2")
    assert [c["batch"] for c in doc["calls"]] == [3, 3, 2]
    assert doc["calls"][2]["steps"] == 7 and doc["then_batch"] == 2


def test_the_step_clock_changes_no_token(tiny):
    import torch

    from cudaperf.generation import generate_ids, sampling_config
    from cudaperf.train.models import load_policy

    pol = load_policy(str(tiny))
    model = pol.model.eval()
    cfg = sampling_config(model, 0.8, 6)
    prompts = [[5, 6, 7], [8, 9, 10, 11]]
    torch.manual_seed(3)
    plain = generate_ids(model, prompts, cfg, "dynamic", pol.tokenizer.pad_token_id, (), 2)
    clock = warm.StepClock(torch.device("cpu"), lambda: {})
    torch.manual_seed(3)
    timed = warm._generate(model, prompts, cfg, pol.tokenizer.pad_token_id, 2, clock)
    assert timed == plain and len(clock.marks) == max(map(len, plain))
    assert model.generate.__func__ is type(model).generate  # put back after the call


def test_step_summary_puts_slow_steps_beside_their_allocations():
    clock = warm.StepClock(type("D", (), {"type": "cpu"})(), lambda: {})
    clock.marks = [0.0, 0.010, 0.020, 0.080, 0.090]  # the third step took 60 ms
    clock.allocs = [0, 0, 0, 4, 4]  # and made the only device allocations
    s = clock.summary()
    assert s["steps_ms"] == [10.0, 10.0, 60.0, 10.0] and s["allocs_at_step"] == [0, 0, 4, 0]
    assert s["steps_with_alloc"] == 1 and s["ms_in_alloc_steps"] == 60.0
    assert s["step_ms_median"] == 10.0 and s["step_ms_max"] == 60.0
    clock.marks, clock.allocs = [0.0], [0]
    assert clock.summary()["step_ms_median"] is None


def test_bad_arguments_are_one_line(tiny, tmp_path, capsys):
    with pytest.raises(SystemExit):
        warm.main(["--calls", "0", "--out", str(tmp_path / "x.json")])
    assert "--calls must be at least 1" in capsys.readouterr().err
    assert warm.main(["--model", str(tmp_path / "none"), "--out", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err.startswith("decode_warm: --model")
