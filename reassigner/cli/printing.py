"""Where the command line prints: `console` (stdout; piped output, as scripts and tests read it,
gets 200 columns rather than rich's 80), `err_console` (stderr: progress and hints), and the one
error printer: a `ReassignerError` is one line on stderr, `error: [CODE] message`, and exit code
2; `--debug` keeps the traceback instead. Errors go through `schemas.redaction.redact` (no secret
in any output)."""

from __future__ import annotations

import functools
import sys
from typing import Callable

import typer
from rich.console import Console

from schemas.errors import ReassignerError
from schemas.redaction import redact

ERROR_EXIT_CODE = 2

console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True)


def print_error(error: ReassignerError) -> None:
    """`error: [CODE] message` on stderr."""
    print(redact(f"error: [{error.code}] {error}"), file=sys.stderr, flush=True)


def one_line_errors(command: Callable) -> Callable:
    """A command whose ReassignerError is printed by `print_error` and exits 2, also when it runs
    on an app other than `reassigner.cli.main`'s (tests register commands on their own)."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except ReassignerError as error:
            print_error(error)
            raise typer.Exit(ERROR_EXIT_CODE) from None

    return wrapper
