"""The neural ranker on the CPU with a tiny random Llama (no downloads): it learns and saves."""

import json

import numpy as np
import pytest

pytest.importorskip("peft")
pytest.importorskip("transformers")

from typer.testing import CliRunner  # noqa: E402

from cudaperf.cli import app  # noqa: E402
from cudaperf.rank.metrics import evaluate  # noqa: E402
from cudaperf.rank.neural import NeuralConfig, NeuralRanker, train_neural_ranker  # noqa: E402
from cudaperf.rank.ranker import load_ranker, score, score_many  # noqa: E402
from cudaperf.tasks.io import save_jsonl  # noqa: E402
from tests.rank.helpers import SPLITS, unroll_tasks  # noqa: E402
from tests.rank.test_metrics import KEYS  # noqa: E402
from tests.rank.tiny_lm import make_tiny_backbone  # noqa: E402


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    tasks = unroll_tasks()
    texts = [i.code for t in tasks for i in t.implementations] + [tasks[0].source]
    return make_tiny_backbone(tmp_path_factory.mktemp("tiny"), texts)


def _cfg(backbone, **kw):
    base = dict(
        backbone=str(backbone),
        max_length=160,
        batch_tasks=4,
        max_steps=16,
        lr=3e-3,
        lora_r=4,
        device="cpu",
        log_every=5,
    )
    return NeuralConfig(**{**base, **kw})


def test_loss_decreases_and_saved_model_scores_the_same(backbone, tmp_path):
    tasks = unroll_tasks()
    r = train_neural_ranker(tasks, SPLITS, _cfg(backbone), out=tmp_path / "m")
    losses = r.training["losses"]
    assert len(losses) == 16 and np.mean(losses[-4:]) < 0.6 * np.mean(losses[:4]), losses
    assert r.training["tasks"] == 8 and r.training["pairs"] == 8 * 3
    held = [t for t in tasks if t.family == "fam5"][0]
    codes = [i.code for i in held.implementations]
    u = r.strengths(held, codes)
    loaded = load_ranker(tmp_path / "m")
    assert isinstance(loaded, NeuralRanker) and loaded.id == r.id
    np.testing.assert_allclose(loaded.strengths(held, codes), u, rtol=1e-4, atol=1e-4)
    rs = score(held, codes[-1], loaded)
    assert 0 <= rs.score <= 1 and rs.compared == 3 and rs.model == r.id
    many = score_many(held, codes, loaded)
    assert [s.score for s in many] == sorted(s.score for s in many)  # u2 fastest, learnt
    rep = evaluate(tasks, loaded, SPLITS, calibration_png=tmp_path / "c.png")
    assert KEYS <= set(rep) and rep["pairs"] == 4 * 3 and rep["pairwise_accuracy"] > 0.5
    assert (tmp_path / "c.png").is_file()


def test_text_keeps_the_kernel_and_bounds_the_task(backbone):
    from cudaperf.rank.neural import _encode, load_backbone

    tok, _ = load_backbone(str(backbone))
    t = unroll_tasks()[0]
    code = t.implementations[0].code
    long_task = t.model_copy(update={"source": t.source * 50})
    ids = _encode(tok, long_task, code, 256, 0.25)
    assert len(ids) <= 256
    assert tok.decode(ids).rstrip().endswith(tok.decode(tok(code)["input_ids"]).rstrip()[-40:])


def test_config_validation():
    with pytest.raises(ValueError, match="max_steps"):
        NeuralConfig(max_steps=0)
    with pytest.raises(ValueError, match="task_fraction"):
        NeuralConfig(task_fraction=1.0)


def test_cli_train_eval_score_neural(backbone, tmp_path):
    p = tmp_path / "tasks.jsonl"
    save_jsonl(unroll_tasks(), p)
    (tmp_path / "splits.json").write_text(json.dumps({"families": SPLITS}))
    run = CliRunner().invoke
    out = tmp_path / "neural"
    r = run(
        app,
        [
            "rank",
            "train",
            "--model",
            "neural",
            "--backbone",
            str(backbone),
            "--tasks",
            str(p),
            "--out",
            str(out),
            "--max-steps",
            "4",
            "--lr",
            "3e-3",
            "--max-length",
            "128",
            "--lora-r",
            "4",
            "--device",
            "cpu",
            "--json",
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
    )
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["kind"] == "neural" and rep["steps"] == 4 and rep["heldout"]["pairs"] == 12
    r = run(
        app,
        [
            "rank",
            "eval",
            "--tasks",
            str(p),
            "--model",
            str(out),
            "--json",
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert KEYS <= set(json.loads(r.stdout))
    cand = tmp_path / "c.cu"
    cand.write_text(unroll_tasks()[0].implementations[2].code)
    r = run(
        app,
        ["rank", "score", "t/fam5/0", str(cand), "--model", str(out), "--tasks", str(p), "--json"],
    )
    assert r.exit_code == 0, r.output
    assert 0 <= json.loads(r.stdout)["score"] <= 1
    r = run(app, ["rank", "train", "--model", "neural", "--ship", "--tasks", str(p)])
    assert r.exit_code == 2 and "feature ranker only" in r.output
