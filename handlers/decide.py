"""One micro-batch's decision: `decide(state, inputs, policy) -> Decision`. Pure.

No I/O, no clock, no randomness: the same state and inputs always give the same next state and
the same outbox, message for message and id for id, so a re-run batch (after a crash before the
commit) decides exactly what it decided before (SPEC 6).

THE ORDER (the code below follows it):
1. bad records  → a DeadLetter (raw bytes + reason) and a `BadEvent` alert each; the batch goes on;
2. events       → the cluster model and its observation times (`handlers.events`), a snapshot's
                  inventory reconciling what lost events left behind; events that cannot be
                  applied raise `BadEvent` too;
3. command results → failures alert and may end a reassignment (`handlers.results`);
4. requests     → reassign, cancel, decommission, rebalance, approve, config, tick
                  (`handlers.requests`);
5. triggers     → membership, grace periods, disks, drains, ISR alerts, topic deletion
                  (`handlers.triggers`);
6. progress     → completions, elections, stalls, the rolling refill under the limits, throttles
                  (`handlers.progress`).
Plans made in 4 and 5 start their first steps in 6 of the same batch.

TIME: `inputs.now_ms` (the batch's greatest event time, Tick requests included) drives every
grace period and stall timeout. It never goes backwards: a batch without any timed record (only
bad records, say) uses the latest time the state already holds.
"""

from __future__ import annotations

from dataclasses import replace

from handlers.outbox import WARNING, Outbox
from handlers.micro_batch import BadRecord, BatchInputs, Decision
from handlers.context import BatchContext
from handlers.events import EventEffects, compute_cluster_after_events
from handlers.policy import Policy
from handlers.progress import handle_progress
from handlers.requests import handle_requests
from handlers.results import handle_command_results
from handlers.triggers import handle_triggers
from state.model import ControllerState
from schemas.codec import TOPICS


def decide(state: ControllerState, inputs: BatchInputs, policy: Policy) -> Decision:
    """The next state and the outbox of one micro-batch (see the module docstring)."""
    now_ms = max(inputs.now_ms, compute_latest_time_ms(state))
    if now_ms != inputs.now_ms:
        inputs = replace(inputs, now_ms=now_ms)
    context = BatchContext(state, inputs, policy, Outbox(inputs.batch_id, now_ms, state.epoch))

    handle_bad_records(context, inputs.bad_records)  # 1
    cluster, observed_at, effects = compute_cluster_after_events(  # 2
        context.state.cluster, inputs.events, context.state.observed_at)
    context.state = context.state.with_changes(cluster=cluster, observed_at=observed_at)
    handle_rejected_events(context, effects)
    handle_command_results(context, inputs.command_results)  # 3
    handle_requests(context, inputs.requests)  # 4
    handle_triggers(context, effects)  # 5
    handle_progress(context)  # 6

    return Decision(context.state.with_changes(last_batch=inputs.batch_id),
                    tuple(context.outbox.messages))


def compute_latest_time_ms(state: ControllerState) -> int:
    """The latest event time the state holds (step starts, downs, additions, proposals)."""
    times = [int(r.in_flight.started_at * 1000) for r in state.reassignments.values() if r.in_flight]
    times += list(state.broker_down_since_ms.values()) + list(state.broker_added_at_ms.values())
    times += [p.created_at_ms for p in state.proposals.values()]
    return max(times, default=0)


def handle_bad_records(context: BatchContext, bad_records: tuple[BadRecord, ...]) -> None:
    for bad in bad_records:
        key = context.outbox.dead_letter(bad.source_topic, bad.partition, bad.offset, bad.value, bad.reason,
                                         expected_schema=_expected_schema(bad.source_topic))
        context.outbox.alert("BadEvent", WARNING, key,
                             f"undecodable message at {bad.source_topic}[{bad.partition}]@{bad.offset} "
                             f"sent to the dead-letter topic: {bad.reason}",
                             {"source_topic": bad.source_topic, "source_partition": bad.partition,
                              "source_offset": bad.offset, "reason": bad.reason})


def handle_rejected_events(context: BatchContext, effects: EventEffects) -> None:
    for schema, key, reason in effects.rejected:
        context.outbox.alert("BadEvent", WARNING, key, f"{schema} event {key} ignored: {reason}",
                             {"schema": schema, "reason": reason})


def _expected_schema(topic: str) -> str | None:
    return TOPICS.get(topic.rsplit(".", 1)[-1])
