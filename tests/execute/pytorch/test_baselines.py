"""torch_baselines' host cache file: a line cut by an interrupted append is skipped."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")


def test_the_baseline_cache_skips_a_cut_line_and_appends_after_it(tmp_path):
    from cudaperf.execute.pytorch.baselines import _baseline_cache
    from cudaperf.jsonl import append_lines

    path = tmp_path / "baselines.jsonl"
    good = {"key": "k1", "timing": {"median_us": 1.0}}
    path.write_text(json.dumps(good) + "\n" + '{"key": "k2", "tim')  # the interrupted append
    req = SimpleNamespace(baselines=None, baseline_cache=str(path))
    got_path, data = _baseline_cache(req)
    assert got_path == path and data == {"k1": good["timing"]}
    append_lines(path, [json.dumps({"key": "k3", "timing": {"median_us": 3.0}})], shared=True)
    assert set(_baseline_cache(req)[1]) == {"k1", "k3"}  # the cut line stays, on its own
