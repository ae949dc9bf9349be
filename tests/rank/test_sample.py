"""End to end on the bundled sample set (real H200 times): it runs and reports the keys.

No accuracy claim: 12 families and 26 implementations are far too few to learn from.
"""

from cudaperf.rank.metrics import evaluate
from cudaperf.rank.ranker import TrainConfig, score, train_feature_ranker
from cudaperf.tasks.io import load_sample
from tests.rank.test_metrics import KEYS


def test_train_and_eval_on_the_sample_set(tmp_path):
    tasks = load_sample()
    fams = sorted({t.family for t in tasks})
    assert len(fams) == 12
    splits = {
        f: ("test" if i % 4 == 0 else "validation" if i % 4 == 1 else "train")
        for i, f in enumerate(fams)
    }
    model = train_feature_ranker(tasks, splits, TrainConfig(resources=False), source="sample")
    assert model.training["pairs"] > 0 and set(model.training["families"]).isdisjoint(
        {f for f, s in splits.items() if s != "train"}
    )
    r = evaluate(tasks, model, splits, calibration_png=tmp_path / "cal.png")
    assert KEYS <= set(r) and r["pairs"] > 0 and 0 <= r["pairwise_accuracy"] <= 1
    assert set(r["families"]) == {f for f, s in splits.items() if s != "train"}
    t = tasks[0]
    assert 0 <= score(t, t.implementations[-1].code, model).score <= 1
