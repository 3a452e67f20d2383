"""From a placement goal to reassignments, proposals or alerts, depending on the mode.

Every reaction that moves replicas (broker added, decommission, broker failed, disk failed,
rebalance and reassign requests, approvals) goes through `handle_plan`:

- mode `observe`: a `PlanCreated` alert describing the plan (`executed=false`); nothing else;
- mode `approve`, plan not approved yet: a `Proposal` in the state and a `ProposalReady` alert;
  an `Approve` request executes it later;
- mode `auto` (or an approved plan, or an explicit operator `Reassign`): the targets become
  reassignments (`planning.movement.cancel.compute_reassign_request`: partitions already moving get the
  new target — supersede — and the others join), and a `PlanCreated` alert; its details count
  the partitions superseded (`superseded`, `superseded_partitions`).

RULES:
- Plans are computed on the **projected** cluster: every partition with a running reassignment
  is taken as already at its final target, so a new plan composes with the work in flight
  instead of planning from a half-moved state.
- A partition Kafka shows reassigning that no running reassignment of ours projects (another
  tool moves it) is taken as at the target of that move: Kafka's replicas less the removing ones,
  in Kafka's order (`planning.movement.completion.compute_shown_replicas`), never the combined
  list Kafka shows meanwhile (target plus the replicas being removed: one replica too many, on a
  broker about to lose it). That is where it will be, and what the new reassignment starts from
  (its original replicas); a plan that leaves it there makes no reassignment for it, and one
  that moves it on makes one that waits until Kafka shows the other move ended (the batch rule's
  "moved by another tool", and one `ExternalReassignment` WARNING saying so), then steps from
  wherever that move left it. `PlanCreated` counts them (`waiting_on_other_tools`).
- An automatic plan never touches a partition that is being cancelled or reverted (the
  operator's cancel wins); an explicit Reassign request does (it supersedes the revert).
- Reassignment ids are `<plan id>/<topic>-<partition>`; plan ids are `b<batch>-<kind>-<n>` or
  the request id, so every id is a function of the inputs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from handlers.outbox import INFO, summarise
from handlers.context import BatchContext
from handlers.plan_ends import open_plan
from handlers.policy import Policy, compute_canary_topic, compute_excluded_topics
from planning.movement.cancel import compute_reassign_request
from state.model import ControllerState, Proposal
from planning.model import Cluster, PartitionState, TopicPartition
from planning.movement.completion import compute_shown_replicas
from planning.placement.balance_modes import Balance, plan_balanced
from planning.placement.bytes_balance import Tolerances
from planning.placement.placer import Goal, PlacementPlan
from planning.movement.reassignment import ReassignmentState

Targets = Mapping[TopicPartition, tuple[int, ...]]


def compute_projected_cluster(state: ControllerState) -> Cluster:
    """The cluster as it will be once every running reassignment reaches its final target and
    every other reassignment Kafka shows reaches its own (RULES)."""
    projected: dict[TopicPartition, PartitionState] = {}
    for tp, record in state.reassignments.items():
        partition = state.cluster.partition(tp)
        if partition is None or record.state is not ReassignmentState.RUNNING:
            continue
        projected[tp] = _at_target(partition, record.final_target)
    for partition in state.cluster.partitions():
        if partition.reassigning and partition.tp not in projected:
            target = compute_shown_replicas(partition)
            offline = frozenset(partition.offline_replicas)
            projected[partition.tp] = replace(
                _at_target(partition, target), offline_replicas=tuple(b for b in target if b in offline))
    return state.cluster.with_partitions(projected.values())


def _at_target(partition: PartitionState, target: tuple[int, ...]) -> PartitionState:
    """`partition` once a reassignment to `target` completed: all in sync, `target[0]` leads."""
    dirs = dict(zip(partition.replicas, partition.log_dirs)) if partition.log_dirs else {}
    return replace(
        partition, replicas=target, isr=target, leader=target[0], adding=(), removing=(),
        offline_replicas=(),
        log_dirs=tuple(dirs.get(b) for b in target) if dirs else (),
    )


def compute_balance(policy: Policy) -> Balance:
    """How plans balance, from the policy (`balance.*` settings)."""
    return Balance(policy.balance_mode, Tolerances(
        disk=policy.balance_disk_tolerance, replicas=policy.balance_replica_tolerance,
        leaders=policy.balance_leader_tolerance, topic_spread=policy.balance_topic_spread,
        bytes_in=policy.balance_bytes_in_tolerance, network_out=policy.balance_network_out_tolerance),
        policy.balance_disk_budget_bytes)


def compute_plan_proof(plan: PlacementPlan) -> dict[str, object]:
    """What a plan's alert says of its optimality: the bound of the planner that made it."""
    if plan.bytes_moved_lower_bound is None:
        return {"lower_bound": plan.replica_moves_lower_bound}
    return {"balance_mode": plan.balance_mode, "bytes_moved": plan.bytes_moved,
            "bytes_lower_bound": plan.bytes_moved_lower_bound,
            "gap_percent": "n/a" if plan.gap_percent is None else round(plan.gap_percent, 2),
            "within_tolerance": str(bool(plan.within_tolerance)).lower(),
            **({} if plan.byte_budget is None else {  # the band a byte budget chose (`bytes_budget`)
                "byte_budget": plan.byte_budget, "disk_tolerance": plan.disk_tolerance}),
            # no plan moving as many bytes reaches a lower disk CV (`planning.placement.spread_floor`)
            "disk_cv_floor": "n/a" if plan.disk_cv_floor is None else round(plan.disk_cv_floor, 4),
            # per resource: brokers outside its band before -> after, and its CV before -> after
            "spread": "; ".join(f"{name}: {r.before.outside} -> {r.after.outside} outside, CV {r.before.cv:.3f} -> "
                                f"{r.after.cv:.3f}" for name, r in plan.resources.items())}


def compute_plan(state: ControllerState, policy: Policy, goal: Goal,
                 keep: Callable[[TopicPartition], bool] | None = None) -> tuple[PlacementPlan, dict, dict]:
    """Plan `goal` on the projected cluster; the targets (and dirs) of the partitions kept.
    Topics outside `topics.include` or inside `topics.exclude` are only healed and drained, the
    canary's is left out (the watcher keeps it); no
    new replica goes where its dir's volume would pass `disk.max.usage.percent`.

    Raises what `plan_placement` raises (PlanInfeasibleError, InvalidReplicaAssignmentError).
    """
    cluster = compute_projected_cluster(state)
    canary = compute_canary_topic(policy)
    if canary in cluster.topics_by_name:  # the watcher's to place (`compute_canary_topic`)
        cluster = replace(cluster, topics=tuple(t for t in cluster.topics if t.name != canary))
    excluded = compute_excluded_topics((t.name for t in cluster.topics), policy)
    plan = plan_balanced(cluster, replace(goal, excluded_topics=goal.excluded_topics | excluded,
                                          disk_max_usage_percent=policy.disk_plan_limit_percent),
                         compute_balance(policy))
    targets = {tp: t for tp, t in plan.targets.items() if keep is None or keep(tp)}
    dirs = {tp: plan.target_log_dirs[tp] for tp in targets if tp in plan.target_log_dirs}
    return plan, targets, dirs


def handle_plan(context: BatchContext, plan_id: str, targets: Targets, reason: str, subject: str,
                approved: bool = False, target_log_dirs: Mapping | None = None,
                details: Mapping[str, object] | None = None, explicit: bool = False) -> bool:
    """Turn targets into work according to the mode (module docstring). True if executed."""
    state = context.state
    targets = {
        tp: tuple(t) for tp, t in sorted(targets.items())
        if (explicit or not _being_cancelled(state, tp)) and state.cluster.partition(tp) is not None
    }
    if not targets:
        return False
    current = {tp: compute_shown_replicas(state.cluster.partition(tp)) for tp in targets}
    moves = sum(len(set(t) - set(current[tp])) for tp, t in targets.items())
    info = {"plan_id": plan_id, "partitions": len(targets), "replica_moves": moves,
            "targets": summarise([f"{tp}:{list(t)}" for tp, t in targets.items()], 10),
            **(details or {})}
    mode = context.policy.mode
    if mode == "observe":
        context.outbox.alert("PlanCreated", INFO, subject,
                             f"{reason}: plan of {moves} replica moves over {len(targets)} partitions "
                             f"(mode observe: not executed)", {**info, "executed": "false"})
        return False
    if mode == "approve" and not approved:
        proposal = Proposal(plan_id, targets, reason, context.now_ms)
        context.state = state.with_changes(proposals={**state.proposals, plan_id: proposal})
        context.outbox.alert("ProposalReady", INFO, plan_id,
                             f"{reason}: proposal {plan_id} moves {moves} replicas over "
                             f"{len(targets)} partitions; approve it to execute",
                             {**info, "executed": "false"})
        return False
    dirs = {tp: tuple(d) for tp, d in (target_log_dirs or {}).items() if tp in targets}
    superseded = compute_superseded(state, targets)
    records = compute_reassign_request(state.reassignments, targets, current, request_id=plan_id,
                                       reason=reason, target_log_dirs=dirs)
    made = {tp: records[tp] for tp in targets if tp in records and records[tp] is not state.reassignments.get(tp)}
    context.state = state.with_records(made)
    open_plan(context, plan_id, subject, reason, made, state.reassignments)
    others = compute_waiting_on_other_tools(state, made)
    note = (f"; {len(superseded)} of them were already moving and take this new target "
            f"(superseded: the step in flight finishes first)" if superseded else "")
    if others:
        note += (f"; {len(others)} of them another tool is moving: planned from where that move takes "
                 "them, they wait until Kafka shows it ended")
    context.outbox.alert("PlanCreated", INFO, subject,
                         f"{reason}: moving {moves} replicas over {len(targets)} partitions{note}",
                         {**info, "executed": "true", "superseded": len(superseded),
                          "superseded_partitions": summarise([str(tp) for tp in superseded], 10),
                          "waiting_on_other_tools": len(others),
                          "waiting_on_other_tools_partitions": summarise([str(tp) for tp in others], 10)})
    return True


def compute_waiting_on_other_tools(state: ControllerState, made: Targets) -> list[TopicPartition]:
    """The partitions of `made` (new or changed records) that Kafka shows another tool moving:
    reassigning with no step of ours in flight."""
    return [tp for tp in sorted(made)
            if (partition := state.cluster.partition(tp)) is not None and partition.reassigning
            and ((record := state.reassignments.get(tp)) is None or record.in_flight is None)]


def compute_superseded(state: ControllerState, targets: Targets) -> list[TopicPartition]:
    """The partitions of `targets` already moving towards another target (a new target supersedes it)."""
    return [tp for tp, target in sorted(targets.items())
            if (record := state.reassignments.get(tp)) is not None and record.active
            and (record.final_target != tuple(target) or record.state is not ReassignmentState.RUNNING)]


def _being_cancelled(state: ControllerState, tp: TopicPartition) -> bool:
    record = state.reassignments.get(tp)
    return record is not None and record.state in (ReassignmentState.CANCELLING,
                                                   ReassignmentState.REVERTING)
