"""bench/ablation/rereport.py over a tree made here: two `cudaperf bench run` folders of the
sample set, their comparison and a primary.json, each rebuilt from its own records."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from cudaperf.tasks.io import load_sample
from tests.report.helpers import stored_bench
from tests.script_helpers import load_script

TASKS = load_sample()[:4]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    best = stored_bench(root / "best/ablation/train-unseen/grpo", TASKS, "scripted:best")
    naive = stored_bench(root / "naive/ablation/train-unseen/sft", TASKS, "scripted:naive")
    cmp = root / "compare/naive_vs_best/train-unseen"
    py = sys.executable
    for run in (best, naive):  # as `bench run` ends: summary.json and the report
        subprocess.run([py, "-m", "cudaperf", "bench", "report", str(run)], check=True)
    subprocess.run(
        [py, "-m", "cudaperf", "bench", "compare", str(naive), str(best)]
        + ["--label", "SFT start", "--label", "best s0", "--out", str(cmp)],
        check=True,
        capture_output=True,
    )
    prim = load_script("bench/ablation/primary.py")
    runs = ["--run", f"unified:0={best}", "--run", f"sft:0={naive}", "--b", "sft"]
    assert prim.main([*runs, "--out", str(cmp / "primary.json")]) == 0
    return root, best, naive, cmp


def test_runs_are_reported_before_the_comparisons_that_read_them(tree):
    root, best, naive, cmp = tree
    cmds = load_script("bench/ablation/rereport.py").commands(root)
    shown = [shlex.join(c[1:]) for c in cmds]
    assert shown[0] == f"-m cudaperf bench report {best}"
    assert shown[1] == f"-m cudaperf bench report {naive}"
    assert shown[2].startswith(f"-m cudaperf bench compare {naive} {best} --label 'SFT start'")
    assert shown[2].endswith(f"--label 'best s0' --out {cmp}")
    assert shown[3].startswith("bench/ablation/primary.py --run unified:0=")
    assert len(cmds) == 4 and all(c[0] == sys.executable for c in cmds)


def test_every_derived_file_is_written_again_from_the_records(tree, capsys):
    root, best, _, cmp = tree
    files = [best / "summary.json", cmp / "summary.json", cmp / "primary.json"]
    before = [json.loads(f.read_text()) for f in files]
    # as if the code that computed them had changed: only what each rebuild reads is left
    files[0].write_text("{}")
    files[1].write_text(json.dumps({k: before[1][k] for k in ("names", "runs")}))
    files[2].write_text(json.dumps({"command": before[2]["command"]}))
    rereport = load_script("bench/ablation/rereport.py")
    assert rereport.main(["--root", str(root)]) == 0
    after = [json.loads(f.read_text()) for f in files]
    assert after[0]["metrics"] == before[0]["metrics"]
    assert after[1]["metrics"] == before[1]["metrics"] and after[1]["names"] == before[1]["names"]
    assert after[2]["per_seed"] == before[2]["per_seed"]
    assert "[4/4] python bench/ablation/primary.py" in capsys.readouterr().out


def test_a_primary_file_without_its_command_and_a_missing_root_are_one_line(tmp_path, capsys):
    rereport = load_script("bench/ablation/rereport.py")
    assert rereport.main(["--root", str(tmp_path / "none")]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "x").mkdir()
    (tmp_path / "x/primary.json").write_text(json.dumps({"runs": []}))
    assert rereport.main(["--root", str(tmp_path)]) == 2
    assert "records no `command` to write it again" in capsys.readouterr().err
