"""bench/train_h200.sh's `pack` (what a watch call brings back of a GRPO run), run here in
bash on a run folder made here: the newest complete checkpoint, in pieces, and the rest."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pack(work: Path, out: Path) -> subprocess.CompletedProcess:
    script = (ROOT / "bench/train_h200.sh").read_text()
    start = script.index("\npack() {") + 1
    body = script[start : script.index("\n}\n", start) + 3]
    return subprocess.run(
        ["bash", "-c", f'log() {{ echo "$*"; }}\n{body}\npack'],
        env={"PATH": "/usr/bin:/bin", "W": str(work), "RUN": "r", "OUT": str(out)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_pack_brings_the_newest_complete_checkpoint_and_the_logs_set_aside(tmp_path):
    run = tmp_path / "work" / "r"
    for step, complete in ((4, True), (6, True), (8, False)):  # 8: a save cut short
        c = run / f"checkpoint-{step}"
        c.mkdir(parents=True)
        (c / "adapter_model.safetensors").write_bytes(b"w" * 100)
        (c / "optimizer.pt").write_bytes(b"o")
        if complete:
            (c / "trainer_state.json").write_text("{}")
    for name in ("steps.jsonl", "completions.jsonl", "holdout.json", "options.json"):
        (run / name).write_text("{}\n")
    (run / "after-checkpoint-4").mkdir()
    (run / "after-checkpoint-4" / "steps.jsonl").write_text('{"kind": "step", "step": 5}\n')
    done = _pack(tmp_path / "work", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    ckpt = tmp_path / "out" / "ckpt"
    assert (ckpt / "adapter_model.safetensors.part000").read_bytes() == b"w" * 100
    with tarfile.open(ckpt / "rest.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"checkpoint-6/trainer_state.json", "steps.jsonl", "options.json"} <= names
    assert "after-checkpoint-4/steps.jsonl" in names
    assert not any(n.startswith(("checkpoint-8", "checkpoint-4")) for n in names)
    assert not any(n.endswith(("optimizer.pt", "adapter_model.safetensors")) for n in names)
