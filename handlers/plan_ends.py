"""The end of a plan: one `PlanCompleted` when the last partition a plan moves stops moving for it.

RULES:
- OPEN (`open_plan`, when a plan is executed: `handlers.plans.handle_plan`): the partitions whose
  record it started or re-targeted are its members; a member re-targeted away from an earlier
  plan counts there as superseded (which may end that plan). A plan id seen again (a request
  sent twice) adds its new members to the same record.
- END OF A MEMBER (`end_plan_member`, wherever a record ends: `handlers.progress` for a step
  sequence completed, reverted, stopped or its topic deleted; `handlers.results` for a step given
  up): counted in its plan (`Reassignment.plan`) as completed or cancelled. A record of no plan
  being tracked (started before the state knew plans, or rebuilt from Kafka) is not counted.
- ALERT: when no member remains, one `PlanCompleted` (INFO; WARNING when some were cancelled)
  on the plan's subject: its partitions, how they ended, the replica bytes its targets added,
  how long it took, and the balance reached — each eligible broker's replicas and bytes as its
  dirs last reported them (O(brokers x dirs): the plan's end walks no partition). The record is
  then dropped.

Cost: O(members) to open, O(1) per member's end, O(brokers) at the plan's end.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Mapping

from handlers.context import BatchContext
from handlers.outbox import INFO, WARNING
from planning.model import Cluster, TopicPartition
from planning.movement.eta import compute_reassignment_bytes
from planning.movement.reassignment import Reassignment
from state.model import PlanRecord


def open_plan(context: BatchContext, plan_id: str, subject: str, reason: str,
              made: Mapping[TopicPartition, Reassignment], before: Mapping[TopicPartition, Reassignment]) -> None:
    """The OPEN rule: `made` are the records the plan started or re-targeted, `before` the
    records as they were."""
    if not made:
        return
    for tp in made:
        prior = before.get(tp)
        if prior is not None and prior.active and prior.plan != plan_id:
            _count_end(context, prior.plan, "superseded")
    cluster = context.state.cluster
    added = sum(compute_reassignment_bytes(record, cluster.partition(tp)).to_move for tp, record in made.items())
    plans = dict(context.state.plans)
    known = plans.get(plan_id)
    if known is None:
        plans[plan_id] = PlanRecord(plan_id, subject, reason, context.now_ms, len(made), len(made), added)
    else:
        fresh = sum(1 for tp in made if (prior := before.get(tp)) is None or prior.plan != plan_id)
        plans[plan_id] = replace(known, partitions=known.partitions + fresh, remaining=known.remaining + fresh,
                                 bytes_planned=known.bytes_planned + added)
    context.state = context.state.with_changes(plans=plans)


def end_plan_member(context: BatchContext, record: Reassignment, completed: bool) -> None:
    """The END OF A MEMBER rule."""
    _count_end(context, record.plan, "completed" if completed else "cancelled")


def _count_end(context: BatchContext, plan_id: str, how: str) -> None:
    plans = context.state.plans
    known = plans.get(plan_id)
    if known is None:
        return
    ended = replace(known, remaining=max(0, known.remaining - 1), **{how: getattr(known, how) + 1})
    rest = dict(plans)
    if ended.remaining:
        rest[plan_id] = ended
    else:
        del rest[plan_id]
        _announce(context, ended)
    context.state = context.state.with_changes(plans=rest)


def _announce(context: BatchContext, plan: PlanRecord) -> None:
    seconds = max(0, context.now_ms - plan.started_at_ms) / 1000
    replicas, held = _balance(context.state.cluster)
    ends = [f"{plan.completed} at their target"]
    ends += [f"{plan.cancelled} cancelled"] if plan.cancelled else []
    ends += [f"{plan.superseded} re-targeted by a later plan"] if plan.superseded else []
    balance = ""
    if replicas:
        balance = f"; replicas per broker {min(replicas)}-{max(replicas)}"
        if held and statistics.fmean(held) > 0:
            balance += f", disk bytes CV {statistics.pstdev(held) / statistics.fmean(held):.3f}"
    context.outbox.alert(
        "PlanCompleted", WARNING if plan.cancelled else INFO, plan.subject,
        f"plan {plan.plan_id} ({plan.reason}) ended after {seconds:.0f} s: {plan.partitions} partitions, "
        f"{', '.join(ends)}; {plan.bytes_planned:,} replica bytes planned{balance}",
        {"plan_id": plan.plan_id, "partitions": plan.partitions, "completed": plan.completed,
         "cancelled": plan.cancelled, "superseded": plan.superseded, "bytes_planned": plan.bytes_planned,
         "duration_seconds": round(seconds, 1), "started_at_ms": plan.started_at_ms,
         "replicas_min": min(replicas, default=0), "replicas_max": max(replicas, default=0)})


def _balance(cluster: Cluster) -> tuple[list[int], list[int]]:
    """Each eligible broker's replica count and bytes as its online dirs last reported them
    (brokers whose dirs report nothing are left out)."""
    replicas, held = [], []
    for broker in cluster.brokers:
        if not broker.eligible:
            continue
        dirs = broker.online_log_dirs
        if not dirs or any(d.replica_count is None for d in dirs):
            continue
        replicas.append(sum(d.replica_count for d in dirs))
        held.append(sum(d.replica_bytes or 0 for d in dirs))
    return replicas, held
