"""`balance.mode`: the planner a rebalance gets, through the whole loop (decide ↔ simulated cluster).

With `bytes`, a broker added to a cluster of very different partition sizes ends within the disk
tolerance of its share of the bytes, the plan's alert carries its bytes bound and the bytes it moves
are those that moved; the mode changes live
with `config set`, and a bad value is refused."""

from __future__ import annotations

from dataclasses import replace

from handler_builders import Loop, alerts, request, simple_cluster
from tests.settings_defaults import default_policy
from planning.model import Broker, Cluster, LogDir, Topic

SIZES = (10**5, 2 * 10**5, 3 * 10**5, 5 * 10**5, 8 * 10**5, 13 * 10**5, 21 * 10**5)


def skewed_cluster() -> Cluster:
    """6 brokers in 3 racks; 3 topics of RF 3 whose partitions span 1.3 decades of size."""
    cluster = simple_cluster(6, {"a": (48, 3), "b": (24, 3), "c": (12, 3)})
    topics = []
    for topic in cluster.topics:
        parts = tuple(replace(p, size_bytes=SIZES[(p.partition * 7 + len(topic.name)) % len(SIZES)])
                      for p in topic.partitions)
        topics.append(Topic(topic.name, parts, topic.min_insync_replicas))
    return Cluster(cluster.brokers, tuple(topics))


def add_a_broker(mode: str, **settings) -> tuple[Loop, dict]:
    """Broker 6 (rack r0) added; returns the loop once idle and the plan's alert."""
    policy = default_policy(broker_add_grace_seconds=0, balance_mode=mode, max_partition_movements=10,
                            max_movements_per_broker=10, **settings)
    loop = Loop.start(skewed_cluster(), policy)
    loop.step()
    loop.sim.add_broker(Broker(6, rack="r0", log_dirs=(LogDir("/d0"),)))
    plans = []
    for _ in range(5):
        loop.sim.tick(1.0)
        plans += alerts(loop.step(), "PlanCreated")
    loop.run(900, until=lambda lp: lp.idle())
    assert loop.idle() and not loop.violations, loop.violations
    assert len(plans) == 1, plans
    return loop, plans[0]


def bytes_per_broker(loop: Loop) -> dict[int, int]:
    held = {b.id: 0 for b in loop.sim.snapshot().brokers}
    for p in loop.sim.snapshot().partitions():
        for b in p.replicas:
            held[b] += p.size_bytes
    return held


def test_a_broker_added_gets_its_share_of_bytes_moving_no_more_than_the_count_planner():
    by_bytes, plan = add_a_broker("bytes")
    details = plan["details"]
    assert details["balance_mode"] == "bytes" and details["within_tolerance"] == "true"
    assert 0 < int(details["bytes_lower_bound"]) <= int(details["bytes_moved"])
    held = bytes_per_broker(by_bytes)
    # Rack r0 (brokers 0, 3, 6) holds one replica of every partition: its share is a third each.
    r0_share = sum(p.size_bytes for p in by_bytes.sim.snapshot().partitions()) / 3
    assert abs(held[6] - r0_share) <= 0.10 * r0_share + 1, (held, r0_share)
    assert moved_bytes(by_bytes) == int(details["bytes_moved"])  # the plan's figure is what moved


def test_a_byte_budget_caps_what_moves_and_the_alert_names_the_band_it_bought():
    _, plain = add_a_broker("bytes")
    budget = int(plain["details"]["bytes_moved"]) // 2
    loop, plan = add_a_broker("bytes", balance_disk_budget_bytes=budget)
    details = plan["details"]
    assert int(details["byte_budget"]) == budget and float(details["disk_tolerance"]) > 0.1
    assert 0 < int(details["bytes_moved"]) <= budget
    assert moved_bytes(loop) == int(details["bytes_moved"])  # what moved is the plan, within the budget
    assert "byte_budget" not in plain["details"]


def test_the_budget_changes_live_and_a_bad_one_is_refused_in_one_line():
    loop = Loop.start(skewed_cluster(), default_policy())
    loop.step()
    refused = loop.step([request("SetConfig", {"key": "balance.disk.budget.bytes", "value": "lots"},
                                 loop.now_ms, "c-1")])
    [rejected] = alerts(refused, "RequestRejected")
    assert "balance.disk.budget.bytes" in rejected["message"] and "bytes from 0 to 10 PB" in rejected["message"]
    loop.step([request("SetConfig", {"key": "balance.disk.budget.bytes", "value": "1kb"}, loop.now_ms, "c-2")])
    planned = loop.step([request("Rebalance", {"topics": []}, loop.now_ms, "rb-1")])
    [plan] = alerts(planned, "PlanCreated")
    assert plan["details"]["byte_budget"] == "1000", plan


def moved_bytes(loop: Loop) -> int:
    """The bytes of every replica a partition holds now and did not hold at the start."""
    before = {p.tp: set(p.replicas) for p in skewed_cluster().partitions()}
    return sum(p.size_bytes * len(set(p.replicas) - before[p.tp]) for p in loop.sim.snapshot().partitions())


def test_bytes_is_the_default_the_mode_changes_live_and_a_bad_value_is_refused():
    loop = Loop.start(skewed_cluster(), default_policy())
    loop.step()
    refused = loop.step([request("SetConfig", {"key": "balance.mode", "value": "fastest"}, loop.now_ms, "c-1")])
    [rejected] = alerts(refused, "RequestRejected")
    assert "balance.mode" in rejected["message"] and "one of strict, bytes" in rejected["message"]
    planned = loop.step([request("Rebalance", {"topics": []}, loop.now_ms, "rb-1")])
    [plan] = alerts(planned, "PlanCreated")
    assert plan["details"].get("balance_mode") == "bytes", plan  # the default
    loop.run(900, until=lambda lp: lp.idle())
    loop.step([request("SetConfig", {"key": "balance.mode", "value": "strict"}, loop.now_ms, "c-2")])
    planned = loop.step([request("Rebalance", {"topics": []}, loop.now_ms, "rb-2")])
    [plan] = alerts(planned, "PlanCreated")
    # the count planner's alert: its bound in replica moves, no bytes figures
    assert "balance_mode" not in plan["details"] and "lower_bound" in plan["details"], plan


def test_a_decommission_in_bytes_mode_drains_the_broker_and_an_impossible_one_is_refused():
    policy = default_policy(balance_mode="bytes", max_partition_movements=10, max_movements_per_broker=10)
    loop = Loop.start(skewed_cluster(), policy)
    loop.step()
    decided = loop.step([request("Decommission", {"broker_ids": [5]}, loop.now_ms, "dc-1")])
    [plan] = alerts(decided, "PlanCreated")
    assert plan["details"]["balance_mode"] == "bytes"
    loop.run(900, until=lambda lp: lp.idle())
    assert loop.idle() and not loop.violations
    assert all(5 not in p.replicas for p in loop.sim.snapshot().partitions())
    # Four more leaving would leave one broker for partitions of RF 3: refused with the reason,
    # as the count planner refuses it, and nothing starts.
    refused = loop.step([request("Decommission", {"broker_ids": [0, 1, 2, 3]}, loop.now_ms, "dc-2")])
    [rejected] = alerts(refused, "RequestRejected")
    assert "needs 3 replicas but only 1 brokers are eligible" in rejected["message"], rejected
    assert not loop.state.reassignments
