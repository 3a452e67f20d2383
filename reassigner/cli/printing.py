"""CLI command groups. Each module exposes `register(app)`; `reassigner.cli` lists them."""

from __future__ import annotations

import functools
from typing import Callable

import typer

from reassigner.errors import ReassignerError


def one_line_errors(command: Callable) -> Callable:
    """A ReassignerError becomes `error: [CODE] message` on stderr and exit code 2, also when the
    command runs on an app other than `reassigner.cli`'s (tests register commands on their own)."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except ReassignerError as error:
            typer.echo(f"error: [{error.code}] {error}", err=True)
            raise typer.Exit(2) from None

    return wrapper
