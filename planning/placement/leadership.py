"""Preferred leaders: which replica of each partition goes first (the planner's soft goal 3).

GOAL. Even leadership per topic and over the whole cluster — every eligible broker leads between
`floor(P_t / n)` and `ceil(P_t / n)` partitions of each topic t and between `floor(L / n)` and
`ceil(L / n)` of all `L` — changing as few preferred leaders as possible. A leader changes by
reordering a replica list, never by moving a replica (no data moves).

RULE. A min-cost flow (`planning.placement.flows`): each partition sends one unit (its leader)
to the pair (topic, member) of one of its eligible members, at cost 0 for the leader it has
today, 2 for another member that stays (it is in sync already: no extra step to add it) and 3
for a new replica; the pair passes it on to the broker, the broker to the sink. Balance is a
convex penalty on the pair's and the broker's totals: each unit below the floor earns `M`, each
unit above the ceiling costs `M`, with `M` larger than the cost of changing every leader, so
balance comes first and the fewest leader changes second. The partitions' arcs and the pairs
nested in brokers are two laminar families, so the flow is integral and optimal: per-topic and
cluster spread as small as the replica sets allow, then the fewest changes.

SCALE. One flow over every topic while it fits `LEADER_CHUNK_ARCS` (arcs are counted, never
time: planning stays deterministic); beyond that, topics in name order are solved in chunks of
about that size. A chunk's goal for a broker is its share of what it still lacks of `L / n`, in
proportion to the memberships it has in the chunk among those it has left (the last chunk aims
at `L / n`), so the cluster ends close to even instead of provably so (measured at 300k
partitions: spread 1, 2.3 s, 42,883 changes; one flow over everything: 42,067 changes but 4.2 s
to solve). Per-topic balance stays exact in every chunk.

Fixed partitions (explicit targets) and partitions without an eligible member keep their first
replica; they count towards the totals. Without rebalance, a partition whose leader stays
keeps it, and only the others are chosen (by the same flow, for balance).

Pure: values in, a fresh tuple out.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from planning.placement.flows import FlowBuilder, solve_min_cost_flow

LEADER_CHUNK_ARCS = 100_000
_KEEP, _IN_SYNC, _NEW = 0, 2, 3
# Balance outweighs any number of leader changes in chunks up to this many partitions (small
# clusters: exact, lexicographic); beyond, a unit of imbalance is worth 16, i.e. chains of up to
# five changes: the solver is 40 % faster at 300k partitions and the spreads stay at 1.
_LEXICOGRAPHIC_PARTITIONS = 5_000
_LARGE_BIG_M = 16


class LeaderChoice(NamedTuple):
    """One partition whose leader is to be chosen: its final replicas (in placed order), the
    leader it had, the members that were there before, and whether it is an explicit target.
    (A named tuple: 300,000 of them are made per plan at the benchmark's size.)"""

    topic: str
    replicas: tuple[int, ...]
    original_leader: int | None
    kept: frozenset[int]
    fixed: bool


def compute_leaders(
    partitions: Sequence[LeaderChoice], eligible: frozenset[int], rebalance: bool
) -> tuple[int | None, ...]:
    """The preferred leader of each partition (input order; None for an empty replica list).

    Example: a topic of 4 partitions on brokers 1..4, all led by 1 (1, 2, 3, 4 hold every
    partition). ceil(4/4) = 1: three partitions must change leader, to 2, 3 and 4: three
    changes, the minimum for counts 1/1/1/1.
    """
    leaders: list[int | None] = [p.replicas[0] if p.replicas else None for p in partitions]
    brokers = sorted(eligible)
    if not brokers:
        return tuple(leaders)
    n = len(brokers)
    column = {b: j for j, b in enumerate(brokers)}
    topic_index: dict[str, int] = {}
    topic_size: list[int] = []
    fixed_count = np.zeros(n, dtype=np.int64)
    fixed_pairs: dict[int, int] = {}  # topic index * n + broker column -> leaders fixed there
    chosen: list[int] = []  # partitions the flow decides, and their eligible members as flat arrays
    chosen_topic: list[int] = []
    member_row: list[int] = []
    member_column: list[int] = []
    member_cost: list[int] = []
    for index, p in enumerate(partitions):
        members = [b for b in p.replicas if b in column]
        if not members or (p.fixed and p.replicas[0] not in column):
            continue  # no choice, and no eligible leader to count
        if p.replicas[0] not in column and p.replicas[0] == p.original_leader:
            continue  # a pinned leader (dead broker, heal off) stays first: no reorder noise
        t = topic_index.get(p.topic)
        if t is None:
            t = topic_index[p.topic] = len(topic_size)
            topic_size.append(0)
        topic_size[t] += 1
        stays = p.original_leader in column and p.original_leader in p.replicas
        if p.fixed or len(members) == 1 or (not rebalance and stays):
            if p.fixed:
                leader = p.replicas[0]
            else:
                leader = p.original_leader if stays else members[0]
            leaders[index] = leader
            fixed_count[column[leader]] += 1
            key = t * n + column[leader]
            fixed_pairs[key] = fixed_pairs.get(key, 0) + 1
            continue
        row = len(chosen)
        chosen.append(index)
        chosen_topic.append(t)
        for b in members:
            member_row.append(row)
            member_column.append(column[b])
            member_cost.append(_KEEP if b == p.original_leader else _IN_SYNC if b in p.kept else _NEW)
    total = sum(topic_size)
    rows = np.asarray(member_row, dtype=np.int64)
    columns = np.asarray(member_column, dtype=np.int64)
    costs = np.asarray(member_cost, dtype=np.int64)
    row_topic = np.asarray(chosen_topic, dtype=np.int64)
    sizes = np.asarray(topic_size, dtype=np.int64)
    fixed_keys = np.array(sorted(fixed_pairs), dtype=np.int64)
    fixed_values = np.array([fixed_pairs[k] for k in sorted(fixed_pairs)], dtype=np.int64)

    # Chunks of whole topics (in the given order), each within the arc budget: [first, last) rows.
    first_member = np.searchsorted(rows, np.arange(len(chosen) + 1))
    chunks: list[tuple[int, int]] = []
    start = arcs = 0
    for row in range(len(chosen)):
        if row > start and chosen_topic[row] != chosen_topic[row - 1] and arcs > LEADER_CHUNK_ARCS:
            chunks.append((start, row))
            start, arcs = row, 0
        arcs += 4 * int(first_member[row + 1] - first_member[row])
    if len(chosen) > start:
        chunks.append((start, len(chosen)))

    led = fixed_count.copy()  # leaders per broker so far
    remaining = np.bincount(columns, minlength=n).astype(np.float64)  # memberships still to come
    for first, last in chunks:
        lo, hi = first_member[first], first_member[last]
        here = np.bincount(columns[lo:hi], minlength=n)
        # Each broker's goal for this chunk: its share of what it still lacks of total / n, in
        # proportion to the memberships it has here among those it has left (the last chunk
        # aims at total / n itself). Memberships are not spread evenly over topics.
        share = np.divide(here, remaining, out=np.zeros(n), where=remaining > 0)
        goal = led + (total / n - led) * share
        picked = _solve_chunk(rows[lo:hi] - first, columns[lo:hi], costs[lo:hi], row_topic[first:last],
                              last - first, n, sizes, fixed_keys, fixed_values, led,
                              np.floor(goal).astype(np.int64), np.ceil(goal).astype(np.int64))
        for row, j in zip(range(first, last), picked.tolist()):
            leaders[chosen[row]] = brokers[j]
        np.add.at(led, picked, 1)
        remaining -= here
    return tuple(leaders)


def _solve_chunk(rows, columns, costs, row_topic, row_count, n, sizes, fixed_keys, fixed_values,
                 led, goal_low, goal_high) -> np.ndarray:
    """One flow for `row_count` partitions (members as flat arrays); each broker's total (with
    `led` so far) aims at [goal_low, goal_high]. Returns the leader's broker column per partition."""
    pair_keys, arc_pair = np.unique(row_topic[rows] * n + columns, return_inverse=True)
    pair_count = len(pair_keys)
    pair_broker = pair_keys % n
    holds = np.bincount(arc_pair, minlength=pair_count)
    size = sizes[pair_keys // n]
    already = np.zeros(pair_count, dtype=np.int64)
    if len(fixed_keys):
        at = np.minimum(np.searchsorted(fixed_keys, pair_keys), len(fixed_keys) - 1)
        already = np.where(fixed_keys[at] == pair_keys, fixed_values[at], 0)
    big_m = 3 * row_count + 1 if row_count <= _LEXICOGRAPHIC_PARTITIONS else _LARGE_BIG_M

    builder = FlowBuilder()
    first_partition = builder.add_nodes(row_count, supply=1)
    first_pair = builder.add_nodes(pair_count)
    first_broker = builder.add_nodes(n)
    sink = builder.add_node(-row_count)
    first_arc = builder.add_arcs(first_partition + rows, first_pair + arc_pair, 0, 1, costs)
    add_penalised_bounds(builder, first_pair + np.arange(pair_count), first_broker + pair_broker,
                   size // n - already, -(-size // n) - already, holds, big_m)
    add_penalised_bounds(builder, first_broker + np.arange(n), np.full(n, sink), goal_low - led, goal_high - led,
                   np.full(n, row_count), big_m)
    solution = solve_min_cost_flow(builder.problem())
    used = np.flatnonzero(solution.flows[first_arc:first_arc + len(rows)])
    picked = np.zeros(row_count, dtype=np.int64)
    picked[rows[used]] = columns[used]
    return picked


def add_penalised_bounds(builder: FlowBuilder, tails, heads, low, high, capacity, big_m: int) -> None:
    """Arcs tail -> head carrying up to `capacity`: units below `low` earn `big_m`, units above
    `high` cost `big_m` (a convex penalty on the total; bounds are clipped to [0, capacity])."""
    low = np.clip(low, 0, capacity)
    high = np.clip(high, low, capacity)
    builder.add_arcs(tails, heads, 0, low, -big_m)
    builder.add_arcs(tails, heads, 0, high - low, 0)
    builder.add_arcs(tails, heads, 0, capacity - high, big_m)
