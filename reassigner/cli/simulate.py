"""`reassigner steps` and `reassigner simulate`: the movement rules, offline, no cluster needed.

- `steps --from 0,1,2,3,4 --to 5,6,7,8,9` prints the step sequence of one partition (the rule:
  docs/design.md, "Incremental steps and the batch rule").
- `simulate --snapshot FILE [--add-broker ...] [--remove-broker ...] [--kill-broker ...]` plans
  with the placement planner, then runs the plan through the simulated cluster under the limits
  and prints steps, peak concurrency per limit, peak replicas per partition, simulated makespan
  and invariant violations (exit code 1 if any invariant broke).

Both preview what the product would do: with no limit flag they run under the product's own
settings (`load_settings()`: flags, REASSIGNER_* variables, config file, `Settings` defaults,
through `compute_limits`), and the simulator under its `step_stall_timeout_seconds`; a limit
flag overrides its one setting.

Durations and rates read as in `status` (`reassigner.operator.views.units`). Errors are
`ReassignerError`s printed as one line (`error: [CODE] message`) with exit code 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from reassigner.cli.printing import one_line_errors
from planning.simulation import DEFAULT_BYTES_PER_SEC
from schemas.errors import InvalidReplicaAssignmentError, MalformedInputError

if TYPE_CHECKING:
    from planning.model import Broker, Cluster
    from planning.movement.batches import Limits
    from planning.movement.partition_steps import Step
    from planning.simulation.simulator import SimulationReport

# The simulator, the settings and the views are imported by the commands that use them: the
# command line's start (`--version`, `--help`) must not pay for them.

_SETTING = "default: the product's setting"


def register(app: typer.Typer) -> None:
    app.command("steps", help="Print the incremental steps that move one partition.")(one_line_errors(steps))
    app.command("simulate", help="Plan, then run the plan through a simulated cluster.")(one_line_errors(simulate))


# -- steps -------------------------------------------------------------------------------------


def steps(
    from_replicas: str = typer.Option(..., "--from", help="Current replicas, e.g. 0,1,2,3,4 (leader first)."),
    to_replicas: str = typer.Option(..., "--to", help="Final target replicas, e.g. 5,6,7,8,9."),
    max_replica_movements: Optional[int] = typer.Option(
        None, "--max-replica-movements", help=f"R: replicas one step may add and drop ({_SETTING})."),
    min_isr: int = typer.Option(1, "--min-isr", help="M: the topic's min.insync.replicas."),
    isr: Optional[str] = typer.Option(None, "--isr", help="In-sync replicas now (default: all of --from)."),
    as_json: bool = typer.Option(False, "--json", help="Print {\"steps\": [...]} instead of text."),
) -> None:
    from planning.movement.partition_steps import compute_step_sequence
    from runtime.settings import compute_limits, load_settings

    current = parse_replica_list(from_replicas, "--from")
    final = parse_replica_list(to_replicas, "--to")
    in_sync = current if isr is None else parse_replica_list(isr, "--isr", allow_empty=True)
    limits = compute_limits(load_settings(max_replica_movements=max_replica_movements))
    sequence = compute_step_sequence(current, final, in_sync, limits.max_replica_movements, min_isr)
    if as_json:
        typer.echo(json.dumps({"steps": [_step_json(s) for s in sequence]}))
        return
    typer.echo(f"{_fmt(current):<24} start")
    for step in sequence:
        typer.echo(f"{_fmt(step.target):<24} {_describe(step)}")


def parse_replica_list(text: str, option: str, allow_empty: bool = False) -> tuple[int, ...]:
    """`0,1,2` → (0, 1, 2); non-integers are malformed, empty/duplicate/negative lists invalid."""
    tokens = [t.strip() for t in text.split(",") if t.strip()]
    replicas = []
    for index, token in enumerate(tokens):
        try:
            replicas.append(int(token))
        except ValueError:
            raise MalformedInputError(option, f"[{index}]", "a broker id (integer)", token) from None
    if not replicas and not allow_empty:
        raise InvalidReplicaAssignmentError(f"{option}: the replica list is empty")
    if len(set(replicas)) != len(replicas):
        raise InvalidReplicaAssignmentError(f"{option}: broker listed twice in {replicas}")
    if any(b < 0 for b in replicas):
        raise InvalidReplicaAssignmentError(f"{option}: negative broker id in {replicas}")
    return tuple(replicas)


def _step_json(step: Step) -> dict:
    return {"target": list(step.target), "adding": list(step.adding), "removing": list(step.removing),
            "elect_leader": step.elect_leader}


def _fmt(replicas: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, replicas)) + ")"


def _describe(step: Step) -> str:
    parts = []
    if step.removing:
        parts.append(f"-{list(step.removing)}")
    if step.adding:
        parts.append(f"+{list(step.adding)}")
    if not parts:
        parts.append("reorder")
    text = " ".join(parts)
    if step.elect_leader:
        text += f", elect {step.target[0]}"
    return text


# -- simulate ----------------------------------------------------------------------------------


def simulate(
    snapshot: Path = typer.Option(..., "--snapshot", help="Snapshot file (see `reassigner snapshot`)."),
    add_broker: List[str] = typer.Option([], "--add-broker", help="ID[:RACK] of a new empty broker; repeatable."),
    remove_broker: List[int] = typer.Option([], "--remove-broker", help="Broker to drain; repeatable."),
    kill_broker: List[int] = typer.Option([], "--kill-broker", help="Broker that is dead at the start; repeatable."),
    max_partition_movements: Optional[int] = typer.Option(None, "--max-partition-movements", help=f"P ({_SETTING})."),
    max_leader_movements: Optional[int] = typer.Option(None, "--max-leader-movements", help=f"L ({_SETTING})."),
    max_replica_movements: Optional[int] = typer.Option(None, "--max-replica-movements", help=f"R ({_SETTING})."),
    max_movements_per_broker: Optional[int] = typer.Option(None, "--max-movements-per-broker",
                                                           help=f"B ({_SETTING})."),
    bytes_per_sec: float = typer.Option(DEFAULT_BYTES_PER_SEC, "--bytes-per-sec",
                                        help="Replication fetch capacity of one broker."),
    tick_seconds: float = typer.Option(1.0, "--tick-seconds", help="Time between two decisions."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    # Imported here: the planner modules belong to the placement half of the planning core.
    from handlers.plans import compute_balance
    from planning.placement.balance_modes import plan_balanced
    from runtime.heap import automatic_collection_paused
    from planning.placement.placer import Goal, compute_planning_cluster
    from runtime.settings import compute_limits, compute_policy, load_settings
    from planning.model import Broker
    from planning.simulation.simulated_cluster import SimulationParams
    from planning.simulation.simulator import KillBroker, run_plan
    from planning.snapshot import cluster_from_json

    settings = load_settings(max_partition_movements=max_partition_movements, max_leader_movements=max_leader_movements,
                             max_replica_movements=max_replica_movements, max_movements_per_broker=max_movements_per_broker)
    limits = compute_limits(settings)
    try:
        data = json.loads(snapshot.read_text())
    except (OSError, ValueError) as error:
        raise MalformedInputError(str(snapshot), "$", "a readable JSON snapshot", str(error)) from None
    cluster = cluster_from_json(data, str(snapshot))
    added = tuple(parse_broker(text, cluster) for text in add_broker)
    _require_known(cluster, remove_broker, "--remove-broker")
    _require_known(cluster, kill_broker, "--kill-broker")
    dead = set(kill_broker)
    planning_view = cluster.with_brokers(
        Broker(b.id, b.rack, b.alive and b.id not in dead, b.draining or b.id in remove_broker, b.log_dirs)
        for b in cluster.brokers
    )
    goal = Goal(add_brokers=added, drain_brokers=frozenset(remove_broker), explicit_targets={},
                disk_max_usage_percent=settings.disk_max_usage_percent)
    with automatic_collection_paused():  # as the pipeline plans (runtime.heap)
        plan = plan_balanced(planning_view, goal, compute_balance(compute_policy(settings)))
    # The simulated cluster starts with every broker alive; `--kill-broker` kills at t = 0.
    simulated = compute_planning_cluster(cluster, goal)
    params = SimulationParams(bytes_per_sec=bytes_per_sec, tick_seconds=tick_seconds)
    report = run_plan(simulated, plan.targets, limits, params, events=[KillBroker(0.0, b) for b in sorted(dead)],
                      stall_timeout=settings.step_stall_timeout_seconds)
    if as_json:
        typer.echo(json.dumps(report_json(report, limits, len(plan.targets), plan.bytes_moved), indent=2))
    else:
        for line in report_lines(report, limits, len(plan.targets), plan.bytes_moved):
            typer.echo(line)
    if report.invariant_violations:
        raise typer.Exit(1)


def parse_broker(text: str, cluster: Cluster) -> Broker:
    """`7` or `7:/dc1/r2` → a new empty broker, with the log dir paths of the cluster's brokers."""
    from planning.model import Broker, LogDir

    id_text, _, rack = text.partition(":")
    try:
        broker_id = int(id_text)
    except ValueError:
        raise MalformedInputError("--add-broker", text, "ID or ID:RACK with an integer ID", text) from None
    if broker_id < 0 or cluster.broker(broker_id) is not None:
        raise InvalidReplicaAssignmentError(f"--add-broker {broker_id}: the id is negative or already in use")
    template = next((b.log_dirs for b in cluster.brokers if b.log_dirs), ())
    dirs = tuple(LogDir(d.path, True, d.total_bytes, d.total_bytes) for d in template)
    return Broker(broker_id, rack or None, log_dirs=dirs)


def _require_known(cluster: Cluster, broker_ids: List[int], option: str) -> None:
    unknown = sorted(set(broker_ids) - set(cluster.brokers_by_id))
    if unknown:
        raise InvalidReplicaAssignmentError(f"{option}: unknown broker(s) {unknown}")


def report_json(report: SimulationReport, limits: Limits, partitions: int, bytes_to_move: int = 0) -> dict:
    rate = bytes_to_move / report.makespan_seconds if report.makespan_seconds else None
    return {
        "partitions_moved": partitions,
        "bytes_to_move": bytes_to_move,
        "replication_rate_bytes_per_second": rate,
        "time_left_seconds": report.makespan_seconds,
        "steps": report.steps,
        "elections": report.elections,
        "decisions": report.decisions,
        "decisions_computed": report.decisions_computed,
        "finished": report.finished,
        "makespan_seconds": report.makespan_seconds,
        "peak": {
            "partition_movements": report.peak_partition_movements,
            "leader_movements": report.peak_leader_movements,
            "movements_per_broker": report.peak_movements_per_broker,
            "replica_movements_per_step": report.peak_replica_movements,
            "replicas_per_partition": report.peak_replicas_per_partition,
        },
        "limits": {
            "max_partition_movements": limits.max_partition_movements,
            "max_leader_movements": limits.max_leader_movements,
            "max_replica_movements": limits.max_replica_movements,
            "max_movements_per_broker": limits.max_movements_per_broker,
        },
        "stalled_steps": report.stalled_steps,
        "invariant_violations": list(report.invariant_violations),
        "blocked": [{"partition": str(tp), "reason": reason} for tp, reason in report.blocked],
    }


def report_lines(report: SimulationReport, limits: Limits, partitions: int, bytes_to_move: int = 0) -> list[str]:
    from reassigner.operator.views.units import format_duration, format_rate

    seconds = report.makespan_seconds
    makespan = "did not finish" if seconds is None else \
        format_duration(seconds) + (f" ({round(seconds):,} s)" if seconds >= 60 else "")
    rate = f"{format_rate(bytes_to_move / seconds)} overall" if seconds else "unknown"
    lines = [
        f"partitions to move:          {partitions}",
        f"bytes to move:               {bytes_to_move:,} ({rate}; `status` shows the same "
        "figures, observed, while it runs)",
        f"time left before it starts:  {makespan}",
        f"steps:                       {report.steps} ({report.elections} leader elections)",
        f"decisions:                   {report.decisions} (one per tick; {report.decisions_computed} computed, "
        "the others repeated an idle one)",
        f"peak partition movements:    {report.peak_partition_movements} / P = {limits.max_partition_movements}",
        f"peak leader movements:       {report.peak_leader_movements} / L = {limits.max_leader_movements}",
        f"peak movements per broker:   {report.peak_movements_per_broker} / B = {limits.max_movements_per_broker}",
        f"peak replicas added by step: {report.peak_replica_movements} / R = {limits.max_replica_movements}",
        f"peak replicas per partition: {report.peak_replicas_per_partition}",
        f"simulated makespan:          {makespan}",
        f"stalled steps:               {report.stalled_steps}",
        f"invariant violations:        {len(report.invariant_violations)}",
    ]
    lines += [f"  {v}" for v in report.invariant_violations[:20]]
    if report.blocked:
        lines.append(f"blocked at the end:          {len(report.blocked)} partitions")
        lines += [f"  {tp}: {reason}" for tp, reason in report.blocked[:20]]
    return lines
