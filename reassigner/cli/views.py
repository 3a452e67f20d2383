"""`reassigner list` and `reassigner status`: the views of the controller state the pipeline keeps
in Redis (no Kafka needed), as tables (`reassigner.operator.tables`) or with `--json` as one JSON
document (`reassigner.operator.views.documents`, the very functions the status server's
/api/reassignments and /api/status serve). The rows, and why a reassignment waits:
docs/cli.md ("Why a reassignment waits").
"""

from __future__ import annotations

import json
import time

import typer

from reassigner.cli.connections import connect
from reassigner.cli.options import CONNECTION_FLAGS, AsJson, SharedFlags, takes_flags
from reassigner.cli.printing import console

@takes_flags(*CONNECTION_FLAGS)
def list_reassignments(as_json: bool = AsJson, *, flags: SharedFlags) -> None:
    """Ongoing reassignments (current, adding, removing, final target, step n of m), the
    batch in flight, and the moves of other tools (external)."""
    from reassigner.operator.tables import print_list
    from reassigner.operator.views import compute_list_view, list_to_json
    from runtime.settings import compute_policy

    connected = connect(flags, need_kafka=False)
    view = compute_list_view(connected.load_state(), connected.settings.max_replica_movements, time.time(),
                             compute_policy(connected.settings))
    name = connected.settings.cluster_name
    if as_json:
        print(json.dumps(list_to_json(view, cluster_name=name), indent=2))
        return
    console.print(f"cluster {name!r}")
    print_list(view, console)


@takes_flags(*CONNECTION_FLAGS)
def status(as_json: bool = AsJson, *, flags: SharedFlags) -> None:
    """Brokers (rack, alive, draining, dirs), under-replicated and offline partitions, progress."""
    from reassigner.operator.tables import print_status
    from reassigner.operator.views import compute_status, status_to_json
    from runtime.settings import compute_policy

    connected = connect(flags, need_kafka=False)
    view = compute_status(connected.load_state(), connected.settings.max_replica_movements, time.time(),
                          compute_policy(connected.settings))
    name = connected.settings.cluster_name
    if as_json:
        print(json.dumps(status_to_json(view, name), indent=2))
        return
    console.print(f"cluster {name!r}")
    print_status(view, console)


def register(app: typer.Typer) -> None:
    app.command("list")(list_reassignments)
    app.command("status")(status)
