"""Intra-broker log-dir balance and move progress (planning.movement.log_dirs)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as st

from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.log_dirs import (
    LogDirEnding,
    LogDirMove,
    LogDirTask,
    begin_log_dir_cancel,
    compute_dir_imbalance,
    compute_log_dir_batch,
    compute_log_dir_progress,
    is_log_dir_move_complete,
    plan_log_dir_balance,
)

TP = TopicPartition


def cluster_with(placements, sizes=None, dirs=("/a", "/b", "/c"), offline=(), futures=None, alive=True):
    """Broker 1 holds partition n of topic t in dir placements[n]; broker 2 holds a copy in /a."""
    sizes = sizes or [0] * len(placements)
    partitions = tuple(PartitionState("t", n, (1, 2), (1, 2), 1, size_bytes=sizes[n], log_dirs=(path, "/a"))
                       for n, path in enumerate(placements))
    log_dirs = tuple(LogDir(d, online=d not in offline, future_replicas=frozenset((futures or {}).get(d, ())))
                     for d in dirs)
    brokers = (Broker(1, alive=alive, log_dirs=log_dirs), Broker(2, log_dirs=(LogDir("/a"),)))
    return Cluster(brokers, (Topic("t", partitions),))


def loads_after(cluster, plan):
    where = {TP("t", p.partition): p.log_dir_of(1) for p in cluster.partitions()}
    for move in plan.moves:
        assert where[move.tp] == move.origin_dir
        where[move.tp] = move.target_dir
    return where


# --- measure ----------------------------------------------------------------------------------
def test_imbalance_from_reported_sums_by_bytes_then_by_count():
    broker = Broker(1, log_dirs=(LogDir("/a", replica_bytes=300, replica_count=3),
                                 LogDir("/b", replica_bytes=100, replica_count=1)))
    assert compute_dir_imbalance(broker) == 0.5  # shares 200/200: /a +50 %
    empty = Broker(1, log_dirs=(LogDir("/a", replica_bytes=0, replica_count=4),
                                LogDir("/b", replica_bytes=0, replica_count=0)))
    assert compute_dir_imbalance(empty) == 1.0  # by count: /b is empty
    assert compute_dir_imbalance(Broker(1, log_dirs=(LogDir("/a", replica_count=3),))) is None
    assert compute_dir_imbalance(Broker(1, log_dirs=(LogDir("/a", replica_count=3), LogDir("/b")))) is None


def test_shares_follow_capacity_when_every_dir_reports_it():
    broker = Broker(1, log_dirs=(LogDir("/a", total_bytes=300, replica_bytes=300, replica_count=3),
                                 LogDir("/b", total_bytes=100, replica_bytes=100, replica_count=1)))
    assert compute_dir_imbalance(broker) == 0.0


# --- plan ---------------------------------------------------------------------------------------
def test_a_new_empty_dir_gets_a_third_of_the_replicas_by_count():
    cluster = cluster_with(["/a"] * 5 + ["/b"] * 4, dirs=("/a", "/b", "/c"))
    plan = plan_log_dir_balance(cluster, 1, threshold=0.1)
    where = loads_after(cluster, plan)
    counts = {d: list(where.values()).count(d) for d in ("/a", "/b", "/c")}
    assert counts == {"/a": 3, "/b": 3, "/c": 3}
    assert len(plan.moves) == 3 and all(m.target_dir == "/c" for m in plan.moves)
    assert plan.imbalance_before == 1.0 and plan.imbalance_after == 0.0 and not plan.by_bytes


def test_largest_replica_that_fits_moves_first_and_bytes_are_not_overshot():
    sizes = [500, 300, 200, 100, 50]
    cluster = cluster_with(["/a"] * 5, sizes=sizes, dirs=("/a", "/b"))
    plan = plan_log_dir_balance(cluster, 1, threshold=0.05)
    # total 1150, shares 575: /a must shed 575; the 500 fits, then 50 more (75 left to shed).
    assert [(m.tp.partition, m.size_bytes) for m in plan.moves] == [(0, 500), (4, 50)]
    assert plan.by_bytes and plan.loads_after == {"/a": 600.0, "/b": 550.0}


def test_a_move_that_would_not_help_is_not_made():
    cluster = cluster_with(["/a", "/b"], sizes=[1000, 10], dirs=("/a", "/b"))
    plan = plan_log_dir_balance(cluster, 1, threshold=0.1)
    assert plan.moves == () and plan.imbalance_before > 0.9


def test_never_into_an_offline_dir_nor_a_partition_reassigning_or_skipped():
    cluster = cluster_with(["/a"] * 6, dirs=("/a", "/b", "/c"), offline=("/c",))
    plan = plan_log_dir_balance(cluster, 1, threshold=0.1)
    assert {m.target_dir for m in plan.moves} == {"/b"} and len(plan.moves) == 3
    skipped = plan_log_dir_balance(cluster, 1, threshold=0.1, skip={TP("t", n) for n in range(5)})
    assert [m.tp.partition for m in skipped.moves] == [5]
    moving = cluster.with_partitions([replace(cluster.partition(TP("t", n)), adding=(3,), replicas=(1, 2, 3),
                                              log_dirs=("/a", "/a", None)) for n in range(6)])
    assert plan_log_dir_balance(moving, 1, threshold=0.1).moves == ()


def test_a_balanced_broker_or_one_dir_gets_no_moves():
    assert plan_log_dir_balance(cluster_with(["/a", "/b"], dirs=("/a", "/b")), 1, 0.1).moves == ()
    assert plan_log_dir_balance(cluster_with(["/a"] * 4, dirs=("/a",)), 1, 0.1).moves == ()
    assert plan_log_dir_balance(cluster_with(["/a"], dirs=("/a", "/b")), 9, 0.1).moves == ()


@st.composite
def brokers_with_dirs(draw):
    dirs = tuple(f"/d{i}" for i in range(draw(st.integers(2, 4))))
    count = draw(st.integers(0, 30))
    placements = [draw(st.sampled_from(dirs)) for _ in range(count)]
    sizes = [draw(st.sampled_from([0, 0, 1, 10, 100, 1000, 5000])) for _ in range(count)]
    return placements, sizes, dirs, draw(st.sampled_from([0.05, 0.1, 0.3]))


@settings(max_examples=300, deadline=None)
@given(brokers_with_dirs())
def test_plans_only_improve_move_each_replica_once_and_never_overshoot(case):
    placements, sizes, dirs, threshold = case
    cluster = cluster_with(placements, sizes=sizes, dirs=dirs)
    plan = plan_log_dir_balance(cluster, 1, threshold)
    assert plan.imbalance_after <= plan.imbalance_before
    assert len({m.tp for m in plan.moves}) == len(plan.moves)
    assert all(m.origin_dir != m.target_dir for m in plan.moves)
    if plan.imbalance_before <= threshold:
        assert plan.moves == ()
    # The planned loads are what the moves give.
    where = loads_after(cluster, plan)
    weight = (lambda n: sizes[n]) if plan.by_bytes else (lambda n: 1)
    assert {d: float(sum(weight(n) for n, w in enumerate(where.values()) if w == d)) for d in dirs} \
        == dict(plan.loads_after)
    # Bytes moved never exceed what the most loaded dir had above its share plus one replica.
    total = sum(plan.loads_before.values())
    excess = sum(max(0.0, load - total / len(dirs)) for load in plan.loads_before.values())
    biggest = max((weight(n) for n in range(len(sizes))), default=0)
    assert sum(weight(m.tp.partition) for m in plan.moves) <= excess + biggest * len(dirs)


# --- progress -----------------------------------------------------------------------------------
def task(n, target="/b", origin="/a", started=None, number=0, size=0):
    return LogDirTask(TP("t", n), 1, target, origin, size, "dirs unbalanced", "b1-dirs-1", number, started)


def tasks_of(*items):
    return {t.key: t for t in items}


def test_moves_start_largest_first_under_the_per_broker_limit():
    cluster = cluster_with(["/a"] * 3, sizes=[1, 50, 10], dirs=("/a", "/b"))
    progress = compute_log_dir_progress(tasks_of(task(0), task(1), task(2)), cluster, (), 2, 100.0, 600.0)
    assert [t.tp.partition for t in progress.started] == [1, 2]
    assert all(t.started_at == 100.0 and t.number == 1 for t in progress.started)
    again = compute_log_dir_progress(progress.tasks, cluster, (), 2, 101.0, 600.0)
    assert again.started == () and again.finished == ()


def test_busy_partitions_and_dead_brokers_wait():
    cluster = cluster_with(["/a"] * 2, dirs=("/a", "/b"))
    assert compute_log_dir_progress(tasks_of(task(0)), cluster, {TP("t", 0)}, 2, 1.0, 600.0).started == ()
    dead = cluster_with(["/a"] * 2, dirs=("/a", "/b"), alive=False)
    assert compute_log_dir_progress(tasks_of(task(0)), dead, (), 2, 1.0, 600.0).started == ()
    assert compute_log_dir_progress(tasks_of(task(0)), cluster, (), 2, 1.0, 600.0,
                                    start_moves=False).started == ()


def test_complete_only_in_the_target_dir_without_a_future_replica():
    running = tasks_of(task(0, started=5.0, number=1))
    copying = cluster_with(["/a"], dirs=("/a", "/b"), futures={"/b": [TP("t", 0)]})
    assert compute_log_dir_progress(running, copying, (), 2, 6.0, 600.0).finished == ()
    swapped_but_future_left = cluster_with(["/b"], dirs=("/a", "/b"), futures={"/a": [TP("t", 0)]})
    assert compute_log_dir_progress(running, swapped_but_future_left, (), 2, 6.0, 600.0).finished == ()
    done = cluster_with(["/b"], dirs=("/a", "/b"))
    progress = compute_log_dir_progress(running, done, (), 2, 6.0, 600.0)
    assert [(t.tp.partition, e) for t, e in progress.finished] == [(0, LogDirEnding.COMPLETED)]
    assert progress.tasks == {}
    assert is_log_dir_move_complete(done.partition(TP("t", 0)), LogDirMove("t", 0, 1, "/b"), done.broker(1))


def test_endings_for_a_replica_gone_or_a_target_dir_offline_and_stalls():
    gone = Cluster(cluster_with(["/a"], dirs=("/a", "/b")).brokers, ())
    assert compute_log_dir_progress(tasks_of(task(0)), gone, (), 2, 1.0, 600.0).finished[0][1] \
        is LogDirEnding.OBSOLETE
    offline = cluster_with(["/a"], dirs=("/a", "/b"), offline=("/b",))
    assert compute_log_dir_progress(tasks_of(task(0, started=0.0)), offline, (), 2, 1.0, 600.0).finished[0][1] \
        is LogDirEnding.DIR_OFFLINE
    copying = cluster_with(["/a"], dirs=("/a", "/b"), futures={"/b": [TP("t", 0)]})
    progress = compute_log_dir_progress(tasks_of(task(0, started=0.0, number=1)), copying, (), 2, 600.0, 600.0)
    assert [t.tp for t in progress.stalled] == [TP("t", 0)] and TP("t", 0) in {k[1] for k in progress.tasks}


def test_cancel_moves_back_to_the_origin_or_drops_a_move_not_started():
    cluster = cluster_with(["/a"], dirs=("/a", "/b"), futures={"/b": [TP("t", 0)]})
    assert begin_log_dir_cancel(task(0), cluster, 9.0) is None
    back = begin_log_dir_cancel(task(0, started=1.0, number=1), cluster, 9.0)
    assert (back.target_dir, back.origin_dir, back.cancelling, back.number, back.started_at) == ("/a", "/b", True, 2, 9.0)
    reverted = cluster_with(["/a"], dirs=("/a", "/b"))
    progress = compute_log_dir_progress(tasks_of(back), reverted, (), 2, 10.0, 600.0)
    assert progress.finished[0][1] is LogDirEnding.REVERTED
    assert back.command_id() != task(0, started=1.0, number=1).command_id()


def test_log_dir_batch_skips_replicas_in_flight_and_offline_dirs():
    cluster = cluster_with(["/a"] * 3, sizes=[1, 50, 10], dirs=("/a", "/b", "/c"), offline=("/c",))
    moves = [LogDirMove("t", 0, 1, "/b"), LogDirMove("t", 1, 1, "/c"), LogDirMove("t", 2, 1, "/b")]
    chosen = compute_log_dir_batch(moves, [LogDirMove("t", 2, 1, "/b")], cluster, max_per_broker=3)
    assert chosen == (LogDirMove("t", 0, 1, "/b"),)


def test_a_replica_a_step_adds_goes_to_the_least_used_online_dir_of_its_broker():
    from planning.placement.goal import Goal
    from planning.placement.placer import plan_placement

    dirs = (LogDir("/a", replica_bytes=5 * 10**9, replica_count=3), LogDir("/b", replica_bytes=0, replica_count=0),
            LogDir("/c", online=False))
    brokers = tuple(Broker(b, rack=f"r{b}", log_dirs=(LogDir("/a"),)) for b in range(3)) + (Broker(3, rack="r3", log_dirs=dirs),)
    partitions = tuple(PartitionState("t", n, (n % 3, (n + 1) % 3), (n % 3, (n + 1) % 3), n % 3, size_bytes=10**9,
                                      log_dirs=("/a", "/a")) for n in range(8))
    plan = plan_placement(Cluster(brokers, (Topic("t", partitions),)), Goal(heal=False, rebalance=True))
    new_dirs = [dict(zip(plan.targets[tp], plan.target_log_dirs[tp]))[3] for tp in sorted(plan.targets)
                if 3 in plan.targets[tp]]
    assert new_dirs and set(new_dirs) == {"/b"}  # 4 GB moved in: /b still below /a's 5 GB


def test_a_dir_whose_volume_would_pass_the_disk_limit_takes_nothing_too_big():
    dirs = (LogDir("/a"), LogDir("/b", total_bytes=1000, usable_bytes=200))  # /b's volume 80 % used
    partitions = tuple(PartitionState("t", n, (1,), (1,), 1, size_bytes=size, log_dirs=("/a",))
                       for n, size in enumerate([60, 40, 30]))
    cluster = Cluster((Broker(1, log_dirs=dirs),), (Topic("t", partitions),))
    unlimited = plan_log_dir_balance(cluster, 1, threshold=0.1)
    assert [m.size_bytes for m in unlimited.moves] == [60]
    limited = plan_log_dir_balance(cluster, 1, threshold=0.1, max_usage_percent=85)  # 50 B of room
    assert [m.size_bytes for m in limited.moves] == [40]
