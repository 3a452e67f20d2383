"""Bringing one topic's filled placement to its quotas by re-pointing new replicas.

After the fill (`planning.placement.topic_replicas`) a broker can end above its quota: the rack
rule forced a slot into a domain whose brokers were full, or the kept replicas skew the quotas.
These repairs change only where new replicas go, so they cost no move, except the last resort.

RULES, in the order `plan_topic_replicas` runs them:
1. `repair_overflow`: a slot that overflowed a full broker is re-pointed to a broker still below
   quota, directly or in two steps through another new replica.
2. `level_new_replicas`: a new replica on a broker holding two or more replicas of the topic more
   than an eligible broker outside the partition goes there (matters without rebalance, where
   kept replicas skew the quotas); each swap lowers the sum of squared counts, so it ends.
3. `move_to_under_quota` (rebalance only): brokers one apart trade quotas (nothing moves); then
   chains of re-pointed replicas found by breadth-first search shift one replica from an
   over-quota broker to an under-quota one (`_shift_along_paths`); last, a replica is moved
   outright, paying a move only where an earlier drop was put straight back.
INVARIANTS: every change goes through `swap` after `fits_after`, so every partition stays
rack-spread, keeps its length and holds no broker twice. The searches are bounded by counts
(`_REPAIR_SCAN_BUDGET`, `_SHIFT_FITS_BUDGET`, `_SHIFT_PARTITIONS_PER_BROKER`), never by time.
"""

from __future__ import annotations

from planning.placement.partition_work import PartitionWork, fits_after, swap

_REPAIR_SCAN_BUDGET = 20_000  # candidate partitions looked at per overflowing slot (two-step)
_SHIFT_FITS_BUDGET = 20_000  # rack checks per topic spent searching shifting chains
_SHIFT_PARTITIONS_PER_BROKER = 64  # new replicas of one broker looked at per search


def repair_overflow(tree, fills, broker_left, take) -> None:
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
            if fits_after(tree, w, over, u):
                swap(w, position, over, u, take)
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
            if not fits_after(tree, w, over, middle):
                continue
            for u in under:
                if broker_left[u] > 0 and fits_after(tree, other, middle, u):
                    swap(other, other_position, middle, u, take)
                    swap(w, position, over, middle, take)
                    repaired = True
                    break


def level_new_replicas(tree, fills, broker_left, topic_count, take) -> None:
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
                               and fits_after(tree, w, over, b))
            if receivers:
                swap(w, position, over, receivers[0][1], take)
                swapped = True
        if not swapped:
            return


def move_to_under_quota(tree, work, broker_left, broker_quota, take) -> None:
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
    holding: dict[int, list[PartitionWork]] = {b: [] for b in over}
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
                if fits_after(tree, w, o, u):
                    swap(w, w.final.index(o), o, u, take)
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
        new_on: dict[int, list[tuple[PartitionWork, int]]] = {}
        kept_on: dict[int, list[tuple[PartitionWork, int]]] = {}
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
                if w.final[position] != out or not fits_after(tree, w, out, into):
                    return  # the chain crossed itself; keep what is valid and stop
                swap(w, position, out, into, take)
            y = x


def _search_chain(tree, broker_left, new_on, kept_on, paid: bool, budget: int):
    """Breadth-first search of `_shift_along_paths`: (under broker or None, parents, budget)."""
    sources = sorted(b for b, left in broker_left.items() if left < 0)
    parent: dict[int, tuple[int, list] | None] = {b: None for b in sources}
    queue = list(sources)
    brokers = sorted(broker_left)
    found = None

    def reach(x: int, w: PartitionWork, out: int, ops: list) -> bool:
        nonlocal budget, found
        for y in brokers:
            if y in parent:
                continue
            budget -= 1
            if fits_after(tree, w, out, y):
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
                if not fits_after(tree, w, x, d):
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
