"""The poll merge given the previous poll (`compute_observation(..., previous)`) equals the
merge from nothing, sizes and order included, and reuses the partitions that did not change."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as st

from runtime.clients.cluster_merge import (
    compute_changed_log_dirs,
    compute_changed_partitions,
    compute_log_dirs_hint,
    compute_observation,
    compute_partition_sizes,
)
from runtime.clients.cluster_observation import (
    BrokerObservation,
    ClusterObservation,
    LogDirObservation,
    PartitionList,
    PartitionObservation,
    ReplicaInDir,
    ReplicaList,
)

BROKER_IDS = (1, 2, 3, 4)


@st.composite
def answers(draw, previous: tuple | None = None) -> tuple:
    """One poll's answers (brokers, partitions, topic ids, reassignments, dirs, min ISR). Given
    the previous poll's answers, mostly the same: a few partitions change, topics come and go,
    and a broker's dirs are either carried over (the very objects, as `ClusterAdmin.observe`
    does when the dirs are not due) or read again (new objects, often equal)."""
    brokers = [BrokerObservation(b, None, "h", 9000 + b, False) for b in BROKER_IDS]
    if previous is None or draw(st.booleans()):
        names = draw(st.sets(st.sampled_from(["a", "b", "c"]), min_size=1))
        counts = {name: draw(st.integers(1, 4)) for name in sorted(names)}
        old_parts = {}
    else:
        counts = {}
        for p in previous[1]:
            counts[p.topic] = max(counts.get(p.topic, 0), p.partition + 1)
        old_parts = {(p.topic, p.partition): p for p in previous[1]}
    partitions = []
    for name, count in counts.items():
        for index in range(count):
            old = old_parts.get((name, index))
            if old is not None and draw(st.integers(0, 3)) > 0:
                partitions.append(old)  # unchanged, the common case
                continue
            replicas = tuple(draw(st.permutations(BROKER_IDS))[:draw(st.integers(1, 3))])
            isr = tuple(b for b in replicas if draw(st.booleans())) or replicas[:1]
            partitions.append(PartitionObservation(name, index, replicas, isr, draw(st.sampled_from([None, *isr])),
                                                   draw(st.integers(0, 2))))
    reassignments = {(p.topic, p.partition): draw(st.sampled_from([((p.replicas[-1],), ()),
                                                                  ((p.replicas[-1],), (p.replicas[0],))]))
                     for p in partitions if len(p.replicas) > 1 and draw(st.integers(0, 4)) == 0}
    old_dirs = {} if previous is None else {d.broker_id: [] for d in previous[4]}
    for d in previous[4] if previous is not None else ():
        old_dirs[d.broker_id].append(d)
    log_dirs = []
    for b in BROKER_IDS:
        way = draw(st.sampled_from(["carried", "sizes", "drawn"]) if b in old_dirs else st.just("drawn"))
        # As the adapter decodes them (a ReplicaList) or as a plain tuple.
        listing = draw(st.sampled_from([tuple, ReplicaList.of]))
        if way == "carried":
            log_dirs += old_dirs[b]  # carried over: the same objects
        elif way == "sizes":  # read again: the same replicas, new objects with new sizes (the usual read)
            log_dirs += [replace(d, replicas=listing(replace(r, size_bytes=draw(st.integers(0, 3)), offset_lag=1)
                                                     for r in d.replicas), online=draw(st.integers(0, 4)) > 0)
                         for d in old_dirs[b]]
        else:
            held = [p for p in partitions if b in p.replicas]
            for number in range(2):
                mine = [p for p in held if draw(st.booleans())]
                held = [p for p in held if p not in mine]
                log_dirs.append(LogDirObservation(b, f"/d{number}", True, None, listing(sorted(
                    ReplicaInDir(p.topic, p.partition, draw(st.integers(0, 5)) == 0, draw(st.integers(0, 3)))
                    for p in mine))))
    topic_ids = {name: f"id-{name}" for name in counts}
    if draw(st.booleans()):
        topic_ids["empty"] = "id-empty"  # a topic whose partitions are not described yet
    min_isr = {name: draw(st.sampled_from([None, 2])) for name in topic_ids}
    # As `ClusterAdmin.observe` hands them (a PartitionList, compared in C), sometimes in another
    # order than the last poll's; or as a plain list (every partition looked at).
    if draw(st.booleans()):
        partitions = draw(st.permutations(partitions)) if draw(st.integers(0, 3)) == 0 else partitions
        partitions = PartitionList.of(partitions)
    return brokers, partitions, topic_ids, reassignments, log_dirs, min_isr


def polls():
    return answers().flatmap(lambda first: st.lists(st.just(None), min_size=1, max_size=4).flatmap(
        lambda more: _chain([first], len(more))))


def _chain(done: list, left: int):
    if left == 0:
        return st.just(done)
    return answers(done[-1]).flatmap(lambda next_one: _chain(done + [next_one], left - 1))


def shape(observation: ClusterObservation) -> tuple:
    """Everything the comparison sees, and the order of the partitions (the volatile sizes are
    those of the last change, see the next test)."""
    return (observation, list(observation.partitions), list(observation.topics.values()))


def as_tuples(poll: tuple) -> tuple:
    """The poll with every dir's replicas a plain tuple of `ReplicaInDir` (no `ReplicaList`)."""
    dirs = [replace(d, replicas=tuple(d.replicas)) for d in poll[4]]
    return (*poll[:4], dirs, poll[5])


def sizes_of(observation: ClusterObservation) -> tuple:
    """The volatile numbers the comparison leaves out: partition sizes, every replica's size and lag."""
    return ({key: p.size_bytes for key, p in observation.partitions.items()},
            {key: [(r.size_bytes, r.offset_lag) for r in d.replicas] for key, d in observation.log_dirs.items()})


@settings(max_examples=300, deadline=None)
@given(polls())
def test_the_merge_given_the_previous_poll_equals_the_merge_from_nothing(chain):
    previous = None
    for poll in chain:
        merged = compute_observation(*poll, previous)
        assert shape(merged) == shape(compute_observation(*poll))
        # Whatever the dirs' replicas come in, a ReplicaList or a tuple, the merge is the same.
        plain = compute_observation(*as_tuples(poll))
        assert shape(merged) == shape(plain) and sizes_of(compute_observation(*poll)) == sizes_of(plain)
        paths = {key: {b: path for b, (path, _size) in held.items()} for key, held in merged.merge_index().hosted.items()}
        assert paths == {key: {b: path for b, (path, _size) in held.items()}
                         for key, held in compute_observation(*poll).merge_index().hosted.items()}
        fresh = plain
        assert compute_partition_sizes(merged, merged.partitions) == {
            key: p.size_bytes for key, p in fresh.partitions.items()}
        hint = compute_log_dirs_hint(merged, poll[0])
        assert hint == compute_log_dirs_hint(replace(merged, partitions=dict(merged.partitions)), poll[0])
        # A partition that changed is sized as this poll's dirs tell it, whatever the index kept
        # from earlier polls (A PARTITION THAT CHANGED IS SIZED AS ITS DIRS ARE NOW); one that did
        # not is the previous poll's object, with its size.
        changed = compute_changed_partitions(previous, merged) if previous is not None else None
        now = compute_partition_sizes(merged, merged.partitions)
        assert {key: p.size_bytes for key, p in merged.partitions.items()} == {
            key: now[key] if changed is None or key in changed else previous.partitions[key].size_bytes
            for key in merged.partitions}
        if previous is not None:  # the dirs the diff tells: those the merge found changed, as compared one by one,
            # and those in which a copy in flight changed size (COPIES IN FLIGHT)
            assert compute_changed_log_dirs(previous, merged) == compute_changed_log_dirs(
                previous, compute_observation(*poll)) == [key for key, d in merged.log_dirs.items()
                                                          if previous.log_dirs.get(key) != d
                                                          or copy_changed(previous.log_dirs.get(key), d, merged)]
        previous = merged


def copy_changed(old, new, current) -> bool:
    """A replica being copied into `new` (future, or of a partition `current` shows adding its
    broker) with another size than in `old`, the same dir listing the same replicas: naively."""
    if old is None or old.replica_keys != new.replica_keys:
        return False
    adding = {key for key, p in current.partitions.items() if new.broker_id in p.adding}
    return any(was.size_bytes != now.size_bytes and (now.is_future or (now.topic, now.partition) in adding)
               for was, now in zip(old.replica_list, new.replica_list))


def test_a_copy_in_flight_that_grew_tells_its_dir_again_and_no_other_size_does():
    """The movement's progress counts a copy in flight as it grows (`planning.movement.eta`, IN
    FLIGHT): the diff tells a dir again when the size of a replica being added to its broker, or
    of a future replica, changed, and never for another replica's size."""
    brokers = [BrokerObservation(b, None, "h", 9000 + b, False) for b in (1, 2, 3)]
    parts = [PartitionObservation("t", 0, (1, 2, 3), (1, 2), 1, 0), PartitionObservation("t", 1, (1, 2), (1, 2), 1, 0)]
    moving = {("t", 0): ((3,), ())}

    def poll(copied: int, other: int, previous=None):
        dirs = [LogDirObservation(1, "/d", True, None, (ReplicaInDir("t", 0, False, 100), ReplicaInDir("t", 1, False, other))),
                LogDirObservation(2, "/d", True, None, (ReplicaInDir("t", 0, False, 100), ReplicaInDir("t", 1, False, 9))),
                LogDirObservation(3, "/d", True, None, (ReplicaInDir("t", 0, False, copied),))]
        return compute_observation(brokers, parts, {"t": None}, moving, dirs, {"t": None}, previous)

    first = poll(10, 5)
    assert compute_changed_log_dirs(first, poll(40, 5, first)) == [(3, "/d")]  # the copy grew
    assert compute_changed_log_dirs(first, poll(10, 7, first)) == []  # another replica's size: no event
    assert compute_changed_log_dirs(first, poll(10, 5, first)) == []


class _ReadByPosition(tuple):
    """A dir's column that may be bisected, sliced and indexed but not read replica by replica."""

    def __iter__(self):
        raise AssertionError("a dir's column read replica by replica")


def test_a_copy_in_flight_is_found_in_a_big_dir_by_its_key_without_reading_every_replica():
    """COPIES IN FLIGHT at scale: the diff looks up the replicas being copied into a dir (by
    bisecting its sorted key columns; future ones by their flags), and reads no dir replica by
    replica; what it tells is what the naive reading tells: a copy at the first, a middle or the
    last position, a future replica, and never another replica's size (another topic's replica
    with the same partition number, the moving partition's replica on a broker not receiving)."""
    brokers = [BrokerObservation(b, None, "h", 9000 + b, False) for b in BROKER_IDS]
    spread = [PartitionObservation(t, n, (1, 2), (1, 2), 1, 0) for t in ("a", "b", "c") for n in range(2000)]
    own = [PartitionObservation("e", n, (3,), (3,), 3, 0) for n in range(1000)]
    own += [PartitionObservation("f", n, (4,), (4,), 4, 0) for n in range(100)]
    copies = {("a", 0): "/d0", ("b", 1001): "/d1", ("c", 1999): "/d0"}  # broker 3 added: r 1 2 -> 2 3
    parts = [replace(p, replicas=(1, 2, 3)) if (p.topic, p.partition) in copies else p for p in spread + own]
    moving = {key: ((3,), (1,)) for key in copies}
    rows: dict[tuple[int, str], list] = {}
    for p in parts:
        for b in p.replicas:
            path = copies[(p.topic, p.partition)] if b == 3 and p.topic != "e" else f"/d{p.partition % 2}"
            rows.setdefault((b, path), []).append((p.topic, p.partition, False))
    rows[(4, "/d0")].append(("f", 5, True))  # an intra-broker move of f-5 into /d0 (its replica is in /d1)

    def poll(previous, grew=frozenset(), column=tuple):
        dirs = []
        for (b, path), held in sorted(rows.items()):
            held = sorted(held)
            sizes = column(10 + (100 if (b, path, *key) in grew else 0) for key in held)
            dirs.append(LogDirObservation(b, path, True, None, ReplicaList(
                column(k[0] for k in held), column(k[1] for k in held), tuple(k[2] for k in held), sizes)))
        return compute_observation(brokers, PartitionList.of(parts), {t: None for t in "abcef"}, moving, dirs,
                                   {t: None for t in "abcef"}, previous)

    before = poll(poll(None))
    cases = [({(3, "/d0", "a", 0, False)}, [(3, "/d0")]),  # the first replica of the dir
             ({(3, "/d1", "b", 1001, False)}, [(3, "/d1")]),
             ({(3, "/d0", "c", 1999, False)}, [(3, "/d0")]),  # the last one
             ({(4, "/d0", "f", 5, True)}, [(4, "/d0")]),  # a future replica
             ({(3, "/d0", "e", 0, False), (1, "/d0", "a", 0, False)}, []),  # not copies in flight
             (set(), [])]
    for grew, told in cases:
        after = poll(before, grew, _ReadByPosition)
        assert after.merge_index().same_dirs == frozenset(rows)  # compared by lookups, not list by list
        assert compute_changed_log_dirs(before, after) == told
        assert [key for key, d in after.log_dirs.items()
                if copy_changed(before.log_dirs[key], poll(before, grew).log_dirs[key], after)] == told


def test_a_poll_that_changed_nothing_reuses_every_partition_object():
    brokers = [BrokerObservation(b, None, "h", 9000 + b, False) for b in BROKER_IDS]
    parts = [PartitionObservation("t", n, (1, 2), (1, 2), 1, 0) for n in range(50)]
    dirs = [LogDirObservation(b, "/d", True, None, tuple(ReplicaInDir("t", n, False, n) for n in range(50)))
            for b in (1, 2)]
    for listing in (list, PartitionList.of):
        first = compute_observation(brokers, listing(parts), {"t": "id"}, {}, dirs, {"t": 2})
        shrunk = [replace(parts[7], isr=(1,)), *parts[:7], *parts[8:]]
        if listing is not list:
            shrunk = [*parts[:7], replace(parts[7], isr=(1,)), *parts[8:]]  # the answer's order kept
        second = compute_observation(brokers, listing(shrunk), {"t": "id"}, {}, dirs, {"t": 2}, first)
        reused = [key for key, p in second.partitions.items() if p is first.partitions[key]]
        assert len(reused) == 49 and ("t", 7) not in reused
        assert second.partitions[("t", 7)].isr == (1,) and second.partitions[("t", 7)].size_bytes == 7
        assert list(second.partitions) == list(first.partitions)  # the sorted order kept


def test_a_partition_list_in_the_last_polls_order_is_compared_in_c_and_only_the_changed_ones_looked_at():
    """The fast path is taken (the index keeps the answer's keys) and gives what the full walk gives."""
    brokers = [BrokerObservation(b, None, "h", 9000 + b, False) for b in BROKER_IDS]
    parts = [PartitionObservation("t", n, (1, 2), (1, 2), 1, 0) for n in range(20)]
    first = compute_observation(brokers, PartitionList.of(parts), {"t": "id"}, {}, [], {"t": 2})
    assert [state[:2] for state in first.merge_index().states] == [("t", n) for n in range(20)]
    moved = [*parts[:3], replace(parts[3], replicas=(1, 2, 3), isr=(1, 2)), *parts[4:]]
    second = compute_observation(brokers, PartitionList.of(moved), {"t": "id"}, {}, [], {"t": 2}, first)
    assert second.merge_index().changed == frozenset({("t", 3)})
    assert second.partitions[("t", 3)].replicas == (1, 2, 3)
    reassigned = compute_observation(brokers, PartitionList.of(moved), {"t": "id"}, {("t", 3): ((3,), ())},
                                     [], {"t": 2}, second)
    assert reassigned.partitions[("t", 3)].adding == (3,) and reassigned.merge_index().reassigning == {("t", 3)}
    over = compute_observation(brokers, PartitionList.of(moved), {"t": "id"}, {}, [], {"t": 2}, reassigned)
    assert over.partitions[("t", 3)].adding == () and over.merge_index().changed == frozenset({("t", 3)})


def test_a_dir_read_again_with_new_sizes_only_changes_no_partition_and_snapshots_tell_the_sizes():
    brokers = [BrokerObservation(b, None, "h", 9000 + b, False) for b in BROKER_IDS]
    parts = [PartitionObservation("t", n, (1, 2), (1, 2), 1, 0) for n in range(5)]

    def dirs(size: int) -> list:
        return [LogDirObservation(b, "/d", True, None, tuple(ReplicaInDir("t", n, False, size) for n in range(5)))
                for b in (1, 2)]

    first = compute_observation(brokers, parts, {"t": "id"}, {}, dirs(10), {"t": 2})
    grown = dirs(99)
    second = compute_observation(brokers, parts, {"t": "id"}, {}, grown, {"t": 2}, first)
    assert all(second.partitions[key] is first.partitions[key] for key in first.partitions)
    assert second.log_dirs[(1, "/d")] is grown[0]
    assert compute_partition_sizes(second, [("t", 3)]) == {("t", 3): 99}
