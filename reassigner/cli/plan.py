"""`reassigner plan`: offline planning from a snapshot file (`reassigner snapshot`), no cluster needed.

Reads the snapshot, applies `--add-broker ID[:RACK]` and `--remove-broker ID`, plans with the
planner `--balance-mode` chooses (`planning.placement.balance_modes`: exact counts, or disk bytes
within the `balance.*` tolerances of the settings), writes the Kafka tool's reassignment JSON (changed
partitions only) to `--output` or stdout, a readable summary to stderr, and optionally a
machine-readable summary to `--summary-json`. This module does the file I/O; planning is pure.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.console import Console
from rich.table import Table

from schemas.errors import MalformedInputError

if TYPE_CHECKING:
    from planning.model import Broker
    from planning.placement.plan_summary import PlacementPlan

# The planning core is imported by the command (`--version` and `--help` must not pay for it).


def register(app: typer.Typer) -> None:
    app.command("plan", help="Plan a minimal-movement reassignment from a snapshot file.")(plan_command)


def plan_command(
    snapshot: Path = typer.Option(..., "--snapshot", help="Snapshot file (see `reassigner snapshot`)."),
    add_broker: list[str] = typer.Option(
        [], "--add-broker", help="ID[:RACK] of a new, empty broker; repeat for several."
    ),
    remove_broker: list[int] = typer.Option(
        [], "--remove-broker", help="ID of a broker to drain; repeat for several."
    ),
    output: Optional[Path] = typer.Option(None, "--output", help="Write the reassignment JSON here."),
    summary_json: Optional[Path] = typer.Option(None, "--summary-json", help="Write a JSON summary here."),
    no_rebalance: bool = typer.Option(
        False, "--no-rebalance", help="Only move what must move (dead, drained, offline dirs)."
    ),
    disk_max_usage_percent: Optional[float] = typer.Option(
        None, "--disk-max-usage-percent", min=0.001, max=100,
        help="No new replica where its dir's volume would be fuller than this (default: the setting, 85)."),
    balance_mode: Optional[str] = typer.Option(
        None, "--balance-mode", help="strict: exact replica counts, fewest moves; bytes: disk bytes, "
        "replicas and leaders within the balance.* tolerances, fewest bytes (default: the setting balance.mode, bytes)."),
    disk_budget: Optional[str] = typer.Option(
        None, "--disk-budget", help="(bytes mode) move at most this many bytes, such as 500GB or 2TiB, with "
        "the tightest disk band that allows; 0: off (default: the setting balance.disk.budget.bytes, 0)."),
) -> None:
    from dataclasses import replace

    from handlers.plans import compute_balance
    from planning.placement.balance_modes import BALANCE_MODES, plan_balanced
    from runtime.heap import automatic_collection_paused
    from planning.placement.goal import Goal
    from planning.snapshot import cluster_from_json, reassignment_to_json
    from runtime.settings import compute_policy, load_settings

    if balance_mode is not None and balance_mode.lower() not in BALANCE_MODES:
        raise MalformedInputError("--balance-mode", balance_mode, f"one of {', '.join(BALANCE_MODES)}")
    cluster = cluster_from_json(read_json_file(snapshot), str(snapshot))
    settings = load_settings()
    limit = disk_max_usage_percent if disk_max_usage_percent is not None else settings.disk_max_usage_percent
    balance = compute_balance(compute_policy(settings))
    if balance_mode is not None:
        balance = replace(balance, mode=balance_mode.lower())
    if disk_budget is not None:
        balance = replace(balance, disk_budget=parse_size("--disk-budget", disk_budget))
    goal = Goal(
        add_brokers=tuple(parse_added_broker(spec) for spec in add_broker),
        drain_brokers=frozenset(remove_broker),
        rebalance=not no_rebalance,
        disk_max_usage_percent=limit,
    )
    with automatic_collection_paused():  # a plan's objects are acyclic (runtime.heap)
        plan = plan_balanced(cluster, goal, balance)
    document = json.dumps(reassignment_to_json(plan.targets, plan.target_log_dirs), indent=2)
    if output is None:
        sys.stdout.write(document + "\n")
    else:
        output.write_text(document + "\n")
    summary = compute_summary(plan)
    if summary_json is not None:
        summary_json.write_text(json.dumps(summary, indent=2) + "\n")
    print_summary(plan, summary, Console(stderr=True))


def read_json_file(path: Path) -> object:
    """Parse a JSON file; errors name the file and the line/column."""
    try:
        text = path.read_text()
    except OSError as error:
        raise MalformedInputError(str(path), "$", "a readable file", error.strerror) from error
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise MalformedInputError(
            str(path), f"line {error.lineno} column {error.colno}", "valid JSON", error.msg
        ) from error


def parse_size(option: str, text: str) -> int:
    """A byte size as `config set` reads one (`handlers.policy.SIZE`: 500GB, 2TiB, 0)."""
    from handlers.policy import SIZE

    try:
        return SIZE.parse(text)[1]
    except ValueError:
        raise MalformedInputError(option, text, SIZE.expected) from None


def parse_added_broker(spec: str) -> Broker:
    """`7` or `7:/dc1/r2` -> Broker(7, rack)."""
    from planning.model import Broker

    broker_id, _, rack = spec.partition(":")
    try:
        number = int(broker_id)
    except ValueError as error:
        raise MalformedInputError("--add-broker", spec, "ID[:RACK] with an integer ID") from error
    if number < 0:
        raise MalformedInputError("--add-broker", spec, "a non-negative broker id")
    return Broker(id=number, rack=rack or None)


def compute_summary(plan: PlacementPlan) -> dict:
    """The machine-readable summary (keys are stable: tests and scripts read them)."""

    def by_broker(counts) -> dict[str, int]:
        return {str(b): counts[b] for b in sorted(counts)}

    eligible = plan.eligible_brokers
    return {
        "partitions_changed": len(plan.targets),
        "replica_moves": plan.replica_moves,
        "replica_moves_lower_bound": plan.replica_moves_lower_bound,
        "replica_moves_optimum": plan.replica_moves_optimum,
        "gap_percent": None if plan.gap_percent is None else round(plan.gap_percent, 2),
        "replicas_outside_share": plan.replicas_outside_share,
        "leaders_outside_share": plan.leaders_outside_share,
        "bytes_moved": plan.bytes_moved,
        "leader_changes": plan.leader_changes,
        "rack_violations": plan.rack_violations,
        "max_topic_replica_spread": plan.max_topic_replica_spread,
        "max_topic_leader_spread": plan.max_topic_leader_spread,
        "cluster_replica_spread": plan.cluster_replica_spread,
        "cluster_leader_spread": plan.cluster_leader_spread,
        "cluster_bytes_spread": plan.cluster_bytes_spread,
        "bytes_after": by_broker(plan.bytes_after),
        "replicas_before": by_broker(plan.replicas_before),
        "replicas_after": by_broker(plan.replicas_after),
        "leaders_before": by_broker(plan.leaders_before),
        "leaders_after": by_broker(plan.leaders_after),
        "eligible_brokers": list(eligible),
        "warnings": list(plan.warnings),
        "balance_mode": plan.balance_mode,
        "bytes_moved_lower_bound": plan.bytes_moved_lower_bound,
        "within_tolerance": plan.within_tolerance,
        "resources": {name: {"before": vars(report.before), "after": vars(report.after)}
                      for name, report in plan.resources.items()},
        "disk_cv_floor": plan.disk_cv_floor,
        "disk_tolerance": plan.disk_tolerance,
        "byte_budget": plan.byte_budget,
    }


def print_summary(plan: PlacementPlan, summary: dict, console: Console) -> None:
    table = Table(title="Per broker: replicas and preferred leaders")
    for column in ("broker", "replicas before", "replicas after", "leaders before", "leaders after", "bytes after"):
        table.add_column(column, justify="right")
    for b in sorted(plan.replicas_before):
        table.add_row(
            str(b) + ("" if b in plan.eligible_brokers else " (out)"),
            str(plan.replicas_before.get(b, 0)),
            str(plan.replicas_after.get(b, 0)),
            str(plan.leaders_before.get(b, 0)),
            str(plan.leaders_after.get(b, 0)),
            f"{plan.bytes_after.get(b, 0):,}",
        )
    console.print(table)
    if plan.bytes_moved_lower_bound is not None:  # balance.mode=bytes: proven in bytes
        gap = "n/a: outside its bands" if plan.gap_percent is None else f"{plan.gap_percent:.1f} %"
        console.print(
            f"partitions changed: {summary['partitions_changed']}  replica moves: {plan.replica_moves}  "
            f"bytes moved: {plan.bytes_moved:,} (lower bound {plan.bytes_moved_lower_bound:,}, gap "
            f"{gap})  leader changes: {plan.leader_changes}  within tolerance: "
            f"{'yes' if plan.within_tolerance else 'no'}")
        for name, report in plan.resources.items():
            floor = (f" (no plan moving as many bytes ends below {plan.disk_cv_floor:.3f})"
                     if name == "disk" and plan.disk_cv_floor is not None else "")
            console.print(f"{name}: CV {report.before.cv:.3f} -> {report.after.cv:.3f}{floor}, max/mean "
                          f"{report.before.max_over_mean:.2f} -> {report.after.max_over_mean:.2f}, brokers "
                          f"outside their band {report.before.outside} -> {report.after.outside}")
        if plan.byte_budget is not None:
            console.print(f"disk band: ±{plan.disk_tolerance:.1%}, the tightest a plan moving at most "
                          f"{plan.byte_budget:,} bytes reaches")
        console.print(f"rack violations: {plan.rack_violations}")
    else:
        proof = ("proven fewest" if plan.replica_moves_optimum is not None
                 else f"lower bound {plan.replica_moves_lower_bound}, gap {plan.gap_percent:.1f} %")
        console.print(
            f"partitions changed: {summary['partitions_changed']}  "
            f"replica moves: {plan.replica_moves} ({proof})  "
            f"bytes moved: {plan.bytes_moved}  leader changes: {plan.leader_changes}"
        )
        console.print(
            f"spread (max - min) per topic: replicas {plan.max_topic_replica_spread}, "
            f"leaders {plan.max_topic_leader_spread}; over the cluster: replicas "
            f"{plan.cluster_replica_spread}, leaders {plan.cluster_leader_spread}, bytes "
            f"{plan.cluster_bytes_spread:,}; beyond the shares "
            f"the racks allow: {plan.replicas_outside_share} replicas, {plan.leaders_outside_share} "
            f"leaders; rack violations: {plan.rack_violations}"
        )
    for warning in plan.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")
