"""Bytes-balance benchmark: prints figures, never asserts timings.

Run: `.venv/bin/python benchmarks/bench_bytes_balance.py [a b c d] [--seeds 1,2] [--tolerance 0.10] [--bytes-only]
[--traffic] [--budgets 0.5,1.5]`

Clusters (seeded; 3 DCs with 2 racks each, `/dcK/rJ`; RF 3, one replica per DC, each on a
random broker of its DC, leaders in random order: a random rack-spread start):
  (a) 30 brokers, 400 topics of 10-50 partitions (about 12,000), sizes log-uniform 1 MB-30 GB
      per partition: plain rebalance
  (b) the same, add 3 empty brokers (one per DC)
  (c) the same, remove one broker (all its replicas must leave; its share is 0)
  (d) 60 brokers, 6,000 partitions (200 topics of 30), sizes log-uniform 1 MB-1 GB: add 3
  (e) (not run by default) 100 brokers, 100,000 partitions in 1,000 topics, sizes log-uniform
      1 MB-1 GB: add 7
  (f) (not run by default) 200 brokers in 3 DCs of 4 racks (`/dcK/rJ`, J < 4), 300,000
      partitions in 1,000 topics, sizes log-uniform 1 MB-1 GB: add 10 (the scale target: at most
      10 s and 1 GiB of RSS for the bytes planner; measured on 2 busy cores, CPU seconds: 38.5 s
      and 831 MiB before batched steps, the paused cycle collector and the leaders' flow on
      brokers, 7.3 s and 542 MiB after, of which balance steps 2.3 s, the report 1 s, leaders
      0.7-1 s, the model and ledger ~2 s)

For each: `plan_bytes_balance` (this planner) and, in the same run, today's `plan_placement` as
the product calls it (broker added / rebalance: `Goal(heal=False, rebalance=True)` on the
cluster with the new brokers registered; decommission: `Goal(drain_brokers=..., heal=False,
rebalance=False)`, and also with `rebalance=True` as `reassigner plan` does): bytes moved (TB,
10^12) next to the lower bound, replica moves, leader changes, disk CV and max/mean before and
after, replica-count and leader spread (max - min), the new brokers' bytes as a multiple of the
mean, rack violations, planning time and the process's peak RSS so far (`getrusage`: the bytes planner
runs first, so its figure is its own peak, the cluster included; today's planner's is the larger
of the two). `--bytes-only` skips today's planner.

`--traffic` gives every partition traffic as a measured cluster's would be (seeded): a topic's
bytes in are its size over a retention of 1 hour to 7 days (log-uniform), 3 % of the topics are
hot (x20), and 0-3 consumer groups read each topic (bytes out = groups x bytes in); the bytes
planner then balances bytes in and network out too, and each plan's bytes-in and network-out CV
and max/mean are printed beside the disk's.

`--budgets R1,R2,...` adds, per ratio R, the plan a byte budget of R times the tolerance plan's
bytes buys (`planning.placement.bytes_budget`: the tightest disk band within it): the frontier
of bytes moved against disk spread, each row with the band it reached.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
import resource
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from planning.model import Broker, Cluster, PartitionState, Topic  # noqa: E402
from planning.placement.bytes_balance import Tolerances, plan_bytes_balance  # noqa: E402
from planning.placement.bytes_budget import plan_within_budget  # noqa: E402
from runtime.heap import automatic_collection_paused  # noqa: E402
from planning.placement.placer import Goal, plan_placement  # noqa: E402
from planning.placement.racks import compute_closed_groups, compute_rack_tree, satisfies_rack_spread  # noqa: E402
from planning.placement.spread_floor import compute_plan_cv_floor  # noqa: E402

TB = 1e12


def rack(i: int, racks: int = 2) -> str:
    return f"/dc{i % 3}/r{(i // 3) % racks}"


def build_cluster(brokers: int, topics: int, partitions: tuple[int, int], low: int, high: int, seed: int,
                  racks: int = 2) -> Cluster:
    rnd = random.Random(seed)
    nodes = [Broker(i, rack=rack(i, racks)) for i in range(brokers)]
    by_dc = [[b.id for b in nodes if b.rack.startswith(f"/dc{k}/")] for k in range(3)]
    result = []
    for t in range(topics):
        name = f"topic-{t:04d}"
        parts = []
        for p in range(rnd.randint(*partitions)):
            replicas = [rnd.choice(by_dc[k]) for k in range(3)]
            rnd.shuffle(replicas)
            size = int(math.exp(rnd.uniform(math.log(low), math.log(high))))
            parts.append(PartitionState(name, p, tuple(replicas), size_bytes=size))
        result.append(Topic(name, tuple(parts), 2))
    return Cluster(tuple(nodes), tuple(result))


def with_traffic(cluster: Cluster, seed: int) -> Cluster:
    """`cluster` with each partition's bytes in and out (`--traffic`, module docstring)."""
    rnd = random.Random(seed * 7919)
    topics = []
    for topic in cluster.topics:
        retention = math.exp(rnd.uniform(math.log(3600), math.log(7 * 86400)))
        hot = 20.0 if rnd.random() < 0.03 else 1.0
        readers = rnd.choice([0, 1, 1, 2, 3])
        topics.append(Topic(topic.name, tuple(
            replace(p, bytes_in_per_sec=hot * (p.size_bytes or 0) / retention,
                    bytes_out_per_sec=readers * hot * (p.size_bytes or 0) / retention) for p in topic.partitions),
            topic.min_insync_replicas))
    return Cluster(cluster.brokers, tuple(topics))


def with_new_brokers(cluster: Cluster, count: int, racks: int = 2) -> tuple[Cluster, list[int]]:
    first = max(b.id for b in cluster.brokers) + 1
    added = [Broker(first + i, rack=rack(first + i, racks)) for i in range(count)]
    return Cluster(cluster.brokers + tuple(added), cluster.topics), [b.id for b in added]


def scenario(key: str, seed: int):
    """(cluster, new broker ids, drained broker ids)."""
    if key == "f":
        cluster = build_cluster(200, 1000, (300, 300), 1 << 20, 1 << 30, seed, racks=4)
        cluster, added = with_new_brokers(cluster, 10, racks=4)
        return cluster, added, frozenset()
    if key == "e":
        cluster = build_cluster(100, 1000, (100, 100), 1 << 20, 1 << 30, seed)
        cluster, added = with_new_brokers(cluster, 7)
        return cluster, added, frozenset()
    if key == "d":
        cluster = build_cluster(60, 200, (30, 30), 1 << 20, 1 << 30, seed)
        cluster, added = with_new_brokers(cluster, 3)
        return cluster, added, frozenset()
    cluster = build_cluster(30, 400, (10, 50), 1 << 20, 30 << 30, seed)
    if key == "b":
        cluster, added = with_new_brokers(cluster, 3)
        return cluster, added, frozenset()
    if key == "c":
        return cluster, [], frozenset({7})
    return cluster, [], frozenset()


def stats(values: list) -> tuple[float, float]:
    mean = sum(values) / len(values)
    if not mean:
        return 0.0, 0.0
    cv = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) / mean
    return cv, max(values) / mean


def after_counts(cluster: Cluster, targets, eligible) -> tuple[list[int], list[int], list[int], list[float],
                                                                 list[float]]:
    """Per eligible broker once `targets` are applied: bytes, replicas, leaders, bytes in and
    network out (`planning.load`)."""
    held = {b: 0 for b in eligible}
    count = {b: 0 for b in eligible}
    leads = {b: 0 for b in eligible}
    rate_in = {b: 0.0 for b in eligible}
    out = {b: 0.0 for b in eligible}
    for p in cluster.partitions():
        final = targets.get(p.tp, p.replicas)
        for b in final:
            if b in held:
                held[b] += p.size_bytes or 0
                count[b] += 1
                rate_in[b] += p.bytes_in_per_sec or 0.0
        if final and final[0] in leads:
            leads[final[0]] += 1
            out[final[0]] += (len(final) - 1) * (p.bytes_in_per_sec or 0.0) + (p.bytes_out_per_sec or 0.0)
    return ([held[b] for b in eligible], [count[b] for b in eligible], [leads[b] for b in eligible],
            [rate_in[b] for b in eligible], [out[b] for b in eligible])


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def describe(name: str, cluster: Cluster, eligible: list[int], added: list[int], targets, seconds: float,
             moved: int, moves: int, leader_changes: int, bound: int | None = None, extra: str = "") -> dict:
    held, count, leads, rate_in, out = after_counts(cluster, targets, eligible)
    cv, max_mean = stats(held)
    mean = sum(held) / len(held)
    # The lowest disk CV any plan moving as many bytes on this snapshot reaches: a tool that
    # claims a lower one moved more.
    tree = compute_rack_tree(b for b in cluster.brokers if b.id in set(eligible))
    closed = compute_closed_groups(tree, {len(p.replicas) for p in cluster.partitions()})
    floor = compute_plan_cv_floor(after_counts(cluster, {}, eligible)[0], held, moved, [closed[b] for b in eligible])
    if any(rate_in):
        extra = (f"; bytes in CV {stats(rate_in)[0]:.3f} max/mean {stats(rate_in)[1]:.3f}, network out CV "
                 f"{stats(out)[0]:.3f} max/mean {stats(out)[1]:.3f}") + extra
    new = [held[eligible.index(b)] / mean for b in added]
    violations = sum(1 for final in targets.values() if not satisfies_rack_spread(tree, final))
    bound_text = f" (bound {bound / TB:.3f}, gap {100 * (moved - bound) / bound if bound else 0:.1f} %)" if bound is not None else ""
    new_text = f", new brokers {min(new):.3f}-{max(new):.3f}x mean bytes" if new else ""
    print(f"  {name:<34} {moved / TB:7.3f} TB{bound_text}, {moves:5d} replica moves, {leader_changes:5d} leader "
          f"changes; disk CV {cv:.3f} (floor at these bytes {floor:.3f}) max/mean {max_mean:.3f}; replica spread {max(count) - min(count)}, "
          f"leader spread {max(leads) - min(leads)}{new_text}; rack violations {violations}; {seconds:.2f} s, peak RSS "
          f"{peak_rss_mib():.0f} MiB{extra}",
          flush=True)
    return {"tb": moved / TB, "cv": cv, "cv_floor": floor, "max_mean": max_mean}


def run(key: str, seed: int, tolerance: float, bytes_only: bool = False, traffic: bool = False,
        budgets: tuple[float, ...] = ()) -> None:
    cluster, added, drained = scenario(key, seed)
    if traffic:
        cluster = with_traffic(cluster, seed)
    eligible = sorted(b.id for b in cluster.brokers if b.id not in drained)
    held, count, leads, rate_in, out = after_counts(cluster, {}, eligible)
    cv, max_mean = stats(held)
    partitions = sum(len(t.partitions) for t in cluster.topics)
    total = sum(p.size_bytes or 0 for p in cluster.partitions()) * 1.0
    print(f"({key}) seed {seed}: {len(cluster.brokers)} brokers, {partitions} partitions, {3 * total / TB:.1f} TB of "
          f"replicas{'; add ' + str(added) if added else ''}{'; remove ' + str(sorted(drained)) if drained else ''}; "
          f"before: disk CV {cv:.3f} max/mean {max_mean:.3f}, replica spread {max(count) - min(count)}, leader "
          f"spread {max(leads) - min(leads)}"
          + (f", bytes in CV {stats(rate_in)[0]:.3f}, network out CV {stats(out)[0]:.3f}" if traffic else "")
          + f"; peak RSS {peak_rss_mib():.0f} MiB", flush=True)

    goal = Goal(heal=False, rebalance=True, drain_brokers=drained)
    tolerances = Tolerances(disk=tolerance, replicas=tolerance, leaders=tolerance, bytes_in=tolerance,
                            network_out=tolerance)
    started = time.perf_counter()
    with automatic_collection_paused():  # as the pipeline and `reassigner plan` run it (runtime.heap)
        plan = plan_bytes_balance(cluster, tolerances, goal)
    seconds = time.perf_counter() - started
    describe(f"bytes balance ±{tolerance:.0%}", cluster, eligible, added, plan.targets, seconds, plan.bytes_moved,
             plan.replica_moves, plan.leader_changes, plan.bytes_moved_lower_bound,
             f"; within tolerance: {plan.within_tolerance}")
    for warning in plan.warnings:
        print(f"    warning: {warning}", flush=True)
    for ratio in budgets:
        budget = int(ratio * plan.bytes_moved)
        started = time.perf_counter()
        with automatic_collection_paused():
            bought = plan_within_budget(cluster, budget, tolerances, goal)
        seconds = time.perf_counter() - started
        describe(f"budget {ratio:g}x (band ±{bought.disk_tolerance:.1%})", cluster, eligible, added, bought.targets,
                 seconds, bought.bytes_moved, bought.replica_moves, bought.leader_changes,
                 bought.bytes_moved_lower_bound, f"; within the budget: {bought.bytes_moved <= budget}")

    goals = [("today (product's goal)", goal if not drained else Goal(heal=False, rebalance=False,
                                                                     drain_brokers=drained))]
    if drained:
        goals.append(("today (rebalance while draining)", goal))
    for name, today_goal in goals if not bytes_only else []:
        started = time.perf_counter()
        today = plan_placement(cluster, today_goal)
        seconds = time.perf_counter() - started
        describe(name, cluster, eligible, added, today.targets, seconds, today.bytes_moved, today.replica_moves,
                 today.leader_changes)


if __name__ == "__main__":
    args = sys.argv[1:]
    seeds, tolerance = [1], 0.10
    if "--seeds" in args:
        at = args.index("--seeds")
        seeds = [int(s) for s in args[at + 1].split(",")]
        del args[at:at + 2]
    if "--tolerance" in args:
        at = args.index("--tolerance")
        tolerance = float(args[at + 1])
        del args[at:at + 2]
    budgets: tuple[float, ...] = ()
    if "--budgets" in args:
        at = args.index("--budgets")
        budgets = tuple(float(r) for r in args[at + 1].split(","))
        del args[at:at + 2]
    bytes_only, traffic = "--bytes-only" in args, "--traffic" in args
    args = [a for a in args if a not in ("--bytes-only", "--traffic")]
    for key in args or ["a", "b", "c", "d"]:
        for seed in seeds:
            run(key, seed, tolerance, bytes_only, traffic, budgets)
