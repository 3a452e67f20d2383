"""The `reassigner` command line, in the style of Kafka's own tools.

Each command module of `reassigner.cli` exposes `register(app)`; this file only assembles
them (imported by name, so the composition root is visible to the import linter) and turns
what ends a command into what the user sees, each in one line on stderr (redacted):

- a `ReassignerError`: `error: [CODE] message`, exit 2 (`--debug` keeps the traceback);
- a usage mistake (an unknown command or flag, a missing option or argument, a bad number, an
  extra argument): `error: <click's message>; see 'reassigner CMD --help'`, exit 2. The check
  is by shape (`format_message()` and `exit_code`), not by class: typer raises its vendored
  copy of click's exceptions, not the installed click's;
- `reassigner` alone, or a command group alone (`reassigner request`): the help on stdout and
  exit 2, as git exits non-zero when given no command: nothing was done (`--help`: exit 0);
- Ctrl-C or SIGTERM: the long-running commands stop themselves (exit 0); one that arrives
  while a command starts, or an error met while stopping after one, ends it with exit 0 and
  one line, never a traceback;
- a defect: its traceback (a bug report needs it), redacted, exit 1.

`--version` prints the installed version (package metadata); `--install-completion` and
`--show-completion` are typer's shell completion (bash, zsh, fish, PowerShell).
"""

from __future__ import annotations

import signal
import sys
import traceback
from typing import NoReturn

import typer

from reassigner.cli import (alerts, config, demo, edge, health, local, plan, requests, run, simulate, status_server,
                          views)
from reassigner.cli.options import StoppedBySignal, command_group, stop_requested
from reassigner.cli.printing import ERROR_EXIT_CODE, print_error
from schemas.errors import ReassignerError
from schemas.redaction import redact

COMMAND_MODULES = (local, plan, simulate, edge, run, demo, requests, config, alerts, views, status_server, health)
PROG_NAME = "reassigner"  # also under `python -m reassigner.cli`: the usage lines and completion say it
USAGE_EXIT_CODE = 2

app = command_group(
    name=PROG_NAME,
    help="Event-driven, incremental partition reassignment for Apache Kafka.",
    pretty_exceptions_enable=False,
)

for command_module in COMMAND_MODULES:
    command_module.register(app)


def print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"{PROG_NAME} {version('kafka-reassigner')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            typer.echo(f"{PROG_NAME} (not installed)")
        raise typer.Exit()


@app.callback()
def root(_version: bool = typer.Option(False, "--version", help="Print the version and exit.",
                                       is_eager=True, callback=print_version)) -> None:
    """Event-driven, incremental partition reassignment for Apache Kafka."""


def is_usage_error(error: BaseException) -> bool:
    """A click exception (a usage error, or the help for no arguments), from click or typer's copy
    of it: told by its shape, not its class (see the module doc)."""
    return callable(getattr(error, "format_message", None)) and isinstance(getattr(error, "exit_code", None), int)


def is_help_for_no_arguments(error: BaseException) -> bool:
    """click's NoArgsIsHelpError: a command group given no command (its message is the help)."""
    return type(error).__name__ == "NoArgsIsHelpError"


def compute_usage_line(error: BaseException) -> str:
    """One line for a click usage error: `error: <message>; see '<command> --help'`."""
    message = " ".join(str(error.format_message()).split()).rstrip(".")  # type: ignore[attr-defined]
    context = getattr(error, "ctx", None)
    command = getattr(context, "command_path", None) or PROG_NAME
    return f"error: {message}; see '{command} --help'"


def main() -> None:
    debug = "--debug" in sys.argv
    if debug:
        sys.argv.remove("--debug")
    try:
        # Not standalone, so that ReassignerError gets the one-line form below; click then
        # *returns* the code of a `typer.Exit` instead of exiting with it.
        code = app(prog_name=PROG_NAME, standalone_mode=False)
        if isinstance(code, int) and code != 0:
            sys.exit(code)
    except ReassignerError as error:
        if debug:
            raise
        if stop_requested.is_set():  # e.g. the cluster went away under a stopping process
            exit_stopped(f"{error.code}: {error}")
        print_error(error)
        sys.exit(ERROR_EXIT_CODE)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        sys.exit(130)
    except (StoppedBySignal, KeyboardInterrupt) as stopped:
        # A stop signal while a command was starting (its handler raised), or Ctrl-C where no
        # handler is installed (a one-shot command): nothing of ours is half done.
        if debug:
            raise
        name = stopped.args[0] if isinstance(stopped, StoppedBySignal) else signal.SIGINT.name
        print(f"stopped on {name}", file=sys.stderr)
        sys.exit(0 if isinstance(stopped, StoppedBySignal) else 130)
    except Exception as error:  # click usage errors and the like
        if type(error).__name__ == "Abort":  # Ctrl-C at a prompt, from typer's copy of click
            print("error: aborted", file=sys.stderr)
            sys.exit(130)
        if is_help_for_no_arguments(error):
            typer.echo(redact(str(error.format_message())))  # type: ignore[attr-defined]
            sys.exit(USAGE_EXIT_CODE)
        if is_usage_error(error):
            # redacted: a flag's value may be a URL with a password
            print(redact(compute_usage_line(error)), file=sys.stderr)
            sys.exit(USAGE_EXIT_CODE)
        if debug:
            raise
        if stop_requested.is_set():
            exit_stopped(f"{type(error).__name__}: {error}")
        # A defect: its traceback is kept (it is what a bug report needs), redacted.
        sys.stderr.write(redact("".join(traceback.format_exception(error))))
        sys.exit(1)


def exit_stopped(while_stopping: str) -> NoReturn:
    """A stop signal came first: what failed after it is part of stopping (one line, exit 0)."""
    print(redact(f"stopped on a signal; while stopping: {' '.join(while_stopping.split())}"), file=sys.stderr)
    sys.exit(0)


if __name__ == "__main__":
    main()
