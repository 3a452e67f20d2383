"""Disk-capacity safety (`planning.placement.log_dir_choice`): no plan puts a replica where the projected
usage of the target dir would exceed `disk.max.usage.percent`; when nothing fits, PlanInfeasible
names the dirs and figures. Bytes per broker are reported next to the counts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from planning.model import Broker, Cluster, LogDir, PartitionState, Topic
from planning.placement.goal import Goal
from planning.placement.placer import plan_placement
from schemas.errors import PlanInfeasibleError

GB = 10**9


def disk(path, used_gb, total_gb=1000):
    return LogDir(path, total_bytes=total_gb * GB, usable_bytes=(total_gb - used_gb) * GB)


def cluster_of(new_broker_dirs, partitions=12, size=10 * GB, rf=2, old_brokers=3):
    brokers = tuple(Broker(b, rack=None, log_dirs=(disk("/d0", 100),)) for b in range(old_brokers))
    brokers += (Broker(old_brokers, rack=None, log_dirs=new_broker_dirs),)
    parts = tuple(PartitionState("t", n, tuple((n + i) % old_brokers for i in range(rf)),
                                 tuple((n + i) % old_brokers for i in range(rf)), n % old_brokers,
                                 size_bytes=size, log_dirs=("/d0",) * rf) for n in range(partitions))
    return Cluster(brokers, (Topic("t", parts),))


def incoming(plan, cluster, broker_id):
    """Bytes the plan puts on `broker_id`, per target dir."""
    into: dict[str | None, int] = {}
    for tp, target in plan.targets.items():
        p = cluster.partition(tp)
        for b, path in zip(target, plan.target_log_dirs[tp]):
            if b == broker_id and b not in p.replicas:
                into[path] = into.get(path, 0) + (p.size_bytes or 0)
    return into


def test_a_nearly_full_new_broker_gets_only_what_fits_and_the_rest_goes_elsewhere():
    cluster = cluster_of((disk("/d0", 830),))  # 20 GB of room under 85 %: two 10 GB replicas
    unlimited = plan_placement(cluster, Goal(heal=False, rebalance=True))
    assert sum(incoming(unlimited, cluster, 3).values()) == 60 * GB  # the count balance wants 6
    limited = plan_placement(cluster, Goal(heal=False, rebalance=True, disk_max_usage_percent=85))
    assert incoming(limited, cluster, 3) == {"/d0": 20 * GB}
    assert limited.bytes_after[3] == 20 * GB
    assert limited.cluster_bytes_spread == max(limited.bytes_after.values()) - 20 * GB > 0
    assert unlimited.cluster_bytes_spread < limited.cluster_bytes_spread  # the disk limit costs balance


def test_the_dir_with_room_is_chosen_over_the_least_used_one():
    cluster = cluster_of((disk("/a", 849, total_gb=1000), LogDir("/b", total_bytes=100 * GB, usable_bytes=50 * GB,
                                                                  replica_bytes=10**12)))
    plan = plan_placement(cluster, Goal(heal=False, rebalance=True, disk_max_usage_percent=85))
    # /a (Kafka bytes unknown: 0) is "least used" but has 1 GB of room; /b has 35 GB.
    assert set(incoming(plan, cluster, 3)) == {"/b"} and incoming(plan, cluster, 3)["/b"] <= 35 * GB


def test_when_nothing_fits_the_plan_is_refused_naming_the_dirs_and_figures():
    brokers = (Broker(0, log_dirs=(disk("/d0", 100),)), Broker(1, alive=False, log_dirs=(disk("/d0", 100),)),
               Broker(2, log_dirs=(disk("/d0", 849),)))
    parts = (PartitionState("t", 0, (0, 1), (0,), 0, size_bytes=10 * GB, log_dirs=("/d0", "/d0")),)
    with pytest.raises(PlanInfeasibleError) as refused:
        plan_placement(Cluster(brokers, (Topic("t", parts),)), Goal(heal=True, rebalance=False, disk_max_usage_percent=85))
    message = str(refused.value)
    assert "disk limit 85% (disk.max.usage.percent" in message and "broker 2" in message
    assert "/d0 85% used (849,000,000,000 of 1,000,000,000,000 B)" in message and "t-0" in message


def test_dirs_that_do_not_report_their_size_are_not_limited():
    cluster = cluster_of((LogDir("/d0"),))
    plan = plan_placement(cluster, Goal(heal=False, rebalance=True, disk_max_usage_percent=1))
    assert sum(incoming(plan, cluster, 3).values()) == 60 * GB


def assert_within_limit(plan, cluster, limit) -> None:
    """No dir's volume ends fuller than `limit` percent with what the plan moves into it."""
    for b in cluster.brokers:
        into = incoming(plan, cluster, b.id)
        for d in b.log_dirs:
            used = d.total_bytes - d.usable_bytes
            if into.get(d.path):
                assert used + into[d.path] <= limit / 100 * d.total_bytes, (b.id, d.path)


@st.composite
def crowded_clusters(draw):
    used = [draw(st.integers(0, 95)) for _ in range(4)]
    sizes = [draw(st.sampled_from([1, 5, 20, 60])) * GB for _ in range(draw(st.integers(1, 16)))]
    brokers = tuple(Broker(b, rack=f"r{b % 2}", log_dirs=(disk("/a", used[b], 500), disk("/b", used[b] // 2, 300)))
                    for b in range(4))
    parts = tuple(PartitionState("t", n, (n % 3, (n + 1) % 3), (n % 3, (n + 1) % 3), n % 3, size_bytes=size,
                                 log_dirs=("/a", "/b")) for n, size in enumerate(sizes))
    return Cluster(brokers, (Topic("t", parts),)), draw(st.sampled_from([70, 85, 95]))


@settings(max_examples=150, deadline=None)
@given(crowded_clusters())
def test_no_plan_ever_pushes_a_dir_over_the_limit(case):
    cluster, limit = case
    try:
        plan = plan_placement(cluster, Goal(heal=False, rebalance=True, disk_max_usage_percent=limit))
    except PlanInfeasibleError as error:
        assert "disk.max.usage.percent" in str(error) or "rack" in str(error)
        return
    assert_within_limit(plan, cluster, limit)


@settings(max_examples=60, deadline=None)
@given(crowded_clusters())
def test_the_limit_holds_in_bytes_mode_too(case):
    """`balance.mode=bytes`: a plan whose new replicas fit no dir under the limit is planned by
    the count planner instead, which keeps such brokers out (or refuses)."""
    from planning.placement.balance_modes import Balance, plan_balanced

    cluster, limit = case
    try:
        plan = plan_balanced(cluster, Goal(heal=False, rebalance=True, disk_max_usage_percent=limit),
                             Balance("bytes"))
    except PlanInfeasibleError as error:
        assert "disk.max.usage.percent" in str(error) or "rack" in str(error)
        return
    assert_within_limit(plan, cluster, limit)


def test_a_nearly_full_new_broker_in_bytes_mode_gets_only_what_fits():
    from planning.placement.balance_modes import Balance, plan_balanced

    cluster = cluster_of((disk("/d0", 830),))  # 20 GB of room under 85 %
    plan = plan_balanced(cluster, Goal(heal=False, rebalance=True, disk_max_usage_percent=85), Balance("bytes"))
    assert sum(incoming(plan, cluster, 3).values()) <= 20 * GB
