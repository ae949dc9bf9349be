"""`.ci/run` runs the README's test command, as the README writes it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    at = next(i for i, x in enumerate(readme) if x.startswith("# 2. set up and run the tests"))
    line = readme[at + 1]
    setup, sep, command = line.partition(" && ")
    assert setup == "bash scripts/setup.sh" and sep and "-n auto" in command, line
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8").splitlines()
    assert line in ci, f"{line!r} is not a line of .ci/run"
