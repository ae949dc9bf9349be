"""`cudaperf rank ...`: the packaged ranker is never replaced silently, bad backbones and
candidates are named, and `train` prints lines and a table, not a dict."""

from __future__ import annotations

import hashlib
import json

from cudaperf.rank.formats import default_weights_path
from cudaperf.tasks.io import save_jsonl
from tests.cli.helpers import SRC, cli, package_copy, user_error
from tests.rank.helpers import SPLITS, kernel, unroll_tasks


def _data(tmp_path):
    p = tmp_path / "tasks.jsonl"
    save_jsonl(unroll_tasks(), p)
    (tmp_path / "splits.json").write_text(json.dumps({"families": SPLITS}))
    return p


def _sha(p) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_ship_does_not_replace_the_packaged_ranker_without_force(tmp_path):
    src = package_copy(tmp_path)  # were the check broken, only the copy would be replaced
    shipped = src / default_weights_path().relative_to(SRC)
    assert shipped.is_file()
    before = _sha(shipped)
    r = cli(
        "rank",
        "train",
        "--tasks",
        _data(tmp_path),
        "--out",
        tmp_path / "m",
        "--ship",
        "--workers",
        "1",
        "--cache-dir",
        tmp_path / "c",
        src=src,
    )
    user_error(r, "--ship would replace the packaged ranker", "--force", code=2)
    assert _sha(shipped) == before and not (tmp_path / "m").exists()


def test_train_prints_lines_and_a_table_not_a_dict(tmp_path):
    p = _data(tmp_path)
    r = cli(
        "rank",
        "train",
        "--tasks",
        p,
        "--out",
        tmp_path / "m",
        "--no-resources",
        "--workers",
        "1",
        "--cache-dir",
        tmp_path / "cache",
    )
    assert r.returncode == 0, r.stderr
    assert "{'" not in r.stdout + r.stderr and "held-out families: pairs" in r.stdout
    assert "top weights" in r.stdout and "path: " in r.stdout


def test_bad_backbone_path_is_named(tmp_path):
    r = cli(
        "rank",
        "train",
        "--tasks",
        _data(tmp_path),
        "--model",
        "neural",
        "--backbone",
        tmp_path / "no-model",
        "--out",
        tmp_path / "m",
    )
    user_error(r, "--backbone", "no such file or folder", code=2)


def test_score_refuses_empty_and_garbage_candidates(tmp_path):
    p = _data(tmp_path)
    empty, junk = tmp_path / "empty.cu", tmp_path / "junk.cu"
    empty.write_text("")
    junk.write_text("this is not CUDA at all\n")
    for f in (empty, junk):
        r = cli("rank", "score", "t/fam5/0", f, "--tasks", p)
        user_error(r, str(f), "no __global__ kernel", code=2)
    good = tmp_path / "good.cu"
    good.write_text(kernel(3))
    r = cli("rank", "score", "t/fam5/0", good, "--tasks", p, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["compared"] == 3


def test_eval_checks_the_plot_before_the_work(tmp_path):
    r = cli("rank", "eval", "--tasks", _data(tmp_path), "--plot", tmp_path / "cal.svg")
    user_error(r, "--plot", ".png")


def test_calibration_plot_pair_count_matches_the_text(tmp_path):
    """The plot's title counts every measured pair (any ratio); the text names that count
    beside `pairs` (those at --min-ratio), so the two never seem to disagree."""
    p = _data(tmp_path)
    m = tmp_path / "m"
    assert (
        cli(
            "rank",
            "train",
            "--tasks",
            p,
            "--out",
            m,
            "--no-resources",
            "--workers",
            "1",
            "--no-eval",
        ).returncode
        == 0
    )
    png = tmp_path / "cal.png"
    r = cli(
        "rank",
        "eval",
        "--tasks",
        p,
        "--model",
        m,
        "--plot",
        png,
        "--workers",
        "1",
        "--min-ratio",
        "2",
    )
    assert r.returncode == 0, r.stderr
    text = dict(ln.split(": ", 1) for ln in r.stdout.splitlines() if ": " in ln)
    assert png.is_file() and int(text["calibration_pairs"]) > int(text["pairs"])
    assert text["all_pairs.pairs"] == text["calibration_pairs"]
    assert "{'" not in r.stdout  # nested blocks as lines, not dict dumps


def test_ctrl_c_stops_train_on_the_dataset_within_seconds(tmp_path):
    import time

    import pytest

    from cudaperf.tasks.io import dataset_path
    from tests.cli.helpers import interrupt, start

    if dataset_path() is None:
        pytest.skip("needs the measured dataset (data/tasks.jsonl.gz)")
    m = tmp_path / "m"
    p = start("rank", "train", "--out", m, "--workers", "2", "--cache-dir", tmp_path / "c")
    time.sleep(6)  # loading 4k tasks, then computing features in worker processes
    assert p.poll() is None, p.communicate()
    seconds, _, err = interrupt(p, limit_s=15)
    assert p.returncode == 130 and seconds < 5, (seconds, err)
    assert "Traceback" not in err and not (m / "feature_ranker.json").exists()


def test_train_names_a_bad_arch_or_device_before_any_work(tmp_path):
    tasks = _data(tmp_path)
    r = cli("rank", "train", "--tasks", tasks, "--out", tmp_path / "r", "--arch", "sm_xx")
    line = user_error(r, "unknown --arch 'sm_xx'", "sm_90", code=2)
    assert "validation error" not in r.stderr, line  # pydantic's block, not one line
    neural = ("rank", "train", "--model", "neural", "--tasks", tasks, "--out", tmp_path / "n")
    user_error(
        cli(*neural, "--device", "tpu"),
        "--device 'tpu'",
        "cpu, cuda",
        code=2,
    )
    r = cli(*neural, "--device", "cuda", CUDA_VISIBLE_DEVICES="")
    user_error(r, "--device cuda", "no GPU", "--device cpu", code=1)
    assert not (tmp_path / "n").exists()


def test_options_the_chosen_model_does_not_read_are_refused(tmp_path):
    """`--model feature --lr 1e-3` (and `--model neural --objective bt`) trained as if the
    option were not given."""
    tasks = _data(tmp_path)
    base = ("rank", "train", "--tasks", tasks, "--out", tmp_path / "r")
    r = cli(*base, "--lr", "1e-3", "--lora-r", "8")
    user_error(r, "--lr, --lora-r only apply to --model neural", code=2)
    r = cli(*base, "--model", "neural", "--objective", "bt")
    user_error(r, "--objective only apply to --model feature", code=2)
    assert not (tmp_path / "r").exists()


def test_a_candidate_of_the_other_track_is_refused(tmp_path):
    """`rank score softmax saxpy.cu` gave 0.537, exit 0: a C→CUDA kernel scored against a
    PyTorch→CUDA task's implementations (and the reverse)."""
    from cudaperf.tasks.io import load_sample

    tasks = {t.id.split("/")[-1]: t for t in load_sample()}
    cu, py = tmp_path / "k.cu", tmp_path / "m.py"
    cu.write_text(tasks["saxpy"].implementations[0].code)
    py.write_text(tasks["softmax"].implementations[0].code)
    user_error(cli("rank", "score", "softmax", cu), "is a PyTorch→CUDA task", "ModelNew", code=2)
    user_error(cli("rank", "score", "saxpy", py), "is a C→CUDA task", "a .cu kernel", code=2)
    r = cli("rank", "score", "saxpy", cu, "--json")
    assert r.returncode == 0, r.stderr


def test_non_finite_training_values_are_refused_before_training(tmp_path):
    """`--l2 nan` trained and saved a NaN ranker, then ended in a traceback from its
    held-out evaluation; `--lr inf` started a neural run."""
    p = _data(tmp_path)
    for flag, value in (("--l2", "nan"), ("--lr", "inf"), ("--epochs", "nan")):
        r = cli("rank", "train", "--tasks", p, "--out", tmp_path / "m", flag, value)
        user_error(r, f"{flag} {value}", "finite", code=2)
    assert not (tmp_path / "m").exists()


def test_a_model_or_splits_file_that_cannot_be_read_is_named_with_the_fix(tmp_path):
    """The reader's line named the file and the parse error, but not the option nor what to
    give instead."""
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    cand = tmp_path / "k.cu"
    cand.write_text(kernel())
    r = cli("rank", "score", "saxpy", cand, "--model", bad)
    user_error(r, f"--model {bad}", "cannot read the ranker model", "rank train --out", code=2)
    r = cli("rank", "eval", "--tasks", _data(tmp_path), "--splits", bad)
    user_error(r, f"--splits {bad}", "cannot read the splits file", "data build", code=2)
