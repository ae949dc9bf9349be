from cudaperf.tasks.model import Task
from cudaperf.tasks.overlap import ngrams, task_overlap

from .helpers import TORCH_TASK


def _task(tid: str, source: str) -> Task:
    return Task.model_validate(dict(TORCH_TASK, id=tid, source=source))


def test_ngrams_ignore_comments_and_formatting():
    a = "x = foo(a, b)  # comment\ny = x + 1\n"
    b = "x=foo(a,b)\n\n\ny  =  x+1 // c-style comment\n"
    assert ngrams(a, 3) == ngrams(b, 3)


def test_copy_is_found_and_unrelated_is_not():
    base = TORCH_TASK["source"]
    a = [_task("a/relu", base), _task("a/other", "def f():\n    return 42 * 17 - 3\n")]
    b = [
        _task("b/copy", "# renamed copy\n" + base),
        _task("b/new", "import numpy as np\nz = np.arange(10).sum() / 7\n"),
    ]
    r = task_overlap(a, b, n=4, threshold=0.5)
    by = {p["b"]: p for p in r["top_pairs"]}
    assert by["b/copy"]["a"] == "a/relu" and by["b/copy"]["overlap"] == 1.0
    assert by["b/new"]["overlap"] < 0.2
    assert r["overlapping"] == 1 and r["overlapping_fraction"] == 0.5


def test_a_task_shorter_than_n_tokens_is_counted_not_dropped_silently():
    short = _task("b/short", "x = 1\n")  # 4 tokens
    r = task_overlap([_task("a/any", "x = 1\ny = 2\n")], [short], n=8)
    assert r["top_pairs"] == [] and r["too_short"] == 1 and r["too_short_ids"] == ["b/short"]
    assert task_overlap([short], [short], n=3)["too_short"] == 0
