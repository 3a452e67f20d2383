"""Cordoned log dirs (KIP-1066, Kafka 4.3+: `LogDir.cordoned`, whoever cordoned them) take no new
replica from any plan: a plan's choice of dirs passes them by, a broker whose every online dir
is cordoned gets no new replica at all, and the log-dir balance and the disk relief never move a
replica into one. What they hold stays (a cordon is not a drain)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from placement_checks import hard_constraint_violations, random_spread_cluster
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.log_dirs import plan_log_dir_balance
from planning.placement.balance_modes import Balance, plan_balanced
from planning.placement.disk_relief import plan_disk_relief
from planning.placement.goal import Goal
from planning.placement.log_dir_choice import compute_target_dirs
from planning.validation import validate_targets
from schemas.errors import InvalidReplicaAssignmentError, PlanInfeasibleError

GB = 10**9


def cordon(cluster: Cluster, broker_id: int, paths=None) -> Cluster:
    """`cluster` with the dirs `paths` of broker `broker_id` cordoned (None: every dir, `*`)."""
    return cluster.with_brokers(
        replace(b, log_dirs=tuple(replace(d, cordoned=True) if paths is None or d.path in paths else d
                                  for d in b.log_dirs)) if b.id == broker_id else b
        for b in cluster.brokers)


# --- a plan's choice of dirs -----------------------------------------------------------------


def test_a_new_replica_passes_the_cordoned_empty_dir_by():
    # /a: empty and cordoned, /b: half full. Without the cordon /a, the least full, takes it.
    dirs = (LogDir("/a", True, 1000 * GB, 1000 * GB, 0, 0), LogDir("/b", True, 1000 * GB, 500 * GB, 500 * GB, 1))
    held = PartitionState("t", 0, (1,), (1,), 1, size_bytes=500 * GB, log_dirs=("/b",))
    arriving = PartitionState("t", 1, (2,), (2,), 2, size_bytes=10 * GB, log_dirs=("/x",))
    cluster = Cluster((Broker(1, log_dirs=dirs), Broker(2, log_dirs=(LogDir("/x"),))),
                      (Topic("t", (held, arriving)),))
    changed = [(arriving, (1,)), (held, (1,))]
    assert compute_target_dirs(cluster, 85, changed)[0][arriving.tp] == ("/a",)  # the test means something
    chosen, overflow = compute_target_dirs(cordon(cluster, 1, {"/a"}), 85, changed)
    assert chosen[arriving.tp] == ("/b",) and not overflow
    assert chosen[held.tp] == ("/b",)  # a kept replica keeps its dir


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.integers(0, 7), st.booleans()), min_size=2, max_size=4),
       st.lists(st.integers(0, 3), min_size=1, max_size=6))
def test_no_arriving_replica_lands_in_a_cordoned_dir(dirs_drawn, sizes):
    dirs = tuple(LogDir(f"/d{i}", True, total * GB, max(0, total - used) * GB, min(used, total) * GB, 1, cordoned=c)
                 for i, (total, used, c) in enumerate(dirs_drawn))
    arriving = [PartitionState("t", n, (2,), (2,), 2, size_bytes=size * GB, log_dirs=("/x",))
                for n, size in enumerate(sizes)]
    cluster = Cluster((Broker(1, log_dirs=dirs), Broker(2, log_dirs=(LogDir("/x"),))), (Topic("t", tuple(arriving)),))
    chosen, overflow = compute_target_dirs(cluster, None, [(p, (1,)) for p in arriving])
    cordoned = {d.path for d in dirs if d.cordoned}
    assert not any(chosen[p.tp][0] in cordoned for p in arriving)
    if len(cordoned) == len(dirs):  # none may take it: no dir, and it is told
        assert all(chosen[p.tp] == (None,) for p in arriving) and len(overflow) == len(arriving)


# --- a broker whose every dir is cordoned ----------------------------------------------------


def emptied_broker_cluster() -> Cluster:
    """Broker 1 holds nothing; 12 partitions RF 2 on 0, 2, 3; every broker with dirs /a, /b."""
    others = (0, 2, 3)
    parts = tuple(PartitionState("t", n, (others[n % 3], others[(n + 1) % 3]), size_bytes=10)
                  for n in range(12))
    dirs = (LogDir("/a"), LogDir("/b"))
    return Cluster(tuple(Broker(b, log_dirs=dirs) for b in range(4)), (Topic("t", parts),))


@pytest.mark.parametrize("mode", ["strict", "bytes"])
def test_a_broker_cordoned_whole_gets_nothing_new_and_one_cordoned_in_part_still_does(mode):
    cluster, goal = emptied_broker_cluster(), Goal(heal=False, rebalance=True)
    assert any(1 in t for t in plan_balanced(cluster, goal, Balance(mode)).targets.values())  # it would
    whole = plan_balanced(cordon(cluster, 1), goal, Balance(mode))
    assert not any(1 in target for target in whole.targets.values())
    part = plan_balanced(cordon(cluster, 1, {"/a"}), goal, Balance(mode))
    onto_1 = [(tp, target) for tp, target in part.targets.items() if 1 in target]
    assert onto_1 and all(part.target_log_dirs[tp][target.index(1)] == "/b" for tp, target in onto_1)


def test_a_cordoned_broker_keeps_what_it_holds_and_an_offline_dir_does_not_count():
    cluster = cordon(emptied_broker_cluster(), 0)
    assert cluster.cordoned_broker_ids == {0}
    held = next(p for p in cluster.partitions() if 0 in p.replicas)
    assert 0 not in cluster.brokers_that_cannot_host(held.tp)  # a cordon is not a drain
    assert all(0 in cluster.brokers_that_cannot_host(p.tp) for p in cluster.partitions() if 0 not in p.replicas)
    plan = plan_balanced(cluster, Goal(heal=True, rebalance=False))
    assert all(plan.targets.get(p.tp, p.replicas) == p.replicas for p in cluster.partitions())
    # One dir cordoned, the other offline: every online dir is cordoned.
    half = cordon(emptied_broker_cluster(), 1, {"/a"})
    half = half.with_brokers(replace(b, log_dirs=(b.log_dirs[0], replace(b.log_dirs[1], online=False)))
                             if b.id == 1 else b for b in half.brokers)
    assert half.cordoned_broker_ids == {1}
    # A draining broker the product cordons is not eligible anyway: not counted here.
    draining = cordon(emptied_broker_cluster(), 2)
    draining = draining.with_brokers(replace(b, draining=b.id == 2) for b in draining.brokers)
    assert draining.cordoned_broker_ids == frozenset() and not draining.any_cannot_host


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), brokers=st.integers(3, 9), rf=st.integers(1, 3),
       kind=st.sampled_from(["add", "drain", "kill", "rebalance"]), mode=st.sampled_from(["strict", "bytes"]))
def test_no_plan_puts_a_new_replica_on_a_broker_cordoned_whole(seed, brokers, rf, kind, mode):
    rnd = random.Random(seed)
    racks = rnd.choice([None, 2, 3])
    pool = [Broker(i, rack=None if racks is None else f"/dc{i % 2}/r{i % racks}", log_dirs=(LogDir("/a"),))
            for i in range(brokers)]
    cluster = random_spread_cluster(rnd, pool, 3, 20, min(rf, brokers - 1))
    victim = rnd.randrange(brokers)
    cluster = cordon(cluster, victim)
    if kind == "add":
        goal = Goal(add_brokers=(Broker(brokers, rack=None if racks is None else "/dc0/r0"),))
    elif kind == "drain":
        goal = Goal(drain_brokers=frozenset({(victim + 1) % brokers}))
    elif kind == "kill":
        dead = (victim + 1) % brokers
        cluster = cluster.with_brokers(replace(b, alive=False) if b.id == dead else b for b in cluster.brokers)
        goal = Goal(heal=True, rebalance=False)
    else:
        goal = Goal(heal=False, rebalance=True)
    try:
        plan = plan_balanced(cluster, goal, Balance(mode))
    except PlanInfeasibleError as refused:  # too few brokers left once the victim takes nothing new
        assert f"{victim}" in str(refused)
        return
    for tp, target in plan.targets.items():
        assert victim in cluster.partition(tp).replicas or victim not in target, f"{tp} onto {victim}: {target}"
    assert hard_constraint_violations(cluster, goal, plan) == []


def test_an_explicit_target_onto_a_broker_cordoned_whole_is_refused_with_the_reason():
    cluster = cordon(emptied_broker_cluster(), 1)
    tp = TopicPartition("t", 0)
    with pytest.raises(InvalidReplicaAssignmentError) as caught:
        validate_targets(cluster, {tp: (0, 1)})
    assert "broker 1 takes no new replica" in str(caught.value) and "cordoned" in str(caught.value)
    validate_targets(cordon(emptied_broker_cluster(), 1, {"/a"}), {tp: (0, 1)})  # /b takes it


# --- the log-dir balance ---------------------------------------------------------------------


def one_broker(dirs: tuple[LogDir, ...], placed: dict[str, list[int]]) -> Cluster:
    parts = [PartitionState("t", n, (1,), (1,), 1, size_bytes=size * GB, log_dirs=(path,))
             for n, (path, size) in enumerate((path, size) for path, sizes in placed.items() for size in sizes)]
    return Cluster((Broker(1, log_dirs=dirs),), (Topic("t", tuple(parts)),))


def test_the_log_dir_balance_moves_out_of_a_cordoned_dir_but_never_into_one():
    dirs = (LogDir("/a"), LogDir("/b"), LogDir("/c"))
    cluster = one_broker(dirs, {"/a": [40, 30, 20, 10], "/c": [5]})  # /b empty, /c nearly
    assert any(m.target_dir == "/b" for m in plan_log_dir_balance(cluster, 1, 0.1).moves)  # it would
    plan = plan_log_dir_balance(cordon(cluster, 1, {"/b"}), 1, 0.1)
    assert plan.moves and all(m.target_dir == "/c" for m in plan.moves)
    out = plan_log_dir_balance(cordon(cluster, 1, {"/a"}), 1, 0.1)
    assert out.moves and all(m.origin_dir == "/a" and m.target_dir != "/a" for m in out.moves)
    # Every dir but the fullest cordoned: nothing may move.
    assert not plan_log_dir_balance(cordon(cluster, 1, {"/b", "/c"}), 1, 0.1).moves


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(0, 9), max_size=5), st.booleans()), min_size=2, max_size=4))
def test_no_log_dir_balance_moves_a_replica_into_a_cordoned_dir(drawn):
    dirs = tuple(LogDir(f"/d{i}", cordoned=c) for i, (_, c) in enumerate(drawn))
    cluster = one_broker(dirs, {f"/d{i}": sizes for i, (sizes, _) in enumerate(drawn)})
    cordoned = {d.path for d in dirs if d.cordoned}
    assert not any(m.target_dir in cordoned for m in plan_log_dir_balance(cluster, 1, 0.1).moves)


# --- the disk relief -------------------------------------------------------------------------


def pressed_cluster(other_dirs_cordoned=(), peer_dirs_cordoned=()) -> Cluster:
    """Broker 1's /a is 90 % full (shed 150 GB to 75 %), its /b another volume with room; broker
    2 (same rack) has /x and /y with room."""
    one = Broker(1, rack="/r1", log_dirs=(LogDir("/a", True, 1000 * GB, 100 * GB),
                                          LogDir("/b", True, 1000 * GB, 800 * GB, cordoned="/b" in other_dirs_cordoned)))
    two = Broker(2, rack="/r1", log_dirs=tuple(LogDir(p, True, 1000 * GB, 900 * GB, cordoned=p in peer_dirs_cordoned)
                                               for p in ("/x", "/y")))
    parts = tuple(PartitionState("t", n, (1,), (1,), 1, size * GB, ("/a",)) for n, size in enumerate([100, 200, 300]))
    return Cluster((one, two), (Topic("t", parts),))


def test_the_disk_relief_never_moves_a_replica_into_a_cordoned_dir():
    assert [m.target_dir for m in plan_disk_relief(pressed_cluster(), 1, "/a", 80, 75).within] == ["/b"]
    away = plan_disk_relief(pressed_cluster({"/b"}), 1, "/a", 80, 75)  # its own other dir cordoned
    assert not away.within and away.away and all(d == ("/x",) for d in away.away_dirs.values())
    other = plan_disk_relief(pressed_cluster({"/b"}, {"/x"}), 1, "/a", 80, 75)
    assert other.away and all(d == ("/y",) for d in other.away_dirs.values())
    nowhere = plan_disk_relief(pressed_cluster({"/b"}, {"/x", "/y"}), 1, "/a", 80, 75)
    assert not nowhere.within and not nowhere.away and nowhere.nowhere_bytes == nowhere.need_bytes
    # The pressed dir itself cordoned (the product cordons the dirs it empties): relieved as before.
    assert plan_disk_relief(cordon(pressed_cluster(), 1, {"/a"}), 1, "/a", 80, 75).within
