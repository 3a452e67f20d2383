"""A plan's choice of dirs (`planning.placement.log_dir_choice.compute_target_dirs`) follows the
log-dir balance's shares: a replica a plan brings to a broker lands where the balance
(`planning.movement.log_dirs.plan_log_dir_balance`) leaves it, so no replica is copied twice
(over the network, then again inside the broker).

Regressions (each failed before the choice weighed capacity and departures): a small dir chosen
over a big one because it held fewer bytes (CAPACITY), and a dir the plan empties judged by the
bytes that leave it (DEPARTURES); in both the balance then moved the new replica on."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as st

from planning.model import Broker, Cluster, LogDir, PartitionState, Topic
from planning.movement.log_dirs import plan_log_dir_balance
from planning.placement.log_dir_choice import compute_target_dirs

GB = 10**9


def dir_of(path: str, total_gb: int, replicas_gb: int) -> LogDir:
    return LogDir(path, total_bytes=total_gb * GB, usable_bytes=(total_gb - replicas_gb) * GB,
                  replica_bytes=replicas_gb * GB)


def on_broker_1(sizes_by_dir: dict[str, list[int]]) -> list[PartitionState]:
    """Partitions of one replica on broker 1 each, `sizes_by_dir` GB in each dir."""
    parts = []
    for path, sizes in sizes_by_dir.items():
        for size in sizes:
            n = len(parts)
            parts.append(PartitionState("t", n, (1,), (1,), 1, size_bytes=size * GB, log_dirs=(path,)))
    return parts


def applied(cluster: Cluster, changed, dirs) -> Cluster:
    """`cluster` once the plan's targets and dirs are in place (as Kafka ends)."""
    final = {p.tp: (targets, dirs[p.tp]) for p, targets in changed}
    parts = tuple(replace(p, replicas=final[p.tp][0], isr=final[p.tp][0], leader=final[p.tp][0][0],
                          log_dirs=final[p.tp][1]) if p.tp in final else p
                  for p in cluster.topics[0].partitions)
    return Cluster(cluster.brokers, (Topic("t", parts),))


def test_capacity_a_new_replica_goes_to_the_big_dir_that_holds_more_bytes_but_less_of_its_share():
    # /a: 1 TB holding 200 GB (20 %); /b: 4 TB holding 800 GB (20 %): balanced by capacity.
    a, b = dir_of("/a", 1000, 200), dir_of("/b", 4000, 800)
    parts = on_broker_1({"/a": [200], "/b": [800]})
    arriving = PartitionState("t", 2, (2,), (2,), 2, size_bytes=100 * GB, log_dirs=("/x",))
    cluster = Cluster((Broker(1, log_dirs=(a, b)), Broker(2, log_dirs=(LogDir("/x"),))),
                      (Topic("t", (*parts, arriving)),))
    changed = [(arriving, (1,))]
    dirs, overflow = compute_target_dirs(cluster, 85, changed)
    assert dirs[arriving.tp] == ("/b",) and not overflow  # before: "/a" (200 GB < 800 GB)
    after = plan_log_dir_balance(applied(cluster, changed, dirs), 1, 0.1)
    assert not after.moves and after.imbalance_after <= 0.1, after


def test_departures_a_dir_the_plan_empties_takes_what_arrives():
    # Equal dirs: /a holds 100 + 100 + 300 GB, /b 490 GB. The plan moves both 100 GB replicas
    # off broker 1 and brings a 200 GB one: /a will hold 300, so the 200 goes there.
    a, b = dir_of("/a", 2000, 500), dir_of("/b", 2000, 490)
    parts = on_broker_1({"/a": [100, 100, 300], "/b": [490]})
    arriving = PartitionState("t", 4, (2,), (2,), 2, size_bytes=200 * GB, log_dirs=("/x",))
    cluster = Cluster((Broker(1, log_dirs=(a, b)), Broker(2, log_dirs=(LogDir("/x"),))),
                      (Topic("t", (*parts, arriving)),))
    changed = [(parts[0], (2,)), (parts[1], (2,)), (arriving, (1,))]
    dirs, _ = compute_target_dirs(cluster, 85, changed)
    assert dirs[arriving.tp] == ("/a",)  # before: "/b" (490 GB < the 500 GB /a held)
    after = plan_log_dir_balance(applied(cluster, changed, dirs), 1, 0.1)
    assert not after.moves, after


@st.composite
def one_arrival(draw):
    """A broker of 2-4 dirs (capacities 1-8 units, some replicas in each, maybe a volume size
    unknown) and one replica arriving, maybe with some of its replicas leaving."""
    n = draw(st.integers(2, 4))
    known = draw(st.booleans())
    dirs, sizes_by_dir = [], {}
    for i in range(n):
        sizes = draw(st.lists(st.integers(1, 50), max_size=4))
        total = draw(st.integers(1, 8)) * 1000
        dirs.append(LogDir(f"/d{i}", total_bytes=total * GB if known else None,
                           usable_bytes=(total - sum(sizes)) * GB if known else None,
                           replica_bytes=sum(sizes) * GB))
        sizes_by_dir[f"/d{i}"] = sizes
    parts = on_broker_1(sizes_by_dir)
    leaving = draw(st.lists(st.sampled_from(range(len(parts))), unique=True)) if parts else []
    size = draw(st.integers(1, 60))
    return dirs, parts, leaving, size


@settings(max_examples=300, deadline=None)
@given(one_arrival())
def test_an_arriving_replica_goes_where_its_brokers_fullest_dir_by_share_is_least_full(case):
    """Brute force over the dirs: the choice leaves the broker's highest load-to-weight ratio
    (the log-dir balance's measure, departures counted) as low as any dir would, the lowest path
    on ties; with equal weights and nothing leaving, the least loaded dir as before."""
    dirs, parts, leaving, size = case
    arriving = PartitionState("t", len(parts), (2,), (2,), 2, size_bytes=size * GB, log_dirs=("/x",))
    cluster = Cluster((Broker(1, log_dirs=tuple(dirs)), Broker(2, log_dirs=(LogDir("/x"),))),
                      (Topic("t", (*parts, arriving)),))
    changed = [(parts[i], (2,)) for i in leaving] + [(arriving, (1,))]
    chosen = compute_target_dirs(cluster, None, changed)[0][arriving.tp][0]

    known = all(d.total_bytes for d in dirs)
    weight = {d.path: d.total_bytes if known else 1 for d in dirs}
    load = {d.path: d.replica_bytes for d in dirs}
    for i in leaving:
        load[parts[i].log_dirs[0]] -= parts[i].size_bytes

    def worst_ratio(path):
        return max((load[d] + (size * GB if d == path else 0)) / weight[d] for d in load)

    best = min(worst_ratio(d) for d in load)
    assert worst_ratio(chosen) == best, (chosen, load, weight)
    if not known and not leaving:
        assert chosen == min(load, key=lambda d: (load[d], d))


def test_the_largest_arrival_is_placed_first():
    # Equal dirs, /a at 50 GB, /b empty; 10 GB and 100 GB arrive (in that order). Placed in that
    # order the 10 would take /b and the 100 follow it there (/a 50, /b 110); largest first, the
    # 100 takes /b and the 10 /a (/a 60, /b 100).
    a, b = dir_of("/a", 1000, 50), dir_of("/b", 1000, 0)
    parts = on_broker_1({"/a": [50]})
    small = PartitionState("t", 1, (2,), (2,), 2, size_bytes=10 * GB, log_dirs=("/x",))
    big = PartitionState("t", 2, (2,), (2,), 2, size_bytes=100 * GB, log_dirs=("/x",))
    cluster = Cluster((Broker(1, log_dirs=(a, b)), Broker(2, log_dirs=(LogDir("/x"),))),
                      (Topic("t", (*parts, small, big)),))
    dirs, _ = compute_target_dirs(cluster, None, [(small, (1,)), (big, (1,))])
    assert dirs == {small.tp: ("/a",), big.tp: ("/b",)}
    assert list(dirs) == [small.tp, big.tp]  # in the order given


def test_replicas_of_no_size_are_spread_by_count_as_the_balance_counts_them():
    a = LogDir("/a", replica_bytes=0, replica_count=0)
    b = LogDir("/b", replica_bytes=0, replica_count=0)
    arriving = [PartitionState("t", n, (2,), (2,), 2, size_bytes=0, log_dirs=("/x",)) for n in range(4)]
    cluster = Cluster((Broker(1, log_dirs=(a, b)), Broker(2, log_dirs=(LogDir("/x"),))),
                      (Topic("t", tuple(arriving)),))
    changed = [(p, (1,)) for p in arriving]
    dirs, _ = compute_target_dirs(cluster, None, changed)
    assert sorted(d for (d,) in dirs.values()) == ["/a", "/a", "/b", "/b"]  # before: all four in /a
    assert not plan_log_dir_balance(applied(cluster, changed, dirs), 1, 0.1).moves
