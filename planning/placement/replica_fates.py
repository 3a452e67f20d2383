"""The fate of every replica before anything is placed: kept, a slot to fill, or pinned.

RULES (per partition, in replica order):
- KEPT: on an eligible broker (alive, not draining, with an online dir), not on an offline dir,
  and the first occurrence of that broker in the list;
- SLOT: it must leave (dead or draining broker, offline dir, a broker listed twice); its
  position is filled by the placer;
- PINNED: with `heal=False`, a replica on a dead broker or an offline dir stays where it is and
  is not counted (a draining broker's replicas and duplicates still leave);
- a broker whose dir held the partition offline, or whose failed dir held it before and that has
  not restarted since (`Broker.cannot_host`), must not receive the partition (`excluded`);
- an explicit target is taken whole (`fixed`): nothing in it is decided here.

The placer reads the fates topic by topic (`compute_topic_work`: topics in name order,
partitions in id order) and hands stage A what they demand (`compute_stage_a`: the replicas to
place and those that may stay, per topic the goal balances). Pure: values in, fresh values out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, NamedTuple, Sequence

from planning.model import Cluster, PartitionState, TopicPartition
from planning.placement.cluster_quotas import ClusterQuotas, TopicDemand, compute_cluster_quotas
from planning.placement.goal import Goal
from planning.placement.racks import RackTree, compute_rack_tree

KEPT, SLOT, PINNED = 0, 1, 2


class PartitionFates(NamedTuple):
    """One partition of the topic as the placer hands it over (the fates of its replicas).
    (A named tuple: one per partition of the cluster is made per plan, 300,000 at the benchmark.)

    replicas: broker per position, None for an open slot (a replica that must leave); kept,
        pinned and explicitly targeted replicas keep their broker.
    kept: the tree brokers in `replicas` that were there before and may stay.
    excluded: brokers this partition must not be placed on (an offline dir there).
    replication: non-pinned positions: what the rack rule is applied to.
    size: bytes, for choosing what to move (0 when unknown).
    fixed: an explicit target: never touched.
    """

    tp: TopicPartition
    replicas: tuple[int | None, ...]
    kept: frozenset[int]
    excluded: frozenset[int]
    replication: int
    size: int
    fixed: bool


def compute_planning_tree(cluster: Cluster, goal: Goal) -> RackTree:
    """The rack tree of the eligible brokers (flat with `Goal.ignore_racks`)."""
    return compute_rack_tree(replace(b, rack=None) if goal.ignore_racks else b
                             for b in cluster.brokers if b.eligible)


def compute_offline_dirs(cluster: Cluster) -> dict[int, frozenset[str]]:
    """Per broker with an offline dir, the paths of its offline dirs."""
    return {
        b.id: frozenset(d.path for d in b.log_dirs if not d.online)
        for b in cluster.brokers
        if any(not d.online for d in b.log_dirs)
    }


def compute_replica_fates(
    partition: PartitionState,
    cluster: Cluster,
    eligible: Mapping[int, object] | frozenset[int],
    offline_dirs: Mapping[int, frozenset[str]],
    heal: bool,
) -> tuple[list[int], set[int]]:
    """Per replica KEPT / SLOT / PINNED, and brokers this partition must not go back to."""
    replicas = partition.replicas
    cannot_host = cluster.brokers_that_cannot_host(partition.tp)
    if not offline_dirs and not partition.offline_replicas and not cannot_host:
        # The common case: every replica on an eligible broker, no dir offline anywhere.
        if all(b in eligible for b in replicas) and len(set(replicas)) == len(replicas):
            return [KEPT] * len(replicas), set()
    fates: list[int] = []
    excluded: set[int] = set(cannot_host)
    seen: set[int] = set()
    for index, b in enumerate(partition.replicas):
        dirs_off = offline_dirs.get(b)
        on_offline_dir = b in partition.offline_replicas or (
            dirs_off is not None
            and index < len(partition.log_dirs)
            and partition.log_dirs[index] in dirs_off
        )
        if b in eligible and not on_offline_dir and b not in seen:
            fates.append(KEPT)
        else:
            broker = cluster.broker(b)
            draining = broker is not None and broker.alive and broker.draining
            fates.append(SLOT if (heal or draining or b in seen) else PINNED)
            if on_offline_dir:
                excluded.add(b)
        seen.add(b)
    return fates, excluded


def compute_partition_fates(p, cluster, explicit, eligible, offline_dirs, heal) -> PartitionFates:
    """The `PartitionFates` of `p`: its explicit target whole, else each replica's fate."""
    tp = p.tp
    target = explicit.get(tp) if explicit else None
    if target is not None:
        members = frozenset(b for b in target if b in eligible)
        return PartitionFates(tp, tuple(target), members, frozenset(), len(members), 0, True)
    replicas = p.replicas
    if (not offline_dirs and not p.offline_replicas
            and (not cluster.any_cannot_host or not cluster.brokers_that_cannot_host(tp))
            and eligible.issuperset(replicas) and len(set(replicas)) == len(replicas)):
        # The common case (every replica stays where it may): no per-replica fates to work out.
        return PartitionFates(tp, replicas, frozenset(replicas), frozenset(), len(replicas),
                              p.size_bytes or 0, False)
    fates, excluded = compute_replica_fates(p, cluster, eligible, offline_dirs, heal)
    replicas = tuple(b if fate != SLOT else None for b, fate in zip(p.replicas, fates))
    kept = frozenset(b for b, fate in zip(p.replicas, fates) if fate == KEPT)
    replication = sum(1 for fate in fates if fate != PINNED)
    return PartitionFates(
        tp, replicas, kept, frozenset(excluded), replication, p.size_bytes or 0, False
    )


def compute_topic_work(cluster: Cluster, goal: Goal, explicit, eligible, offline_dirs) -> list:
    """(topic name, its partitions by id, their fates) for every topic, in name order."""
    return [
        (topic.name, partitions,
         [compute_partition_fates(p, cluster, explicit, eligible, offline_dirs, goal.heal) for p in partitions])
        for topic in sorted(cluster.topics, key=lambda t: t.name)
        for partitions in [sorted(topic.partitions, key=lambda p: p.partition)]
    ]


def _demand(topic: str, work: Sequence[PartitionFates]) -> TopicDemand:
    """What stage A needs of one topic: replicas to place per partition, and what may stay."""
    histogram: dict[int, int] = {}
    current: dict[int, int] = {}
    for w in work:
        histogram[w.replication] = histogram.get(w.replication, 0) + 1
        for b in w.kept:
            current[b] = current.get(b, 0) + 1
    return TopicDemand(topic, histogram, current)


def compute_stage_a(tree: RackTree, topic_work, goal: Goal) -> ClusterQuotas:
    """Stage A over the topics the goal balances (excluded topics are only healed and drained)."""
    return compute_cluster_quotas(tree, [_demand(name, work) for name, _, work in topic_work
                                         if name not in goal.excluded_topics])
