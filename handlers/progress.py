"""Movement progress (SPEC 5.3-5.6): completion, elections, stalls, cancels, the rolling refill, throttles.

This is the last stage of a decision; it sees every reassignment created or changed earlier in the
same batch, so a plan's first steps start in the batch that made it, and a partition's next step
starts in the batch that sees the previous one complete.

ORDER (the code follows it), for every active reassignment in (topic, partition) order:
1. its partition is gone (topic deleted) → the record is dropped;
2. CANCELLING and Kafka no longer shows a reassignment → revert (default), stop (`keep`), or
   resume towards a target that superseded it (`planning.cancel.compute_cancel_observed`);
3. a step in flight that is complete (`planning.completion.is_step_complete`: replicas == TR in
   order, nothing adding/removing, all of TR in the ISR, TR[0] leading if it elects) is counted;
   an ISR that has not caught up holds it. Kafka finished but TR[0] does not lead → one
   `ElectLeader` command (`<id>:<step>:ElectLeader`). Running past `step_stall_timeout_seconds`
   → one `ReassignmentStalled` alert with its progress; with `stall_action=cancel` the
   reassignment is cancelled (a `CancelReassignment` command, then revert);
4. nothing in flight: at the final target → dropped, with `ReassignmentCompleted` (or
   `ReassignmentCancelled` when a revert got back to the original replicas); otherwise its next
   step (`planning.steps.compute_next_step`) becomes a candidate.
Then the candidates go through the batch rule (`planning.batches.compute_batch_decision`) under
the limits in force now (`handlers.policy.effective_limits`), against every step still in
flight; each step started gets a `ReassignmentStep` command (`<id>:<step>:ReassignmentStep`).
Finally throttles: with `throttle_bytes_per_sec` set, a `SetThrottle` covering every step in
flight whenever steps start, and one `ClearThrottle` once nothing is in flight.

SAFETY (SPEC 6) is the batch rule's: never more steps in flight than P/L/B, never two for one
partition, never |TR| < min ISR, never a replica added to a dead/draining broker or offline dir,
never a step that keeps a replica that can never rejoin the ISR. In mode `observe` no step starts
and no command is issued.

WORKAROUND: the step rule ignores offline replicas, so when the new preferred leader is not yet
a replica it adds it alone and keeps a replica on a dead broker, which the batch rule (rightly)
refuses forever. When the step would keep an offline replica the final target drops, the step is
computed towards the final target with its first live current member put first; the final
reorder (and election) comes as a last step.
"""

from __future__ import annotations

import json

from handlers.alerts import INFO, WARNING, reassignment_step_fields, tp_key
from handlers.context import BatchContext
from handlers.policy import effective_limits
from planning.batches import Limits, PlannedStep, compute_batch_decision
from planning.cancel import compute_cancel_observed
from planning.completion import describe_stall, is_step_complete, is_step_stalled, needs_leader_election
from planning.model import Cluster, PartitionState, TopicPartition
from planning.reassignment import (
    Reassignment,
    ReassignmentState,
    begin_cancel,
    complete_step,
    start_step,
)
from planning.steps import Step, compute_next_step

THROTTLE_MARKER = "Throttle:"
ONCE_PER_STEP = ("ElectLeader:", "ReassignmentStalled:")


def handle_progress(context: BatchContext) -> None:
    state = context.state
    cluster = state.cluster
    limits = effective_limits(context.base_policy, state.config)
    observe = context.policy.mode == "observe"
    updated: dict[TopicPartition, Reassignment] = {}
    candidates: list[PlannedStep] = []
    for tp in sorted(state.reassignments):
        record = state.reassignments[tp]
        partition = cluster.partition(tp)
        if partition is None or not record.active:
            continue
        record = compute_cancel_observed(record, partition)
        record = _follow_step(context, record, partition, observe)
        if record.wants_next_step:
            if tuple(partition.replicas) == record.final_target and not partition.reassigning:
                _announce_finished(context, record)
                continue
            step = compute_step(partition, record, cluster, limits)
            if step is not None and not observe:
                candidates.append(PlannedStep(tp, step, _log_dirs_for(record, step.adding)))
        elif record.state is ReassignmentState.DONE:
            _announce_finished(context, record)
            continue
        updated[tp] = record

    in_flight = [PlannedStep(tp, r.in_flight.step) for tp, r in updated.items() if r.in_flight is not None]
    decision = compute_batch_decision(candidates, in_flight, cluster, limits)
    for planned in decision.started:
        record = start_step(updated[planned.tp], planned.step, context.now_s)
        updated[planned.tp] = record
        number = record.in_flight.number
        step = planned.step
        context.outbox.command(
            record.command_id("ReassignmentStep", number), tp_key(planned.tp), record.reassignment_id,
            number, f"{record.reason}: step {number} to {list(step.target)}", "ReassignmentStep",
            reassignment_step_fields(planned.tp, step.target, step.adding, step.removing,
                                     step.elect_leader, dict(planned.target_log_dirs)))
    context.state = context.state.with_changes(reassignments=updated)
    _forget_finished_steps(context)
    if not observe:
        handle_throttles(context, started=bool(decision.started))


def _follow_step(context: BatchContext, record: Reassignment, partition: PartitionState,
                 observe: bool) -> Reassignment:
    """Step 3 of the module docstring for one record."""
    flight = record.in_flight
    if flight is None or record.state is ReassignmentState.CANCELLING:
        return record
    step, number = flight.step, flight.number
    if is_step_complete(partition, step):
        return complete_step(record)
    if needs_leader_election(partition, step):
        if not observe and context.open_alert(f"ElectLeader:{record.reassignment_id}:{number}"):
            context.outbox.command(
                record.command_id("ElectLeader", number), tp_key(record.tp), record.reassignment_id,
                number, f"{record.reason}: step {number} done, electing broker {step.target[0]}",
                "ElectLeader", {"topic": record.tp.topic, "partition": record.tp.partition,
                                "preferred_leader": step.target[0]})
        return record
    timeout = context.policy.step_stall_timeout_seconds
    if is_step_stalled(flight.started_at, context.now_s, timeout) \
            and context.open_alert(f"ReassignmentStalled:{record.reassignment_id}:{number}"):
        message = describe_stall(partition, step, flight.started_at, context.now_s)
        cancel = context.policy.stall_action == "cancel" and not observe
        context.outbox.alert("ReassignmentStalled", WARNING, tp_key(record.tp),
                             message + ("; cancelling it" if cancel else ""),
                             {"reassignment_id": record.reassignment_id, "step": number,
                              "target": str(list(step.target)), "stall_action": context.policy.stall_action})
        if cancel:
            context.outbox.command(
                record.command_id("CancelReassignment", number), tp_key(record.tp),
                record.reassignment_id, number, f"step {number} stalled", "CancelReassignment",
                {"topic": record.tp.topic, "partition": record.tp.partition})
            return begin_cancel(record, keep=False, reason=f"step {number} stalled")
    return record


def compute_step(partition: PartitionState, record: Reassignment, cluster: Cluster,
                 limits: Limits) -> Step | None:
    """The partition's next step towards the record's final target (see WORKAROUND above)."""
    final = record.final_target
    min_isr = cluster.min_isr(partition.topic)
    step = compute_next_step(partition.replicas, final, partition.isr, limits.max_replica_movements,
                             min_isr, leader=partition.leader)
    if step is None:
        return None
    stuck = {b for b in step.target if b not in step.adding and b not in final
             and not is_replica_online(cluster, partition, b)}
    if not stuck:
        return step
    live_first = next((b for b in final if b in partition.replicas and b not in stuck
                       and is_replica_online(cluster, partition, b)), None)
    if live_first is None or live_first == final[0]:
        return step
    interim = (live_first,) + tuple(b for b in final if b != live_first)
    return compute_next_step(partition.replicas, interim, partition.isr, limits.max_replica_movements,
                             min_isr, leader=partition.leader) or step


def is_replica_online(cluster: Cluster, partition: PartitionState, broker_id: int) -> bool:
    """The replica can be in sync: its broker is alive and its dir (if known) is online."""
    broker = cluster.broker(broker_id)
    if broker is None or not broker.alive or broker_id in partition.offline_replicas:
        return False
    path = partition.log_dir_of(broker_id)
    if path is None or not broker.log_dirs:
        return True
    return any(d.path == path and d.online for d in broker.log_dirs)


def _announce_finished(context: BatchContext, record: Reassignment) -> None:
    key = tp_key(record.tp)
    details = {"reassignment_id": record.reassignment_id, "steps": record.steps_done,
               "replicas": str(list(record.final_target)),
               "original_replicas": str(list(record.original_replicas))}
    if record.state is ReassignmentState.RUNNING:
        context.outbox.alert("ReassignmentCompleted", INFO, key,
                             f"{record.tp} reached {list(record.final_target)} in {record.steps_done} steps "
                             f"({record.reason})", details)
    elif record.state is ReassignmentState.REVERTING:
        context.outbox.alert("ReassignmentCancelled", INFO, key,
                             f"{record.tp} is back at its original replicas {list(record.final_target)} "
                             f"({record.reason})", details)
    else:
        context.outbox.alert("ReassignmentCancelled", INFO, key,
                             f"{record.tp} stopped where it is ({record.reason})", details)


def _log_dirs_for(record: Reassignment, adding: tuple[int, ...]) -> tuple[tuple[int, str], ...]:
    if not record.target_log_dirs or len(record.target_log_dirs) != len(record.final_target):
        return ()
    wanted = dict(zip(record.final_target, record.target_log_dirs))
    return tuple((b, wanted[b]) for b in adding if wanted.get(b) is not None)


def _forget_finished_steps(context: BatchContext) -> None:
    """Once-per-step markers of steps no longer in flight are dropped from `open_alerts`."""
    live = {f"{prefix}{r.reassignment_id}:{r.in_flight.number}"
            for r in context.state.reassignments.values() if r.in_flight is not None
            for prefix in ONCE_PER_STEP}
    context.close_alerts(k for k in context.state.open_alerts
                         if k.startswith(ONCE_PER_STEP) and k not in live)


def handle_throttles(context: BatchContext, started: bool) -> None:
    """SetThrottle over every step in flight when steps start; ClearThrottle once none is."""
    state = context.state
    marker = next((k for k in sorted(state.open_alerts) if k.startswith(THROTTLE_MARKER)), None)
    flying = {tp: r.in_flight.step for tp, r in state.reassignments.items() if r.in_flight is not None}
    rate = context.policy.throttle_bytes_per_sec
    if started and rate:
        partitions = []
        brokers: set[int] = set()
        for tp in sorted(flying):
            step = flying[tp]
            partition = state.cluster.partition(tp)
            leaders = tuple(b for b in partition.replicas if b not in step.adding)
            brokers |= set(partition.replicas) | set(step.target)
            partitions.append({"topic": tp.topic, "partition": tp.partition,
                               "leader_broker_ids": list(leaders), "follower_broker_ids": list(step.adding)})
        before = json.loads(marker[len(THROTTLE_MARKER):]) if marker else {"brokers": [], "partitions": []}
        sequence = state.command_sequence + 1
        context.outbox.command(
            f"throttle-{sequence}:0:SetThrottle", "throttle", None, 0,
            f"throttle {len(flying)} steps in flight", "SetThrottle",
            {"broker_ids": sorted(brokers), "rate_bytes_per_sec": rate,
             "logdir_rate_bytes_per_sec": context.policy.logdir_throttle_bytes_per_sec,
             "partitions": partitions})
        new_marker = THROTTLE_MARKER + json.dumps(
            {"brokers": sorted(brokers | set(before["brokers"])),
             "partitions": sorted({(p["topic"], p["partition"]) for p in partitions}
                                  | {tuple(tp) for tp in before["partitions"]})},
            separators=(",", ":"))
        context.close_alerts([marker] if marker else [])
        context.state = context.state.with_changes(command_sequence=sequence)
        context.open_alert(new_marker)
    elif marker is not None and not flying:
        throttled = json.loads(marker[len(THROTTLE_MARKER):])
        sequence = state.command_sequence + 1
        context.outbox.command(
            f"throttle-{sequence}:0:ClearThrottle", "throttle", None, 0, "nothing moves any more",
            "ClearThrottle",
            {"broker_ids": throttled["brokers"],
             "partitions": [{"topic": t, "partition": p, "leader_broker_ids": [], "follower_broker_ids": []}
                            for t, p in throttled["partitions"]]})
        context.close_alerts([marker])
        context.state = context.state.with_changes(command_sequence=sequence)
