"""When a step (or a log-dir move) is finished, and when it is stuck.

RULE. A step is complete when the cluster shows, for its partition:
- replicas equal to the step's target list (TR), same order;
- no adding and no removing replicas (Kafka has finished the reassignment);
- every TR member in the ISR;
- if the step elects a leader, TR[0] is the leader.
Kafka finishes a reassignment as soon as the adding replicas are in sync; the last two conditions
are ours: a step that leaves an out-of-sync replica or the wrong leader behind is not done yet.
A step that Kafka finished but whose TR[0] does not lead yet is `AWAITING_ELECTION`: the caller
issues the preferred-leader election. (A log-dir move's completion is in `log_dirs`.)

SHOWN. What Kafka shows a partition moving to (`compute_shown_replicas`, as a set
`compute_shown_target`): its replicas less the removing ones while it reassigns (KIP-455: a
reassigning partition lists the target's replicas and the old ones being removed), else its
replicas. It is where the partition will be once the reassignment Kafka runs ends: what a plan
takes as its placement (`handlers.plans`), never the combined list. A step is shown
(`shows_step`) when that set is its target's: Kafka runs it, or ran it.

INTERRUPTED. A step in flight that Kafka does not show, in a view that can tell, was cancelled or
replaced by someone else (`kafka-reassign-partitions.sh --cancel`, another tool's `--execute`):
it is interrupted (`is_step_interrupted`). Completion and a pending election are judged first,
so a step that completed before any poll showed it running is complete, not interrupted; a view
caught between the reassignment's end and the replica list's shrink is not one either
(`is_step_finishing`). A view
can tell (`is_view_conclusive`) when it showed the step once, or it was read after the
executor applied the step (with a margin); any other view proves nothing, and the stall timeout
is then what ends the wait.

A step is stalled when it has not completed `stall_timeout` seconds after it started. Times, and
the timeout itself (`step.stall.timeout`, whose one default is in `runtime.settings`), are
plain numbers (seconds) passed in by the caller: nothing here reads a clock or a setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from planning.model import PartitionState
from planning.movement.partition_steps import Step
from planning.movement.reassignment import StepInFlight

APPLIED_VIEW_MARGIN_MS = 1000
"""How long after the executor's report of a step applied a poll must begin to count as a view
read after the apply (INTERRUPTED)."""


class StepPhase(str, Enum):
    """Where one step is, as the cluster shows it."""

    NOT_STARTED = "not_started"  # Kafka shows neither the step's target nor a reassignment
    CATCHING_UP = "catching_up"  # new replicas are copying (not yet in the ISR)
    REMOVING = "removing"  # new replicas in sync; old ones still listed
    AWAITING_ISR = "awaiting_isr"  # replicas == TR but a TR member is out of sync
    AWAITING_ELECTION = "awaiting_election"  # all done but TR[0] does not lead yet
    COMPLETE = "complete"


@dataclass(frozen=True)
class StepProgress:
    """What a step is waiting for: its phase plus the replicas still out of sync."""

    phase: StepPhase
    waiting_for: tuple[int, ...] = ()  # TR members not yet in the ISR
    caught_up: int = 0  # adding replicas already in the ISR
    adding: int = 0  # adding replicas in the step

    def describe(self) -> str:
        if self.phase is StepPhase.CATCHING_UP:
            return f"{self.caught_up}/{self.adding} new replicas in sync, waiting for {list(self.waiting_for)}"
        if self.phase is StepPhase.AWAITING_ISR:
            return f"replicas in place, waiting for {list(self.waiting_for)} to join the ISR"
        if self.phase is StepPhase.AWAITING_ELECTION:
            return "replicas in place and in sync, waiting for the preferred leader election"
        if self.phase is StepPhase.REMOVING:
            return "new replicas in sync, old replicas being removed"
        if self.phase is StepPhase.NOT_STARTED:
            return "the cluster does not show the step yet"
        return "complete"


def compute_step_progress(partition: PartitionState, step: Step) -> StepProgress:
    """The phase of `step` given the partition as the cluster shows it now."""
    isr = set(partition.isr)
    waiting_for = tuple(b for b in step.target if b not in isr)
    caught_up = sum(1 for b in step.adding if b in isr)
    counts = dict(waiting_for=waiting_for, caught_up=caught_up, adding=len(step.adding))
    if partition.reassigning:
        target_set = set(step.target)
        if not set(partition.replicas) >= target_set:
            return StepProgress(StepPhase.NOT_STARTED, **counts)
        if any(b not in isr for b in step.adding):
            return StepProgress(StepPhase.CATCHING_UP, **counts)
        return StepProgress(StepPhase.REMOVING, **counts)
    if tuple(partition.replicas) != tuple(step.target):
        return StepProgress(StepPhase.NOT_STARTED, **counts)
    if waiting_for:
        return StepProgress(StepPhase.AWAITING_ISR, **counts)
    if step.elect_leader and partition.leader != step.target[0]:
        return StepProgress(StepPhase.AWAITING_ELECTION, **counts)
    return StepProgress(StepPhase.COMPLETE, **counts)


def is_step_complete(partition: PartitionState, step: Step) -> bool:
    """The RULE: replicas == TR (same order), no adding/removing, all of TR in ISR, TR[0] leads if elected."""
    return (
        tuple(partition.replicas) == tuple(step.target)
        and not partition.adding
        and not partition.removing
        and set(step.target) <= set(partition.isr)
        and (not step.elect_leader or partition.leader == step.target[0])
    )


def needs_leader_election(partition: PartitionState, step: Step) -> bool:
    """Kafka has finished the step and every TR member is in sync, but TR[0] does not lead yet."""
    return compute_step_progress(partition, step).phase is StepPhase.AWAITING_ELECTION


def compute_shown_replicas(partition: PartitionState) -> tuple[int, ...]:
    """The replicas Kafka shows `partition` moving to, in Kafka's order (SHOWN), or holding when
    it does not move."""
    if partition.reassigning:
        removing = frozenset(partition.removing)
        return tuple(b for b in partition.replicas if b not in removing)
    return partition.replicas


def compute_shown_target(partition: PartitionState) -> frozenset[int]:
    """The replicas Kafka shows `partition` moving to (SHOWN), or holding when it does not move."""
    return frozenset(compute_shown_replicas(partition))


def shows_step(partition: PartitionState, step: Step) -> bool:
    """Kafka runs `step` (reassigning to its target) or has run it (at its target), as a set."""
    return compute_shown_target(partition) == frozenset(step.target)


def is_view_conclusive(flight: StepInFlight) -> bool:
    """The view of the partition can tell whether Kafka runs the step in flight (INTERRUPTED):
    - it showed the step once (`seen_in_kafka`): Kafka ran it, and now shows something else; or
    - it was read after the executor applied the step: its poll began reading at least
      `APPLIED_VIEW_MARGIN_MS` after the time of the executor's ok CommandResult. The executor
      stamps its result once Kafka has accepted the step, and the watcher stamps a poll's events
      with the time the poll began reading, so a poll that began before the apply and ended
      after it does not count. The margin covers what these two clocks cannot: the metadata a
      broker serves lagging the controller that accepted the step (the reassignment list and
      the replicas come from different brokers), and the clocks of the executor's and the
      watcher's hosts differing. Such a view shows the step running, or at its target
      (completed), or it was cancelled or replaced before any poll showed it.
    Any other view proves nothing: it may predate the step (the watcher polled before the
    executor applied it). The view read after the apply comes with the first change the watcher
    sees in the partition (a cancel bumps the leader epoch; a replacement shows other
    adding/removing replicas), or at the latest with the next snapshot
    (`snapshot_interval_seconds`), which tells every partition again."""
    if flight.seen_in_kafka:
        return True
    return (flight.applied_at_ms is not None and flight.viewed_at_ms is not None
            and flight.viewed_at_ms >= flight.applied_at_ms + APPLIED_VIEW_MARGIN_MS)


def is_step_interrupted(partition: PartitionState, step: Step, conclusive: bool) -> bool:
    """A step Kafka does not show in a view that can tell (`conclusive`, `is_view_conclusive`):
    cancelled or replaced (INTERRUPTED). The caller judges completion first; a step caught
    `finishing` is neither."""
    return conclusive and not shows_step(partition, step) and not is_step_finishing(partition, step)


def is_step_finishing(partition: PartitionState, step: Step) -> bool:
    """Kafka lists no reassignment, and its replicas are the step's target plus only replicas
    the step removes, every replica it adds among them: the moment between the reassignment's
    end and the replica list's shrink, which one poll can catch (the reassignment list and the
    replicas come from different brokers). A cancel would have taken the added replicas away
    again; the next view shows the target. Regression (scenario 7, 2026-11-26): such a view was
    taken for a cancel by another tool, and the partition planned again from it."""
    replicas, target = frozenset(partition.replicas), frozenset(step.target)
    return (bool(step.adding) and not partition.reassigning and target < replicas
            and replicas - target <= frozenset(step.removing))


def describe_interruption(partition: PartitionState, step: Step, number: int) -> str:
    """What a `ReassignmentInterrupted` alert says: the step, and what Kafka shows instead."""
    if partition.reassigning:
        shown = (f"Kafka shows another reassignment (adding {list(partition.adding)}, removing "
                 f"{list(partition.removing)}) of replicas {list(partition.replicas)}: replaced by another tool")
    else:
        shown = (f"Kafka shows no reassignment and replicas {list(partition.replicas)}: cancelled "
                 "by another tool")
    return f"{partition.tp}: step {number} to {list(step.target)} was interrupted; {shown}"


def is_step_stalled(started_at: float, now: float, stall_timeout: float) -> bool:
    """True when a step that started at `started_at` is still running `stall_timeout` s later."""
    return now - started_at >= stall_timeout


def describe_stall(partition: PartitionState, step: Step, started_at: float, now: float) -> str:
    """The message of a `ReassignmentStalled` alert: what the step waits for and for how long."""
    progress = compute_step_progress(partition, step)
    return (
        f"{partition.tp}: step to {list(step.target)} running for {now - started_at:.0f} s: "
        f"{progress.describe()}"
    )
