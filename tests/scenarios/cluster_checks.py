"""Checks of a real cluster's replica placement, written independently of the planner.

Input everywhere: partitions as `ClusterProbe.partitions()` returns them ({(topic, partition):
{"replicas": [...], ...}}), the rack path of every broker, and the eligible brokers (alive, not
draining). Each check returns a list of problems (empty = fine), so a test can show them all.

- `placement_problems`: SPEC 4's hard constraints — the replication factor kept, no broker twice,
  replicas only on eligible brokers, and multi-level rack spread as even as the racks allow: at
  every node of the rack tree, no child holds two replicas more than a sibling that still had
  room (an eligible broker not used by the partition).
- `balance_problems`: per topic, every eligible broker holds its ideal share within one replica
  (|count - ideal| < 1), the ideal share being what the racks allow: the topic's replicas are
  water-filled over the top-level domains, each domain between the least and the most replicas
  the per-partition rack rule lets it hold, then shared evenly by its brokers. (Exact for rack
  paths `/dc/rack` with one broker per rack, as in the scenarios; deeper trees are treated as flat
  inside a top-level domain.)
- `receiver_problems`: for plans that only heal or drain (no rebalance, SPEC 4 goal 1 first), the
  weaker property that each moved replica went to a least-loaded choice: no other eligible broker
  of the same top-level domain, not already holding the partition and not the broker the replica
  left, ends up with two replicas of the topic fewer than the receiver.
- `replica_moves`: replicas added per partition between two views (the plan's `replica_moves`).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from typing import Mapping

Partitions = Mapping[tuple[str, int], Mapping]


def rack_path(broker_id: int, rack: str | None) -> tuple[str, ...]:
    """The broker's place in the rack tree, the broker itself as the leaf."""
    labels = tuple(x for x in (rack or "").split("/") if x) or (f"norack-{broker_id}",)
    return (*labels, f"broker-{broker_id}")


def replica_moves(before: Partitions, after: Partitions) -> int:
    return sum(len(set(after[k]["replicas"]) - set(before[k]["replicas"]))
               for k in after if k in before)


def placement_problems(partitions: Partitions, racks: Mapping[int, str | None], eligible: set[int],
                       replication_factor: int = 3) -> list[str]:
    problems = []
    paths = {b: rack_path(b, racks.get(b)) for b in eligible}
    for (topic, number), p in sorted(partitions.items()):
        replicas = list(p["replicas"])
        name = f"{topic}-{number} {replicas}"
        if len(replicas) != replication_factor:
            problems.append(f"{name}: {len(replicas)} replicas, not {replication_factor}")
        if len(set(replicas)) != len(replicas):
            problems.append(f"{name}: a broker twice")
        outside = sorted(set(replicas) - eligible)
        if outside:
            problems.append(f"{name}: replicas on brokers {outside}, not eligible ({sorted(eligible)})")
            continue
        uneven = _uneven_node(paths, replicas, depth=0, prefix=())
        if uneven is not None:
            problems.append(f"{name}: rack spread uneven under {'/'.join(uneven) or 'the root'}")
    return problems


def _uneven_node(paths: Mapping[int, tuple[str, ...]], replicas: list[int], depth: int,
                 prefix: tuple[str, ...]) -> tuple[str, ...] | None:
    """The first node (as a path) whose children hold replicas less evenly than room allows."""
    under = [b for b, path in paths.items() if path[:depth] == prefix and len(path) > depth]
    if not under:
        return None
    capacity = Counter(paths[b][depth] for b in under)
    counts = Counter(paths[b][depth] for b in replicas if paths[b][:depth] == prefix)
    for high, low in itertools.permutations(capacity, 2):
        if counts[high] >= counts[low] + 2 and counts[low] < capacity[low]:
            return prefix
    for child in sorted(counts):
        found = _uneven_node(paths, replicas, depth + 1, prefix + (child,))
        if found is not None:
            return found
    return None


def ideal_shares(racks: Mapping[int, str | None], eligible: set[int], partitions: int,
                 replication_factor: int) -> dict[int, float]:
    """Each eligible broker's ideal count of one topic's replicas, as the racks allow."""
    domain_of = {b: rack_path(b, racks.get(b))[0] for b in eligible}
    capacity = Counter(domain_of.values())
    domains = sorted(capacity)
    low, high = _per_partition_range(capacity, domains, replication_factor)
    total = partitions * replication_factor

    def shares(level: float) -> dict[str, float]:
        return {d: min(max(level * capacity[d], partitions * low[d]), partitions * high[d]) for d in domains}

    lo, hi = 0.0, float(total)
    for _ in range(100):  # water level by bisection: the shares add up to the total
        middle = (lo + hi) / 2
        lo, hi = (middle, hi) if sum(shares(middle).values()) < total else (lo, middle)
    domain_share = shares(hi)
    return {b: domain_share[domain_of[b]] / capacity[domain_of[b]] for b in eligible}


def _per_partition_range(capacity: Counter, domains: list[str], rf: int) -> tuple[dict, dict]:
    """Per top-level domain, the fewest and most replicas of one partition an even spread puts
    there (every vector of counts within capacity, summing to rf, with no pair d, e where d
    holds two more than e while e still has room)."""
    low = {d: rf for d in domains}
    high = {d: 0 for d in domains}
    for counts in itertools.product(*(range(min(capacity[d], rf) + 1) for d in domains)):
        if sum(counts) != rf:
            continue
        x = dict(zip(domains, counts))
        if any(x[d] >= x[e] + 2 and x[e] < capacity[e] for d in domains for e in domains):
            continue
        for d in domains:
            low[d], high[d] = min(low[d], x[d]), max(high[d], x[d])
    return low, high


def topic_counts(partitions: Partitions) -> dict[str, Counter]:
    counts: dict[str, Counter] = defaultdict(Counter)
    for (topic, _), p in partitions.items():
        counts[topic].update(p["replicas"])
    return counts


def is_excluded_by_default(topic: str) -> bool:
    """The product's default topic selection (docs/configuration.md, `topics_exclude`): Kafka's
    internal topics and the product's own are only healed and drained, never rebalanced."""
    return topic.startswith("__") or topic.startswith("reassigner.")


def excluded_topic_moves(before: Partitions, after: Partitions) -> list[str]:
    """Partitions of default-excluded topics whose replica set changed (a rebalance must not)."""
    return [f"{topic}-{partition}: {sorted(before[key]['replicas'])} -> {sorted(p['replicas'])}"
            for key, p in sorted(after.items()) for topic, partition in [key]
            if is_excluded_by_default(topic) and key in before
            and set(before[key]["replicas"]) != set(p["replicas"])]


def balance_problems(partitions: Partitions, racks: Mapping[int, str | None], eligible: set[int],
                     replication_factor: int = 3) -> list[str]:
    """Per topic the product balances (default selection), counts off the ideal by a replica."""
    partitions = {key: p for key, p in partitions.items() if not is_excluded_by_default(key[0])}
    problems = []
    per_topic = Counter(topic for topic, _ in partitions)
    for topic, counts in sorted(topic_counts(partitions).items()):
        ideal = ideal_shares(racks, eligible, per_topic[topic], replication_factor)
        off = {b: counts[b] for b in sorted(eligible) if abs(counts[b] - ideal[b]) >= 1}
        if off:
            problems.append(f"{topic}: counts {dict(sorted((b, counts[b]) for b in eligible))}, ideal "
                            f"{ {b: round(v, 2) for b, v in sorted(ideal.items())} }; off by a replica or "
                            f"more: {off}")
    return problems


def receiver_problems(before: Partitions, after: Partitions, racks: Mapping[int, str | None],
                      eligible: set[int]) -> list[str]:
    problems = []
    domain = {b: rack_path(b, racks.get(b))[0] for b in eligible}
    counts = topic_counts(after)
    for key in sorted(after):
        if key not in before:
            continue
        topic = key[0]
        old, new = set(before[key]["replicas"]), set(after[key]["replicas"])
        for receiver in sorted(new - old):
            if receiver not in domain:
                continue  # placement_problems reports it
            passed_over = [b for b in eligible if domain[b] == domain[receiver] and b not in new
                           and b not in old and counts[topic][b] + 2 <= counts[topic][receiver]]
            if passed_over:
                problems.append(
                    f"{topic}-{key[1]} moved to broker {receiver} ({counts[topic][receiver]} replicas of "
                    f"{topic}) although {sorted(passed_over)} in its domain hold "
                    f"{[counts[topic][b] for b in sorted(passed_over)]}")
    return problems
