"""Every `cudaperf ...` command the tracked Markdown files write names a command and options
that exist: a renamed or removed option fails here instead of in a reader's terminal."""

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import typer

from cudaperf.cli import app

ROOT = Path(__file__).resolve().parents[1]
_CALL = re.compile(r"(?:^|[\s;&|(`$])(?:\S*/)?cudaperf ((?:[a-z-]+)(?: .*)?)$")


def _commands(text: str) -> list[str]:
    """The `cudaperf` command lines of a Markdown text: in code blocks, and in inline code."""
    lines, block = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            block = not block
        elif block:
            lines.append(line)
        else:
            lines += re.findall(r"`([^`]*cudaperf [^`]*)`", line)
    out = []
    for line in lines:
        m = _CALL.search(line.split(" #")[0])
        if m:  # the command alone: not what a shell chains after it, nor a continuation mark
            cut = re.split(r"&&|\|\||[|;`]", m.group(1))[0]  # ` ends inline code in a block
            out.append(cut.rstrip(" \\"))
    return out


def problems(command: str) -> list[str]:
    """What is wrong with `cudaperf COMMAND`: an unknown subcommand or option ([] if none)."""
    cmd = typer.main.get_command(app)
    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    while tokens and hasattr(cmd, "commands"):
        if tokens[0].startswith("--"):  # the top-level options (--debug) come first
            if tokens[0] not in {o for p in cmd.params for o in p.opts + p.secondary_opts}:
                return [f"unknown top-level option {tokens[0]}"]
            tokens.pop(0)
        elif tokens[0] in cmd.commands:
            cmd = cmd.commands[tokens.pop(0)]
        elif tokens[0].isupper():  # a placeholder such as COMMAND: prose, not a call
            return []
        else:
            return [f"no subcommand {tokens[0]!r} (has {', '.join(sorted(cmd.commands))})"]
    if hasattr(cmd, "commands"):  # a group named in prose ("`cudaperf bench`")
        return []
    known = {o for p in cmd.params for o in p.opts + p.secondary_opts} | {"--help"}
    return [
        f"{cmd.name}: no option {t.split('=')[0]}"
        for t in tokens
        if t.startswith("--") and t.split("=")[0] not in known
    ]


def _markdown_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    if not listed:
        pytest.skip("not a git checkout: no tracked Markdown files to read")
    return [ROOT / f for f in listed]


def test_the_check_finds_what_it_is_for():
    assert problems("bench run --suite heldout --samples 4") == []
    assert problems("bench run --no-such-option 1") == ["run: no option --no-such-option"]
    assert problems("bench runn --suite heldout")[0].startswith("no subcommand 'runn'")
    assert problems("--debug eval k.cu --task saxpy") == []
    assert problems("bench") == []
    assert _commands(
        "run `cudaperf eval k.cu --task saxpy` and\n```bash\ncudaperf report r \\\n```"
    ) == [
        "eval k.cu --task saxpy",
        "report r",
    ]


def test_every_documented_command_exists_with_its_options():
    found, wrong = 0, []
    for path in _markdown_files():
        for command in _commands(path.read_text(encoding="utf-8")):
            found += 1
            wrong += [
                f"{path.relative_to(ROOT)}: cudaperf {command}: {p}" for p in problems(command)
            ]
    assert found >= 50, found  # the README alone writes more: the reader above lost them
    assert not wrong, "\n".join(wrong)
