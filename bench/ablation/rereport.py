"""Rebuild every derived file of the committed bench runs from their own records, after a
change to how metrics or intervals are computed (`cudaperf.report`): nothing is run on a GPU
and no sample is scored again.

    python bench/ablation/rereport.py             # every folder under bench/results/ablation/bench
    python bench/ablation/rereport.py --root DIR  # another tree (a test's)
    python bench/ablation/rereport.py --dry-run   # the commands only

In order: each `cudaperf bench run` folder (its `run.json` beside `summary.json`) gets
`cudaperf bench report`; each comparison folder (a `summary.json` with `names` and `runs`)
gets `cudaperf bench compare` of the same runs with the same labels; each `primary.json`
and, with `--learning`, `bench/results/grpo_learning_h200.json` is written again by the
command it records (`command`). The comparisons come after the runs, since they read them.
Prints one line per command and stops at the first that fails (its output shown); `git diff
--stat` then says what moved.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOT = "bench/results/ablation/bench"
LEARNING = "bench/results/grpo_learning_h200.json"


def _json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not readable JSON ({e})") from None
    return doc if isinstance(doc, dict) else {}


def _short(path: Path) -> Path:
    """`path` from the repository's root when it lies under it (as the commands were given)."""
    try:
        return path.resolve().relative_to(REPO)
    except ValueError:
        return path


def commands(root: Path, learning: Path | None = None) -> list[list[str]]:
    """The commands that rebuild `root`'s derived files, runs before comparisons."""
    cli = [sys.executable, "-m", "cudaperf"]
    runs, cmps, prim = [], [], []
    for summary in sorted(root.rglob("summary.json")):
        folder = _short(summary.parent)
        if (folder / "run.json").is_file():
            runs.append([*cli, "bench", "report", str(folder)])
            continue
        doc = _json(summary)
        if isinstance(doc.get("runs"), list) and isinstance(doc.get("names"), list):
            labels = [x for n in doc["names"] for x in ("--label", n)]
            cmps.append([*cli, "bench", "compare", *doc["runs"], *labels, "--out", str(folder)])
    for path in [*sorted(root.rglob("primary.json")), *([learning] if learning else [])]:
        cmd = _json(path).get("command")
        if not isinstance(cmd, str) or not cmd.startswith("python "):
            raise ValueError(f"{path}: records no `command` to write it again")
        prim.append([sys.executable, *shlex.split(cmd)[1:]])
    return runs + cmps + prim


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=REPO / ROOT)
    ap.add_argument("--learning", action="store_true", help=f"also {LEARNING}")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args(argv)
    if not a.root.is_dir():
        print(f"rereport: {a.root}: no such folder", file=sys.stderr)
        return 2
    try:
        cmds = commands(a.root, REPO / LEARNING if a.learning else None)
    except ValueError as e:
        print(f"rereport: {e}", file=sys.stderr)
        return 2
    for i, cmd in enumerate(cmds, 1):
        shown = shlex.join(["python", *cmd[1:]])
        print(f"[{i}/{len(cmds)}] {shown}", flush=True)
        if a.dry_run:
            continue
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stdout[-2000:] + done.stderr[-2000:], file=sys.stderr)
            print(f"rereport: exit {done.returncode}: {shown}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
