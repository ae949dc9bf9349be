"""The one error path (cli/group.py): one line and an exit code for every user mistake, a
traceback only with --debug, readable help and output when piped."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from cudaperf.cli.common import fail
from cudaperf.cli.group import CliGroup
from tests.cli.helpers import cli, user_error


def test_user_error_is_one_line_and_debug_shows_the_traceback(tmp_path):
    bad = tmp_path / "tasks.jsonl.gz"
    bad.write_text("plain text, not gzip")
    r = cli("tasks", "list", bad)
    line = user_error(r, str(bad), "not gzip", code=2)
    assert "rename it to .jsonl" in line
    r = cli("--debug", "tasks", "list", bad)
    assert r.returncode != 0 and "Traceback" in r.stderr and "TaskFileError" in r.stderr


def test_click_usage_errors_are_one_line_too():
    user_error(cli("eval", "--implementations", "--trials", "abc"), "'--trials'", "--help", code=2)
    user_error(cli("tasks", "show"), "Missing argument", code=2)
    user_error(cli("no-such-command"), "No such command", code=2)


def test_a_sub_app_registered_later_gets_the_same_handler():
    """Other packages add `app.add_typer(x_app)` lines: their errors take the same path."""
    sub = typer.Typer()

    @sub.command("go")
    def go() -> None:
        fail("--thing 3: use 1 or 2")

    @sub.command("other")
    def other() -> None:
        pass

    root = typer.Typer(cls=CliGroup)
    root.add_typer(sub, name="later")

    @root.callback()
    def _cb() -> None:
        pass

    r = CliRunner().invoke(root, ["later", "go"])
    assert r.exit_code == 2 and r.output.strip() == "error: --thing 3: use 1 or 2"


def test_a_ctrl_c_that_a_library_wrapped_is_still_a_ctrl_c():
    """Ctrl-C inside pydantic's serializer surfaces as PydanticSerializationError: the
    command must still stop as interrupted (exit 130, one line), not with a traceback."""
    from pydantic import BaseModel, field_serializer

    class Boom(BaseModel):
        x: int = 0

        @field_serializer("x")
        def _ser(self, v):
            raise KeyboardInterrupt

    root = typer.Typer(cls=CliGroup)

    @root.command("go")
    def go() -> None:
        Boom().model_dump_json()

    @root.command("other")
    def other() -> None:
        raise RuntimeError("a real bug")

    r = CliRunner().invoke(root, ["go"])
    assert r.exit_code == 130 and "interrupted" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(root, ["other"])
    assert r.exit_code == 1 and isinstance(r.exception, RuntimeError)  # bugs are not hidden


def test_boolean_flags_show_no_bool_placeholder():
    for cmd in (["eval"], ["tasks", "list"], ["rank", "train"], ["refine"], ["data", "build"]):
        r = cli(*cmd, "--help", COLUMNS="200")
        assert r.returncode == 0, r.stderr
        assert "--json" in r.stdout or "--compile-only" in r.stdout or "--sample" in r.stdout
        assert "<bool>" not in r.stdout, cmd


def test_tables_are_not_wrapped_at_80_columns_when_piped():
    r = cli("tasks", "list")
    assert r.returncode == 0, r.stderr
    row = next(ln for ln in r.stdout.splitlines() if "sample/torch2cuda/conv2d" in ln)
    assert "smem_tiled_oc_blocked" in row and len(row) > 80  # one row, one line
    assert max(len(ln) for ln in r.stdout.splitlines()) > 80
    r = cli("tasks", "show", "saxpy")  # and nothing is padded to that width either
    assert r.returncode == 0 and max(len(ln) for ln in r.stdout.splitlines()) < 200
