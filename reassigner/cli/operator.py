"""The operator's commands (SPEC 8): `request ...`, `config set|get`, `list`, `status`,
`alerts [--follow]`, `alerts webhook`, `status-server`.

Every command takes the connection flags of Kafka's tools (`--bootstrap-server`,
`--command-config`) plus `--redis-url`, `--cluster-name`, `--topic-prefix` and `--stack-dir`
(without flags, the local stack's Kafka and Redis are used). Read commands print rich tables on
stderr-free stdout, or one JSON document with `--json`. Errors are `ReassignerError`s: the CLI
prints one line and exits non-zero.

This module is the thin shell: it reads flags and files and calls `reassigner.operator`.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer
from rich.console import Console
from rich.progress_bar import ProgressBar
from rich.table import Table

from reassigner.cli.options import (BootstrapServer, ClusterName, CommandConfig, RedisUrl, StackDir,
                                    TopicPrefix, configure_logging)
from schemas.errors import InvalidInputError
from schemas.redaction import redact, register_secret

# Piped output (scripts, tests) gets wide tables rather than rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True)

request_app = typer.Typer(help="Send a request to the pipeline (on the requests topic).",
                          no_args_is_help=True)
config_app = typer.Typer(help="Dynamic settings: limits, throttles, mode.", no_args_is_help=True)
alerts_app = typer.Typer(help="Alerts: print them, follow them, forward them to a webhook.",
                         invoke_without_command=True)

AsJson = typer.Option(False, "--json", help="Print one JSON document instead of tables.")


class _Context:
    """Settings and connections resolved from the flags, once per command."""

    def __init__(self, bootstrap_server, redis_url, command_config, stack_dir, cluster_name,
                 topic_prefix, need_redis: bool, need_kafka: bool = True) -> None:
        from reassigner.cli.connections import resolve_connections
        from runtime.clients.client_config import read_command_config
        from runtime.settings import load_settings

        self.settings = load_settings(bootstrap_servers=bootstrap_server, redis_url=redis_url,
                                      command_config=command_config, stack_dir=stack_dir,
                                      cluster_name=cluster_name, topic_prefix=topic_prefix)
        if not need_kafka and self.settings.redis_url and not self.settings.bootstrap_servers:
            # A read command given --redis-url needs no Kafka (and no local stack).
            from reassigner.cli.connections import Connections

            self.connections = Connections("", self.settings.redis_url, self.settings.command_config)
        elif not need_kafka:
            # Only Redis is needed: complain about --redis-url, not about --bootstrap-server.
            probe = self.settings.model_copy(update={"bootstrap_servers": self.settings.bootstrap_servers or "-"})
            self.connections = resolve_connections(probe, need_redis=True)
        else:
            self.connections = resolve_connections(self.settings, need_redis=need_redis)
        self.client_config = read_command_config(self.connections.command_config)
        self.client = dict(self.client_config.librdkafka)

    @property
    def bootstrap(self) -> str:
        return self.connections.bootstrap_servers

    def topic(self, suffix: str) -> str:
        return self.settings.topic(suffix)

    def ensure_topics(self, *suffixes: str) -> None:
        from runtime.clients.kafka_access import check_kafka_access
        from runtime.clients.kafka_admin import ensure_topics

        if "requests" in suffixes:
            check_kafka_access(self.bootstrap, self.client_config, "request", [self.topic("requests")],
                               self.settings.topic_prefix)
        ensure_topics(self.bootstrap, self.client_config, [self.topic(s) for s in suffixes],
                      self.settings.event_topic_partitions)

    def load_state(self):
        from runtime.clients.redis_io import controller_state_loader

        return controller_state_loader(self.connections.redis_url, self.settings.cluster_name,
                                       self.settings.redis_socket_timeout_seconds,
                                       self.settings.redis_connect_timeout_seconds)()


def _setup_logging(verbose: bool = False) -> None:
    configure_logging(verbose, logging.WARNING, logging.INFO)


# --- request ... --------------------------------------------------------------------------------


NoWait = typer.Option(False, "--no-wait", help="Publish and return at once, without the pipeline's verdict.")
Timeout = typer.Option(60.0, "--timeout", min=0.1, help="Seconds to wait for the pipeline's verdict.")

EXIT_REJECTED = 1
"""`request ...`: the pipeline refused the request (RequestRejected; its code is printed)."""
EXIT_TIMED_OUT = 3
"""`request ...`: no verdict within --timeout; the request may still be processed."""


def _cluster_now(ctx: _Context):
    """The planning model of one poll of Kafka's metadata, for the local checks of a request."""
    from runtime.clients.kafka_admin import ClusterAdmin
    from reassigner.edge.observation import compute_cluster

    with ClusterAdmin(ctx.bootstrap, ctx.client_config) as admin:
        return compute_cluster(admin.observe())


def _request_channel(ctx: _Context, client_id: str):
    """The deployment's `RequestChannel`: the CLI's `request ...` and the status server's write API."""
    from runtime.clients.kafka_producer import build_producer, producer_config
    from reassigner.operator.requests import RequestChannel

    return RequestChannel(ctx.bootstrap, ctx.client_config, ctx.topic("requests"), ctx.topic("alerts"),
                          build_producer(producer_config(ctx.bootstrap, ctx.client_config, client_id)),
                          lambda: _cluster_now(ctx))


def _publish(ctx: _Context, build: Callable[..., dict], *args: Any, wait: bool = True, timeout: float = 60.0,
             **kwargs: Any) -> None:
    """Build the request, check it against the cluster's metadata (when `validate_locally` has
    anything to judge), publish it, and (unless `wait` is False) wait for the pipeline's verdict:
    accepted exits 0, rejected EXIT_REJECTED, no verdict within `timeout` EXIT_TIMED_OUT."""
    from reassigner.operator.requests import (current_requester, describe_request, request_kind,
                                              verdict_to_json)

    request = build(*args, request_id=str(uuid.uuid4()), now_ms=int(time.time() * 1000),
                    requested_by=current_requester(), **kwargs)
    channel = _request_channel(ctx, "reassigner-cli")
    channel.check(request)
    ctx.ensure_topics("requests", "alerts")
    kind, request_id = request_kind(request), request["id"]

    def published() -> None:
        err_console.print(f"[green]{kind} request {request_id} published[/] to {ctx.topic('requests')}"
                          + ("" if wait else "; follow it with `reassigner alerts --follow`"))

    if not wait:
        channel.submit(request, None, on_published=published)
        print(json.dumps(describe_request(request)))
        return
    verdict = channel.submit(request, timeout, on_published=published, stop=_stop_on_signals())
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
def request_reassign(
    file: Path = typer.Option(..., "--file", "--reassignment-json-file",
                              help="The Kafka tool's reassignment JSON ({\"version\": 1, \"partitions\": [...]})."),
    additional: bool = typer.Option(False, "--additional", help="Join the running reassignments."),
    no_wait: bool = NoWait, timeout: float = Timeout,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Move partitions to explicit targets (log_dirs honoured; "any" allowed)."""
    from reassigner.operator.requests import build_reassign_request, parse_json_document

    try:
        text = file.read_text()
    except OSError as error:
        raise InvalidInputError(f"{file}: cannot read the reassignment file: {error.strerror}") from None
    document = parse_json_document(text, str(file))
    # Checked before connecting anywhere: a bad file fails fast, even with no cluster.
    build_reassign_request(document, str(file), additional=additional, request_id="check", now_ms=0,
                           requested_by="check")
    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    _publish(ctx, build_reassign_request, document, str(file), additional=additional, wait=not no_wait,
             timeout=timeout)


@request_app.command("cancel")
def request_cancel(
    topic: Optional[str] = typer.Option(None, "--topic", help="Topic to cancel (default: everything)."),
    partition: Optional[int] = typer.Option(None, "--partition", help="Partition of --topic."),
    keep: bool = typer.Option(False, "--keep", help="Stop where it is instead of reverting."),
    no_wait: bool = NoWait, timeout: float = Timeout,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Cancel reassignments: everything, a topic, or one partition; revert unless --keep."""
    from reassigner.operator.requests import build_cancel_request

    build_cancel_request(topic, partition, keep, request_id="check", now_ms=0, requested_by="check")
    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    _publish(ctx, build_cancel_request, topic, partition, keep, wait=not no_wait, timeout=timeout)


@request_app.command("decommission")
def request_decommission(
    broker: List[int] = typer.Option(..., "--broker", help="Broker to drain (repeat for several)."),
    no_wait: bool = NoWait, timeout: float = Timeout,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Drain brokers: move every replica off them (alert BrokerDrained when empty)."""
    from reassigner.operator.requests import build_decommission_request

    build_decommission_request(broker, request_id="check", now_ms=0, requested_by="check")
    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    _publish(ctx, build_decommission_request, broker, wait=not no_wait, timeout=timeout)


@request_app.command("rebalance")
def request_rebalance(
    topic: List[str] = typer.Option([], "--topic", help="Topic to rebalance (repeat; default: all)."),
    no_wait: bool = NoWait, timeout: float = Timeout,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Even out replica counts and leadership with the fewest moves."""
    from reassigner.operator.requests import build_rebalance_request

    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    _publish(ctx, build_rebalance_request, topic, wait=not no_wait, timeout=timeout)


@request_app.command("balance-dirs")
def request_balance_dirs(
    broker: List[int] = typer.Option([], "--broker", help="Broker whose log dirs to balance (repeat; "
                                     "default: every broker with two or more dirs)."),
    no_wait: bool = NoWait, timeout: float = Timeout,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Move replicas between the log dirs of brokers until each dir holds its share (KIP-113)."""
    from reassigner.operator.requests import build_balance_dirs_request

    build_balance_dirs_request(broker, request_id="check", now_ms=0, requested_by="check")
    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    _publish(ctx, build_balance_dirs_request, broker, wait=not no_wait, timeout=timeout)


@request_app.command("approve")
def request_approve(
    proposal_id: str = typer.Argument(..., help="Proposal id (from its ProposalReady alert or `status`)."),
    no_wait: bool = NoWait, timeout: float = Timeout,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Execute a proposal published in `approve` mode."""
    from reassigner.operator.requests import build_approve_request

    build_approve_request(proposal_id, request_id="check", now_ms=0, requested_by="check")
    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    _publish(ctx, build_approve_request, proposal_id, wait=not no_wait, timeout=timeout)


@request_app.command("reject")
def request_reject(
    proposal_id: str = typer.Argument(..., help="Proposal id (from its ProposalReady alert or `status`)."),
    no_wait: bool = NoWait, timeout: float = Timeout,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Drop a proposal (mode `approve`): nothing of it runs (ProposalRejected)."""
    from reassigner.operator.requests import build_reject_request

    build_reject_request(proposal_id, request_id="check", now_ms=0, requested_by="check")
    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    _publish(ctx, build_reject_request, proposal_id, wait=not no_wait, timeout=timeout)


@request_app.command("show")
def request_show(
    proposal_id: str = typer.Argument(..., help="Proposal id (from its ProposalReady alert or `status`)."),
    as_json: bool = typer.Option(False, "--json", help="Print Kafka's reassignment JSON, as "
                                 "kafka-reassign-partitions.sh --reassignment-json-file reads it."),
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """A proposal's moves: partition, current replicas, target, adding, removing, size."""
    from reassigner.operator.views import compute_proposal_view, proposal_to_reassignment_json
    from runtime.settings import compute_policy

    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, True,
                   need_kafka=False)
    view = compute_proposal_view(ctx.load_state(), proposal_id, compute_policy(ctx.settings))
    if as_json:
        print(json.dumps(proposal_to_reassignment_json(view), indent=2))
        return
    _print_proposal(view, time.time())


def _print_proposal(view, now_seconds: float) -> None:
    expires = "" if view.expires_at_ms is None else \
        f", expires in {_duration(max(0.0, view.expires_at_ms / 1000.0 - now_seconds))}"
    table = Table(title=f"proposal {view.proposal_id}: {view.reason} ({len(view.moves)} partitions, "
                        f"{view.replica_moves} replica moves{expires})")
    for column in ("partition", "current", "target", "adding", "removing", "size"):
        table.add_column(column)
    for m in view.moves:
        table.add_row(f"{m.topic}-{m.partition}", "?" if m.current_replicas is None else _ids(m.current_replicas),
                      _ids(m.target), _ids(m.adding), _ids(m.removing), _size(m.size_bytes))
    console.print(table)
    console.print(f"`reassigner request approve {view.proposal_id}` runs it, `reassigner request reject "
                  f"{view.proposal_id}` drops it; `--json` gives Kafka's reassignment JSON", soft_wrap=True)


@request_app.command("recommission")
def request_recommission(
    broker: List[int] = typer.Option(..., "--broker", help="Broker to stop draining (repeat for several)."),
    no_wait: bool = NoWait, timeout: float = Timeout,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Undo a decommission: the brokers stop draining and may take replicas again."""
    from reassigner.operator.requests import build_recommission_request

    build_recommission_request(broker, request_id="check", now_ms=0, requested_by="check")
    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    _publish(ctx, build_recommission_request, broker, wait=not no_wait, timeout=timeout)


@request_app.command("pause")
def request_pause(
    no_wait: bool = NoWait, timeout: float = Timeout,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Start no new step or log-dir move (those in flight finish); plans are still made and wait."""
    from reassigner.operator.requests import build_pause_request

    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    _publish(ctx, build_pause_request, True, wait=not no_wait, timeout=timeout)


@request_app.command("resume")
def request_resume(
    no_wait: bool = NoWait, timeout: float = Timeout,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Undo `request pause`: steps start again under the limits."""
    from reassigner.operator.requests import build_pause_request

    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    _publish(ctx, build_pause_request, False, wait=not no_wait, timeout=timeout)


# --- config set / get ---------------------------------------------------------------------------


@config_app.command("set")
def config_set(
    assignment: str = typer.Argument(..., metavar="KEY=VALUE", help="e.g. reassignment.max.concurrent.partition.movements=10; KEY= resets."),
    no_wait: bool = NoWait, timeout: float = Timeout,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Change a dynamic setting; applies to the next decision, never to steps in flight."""
    from reassigner.operator.requests import build_set_config_request

    build_set_config_request(assignment, request_id="check", now_ms=0, requested_by="check")
    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    _publish(ctx, build_set_config_request, assignment, wait=not no_wait, timeout=timeout)


@config_app.command("get")
def config_get(
    key: Optional[str] = typer.Argument(None, help="One key (default: all)."),
    as_json: bool = AsJson,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """The effective value of each dynamic setting: the pipeline's override, else the default."""
    from reassigner.operator.dynamic_config import compute_effective_config, require_known_key

    if key is not None:
        require_known_key(key, "config get")
    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, True,
                   need_kafka=False)
    effective = compute_effective_config(ctx.load_state().config, ctx.settings)
    if key is not None:
        effective = {key: effective[key]}
    if as_json:
        print(json.dumps(effective, indent=2))
        return
    table = Table(title="dynamic settings")
    for column in ("key", "value", "source", "meaning"):
        table.add_column(column)
    for name, entry in effective.items():
        table.add_row(name, entry["value"] or "-", entry["source"], entry["doc"])
    console.print(table)


# --- list / status ------------------------------------------------------------------------------


def _ids(values) -> str:
    return ",".join(str(v) for v in values) if values else "-"


def _bar(fraction: float | None) -> Any:
    if fraction is None:
        return "?"
    return ProgressBar(total=100, completed=round(fraction * 100), width=20)


def list_reassignments(
    as_json: bool = AsJson,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Ongoing reassignments (current, adding, removing, final target, step n of m), the
    batch in flight, and the moves of other tools (external)."""
    from reassigner.operator.views import (compute_external_rows, compute_in_flight, compute_log_dir_move_rows,
                                           compute_reassignment_rows, external_row_to_json,
                                           reassignment_row_to_json, step_label)

    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, True,
                   need_kafka=False)
    state = ctx.load_state()
    from runtime.settings import compute_policy

    rows = compute_reassignment_rows(state, ctx.settings.max_replica_movements, time.time(),
                                     compute_policy(ctx.settings))
    in_flight = compute_in_flight(state, time.time())
    dir_moves = compute_log_dir_move_rows(state, time.time())
    external = compute_external_rows(state, time.time())
    if as_json:
        from dataclasses import asdict

        print(json.dumps({"reassignments": [reassignment_row_to_json(r) for r in rows],
                          "in_flight": [json.loads(json.dumps(asdict(f))) for f in in_flight],
                          "log_dir_moves": [json.loads(json.dumps(asdict(m))) for m in dir_moves],
                          "external": [external_row_to_json(e) for e in external]}, indent=2))
        return
    table = Table(title=f"ongoing reassignments ({len(rows)})")
    for column in ("partition", "state", "current", "adding", "removing", "final target", "step", "progress",
                   "bytes moved / to move", "time left", "waits for"):
        table.add_column(column)
    for r in rows:
        table.add_row(f"{r.topic}-{r.partition}", r.state, _ids(r.current_replicas), _ids(r.adding),
                      _ids(r.removing), _ids(r.final_target), step_label(r), _bar(r.progress),
                      f"{_size(r.bytes_moved)} / {_size(r.bytes_to_move)}", _duration(r.time_left_seconds),
                      r.waiting or "-")
    console.print(table if rows else _nothing_of_ours(external))
    batch = Table(title=f"batch in flight ({len(in_flight)} steps)")
    for column in ("partition", "step", "target", "adding", "removing", "leader move", "running for"):
        batch.add_column(column)
    for f in in_flight:
        batch.add_row(f"{f.topic}-{f.partition}", str(f.step), _ids(f.target), _ids(f.adding),
                      _ids(f.removing), "yes" if f.leader_movement else "no",
                      "-" if f.age_seconds is None else f"{f.age_seconds:.0f} s")
    if in_flight:
        console.print(batch)
    _print_external(external)
    _print_log_dir_moves(dir_moves)
    _print_proposals(state)


def _nothing_of_ours(external) -> str:
    """The line for no reassignment of ours: none at all only when no other tool moves one either."""
    if not external:
        return "no reassignment in progress"
    return f"no reassignment of the product in progress; {len(external)} by another tool (external, below)"


def _print_external(external) -> None:
    """The moves of other tools Kafka shows (`external`): respected, never stepped."""
    if not external:
        return
    table = Table(title=f"moved by another tool ({len(external)}, external: no step of ours starts on them)")
    for column in ("partition", "kind", "replicas", "adding", "removing", "seen for", "our reassignment waiting"):
        table.add_column(column)
    for e in external:
        table.add_row(f"{e.topic}-{e.partition}", e.kind, _ids(e.replicas), _ids(e.adding), _ids(e.removing),
                      _duration(e.age_seconds), e.held_by or "-")
    console.print(table)


def _print_proposals(state) -> None:
    """Proposals wait for approval: one line each, with `request show` to read their moves."""
    for proposal_id, proposal in sorted(state.proposals.items()):
        console.print(f"proposal {proposal_id} awaits approval: {proposal.reason}, {len(proposal.targets)} "
                      f"partitions (`reassigner request show {proposal_id}`; approve or reject it)", soft_wrap=True)


def _size(value: float | None) -> str:
    if value is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1000.0
    return "?"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _print_log_dir_moves(moves) -> None:
    if not moves:
        return
    table = Table(title=f"log-dir moves ({sum(m.state != 'waiting' for m in moves)} of {len(moves)} running)")
    for column in ("partition", "broker", "from", "to", "size", "state", "now in", "running for"):
        table.add_column(column)
    for m in moves:
        table.add_row(f"{m.topic}-{m.partition}", str(m.broker_id), m.origin_dir or "?", m.target_dir,
                      f"{m.size_bytes:,} B", m.state + (" (copy in progress)" if m.future_replica else ""),
                      m.current_dir or "?", "-" if m.age_seconds is None else f"{m.age_seconds:.0f} s")
    console.print(table)


def status(
    as_json: bool = AsJson,
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Brokers (rack, alive, draining, dirs), under-replicated and offline partitions, progress."""
    from reassigner.operator.views import compute_status, status_to_json, step_label

    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, True,
                   need_kafka=False)
    from runtime.settings import compute_policy

    view = compute_status(ctx.load_state(), ctx.settings.max_replica_movements, time.time(),
                          compute_policy(ctx.settings))
    if as_json:
        print(json.dumps(status_to_json(view), indent=2))
        return
    brokers = Table(title=f"brokers (epoch {view.epoch}, last batch {view.last_batch})")
    for column in ("broker", "rack", "state", "dirs online", "replicas", "leaders", "per dir (replicas, bytes)"):
        brokers.add_column(column)
    for b in view.brokers:
        state = "[red]down[/]" if not b.alive else ("[yellow]draining[/]" if b.draining else "[green]alive[/]")
        dirs = f"{b.dirs_online}/{b.dirs_total}" + (f" [red](offline: {', '.join(b.offline_dirs)})[/]" if b.offline_dirs else "")
        if b.cannot_host:
            dirs += f" [yellow]{b.cannot_host} partitions kept off until restart[/]"
        per_dir = "  ".join(f"{path.rsplit('/', 1)[-1]}: {'?' if count is None else count}, "
                            f"{'?' if size is None else f'{size:,}'}" for path, count, size in b.dirs)
        brokers.add_row(str(b.id), b.rack or "-", state, dirs, str(b.replicas), str(b.leaders), per_dir)
    console.print(brokers)
    for title, problems, style in (("under-replicated", view.under_replicated, "yellow"),
                                   ("under min ISR", view.under_min_isr, "red"),
                                   ("offline", view.offline, "red")):
        names = " ".join(f"{p.topic}-{p.partition}" for p in problems[:20])
        more = f" (+{len(problems) - 20} more)" if len(problems) > 20 else ""
        console.print(f"{title}: [{style if problems else 'green'}]{len(problems)}[/] {names}{more}")
    shown = ", ".join(view.excluded_topics[:10]) + (f" (+{len(view.excluded_topics) - 10} more)"
                                                    if len(view.excluded_topics) > 10 else "")
    console.print(f"topics only healed and drained, never rebalanced: {len(view.excluded_topics)} "
                  f"(include {view.topics_include!r}, exclude {view.topics_exclude!r}) {shown}")
    if view.proposals:
        console.print(f"proposals awaiting approval: {', '.join(view.proposals)} (`reassigner request show ID`)")
    if view.paused:
        console.print("[yellow]paused[/]: no new step starts until `reassigner request resume`")
    if view.reassignments:
        progress = Table(title=f"reassignment progress ({view.steps_done}/{view.steps_estimated} steps)")
        for column in ("partition", "state", "step", "progress", "waits for"):
            progress.add_column(column)
        for r in view.reassignments:
            progress.add_row(f"{r.topic}-{r.partition}", r.state, step_label(r), _bar(r.progress), r.waiting or "-")
        movement = view.movement  # finished reassignments included
        progress.add_row("all", f"{movement.partitions_done} of {movement.partitions_total} done",
                         f"{movement.steps_done} of {movement.steps_estimated}", _bar(view.overall_progress), "")
        console.print(progress)
        rate = "not measured yet (no step completed)" if view.replication_rate is None else \
            f"{_size(view.replication_rate)}/s"
        console.print(f"bytes moved {_size(movement.bytes_moved)} of {_size(movement.bytes_to_move)} "
                      f"({_size(view.bytes_left)} left); observed rate {rate}; "
                      f"time left {_duration(view.time_left_seconds)}")
    else:
        console.print(_nothing_of_ours(view.external))
    _print_external(view.external)
    _print_log_dir_moves(view.log_dir_moves)


# --- alerts ----------------------------------------------------------------------------------------


@alerts_app.callback()
def alerts(
    ctx_typer: typer.Context,
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new alerts."),
    min_severity: str = typer.Option("INFO", "--min-severity", help="INFO, WARNING, ERROR or CRITICAL."),
    from_beginning: bool = typer.Option(False, "--from-beginning", help="With --follow: start at the oldest alert."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Print the alerts on the alerts topic; with --follow, keep printing new ones (Ctrl-C stops)."""
    if ctx_typer.invoked_subcommand is not None:
        return
    from reassigner.operator.alerts_follow import follow_alerts, parse_min_severity, print_alert_line

    _setup_logging()
    severity = parse_min_severity(min_severity)
    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    ctx.ensure_topics("alerts")
    stop = _stop_on_signals()
    topic = ctx.topic("alerts")

    def ready(partitions: list[int]) -> None:
        if follow:
            where = "the beginning" if from_beginning else "now"
            err_console.print(f"following {topic} ({len(partitions)} partitions) from {where}; Ctrl-C stops")

    follow_alerts(ctx.bootstrap, ctx.client_config, topic, min_severity=severity,
                  from_beginning=from_beginning or not follow, emit=print_alert_line(console, as_json),
                  stop=stop, on_ready=ready, on_bad_message=lambda text: err_console.print(f"[yellow]{text}[/]"),
                  until_end=not follow)


@alerts_app.command("webhook")
def alerts_webhook(
    url: str = typer.Option(..., "--url", help="Where to POST each alert (JSON)."),
    min_severity: str = typer.Option("INFO", "--min-severity", help="INFO, WARNING, ERROR or CRITICAL."),
    max_attempts: int = typer.Option(5, "--max-attempts", min=1, help="POST attempts before dead-lettering."),
    retry_delay: float = typer.Option(0.5, "--retry-delay", min=0.0, help="First retry delay (s), doubled each time."),
    max_retry_delay: float = typer.Option(30.0, "--max-retry-delay", min=0.0, help="Cap of the retry delay (s)."),
    timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="Timeout of one POST (s)."),
    runner: str = typer.Option("faust", "--runner", help="faust (default) or confluent: same delivery rule."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every retry and the consumer's life."),
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Forward every alert to a webhook: retries with exponential backoff, then the dead-letter topic."""
    from runtime.clients.redis_io import register_url_password
    from reassigner.operator.alerts_follow import parse_min_severity
    from reassigner.operator.webhook import (RUNNERS, WebhookPolicy, group_id, run_confluent_forwarder,
                                             run_faust_forwarder)

    if runner not in RUNNERS:
        raise InvalidInputError(f"--runner {runner!r}: expected one of {', '.join(RUNNERS)}")
    if not url.startswith(("http://", "https://")):
        raise InvalidInputError(f"--url {url!r}: expected an http:// or https:// URL")
    register_url_password(url)  # a webhook URL may carry a token as its password
    _setup_logging(verbose)
    policy = WebhookPolicy(url, parse_min_severity(min_severity), max_attempts, retry_delay,
                           max_retry_delay, timeout)
    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, False)
    if runner == "faust" and ctx.settings.command_config is not None:  # refused before connecting
        raise InvalidInputError("--command-config is not supported by the faust runner; "
                                "use --runner confluent for a secured cluster")
    ctx.ensure_topics("alerts", "dead-letter")
    group = group_id(ctx.settings.topic_prefix)
    err_console.print(redact(f"forwarding {ctx.topic('alerts')} to {url} ({runner}, group {group}); "
                             "Ctrl-C stops"))
    if runner == "faust":
        run_faust_forwarder(ctx.bootstrap, ctx.topic("alerts"), ctx.topic("dead-letter"), policy, group,
                            loglevel="info" if verbose else "warning")
    else:
        run_confluent_forwarder(ctx.bootstrap, ctx.client_config, ctx.topic("alerts"), ctx.topic("dead-letter"),
                                policy, group, stop=_stop_on_signals(),
                                on_ready=lambda: err_console.print("assigned; forwarding"))


# --- status-server -------------------------------------------------------------------------------


def status_server(
    port: int = typer.Option(8080, "--port", min=0, max=65535, help="TCP port (0 = any free one)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; another than loopback "
                             "needs a token (or --allow-unauthenticated)."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", help="A file holding the token every "
                                              "request must carry (default: REASSIGNER_STATUS_TOKEN)."),
    write_token_file: Optional[Path] = typer.Option(None, "--write-token-file", help="A file holding the "
                                                    "token of the write API (POST /api/...; default: "
                                                    "REASSIGNER_STATUS_WRITE_TOKEN; none: writes are off)."),
    allow_unauthenticated: bool = typer.Option(False, "--allow-unauthenticated",
                                               help="Serve without a token on a non-loopback --host "
                                               "(a trusted network or an authenticating proxy in front)."),
    alert_capacity: int = typer.Option(200, "--alert-capacity", min=1, help="Alerts kept for the page and API."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every request."),
    bootstrap_server: Optional[str] = BootstrapServer, command_config: Optional[Path] = CommandConfig,
    stack_dir: Optional[Path] = StackDir, cluster_name: Optional[str] = ClusterName,
    topic_prefix: Optional[str] = TopicPrefix, redis_url: Optional[str] = RedisUrl,
) -> None:
    """Serve the status page (/), the JSON API (/api/...) and Prometheus metrics (/metrics)."""
    from runtime.clients.redis_io import controller_state_loader
    from reassigner.operator.status_server import (AlertBook, StateCache, StatusServer, require_distinct_tokens,
                                                   require_token_off_loopback, watch_alert_topics)
    from runtime.settings import compute_policy

    _setup_logging(verbose)
    ctx = _Context(bootstrap_server, redis_url, command_config, stack_dir, cluster_name, topic_prefix, True)
    token = _read_token(token_file) if token_file is not None else None
    if token is None and ctx.settings.status_token is not None:
        token = ctx.settings.status_token.get_secret_value().strip() or None
    register_secret(token)
    write_token = _read_token(write_token_file, "--write-token-file") if write_token_file is not None else None
    if write_token is None and ctx.settings.status_write_token is not None:
        write_token = ctx.settings.status_write_token.get_secret_value().strip() or None
    register_secret(write_token)
    require_distinct_tokens(token, write_token)  # before connecting
    warning = require_token_off_loopback(host, token is not None, allow_unauthenticated)  # before connecting
    ctx.ensure_topics("alerts", "command-results", *(("requests",) if write_token else ()))
    book = AlertBook(alert_capacity)
    alerts_topic, results_topic = ctx.topic("alerts"), ctx.topic("command-results")
    server = StatusServer(
        host=host, port=port, cluster_name=ctx.settings.cluster_name,
        cache=StateCache(controller_state_loader(ctx.connections.redis_url, ctx.settings.cluster_name,
                                                 ctx.settings.redis_socket_timeout_seconds,
                                                 ctx.settings.redis_connect_timeout_seconds)),
        book=book, default_replica_movements=ctx.settings.max_replica_movements,
        policy=compute_policy(ctx.settings), token=token, write_token=write_token,
        requests=_request_channel(ctx, "reassigner-status-server") if write_token else None,
        watch=lambda stop: watch_alert_topics(ctx.bootstrap, ctx.client_config, alerts_topic, results_topic,
                                              book, stop),
    ).start()
    if warning:
        logging.getLogger(__name__).warning(warning)
        err_console.print(f"[yellow]warning: {warning}[/]")
    access = ("token required" if token else "no token") + (
        "; write API on (POST /api/..., write token)" if write_token else "; write API off")
    err_console.print(f"status page on http://{host}:{server.port}/ (API /api/status, metrics /metrics; "
                      f"{access}); Ctrl-C stops")
    print(json.dumps({"url": f"http://{host}:{server.port}/", "port": server.port}), flush=True)
    stop = _stop_on_signals()
    stop.wait()
    server.stop()


def _read_token(path: Path, flag: str = "--token-file") -> str:
    try:
        token = path.read_text().strip()
    except OSError as error:
        raise InvalidInputError(f"{flag} {path}: cannot read it: {error.strerror or error}") from None
    if not token:
        raise InvalidInputError(f"{flag} {path}: the file is empty; put the token in it")
    return token


# --- helpers -------------------------------------------------------------------------------------


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def handle(_signum, _frame) -> None:
        stop.set()

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)
    return stop


def register(app: typer.Typer) -> None:
    app.add_typer(request_app, name="request")
    app.add_typer(config_app, name="config")
    app.add_typer(alerts_app, name="alerts")
    app.command("list")(list_reassignments)
    app.command("status")(status)
    app.command("status-server")(status_server)
