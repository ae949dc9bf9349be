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


def test_bad_arguments_are_one_line(tiny, tmp_path, capsys):
    with pytest.raises(SystemExit):
        warm.main(["--calls", "0", "--out", str(tmp_path / "x.json")])
    assert "--calls must be at least 1" in capsys.readouterr().err
    assert warm.main(["--model", str(tmp_path / "none"), "--out", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err.startswith("decode_warm: --model")
