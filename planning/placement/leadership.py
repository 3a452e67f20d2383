"""Preferred leaders: which replica of each partition goes first (SPEC 4, soft goal 3).

GOAL. Even leadership per topic (leader counts differ by at most one across eligible brokers
where the replica sets allow it) and over the cluster, changing as few leaders as possible.
A leader changes by reordering a replica list, never by moving a replica.

RULE, per topic, on replica sets that are already final:
1. A partition whose preferred leader stays keeps it for now.
2. A partition whose preferred leader left gets the member that leads fewest partitions of the
   topic, preferring a replica that stays (it is in sync already: no extra step, SPEC 5.1), then
   the broker leading fewest partitions cluster-wide, then the lowest id.
3. When rebalancing: a broker leading more than `ceil(P / n)` partitions hands leadership of
   some of them to a member leading at least two fewer; then a broker leading fewer than
   `floor(P / n)` takes leadership from a leader with at least two more. Every hand-over
   lowers the sum of squared counts, so this ends; partitions whose leader changes anyway are
   tried first so that fewer lists are touched.

Example: topic of 4 partitions on brokers 1..4, all led by 1 (1,2,3,4 hold every partition).
ceil(4/4) = 1: broker 1 gives p1 to 2, p2 to 3, p3 to 4 (the member with the fewest each time);
three leader changes, the minimum for counts 1/1/1/1.

`order_leaders` mutates the lists it is given: it is a private step of `plan_placement`, which
copies its inputs first; nothing outside sees the mutation.
"""

from __future__ import annotations

from typing import MutableMapping, Sequence


def order_leaders(
    finals: Sequence[list[int]],
    original_leaders: Sequence[int | None],
    kept: Sequence[frozenset[int] | set[int]],
    eligible: frozenset[int] | set[int],
    fixed: Sequence[bool],
    cluster_leaders: MutableMapping[int, int],
    rebalance: bool,
) -> None:
    """Put the chosen leader first in each of `finals` (one topic).

    `cluster_leaders` must not count this topic on entry; on return it counts its final leaders.
    """
    topic_leaders: dict[int, int] = {b: 0 for b in eligible}
    undecided: list[int] = []
    for index, final in enumerate(finals):
        leader = final[0] if final else None
        if fixed[index] or leader == original_leaders[index] or leader not in eligible:
            if leader in topic_leaders:
                topic_leaders[leader] += 1
                cluster_leaders[leader] = cluster_leaders.get(leader, 0) + 1
        else:
            undecided.append(index)
    for index in undecided:
        final = finals[index]
        members = [b for b in final if b in eligible]
        best = min(
            members,
            key=lambda b: (
                topic_leaders[b],
                b not in kept[index],
                cluster_leaders.get(b, 0),
                b,
            ),
        )
        _make_leader(final, best)
        topic_leaders[best] += 1
        cluster_leaders[best] = cluster_leaders.get(best, 0) + 1
    if rebalance and eligible:
        _even_out(finals, original_leaders, eligible, fixed, topic_leaders, cluster_leaders)


def _make_leader(final: list[int], broker_id: int) -> None:
    if final[0] != broker_id:
        final.remove(broker_id)
        final.insert(0, broker_id)


def _even_out(finals, original_leaders, eligible, fixed, topic_leaders, cluster_leaders) -> None:
    count = len(finals)
    ceiling = -(-count // len(eligible))
    floor = count // len(eligible)
    led_by: dict[int, list[int]] = {}
    member_of: dict[int, list[int]] = {}
    for index, final in enumerate(finals):
        if fixed[index] or not final or final[0] not in eligible:
            continue
        led_by.setdefault(final[0], []).append(index)
        for b in final[1:]:
            if b in eligible:
                member_of.setdefault(b, []).append(index)

    def changing_first(index: int) -> tuple[bool, int]:
        return (finals[index][0] == original_leaders[index], index)

    def hand_over(index: int, old: int, new: int) -> None:
        _make_leader(finals[index], new)
        topic_leaders[old] -= 1
        topic_leaders[new] += 1
        cluster_leaders[old] = cluster_leaders.get(old, 0) - 1
        cluster_leaders[new] = cluster_leaders.get(new, 0) + 1

    for old in sorted(led_by, key=lambda b: (-topic_leaders[b], b)):
        if topic_leaders[old] <= ceiling:
            continue
        for index in sorted(led_by[old], key=changing_first):
            if topic_leaders[old] <= ceiling:
                break
            if finals[index][0] != old:
                continue
            candidates = [b for b in finals[index][1:] if b in eligible]
            if not candidates:
                continue
            new = min(candidates, key=lambda b: (topic_leaders[b], cluster_leaders.get(b, 0), b))
            if topic_leaders[old] - topic_leaders[new] >= 2:
                hand_over(index, old, new)
    for new in sorted(eligible, key=lambda b: (topic_leaders[b], b)):
        if topic_leaders[new] >= floor:
            continue
        for index in sorted(member_of.get(new, ()), key=changing_first):
            if topic_leaders[new] >= floor:
                break
            old = finals[index][0]
            if old == new or old not in eligible or new not in finals[index]:
                continue
            if topic_leaders[old] - topic_leaders[new] >= 2:
                hand_over(index, old, new)
