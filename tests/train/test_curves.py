from __future__ import annotations

import pytest

from cudaperf.train.curves import merge_rollouts


def test_rollouts_of_several_processes_merge_by_rows():
    a = {
        "rows": 4,
        "groups": 1,
        "generate_s": 2.0,
        "eval_s": 1.0,
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "return_mean": 1.0,
        "status_share": {"ok": 1.0},
        "groups_2_correct": 1.0,
    }
    b = {"rows": 12, "groups": 3, "generate_s": 3.0, "eval_s": 0.5, "prompt_tokens": 30,
         "completion_tokens": 15, "return_mean": 0.0, "status_share": {"format_error": 1.0},
         "groups_2_correct": 0.0}  # fmt: skip
    m = merge_rollouts([a, b])
    assert m["rows"] == 16 and m["groups"] == 4 and m["processes"] == 2
    assert m["generate_s"] == 3.0 and m["eval_s"] == 1.0 and m["completion_tokens"] == 20
    assert m["return_mean"] == pytest.approx(0.25)
    assert m["status_share"] == {"ok": 0.25, "format_error": 0.75}
    assert m["groups_2_correct"] == pytest.approx(0.25)
