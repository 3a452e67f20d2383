"""Disk-pressure relief: the fewest bytes off a dir whose volume is too full, to another dir of its
broker first, else to another broker (`planning.placement.disk_relief`)."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.placement.disk_relief import compute_pressed_dirs, plan_disk_relief
from planning.placement.racks import compute_rack_tree, satisfies_rack_spread

GB = 10**9


def cluster_of(brokers, placed):
    """`placed`: (partition, replicas, size, dirs) rows of topic t."""
    parts = tuple(PartitionState("t", n, replicas, replicas, replicas[0], size, dirs) for n, replicas, size, dirs in placed)
    return Cluster(tuple(brokers), (Topic("t", parts),))


def test_the_smallest_replica_that_covers_the_need_goes_to_another_volume_of_the_broker():
    # /a: 900 of 1,000 GB used (over 80 %); shed down to 75 %: 150 GB. /b: another volume, 200 used.
    broker = Broker(1, rack="/r1", log_dirs=(LogDir("/a", True, 1000 * GB, 100 * GB),
                                             LogDir("/b", True, 1000 * GB, 800 * GB)))
    rows = [(n, (1,), size * GB, ("/a",)) for n, size in enumerate([100, 200, 300, 250])]
    relief = plan_disk_relief(cluster_of([broker], rows), 1, "/a", 80, 75)
    assert relief.need_bytes == 150 * GB
    assert [(m.tp.partition, m.target_dir, m.size_bytes) for m in relief.within] == [(1, "/b", 200 * GB)]
    assert not relief.away and relief.short_bytes == 0
    assert relief.used_fraction_before == 0.9 and relief.used_fraction_after == 0.7


def test_a_dir_on_the_same_volume_relieves_nothing_so_the_replica_leaves_the_broker():
    volume = dict(online=True, total_bytes=1000 * GB, usable_bytes=100 * GB)
    pressed = Broker(1, rack="/r1", log_dirs=(LogDir("/a", **volume), LogDir("/b", **volume)))
    roomy = Broker(2, rack="/r1", log_dirs=(LogDir("/x", True, 1000 * GB, 900 * GB),))
    full = Broker(3, rack="/r1", log_dirs=(LogDir("/x", True, 1000 * GB, 240 * GB),))
    rows = [(0, (1,), 160 * GB, ("/a",)), (1, (1,), 400 * GB, ("/a",))]
    relief = plan_disk_relief(cluster_of([pressed, roomy, full], rows), 1, "/a", 80, 75)
    # 160 GB covers the 150 alone; broker 3 would pass 75 % with it, broker 2 would not.
    assert not relief.within and {tp.partition: final for tp, final in relief.away.items()} == {0: (2,)}
    assert relief.away_bytes == 160 * GB and relief.short_bytes == 0


def test_largest_first_then_the_last_one_swapped_for_the_smallest_that_still_covers():
    broker = Broker(1, log_dirs=(LogDir("/a", True, 1000 * GB, 100 * GB), LogDir("/b", True, 10_000 * GB, 10_000 * GB)))
    # /a: 900 GB used, 150 to shed (other files on the volume hold the rest).
    rows = [(n, (1,), size * GB, ("/a",)) for n, size in enumerate([30, 60, 70, 90, 100])]
    relief = plan_disk_relief(cluster_of([broker], rows), 1, "/a", 80, 75)
    # No replica covers 150 alone: 100, then 90 (190); 90 is swapped for the smallest covering
    # the remaining 50: 60. Shed 160 GB, not 190.
    assert sorted(m.size_bytes for m in relief.within) == [60 * GB, 100 * GB]


def test_the_rack_rule_holds_and_nowhere_to_go_is_short():
    pressed = Broker(1, rack="/dc1", log_dirs=(LogDir("/a", True, 100 * GB, 5 * GB),))
    same_dc = Broker(2, rack="/dc1", log_dirs=(LogDir("/a", True, 100 * GB, 100 * GB),))
    other_dc = Broker(3, rack="/dc2", log_dirs=(LogDir("/a", True, 100 * GB, 100 * GB),))
    spare_dc2 = Broker(4, rack="/dc2", log_dirs=(LogDir("/a", True, 100 * GB, 100 * GB),))
    rows = [(0, (1, 3), 30 * GB, ("/a", "/a"))]
    relief = plan_disk_relief(cluster_of([pressed, same_dc, other_dc, spare_dc2], rows), 1, "/a", 80, 75)
    assert {tp.partition: final for tp, final in relief.away.items()} == {0: (2, 3)}  # one per DC: 2, not 4
    alone = plan_disk_relief(cluster_of([pressed, other_dc], rows), 1, "/a", 80, 75)
    assert not alone.away and not alone.within and alone.short_bytes == alone.need_bytes == 20 * GB


def test_a_dir_under_the_high_water_mark_or_without_volume_figures_is_left_alone():
    broker = Broker(1, log_dirs=(LogDir("/a", True, 1000 * GB, 250 * GB), LogDir("/b", True)))
    cluster = cluster_of([broker], [(0, (1,), 700 * GB, ("/a",))])
    assert compute_pressed_dirs(broker, 80) == ()
    assert plan_disk_relief(cluster, 1, "/a", 80, 75) is None
    assert plan_disk_relief(cluster, 1, "/b", 80, 75) is None
    assert plan_disk_relief(cluster, 9, "/a", 80, 75) is None


@st.composite
def pressed_clusters(draw):
    rnd = random.Random(draw(st.integers(0, 10**6)))
    brokers = []
    for b in range(rnd.randint(2, 6)):
        dirs = tuple(LogDir(f"/d{k}", True, 1000, rnd.randint(0, 1000)) for k in range(rnd.randint(1, 3)))
        brokers.append(Broker(b, rack=f"/dc{b % 2}", log_dirs=dirs))
    pressed = brokers[0]
    brokers[0] = Broker(0, rack="/dc0", log_dirs=(LogDir("/d0", True, 1000, rnd.randint(0, 150)),)
                        + pressed.log_dirs[1:])
    rows = []
    for n in range(rnd.randint(1, 12)):
        replicas = tuple(rnd.sample(range(len(brokers)), min(len(brokers), rnd.randint(1, 2))))
        if n % 2 == 0 and 0 not in replicas:
            replicas = (0,) + replicas[1:]
        dirs = tuple("/d0" if b == 0 else brokers[b].log_dirs[0].path for b in replicas)
        rows.append((n, replicas, rnd.randint(1, 300), dirs))
    return cluster_of(brokers, rows)


@settings(max_examples=60, deadline=None)
@given(pressed_clusters())
def test_relief_moves_only_to_valid_places_and_covers_what_it_can(cluster):
    relief = plan_disk_relief(cluster, 0, "/d0", 80, 75)
    assert relief is not None
    assert relief.shed_bytes >= relief.need_bytes or relief.short_bytes == relief.need_bytes - relief.shed_bytes
    broker = cluster.broker(0)
    for move in relief.within:
        target = next(d for d in broker.online_log_dirs if d.path == move.target_dir)
        assert move.origin_dir == "/d0" and move.target_dir != "/d0" and cluster.partition(move.tp).log_dir_of(0) == "/d0"
        assert (target.total_bytes, target.usable_bytes) != (1000, broker.log_dirs[0].usable_bytes)
    tree = compute_rack_tree(b for b in cluster.brokers if b.eligible)
    for tp, final in relief.away.items():
        original = cluster.partition(tp).replicas
        assert 0 in original and 0 not in final and len(set(final)) == len(final) == len(original)
        assert satisfies_rack_spread(tree, final) or not satisfies_rack_spread(tree, original)
    assert plan_disk_relief(cluster, 0, "/d0", 80, 75) == relief


def test_bytes_beyond_the_replicas_are_stranded_and_moving_replicas_are_held():
    broker = Broker(1, log_dirs=(LogDir("/a", True, 1000 * GB, 100 * GB), LogDir("/b", True, 1000 * GB, 1000 * GB)))
    # /a: 900 GB used, 150 to shed; its replicas hold 40 + 60 GB, the rest are other files.
    still = [(0, (1,), 40 * GB, ("/a",)), (1, (1,), 60 * GB, ("/a",))]
    relief = plan_disk_relief(cluster_of([broker], still), 1, "/a", 80, 75)
    assert relief.shed_bytes == 100 * GB and relief.short_bytes == relief.stranded_bytes == 50 * GB
    assert relief.nowhere_bytes == 0 and relief.held_bytes == 0
    # The 60 GB one being reassigned: held, not stranded (it may be leaving).
    moving = plan_disk_relief(cluster_of([broker], still), 1, "/a", 80, 75, skip={TopicPartition("t", 1)})
    assert moving.shed_bytes == 40 * GB and moving.held_bytes == 60 * GB and moving.stranded_bytes == 50 * GB
    assert moving.short_bytes == 110 * GB


def test_a_copy_in_flight_into_the_dir_counts_what_it_still_lacks_and_is_held():
    # Regression (the real-stack scenario with the watcher telling a dir while a copy into it
    # grows, 2026-11-26): a log-dir move into the small volume passed its mark mid-copy; the
    # relief saw only the replicas already there (1.8 MB), planned them against a need of 6.7 MB,
    # and the mark then kept the dir from being judged again once the 20 MB copy had landed.
    t2 = TopicPartition("t", 2)
    pressed = LogDir("/a", True, 1000 * GB, 150 * GB, future_replicas=frozenset({t2}),
                     copying_bytes=((t2, 300 * GB),))  # 850 GB used; 300 of t-2's 400 GB copied
    broker = Broker(1, log_dirs=(pressed, LogDir("/b", True, 2000 * GB, 1600 * GB)))
    rows = [(0, (1,), 10 * GB, ("/a",)), (1, (1,), 20 * GB, ("/a",)), (2, (1,), 400 * GB, ("/b",))]
    relief = plan_disk_relief(cluster_of([broker], rows), 1, "/a", 80, 75)
    # 850 used + the 100 GB still to come - 750 = 200 to shed; the 30 GB of replicas there do not
    # cover it, and the copy is held (400 GB once landed): judged again when it has.
    assert relief.need_bytes == 200 * GB and relief.held_bytes == 400 * GB
    assert relief.shed_bytes == 30 * GB and relief.short_bytes == 170 * GB and relief.stranded_bytes == 0
    # Landed: the 400 GB replica is in /a (950 GB used) and alone covers the 200 to shed.
    landed = LogDir("/a", True, 1000 * GB, 50 * GB)
    after = cluster_of([replace(broker, log_dirs=(landed, LogDir("/b", True, 2000 * GB, 2000 * GB)))],
                       rows[:2] + [(2, (1,), 400 * GB, ("/a",))])
    relief = plan_disk_relief(after, 1, "/a", 80, 75)
    assert [(m.tp, m.target_dir) for m in relief.within] == [(t2, "/b")] and relief.short_bytes == 0


def test_a_replica_already_leaving_the_dir_by_a_log_dir_move_is_held_not_moved_again():
    t1 = TopicPartition("t", 1)
    broker = Broker(1, log_dirs=(LogDir("/a", True, 1000 * GB, 100 * GB),
                                 LogDir("/b", True, 1000 * GB, 1000 * GB, future_replicas=frozenset({t1}),
                                        copying_bytes=((t1, 5 * GB),))))
    rows = [(0, (1,), 40 * GB, ("/a",)), (1, (1,), 200 * GB, ("/a",))]
    relief = plan_disk_relief(cluster_of([broker], rows), 1, "/a", 80, 75)
    assert [m.tp.partition for m in relief.within] == [0] and relief.held_bytes == 200 * GB
    assert relief.short_bytes == 110 * GB
