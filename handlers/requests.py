"""Operator requests: reassign, cancel, decommission, rebalance, approve, config,
tick, and (schema version 4, `Request.action`) reject and recommission.

Requests are handled in offset order. Every request but a Tick gets exactly one verdict alert
whose subject is the request id, which `reassigner request ...` waits for:
- accepted → `RequestAccepted` (INFO), after the alerts of what it did; its message repeats
  theirs (the plan's summary: moves, partitions, proposal id) or says "nothing to do", and its
  details name the request kind and those alerts' kinds;
- refused → `RequestRejected` (WARNING): it changes nothing, and its details carry the
  Kafka-style `error_code` of the `schemas.errors` exception that refused it:

    malformed envelope or payload, unknown proposal, empty broker list  INVALID_REQUEST
      or an id, key or requester over 256 characters
    a defect met while handling it (it changes nothing)                 UNKNOWN_SERVER_ERROR
    unknown topic or partition                                          UNKNOWN_TOPIC_OR_PARTITION
    unknown/dead/draining/negative/duplicate broker, RF not satisfiable INVALID_REPLICA_ASSIGNMENT
    cancel with nothing in progress in its scope                        NO_REASSIGNMENT_IN_PROGRESS
    unknown setting or bad value                                        INVALID_CONFIG
    reassign without `additional` while reassignments run               REASSIGNMENT_IN_PROGRESS

RULES:
- Reassign: every target is validated first (`planning.validation`); one bad partition rejects
  the whole request, as the Kafka tool does. Without `additional` it is refused while any
  reassignment is active (the tool's behaviour, and the Reassign schema's contract); with it,
  new partitions join and partitions already moving get the new target (KIP-455 supersede: the
  step in flight finishes, then stepping continues towards the new target). An explicit request
  is the operator's decision: it executes in mode `approve` too (never in `observe`).
- Cancel: scope = everything / a topic / one partition (a partition without a topic is
  malformed). Steps in flight get a `CancelReassignment` command (id
  `<reassignment id>:<step>:CancelReassignment`); the reassignments then step back to their
  original replicas (or stop, with `keep`) — see `handlers.progress`. A draining broker whose
  drain the cancel stops entirely (it cancels a reassignment moving a replica off it, and none
  moving one off it is left) stops draining, as a Recommission does, unless `keep_draining`;
  the alert names the brokers either way.
- Decommission: the brokers are marked draining at once (nothing new goes to them) and a plan
  moves every replica off them (`Goal(drain_brokers=..., heal=False, rebalance=False)`). On
  Kafka 4.3+ they are cordoned too, so that Kafka's own placer puts no new topic's replica on
  them (`handlers.cordons`); a recommission, or a cancel that stops the drain, uncordons them.
- Rebalance: `Goal(rebalance=True, heal=False)`, restricted to the topics named (all if none).
  With `log_dirs` it balances the log dirs of the brokers named instead (`handlers.log_dirs`).
- Reassign naming a dir for a replica that stays on its broker, and Cancel: see
  `handlers.log_dirs` (log-dir moves are requested and cancelled with the same requests).
- Approve: executes a stored proposal, after re-validating its targets against the cluster now
  (a stale proposal is rejected with INVALID_REPLICA_ASSIGNMENT and dropped).
- SetConfig: stores the override (text) after parsing it (`handlers.policy`); `None` resets.
  It applies from this decision on — to refills, never to steps already in flight.
- Tick: carries only time (the batch's `now_ms` already includes it); nothing else happens.
- Reject (an action): drops a proposal (`handlers.proposals`).
- Recommission (an action): the brokers stop draining, so plans may put replicas on them again;
  a broker not draining, or unknown, is refused. Reassignments already planned by the
  decommission go on to their targets (the alert counts those moving replicas off the brokers;
  `request cancel` stops them). Pause and resume are `SetConfig` of `reassignment.paused`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping

from handlers.outbox import INFO, WARNING, compute_bounded_text, summarise, tp_key
from handlers.context import BatchContext
from handlers.cordons import reconcile_cordons
from handlers.log_dirs import cancel_log_dir_moves, handle_balance_dirs_request, plan_requested_dirs
from handlers.plans import compute_plan, compute_plan_proof, handle_plan
from handlers.proposals import handle_reject, require_proposal
from handlers.policy import (compute_config_text, compute_excluded_pattern, compute_excluded_topics,
                             compute_throttle_bounds, effective_policy, require_dynamic_key)
from planning.movement.cancel import CancelScope, compute_cancel
from planning.model import TopicPartition
from state.model import ControllerState
from planning.placement.placer import Goal
from planning.validation import validate_targets
from schemas.errors import (
    InvalidInputError,
    NoReassignmentInProgressError,
    InvalidReplicaAssignmentError,
    ReassignerError,
    UnknownTopicOrPartitionError,
)

REBALANCE_REASON = "rebalance request"  # how the reason of a Rebalance request's steps starts


class ReassignmentInProgressError(InvalidInputError):
    """A Reassign without `additional` while reassignments are running (the tool refuses it)."""

    code = "REASSIGNMENT_IN_PROGRESS"


def handle_requests(context: BatchContext, requests: tuple[Mapping[str, Any], ...]) -> None:
    """Handle every request in order; a refused one becomes a RequestRejected alert. A request
    that fails half-way, for whatever reason, changes nothing: the state, the outbox and the plan
    numbering are put back as they were before it, and the rest of the batch goes on."""
    for request in requests:
        request_id = str(request.get("id") or request.get("key") or "unknown-request")
        before = (context.state, context.outbox.mark(), context.plans_made)
        try:
            require_bounded_envelope(request)
            kind, fields = _payload(request)
            handler = ACTIONS[kind] if kind in ACTIONS else HANDLERS[kind]
            handler(context, request_id, fields)
            if kind != "Tick":
                _accept(context, request_id, kind, before[1][0])
            continue
        except ReassignerError as error:
            refusal = error
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            refusal = InvalidInputError(f"malformed request: {error!r}")
        except Exception as error:  # a defect must cost one request, never the pipeline
            refusal = ReassignerError(f"could not be handled ({type(error).__name__}: {error}); "
                                      "it changed nothing")
        context.state, plans_made = before[0], before[2]
        context.outbox.rollback(before[1])
        context.plans_made = plans_made
        context.refresh_policy()
        _reject(context, request_id, refusal)


MAX_ENVELOPE_CHARS = 256


def require_bounded_envelope(request: Mapping[str, Any]) -> None:
    """Refuse an id, key or requester longer than `MAX_ENVELOPE_CHARS` (they travel in every
    alert and command about the request)."""
    for name in ("id", "key", "requested_by"):
        value = request.get(name)
        if isinstance(value, str) and len(value) > MAX_ENVELOPE_CHARS:
            raise InvalidInputError(f"the request's {name} has {len(value):,} characters; at most "
                                    f"{MAX_ENVELOPE_CHARS} are allowed")


def _payload(request: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """(kind, fields): the action's when the request has one (schema version 4), else the payload's."""
    action = request.get("action")
    if action is not None:
        if not isinstance(action, Mapping) or action.get("kind") not in ACTIONS:
            kind = action.get("kind") if isinstance(action, Mapping) else action
            raise InvalidInputError(f"unknown request kind {kind!r}: this pipeline knows "
                                    f"{sorted(ACTIONS)} besides {sorted(HANDLERS)}")
        return str(action["kind"]), action
    payload = request.get("payload")
    if not isinstance(payload, (tuple, list)) or len(payload) != 2 or payload[0] not in HANDLERS \
            or not isinstance(payload[1], Mapping):
        raise InvalidInputError(f"malformed request payload {payload!r}: expected (kind, fields) with "
                                f"kind one of {sorted(HANDLERS)}")
    return payload[0], payload[1]


def _accept(context: BatchContext, request_id: str, kind: str, first_message: int) -> None:
    """The RequestAccepted verdict, summing up the alerts the request raised."""
    raised = [m.record for m in context.outbox.messages[first_message:] if m.schema == "Alert"]
    summary = "; ".join(str(a["message"]) for a in raised) or "nothing to do"
    context.outbox.alert("RequestAccepted", INFO, request_id,
                         f"{kind} request {request_id} accepted: {compute_bounded_text(summary, 2000)}",
                         {"request_id": request_id, "kind": kind,
                          "alerts": ",".join(str(a["kind"]) for a in raised),
                          **{k: v for a in raised[:1] for k, v in a["details"].items()
                             if k in ("plan_id", "partitions", "replica_moves", "executed")}})


def _reject(context: BatchContext, request_id: str, error: ReassignerError) -> None:
    if len(request_id) > MAX_ENVELOPE_CHARS:  # the alert names it by its start, and says why
        request_id = compute_bounded_text(request_id, 64)
    context.outbox.alert("RequestRejected", WARNING, request_id, f"request {request_id} rejected: {error}",
                         {"error_code": error.code, "request_id": request_id})


# --- the kinds --------------------------------------------------------------------------------


def handle_reassign(context: BatchContext, request_id: str, fields: Mapping[str, Any]) -> None:
    entries = fields["partitions"]
    if not entries:
        raise InvalidInputError("a reassign request needs at least one partition")
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    log_dirs: dict[TopicPartition, tuple[str, ...] | None] = {}
    for entry in entries:
        tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
        if tp in targets:
            raise InvalidInputError(f"{tp} appears more than once in the request")
        targets[tp] = tuple(int(b) for b in entry["replicas"])
        dirs = entry.get("log_dirs")
        # The tool's JSON leaves log_dirs out when it has none; an empty list means the same.
        log_dirs[tp] = tuple(dirs) if dirs else None
    validate_targets(context.state.cluster, targets, log_dirs)
    active = sorted(tp for tp, r in context.state.reassignments.items() if r.active)
    if active and not fields.get("additional", False):
        raise ReassignmentInProgressError(
            f"{len(active)} reassignments are in progress (e.g. {active[0]}); "
            "resubmit with --additional to join them")
    dirs = {tp: tuple(d if d != "any" else None for d in ds) for tp, ds in log_dirs.items() if ds}
    cluster = context.state.cluster
    moving = {tp: t for tp, t in targets.items() if cluster.partition(tp).replicas != t or tp not in dirs}
    if moving:
        handle_plan(context, request_id, moving, f"reassign request {request_id}", request_id,
                    approved=True, target_log_dirs=dirs, explicit=True)
    if dirs and context.policy.mode != "observe":
        owned = plan_requested_dirs(context, request_id, dirs, targets)
        if owned:
            context.outbox.alert("PlanCreated", INFO, request_id,
                                 f"reassign request {request_id}: moving {owned} replicas between the log "
                                 "dirs of their brokers", {"plan_id": request_id, "log_dir_moves": owned,
                                                           "executed": "true"})


def handle_cancel(context: BatchContext, request_id: str, fields: Mapping[str, Any]) -> None:
    topic, partition = fields.get("topic"), fields.get("partition")
    if partition is not None and topic is None:
        raise InvalidInputError("a cancel with a partition needs its topic")
    scope = CancelScope(topic, partition)
    keep = bool(fields.get("keep", False))
    state = context.state
    try:
        decision = compute_cancel(state.reassignments, scope, keep=keep,
                                  reason=f"cancelled by {request_id} ({scope})")
    except NoReassignmentInProgressError:
        decision = None
    dir_moves = cancel_log_dir_moves(context, request_id, topic, partition)
    if decision is None:
        if not dir_moves:
            raise NoReassignmentInProgressError(f"no reassignment or log-dir move in progress for {scope}")
        context.outbox.alert("ReassignmentCancelled", INFO, request_id,
                             f"cancelling {dir_moves} log-dir moves ({scope}); started ones move back to "
                             "the dir they came from",
                             {"partitions": 0, "keep": str(keep).lower(), "log_dir_moves": dir_moves})
        return
    stopped = compute_stopped_drains(state, decision.cancelled)
    keep_draining = bool(fields.get("keep_draining", False))
    context.state = context.state.with_records({tp: decision.reassignments[tp] for tp in decision.cancelled})
    if stopped and not keep_draining:
        stop_draining(context, stopped)
    for tp in decision.cancel_in_kafka:
        record = state.reassignments[tp]
        number = record.in_flight.number
        context.outbox.command(record.command_id("CancelReassignment", number), tp_key(tp),
                               record.reassignment_id, number, f"cancelled by {request_id}",
                               "CancelReassignment", {"topic": tp.topic, "partition": tp.partition})
    names = ", ".join(map(str, stopped))
    drains = "" if not stopped else (
        f"; broker(s) {names} stay draining (--keep-draining): "
        f"`request recommission {' '.join(f'--broker {b}' for b in stopped)}` ends it" if keep_draining else f"; broker(s) {names} no longer draining: their decommission is cancelled")
    context.outbox.alert("ReassignmentCancelled", INFO, request_id,
                         f"cancelling {len(decision.cancelled)} reassignments ({scope}"
                         + (f", and {dir_moves} log-dir moves" if dir_moves else "") + "); "
                         + ("they stop where they are" if keep else "they step back to their original replicas")
                         + drains,
                         {"partitions": len(decision.cancelled), "keep": str(keep).lower(),
                          "cancelled_in_kafka": len(decision.cancel_in_kafka), "log_dir_moves": dir_moves,
                          "drains_stopped": names, "keep_draining": str(keep_draining).lower()})


def compute_stopped_drains(state: ControllerState, cancelled: Iterable[TopicPartition]) -> list[int]:
    """The draining brokers whose drain cancelling `cancelled` stops entirely: a cancelled
    reassignment moves a replica off them and no other active one does (O(reassignments): once
    per Cancel request)."""
    draining = {b.id for b in state.cluster.brokers if b.draining}
    if not draining:
        return []
    cancelled = set(cancelled)

    def leaving(record) -> set[int]:
        return draining & (set(record.original_replicas) - set(record.final_target))

    hit = set().union(*(leaving(state.reassignments[tp]) for tp in cancelled))
    if not hit:
        return []
    still = set().union(*(leaving(r) for tp, r in state.reassignments.items() if r.active and tp not in cancelled))
    return sorted(hit - still)


def stop_draining(context: BatchContext, broker_ids) -> None:
    """The brokers no longer draining: plans may put replicas on them again."""
    cluster = context.state.cluster
    brokers = [replace(b, draining=False) if b.id in broker_ids else b for b in cluster.brokers]
    context.state = context.state.with_cluster(cluster.with_brokers(brokers))
    context.close_alerts(f"BrokerDrained:{b}" for b in broker_ids)
    reconcile_cordons(context, f"broker{'s' if len(broker_ids) > 1 else ''} "
                               f"{', '.join(map(str, sorted(broker_ids)))} no longer draining")


def handle_decommission(context: BatchContext, request_id: str, fields: Mapping[str, Any]) -> None:
    broker_ids = sorted({int(b) for b in fields["broker_ids"]})
    if not broker_ids:
        raise InvalidInputError("a decommission request needs at least one broker id")
    cluster = context.state.cluster
    unknown = [b for b in broker_ids if cluster.broker(b) is None]
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"cannot decommission broker(s) {unknown}: not in the cluster (known: {sorted(cluster.brokers_by_id)})")
    goal = Goal(drain_brokers=frozenset(broker_ids), heal=False, rebalance=False)
    plan, targets, dirs = compute_plan(context.state, context.policy, goal)  # raises before anything changes
    reason = f"decommission of broker{'s' if len(broker_ids) > 1 else ''} {', '.join(map(str, broker_ids))}"
    if context.policy.mode != "observe":
        brokers = [replace(b, draining=True) if b.id in broker_ids else b for b in cluster.brokers]
        context.state = context.state.with_cluster(cluster.with_brokers(brokers))
        context.close_alerts(f"BrokerDrained:{b}" for b in broker_ids)
        reconcile_cordons(context, reason)  # before the plan's first step (handlers.cordons)
    handle_plan(context, request_id, targets, reason, request_id, target_log_dirs=dirs,
                details=compute_plan_proof(plan))


def handle_rebalance(context: BatchContext, request_id: str, fields: Mapping[str, Any]) -> None:
    if fields.get("log_dirs"):
        if fields.get("topics"):
            raise InvalidInputError("a log-dir balance names brokers, not topics")
        handle_balance_dirs_request(context, request_id, (int(b) for b in fields.get("broker_ids") or ()))
        return
    topics = {str(t) for t in fields.get("topics") or ()}
    unknown = sorted(t for t in topics if t not in context.state.cluster.topics_by_name)
    if unknown:
        raise UnknownTopicOrPartitionError(f"cannot rebalance unknown topic(s) {unknown}")
    excluded = sorted(compute_excluded_topics(topics, context.policy))
    if excluded:
        raise InvalidInputError(
            f"cannot rebalance topic(s) {excluded}: excluded from balancing (topics.include "
            f"{context.policy.topics_include!r}, topics.exclude {compute_excluded_pattern(context.policy)!r}); "
            "change them with `config set`, or move partitions with `request reassign`")
    plan, targets, dirs = compute_plan(context.state, context.policy, Goal(heal=False, rebalance=True),
                                       keep=(lambda tp: tp.topic in topics) if topics else None)
    if not targets:
        context.outbox.alert("PlanCreated", INFO, request_id,
                             "rebalance: already balanced, nothing to move",
                             {"plan_id": request_id, "partitions": 0, "replica_moves": 0,
                              **compute_plan_proof(plan)})
        return
    handle_plan(context, request_id, targets, f"{REBALANCE_REASON} {request_id}", request_id,
                target_log_dirs=dirs, details=compute_plan_proof(plan))


def handle_approve(context: BatchContext, request_id: str, fields: Mapping[str, Any]) -> None:
    proposal_id = str(fields["proposal_id"])
    proposal = require_proposal(context.state.proposals, proposal_id)
    remaining = {k: v for k, v in context.state.proposals.items() if k != proposal_id}
    cluster = context.state.cluster
    targets = {tp: t for tp, t in proposal.targets.items() if cluster.partition(tp) is not None}
    try:
        validate_targets(cluster, targets)
    except ReassignerError:
        context.state = context.state.with_changes(proposals=remaining)
        raise
    context.state = context.state.with_changes(proposals=remaining)
    handle_plan(context, proposal_id, targets, f"{proposal.reason} (approved by {request_id})",
                proposal_id, approved=True, details={"request_id": request_id})


def handle_recommission(context: BatchContext, request_id: str, fields: Mapping[str, Any]) -> None:
    broker_ids = sorted({int(b) for b in fields.get("broker_ids") or ()})
    if not broker_ids:
        raise InvalidInputError("a recommission request needs at least one broker id")
    cluster = context.state.cluster
    unknown = [b for b in broker_ids if cluster.broker(b) is None]
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"cannot recommission broker(s) {unknown}: not in the cluster (known: {sorted(cluster.brokers_by_id)})")
    not_draining = [b for b in broker_ids if not cluster.broker(b).draining]
    if not_draining:
        raise InvalidInputError(f"cannot recommission broker(s) {not_draining}: not being drained "
                                f"(draining: {sorted(b.id for b in cluster.brokers if b.draining)})")
    stop_draining(context, broker_ids)
    leaving = sorted(tp for tp, r in context.state.reassignments.items()
                     if r.active and set(broker_ids) & (set(r.original_replicas) - set(r.final_target)))
    names = ", ".join(map(str, broker_ids))
    context.outbox.alert("BrokerRecommissioned", INFO, request_id,
                         f"broker{'s' if len(broker_ids) > 1 else ''} {names} no longer draining: plans may "
                         f"put replicas on {'them' if len(broker_ids) > 1 else 'it'} again"
                         + (f"; {len(leaving)} reassignments already moving replicas off go on "
                            "(`request cancel` stops them)" if leaving else ""),
                         {"broker_ids": names, "moving_off": len(leaving),
                          "moving_off_partitions": summarise([str(tp) for tp in leaving], 10)})


def handle_set_config(context: BatchContext, request_id: str, fields: Mapping[str, Any]) -> None:
    key, value = str(fields["key"]), fields["value"]
    config = dict(context.state.config)
    if value is None:
        require_dynamic_key(key)
        config.pop(key, None)
    else:
        value, _typed = compute_config_text(key, str(value))
        config[key] = value
    if key.startswith("throttle."):  # bounds that contradict each other are refused here, not at every decision
        compute_throttle_bounds(effective_policy(context.base_policy, config))
    context.state = context.state.with_changes(config=config)
    context.refresh_policy()
    context.outbox.alert("ConfigChanged", INFO, request_id,
                         f"{key} = {value if value is not None else '(default)'} from the next refill on",
                         {"key": key, "value": "" if value is None else str(value)})


def handle_tick(context: BatchContext, request_id: str, fields: Mapping[str, Any]) -> None:
    """Time only: the batch's now_ms already includes the tick's event time."""


HANDLERS = {
    "Reassign": handle_reassign,
    "Cancel": handle_cancel,
    "Decommission": handle_decommission,
    "Rebalance": handle_rebalance,
    "Approve": handle_approve,
    "SetConfig": handle_set_config,
    "Tick": handle_tick,
}

ACTIONS = {
    "Reject": handle_reject,
    "Recommission": handle_recommission,
}
"""Handlers of `Request.action` kinds (`schemas.REQUEST_ACTION_KINDS`)."""
