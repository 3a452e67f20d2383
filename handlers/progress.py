"""Movement progress: what the movement decision means for the pipeline.

The decision itself — completions, elections, stalls, observed cancels, the rolling refill under
the limits, the offline-replica rule — is `planning.movement.advance.compute_stepping`, the same one the
simulator runs. This is the last stage of a batch: it sees every reassignment created or changed
earlier in the same batch, so a plan's first steps start in the batch that made it, and a
partition's next step starts in the batch that sees the previous one complete.

ORDER (the code follows it):
1. decide: `compute_stepping` over every reassignment, under the limits in force now
   (`handlers.policy.effective_limits`), with `step_stall_timeout_seconds`; in mode `observe`
   no step starts (`start_steps=False`) and no command is issued; paused
   (`reassignment.paused`), no step starts either. It is told what changed since the decision
   that made the memo (`changed`) when the state's change log vouches for it
   (`ControllerState.compute_stepping_changes`): then it looks at those records and the ones in
   flight only, O(changed + in flight); otherwise (after a restart, or a write the log did not
   see) at every record — the same decision either way. Why each examined candidate waits is
   kept in `state.waiting` (`handlers.waiting`) for `list` and `status`.
2. for every partition the decision names, in (topic, partition) order:
   - Kafka finished its step but TR[0] does not lead → one `ElectLeader` command per step
     (`<id>:<step>:ElectLeader`);
   - its step runs past the stall timeout → one `ReassignmentStalled` alert per step with its
     progress; with `stall_action=cancel` also a `CancelReassignment` command, and the
     reassignment is cancelled (revert once Kafka shows the step cancelled);
   - DONE → `ReassignmentCompleted`, or `ReassignmentCancelled` (back at the original replicas,
     or stopped where it is with `keep`); nothing when its topic was deleted.
   - another tool cancelled or replaced its step → `ReassignmentInterrupted`; the step has
     ended and the next one is decided from what Kafka shows (`handlers.external`).
   "Once per step" is a marker in `state.open_alerts` (`ElectLeader:<id>:<step>`,
   `ReassignmentStalled:<id>:<step>`), dropped when the step is no longer in flight.
   Then the moves of other tools (`state.external_moves`) are brought up to date for the
   partitions that changed, with their `ExternalReassignment` alerts (`handlers.external`).
3. each step started → a `ReassignmentStep` command (`<id>:<step>:ReassignmentStep`); the state
   keeps the active reassignments only, and the replication meter counts the bytes of the steps
   that completed (`planning.movement.eta`: the observed rate and the time left) and the
   reassignments that ended, with their steps and bytes (the movement's overall progress). With
   `throttle_bytes_per_sec` set the step carries its throttle (the rate, the log-dir rate, and
   `throttle_sequence` = `command_sequence` now), which the executor sets on the step's brokers
   and replicas before it submits the step (`reassigner.edge.throttles`): no step starts
   unthrottled, whatever order the executor reads the commands topic's partitions in.
4. throttles: the `Throttle:` marker in `open_alerts` accumulates the brokers and partitions of
   the steps started while any is in flight, and the rate they were given (static bytes/s, 0,
   or "adaptive"). When that changes in static mode while steps fly (`config set
   throttle.bytes.per.sec`, or `throttle.mode=static` after adaptive), the new rate is restated
   to them at once: one `SetThrottle` over the marker's brokers and the steps' replicas, or,
   with no rate, a `ClearThrottle` of the brokers' rates alone; a step started from now on
   carries it too. Once nothing is in flight, one `ClearThrottle` over them, numbered
   `throttle_sequence` = the sequence it takes, so it removes the throttles of the steps issued
   before it and never those of a later step read before it. A partition of the marker that
   Kafka still moves with no step of ours recorded (`external_moves`: the marker of a state
   rebuilt after the store was lost, `streams.store_recovery`) holds the clear back too. DOWN
   BROKERS: Kafka serves a broker's configs on the broker itself, so a throttle command names
   only the live brokers (one down broker would fail the whole command, and the topics' replica
   lists would stay throttled); the marker keeps the down ones, and each is cleared in the
   batch that sees it alive again (a broker that left the cluster is dropped: nothing to clear).
   FAILED CLEARS: a CommandResult names its command, not what it clears, so the state keeps the
   brokers and partitions of each such clear until its result (`handlers.throttle.
   issue_tracked_clear`); when the result says it failed (a broker died between our view and the
   command, an ACL...) they go back into the `Throttle:` marker, merged with any marker there, at
   the next snapshot or when one of its brokers is back (`handle_failed_clears`, before the
   batch's results), and this same rule clears them again once nothing is in flight, the live
   brokers only — never at once, so a broker that keeps refusing is asked once a snapshot, not in
   a loop of results (the cordons' retry, `handlers.cordons`). A failed SetThrottle, or the
   restated rate's ClearThrottle, is not retried: the marker still names its brokers.
   The executor removes only what it set itself (others' throttles are preserved).

SAFETY is the batch rule's (`planning.movement.batches`): never more steps in flight than
P/L/B, never two for one partition, never |TR| < min ISR, never a replica added to a
dead/draining broker or offline dir, never a step that keeps a replica that can never rejoin
the ISR.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from handlers.outbox import INFO, WARNING, reassignment_step_fields, tp_key
from handlers.context import BatchContext
from handlers.external import handle_external_moves, report_interrupted
from handlers.plan_ends import end_plan_member
from handlers.policy import effective_limits
from handlers.log_dirs import THROTTLE_MARKER as LOG_DIR_THROTTLE_MARKER
from handlers.throttle import (
    compute_step_rates,
    decide_throttles_now,
    issue_throttle_command,
    issue_tracked_clear,
    leave_adaptive,
    take_failed_clears,
)
from handlers.waiting import compute_waiting
from planning.model import Cluster, TopicPartition
from planning.movement.reassignment import Reassignment, begin_cancel
from planning.movement.advance import Ending, compute_stepping
from planning.movement.eta import advance_meter, compute_completed_step_bytes, compute_finished_work
from planning.movement.partition_steps import Step

THROTTLE_MARKER = "Throttle:"
ONCE_PER_STEP = ("ElectLeader:", "ReassignmentStalled:")


def handle_progress(context: BatchContext) -> None:
    state = context.state
    observe = context.policy.mode == "observe"
    changed = state.compute_stepping_changes()
    adaptive = context.policy.throttle_mode == "adaptive" and not observe
    limits = effective_limits(context.base_policy, state.config, state.throttles)
    decision = compute_stepping(  # 1
        state.reassignments, state.cluster, limits,
        context.now_s, context.policy.step_stall_timeout_seconds,
        start_steps=not observe and not context.policy.paused,
        memo=state.stepping_memo, changed=changed)
    decided = decision.reassignments
    if adaptive:  # before the steps' commands: they carry the rates and the sequence it decides
        decide_throttles_now(context, compute_flying(decision))
    elif context.state.throttles:
        leave_adaptive(context, compute_flying(decision))
    patch: dict[TopicPartition, Reassignment | None] = {tp: decided[tp] for tp in decision.replaced}
    elections = set(decision.elections)
    stalled = dict(decision.stalled)
    finished = dict(decision.finished)
    for tp in sorted(elections | set(stalled) | set(finished)):  # 2
        record = decided[tp]
        if tp in elections and not observe:
            _elect_leader(context, record)
        elif tp in stalled:
            cancelled = _report_stall(context, record, stalled[tp], observe)
            if cancelled is not record:
                patch[tp] = cancelled
        elif tp in finished:
            _announce_finished(context, record, finished[tp])
    for tp, message in decision.interrupted:
        report_interrupted(context, decided[tp], message, tp)
    for planned in decision.started:  # 3
        record = decided[planned.tp]
        number = record.in_flight.number
        step = planned.step
        context.outbox.command(
            record.command_id("ReassignmentStep", number), tp_key(planned.tp), record.reassignment_id,
            number, f"{record.reason}: step {number} to {list(step.target)}", "ReassignmentStep",
            reassignment_step_fields(planned.tp, step.target, step.adding, step.removing,
                                     step.elect_leader, dict(planned.target_log_dirs), record.final_target)
            | compute_step_throttle_fields(context, planned.tp, step.adding))
    for tp in finished:  # the state holds active records only: drop the ones that ended
        patch[tp] = None
    copied = compute_completed_step_bytes(state.reassignments, decision.completed, state.cluster)
    context.steps_completed.extend(decision.completed)
    context.bytes_moved += copied
    after = context.state.with_records(patch)
    ended = compute_finished_work((decided[tp] for tp in sorted(finished)), state.cluster)
    meter = advance_meter(state.replication_meter, copied, bool(after.reassignments), context.now_ms, ended)
    # The memo is exact for the records the decision returned: the stall cancels and the
    # dropped records are what differs from them now.
    context.state = after.with_changes(
        replication_meter=meter, waiting=compute_waiting(decision.deferred, after.reassignments),
    ).with_stepping(decision.memo, (tp for tp, record in patch.items() if record is not decided.get(tp)))
    _forget_finished_steps(context)
    handle_external_moves(context, None if changed is None else set(changed) | set(patch))
    if not observe:
        handle_throttles(context, started=bool(decision.started))  # 4


def _elect_leader(context: BatchContext, record: Reassignment) -> None:
    step, number = record.in_flight.step, record.in_flight.number
    if context.open_alert(f"ElectLeader:{record.reassignment_id}:{number}"):
        context.outbox.command(
            record.command_id("ElectLeader", number), tp_key(record.tp), record.reassignment_id,
            number, f"{record.reason}: step {number} done, electing broker {step.target[0]}",
            "ElectLeader", {"topic": record.tp.topic, "partition": record.tp.partition,
                            "preferred_leader": step.target[0]})


def _report_stall(context: BatchContext, record: Reassignment, message: str, observe: bool) -> Reassignment:
    """One alert per stalled step; with `stall_action=cancel` (not in observe) cancel it."""
    step, number = record.in_flight.step, record.in_flight.number
    if not context.open_alert(f"ReassignmentStalled:{record.reassignment_id}:{number}"):
        return record
    cancel = context.policy.stall_action == "cancel" and not observe
    context.outbox.alert("ReassignmentStalled", WARNING, tp_key(record.tp),
                         message + ("; cancelling it" if cancel else ""),
                         {"reassignment_id": record.reassignment_id, "step": number,
                          "target": str(list(step.target)), "stall_action": context.policy.stall_action})
    if not cancel:
        return record
    context.outbox.command(
        record.command_id("CancelReassignment", number), tp_key(record.tp),
        record.reassignment_id, number, f"step {number} stalled", "CancelReassignment",
        {"topic": record.tp.topic, "partition": record.tp.partition})
    return begin_cancel(record, keep=False, reason=f"step {number} stalled")


def _announce_finished(context: BatchContext, record: Reassignment, ending: Ending) -> None:
    end_plan_member(context, record, completed=ending is Ending.COMPLETED)
    if ending is Ending.DELETED:
        return
    key = tp_key(record.tp)
    details = {"reassignment_id": record.reassignment_id, "steps": record.steps_done,
               "replicas": str(list(record.final_target)),
               "original_replicas": str(list(record.original_replicas))}
    if ending is Ending.COMPLETED:
        context.outbox.alert("ReassignmentCompleted", INFO, key,
                             f"{record.tp} reached {list(record.final_target)} in {record.steps_done} steps "
                             f"({record.reason})", details)
    elif ending is Ending.REVERTED:
        context.outbox.alert("ReassignmentCancelled", INFO, key,
                             f"{record.tp} is back at its original replicas {list(record.final_target)} "
                             f"({record.reason})", details)
    else:
        context.outbox.alert("ReassignmentCancelled", INFO, key,
                             f"{record.tp} stopped where it is ({record.reason})", details)


def _forget_finished_steps(context: BatchContext) -> None:
    """Once-per-step markers of steps no longer in flight are dropped from `open_alerts`."""
    if not any(k.startswith(ONCE_PER_STEP) for k in context.state.open_alerts):
        return
    live = {f"{prefix}{r.reassignment_id}:{r.in_flight.number}"
            for r in context.state.compute_records_in_flight().values()
            for prefix in ONCE_PER_STEP}
    context.close_alerts(k for k in context.state.open_alerts
                         if k.startswith(ONCE_PER_STEP) and k not in live)


def compute_flying(decision) -> dict[TopicPartition, Reassignment]:
    """The records with a step in flight after `decision` (this batch's starts included)."""
    decided = decision.reassignments
    keys = decision.memo.in_flight if decision.memo is not None else decided
    return {tp: r for tp in keys if (r := decided.get(tp)) is not None and r.in_flight is not None}


def compute_step_throttle_fields(context: BatchContext, tp: TopicPartition, adding) -> dict:
    """The throttle fields of a ReassignmentStep issued now (none without a throttle rate):
    leader throttle on the current replicas of live brokers, follower throttle on the added ones.
    In adaptive mode each of them at its own rate (`handlers.throttle`), the lowest as the rate
    an older executor applies to all."""
    adaptive = context.policy.throttle_mode == "adaptive" and context.state.throttles
    rate = context.policy.throttle_bytes_per_sec
    if not rate and not adaptive:
        return {}
    live = compute_leader_throttled(context.state.cluster, tp, adding)
    fields = {"throttle_rate_bytes_per_sec": rate,
              "throttle_log_dir_rate_bytes_per_sec": context.policy.logdir_throttle_bytes_per_sec,
              "throttle_leader_broker_ids": live, "throttle_follower_broker_ids": list(adding),
              "throttle_sequence": context.state.command_sequence}
    if adaptive:
        rates = compute_step_rates(context, [*live, *adding])
        if rates:
            fields |= {"throttle_broker_rates": rates,
                       "throttle_rate_bytes_per_sec": min(r["rate_bytes_per_sec"] for r in rates)}
    return fields if fields["throttle_rate_bytes_per_sec"] else {}


def compute_leader_throttled(cluster: Cluster, tp: TopicPartition, adding) -> list[int]:
    """The replicas a step's copies are read from, which get the leader throttle: the live
    current replicas it does not add (the added ones get the follower throttle)."""
    partition = cluster.partition(tp)
    current = partition.replicas if partition is not None else ()
    return [b for b in current if b not in adding and cluster.is_alive(b)]


def handle_throttles(context: BatchContext, started: bool) -> None:
    """The marker grows with every throttled step started; the static rate restated to the steps
    in flight when it changed; ClearThrottle once none is in flight. Not in observe mode (it
    issues nothing): the marker keeps the rate the brokers were given until a pipeline in auto."""
    state = context.state
    marker, before = _read_throttle_marker(context)
    flying = {tp: r.in_flight.step for tp, r in state.compute_records_in_flight().items()}
    adaptive = context.policy.throttle_mode == "adaptive"
    rate = "adaptive" if adaptive else context.policy.throttle_bytes_per_sec or 0  # what the marker records
    changed = marker is not None and bool(flying) and before.get("rate", rate) != rate
    if (started and rate) or changed:
        brokers = set(before["brokers"])
        for tp, step in flying.items():
            brokers |= set(state.cluster.partition(tp).replicas) | set(step.target)
        if changed and not adaptive:
            _restate_static_rate(context, brokers, flying, rate)
        _replace_throttle_marker(context, marker, compute_throttle_marker(
            brokers, {(tp.topic, tp.partition) for tp in flying} | {tuple(tp) for tp in before["partitions"]}, rate))
    elif started and marker is None:
        # An unthrottled movement is marked too (nothing throttled, rate 0), so that a rate set
        # while its steps fly reaches them (`changed`) rather than only the steps started later.
        context.open_alert(compute_throttle_marker((), (), 0))
    elif marker is not None and not flying:
        throttled = before
        if any(TopicPartition(t, p) in state.external_moves for t, p in throttled["partitions"]):
            return  # Kafka still moves one: a step of ours whose record a lost state store took
        # A broker that is down can be neither read nor written (Kafka routes a broker's configs
        # to the broker itself), and one that left the cluster holds nothing: the clear names
        # the live ones, and the marker keeps the down ones until they are back.
        known = [b for b in throttled["brokers"] if state.cluster.broker(b) is not None]
        live = [b for b in known if state.cluster.is_alive(b)]
        down = [b for b in known if b not in live]
        if not live and not throttled["partitions"] and down:
            return  # only down brokers left to clear: wait until one is back
        context.close_alerts([marker])
        if live or throttled["partitions"]:  # kept until its result: a failed one is asked again
            issue_tracked_clear(context, "nothing moves any more",
                                {"broker_ids": live,
                                 "partitions": [{"topic": t, "partition": p, "leader_broker_ids": [],
                                                 "follower_broker_ids": []} for t, p in throttled["partitions"]],
                                 "throttle_sequence": context.state.command_sequence + 1})
        if down:
            context.open_alert(compute_throttle_marker(down, (), throttled.get("rate")))


def handle_failed_clears(context: BatchContext, snapshot: bool, came_up: Iterable[int]) -> None:
    """A ClearThrottle whose result said it failed (`handlers.throttle.note_clear_result`) cleared
    nothing we can count on, and the throttles stay in force until someone clears them: at the
    next snapshot, or when one of its brokers is back, what it was to clear goes back into its
    marker — the movement's brokers and partitions merged into the `Throttle:` marker (its rate
    kept; a partition whose topic is gone dropped: nothing to clear), a broker's log-dir rate
    into its `LogDirThrottle:` marker — and the usual rule clears it again once nothing moves
    there, the live brokers only. Called after the events, before the batch's results: a clear
    that failed in this batch waits for the next snapshot, so a broker that keeps refusing is
    asked once a snapshot, never in a loop of results."""
    due = take_failed_clears(context, snapshot, came_up)
    cluster = context.state.cluster
    brokers: set[int] = set()
    partitions: set[tuple[str, int]] = set()
    for what in due:
        if what.get("log_dir_only"):
            for broker_id in what["brokers"]:
                context.open_alert(f"{LOG_DIR_THROTTLE_MARKER}{broker_id}")
            continue
        brokers.update(what["brokers"])
        partitions.update((t, p) for t, p in what["partitions"] if cluster.partition(TopicPartition(t, p)) is not None)
    if not brokers and not partitions:
        return
    marker, before = _read_throttle_marker(context)
    _replace_throttle_marker(context, marker, compute_throttle_marker(
        brokers | set(before["brokers"]), partitions | {tuple(p) for p in before["partitions"]}, before.get("rate")))


def _read_throttle_marker(context: BatchContext) -> tuple[str | None, dict]:
    """The `Throttle:` marker, if any, and what it names (no brokers, no partitions without one)."""
    marker = next((k for k in sorted(context.state.open_alerts) if k.startswith(THROTTLE_MARKER)), None)
    return marker, json.loads(marker[len(THROTTLE_MARKER):]) if marker else {"brokers": [], "partitions": []}


def _replace_throttle_marker(context: BatchContext, marker: str | None, new_marker: str) -> None:
    if new_marker != marker:
        context.close_alerts([marker] if marker else [])
        context.open_alert(new_marker)


def compute_throttle_marker(brokers: Iterable[int], partitions: Iterable[tuple[str, int]],
                            rate: int | str | None = None) -> str:
    """The `Throttle:` marker naming the brokers and partitions the throttled steps touched, and
    the rate they were given (bytes/s, 0: none, "adaptive"; None: not known, as in a marker
    rebuilt from the published steps, which is never restated)."""
    fields = {"brokers": sorted(brokers), "partitions": sorted(partitions)}
    return THROTTLE_MARKER + json.dumps(fields if rate is None else fields | {"rate": rate}, separators=(",", ":"))


def _restate_static_rate(context: BatchContext, brokers: Iterable[int],
                         flying: Mapping[TopicPartition, Step], rate: int) -> None:
    """The static rate changed (or static mode came back from adaptive) while throttled steps
    fly: their brokers get it now, not only the steps started from now on. One SetThrottle over
    the brokers and the steps' replicas (leaders: the live current replicas; followers: those
    added), or, with no rate, one ClearThrottle of the brokers' rates alone (the replicas' lists
    limit nothing without a rate and go with the movement's ClearThrottle)."""
    sequence = context.state.command_sequence + 1  # the number issue_throttle_command gives it
    cluster = context.state.cluster
    # A down broker's configs can be neither read nor written; the marker keeps it for the clear.
    brokers = sorted(b for b in set(brokers) if cluster.is_alive(b))
    if not rate:
        issue_throttle_command(context, "ClearThrottle", "no throttle.bytes.per.sec any more",
                               {"broker_ids": brokers, "partitions": [], "throttle_sequence": sequence})
        return
    partitions = [{"topic": tp.topic, "partition": tp.partition,
                   "leader_broker_ids": compute_leader_throttled(cluster, tp, step.adding),
                   "follower_broker_ids": list(step.adding)} for tp, step in sorted(flying.items())]
    issue_throttle_command(context, "SetThrottle", f"throttle.bytes.per.sec is {rate} B/s for the steps in flight", {
        "broker_ids": brokers, "rate_bytes_per_sec": rate, "logdir_rate_bytes_per_sec": None,
        "partitions": partitions, "broker_rates": [], "throttle_sequence": sequence})
