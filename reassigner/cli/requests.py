"""`reassigner request ...`, and how every request is sent (`config set` sends through `send_request`).

Sending: the request is first built with a placeholder envelope (`build_dry_run`), so that a bad
argument fails in one line before anything connects; then, connected, it is built for real (a
fresh id, now, `user@host`), checked against the cluster's metadata and published by the
deployment's `RequestChannel` (the status server's write API sends through one too); unless
`--no-wait`, the pipeline's verdict is awaited for `--timeout` seconds (Ctrl-C stops waiting).

    stdout   one JSON line: the request (`describe_request`) and its verdict (`verdict_to_json`)
    exit 0   accepted (or published, with `--no-wait`)
    exit 1   EXIT_REJECTED: the pipeline refused it; `error: [CODE] message` on stderr
    exit 2   refused locally, or a usage mistake: nothing was published
    exit 3   EXIT_TIMED_OUT: no verdict within --timeout; the request may still be processed

`request show ID` reads a proposal from the state (Redis only) and prints its moves, or with
`--json` Kafka's reassignment JSON. The user's side of all this: docs/cli.md, "Requests answer".
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer

from reassigner.cli.connections import Connected, connect
from reassigner.cli.options import CONNECTION_FLAGS, SharedFlags, command_group, stop_on_signals, takes_flags
from reassigner.cli.printing import console, err_console
from schemas.errors import InvalidInputError
from schemas.redaction import redact

request_app = command_group(help="Send a request to the pipeline (on the requests topic).")

NoWait = typer.Option(False, "--no-wait", help="Publish and return at once, without the pipeline's verdict.")
Timeout = typer.Option(60.0, "--timeout", min=0.1, help="Seconds to wait for the pipeline's verdict.")
ProposalId = typer.Argument(..., help="Proposal id (from its ProposalReady alert or `status`).")

EXIT_REJECTED = 1
"""The pipeline refused the request (RequestRejected; its code is printed)."""
EXIT_TIMED_OUT = 3
"""No verdict within --timeout; the request may still be processed."""


def request_channel(connected: Connected, client_id: str):
    """The deployment's `RequestChannel`: the CLI's `request ...` and the status server's write API."""
    from runtime.clients.kafka_producer import build_producer, producer_config
    from reassigner.operator.requests import RequestChannel

    return RequestChannel(connected.bootstrap, connected.client_config, connected.topic("requests"),
                          connected.topic("alerts"),
                          build_producer(producer_config(connected.bootstrap, connected.client_config, client_id)),
                          lambda: _cluster_now(connected))


def _cluster_now(connected: Connected):
    """The planning model of one poll of Kafka's metadata, for the local checks of a request."""
    from runtime.clients.kafka_admin import ClusterAdmin
    from reassigner.edge.observation import compute_cluster

    with ClusterAdmin(connected.bootstrap, connected.client_config) as admin:
        return compute_cluster(admin.observe())


def send_request(flags: SharedFlags, build: Callable[..., dict], *args: Any, wait: bool, timeout: float,
                 **kwargs: Any) -> None:
    """Build the request `build(*args, **kwargs)` makes, check it, publish it, and (if `wait`) wait
    for the pipeline's verdict and exit by it (see the module docstring)."""
    from reassigner.operator.requests import (build_dry_run, current_requester, describe_request, request_kind,
                                              verdict_to_json)

    build_dry_run(build, *args, **kwargs)
    connected = connect(flags, need_redis=False)
    request = build(*args, request_id=str(uuid.uuid4()), now_ms=int(time.time() * 1000),
                    requested_by=current_requester(), **kwargs)
    channel = request_channel(connected, "reassigner-cli")
    channel.check(request)
    connected.ensure_topics("requests", "alerts")
    kind, request_id = request_kind(request), request["id"]

    def published() -> None:
        err_console.print(f"[green]{kind} request {request_id} published[/] to {connected.topic('requests')}"
                          + ("" if wait else "; follow it with `reassigner alerts --follow`"))

    if not wait:
        channel.submit(request, None, on_published=published)
        print(json.dumps(describe_request(request)))
        return
    with stop_on_signals() as stop:
        verdict = channel.submit(request, timeout, on_published=published, stop=stop)
    print(json.dumps({**describe_request(request), **verdict_to_json(verdict, request_id, timeout)}))
    if verdict is None:
        print(redact(f"error: [REQUEST_TIMED_OUT] no verdict on {kind} request {request_id} within {timeout:g} s; "
                     "it may still be processed (is `reassigner run` up?): `reassigner alerts --follow` shows it"),
              file=sys.stderr, flush=True)
        raise typer.Exit(EXIT_TIMED_OUT)
    if not verdict.accepted:
        print(redact(f"error: [{verdict.error_code or 'UNKNOWN_SERVER_ERROR'}] {verdict.message}"),
              file=sys.stderr, flush=True)
        raise typer.Exit(EXIT_REJECTED)
    err_console.print(f"[green]accepted[/]: {verdict.message}", soft_wrap=True)


@request_app.command("reassign")
@takes_flags(*CONNECTION_FLAGS)
def request_reassign(
    file: Path = typer.Option(..., "--file", "--reassignment-json-file",
                              help="The Kafka tool's reassignment JSON ({\"version\": 1, \"partitions\": [...]})."),
    additional: bool = typer.Option(False, "--additional", help="Join the running reassignments."),
    no_wait: bool = NoWait, timeout: float = Timeout, *, flags: SharedFlags,
) -> None:
    """Move partitions to explicit targets (log_dirs honoured; "any" allowed)."""
    from reassigner.operator.requests import build_reassign_request, parse_json_document

    try:
        text = file.read_text()
    except OSError as error:
        raise InvalidInputError(f"{file}: cannot read the reassignment file: {error.strerror}") from None
    send_request(flags, build_reassign_request, parse_json_document(text, str(file)), str(file),
                 additional=additional, wait=not no_wait, timeout=timeout)


@request_app.command("cancel")
@takes_flags(*CONNECTION_FLAGS)
def request_cancel(
    topic: Optional[str] = typer.Option(None, "--topic", help="Topic to cancel (default: everything)."),
    partition: Optional[int] = typer.Option(None, "--partition", help="Partition of --topic."),
    keep: bool = typer.Option(False, "--keep", help="Stop where it is instead of reverting."),
    keep_draining: bool = typer.Option(
        False, "--keep-draining", help="A broker whose decommission this cancels stays draining (nothing new "
        "goes to it) instead of taking replicas again."),
    no_wait: bool = NoWait, timeout: float = Timeout, *, flags: SharedFlags,
) -> None:
    """Cancel reassignments: everything, a topic, or one partition; revert unless --keep. A
    broker whose decommission this stops entirely stops draining, unless --keep-draining."""
    from reassigner.operator.requests import build_cancel_request

    send_request(flags, build_cancel_request, topic, partition, keep, keep_draining, wait=not no_wait,
                 timeout=timeout)


@request_app.command("decommission")
@takes_flags(*CONNECTION_FLAGS)
def request_decommission(
    broker: List[int] = typer.Option(..., "--broker", help="Broker to drain (repeat for several)."),
    no_wait: bool = NoWait, timeout: float = Timeout, *, flags: SharedFlags,
) -> None:
    """Drain brokers: move every replica off them (alert BrokerDrained when empty)."""
    from reassigner.operator.requests import build_decommission_request

    send_request(flags, build_decommission_request, broker, wait=not no_wait, timeout=timeout)


@request_app.command("rebalance")
@takes_flags(*CONNECTION_FLAGS)
def request_rebalance(
    topic: List[str] = typer.Option([], "--topic", help="Topic to rebalance (repeat; default: all)."),
    no_wait: bool = NoWait, timeout: float = Timeout, *, flags: SharedFlags,
) -> None:
    """Even out replica counts and leadership with the fewest moves."""
    from reassigner.operator.requests import build_rebalance_request

    send_request(flags, build_rebalance_request, topic, wait=not no_wait, timeout=timeout)


@request_app.command("balance-dirs")
@takes_flags(*CONNECTION_FLAGS)
def request_balance_dirs(
    broker: List[int] = typer.Option([], "--broker", help="Broker whose log dirs to balance (repeat; "
                                     "default: every broker with two or more dirs)."),
    no_wait: bool = NoWait, timeout: float = Timeout, *, flags: SharedFlags,
) -> None:
    """Move replicas between the log dirs of brokers until each dir holds its share."""
    from reassigner.operator.requests import build_balance_dirs_request

    send_request(flags, build_balance_dirs_request, broker, wait=not no_wait, timeout=timeout)


@request_app.command("approve")
@takes_flags(*CONNECTION_FLAGS)
def request_approve(proposal_id: str = ProposalId, no_wait: bool = NoWait, timeout: float = Timeout, *,
                    flags: SharedFlags) -> None:
    """Execute a proposal published in `approve` mode."""
    from reassigner.operator.requests import build_approve_request

    send_request(flags, build_approve_request, proposal_id, wait=not no_wait, timeout=timeout)


@request_app.command("reject")
@takes_flags(*CONNECTION_FLAGS)
def request_reject(proposal_id: str = ProposalId, no_wait: bool = NoWait, timeout: float = Timeout, *,
                   flags: SharedFlags) -> None:
    """Drop a proposal (mode `approve`): nothing of it runs (ProposalRejected)."""
    from reassigner.operator.requests import build_reject_request

    send_request(flags, build_reject_request, proposal_id, wait=not no_wait, timeout=timeout)


@request_app.command("show")
@takes_flags(*CONNECTION_FLAGS)
def request_show(
    proposal_id: str = ProposalId,
    as_json: bool = typer.Option(False, "--json", help="Print Kafka's reassignment JSON, as "
                                 "kafka-reassign-partitions.sh --reassignment-json-file reads it."),
    *, flags: SharedFlags,
) -> None:
    """A proposal's moves: partition, current replicas, target, adding, removing, size."""
    from reassigner.operator.tables import print_proposal
    from reassigner.operator.views import compute_proposal_view, proposal_to_reassignment_json
    from runtime.settings import compute_policy

    connected = connect(flags, need_kafka=False)
    view = compute_proposal_view(connected.load_state(), proposal_id, compute_policy(connected.settings))
    if as_json:
        print(json.dumps(proposal_to_reassignment_json(view), indent=2))
        return
    print_proposal(view, time.time(), console)


@request_app.command("recommission")
@takes_flags(*CONNECTION_FLAGS)
def request_recommission(
    broker: List[int] = typer.Option(..., "--broker", help="Broker to stop draining (repeat for several)."),
    no_wait: bool = NoWait, timeout: float = Timeout, *, flags: SharedFlags,
) -> None:
    """Undo a decommission: the brokers stop draining and may take replicas again."""
    from reassigner.operator.requests import build_recommission_request

    send_request(flags, build_recommission_request, broker, wait=not no_wait, timeout=timeout)


@request_app.command("pause")
@takes_flags(*CONNECTION_FLAGS)
def request_pause(no_wait: bool = NoWait, timeout: float = Timeout, *, flags: SharedFlags) -> None:
    """Start no new step or log-dir move (those in flight finish); plans are still made and wait."""
    from reassigner.operator.requests import build_pause_request

    send_request(flags, build_pause_request, True, wait=not no_wait, timeout=timeout)


@request_app.command("resume")
@takes_flags(*CONNECTION_FLAGS)
def request_resume(no_wait: bool = NoWait, timeout: float = Timeout, *, flags: SharedFlags) -> None:
    """Undo `request pause`: steps start again under the limits."""
    from reassigner.operator.requests import build_pause_request

    send_request(flags, build_pause_request, False, wait=not no_wait, timeout=timeout)


def register(app: typer.Typer) -> None:
    app.add_typer(request_app, name="request")
