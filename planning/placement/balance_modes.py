"""Which planner a goal gets: exact counts (`strict`) or disk bytes within tolerances (`bytes`).

RULE. `balance.mode` chooses how a plan that rebalances is made:
- `strict`: `plan_placement` makes every broker's replica count exact, per topic and over the
  cluster, with the fewest replica moves (proven against its bound in moves);
- `bytes`: `plan_bytes_balance` puts every broker within ±tolerance of its share of the disk
  bytes, the replica count and the leaders, with a loose per-topic spread, moving the fewest
  bytes (proven against its bound in bytes); with a byte budget (`Balance.disk_budget`),
  `plan_within_budget` chooses the disk tolerance: the tightest a plan within the budget reaches.

Some goals stay with the count planner in either mode, for what they need that the bytes
planner does not do: explicit targets (a Reassign request), `partial` plans (a heal that places
what it can and names the rest) and a heal's last resort (`ignore_racks`). A drain in mode
`bytes` places the leaving replicas by bytes. When the bytes plan leaves some partition
incomplete, or puts a new replica where no dir of its broker has room under
`disk.max.usage.percent`, the count planner plans the goal instead: it keeps such brokers out and
plans again, and refuses with the reason (`PlanInfeasibleError`) when nothing fits.
Both planners keep the hard rules (rack spread at every level, the replication factor, eligible
brokers only). The plan returned is a `PlacementPlan` either way; with `bytes` it carries
`bytes_moved_lower_bound`, `within_tolerance` and each resource's spread before and after.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from planning.model import Cluster
from planning.placement.goal import Goal
from planning.placement.plan_summary import PlacementPlan

if TYPE_CHECKING:
    from planning.placement.bytes_balance import BytesBalancePlan
    from planning.placement.bytes_model import Tolerances

BALANCE_MODES = ("strict", "bytes")


@dataclass(frozen=True)
class Balance:
    """How plans balance: the mode and, for `bytes`, the tolerances (None: the defaults)."""

    mode: str = "bytes"
    tolerances: Tolerances | None = None
    disk_budget: int = 0  # bytes; > 0: the disk band is the tightest a plan within it reaches


def plan_balanced(cluster: Cluster, goal: Goal, balance: Balance = Balance()) -> PlacementPlan:
    """The plan for `goal` by the planner `balance.mode` chooses (the module's RULE). Raises
    what `plan_placement` raises."""
    # The planners are imported here, not at the top: the settings read BALANCE_MODES at every
    # command line's start, which must not pay for numpy and the solvers.
    from planning.placement.bytes_balance import Tolerances, plan_bytes_balance
    from planning.placement.bytes_budget import plan_within_budget
    from planning.placement.placer import plan_placement

    if balance.mode not in BALANCE_MODES:
        raise ValueError(f"balance mode {balance.mode!r} is not one of {', '.join(BALANCE_MODES)}")
    if balance.mode == "strict" or goal.explicit_targets or goal.partial or goal.ignore_racks:
        return plan_placement(cluster, goal)
    tolerances = balance.tolerances or Tolerances()
    plan = (plan_within_budget(cluster, balance.disk_budget, tolerances, goal) if balance.disk_budget > 0
            else plan_bytes_balance(cluster, tolerances, goal))
    if plan.unplaced or plan.disk_overflow:
        return plan_placement(cluster, goal)
    return as_placement_plan(plan, cluster)


def _with_ineligible(cluster: Cluster, plan: BytesBalancePlan) -> tuple[dict, dict, dict, dict]:
    """The plan's replicas and leaders before and after, with the registered brokers it does not
    balance (draining, down) added: what they hold now and once the targets apply (a drained
    broker's 0), as the count planner reports them."""
    eligible = set(plan.eligible_brokers)
    others = sorted(b.id for b in cluster.brokers if b.id not in eligible)
    maps = (dict(plan.replicas_before), dict(plan.replicas_after), dict(plan.leaders_before), dict(plan.leaders_after))
    if not others:
        return maps
    replicas_before, replicas_after, leaders_before, leaders_after = maps
    for b in others:
        for counts in maps:
            counts[b] = 0
    wanted = set(others)
    for p in cluster.partitions():
        final = plan.targets.get(p.tp, p.replicas)
        for counts, replicas in ((replicas_before, p.replicas), (replicas_after, final)):
            for b in replicas:
                if b in wanted:
                    counts[b] += 1
        for counts, replicas in ((leaders_before, p.replicas), (leaders_after, final)):
            if replicas and replicas[0] in wanted:
                counts[replicas[0]] += 1
    return maps


def as_placement_plan(plan: BytesBalancePlan, cluster: Cluster | None = None) -> PlacementPlan:
    """The bytes planner's plan in the shape every caller reads; with `cluster`, its counts also
    name the registered brokers the plan does not balance (`_with_ineligible`)."""
    replicas_before, replicas_after_all, leaders_before, leaders_after_all = (
        _with_ineligible(cluster, plan) if cluster is not None else
        (plan.replicas_before, plan.replicas_after, plan.leaders_before, plan.leaders_after))
    brokers = plan.eligible_brokers
    bytes_after = [plan.bytes_after[b] for b in brokers]
    replicas_after = [plan.replicas_after[b] for b in brokers]
    leaders_after = [plan.leaders_after[b] for b in brokers]
    return PlacementPlan(
        targets=plan.targets,
        target_log_dirs=plan.target_log_dirs,
        replica_moves=plan.replica_moves,
        replica_moves_lower_bound=0,  # this planner proves bytes, not moves
        bytes_moved=plan.bytes_moved,
        leader_changes=plan.leader_changes,
        warnings=plan.warnings,
        replicas_before=MappingProxyType(dict(replicas_before)),
        replicas_after=MappingProxyType(dict(replicas_after_all)),
        leaders_before=MappingProxyType(dict(leaders_before)),
        leaders_after=MappingProxyType(dict(leaders_after_all)),
        rack_violations=plan.rack_violations,
        eligible_brokers=brokers,
        cluster_replica_spread=max(replicas_after) - min(replicas_after) if brokers else 0,
        cluster_leader_spread=max(leaders_after) - min(leaders_after) if brokers else 0,
        bytes_after=plan.bytes_after,
        cluster_bytes_spread=max(bytes_after) - min(bytes_after) if brokers else 0,
        balance_mode="bytes",
        bytes_moved_lower_bound=plan.bytes_moved_lower_bound,
        within_tolerance=plan.within_tolerance,
        resources=MappingProxyType(dict(plan.resources)),
        disk_cv_floor=plan.disk_cv_floor,
        disk_tolerance=plan.disk_tolerance,
        byte_budget=plan.byte_budget,
    )
