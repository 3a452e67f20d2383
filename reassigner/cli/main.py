"""The `reassigner` command line, in the style of Kafka's own tools.

Each command module of `reassigner.cli` exposes `register(app)`; this file only assembles
them (imported by name, so the composition root is visible to the import linter), turns a `ReassignerError` into a one-line message on stderr with a non-zero exit code, and
keeps tracebacks for `--debug`.
"""

from __future__ import annotations

import sys

import typer

from reassigner.cli import demo, edge, local, operator, plan, run, simulate
from reassigner.cli.printing import ERROR_EXIT_CODE, print_error
from reassigner.errors import ReassignerError

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
        import click

        if isinstance(error, click.ClickException):
            error.show()
            sys.exit(error.exit_code)
        raise


if __name__ == "__main__":
    main()
