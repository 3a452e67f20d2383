"""The `reassigner` command line, in the style of Kafka's own tools.

Each command module of `reassigner.cli` exposes `register(app)`; this file only assembles
them (imported by name, so the composition root is visible to the import linter), turns a `ReassignerError` into a one-line message on stderr with a non-zero exit code, and
keeps tracebacks for `--debug`. A usage mistake (no command, an unknown command or flag, a
missing option, a bad number) prints click's usage line and exits 2, never a traceback: the
check is by shape (`show()` and `exit_code`), because typer 0.29 raises its vendored copy of
click's exceptions, not the installed click's (regression: every usage mistake was a traceback).
`--version` prints the installed version. Whatever it prints (errors, usage errors, the
traceback of a defect) goes through `reassigner.redaction.redact`.
"""

from __future__ import annotations

import io
import sys
import traceback

import typer

from reassigner.cli import demo, edge, local, operator, plan, run, simulate
from reassigner.cli.printing import ERROR_EXIT_CODE, print_error
from reassigner.errors import ReassignerError
from reassigner.redaction import redact

COMMAND_MODULES = (local, plan, simulate, edge, run, demo, operator)

app = typer.Typer(
    name="reassigner",
    help="Event-driven, incremental partition reassignment for Apache Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

for command_module in COMMAND_MODULES:
    command_module.register(app)


def print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"reassigner {version('kafka-reassigner')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            typer.echo("reassigner (not installed)")
        raise typer.Exit()


@app.callback()
def root(_version: bool = typer.Option(False, "--version", help="Print the version and exit.",
                                       is_eager=True, callback=print_version)) -> None:
    """Event-driven, incremental partition reassignment for Apache Kafka."""


def is_usage_error(error: BaseException) -> bool:
    """A click usage error (or `--help` for no arguments), from click or typer's copy of it."""
    return callable(getattr(error, "show", None)) and isinstance(getattr(error, "exit_code", None), int)


def main() -> None:
    debug = "--debug" in sys.argv
    if debug:
        sys.argv.remove("--debug")
    try:
        # Not standalone, so that ReassignerError gets the one-line form below; click then
        # *returns* the code of a `typer.Exit` instead of exiting with it.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code != 0:
            sys.exit(code)
    except ReassignerError as error:
        if debug:
            raise
        print_error(error)
        sys.exit(ERROR_EXIT_CODE)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except Exception as error:  # click usage errors and the like
        if type(error).__name__ == "Abort":  # Ctrl-C at a prompt, from typer's copy of click
            print("aborted", file=sys.stderr)
            sys.exit(130)
        if is_usage_error(error):
            shown = io.StringIO()
            error.show(file=shown)  # type: ignore[attr-defined]
            sys.stderr.write(redact(shown.getvalue()))  # a flag's value may be a URL with a password
            sys.exit(error.exit_code)  # type: ignore[attr-defined]
        # A defect: its traceback is kept (it is what a bug report needs), redacted.
        sys.stderr.write(redact("".join(traceback.format_exception(error))))
        sys.exit(1)


if __name__ == "__main__":
    main()
