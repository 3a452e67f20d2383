"""One micro-batch's decision: `decide(state, inputs, policy) -> Decision`. Pure.

No I/O, no clock, no randomness: the same state and inputs always give the same next state and
the same outbox, message for message and id for id, so a re-run batch (after a crash before the
commit) decides exactly what it decided before.

THE ORDER (the code below follows it):
1. bad records  → a DeadLetter (raw bytes + reason) and a `BadEvent` alert each; the batch goes on;
2. events       → the cluster model and its observation times (`handlers.events`), the canary's
                  windows (`handlers.throttle`), a snapshot's
                  inventory reconciling what lost events left behind; events that cannot be
                  applied raise `BadEvent` too; the poll time of each partition viewed goes to
                  its step in flight, if unseen (`handlers.external.handle_step_views`); at a
                  snapshot, or when a broker is back, the cordons are reconciled
                  (`handlers.cordons`) and failed throttle clears are marked to be asked again
                  (`handlers.progress.handle_failed_clears`);
3. command results → failures alert and may end a reassignment; a step applied keeps the time
                  the executor applied it (`handlers.results`);
4. requests     → reassign, cancel, decommission, rebalance, approve, reject, recommission,
                  config, tick (`handlers.requests`), one verdict alert each; then proposals
                  older than `proposal.expiry` are dropped (`handlers.proposals`);
5. triggers     → membership, grace periods, disks, drains, ISR alerts, topic deletion
                  (`handlers.triggers`); then log dirs past the high-water mark are relieved
                  (`handlers.disk_pressure`);
6. progress     → completions, elections, stalls, the rolling refill under the limits, throttles
                  (`handlers.progress`); then the log dirs: brokers whose dirs are out of
                  balance are planned, and log-dir moves complete, stall and start
                  (`handlers.log_dirs`).
Plans made in 4 and 5 start their first steps in 6 of the same batch.

ISOLATION: `decide_isolating` is what the shell calls. If deciding the batch raises (a defect
met by one odd input), the inputs on which it fails are found by halving the batch, each becomes
a dead letter and a `BadEvent` alert (its error as the reason), and the rest of the batch is
decided as usual. It costs a few extra decisions per culprit, only in a batch that fails, and is
deterministic, so a re-run finds the same culprits. A batch that fails without any input (the
state itself) raises: nothing can be applied, and the shell's restart loop says so.

TIME: `inputs.now_ms` (the batch's greatest event time, Tick requests included) drives every
grace period and stall timeout. It never goes backwards: a batch without any timed record (only
bad records, say) uses the latest time the state already holds. One record cannot pull it into
the future: an event time more than `MAX_CLOCK_SKEW_MS` ahead of the pipeline's own clock
(`inputs.clock_ms`) is taken as that clock (a forged record, or a host whose clock runs fast),
and a `ClockSkew` alert says how many and how far; without that bound a record from year 3000
ended every grace period at once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any, Mapping

from handlers.outbox import WARNING, Outbox
from handlers.micro_batch import BadRecord, BatchInputs, BatchReport, Decision
from handlers.context import BatchContext
from handlers.cordons import handle_cordons_after_events, reconcile_cordons
from handlers.events import EventEffects, compute_cluster_after_events
from handlers.external import handle_step_views
from handlers.disk_pressure import handle_disk_pressure
from handlers.log_dirs import handle_log_dir_balance, handle_log_dir_progress
from handlers.policy import Policy
from handlers.progress import handle_failed_clears, handle_progress
from handlers.proposals import handle_proposal_expiry
from handlers.requests import handle_requests
from handlers.results import handle_command_results
from handlers.throttle import handle_canary_samples
from handlers.triggers import handle_triggers
from state.model import ControllerState
from schemas import command_kind
from schemas.codec import TOPICS


def decide(state: ControllerState, inputs: BatchInputs, policy: Policy) -> Decision:
    """The next state and the outbox of one micro-batch (see the module docstring)."""
    inputs, skewed = compute_trusted_times(inputs)
    latest = compute_latest_time_ms(state)
    if inputs.clock_ms is not None:
        latest = min(latest, inputs.clock_ms + MAX_CLOCK_SKEW_MS)
    now_ms = max(inputs.now_ms, latest)
    if now_ms != inputs.now_ms:
        inputs = replace(inputs, now_ms=now_ms)
    context = BatchContext(state.with_batch_opened(), inputs, policy, Outbox(inputs.batch_id, now_ms, state.epoch))
    if skewed:
        count, furthest_ms = len(skewed), max(skewed)
        context.outbox.alert("ClockSkew", WARNING, "clock",
                             f"{count} record(s) carried event times up to {furthest_ms / 1000:,.0f} s ahead "
                             "of the pipeline's clock; they were taken as happening now",
                             {"records": count, "furthest_ahead_ms": furthest_ms})

    handle_bad_records(context, inputs.bad_records)  # 1
    cluster, observed_at, effects = compute_cluster_after_events(  # 2
        context.state.cluster, inputs.events, context.state.observed_at)
    context.state = context.state.with_cluster(cluster).with_changes(observed_at=observed_at)
    if effects.kafka is not None and effects.kafka != context.state.kafka:
        context.state = context.state.with_changes(kafka=effects.kafka)
    handle_cordons_after_events(context, effects.kafka is not None, effects.came_up)
    handle_failed_clears(context, effects.kafka is not None, effects.came_up)
    effects.rejected.extend(("CanarySample", key, why) for key, why in handle_canary_samples(
        context, effects.canary_samples))
    handle_rejected_events(context, effects)
    handle_step_views(context, effects.viewed)
    handle_command_results(context, inputs.command_results)  # 3
    handle_requests(context, inputs.requests)  # 4
    handle_proposal_expiry(context)
    handle_triggers(context, effects)  # 5
    if handle_disk_pressure(context):  # a pressed dir's mark opened or closed
        reconcile_cordons(context, "disk pressure")
    handle_progress(context)  # 6
    handle_log_dir_balance(context, effects.dirs_changed)
    handle_log_dir_progress(context)

    outbox = tuple(context.outbox.messages)
    return Decision(context.state.with_changes(last_batch=inputs.batch_id), outbox,
                    compute_report(context, inputs, outbox))


def compute_report(context: BatchContext, inputs: BatchInputs, outbox: tuple) -> BatchReport:
    """What the decision did (`BatchReport`), from what the handlers recorded as they decided."""
    received = Counter(schema for schema, _ in inputs.events)
    received["Request"] += len(inputs.requests)
    received["CommandResult"] += len(inputs.command_results)
    rejected = Counter(_expected_schema(bad.source_topic) or "unknown" for bad in inputs.bad_records)
    rejected.update(context.refused)
    counts = {(schema, "applied"): received[schema] - context.refused[schema] for schema in received}
    counts |= {(schema, "rejected"): n for schema, n in rejected.items()}
    return BatchReport(
        inputs={key: n for key, n in counts.items() if n > 0},
        commands=dict(Counter(command_kind(m.record) for m in outbox if m.topic_suffix == "commands")),
        alerts=dict(Counter(str(m.record["kind"]) for m in outbox if m.topic_suffix == "alerts")),
        steps_completed=tuple(context.steps_completed), bytes_moved=context.bytes_moved)


INPUT_KINDS = ("events", "requests", "command_results")
InputRef = tuple[str, int]  # (one of INPUT_KINDS, index)


def decide_isolating(state: ControllerState, inputs: BatchInputs, policy: Policy) -> Decision:
    """`decide`, or, if that raises, `decide` without the inputs it fails on (see ISOLATION)."""
    try:
        return decide(state, inputs, policy)
    except Exception as error:  # a defect: isolate the input that meets it
        batch_error = error

    def failure_of(subset: list[InputRef]) -> str | None:
        try:
            decide(state, compute_input_subset(inputs, subset), policy)
        except Exception as error:
            return f"{type(error).__name__}: {error}"
        return None

    def culprits(items: list[InputRef], failure: str) -> dict[InputRef, str]:
        if len(items) == 1:
            return {items[0]: failure}
        found: dict[InputRef, str] = {}
        for half in (items[:len(items) // 2], items[len(items) // 2:]):
            half_failure = failure_of(half)
            if half_failure is not None:
                found.update(culprits(half, half_failure))
        return found

    if failure_of([]) is not None:
        raise batch_error
    everything = [(kind, index) for kind in INPUT_KINDS for index in range(len(getattr(inputs, kind)))]
    found = culprits(everything, f"{type(batch_error).__name__}: {batch_error}")
    kept = [item for item in everything if item not in found]
    if failure_of(kept) is not None:  # fails only in combination: add inputs one at a time
        accepted: list[InputRef] = []
        for item in kept:
            failure = failure_of(accepted + [item])
            if failure is None:
                accepted.append(item)
            else:
                found[item] = failure
        kept = accepted
    poisoned = tuple(compute_poisoned_record(inputs, item, failure) for item, failure in sorted(found.items()))
    cleaned = replace(compute_input_subset(inputs, kept), bad_records=inputs.bad_records + poisoned)
    return decide(state, cleaned, policy)


def compute_input_subset(inputs: BatchInputs, items: list[InputRef]) -> BatchInputs:
    """`inputs` with only the events, requests and command results named (in their order)."""
    chosen = set(items)
    return replace(inputs, **{kind: tuple(value for index, value in enumerate(getattr(inputs, kind))
                                          if (kind, index) in chosen) for kind in INPUT_KINDS})


def compute_poisoned_record(inputs: BatchInputs, item: InputRef, failure: str) -> BadRecord:
    """The bad record a dead letter keeps for an input on which deciding failed."""
    kind, index = item
    reason = f"deciding on this record failed ({failure}); it was left out of the batch"
    origin = inputs.origins.get(item)
    if origin is None:  # inputs built without origins (tests): where it was read is unknown
        return BadRecord(kind, -1, -1, b"", reason)
    return replace(origin, reason=reason)


MAX_CLOCK_SKEW_MS = 5 * 60 * 1000


def compute_trusted_times(inputs: BatchInputs) -> tuple[BatchInputs, list[int]]:
    """`inputs` with every event time more than `MAX_CLOCK_SKEW_MS` ahead of `clock_ms` set to
    `clock_ms`, and how far ahead each of those was (see TIME)."""
    if inputs.clock_ms is None:
        return inputs, []
    bound, clock_ms = inputs.clock_ms + MAX_CLOCK_SKEW_MS, inputs.clock_ms
    skewed: list[int] = []

    def trusted(record: Mapping[str, Any]) -> Mapping[str, Any]:
        at = record.get("event_time")
        if isinstance(at, int) and at > bound:
            skewed.append(at - clock_ms)
            return {**record, "event_time": clock_ms}
        return record

    events = tuple((schema, trusted(record)) for schema, record in inputs.events)
    requests = tuple(trusted(r) for r in inputs.requests)
    results = tuple(trusted(r) for r in inputs.command_results)
    if not skewed:
        return inputs, []
    times = [r.get("event_time") for r in (*(record for _, record in events), *requests, *results)]
    now_ms = max((at for at in times if isinstance(at, int)), default=clock_ms)
    return replace(inputs, events=events, requests=requests, command_results=results, now_ms=now_ms), skewed


def compute_latest_time_ms(state: ControllerState) -> int:
    """The latest event time the state holds (step starts, downs, additions, proposals)."""
    times = [int(r.in_flight.started_at * 1000) for r in state.compute_records_in_flight().values()]
    times += list(state.broker_down_since_ms.values()) + list(state.broker_added_at_ms.values())
    times += [p.created_at_ms for p in state.proposals.values()]
    return max(times, default=0)


def handle_bad_records(context: BatchContext, bad_records: tuple[BadRecord, ...]) -> None:
    for bad in bad_records:
        key = context.outbox.dead_letter(bad.source_topic, bad.partition, bad.offset, bad.value, bad.reason,
                                         expected_schema=_expected_schema(bad.source_topic))
        context.outbox.alert("BadEvent", WARNING, key,
                             f"message at {bad.source_topic}[{bad.partition}]@{bad.offset} "
                             f"not applied, sent to the dead-letter topic: {bad.reason}",
                             {"source_topic": bad.source_topic, "source_partition": bad.partition,
                              "source_offset": bad.offset, "reason": bad.reason})


def handle_rejected_events(context: BatchContext, effects: EventEffects) -> None:
    for schema, key, reason in effects.rejected:
        context.refused[schema] += 1
        context.outbox.alert("BadEvent", WARNING, key, f"{schema} event {key} ignored: {reason}",
                             {"schema": schema, "reason": reason})


def _expected_schema(topic: str) -> str | None:
    return TOPICS.get(topic.rsplit(".", 1)[-1])
