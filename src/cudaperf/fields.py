"""`option`: a dataclass field that carries the help text its command-line option shows.

The option classes (`execute.EvalConfig`, `train.grpo.GrpoOptions`, `train.sft.SftOptions`)
declare each setting once, default and help together; `cli.options.field_option` builds the
`typer.Option` from the field, so the command line never retypes a default.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

__all__ = ["option"]


def option(default: Any, help: str, **kw: Any):  # noqa: A002 - `help` reads best at the fields
    """A field with `default` (a list, dict or set is copied per instance) and
    `metadata["help"]`; `kw` goes to `dataclasses.field`."""
    if isinstance(default, (list, dict, set)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)
