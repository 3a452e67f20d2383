"""The record of one ongoing reassignment: the state of one partition's move, as data.

Lifecycle (every transition is a pure function returning a new record)::

    RUNNING ──step completes, replicas == final target──────────────────────────► DONE
       │  ▲
       │  └─ supersede (new final target; the step in flight finishes first)
       │
       └─cancel─► CANCELLING ──Kafka shows the step reverted──► REVERTING ──► DONE
                  (step in flight        │                     (final target =
                   cancelled in Kafka)   └──keep──────────────► DONE   original replicas)

Cancelling with no step in flight skips CANCELLING. Invariants:
- at most one step in flight (`in_flight`), numbered `steps_done + 1`; a number is never used
  twice, since command ids derive from it (a command is applied at most once);
- `original_replicas` never changes: it is what the partition held before the first step, the
  target of a revert even after a supersede;
- a DONE record has no step in flight.
Times (`started_at`) are numbers the caller passes in; nothing here reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from planning.model import TopicPartition
from planning.movement.partition_steps import Step


class ReassignmentState(str, Enum):
    RUNNING = "running"  # stepping towards `final_target`
    CANCELLING = "cancelling"  # the step in flight is being cancelled in Kafka
    REVERTING = "reverting"  # stepping back to `original_replicas`
    DONE = "done"


@dataclass(frozen=True)
class AfterCancel(str, Enum):
    """What a CANCELLING reassignment does once Kafka shows the step cancelled."""

    REVERT = "revert"  # step back to the original replicas (the default)
    KEEP = "keep"  # stop where it is (`--keep`)
    RESUME = "resume"  # a new target arrived meanwhile: step towards it


@dataclass(frozen=True)
class StepInFlight:
    """The step Kafka is executing for this partition.

    seen_in_kafka: the cluster view has shown this step: the partition reassigning while it is
        in flight, or at the step's target. Until then an unchanged view may just be stale (a
        step that only drops replicas completes in Kafka before the next poll shows anything).
    cancel_confirmed: the executor reported this step's CancelReassignment applied, so Kafka
        reverted it: the replicas from before the step are then the truth, seen or not.
    applied_at_ms: when the executor reported this step applied (the event time of its ok
        CommandResult, stamped once Kafka had accepted it); None until that result is read.
    viewed_at_ms: the poll time of the latest view of the partition read while this step was in
        flight and not yet seen (the event time of the PartitionState, which the watcher stamps
        with the time its poll began reading); None before the first. Together with
        `applied_at_ms` it tells whether the view can be older than the step
        (`completion.is_view_conclusive`).
    """

    step: Step
    number: int  # 1-based; with the reassignment id it makes the command id deterministic
    started_at: float  # seconds, as passed in by the caller; stall detection measures from here
    seen_in_kafka: bool = False
    cancel_confirmed: bool = False
    applied_at_ms: int | None = None
    viewed_at_ms: int | None = None


@dataclass(frozen=True)
class Reassignment:
    """One partition's move, from the request to the last step.

    reassignment_id: stable id (request id + partition); command ids derive from it.
    tp: the partition.
    original_replicas: replicas before the first step; the target of a revert.
    final_target: the final target replica list (FTR) the steps walk towards.
    target_log_dirs: optional log dir per FTR replica (parallel to `final_target`, "any" allowed).
    in_flight: the step Kafka is executing, if any.
    steps_done: steps ended so far: completed, or cancelled in Kafka (a cancelled step has used
        its number, and so its command ids; the next step takes the next number).
    state: see `ReassignmentState`.
    reason: why the reassignment exists, or why it was cancelled/superseded (for alerts, `list`).
    after_cancel: when CANCELLING, what follows once Kafka shows the step cancelled.
    failed_attempts: steps of this partition that failed in a row with an error worth retrying
        (the executor could not get them to Kafka); a completed step resets it.
    retry_at: no new step starts before this time (seconds, the clock of `started_at`).
    last_error: the executor's message for the last failed step.
    plan_id: the plan the reassignment now serves, when another than the request that started it
        (a plan that superseded its target); empty: that request (`plan`).
    """

    reassignment_id: str
    tp: TopicPartition
    original_replicas: tuple[int, ...]
    final_target: tuple[int, ...]
    target_log_dirs: tuple[str | None, ...] = ()
    in_flight: StepInFlight | None = None
    steps_done: int = 0
    state: ReassignmentState = ReassignmentState.RUNNING
    reason: str = ""
    after_cancel: AfterCancel = AfterCancel.REVERT
    failed_attempts: int = 0
    retry_at: float | None = None
    last_error: str = ""
    plan_id: str = ""

    @property
    def plan(self) -> str:
        """The plan it serves: `plan_id`, else the request its id names (`<request>/<partition>`)."""
        return self.plan_id or self.reassignment_id.rsplit("/", 1)[0]

    @property
    def active(self) -> bool:
        return self.state is not ReassignmentState.DONE

    @property
    def wants_next_step(self) -> bool:
        """May start a step now: stepping (running or reverting) and nothing in flight."""
        return self.in_flight is None and self.state in (ReassignmentState.RUNNING, ReassignmentState.REVERTING)

    @property
    def next_step_number(self) -> int:
        return self.steps_done + 1

    def command_id(self, kind: str, step_number: int | None = None) -> str:
        """Deterministic command id: reassignment id + step number + kind (the executor applies an id once)."""
        number = self.next_step_number if step_number is None else step_number
        return f"{self.reassignment_id}:{number}:{kind}"


def start_reassignment(
    reassignment_id: str,
    tp: TopicPartition,
    current_replicas: tuple[int, ...],
    final_target: tuple[int, ...],
    target_log_dirs: tuple[str | None, ...] = (),
    reason: str = "",
) -> Reassignment:
    return Reassignment(
        reassignment_id=reassignment_id,
        tp=tp,
        original_replicas=tuple(current_replicas),
        final_target=tuple(final_target),
        target_log_dirs=tuple(target_log_dirs),
        reason=reason,
    )


def start_step(reassignment: Reassignment, step: Step, started_at: float) -> Reassignment:
    if not reassignment.wants_next_step:
        raise ValueError(f"{reassignment.tp}: cannot start a step while {reassignment.state.value} "
                         f"with step {reassignment.in_flight and reassignment.in_flight.number} in flight")
    return replace(reassignment, in_flight=StepInFlight(step, reassignment.next_step_number, started_at))


def mark_step_seen(reassignment: Reassignment) -> Reassignment:
    """The cluster view has shown the step in flight (see `StepInFlight.seen_in_kafka`)."""
    flight = reassignment.in_flight
    if flight is None or flight.seen_in_kafka:
        return reassignment
    return replace(reassignment, in_flight=replace(flight, seen_in_kafka=True))


def note_step_applied(reassignment: Reassignment, step_number: int, at_ms: int) -> Reassignment:
    """The executor reported step `step_number` applied at `at_ms` (a no-op for any other step,
    and for a second report: the first, earliest, time is kept)."""
    flight = reassignment.in_flight
    if flight is None or flight.number != step_number or flight.applied_at_ms is not None:
        return reassignment
    return replace(reassignment, in_flight=replace(flight, applied_at_ms=at_ms))


def note_step_viewed(reassignment: Reassignment, at_ms: int) -> Reassignment:
    """A view of the partition polled at `at_ms` was read while the step is in flight. Kept only
    while it can matter: the step not seen yet, and a later poll than the one kept."""
    flight = reassignment.in_flight
    if flight is None or flight.seen_in_kafka or (flight.viewed_at_ms is not None and at_ms <= flight.viewed_at_ms):
        return reassignment
    return replace(reassignment, in_flight=replace(flight, viewed_at_ms=at_ms))


def confirm_cancel(reassignment: Reassignment, step_number: int) -> Reassignment:
    """The executor cancelled step `step_number` in Kafka (a no-op for any other step)."""
    flight = reassignment.in_flight
    if reassignment.state is not ReassignmentState.CANCELLING or flight is None \
            or flight.number != step_number or flight.cancel_confirmed:
        return reassignment
    return replace(reassignment, in_flight=replace(flight, cancel_confirmed=True))


def complete_step(reassignment: Reassignment) -> Reassignment:
    """The step in flight has completed (`completion.is_step_complete`); the next one is decided at once."""
    if reassignment.in_flight is None:
        return reassignment
    return replace(reassignment, in_flight=None, steps_done=reassignment.steps_done + 1,
                   failed_attempts=0, retry_at=None, last_error="")


STEP_RETRY_FIRST_SECONDS = 10.0
STEP_RETRY_MOST_SECONDS = 300.0


def compute_step_retry_delay(attempt: int) -> float:
    """Seconds before retrying after the `attempt`-th failure in a row: 10, 20, 40, ... 300."""
    return min(STEP_RETRY_FIRST_SECONDS * 2 ** max(0, attempt - 1), STEP_RETRY_MOST_SECONDS)


def fail_step(reassignment: Reassignment, now: float, error: str) -> Reassignment:
    """The step in flight failed with an error worth retrying: it has used its number (and so its
    command ids: the retry is a new command the executor has not seen), and the next step waits
    `compute_step_retry_delay` before it starts. The next step is computed again from the
    cluster, so a step Kafka took after all is not repeated."""
    attempts = reassignment.failed_attempts + 1
    return replace(reassignment, in_flight=None, steps_done=reassignment.steps_done + 1,
                   failed_attempts=attempts, retry_at=now + compute_step_retry_delay(attempts),
                   last_error=error)


def interrupt_step(reassignment: Reassignment) -> Reassignment:
    """Someone else cancelled or replaced the step in flight (`completion.is_step_interrupted`):
    it has ended and used its number; the next step is computed from the replicas Kafka shows
    now, at once (no retry delay: nothing failed on our side)."""
    if reassignment.in_flight is None:
        return reassignment
    return replace(reassignment, in_flight=None, steps_done=reassignment.steps_done + 1,
                   retry_at=None)


def finish(reassignment: Reassignment) -> Reassignment:
    return replace(reassignment, in_flight=None, state=ReassignmentState.DONE)


def supersede(
    reassignment: Reassignment,
    final_target: tuple[int, ...],
    target_log_dirs: tuple[str | None, ...] = (),
    reason: str = "",
    plan_id: str = "",
) -> Reassignment:
    """A new final target: the step in flight finishes, then stepping continues from there; the
    record serves `plan_id` from now on (when given).

    While CANCELLING (the step is being cancelled in Kafka), the cancel completes first and the
    reassignment then resumes towards the new target.
    """
    if reassignment.state is ReassignmentState.CANCELLING:
        return replace(
            reassignment,
            final_target=tuple(final_target),
            target_log_dirs=tuple(target_log_dirs),
            after_cancel=AfterCancel.RESUME,
            reason=reason or reassignment.reason,
            plan_id=plan_id or reassignment.plan_id,
        )
    return replace(
        reassignment,
        final_target=tuple(final_target),
        target_log_dirs=tuple(target_log_dirs),
        state=ReassignmentState.RUNNING,
        reason=reason or reassignment.reason,
        plan_id=plan_id or reassignment.plan_id,
    )


def begin_cancel(reassignment: Reassignment, keep: bool, reason: str = "") -> Reassignment:
    """No new steps; a step in flight is cancelled in Kafka first (CANCELLING)."""
    reason = reason or "cancelled"
    if reassignment.in_flight is not None:
        after = AfterCancel.KEEP if keep else AfterCancel.REVERT
        return replace(reassignment, state=ReassignmentState.CANCELLING, after_cancel=after, reason=reason)
    if keep:
        return replace(finish(reassignment), reason=reason)
    return begin_revert(replace(reassignment, reason=reason))


def begin_revert(reassignment: Reassignment) -> Reassignment:
    """Step back to the replicas held before the reassignment started (order not guaranteed)."""
    return replace(
        reassignment,
        in_flight=None,
        final_target=reassignment.original_replicas,
        target_log_dirs=(),
        state=ReassignmentState.REVERTING,
    )


def cancel_observed(reassignment: Reassignment) -> Reassignment:
    """Kafka shows the cancelled step ended (reverted, or completed before the cancel reached it):
    revert further, stop where it is, or resume.

    Either way the step has ended and counts in `steps_done`: the executor knows its command id
    (`<id>:<n>:ReassignmentStep`) and would not apply a next step that reused number n.
    """
    if reassignment.state is not ReassignmentState.CANCELLING:
        return reassignment
    ended = complete_step(reassignment)
    if reassignment.after_cancel is AfterCancel.RESUME:
        return replace(ended, state=ReassignmentState.RUNNING)
    if reassignment.after_cancel is AfterCancel.REVERT:
        return begin_revert(ended)
    return finish(ended)
