"""`.ci/run` runs the README's test command, as the README writes it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    at = next(i for i, x in enumerate(readme) if x.startswith("# 2. set up and run the tests"))
    setup, sep, command = readme[at + 1].partition(" && ")
    assert setup == "bash scripts/setup.sh" and sep, readme[at + 1]
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8").splitlines()
    assert "bash scripts/setup.sh" in ci
    assert command in ci, f"{command!r} is not a line of .ci/run"
