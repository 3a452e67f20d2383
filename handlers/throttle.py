"""The adaptive throttle in the pipeline: the canary's windows kept per broker, and, once per batch,
the rate and the moves in flight of each broker the movement touches
(`planning.movement.throttle_control`), turned into commands and an alert.

CANARY (`handle_canary_samples`, right after the events): each `CanarySample` the watcher
published updates its broker's reading (`planning.movement.canary.add_canary_window`). A window
counts towards the broker's baseline only when nothing moved while the pipeline saw it (no
reassignment of ours, no move of another tool's, no log-dir move): the baseline is what the
clients see without the product. A sample that cannot be one (a negative window, a latency of a
day) is refused with a `BadEvent`, as any event.

DECISION (`decide_throttles_now`, called by `handlers.progress` between the stepping decision
and the steps' commands), in `throttle.mode=adaptive` and mode auto/approve only:
1. touched: the brokers of the steps in flight, this batch's included (a step's replicas now and
   its target), as the executor throttles them;
2. signals per broker: the canary's p99 and its probes' errors while fresh, and its baseline;
   the ISR shrinks outside the moves since the broker's last change (`planning.movement.
   isr_shrinks`); whether its copies run at its rate (`compute_copy_rates`), measured since
   its last change from what the steps in flight had copied through it then, which the state
   keeps with its throttle (`BrokerThrottle.copied`);
3. `decide_throttles` under the bounds of the effective policy (`handlers.policy.
   compute_throttle_bounds`), the hour of the batch's event time (UTC) for the schedule;
4. a change of a broker the movement already touched (a broker it starts to touch gets its rate
   with its step) → one `SetThrottle` for all of them (their `broker_rates`, the lowest rate as
   `rate_bytes_per_sec` for an older executor), numbered by the command sequence *before* this
   batch's steps, which carry the same number: the executor keeps the newest rate in force
   whatever order it reads the commands in (`reassigner.edge.throttles`, NEWEST WINS); and one
   `ThrottleChanged` INFO alert naming each change and its reason. A raise's ramp
   (`planning.movement.throttle_control`, RAMP) is announced once, at the raise (its target in
   the alert); its later steps are SetThrottles with no alert, and a ramp ending short of its
   target is an alert with no command (the rate stays where it is);
5. the state keeps the result (`ControllerState.throttles`); its moves in flight lower B for
   those brokers from the next decision on (`effective_limits`: `Limits.broker_moves`);
6. brokers touched with no canary reading at all (the canary is off on the watcher, or has not
   reported them yet) are held at their initial rate: one `CanaryMissing` WARNING names them
   and what to do, once per set of brokers, closed when they have readings or nothing moves.
In static mode, or with nothing in flight, the state holds no throttle: a movement that starts
again, or `throttle.mode=adaptive` set mid-movement, begins at the initial rate.

LEAVING (`leave_adaptive`): `throttle.mode=static` set while steps fly hands their brokers back
to the static rate at once, not at the movement's end: a `ThrottleChanged` alert here, and the
command from `handlers.progress` (THROTTLES: the `Throttle:` marker records "adaptive", so the
static rate is restated to the steps in flight: one `SetThrottle` at `throttle_bytes_per_sec`,
or, with no static rate, one `ClearThrottle` of the brokers' rates alone). In observe mode
nothing is issued (observe issues no command); the state forgets the adaptive rates either way.

TRACKED CLEARS (`issue_tracked_clear`): the movement's ClearThrottle and a broker's log-dir
one are the last trace of their throttles in the state, and a CommandResult names only its
command; so what such a clear clears is kept (`CLEARING`) until its result, and one that failed
(`CLEAR_FAILED`) is handed back to its marker to be asked again (`handlers.progress`, THROTTLES).

Pure, as every handler: the batch's event time is the only clock.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from typing import Iterable, Mapping, Sequence

from handlers.context import BatchContext
from handlers.outbox import INFO, WARNING
from handlers.policy import compute_throttle_bounds
from planning.model import TopicPartition
from planning.movement.canary import add_canary_window, compute_fresh_reading
from planning.movement.isr_shrinks import count_isr_shrinks_since
from planning.movement.reassignment import Reassignment
from planning.movement.throttle_control import (
    BrokerSignal,
    BrokerThrottle,
    ThrottleChange,
    compute_copied_through,
    compute_copy_rates,
    decide_throttles,
    is_saturated,
)

HOUR_MS = 3_600_000
CANARY_MISSING = "CanaryMissing:"  # open-alert marker (DECISION 6)
CLEARING = "ClearThrottle:"
"""Open-alert marker of a tracked clear awaiting its result (`issue_tracked_clear`):
`ClearThrottle:<n>:<what>`, n its command sequence (its id `throttle-<n>:0:ClearThrottle`), what
the JSON of its brokers, partitions and `log_dir_only`."""
CLEAR_FAILED = "ClearThrottleFailed:"
"""The same, `ClearThrottleFailed:<n>:<what>`, once its result said it failed, until it is asked again."""
CLEAR_ID = re.compile(r"^throttle-(\d+):0:ClearThrottle$")


def handle_canary_samples(context: BatchContext, samples: Sequence[Mapping]) -> list[tuple[str, str]]:
    """Fold the batch's CanarySamples into `ControllerState.canary` (module CANARY); returns the
    ones refused, as (key, why), for `BadEvent`."""
    if not samples:
        return []
    state = context.state
    readings = dict(state.canary)
    moving = bool(state.reassignments or state.external_moves or state.log_dir_moves)
    refused: list[tuple[str, str]] = []
    for sample in samples:
        try:
            broker = int(sample["broker_id"])
            readings[broker] = add_canary_window(readings.get(broker), sample, moving)
        except (KeyError, TypeError, ValueError) as error:
            refused.append((str(sample.get("key", "?")), f"malformed CanarySample: {error}"))
    if readings != state.canary:
        context.state = state.with_changes(canary=readings)
    return refused


def compute_touched_brokers(context: BatchContext, flying: Mapping[TopicPartition, Reassignment]) -> set[int]:
    """The brokers of the steps in flight (DECISION 1)."""
    cluster = context.state.cluster
    touched: set[int] = set()
    for tp, record in flying.items():
        partition = cluster.partition(tp)
        touched.update(record.in_flight.step.target)
        if partition is not None:
            touched.update(partition.replicas)
    return {b for b in touched if cluster.is_alive(b)}


def decide_throttles_now(context: BatchContext, flying: Mapping[TopicPartition, Reassignment]) -> None:
    """DECISION 2-5 of the module doc: the new `ControllerState.throttles`, with a SetThrottle and
    a ThrottleChanged alert when a broker the movement already touched changes."""
    state, now_ms = context.state, context.now_ms
    bounds = compute_throttle_bounds(context.policy)
    previous = state.throttles
    touched = compute_touched_brokers(context, flying)
    copying = compute_copy_rates(flying.values(), state.cluster, now_ms, previous)
    moving = Counter(b for record in flying.values() for b in record.in_flight.step.moved_brokers)
    signals = {}
    for broker in touched:
        before = previous.get(broker)
        reading = state.canary.get(broker)
        fresh = compute_fresh_reading(reading, now_ms)
        since = before.changed_ms if before is not None else now_ms
        signals[broker] = BrokerSignal(
            broker, fresh.p99_ms if fresh is not None else None, reading.baseline_ms if reading is not None else None,
            isr_shrinks_outside=count_isr_shrinks_since(state.isr_shrinks, broker, since),
            saturated=is_saturated(copying.get(broker, 0.0), before),
            probe_errors=fresh.errors if fresh is not None else 0,
            probe_attempts=fresh.samples + fresh.errors if fresh is not None else 0,
            copy_rate=copying.get(broker), moves_in_flight=moving[broker],
            earlier_p99s=fresh.earlier_p99s if fresh is not None else ())
    decision = decide_throttles(previous, touched, signals, bounds, now_ms, hour=(now_ms // HOUR_MS) % 24)
    throttles = _mark_copied(decision.throttles, flying, context, now_ms)
    _note_missing_canary(context, sorted(b for b in touched if b not in state.canary))
    changes = [c for c in decision.changes if c.rate_before is not None]
    _issue_changes(context, [c for c in changes if c.commanded], [c for c in changes if not c.ramp_step])
    if throttles != dict(previous):
        context.state = context.state.with_changes(throttles=throttles)


def _mark_copied(throttles: Mapping[int, BrokerThrottle], flying: Mapping[TopicPartition, Reassignment],
                 context: BatchContext, now_ms: int) -> dict[int, BrokerThrottle]:
    """The throttles with what each step in flight has copied through a broker kept on the
    brokers that changed now, so its copies are measured from the change on (DECISION 2)."""
    changed = {b for b, t in throttles.items() if t.changed_ms == now_ms}
    if not changed:
        return dict(throttles)
    through = compute_copied_through(flying.values(), context.state.cluster)
    return {b: replace(t, copied=through.get(b, {})) if b in changed else t for b, t in throttles.items()}


def _note_missing_canary(context: BatchContext, blind: list[int]) -> None:
    """DECISION 6: one CanaryMissing per set of brokers with no canary reading."""
    marker = f"{CANARY_MISSING}{','.join(map(str, blind))}"
    context.close_alerts(k for k in context.state.open_alerts if k.startswith(CANARY_MISSING) and k != marker)
    if blind and context.open_alert(marker):
        named = ", ".join(map(str, blind))
        context.outbox.alert(
            "CanaryMissing", WARNING, "throttle",
            f"throttle.mode=adaptive: no canary reading for brokers {named}, so their rates stay where they "
            "started; turn the canary on (canary_enabled=true on the watcher) or set throttle.mode=static",
            {"brokers": ",".join(map(str, blind))})


def leave_adaptive(context: BatchContext, flying: Mapping[TopicPartition, Reassignment]) -> None:
    """The adaptive rates in force handed back to static mode (module LEAVING): the alert and the
    state here; the command is `handlers.progress`'s restatement of the static rate."""
    brokers = sorted(context.state.throttles)
    _note_missing_canary(context, [])
    if flying and context.policy.mode != "observe":
        rate = context.policy.throttle_bytes_per_sec
        back = f"static {_rate(rate)}" if rate else "unthrottled (no throttle.bytes.per.sec)"
        said = f"throttle.mode=static: brokers {', '.join(map(str, brokers))} {back}"
        context.outbox.alert("ThrottleChanged", INFO, "throttle", said, {
            "brokers": ",".join(map(str, brokers)), "rates": ",".join(f"{b}:{rate or 0}" for b in brokers),
            "moves": "", "reasons": "throttle.mode=static"})
    context.state = context.state.with_changes(throttles={})


def _issue_changes(context: BatchContext, commanded: list[ThrottleChange], announced: list[ThrottleChange]) -> None:
    """One SetThrottle over the brokers whose rate or moves changed and one ThrottleChanged alert
    over the changes announced (DECISION 4); either may be empty."""
    if commanded:
        rates = [{"broker_id": c.broker, "rate_bytes_per_sec": c.rate} for c in commanded]
        said = "; ".join(_describe(c) for c in commanded)
        sequence = context.state.command_sequence + 1  # the number issue_throttle_command gives it
        issue_throttle_command(context, "SetThrottle", f"adaptive throttle: {said}",
                               {"broker_ids": [c.broker for c in commanded],
                                "rate_bytes_per_sec": min(c.rate for c in commanded),
                                "logdir_rate_bytes_per_sec": None, "partitions": [],
                                "broker_rates": rates, "throttle_sequence": sequence})
    if announced:
        context.outbox.alert("ThrottleChanged", INFO, "throttle",
                             f"adaptive throttle: {'; '.join(_describe(c) for c in announced)}", {
                                 "brokers": ",".join(str(c.broker) for c in announced),
                                 "rates": ",".join(f"{c.broker}:{c.rate}" for c in announced),
                                 "targets": ",".join(f"{c.broker}:{c.target}" for c in announced if c.target),
                                 "moves": ",".join(f"{c.broker}:{c.moves}" for c in announced),
                                 "reasons": " | ".join(f"{c.broker}: {c.reason}" for c in announced),
                             })


def issue_throttle_command(context: BatchContext, kind: str, reason: str, fields: dict) -> None:
    """A SetThrottle or ClearThrottle, numbered by `command_sequence` (`throttle-<n>:0:<kind>`)."""
    sequence = context.next_command_sequence()
    context.outbox.command(f"throttle-{sequence}:0:{kind}", "throttle", None, 0, reason, kind, fields)


def issue_tracked_clear(context: BatchContext, reason: str, fields: dict) -> None:
    """A ClearThrottle of throttles nothing else in the state names once it is issued (the
    movement's, `handlers.progress`; a broker's log-dir rate, `handlers.log_dirs`). A CommandResult
    names its command only, so what it clears is kept (a `CLEARING` marker) until its result:
    a failed one is not forgotten (`note_clear_result`, `take_failed_clears`)."""
    sequence = context.state.command_sequence + 1  # the number issue_throttle_command gives it
    issue_throttle_command(context, "ClearThrottle", reason, fields)
    what = {"brokers": sorted(fields["broker_ids"]),
            "partitions": sorted([p["topic"], p["partition"]] for p in fields.get("partitions") or ()),
            "log_dir_only": bool(fields.get("log_dir_only"))}
    context.open_alert(f"{CLEARING}{sequence}:{json.dumps(what, separators=(',', ':'))}")


def note_clear_result(context: BatchContext, command_id: str, ok: bool) -> bool:
    """A ClearThrottle's result: a tracked clear is awaited no more; one that failed is kept to be
    asked again (`CLEAR_FAILED`). True when it was a tracked clear that failed."""
    named = CLEAR_ID.match(command_id)
    if named is None:
        return False
    awaited = f"{CLEARING}{named.group(1)}:"
    marker = next((k for k in context.state.open_alerts if k.startswith(awaited)), None)
    if marker is None:  # not tracked (a restated rate's clear: the marker still names its brokers), or a duplicate
        return False
    context.close_alerts([marker])
    if ok:
        return False
    context.open_alert(CLEAR_FAILED + marker[len(CLEARING):])
    return True


def take_failed_clears(context: BatchContext, snapshot: bool, came_up: Iterable[int]) -> list[dict]:
    """What the failed clears were to clear (brokers, partitions, `log_dir_only`), due to be asked
    again: all of them in a batch that read a snapshot (one that says which Kafka runs, the
    cordons' retry: `handlers.cordons`), else those naming a broker that came back; their markers
    are closed. Not at once: a broker that refuses would loop."""
    came_up = set(came_up)
    if not snapshot and not came_up:
        return []
    due, taken = [], []
    for marker in sorted(k for k in context.state.open_alerts if k.startswith(CLEAR_FAILED)):
        what = json.loads(marker[len(CLEAR_FAILED):].split(":", 1)[1])
        if snapshot or came_up.intersection(what["brokers"]):
            due.append(what)
            taken.append(marker)
    context.close_alerts(taken)
    return due


def _describe(change: ThrottleChange) -> str:
    if not change.commanded:
        return f"broker {change.broker} held at {_rate(change.rate)} ({change.reason})"
    direction = "up" if change.rate > (change.rate_before or 0) else "down" if change.rate < (change.rate_before or 0) \
        else "held"
    moves = f", moves {change.moves_before} -> {change.moves}" if change.moves != change.moves_before else ""
    return (f"broker {change.broker} {direction} {_rate(change.rate_before)} -> {_rate(change.rate)}{moves} "
            f"({change.reason})")


def _rate(value: int | None) -> str:
    if value is None:
        return "none"
    return f"{value / 1e6:.3g} MB/s" if value >= 1_000_000 else f"{value / 1e3:.3g} kB/s"


def compute_step_rates(context: BatchContext, brokers: Iterable[int]) -> list[dict]:
    """The `throttle_broker_rates` of a step on `brokers` (their adaptive rates)."""
    throttles = context.state.throttles
    return [{"broker_id": b, "rate_bytes_per_sec": throttles[b].rate} for b in sorted(set(brokers)) if b in throttles]
