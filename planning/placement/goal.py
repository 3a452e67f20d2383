"""What a plan is for (`Goal`), and the cluster as the plan sees it (`compute_planning_cluster`).

A goal is a value: the brokers to bring in and to empty, whether to heal and to rebalance, the
explicit targets to keep as given, and the switches for the hard cases (a partial heal, topics
only healed and drained, racks ignored as a last resort, the disk limit). The default
(`Goal()`: heal and rebalance) is the controller's steady goal.

RULES of `compute_planning_cluster`:
- an added broker is in the cluster; one already registered (a snapshot taken after it joined)
  is brought in: alive, not draining, with the goal's rack when the goal names one;
- a drained broker is marked draining, so no new replica goes there and every replica leaves;
- draining a broker the cluster does not know raises `InvalidReplicaAssignmentError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

from planning.model import Broker, Cluster, TopicPartition
from schemas.errors import InvalidReplicaAssignmentError


@dataclass(frozen=True)
class Goal:
    """What the plan is for. The default (heal and rebalance) is the controller's steady goal."""

    add_brokers: tuple[Broker, ...] = ()  # new (empty) brokers to bring in
    drain_brokers: frozenset[int] = frozenset()  # move everything off these
    heal: bool = True  # replace replicas on dead brokers / offline dirs
    rebalance: bool = True  # even out counts (False = only do what is forced)
    explicit_targets: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))
    partial: bool = False  # leave a partition that cannot be placed as it is; plan the rest
    excluded_topics: frozenset[str] = frozenset()  # only healed and drained, never rebalanced
    ignore_racks: bool = False  # place as if no broker had a rack (a last resort)
    # None: dirs are not limited (see `planning.placement.log_dir_choice`)
    disk_max_usage_percent: float | None = None


def compute_planning_cluster(cluster: Cluster, goal: Goal) -> Cluster:
    """The cluster as the plan sees it: added brokers present, drained brokers marked draining."""
    brokers = dict(cluster.brokers_by_id)
    for new in goal.add_brokers:
        old = brokers.get(new.id)
        if old is None:
            brokers[new.id] = new
        else:  # already registered (a snapshot taken after it joined): bring it in
            brokers[new.id] = replace(
                old, alive=True, draining=False, rack=new.rack if new.rack else old.rack
            )
    for broker_id in sorted(goal.drain_brokers):
        if broker_id not in brokers:
            raise InvalidReplicaAssignmentError(
                f"cannot remove broker {broker_id}: it is not in the cluster "
                f"(known: {sorted(brokers)})"
            )
        brokers[broker_id] = replace(brokers[broker_id], draining=True)
    return cluster.with_brokers(brokers[b] for b in sorted(brokers))
