"""Placement benchmark (issue 3): prints figures, never asserts timings.

Run: `.venv/bin/python benchmarks/bench_placement.py [a b c]`

Scenarios (clusters start rack-spread and count-balanced, sizes are random but seeded):
  (a) 6 brokers / 3 racks / 200 partitions RF 3, add 1 broker
  (b) 30 brokers / 3 racks / 30,000 partitions RF 3, add 3 and remove (drain) 1
  (c) 200 brokers in 3 DCs x 4 racks (`/dcN/rM`) / 300,000 partitions RF 3, add 10, kill 1
  (d) 60 brokers / 3 racks / 20,000 topics of 1-3 partitions RF 3, add 6 (small topics: the
      case where per-topic quotas left new brokers empty)
  (e1-e4) seeded random clusters of 24-40 brokers on uneven `/dc/rack/host` racks that start
      rack-violating (replicas drawn at random), RF 2-4, add 2, kill 1
  (f) 1M replicas: 300 brokers / 3 DCs x 5 racks / 333,334 partitions RF 3, add 10, kill 1

For each: planning time (wall and CPU), max RSS of the process so far, peak traced memory (tracemalloc, a separate run so that tracing does
not slow the timed one), moves vs the lower bound, per-topic replica and leader spread, rack
violations, cluster-wide replica and leader spread and the added brokers' replicas; and, in the same process, a baseline that re-places every topic from scratch the
way Kafka's `kafka-reassign-partitions.sh --generate` does (rack-alternating round-robin from
a random start) with the ratio of its moves to the planner's.
"""

from __future__ import annotations

import random
import resource
import sys
import time
import tracemalloc
from collections import Counter

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.dirname(__file__)))

from planning.model import Broker, Cluster, PartitionState, Topic  # noqa: E402
from planning.placement.placer import Goal, plan_placement  # noqa: E402
from planning.placement.racks import compute_rack_tree, satisfies_rack_spread  # noqa: E402


def build_cluster(brokers: list[Broker], partitions: int, topics: int, seed: int) -> Cluster:
    """RF 3, one replica per top-level domain where there are >= 3, round-robin inside."""
    rnd = random.Random(seed)
    by_top: dict[str, list[int]] = {}
    for b in brokers:
        top = b.rack.strip("/").split("/")[0] if b.rack else str(b.id)
        by_top.setdefault(top, []).append(b.id)
    domains = [by_top[k] for k in sorted(by_top)]
    per_topic = partitions // topics
    result = []
    for t in range(topics):
        offset = rnd.randrange(10_000)
        parts = []
        for p in range(per_topic):
            k = offset + p
            first = k % 3
            replicas = tuple(
                domains[(first + j) % 3][(k // 3 + j * 7) % len(domains[(first + j) % 3])] for j in range(3)
            )
            parts.append(
                PartitionState(f"topic-{t:04d}", p, replicas, size_bytes=rnd.randrange(1, 1 << 30))
            )
        result.append(Topic(f"topic-{t:04d}", tuple(parts), 2))
    return Cluster(tuple(brokers), tuple(result))


def kafka_generate_baseline(cluster: Cluster, goal: Goal, seed: int = 1) -> tuple[int, int]:
    """Moves and leader changes of re-placing every topic with Kafka's rack-aware generator."""
    rnd = random.Random(seed)
    live = [b for b in cluster.brokers if b.alive and b.id not in goal.drain_brokers]
    live += list(goal.add_brokers)
    racks: dict[str, list[int]] = {}
    for b in sorted(live, key=lambda b: b.id):
        racks.setdefault(b.rack or str(b.id), []).append(b.id)
    # Kafka's rack-alternated broker list: r1b1, r2b1, r3b1, r1b2, ...
    arranged, depth = [], 0
    while len(arranged) < len(live):
        for rack in sorted(racks):
            if depth < len(racks[rack]):
                arranged.append(racks[rack][depth])
        depth += 1
    rack_of = {b.id: (b.rack or str(b.id)) for b in live}
    n = len(arranged)
    moves = leaders = 0
    for topic in cluster.topics:
        start = rnd.randrange(n)
        shift = rnd.randrange(n)
        for p in topic.partitions:
            rf = len(p.replicas)
            if p.partition > 0 and p.partition % n == 0:
                shift += 1
            first = (p.partition + start) % n
            chosen = [arranged[first]]
            used_racks = {rack_of[arranged[first]]}
            k = 0
            while len(chosen) < rf:
                k += 1
                b = arranged[(first + 1 + (shift + k - 1) % (n - 1)) % n] if n > 1 else arranged[0]
                if b in chosen:
                    continue
                if rack_of[b] in used_racks and len(used_racks) < len(racks) and k < 4 * n:
                    continue
                chosen.append(b)
                used_racks.add(rack_of[b])
            moves += len(set(chosen) - set(p.replicas))
            leaders += chosen[0] != p.replicas[0]
    return moves, leaders


def per_topic_spread(cluster: Cluster, plan) -> tuple[int, int, float]:
    eligible = set(plan.eligible_brokers)
    worst_replicas = worst_leaders = 0
    total_spread = 0
    for topic in cluster.topics:
        counts = Counter({b: 0 for b in eligible})
        leaders = Counter({b: 0 for b in eligible})
        for p in topic.partitions:
            final = plan.targets.get(p.tp, p.replicas)
            counts.update(b for b in final if b in eligible)
            leaders[final[0]] += 1
        spread = max(counts.values()) - min(counts.values())
        worst_replicas = max(worst_replicas, spread)
        total_spread += spread
        worst_leaders = max(worst_leaders, max(leaders.values()) - min(leaders.values()))
    return worst_replicas, worst_leaders, total_spread / max(1, len(cluster.topics))


def cluster_spreads(plan) -> tuple[int, int, str]:
    """(replica spread, leader spread) over eligible brokers, and the added brokers' replicas."""
    eligible = plan.eligible_brokers
    replicas = [plan.replicas_after.get(b, 0) for b in eligible]
    leaders = [plan.leaders_after.get(b, 0) for b in eligible]
    added = [plan.replicas_after.get(b.id, 0) for b in plan_goal_adds]
    added_text = f"{min(added)}-{max(added)}" if added else "-"
    return max(replicas) - min(replicas), max(leaders) - min(leaders), added_text


def independent_rack_violations(cluster: Cluster, plan) -> int:
    live = {b.id: b for b in cluster.brokers if b.eligible and b.id not in plan_goal_drains}
    for b in plan_goal_adds:
        live[b.id] = b
    tree = compute_rack_tree(live.values())
    return sum(1 for replicas in plan.targets.values() if not satisfies_rack_spread(tree, replicas))


plan_goal_drains: frozenset[int] = frozenset()
plan_goal_adds: tuple[Broker, ...] = ()


def run(name: str, cluster: Cluster, goal: Goal) -> dict:
    global plan_goal_drains, plan_goal_adds
    plan_goal_drains, plan_goal_adds = goal.drain_brokers, goal.add_brokers
    started, cpu_started = time.perf_counter(), time.process_time()
    plan = plan_placement(cluster, goal)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the solver's C++ heap too
    tracemalloc.start()
    plan_placement(cluster, goal)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    worst_replicas, worst_leaders, mean_spread = per_topic_spread(cluster, plan)
    cluster_replica_spread, cluster_leader_spread, added_replicas = cluster_spreads(plan)
    base_moves, base_leaders = kafka_generate_baseline(cluster, goal)
    row = {
        "scenario": name,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "max_rss_mib": rss_mib,
        "cluster_replica_spread": cluster_replica_spread,
        "cluster_leader_spread": cluster_leader_spread,
        "added_broker_replicas": added_replicas,
        "peak_mib": peak / 2**20,
        "moves": plan.replica_moves,
        "bound": plan.replica_moves_lower_bound,
        "optimum": plan.replica_moves_optimum,
        "bytes_gib": plan.bytes_moved / 2**30,
        "leader_changes": plan.leader_changes,
        "topic_spread_max": worst_replicas,
        "topic_spread_mean": mean_spread,
        "leader_spread_max": worst_leaders,
        "rack_violations": plan.rack_violations,
        "rack_violations_independent": independent_rack_violations(cluster, plan),
        "baseline_moves": base_moves,
        "baseline_leader_changes": base_leaders,
    }
    print(
        f"{name}: {seconds:.2f} s ({cpu_seconds:.2f} s CPU), peak {row['peak_mib']:.0f} MiB traced, "
        f"max RSS {rss_mib:.0f} MiB, moves {plan.replica_moves} "
        f"vs bound {plan.replica_moves_lower_bound} (gap {plan.gap_percent:.2f} %"
        f"{', proven optimum' if plan.replica_moves_optimum is not None else ''}), "
        f"outside shares {plan.replicas_outside_share} replicas / {plan.leaders_outside_share} leaders, "
        f"{row['bytes_gib']:.1f} GiB, leader changes {plan.leader_changes}, per-topic spread max "
        f"{worst_replicas} (mean {mean_spread:.2f}), leader spread max {worst_leaders}, rack violations "
        f"{plan.rack_violations}/{row['rack_violations_independent']}, cluster replica spread "
        f"{cluster_replica_spread} (added brokers {added_replicas}), cluster leader spread {cluster_leader_spread} | kafka --generate baseline: moves "
        f"{base_moves} ({base_moves / max(1, plan.replica_moves):.1f}x ours), leader changes {base_leaders}",
        flush=True,
    )
    return row


def scenario_a() -> tuple[Cluster, Goal]:
    brokers = [Broker(i, rack=f"r{i % 3}") for i in range(6)]
    return build_cluster(brokers, 200, 4, seed=1), Goal(add_brokers=(Broker(6, rack="r0"),))


def scenario_b() -> tuple[Cluster, Goal]:
    brokers = [Broker(i, rack=f"r{i % 3}") for i in range(30)]
    cluster = build_cluster(brokers, 30_000, 300, seed=2)
    added = tuple(Broker(30 + i, rack=f"r{i % 3}") for i in range(3))
    return cluster, Goal(add_brokers=added, drain_brokers=frozenset({7}))


def scenario_c() -> tuple[Cluster, Goal]:
    def rack(i: int) -> str:
        return f"/dc{i % 3}/r{(i // 3) % 4}"

    brokers = [Broker(i, rack=rack(i)) for i in range(200)]
    cluster = build_cluster(brokers, 300_000, 1000, seed=3)
    killed = 17
    brokers = [Broker(b.id, b.rack, alive=b.id != killed) for b in brokers]
    cluster = Cluster(tuple(brokers), cluster.topics)
    added = tuple(Broker(200 + i, rack=rack(200 + i)) for i in range(10))
    return cluster, Goal(add_brokers=added)


def scenario_d() -> tuple[Cluster, Goal]:
    """Many small topics: 20,000 topics of 1-3 partitions on 60 brokers in 3 racks, add 6."""
    rnd = random.Random(4)
    brokers = [Broker(i, rack=f"r{i % 3}") for i in range(60)]
    by_rack = [[b.id for b in brokers if b.rack == f"r{r}"] for r in range(3)]
    topics = []
    for t in range(20_000):
        name = f"small-{t:05d}"
        parts = tuple(
            PartitionState(name, p, tuple(rnd.choice(by_rack[(t + p + k) % 3]) for k in range(3)),
                           size_bytes=rnd.randrange(1, 2**30))
            for p in range(rnd.randint(1, 3))
        )
        topics.append(Topic(name, parts))
    added = tuple(Broker(60 + i, rack=f"r{i % 3}") for i in range(6))
    return Cluster(tuple(brokers), tuple(topics)), Goal(add_brokers=added)


def scenario_e(seed: int) -> tuple[Cluster, Goal]:
    """A seeded random cluster that starts rack-violating, on uneven multi-level racks
    (`/dc/rack/host`, some brokers one level short), RF 2-4: add 2 brokers, kill 1."""
    rnd = random.Random(100 + seed)
    count = rnd.randint(24, 40)

    def rack(i: int) -> str:
        dc = i % 3 if i % 7 else 0  # dc0 gets more brokers
        path = f"/dc{dc}/r{(i // 3) % (2 + dc)}"
        return path if i % 5 == 4 else f"{path}/h{i % 2}"

    brokers = [Broker(i, rack=rack(i)) for i in range(count)]
    killed = rnd.randrange(count)
    brokers = [Broker(b.id, b.rack, alive=b.id != killed) for b in brokers]
    topics = []
    for t in range(40):
        rf = rnd.randint(2, 4)
        name = f"e{seed}-{t:02d}"
        parts = tuple(
            PartitionState(name, p, tuple(rnd.sample(range(count), rf)), size_bytes=rnd.randrange(1, 2**30))
            for p in range(rnd.randint(1, 50))
        )
        topics.append(Topic(name, parts))
    added = tuple(Broker(count + i, rack=rack(count + i)) for i in range(2))
    return Cluster(tuple(brokers), tuple(topics)), Goal(add_brokers=added)


def scenario_f() -> tuple[Cluster, Goal]:
    """1M replicas: 300 brokers in 3 DCs x 5 racks, 333,334 partitions RF 3, add 10, kill 1."""

    def rack(i: int) -> str:
        return f"/dc{i % 3}/r{(i // 3) % 5}"

    brokers = [Broker(i, rack=rack(i)) for i in range(300)]
    cluster = build_cluster(brokers, 333_334, 1000, seed=6)
    brokers = [Broker(b.id, b.rack, alive=b.id != 42) for b in brokers]
    added = tuple(Broker(300 + i, rack=rack(300 + i)) for i in range(10))
    return Cluster(tuple(brokers), cluster.topics), Goal(add_brokers=added)


if __name__ == "__main__":
    chosen = sys.argv[1:] or ["a", "b", "c", "d", "e1", "e2", "e3", "e4", "f"]
    scenarios = {"a": scenario_a, "b": scenario_b, "c": scenario_c, "d": scenario_d, "f": scenario_f,
                 **{f"e{i}": (lambda i=i: scenario_e(i)) for i in range(1, 5)}}
    for key in chosen:
        cluster, goal = scenarios[key]()
        run(f"({key})", cluster, goal)
