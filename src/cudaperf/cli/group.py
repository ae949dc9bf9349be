"""The root command group: the one place where user errors and Ctrl-C become an exit code.

Every command (and every sub-app registered on the root app, now or later) runs inside
`CliGroup.invoke`, so one handler applies to all of them:
- `UserError` (from `common.fail`) and `TaskFileError` (a task file that cannot be read): one
  `error: ...` line on stderr, exit code 2 (or the error's own code);
- `KeyboardInterrupt` (Ctrl-C): one line saying that finished work was kept, exit code 130;
- click's usage errors (a bad option value, a missing argument): one line, exit code 2.
With `cudaperf --debug` both are re-raised, so the traceback shows. Anything else is a bug in
cudaperf and keeps its traceback.
"""

from __future__ import annotations

import sys

import typer
from rich.text import Text
from typer import _click, rich_utils  # typer vendors click: the classes it raises
from typer.core import TyperGroup, TyperOption

from cudaperf.cli.common import UserError, console
from cudaperf.tasks.io import TaskFileError

__all__ = ["CliGroup", "set_debug"]

_STATE = {"debug": False}
INTERRUPTED = 130  # the shell's code for a process ended by SIGINT


def set_debug(on: bool) -> None:
    """Show tracebacks instead of one-line errors (the root `--debug` flag)."""
    _STATE["debug"] = on


def _hide_bool_metavars(cmd: _click.Command) -> None:
    """Boolean flags take no value, so their help shows no `<bool>` placeholder."""
    for p in cmd.params:
        if isinstance(p, TyperOption) and p.is_bool_flag and p.metavar is None:
            p.metavar = ""
    make_help = cmd.get_help_option

    def help_option(ctx: _click.Context, _make=make_help):
        opt = _make(ctx)
        if opt is not None and opt.metavar is None:
            opt.metavar = ""
        return opt

    cmd.get_help_option = help_option  # type: ignore[method-assign]
    for sub in getattr(cmd, "commands", {}).values():
        _hide_bool_metavars(sub)


class CliGroup(TyperGroup):
    """A TyperGroup whose `invoke` maps user errors and Ctrl-C to one line and an exit code."""

    def __init__(self, **attrs):
        super().__init__(**attrs)
        _hide_bool_metavars(self)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Click's usage errors (a bad option value, a missing argument) as one line too."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _click.exceptions.NoArgsIsHelpError as e:  # the help was printed
            sys.exit(e.exit_code)
        except _click.exceptions.UsageError as e:
            hint = f" (see `{e.ctx.command_path} --help`)" if e.ctx is not None else ""
            console.print(Text.assemble(("error: ", "bold red"), e.format_message() + hint))
            sys.exit(e.exit_code)
        except _click.exceptions.ClickException as e:
            rich_utils.rich_format_error(e)
            sys.exit(e.exit_code)
        except typer.Abort:  # (typer vendors click; its Abort is this one)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: _click.Context):
        try:
            return super().invoke(ctx)
        except (UserError, TaskFileError) as e:
            if _STATE["debug"]:
                raise
            console.print(Text.assemble(("error: ", "bold red"), str(e)), soft_wrap=True)
            ctx.exit(getattr(e, "code", 2))
        except Exception as e:
            from cudaperf.reward.scorer import interrupted

            if _STATE["debug"] or not interrupted(e):  # not a Ctrl-C a library wrapped
                raise
            return self._interrupted(ctx)
        except KeyboardInterrupt:
            if _STATE["debug"]:
                raise
            return self._interrupted(ctx)

    def _interrupted(self, ctx: _click.Context):
        console.print(
            "interrupted: work finished before Ctrl-C was kept (in --out where the command "
            "has one); run the same command again to resume",
            soft_wrap=True,
            highlight=False,
        )
        ctx.exit(INTERRUPTED)
