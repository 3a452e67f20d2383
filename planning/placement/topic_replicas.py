"""One topic's replicas, placed greedily to its quotas: repair racks, drop, fill, re-point.

Pure: frozen values in, a frozen value out; nothing passed in is changed. Input: the topic's
partitions with each replica's fate decided (`PartitionFates`: kept / slot / pinned), the rack
tree of eligible brokers, the cluster-wide replica counts so far, and the topic's quotas (stage
A's, else its own: `planning.placement.quotas.compute_topic_quotas`). Output (`TopicReplicas`):
the final replica list per partition, same length and positions as before, and the cluster-wide
counts with this topic's changes applied, for the next topic (they only break ties).

STEPS (`plan_topic_replicas`):
1. rack repair: kept replicas are dropped (followers first) until the rest can be completed to a
   rack-spread set;
2. with rebalance, a broker above its quota gives up that many replicas: partitions not yet
   touched first, then small ones, then ones it does not lead, and only where a receiver exists;
3. fill every slot top-down through the rack tree, the partitions with the fewest possible
   receivers first: at each node the child with the most quota left among those that keep the
   partition completable, then the fewest replicas of the topic per broker (a slot the rack rule
   forces into a full domain spreads there instead of piling on one broker); at the leaves the
   broker with the most quota left, then the fewest replicas of the topic, of the cluster, then
   the lowest id;
4. re-point new replicas towards the quotas (`planning.placement.quota_repairs`).
INVARIANTS of the result: every list has its replication factor, no broker twice, every
non-pinned member is a tree broker and the non-pinned members satisfy the rack rule; a slot
with no broker that keeps them so raises `PlanInfeasibleError` naming the partition.
Cost: O(replicas * tree fan-out along one path) plus sorting per over-quota broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Sequence

from planning.placement.partition_work import PartitionWork, fits_after, rack_key
from planning.placement.quota_repairs import level_new_replicas, move_to_under_quota, repair_overflow
from planning.placement.quotas import TopicQuotas, compute_topic_quotas
from planning.placement.racks import ROOT, RackTree
from planning.placement.replica_fates import PartitionFates
from schemas.errors import PlanInfeasibleError


@dataclass(frozen=True)
class TopicReplicas:
    """What `plan_topic_replicas` decided for one topic.

    finals: the final replica list of each partition, in the order of the input.
    cluster_load: the cluster-wide replica counts per eligible broker, this topic included.
    """

    finals: tuple[tuple[int, ...], ...]
    cluster_load: Mapping[int, int]


def plan_topic_replicas(
    tree: RackTree,
    partitions: Sequence[PartitionFates],
    cluster_load: Mapping[int, int],
    rebalance: bool,
    quotas: TopicQuotas | None = None,
) -> TopicReplicas:
    """Fill every slot of `partitions` (one topic) towards `quotas` (the cluster-wide ones of
    `planning.placement.cluster_quotas`; None: this topic's own, `compute_topic_quotas`).
    Raises PlanInfeasibleError naming the partition.

    Example: brokers 1, 2, 3 (no racks), topic t with 6 partitions RF 2, every broker holding 4
    replicas; broker 4 added. T = 12, n = 4: every quota is 3. Each of 1, 2, 3 drops one replica
    (from different partitions, followers first): 3 slots, all filled by broker 4 (quota 3).
    3 moves = the lower bound max(excess 3, deficit 3).
    """
    work = [PartitionWork.of(p) for p in partitions]
    cluster_load = dict(cluster_load)  # this topic's changes go into the copy
    capacity = tree.node_capacity[ROOT]
    for w in work:
        if w.replication > capacity:
            raise PlanInfeasibleError(
                f"partition {w.tp} needs {w.replication} replicas but only {capacity} "
                "brokers are eligible", w.tp
            )
        if not w.fixed:
            _repair_racks(tree, w)

    current: dict[int, int] = {b: 0 for b in tree.broker_node}
    histogram: dict[int, int] = {}
    for w in work:
        for b in w.members:
            current[b] += 1
        histogram[w.replication] = histogram.get(w.replication, 0) + 1
    if quotas is None:
        quotas = compute_topic_quotas(tree, histogram, current, cluster_load)
    broker_left = {b: quotas.broker_quota.get(b, 0) - current[b] for b in current}
    node_left = [0] * len(tree.node_labels)
    for node, quota in quotas.node_quota.items():
        node_left[node] = quota
    node_count = [0] * len(tree.node_labels)  # replicas of this topic under each node, so far
    topic_count = dict(current)  # replicas of this topic per broker, so far
    for b, count in current.items():
        for ancestor in tree.node_ancestry[tree.broker_node[b]]:
            node_left[ancestor] -= count
            node_count[ancestor] += count

    def take(b: int, delta: int) -> None:  # delta +1: b gains a replica of this topic
        broker_left[b] -= delta
        topic_count[b] = topic_count.get(b, 0) + delta
        cluster_load[b] = cluster_load.get(b, 0) + delta
        for ancestor in tree.node_ancestry[tree.broker_node[b]]:
            node_left[ancestor] -= delta
            node_count[ancestor] += delta

    if rebalance:
        _drop_above_quota(tree, work, broker_left, take)

    fills: list[tuple[PartitionWork, int, int]] = []
    for w in _most_constrained_first(work, broker_left):
        for position, b in enumerate(w.final):
            if b is not None or w.fixed:
                continue
            chosen = _choose_broker(tree, w, node_left, broker_left, node_count, topic_count,
                                    cluster_load)
            if chosen is None:
                raise PlanInfeasibleError(
                    f"partition {w.tp}: no eligible broker can take replica {position + 1} of "
                    f"{len(w.final)} without breaking rack spread (excluded: {sorted(w.excluded)})", w.tp
                )
            w.final[position] = chosen
            w.members.add(chosen)
            take(chosen, +1)
            fills.append((w, position, chosen))
    if any(left < 0 for left in broker_left.values()):
        repair_overflow(tree, fills, broker_left, take)
    level_new_replicas(tree, fills, broker_left, topic_count, take)
    if rebalance and any(left < 0 for left in broker_left.values()):
        move_to_under_quota(tree, work, broker_left, quotas.broker_quota, take)
    return TopicReplicas(tuple(tuple(w.final) for w in work), MappingProxyType(cluster_load))


def _most_constrained_first(work, broker_left, cap: int = 8) -> list[PartitionWork]:
    """Partitions with open slots, those with the fewest possible receivers first.

    A receiver is a broker below quota not yet in the partition; filling the partitions with
    few of them first leaves the flexible ones for last, so fewer slots overflow.
    """
    receivers = [b for b, left in sorted(broker_left.items()) if left > 0]
    open_work = []
    for w in work:
        if w.fixed or None not in w.final:
            continue
        count = 0
        for b in receivers:
            if b not in w.members and b not in w.excluded:
                count += 1
                if count >= cap:
                    break
        open_work.append((count, w.tp.partition, w))
    open_work.sort(key=lambda item: (item[0], item[1]))
    return [w for _, _, w in open_work]


def _repair_racks(tree: RackTree, w: PartitionWork) -> None:
    """Open slots until the kept members can be completed to a rack-spread set."""
    while w.members and not tree.fits(rack_key(tree, w.members), w.replication):
        leader = w.final[0]
        # Drop followers before the leader, later positions first; take the first drop that
        # makes the rest completable, or else the first candidate and try again.
        candidates = sorted(w.members, key=lambda b: (b == leader, -w.final.index(b)))
        victim = candidates[0]
        for b in candidates:
            if tree.fits(rack_key(tree, w.members - {b}), w.replication):
                victim = b
                break
        w.final[w.final.index(victim)] = None
        w.members.discard(victim)


def _drop_above_quota(tree, work, broker_left, take) -> None:
    """Open slots on brokers above quota: untouched partitions a receiver can take, small first.

    A receiver is a broker below quota that is not yet in the partition and keeps it
    rack-spread; dropping where there is none would only put the replica straight back.
    """
    over = {b: -left for b, left in broker_left.items() if left < 0}
    if not over:
        return
    receivers = sorted((b for b, left in broker_left.items() if left > 0), key=lambda b: (-broker_left[b], b))
    holding: dict[int, list[PartitionWork]] = {b: [] for b in over}
    for w in work:
        if w.fixed:
            continue
        for b in w.members:
            if b in over:
                holding[b].append(w)
    touched = {w.tp for w in work if None in w.final}
    for b in sorted(over):
        # Cheap preferences first; the receiver check (costlier) only on the way down the list.
        ranked = sorted(
            holding[b], key=lambda w: (w.tp in touched, w.size, w.final[0] == b, w.tp.partition)
        )
        chosen: list[PartitionWork] = []
        without_receiver: list[PartitionWork] = []
        for w in ranked:
            if len(chosen) == over[b]:
                break
            if _has_receiver(tree, w, b, receivers):
                chosen.append(w)
            else:
                without_receiver.append(w)
        chosen += without_receiver[: over[b] - len(chosen)]
        for w in chosen:
            w.final[w.final.index(b)] = None
            w.members.discard(b)
            touched.add(w.tp)
            take(b, -1)


def _has_receiver(tree, w: PartitionWork, out: int, receivers: list[int], scan: int = 32) -> bool:
    """Are there more receivers for `w` than it already has open slots (so one is left)?"""
    needed = w.final.count(None) + 1
    for u in receivers[:scan]:
        if fits_after(tree, w, out, u):
            needed -= 1
            if needed == 0:
                return True
    return False


def _choose_broker(tree, w, node_left, broker_left, node_count, topic_count, cluster_load) -> int | None:
    """The broker for one open slot of `w`, down the rack tree: at each node the child with the
    most quota left among those that keep `w` completable, then the one holding the fewest
    replicas of this topic per broker (this decides when the rack rule forces a slot into a
    domain whose quota is used up, as a drain or heal can, so that the overflow spreads instead
    of piling on the first child); at the leaves the broker with the most quota left, then the
    fewest replicas of this topic, then the fewest cluster-wide, then the lowest id."""
    key = rack_key(tree, w.members)
    members, excluded, replication = w.members, w.excluded, w.replication

    def descend(node: int) -> int | None:
        options: list[tuple] = []
        for child in tree.node_children[node]:
            if tree.fits(key, replication, child):
                options.append((-node_left[child], node_count[child] / tree.node_capacity[child], 0, child))
        hanging = tree.node_brokers[node]
        if hanging and tree.fits(tuple(sorted(key + (node,))), replication):
            best = None
            for b in hanging:
                if b in members or b in excluded:
                    continue
                rank = (-broker_left[b], topic_count.get(b, 0), cluster_load.get(b, 0), b)
                if best is None or rank < best:
                    best = rank
            if best is not None:
                options.append((best[0], best[1], 1, best[-1]))
        options.sort()
        for _, _, kind, what in options:
            if kind == 1:
                return what
            found = descend(what)
            if found is not None:
                return found
        return None

    return descend(ROOT)
