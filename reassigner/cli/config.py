"""`reassigner config set KEY=VALUE` and `config get [KEY]`: the dynamic settings (the keys:
docs/configuration.md, "Dynamic settings").

`set` is a request like the others (`requests.send_request`: checked before it connects, the
verdict awaited, the same exit codes); it applies to the next decision, never to steps in flight.
`get` reads the pipeline's overrides from the state (Redis only) and shows each key's effective
value and where it comes from, as a table or with `--json` one JSON object.
"""

from __future__ import annotations

import json
from typing import Optional

import typer

from reassigner.cli.connections import connect
from reassigner.cli.options import CONNECTION_FLAGS, AsJson, SharedFlags, command_group, takes_flags
from reassigner.cli.printing import console
from reassigner.cli.requests import NoWait, Timeout, send_request

config_app = command_group(help="Dynamic settings: limits, throttles, mode.")


@config_app.command("set")
@takes_flags(*CONNECTION_FLAGS)
def config_set(
    assignment: str = typer.Argument(..., metavar="KEY=VALUE",
                                     help="e.g. reassignment.max.concurrent.partition.movements=10; KEY= resets."),
    no_wait: bool = NoWait, timeout: float = Timeout, *, flags: SharedFlags,
) -> None:
    """Change a dynamic setting; applies to the next decision, never to steps in flight."""
    from reassigner.operator.requests import build_set_config_request

    send_request(flags, build_set_config_request, assignment, wait=not no_wait, timeout=timeout)


@config_app.command("get")
@takes_flags(*CONNECTION_FLAGS)
def config_get(
    key: Optional[str] = typer.Argument(None, help="One key (default: all)."),
    as_json: bool = AsJson, *, flags: SharedFlags,
) -> None:
    """The effective value of each dynamic setting: the pipeline's override, else the default."""
    from reassigner.operator.dynamic_config import compute_effective_config, require_known_key
    from reassigner.operator.tables import print_config

    if key is not None:
        require_known_key(key, "config get")
    connected = connect(flags, need_kafka=False)
    effective = compute_effective_config(connected.load_state().config, connected.settings)
    if key is not None:
        effective = {key: effective[key]}
    if as_json:
        print(json.dumps(effective, indent=2))
        return
    print_config(effective, console)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
