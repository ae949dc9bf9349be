"""bench/ablation/restore_weights.sh in a throwaway git repository: a weights folder committed
once and removed in the next commit comes back from history into .models/DEST, checked."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "ablation" / "restore_weights.sh"
BASE = "bench/results/ablation/weights"


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin",
        "HOME": str(repo),
    }
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _commit_weights(repo: Path, name: str, files: dict[str, bytes], sums_ok: bool = True):
    """Commit `files` under weights/NAME with their SHA256SUMS, then remove them again."""
    d = repo / BASE / name
    d.mkdir(parents=True)
    lines = []
    for f, data in files.items():
        (d / f).write_bytes(data)
        digest = hashlib.sha256(data if sums_ok else data + b"x").hexdigest()
        lines.append(f"{digest}  {f}\n")
    (d / "SHA256SUMS").write_text("".join(lines))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", f"add {name}")
    _git(repo, "rm", "-rq", str(d.relative_to(repo)))
    _git(repo, "commit", "-qm", f"remove {name}")


@pytest.fixture()
def repo(tmp_path):
    if shutil.which("git") is None or shutil.which("sha256sum") is None:
        pytest.skip("needs git and sha256sum")
    r = tmp_path / "repo"
    (r / "bench" / "ablation").mkdir(parents=True)
    shutil.copy(SCRIPT, r / "bench" / "ablation" / "restore_weights.sh")
    _git(r, "init", "-q")
    _git(r, "add", "-A")
    _git(r, "commit", "-qm", "script")
    three = {f"adapter_model.safetensors.part00{i}": bytes([i]) * 100 for i in range(3)}
    _commit_weights(r, "run_ckpt15", {**three, "rest.tar.gz": b"rest15"})
    _commit_weights(
        r, "run_ckpt30", {"adapter_model.safetensors.part000": b"a", "rest.tar.gz": b"r"}
    )
    _commit_weights(r, "broken", {"rest.tar.gz": b"r"}, sums_ok=False)
    return r


def _run(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "bench/ablation/restore_weights.sh", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_checkpoint_comes_back_from_history_and_replaces_an_earlier_one(repo):
    assert _run(repo, "--list").stdout.split() == ["broken", "run_ckpt15", "run_ckpt30"]
    r = _run(repo, "run_ckpt15", "grpo_ckpt")
    assert r.returncode == 0 and "sums OK" in r.stdout, r.stderr
    dest = repo / ".models" / "grpo_ckpt"
    assert len(list(dest.glob("adapter_model.safetensors.part*"))) == 3
    assert (dest / "rest.tar.gz").read_bytes() == b"rest15"
    assert "/.models/" in (repo / ".git" / "info" / "exclude").read_text()
    r = _run(repo, "run_ckpt30", "grpo_ckpt")  # fewer parts: none of the earlier one is left
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in dest.iterdir()) == [
        "SHA256SUMS",
        "adapter_model.safetensors.part000",
        "rest.tar.gz",
    ]
    assert (dest / "adapter_model.safetensors.part000").read_bytes() == b"a"


def test_bad_names_and_bad_sums_fail_with_one_line(repo):
    for args, code, why in (
        (("nothing", "x"), 1, "no commit added"),
        (("run_ckpt30", "/tmp/x"), 2, "give a folder name"),
        (("run_ckpt30", "a/b"), 2, "give a folder name"),
        (("run_ckpt30",), 2, "usage"),
    ):
        r = _run(repo, *args)
        assert r.returncode == code and why in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (repo / ".models" / "tmp").exists()
    r = _run(repo, "broken", "b")
    assert r.returncode != 0 and "sums OK" not in r.stdout
