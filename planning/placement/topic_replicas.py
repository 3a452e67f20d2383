"""Steps 2-5 of the placer (see `planning.placement`) for one topic: repair, drop, fill, repair.

Pure: frozen values in, a frozen value out; nothing passed in is changed. Input: the topic's
partitions with each replica's fate already decided (`PartitionFates`: kept / slot / pinned),
the rack tree of eligible brokers, and the cluster-wide replica counts so far. Output
(`TopicReplicas`): the final replica list per partition, same length and positions as before (a
kept replica stays at its position, a new replica takes the position of the one it replaces),
and the cluster-wide counts with this topic's changes applied, for the next topic (they only
break ties). The work happens on a private mutable copy (`_Work`), one per partition.

Invariants of the result: every list has its replication factor, no broker twice, every
non-pinned member is a tree broker and the non-pinned members satisfy the rack rule.
The work is O(replicas * (tree fan-out along one path)) plus sorting per over-quota broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, NamedTuple, Sequence

from planning.model import TopicPartition
from planning.placement.quotas import TopicQuotas, compute_topic_quotas
from planning.placement.racks import ROOT, RackTree
from schemas.errors import PlanInfeasibleError

_REPAIR_SCAN_BUDGET = 20_000  # candidate partitions looked at per overflowing slot (two-step)
_SHIFT_FITS_BUDGET = 20_000  # rack checks per topic spent searching shifting chains
_SHIFT_PARTITIONS_PER_BROKER = 64  # new replicas of one broker looked at per search


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


@dataclass(frozen=True)
class TopicReplicas:
    """What `plan_topic_replicas` decided for one topic.

    finals: the final replica list of each partition, in the order of the input.
    cluster_load: the cluster-wide replica counts per eligible broker, this topic included.
    """

    finals: tuple[tuple[int, ...], ...]
    cluster_load: Mapping[int, int]


@dataclass
class _Work:
    """Mutable working copy of one partition while its topic is planned (never escapes)."""

    tp: TopicPartition
    final: list  # broker id per position, None while the position is an open slot
    members: set  # tree brokers in `final`
    kept: frozenset  # tree brokers that were there before and may stay
    excluded: frozenset  # brokers this partition must not be placed on (offline dir there)
    replication: int  # non-pinned positions: what the rack rule is applied to
    size: int
    fixed: bool  # an explicit target: never touched

    @classmethod
    def of(cls, p: PartitionFates) -> "_Work":
        return cls(p.tp, list(p.replicas), set(p.kept), p.kept, p.excluded, p.replication, p.size, p.fixed)


def plan_topic_replicas(
    tree: RackTree,
    partitions: Sequence[PartitionFates],
    cluster_load: Mapping[int, int],
    rebalance: bool,
    quotas: TopicQuotas | None = None,
) -> TopicReplicas:
    """Fill every slot of `partitions` (one topic) towards `quotas` (the cluster-wide ones of
    `planning.placement.cluster_quotas`; None: this topic's own, `compute_topic_quotas`).
    Raises PlanInfeasibleError naming the partition."""
    work = [_Work.of(p) for p in partitions]
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

    fills: list[tuple[_Work, int, int]] = []
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
        _repair_overflow(tree, fills, broker_left, take)
    _level_new_replicas(tree, fills, broker_left, topic_count, take)
    if rebalance and any(left < 0 for left in broker_left.values()):
        _move_to_under_quota(tree, work, broker_left, quotas.broker_quota, take)
    return TopicReplicas(tuple(tuple(w.final) for w in work), MappingProxyType(cluster_load))


def _most_constrained_first(work, broker_left, cap: int = 8) -> list[_Work]:
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


def _repair_racks(tree: RackTree, w: _Work) -> None:
    """Open slots until the kept members can be completed to a rack-spread set."""
    while w.members and not tree.fits(_key(tree, w.members), w.replication):
        leader = w.final[0]
        # Drop followers before the leader, later positions first; take the first drop that
        # makes the rest completable, or else the first candidate and try again.
        candidates = sorted(w.members, key=lambda b: (b == leader, -w.final.index(b)))
        victim = candidates[0]
        for b in candidates:
            if tree.fits(_key(tree, w.members - {b}), w.replication):
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
    holding: dict[int, list[_Work]] = {b: [] for b in over}
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
        chosen: list[_Work] = []
        without_receiver: list[_Work] = []
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


def _has_receiver(tree, w: _Work, out: int, receivers: list[int], scan: int = 32) -> bool:
    """Are there more receivers for `w` than it already has open slots (so one is left)?"""
    needed = w.final.count(None) + 1
    for u in receivers[:scan]:
        if _fits_after(tree, w, out, u):
            needed -= 1
            if needed == 0:
                return True
    return False


def _key(tree: RackTree, members) -> tuple[int, ...]:
    node_of = tree.broker_node
    return tuple(sorted([node_of[b] for b in members]))


def _choose_broker(tree, w, node_left, broker_left, node_count, topic_count, cluster_load) -> int | None:
    """The broker for one open slot of `w`, down the rack tree: at each node the child with the
    most quota left among those that keep `w` completable, then the one holding the fewest
    replicas of this topic per broker (this decides when the rack rule forces a slot into a
    domain whose quota is used up, as a drain or heal can, so that the overflow spreads instead
    of piling on the first child); at the leaves the broker with the most quota left, then the
    fewest replicas of this topic, then the fewest cluster-wide, then the lowest id."""
    key = _key(tree, w.members)
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


def _fits_after(tree: RackTree, w: _Work, out: int, into: int) -> bool:
    if into in w.members or into in w.excluded:
        return False
    return tree.fits(_key(tree, (w.members - {out}) | {into}), w.replication)


def _repair_overflow(tree, fills, broker_left, take) -> None:
    """Re-point new replicas that overflowed a full broker to brokers still below quota.

    Direct: the overflowing slot of partition p moves from `over` to an `under` broker.
    Two-step: p's slot takes the broker `w` of another new replica in partition q, and q's
    slot takes `under`. Both change only new replicas, so the move count is unchanged.
    """
    under = sorted((b for b, left in broker_left.items() if left > 0), key=lambda b: (-broker_left[b], b))
    if not under:
        return
    for index, (w, position, over) in enumerate(fills):
        if broker_left[over] >= 0 or w.final[position] != over:
            continue
        under = [b for b in under if broker_left[b] > 0]
        if not under:
            return
        repaired = False
        for u in under:
            if _fits_after(tree, w, over, u):
                _swap(w, position, over, u, take)
                repaired = True
                break
        if repaired:
            continue
        budget = _REPAIR_SCAN_BUDGET
        for other, other_position, middle in fills:
            budget -= 1
            if budget < 0 or repaired:
                break
            if other is w or other.final[other_position] != middle or middle == over:
                continue
            if not _fits_after(tree, w, over, middle):
                continue
            for u in under:
                if broker_left[u] > 0 and _fits_after(tree, other, middle, u):
                    _swap(other, other_position, middle, u, take)
                    _swap(w, position, over, middle, take)
                    repaired = True
                    break


def _level_new_replicas(tree, fills, broker_left, topic_count, take) -> None:
    """Even out the new replicas: one on a broker holding at least two more replicas of the topic
    than another eligible broker outside the partition goes there, if the rack spread allows.

    Quotas alone can pile new replicas on one broker of a domain when kept replicas skew the
    domain's quota (a drain or heal without rebalance keeps an over-full broker where it is, or
    the rack rule forces slots into a domain whose brokers are at quota); re-pointing a new
    replica costs no move, and the receiver ends at most one above the giver. After a rebalance
    every broker is within one of the others, so this changes nothing there.
    """
    for _ in range(len(fills)):  # each swap lowers the sum of squared counts: this ends
        swapped = False
        # A giver holds at least two more than some receiver. Swaps only raise the lowest count,
        # so a giver below this pass's lowest + 2 has no receiver: skipped without the scan
        # (about a quarter of the planner's time at 300k partitions went into that scan).
        lowest = min((topic_count.get(b, 0) for b in broker_left), default=0)
        for w, position, _filled in fills:
            over = w.final[position]
            if topic_count.get(over, 0) < lowest + 2:
                continue
            receivers = sorted((topic_count.get(b, 0), b) for b in broker_left
                               if topic_count.get(b, 0) + 2 <= topic_count.get(over, 0)
                               and _fits_after(tree, w, over, b))
            if receivers:
                _swap(w, position, over, receivers[0][1], take)
                swapped = True
        if not swapped:
            return


def _swap(w: _Work, position: int, out: int, into: int, take) -> None:
    w.final[position] = into
    w.members.discard(out)
    w.members.add(into)
    take(out, -1)
    take(into, +1)


def _move_to_under_quota(tree, work, broker_left, broker_quota, take) -> None:
    """Last resort for balance: trade quotas, else move a replica from above quota to below.

    Trading: a broker one above a `floor` quota and one one below a `ceil` quota swap quotas;
    both stay within one of each other, so the topic stays even and nothing moves.
    Shifting (`_shift_along_paths`): a chain of re-pointed new replicas, free of moves.
    Moving: re-pointing a new replica costs nothing; moving a kept one costs a move, needed
    only when an earlier drop was put straight back (so the total still meets the bound).
    """
    quota = dict(broker_quota)
    for o in sorted(b for b, left in broker_left.items() if left < 0):
        for u in sorted(broker_left):
            if broker_left[o] >= 0:
                break
            if broker_left[u] > 0 and abs((quota[o] + 1) - (quota[u] - 1)) <= 1:
                quota[o] += 1
                quota[u] -= 1
                broker_left[o] += 1
                broker_left[u] -= 1
    if any(left < 0 for left in broker_left.values()):
        _shift_along_paths(tree, work, broker_left, take)
    over = sorted((b for b, left in broker_left.items() if left < 0), key=lambda b: (broker_left[b], b))
    if not over:
        return
    holding: dict[int, list[_Work]] = {b: [] for b in over}
    for w in work:
        if not w.fixed:
            for b in w.members:
                if b in holding:
                    holding[b].append(w)
    for o in over:
        candidates = sorted(holding[o], key=lambda w: (o in w.kept, w.size, w.final[0] == o, w.tp.partition))
        for w in candidates:
            if broker_left[o] >= 0:
                break
            if o not in w.members:
                continue
            under = [u for u in sorted(broker_left, key=lambda b: (-broker_left[b], b)) if broker_left[u] > 0]
            if not under:
                return
            for u in under:
                if _fits_after(tree, w, o, u):
                    _swap(w, w.final.index(o), o, u, take)
                    break


def _shift_along_paths(tree, work, broker_left, take) -> None:
    """Re-point a chain of replicas so that one over-quota broker gives one to an under one.

    Where rack spread or distinctness forbids the direct re-point (`over` -> `under` in one
    partition), a breadth-first search over brokers finds `over = x0 -> x1 -> ... -> xk = under`;
    applied from the end, every broker in between keeps its count. A step is either
    - a new replica on x(i) re-pointed to x(i+1) (free), or
    - a new replica on x(i) given back to the broker it replaced, d, which then hands one of its
      kept replicas elsewhere to x(i+1) (one move saved, one made: free), or
    - for the first step only, a kept replica of `over` moved (one move, counted by the bound as
      excess; the paid fallback below would make it anyway).
    Example (no racks, RF 3): broker 0 over and 5 under quota, but every partition where 0 is
    new already holds 5 (* marks a new replica). p = (1, 0*, 2) may take 3 instead of 0, and
    q = (3*, 4, 6) gives 3's place to 5: 0 -> 3 -> 5, broker 3 keeps its count, no extra move.
    """
    budget = _SHIFT_FITS_BUDGET
    while budget > 0 and any(left < 0 for left in broker_left.values()):
        if not any(left > 0 for left in broker_left.values()):
            return
        new_on: dict[int, list[tuple[_Work, int]]] = {}
        kept_on: dict[int, list[tuple[_Work, int]]] = {}
        for w in work:
            if w.fixed:
                continue
            for position, b in enumerate(w.final):
                if b is None or b not in tree.broker_node:
                    continue
                (kept_on if b in w.kept else new_on).setdefault(b, []).append((w, position))
        for found in kept_on.values():  # followers and small partitions first
            found.sort(key=lambda item: (item[1] == 0, item[0].size, item[0].tp.partition))
        found = _search_chain(tree, broker_left, new_on, kept_on, False, budget)
        if found[0] is None:
            found = _search_chain(tree, broker_left, new_on, kept_on, True, found[2])
        found, parent, budget = found
        if found is None:
            return
        y = found
        while parent[y] is not None:
            x, ops = parent[y]
            for w, position, out, into in ops:
                if w.final[position] != out or not _fits_after(tree, w, out, into):
                    return  # the chain crossed itself; keep what is valid and stop
                _swap(w, position, out, into, take)
            y = x


def _search_chain(tree, broker_left, new_on, kept_on, paid: bool, budget: int):
    """Breadth-first search of `_shift_along_paths`: (under broker or None, parents, budget)."""
    sources = sorted(b for b, left in broker_left.items() if left < 0)
    parent: dict[int, tuple[int, list] | None] = {b: None for b in sources}
    queue = list(sources)
    brokers = sorted(broker_left)
    found = None

    def reach(x: int, w: _Work, out: int, ops: list) -> bool:
        nonlocal budget, found
        for y in brokers:
            if y in parent:
                continue
            budget -= 1
            if _fits_after(tree, w, out, y):
                parent[y] = (x, ops + [(w, w.final.index(out), out, y)])
                if broker_left[y] > 0:
                    found = y
                    return True
                queue.append(y)
        return budget <= 0

    for x in queue:
        limit = _SHIFT_PARTITIONS_PER_BROKER
        done = False
        for w, position in new_on.get(x, [])[:limit]:
            if reach(x, w, x, []):
                done = True
                break
            for d in sorted(w.kept - w.members):  # give the slot back to d ...
                if not _fits_after(tree, w, x, d):
                    continue
                back = [(w, position, x, d)]
                for w2, _ in kept_on.get(d, [])[:limit]:  # ... which moves a kept one on
                    if w2 is not w and reach(x, w2, d, back):
                        done = True
                        break
                if done:
                    break
            if done:
                break
        if not done and paid and parent[x] is None:
            for w, position in kept_on.get(x, [])[:limit]:
                if reach(x, w, x, []):
                    done = True
                    break
        if done:
            break
    return found, parent, budget
