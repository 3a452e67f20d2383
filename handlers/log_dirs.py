"""Intra-broker log-dir balance (a log dir added, dirs unbalanced; Kafka's KIP-113 moves): the
reaction, the requests and the progress of log-dir moves, over `planning.movement.log_dirs`.

RULES:
- TRIGGER (`handle_log_dir_balance`, after the other triggers). A broker is planned when it is
  alive, has two or more online dirs, owns no log-dir move, no active reassignment involves it
  (its copies would change the dirs under the plan), it is not marked (`LogDirBalance:<broker>`
  in `open_alerts`), and the imbalance its dirs reported exceeds `logdir.imbalance.threshold`.
  The mark is set when the broker is planned — also when no move helps, so an imbalance the
  product cannot reduce is judged once, not once per batch — and dropped when the broker's dirs
  are within the threshold or change (a dir added, removed, failed or back). In mode auto the
  moves are owned and run; in approve and observe one `LogDirsUnbalanced` (WARNING) says what
  the plan would move and how to run it (`reassigner request balance-dirs`).
- REQUEST balance-dirs (a `Rebalance` with `log_dirs`): each broker named (every broker with
  two or more online dirs when none is) is planned at once, whatever its mark; an unknown broker
  refuses the request (INVALID_REPLICA_ASSIGNMENT); a broker that already owns moves is left
  alone and the alert says so. Explicit: it runs in approve mode; in observe it is reported only.
- REQUEST reassign (the Kafka tool's JSON) naming a dir for a replica that stays on its broker:
  the replica gets a log-dir move when the dir is not the one it is in (`plan_requested_dirs`).
- CANCEL: a Cancel request also cancels the log-dir moves of the partitions in its scope: a
  move not started is dropped, a started one is sent back to its origin dir at once.
- PROGRESS (`handle_log_dir_progress`, last in the batch): `compute_log_dir_progress` under
  `reassignment.max.concurrent.logdir.movements.per.broker` and `step.stall.timeout`; partitions
  with an inter-broker step in flight wait. Each move started → one `LogDirMove` command (id
  `LogDirTask.command_id`, key `<topic>-<partition>` like the partition's other commands), with
  the log-dir throttle when one is set; each stalled move → one `LogDirMoveStalled` (WARNING)
  per command; a move whose target dir went offline → `LogDirMoveFailed` (WARNING). When the
  last move of a plan on a broker ends, `LogDirsBalanced` (INFO) gives the broker's figures.
  In mode observe, or paused (`reassignment.paused`), nothing starts.
- THROTTLE: a broker whose moves carried a throttle is remembered (`LogDirThrottle:<broker>`);
  once none of its moves is in flight, a `ClearThrottle` with `log_dir_only` removes that one
  rate (inter-broker throttles stay); a down broker's waits until it is back (Kafka serves a
  broker's configs on the broker), and one that left the cluster has none. A clear whose result
  says it failed marks its broker again at the next snapshot, or when the broker is back
  (`handlers.progress.handle_failed_clears`), and is asked again under this same rule.
- COMMAND RESULTS (`handle_log_dir_result`): a failed `LogDirMove` with a transient error waits
  for a slot again without an alert, while its commands number at most `step.retry.max`;
  otherwise the move is dropped with one `CommandFailed` (WARNING) naming what to do.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping

from handlers.context import BatchContext
from handlers.outbox import INFO, WARNING, broker_subject, summarise, tp_key
from handlers.throttle import issue_tracked_clear
from planning.model import Broker, Cluster, TopicPartition
from planning.movement.log_dirs import (
    LogDirEnding,
    LogDirPlan,
    LogDirTask,
    begin_log_dir_cancel,
    compute_dir_imbalance,
    compute_log_dir_progress,
    plan_log_dir_balance,
)
from schemas.errors import InvalidReplicaAssignmentError

BALANCE_MARKER = "LogDirBalance:"
THROTTLE_MARKER = "LogDirThrottle:"
STALL_MARKER = "LogDirMoveStalled:"

TaskKey = tuple[int, TopicPartition]


# --- trigger and request ----------------------------------------------------------------------
def handle_log_dir_balance(context: BatchContext, dirs_changed: Iterable[int]) -> None:
    """The TRIGGER rule: plan every broker whose dirs are out of balance (module docstring)."""
    state = context.state
    context.close_alerts(f"{BALANCE_MARKER}{b}" for b in dirs_changed)
    threshold = context.policy.logdir_imbalance_threshold
    # Judged once per brokers tuple, not broker by broker in every batch: a batch of partition
    # events or a Tick carries the very same brokers (`Cluster.derive_from_brokers`).
    unbalanced, balanced_markers = state.cluster.derive_from_brokers(
        ("log dir imbalance", threshold), lambda brokers: compute_unbalanced_brokers(brokers, threshold))
    context.close_alerts(balanced_markers)
    owners = {key[0] for key in state.log_dir_moves}
    involved: set[int] | None = None
    for broker, imbalance in unbalanced:
        marker = f"{BALANCE_MARKER}{broker.id}"
        if not broker.alive or broker.id in owners or marker in context.state.open_alerts:
            continue
        if involved is None:
            involved = compute_brokers_in_reassignments(context)
        if broker.id in involved:
            continue
        context.open_alert(marker)
        plan = plan_log_dir_balance(context.state.cluster, broker.id, threshold, _moving_partitions(context),
                                    context.policy.disk_plan_limit_percent)
        task_id = context.next_plan_id("dirs") if context.policy.mode == "auto" and plan.moves else None
        _announce_plan(context, plan, threshold, broker_subject(broker.id), task_id,
                       f"dirs of broker {broker.id} {imbalance:.0%} off their share")
        if task_id is not None:
            own_log_dir_moves(context, plan.moves, task_id, f"dirs of broker {broker.id} unbalanced")


def compute_unbalanced_brokers(brokers: Iterable[Broker], threshold: float,
                               ) -> tuple[tuple[tuple[Broker, float], ...], frozenset[str]]:
    """(broker, imbalance) of each broker whose dirs are off their share by more than
    `threshold`, in the brokers' order, and the balance markers of all the others (MEASURE)."""
    unbalanced: list[tuple[Broker, float]] = []
    balanced: list[str] = []
    for broker in brokers:
        imbalance = compute_dir_imbalance(broker)
        if imbalance is None or imbalance <= threshold:
            balanced.append(f"{BALANCE_MARKER}{broker.id}")
        else:
            unbalanced.append((broker, imbalance))
    return tuple(unbalanced), frozenset(balanced)


def handle_balance_dirs_request(context: BatchContext, request_id: str, broker_ids: Iterable[int]) -> None:
    """The REQUEST balance-dirs rule (module docstring)."""
    cluster = context.state.cluster
    named = sorted(set(broker_ids))
    unknown = [b for b in named if cluster.broker(b) is None]
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"cannot balance the log dirs of broker(s) {unknown}: not in the cluster "
            f"(known: {sorted(cluster.brokers_by_id)})")
    brokers = named or [b.id for b in cluster.brokers if len(b.online_log_dirs) >= 2]
    owners = {key[0] for key in context.state.log_dir_moves}
    threshold = context.policy.logdir_imbalance_threshold
    execute = context.policy.mode != "observe"
    busy = [b for b in brokers if b in owners]
    for broker_id in (b for b in brokers if b not in owners):
        context.open_alert(f"{BALANCE_MARKER}{broker_id}")
        plan = plan_log_dir_balance(context.state.cluster, broker_id, threshold, _moving_partitions(context),
                                    context.policy.disk_plan_limit_percent)
        task_id = f"{request_id}-b{broker_id}" if execute and plan.moves else None
        _announce_plan(context, plan, threshold, request_id, task_id,
                       f"balance-dirs request {request_id}, broker {broker_id}")
        if task_id is not None:
            own_log_dir_moves(context, plan.moves, task_id, f"balance-dirs request {request_id}")
    if busy:
        context.outbox.alert("LogDirsUnbalanced", INFO, request_id,
                             f"balance-dirs request {request_id}: broker(s) {busy} already have log-dir "
                             "moves running; they were left alone", {"brokers": str(busy)})


def plan_requested_dirs(context: BatchContext, request_id: str,
                        dirs: Mapping[TopicPartition, tuple[str | None, ...]],
                        targets: Mapping[TopicPartition, tuple[int, ...]]) -> int:
    """Log-dir moves for the replicas a reassign request keeps on their broker but names another
    dir for (the REQUEST reassign rule); returns how many were owned."""
    cluster = context.state.cluster
    tasks = dict(context.state.log_dir_moves)
    owned = 0
    for tp in sorted(dirs):
        partition = cluster.partition(tp)
        for broker_id, path in zip(targets[tp], dirs[tp]):
            if path is None or partition is None or broker_id not in partition.replicas:
                continue
            current = partition.log_dir_of(broker_id)
            broker = cluster.broker(broker_id)
            if current == path and (broker is None or not broker.has_future_replica(tp)):
                continue
            existing = tasks.get((broker_id, tp))
            if existing is not None and existing.target_dir == path:
                continue
            tasks[(broker_id, tp)] = LogDirTask(tp, broker_id, path, current, partition.size_bytes or 0,
                                                f"reassign request {request_id}", request_id)
            owned += 1
    context.state = context.state.with_changes(log_dir_moves=tasks)
    return owned


def cancel_log_dir_moves(context: BatchContext, request_id: str, topic: str | None,
                         partition: int | None) -> int:
    """The CANCEL rule for the moves in scope; returns how many were cancelled."""
    tasks = dict(context.state.log_dir_moves)
    cancelled = 0
    for key, task in sorted(tasks.items(), key=lambda item: (item[0][0], item[0][1])):
        if (topic is not None and task.tp.topic != topic) or (partition is not None and task.tp.partition != partition):
            continue
        cancelled += 1
        back = begin_log_dir_cancel(task, context.state.cluster, context.now_s)
        if back is None:
            del tasks[key]
        elif back is not task:
            tasks[key] = replace(back, reason=f"cancelled by {request_id}")
            _issue(context, tasks[key])
    context.state = context.state.with_changes(log_dir_moves=tasks)
    return cancelled


# --- progress ---------------------------------------------------------------------------------
def handle_log_dir_progress(context: BatchContext) -> None:
    """The PROGRESS and THROTTLE rules (module docstring)."""
    state = context.state
    tasks = state.log_dir_moves
    if not tasks and not any(k.startswith(THROTTLE_MARKER) for k in state.open_alerts):
        return
    busy = set(state.compute_records_in_flight())
    busy |= {t.tp for t in tasks.values()
             if (p := state.cluster.partition(t.tp)) is not None and p.reassigning}
    progress = compute_log_dir_progress(
        tasks, state.cluster, busy, context.policy.max_logdir_movements_per_broker, context.now_s,
        context.policy.step_stall_timeout_seconds, start_moves=context.policy.mode != "observe" and not context.policy.paused)
    context.state = state.with_changes(log_dir_moves=dict(progress.tasks))
    for task in progress.started:
        _issue(context, task)
    for task in progress.stalled:
        if context.open_alert(f"{STALL_MARKER}{task.command_id()}"):
            context.outbox.alert(
                "LogDirMoveStalled", WARNING, tp_key(task.tp),
                f"moving {task.tp} on broker {task.broker_id} into {task.target_dir} has run for "
                f"{context.now_s - task.started_at:.0f} s ({_describe_copy(state.cluster, task)}); "
                "cancel it with `reassigner request cancel` or raise the log-dir throttle",
                {"broker_id": task.broker_id, "target_dir": task.target_dir, "task_id": task.task_id})
    live = {f"{STALL_MARKER}{t.command_id()}" for t in progress.tasks.values()}
    context.close_alerts(k for k in context.state.open_alerts if k.startswith(STALL_MARKER) and k not in live)
    for task, ending in progress.finished:
        if ending is LogDirEnding.DIR_OFFLINE:
            context.outbox.alert("LogDirMoveFailed", WARNING, tp_key(task.tp),
                                 f"{task.tp} on broker {task.broker_id} cannot move into {task.target_dir}: "
                                 "that dir is offline or gone; the move is dropped",
                                 {"broker_id": task.broker_id, "target_dir": task.target_dir})
    _announce_balanced(context, progress.finished)
    _clear_throttles(context)


def handle_log_dir_result(context: BatchContext, result: Mapping[str, Any], code: str, detail: str,
                          transient: bool) -> None:
    """The COMMAND RESULTS rule for one failed LogDirMove (module docstring)."""
    tasks = context.state.log_dir_moves
    task = next((t for t in tasks.values() if t.command_id() == result.get("command_id")), None)
    if task is None:
        return
    remaining = dict(tasks)
    if transient and task.number <= context.policy.step_retry_max:
        remaining[task.key] = replace(task, started_at=None)  # quietly: a broker away is no news yet
    else:
        del remaining[task.key]
        context.outbox.alert("CommandFailed", WARNING, tp_key(task.tp),
                             f"moving {task.tp} on broker {task.broker_id} into {task.target_dir} failed: "
                             f"{detail}; the move is dropped (check the dir with kafka-log-dirs.sh, then "
                             "`reassigner request balance-dirs`)",
                             {"command_id": task.command_id(), "error_code": code, "command_kind": "LogDirMove"})
    context.state = context.state.with_changes(log_dir_moves=remaining)


# --- helpers ----------------------------------------------------------------------------------
def compute_brokers_in_reassignments(context: BatchContext) -> set[int]:
    """Brokers any active reassignment adds to, keeps or drops (its copies change their dirs)."""
    involved: set[int] = set()
    for record in context.state.reassignments.values():
        involved.update(record.final_target)
        involved.update(record.original_replicas)
        if record.in_flight is not None:
            involved.update(record.in_flight.step.target)
    return involved


def _moving_partitions(context: BatchContext) -> set[TopicPartition]:
    return set(context.state.reassignments)


def own_log_dir_moves(context: BatchContext, moves, task_id: str, reason: str) -> None:
    """Make `moves` (`PlannedDirMove`s) the controller's log-dir tasks, run under `task_id`."""
    tasks = dict(context.state.log_dir_moves)
    for move in moves:
        tasks[(move.broker_id, move.tp)] = LogDirTask(move.tp, move.broker_id, move.target_dir, move.origin_dir,
                                                      move.size_bytes, reason, task_id)
    context.state = context.state.with_changes(log_dir_moves=tasks)


def _announce_plan(context: BatchContext, plan: LogDirPlan, threshold: float, subject: str,
                   task_id: str | None, reason: str) -> None:
    """One `LogDirsUnbalanced` for a plan; `task_id` is the id its moves run under (the one its
    `LogDirsBalanced` names at the end), None when the plan is only shown."""
    execute = task_id is not None
    measure = "bytes" if plan.by_bytes else "replica count"
    moved = sum(m.size_bytes for m in plan.moves)
    details = {"broker_id": plan.broker_id, "moves": len(plan.moves), "bytes": moved,
               "imbalance_before": f"{plan.imbalance_before:.3f}", "imbalance_after": f"{plan.imbalance_after:.3f}",
               "threshold": f"{threshold:g}", "measure": measure, "executed": str(execute).lower(),
               "task_id": task_id or "",
               "moves_list": summarise([f"{m.tp}:{m.origin_dir}->{m.target_dir}" for m in plan.moves], 10)}
    if not plan.moves:
        message = (f"{reason} (by {measure}, threshold {threshold:.0%}): no move between its dirs "
                   "brings them closer (a replica larger than the gap); nothing moved")
        if plan.imbalance_before <= threshold:
            message = f"{reason}: the dirs are within {threshold:.0%} of their share; nothing to move"
        context.outbox.alert("LogDirsUnbalanced", INFO if plan.imbalance_before <= threshold else WARNING,
                             subject, message, details)
        return
    what = (f"{len(plan.moves)} replicas ({moved:,} bytes) between the dirs of broker {plan.broker_id}, "
            f"imbalance {plan.imbalance_before:.0%} → {plan.imbalance_after:.0%} by {measure}")
    if execute:
        context.outbox.alert("LogDirsUnbalanced", INFO, subject, f"{reason}: moving {what}", details)
    else:
        context.outbox.alert("LogDirsUnbalanced", WARNING, subject,
                             f"{reason}: would move {what} (mode {context.policy.mode}: not executed; "
                             f"run `reassigner request balance-dirs --broker {plan.broker_id}`)", details)


def _issue(context: BatchContext, task: LogDirTask) -> None:
    rate = context.policy.logdir_throttle_bytes_per_sec
    context.outbox.command(
        task.command_id(), tp_key(task.tp), task.task_id, task.number,
        f"{task.reason}: {task.tp} on broker {task.broker_id} into {task.target_dir}", "LogDirMove",
        {"broker_id": task.broker_id, "topic": task.tp.topic, "partition": task.tp.partition,
         "target_dir": task.target_dir, "throttle_bytes_per_sec": rate})
    if rate:
        context.open_alert(f"{THROTTLE_MARKER}{task.broker_id}")


def _describe_copy(cluster: Cluster, task: LogDirTask) -> str:
    broker = cluster.broker(task.broker_id)
    partition = cluster.partition(task.tp)
    where = partition.log_dir_of(task.broker_id) if partition is not None else None
    copying = broker is not None and broker.has_future_replica(task.tp)
    return f"the replica is in {where}, " + ("its copy is still catching up" if copying
                                             else "no copy has started")


def _announce_balanced(context: BatchContext, finished) -> None:
    ended_plans = {(task.broker_id, task.task_id) for task, _ in finished}
    if not ended_plans:
        return
    running = {(t.broker_id, t.task_id) for t in context.state.log_dir_moves.values()}
    for broker_id, task_id in sorted(ended_plans - running):
        broker = context.state.cluster.broker(broker_id)
        imbalance = compute_dir_imbalance(broker) if broker is not None else None
        usage = ", ".join(f"{d.path} {d.replica_count} replicas/{d.replica_bytes or 0:,} B"
                          for d in (broker.online_log_dirs if broker is not None else ()))
        off = "" if imbalance is None else f"{imbalance:.0%} off their share at most; "
        context.outbox.alert(
            "LogDirsBalanced", INFO, broker_subject(broker_id),
            f"log-dir moves of {task_id} on broker {broker_id} are over; its dirs are {off}now: {usage}",
            {"broker_id": broker_id, "task_id": task_id,
             "imbalance": "" if imbalance is None else f"{imbalance:.3f}"})


def _clear_throttles(context: BatchContext) -> None:
    moving = {t.broker_id for t in context.state.log_dir_moves.values() if t.started_at is not None}
    for marker in sorted(k for k in context.state.open_alerts if k.startswith(THROTTLE_MARKER)):
        broker_id = int(marker[len(THROTTLE_MARKER):])
        if broker_id in moving:
            continue
        broker = context.state.cluster.broker(broker_id)
        if broker is None:  # it left the cluster: nothing to clear
            context.close_alerts([marker])
            continue
        if not broker.alive:
            continue  # its configs are served by the broker itself: cleared once it is back
        # Kept until its result: a failed one is asked again (`handlers.progress.handle_failed_clears`).
        issue_tracked_clear(context, f"log-dir moves on broker {broker_id} are over",
                            {"broker_ids": [broker_id], "partitions": [], "log_dir_only": True})
        context.close_alerts([marker])
