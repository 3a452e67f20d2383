"""What the executor reported about our commands (CommandResult records).

RULES:
- `ok` results change nothing — completion is judged from the cluster (partition events), never
  from the executor's word — but two:
  - an ok `CancelReassignment` of the step in flight confirms that Kafka reverted it, so the
    view of the replicas from before the step can be trusted even if it never showed the step
    (`planning.movement.cancel.compute_cancel_observed`);
  - an ok `ReassignmentStep` of the step in flight keeps its event time on the step
    (`applied_at_ms`, the first such result's): a view of the partition polled after it can
    tell whether Kafka still runs the step, so a step another tool cancelled or replaced before
    any poll showed it is noticed then (`planning.movement.completion` INTERRUPTED). The record
    is found by the result's key (`<topic>-<partition>`, the command's) and its reassignment id
    and step number must match: O(1) per result.
- A failed `ReassignmentStep` that is the step in flight of an active reassignment (same
  reassignment id and step number):
  - with an error worth retrying (`RETRIED_STEP_ERRORS`: timeouts, no controller, leader not
    available, another reassignment in progress, a broker down or not answering —
    BROKER_NOT_AVAILABLE, NODE_NOT_READY, KAFKA_CONNECTION, UNKNOWN_BROKER_ID, KAFKA_TIMEOUT,
    CONNECTION_ERROR, whether the step's reassignment or the describe configs of its throttle
    met it — still failing after the executor's own `executor_retry_seconds`), while fewer than
    `step.retry.max` steps of the partition failed in a row: the step is given up and the next
    one waits 10 s doubling to 300 s (`planning.movement.reassignment.fail_step`); it has a new
    number, so new command ids the executor has not seen. **No alert**: a broker that is killed
    or restarting fails every step touching it for a while, and most retries then succeed; the
    executor's log has each attempt, the record its count and last error (`failed_attempts`,
    `last_error`), `status` shows the partition waiting for its retry;
  - past `step.retry.max`: `ReassignmentStalled` (ERROR) with the count and the last error —
    the one alert of the partition's retries — and the controller **gives up on that
    partition**: the record is dropped and the partition stays wherever Kafka has it (an
    operator may re-request it);
  - any other error: `CommandFailed` (ERROR) naming what to do (`REMEDIES`), and the partition
    is given up the same way.
- A failed `CancelReassignment` with `NO_REASSIGNMENT_IN_PROGRESS` is expected (the step
  finished before the cancel reached Kafka; the revert starts from there): ignored. Other
  cancel failures raise `CommandFailed` (ERROR).
- A failed `ElectLeader` (other than `ELECTION_NOT_NEEDED`) raises `CommandFailed` (WARNING); the
  step waits, and stalls visibly if the leader never moves.
- A failed throttle command raises `CommandFailed` (WARNING); so does a failed Cordon or
  Uncordon (`handlers.cordons`), saying what it leaves and how to do it by hand. A failed
  ClearThrottle of a movement or of log-dir moves (`handlers.throttle.issue_tracked_clear`: the
  state keeps what it clears until its result) is asked again: what it was to clear goes back
  into its throttle marker at the next snapshot, or when one of its brokers is back
  (`handlers.progress.handle_failed_clears`), and so is one the executor refused (expired while
  it was away: it cleared nothing); an ok one is awaited no more. A failed SetThrottle
  changes nothing (the steps' throttles stay, and the movement's clear removes them).
- A failed `LogDirMove`: `handlers.log_dirs` (retried while transient, else dropped).
- `STALE_EPOCH` failures are ignored: a newer pipeline instance owns the commands.
- A command the executor refused as untrusted (`REFUSALS`) raises `CommandFailed` (ERROR)
  naming the command and where the executor read it (its message names the topic, partition,
  offset and the producer's client id header, if any), and changes nothing else:
  - `UNKNOWN_EPOCH`: an epoch above the planner epoch in the store, no pipeline issued it;
  - `BAD_SIGNATURE`: with a command signing key configured, unsigned or badly signed;
  - `COMMAND_EXPIRED`: decided longer ago than the executor remembers command ids (a replay,
    or a backlog read after a long stop). A genuine step refused so is not retried; it stalls
    (`ReassignmentStalled` after `step.stall.timeout`), and its alert says so.
  The fields of such a result (id, kind, epoch) are whatever the sender wrote: they are quoted,
  never looked up.
- A result for a command we do not know (a finished or superseded reassignment, another step
  number) is ignored without an alert: it is history, not news.
"""

from __future__ import annotations

from typing import Any, Mapping

from handlers.outbox import ERROR, WARNING, tp_key
from handlers.context import BatchContext
from handlers.cordons import forget_failed_cordon
from handlers.log_dirs import handle_log_dir_result
from handlers.plan_ends import end_plan_member
from handlers.throttle import note_clear_result
from planning.movement.eta import add_finished_work, compute_finished_work
from planning.model import TopicPartition
from planning.movement.reassignment import confirm_cancel, fail_step, note_step_applied

# The error codes of CommandResult as the executor writes them (Kafka's names; librdkafka's local
# ones without their leading underscore: `runtime.clients.kafka_errors.kafka_error_name`).
RETRIED_STEP_ERRORS = frozenset({
    "REQUEST_TIMED_OUT", "NOT_CONTROLLER", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER",
    "REASSIGNMENT_IN_PROGRESS", "BROKER_NOT_AVAILABLE", "NETWORK_EXCEPTION", "CONNECTION_ERROR",
    "THROTTLING_QUOTA_EXCEEDED", "TRANSIENT_ERROR", "TIMED_OUT", "TRANSPORT", "ALL_BROKERS_DOWN",
    "KAFKA_TIMEOUT", "KAFKA_CONNECTION", "NO_BROKERS_AVAILABLE", "NODE_NOT_READY", "UNKNOWN_BROKER_ID",
})
REMEDIES = {
    "INVALID_REPLICA_ASSIGNMENT": "the target names a broker Kafka does not know, or one twice: check "
                                  "the brokers and request the partition again",
    "UNKNOWN_TOPIC_OR_PARTITION": "the topic or partition no longer exists",
    "CLUSTER_AUTHORIZATION_FAILED": "grant the executor's principal ALTER on the cluster (docs/security.md, "
                                    "\"ACLs\") and request the partition again",
    "TOPIC_AUTHORIZATION_FAILED": "grant the executor's principal DESCRIBE on the topic and request "
                                  "the partition again",
    "POLICY_VIOLATION": "a broker-side policy refused the change: see the brokers' log",
}
DEFAULT_REMEDY = "see the executor's log, then request the partition again"

REFUSALS = {
    "UNKNOWN_EPOCH": "its epoch {epoch} is no pipeline's, so someone else wrote it to the commands topic; "
                     "allow Write on that topic to the pipeline's principal alone",
    "BAD_SIGNATURE": "it is not signed with the command signing key, so someone else wrote it to the commands "
                     "topic (or this pipeline runs without the executor's command_signing_key_file); allow "
                     "Write on that topic to the pipeline's principal alone",
    "COMMAND_EXPIRED": "it was decided longer ago than the executor remembers command ids: a replay of an old "
                       "command, or a backlog read after a long stop (a step of ours refused so stalls)",
}
"""Refusals of a command the executor could not trust (module doc), and what they mean."""

CORDON_REMEDIES = {
    "Cordon": "the broker (draining) or its full dirs (being emptied) are not cordoned, so new topics may "
              "still land there; cordon them by hand (kafka-configs --alter --entity-type brokers --entity-name "
              "ID --add-config cordoned.log.dirs=* for a broker, =DIR,DIR for dirs)",
    "Uncordon": "the brokers may still be cordoned (no new replica lands on them); remove it by hand "
                "(kafka-configs --alter --entity-type brokers --entity-name ID --delete-config cordoned.log.dirs)",
}
"""What a failed Cordon or Uncordon (`handlers.cordons`) leaves, and what to do."""

IGNORED_ERRORS = {
    "CancelReassignment": {"NO_REASSIGNMENT_IN_PROGRESS"},
    "ElectLeader": {"ELECTION_NOT_NEEDED"},
}


def handle_command_results(context: BatchContext, results: tuple[Mapping[str, Any], ...]) -> None:
    by_id = None
    for result in results:
        if result.get("ok", True):
            if result.get("command_kind") == "CancelReassignment":
                _confirm_cancel(context, result)
            elif result.get("command_kind") == "ReassignmentStep":
                _note_applied(context, result)
            elif result.get("command_kind") == "ClearThrottle":
                note_clear_result(context, str(result.get("command_id", "")), ok=True)
            continue
        code = result.get("error_code") or "UNKNOWN_SERVER_ERROR"
        kind = str(result.get("command_kind", ""))
        if code == "STALE_EPOCH" or code in IGNORED_ERRORS.get(kind, ()):
            continue
        details = {"command_id": result.get("command_id", ""), "command_kind": kind,
                   "error_code": code, "step": result.get("step", 0)}
        if code in REFUSALS:  # a command no pipeline issued reached the executor
            said = result.get("message") or code
            if kind == "ClearThrottle":  # ours expired unapplied (an executor long away): cleared nothing
                note_clear_result(context, str(details["command_id"]), ok=False)
            context.outbox.alert("CommandFailed", ERROR, "commands",
                                 f"the executor refused {kind} {details['command_id']} ({code}): "
                                 f"{REFUSALS[code].format(epoch=result.get('epoch'))}. The executor said: {said}",
                                 {**details, "epoch": result.get("epoch", ""), "executor_message": said})
            continue
        detail = result.get("message") or code
        if kind == "LogDirMove":
            handle_log_dir_result(context, result, code, str(detail), code in RETRIED_STEP_ERRORS)
            continue
        if kind in ("SetThrottle", "ClearThrottle"):
            again = kind == "ClearThrottle" and note_clear_result(context, str(details["command_id"]), ok=False)
            context.outbox.alert("CommandFailed", WARNING, "throttle",
                                 f"{kind} failed: {detail}" + (
                                     "; asked again at the next snapshot (a down broker once it is back), "
                                     "once nothing moves there" if again else ""), details)
            continue
        if kind in CORDON_REMEDIES:
            forget_failed_cordon(context, kind, str(result.get("command_id", "")))
            context.outbox.alert("CommandFailed", WARNING, "cordon",
                                 f"{kind} failed: {detail}; asked again at the next snapshot; "
                                 f"{CORDON_REMEDIES[kind]}", details)
            continue
        if by_id is None:
            by_id = {r.reassignment_id: tp for tp, r in context.state.reassignments.items()}
        tp = by_id.get(result.get("reassignment_id"))
        record = context.state.reassignments.get(tp) if tp is not None else None
        if record is None:  # not ours, or given up by an earlier result of this batch (a duplicate)
            continue
        details["reassignment_id"] = record.reassignment_id
        if kind == "ReassignmentStep":
            if record.in_flight is None or record.in_flight.number != result.get("step"):
                continue
            _step_failed(context, tp, record, code, str(detail), details)
        else:
            context.outbox.alert("CommandFailed", ERROR if kind == "CancelReassignment" else WARNING,
                                 tp_key(tp), f"{kind} for {tp} failed: {detail}", details)


def _step_failed(context: BatchContext, tp, record, code: str, detail: str, details: dict) -> None:
    """The step in flight failed: retried later, or the partition given up (module docstring)."""
    step = f"step {record.in_flight.number} of {tp} to {list(record.in_flight.step.target)}"
    limit = context.policy.step_retry_max
    if code in RETRIED_STEP_ERRORS and record.failed_attempts < limit:  # retried quietly
        context.state = context.state.with_records({tp: fail_step(record, context.now_ms / 1000.0, detail)})
        return
    ended = compute_finished_work((record,), context.state.cluster)
    context.state = context.state.with_records({tp: None}).with_changes(
        replication_meter=add_finished_work(context.state.replication_meter, ended))
    end_plan_member(context, record, completed=False)
    if code in RETRIED_STEP_ERRORS:
        context.outbox.alert("ReassignmentStalled", ERROR, tp_key(tp),
                             f"{step} failed {record.failed_attempts + 1} times in a row, last: {detail}; "
                             f"giving up on {tp} (it stays where Kafka has it): request it again once "
                             "the cluster answers (step.retry.max)", details)
        return
    context.outbox.alert("CommandFailed", ERROR, tp_key(tp),
                         f"{step} failed: {detail}; giving up on {tp} (it stays where Kafka has it): "
                         f"{REMEDIES.get(code, DEFAULT_REMEDY)}", details)


def _confirm_cancel(context: BatchContext, result: Mapping[str, Any]) -> None:
    reassignments = context.state.reassignments
    for tp, record in reassignments.items():
        if record.reassignment_id == result.get("reassignment_id"):
            confirmed = confirm_cancel(record, int(result.get("step", 0)))
            if confirmed is not record:
                context.state = context.state.with_records({tp: confirmed})
            return


def _note_applied(context: BatchContext, result: Mapping[str, Any]) -> None:
    """An ok ReassignmentStep: its step in flight keeps the time it was applied (RULES)."""
    topic, _, partition = str(result.get("key", "")).rpartition("-")
    at_ms, step = result.get("event_time"), result.get("step")
    if not topic or not partition.isdigit() or not isinstance(at_ms, int) or not isinstance(step, int):
        return
    tp = TopicPartition(topic, int(partition))
    record = context.state.reassignments.get(tp)
    if record is None or record.reassignment_id != result.get("reassignment_id"):
        return
    noted = note_step_applied(record, step, at_ms)
    if noted is not record:
        context.state = context.state.with_records({tp: noted})
