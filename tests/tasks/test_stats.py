from cudaperf.tasks.model import Task
from cudaperf.tasks.stats import normalize_code, task_stats

from .helpers import C_TASK, TORCH_TASK, c_task


def test_normalize_ignores_comments_and_whitespace():
    a = "int x = 1; // one\n/* block */ int y=2;"
    b = "int x=1;\n\n   int y = 2;  // two"
    assert normalize_code(a) == normalize_code(b)
    assert normalize_code("#include <a.h>\n# comment\nx") == "#include<a.h>x"


def test_stats_keys_and_values():
    other = c_task(id="test/c2cuda/scale2")
    tasks = [Task.model_validate(d) for d in (C_TASK, TORCH_TASK, other)]
    s = task_stats(tasks)
    assert s["tasks"] == 3
    assert s["by_kind"] == {"c2cuda": 2, "torch2cuda": 1}
    assert s["families"] == 2
    assert s["max_family_share"] == round(2 / 3, 4)
    assert s["min_configs"] == 3 and s["min_held_out_configs"] == 1
    assert s["min_implementations"] == 1
    assert s["min_distinct_strategies"] == 1
    # the copy's implementation duplicates the original's code
    assert s["duplicate_implementations"] == 1
    # C_TASK's naive is measured on 1 of 3 configs only: not counted as measured
    assert s["measured_fraction"] == 0.0


def test_measured_fraction_counts_full_coverage():
    d = c_task()
    m = d["implementations"][0]["measurements"][0]
    d["implementations"][0]["measurements"] = [dict(m, config=c["name"]) for c in d["configs"]]
    assert task_stats([Task.model_validate(d)])["measured_fraction"] == 1.0
