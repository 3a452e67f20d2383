"""What the executor reported about our commands (SPEC 2, 7: CommandResult).

RULES:
- `ok` results change nothing — completion is judged from the cluster (partition events), never
  from the executor's word — but one: an ok `CancelReassignment` of the step in flight confirms
  that Kafka reverted it, so the view of the replicas from before the step can be trusted even
  if it never showed the step (`planning.movement.cancel.compute_cancel_observed`).
- A failed `ReassignmentStep` that is the step in flight of an active reassignment (same
  reassignment id and step number): `CommandFailed` (ERROR) and the controller **gives up on that
  partition** — the record is dropped and the partition stays wherever Kafka has it (the
  executor already retried transient errors for `executor_retry_seconds`, so what reaches us is
  permanent; an operator may re-request it). Retrying here would need a new command id (the
  executor is idempotent by id) and a retry count in the state: not done.
- A failed `CancelReassignment` with `NO_REASSIGNMENT_IN_PROGRESS` is expected (the step
  finished before the cancel reached Kafka; the revert starts from there): ignored. Other
  cancel failures raise `CommandFailed` (ERROR).
- A failed `ElectLeader` (other than `ELECTION_NOT_NEEDED`) raises `CommandFailed` (WARNING); the
  step waits, and stalls visibly if the leader never moves.
- A failed throttle command raises `CommandFailed` (WARNING).
- `STALE_EPOCH` failures are ignored: a newer pipeline instance owns the commands.
- A result for a command we do not know (a finished or superseded reassignment, another step
  number) is ignored without an alert: it is history, not news.
"""

from __future__ import annotations

from typing import Any, Mapping

from handlers.outbox import ERROR, WARNING, tp_key
from handlers.context import BatchContext
from planning.movement.reassignment import confirm_cancel

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
            continue
        code = result.get("error_code") or "UNKNOWN_SERVER_ERROR"
        kind = str(result.get("command_kind", ""))
        if code == "STALE_EPOCH" or code in IGNORED_ERRORS.get(kind, ()):
            continue
        details = {"command_id": result.get("command_id", ""), "command_kind": kind,
                   "error_code": code, "step": result.get("step", 0)}
        detail = result.get("message") or code
        if kind in ("SetThrottle", "ClearThrottle"):
            context.outbox.alert("CommandFailed", WARNING, "throttle",
                                 f"{kind} failed: {detail}", details)
            continue
        if by_id is None:
            by_id = {r.reassignment_id: tp for tp, r in context.state.reassignments.items()}
        tp = by_id.get(result.get("reassignment_id"))
        if tp is None:
            continue
        record = context.state.reassignments[tp]
        details["reassignment_id"] = record.reassignment_id
        if kind == "ReassignmentStep":
            if record.in_flight is None or record.in_flight.number != result.get("step"):
                continue
            remaining = {k: v for k, v in context.state.reassignments.items() if k != tp}
            context.state = context.state.with_changes(reassignments=remaining)
            context.outbox.alert("CommandFailed", ERROR, tp_key(tp),
                                 f"step {record.in_flight.number} of {tp} to "
                                 f"{list(record.in_flight.step.target)} failed: {detail}; giving up on "
                                 f"{tp} (it stays where Kafka has it)", details)
        else:
            context.outbox.alert("CommandFailed", ERROR if kind == "CancelReassignment" else WARNING,
                                 tp_key(tp), f"{kind} for {tp} failed: {detail}", details)


def _confirm_cancel(context: BatchContext, result: Mapping[str, Any]) -> None:
    reassignments = context.state.reassignments
    for tp, record in reassignments.items():
        if record.reassignment_id == result.get("reassignment_id"):
            confirmed = confirm_cancel(record, int(result.get("step", 0)))
            if confirmed is not record:
                context.state = context.state.with_changes(reassignments={**reassignments, tp: confirmed})
            return
