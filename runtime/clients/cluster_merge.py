"""One poll's Admin API answers merged into a `ClusterObservation` (pure), and what the merge
tells the next step: `compute_observation` merges (after `compute_lagging_reassignments` has
kept the moves whose end the metadata does not show yet); `compute_log_dirs_hint` says when the metadata
suggests the dirs changed (a poll reads them then, and otherwise only every few seconds: they are
half of a poll's cost); `compute_changed_partitions` and `compute_changed_log_dirs` tell the
watcher's diff what the merge did not carry over.

INVARIANTS
- Pure: no I/O, no clock, no client library.
- COST PROPORTIONAL TO WHAT CHANGED. Given the previous poll's observation, the merge reuses
  its objects: the index of which dir holds each replica (`MergeIndex.hosted`) is patched only
  for the dirs that are not the very objects of the previous poll (a poll that did not read the
  dirs carries them over, so it patches nothing), and a partition whose metadata, reassignment
  and hosting entry are those of the previous poll keeps its `PartitionObservation` (the same
  object, so the diff skips it by identity). A dir read again that lists the same replicas
  changes nothing either: its entries in the index keep the sizes of the poll in which its list
  last changed, and a partition that did not change keeps its size, while snapshots carry fresh
  ones (`compute_partition_sizes`). The result equals a merge from nothing but for those sizes
  (property-tested, tests/clients/test_cluster_answers_incremental.py).
- A PARTITION THAT CHANGED IS SIZED AS ITS DIRS ARE NOW: the size a changed partition carries
  (the one its PartitionState tells, which replaces the pipeline's) is read from the dir objects
  of this poll (read now, or carried over), never from an index entry kept from an earlier poll:
  such an entry may be of a replica read mid-write, or of a partial copy (a future replica
  promoted at a restart), and would take back a fresher size a snapshot or a landed replica gave
  the pipeline (tests/edge/test_sizes_across_a_restart.py). Only the entries of the dirs whose
  lists did not change can be that old; their replica is found by bisection of the dir's sorted
  key columns, for the changed partitions only (their leader's, or every replica's when
  leaderless): about 1.2 µs a partition, some 40 ms in the poll that sees a broker of a
  300,000-partition cluster fail (30,000 partitions change), against 0.5 s for the whole merge.
- A dir read again is compared with the last poll's by its `ReplicaList` key columns, in C,
  once: the merge records the dirs that list the same replicas (`MergeIndex.same_dirs`), and
  the diff compares those by their state alone. What reads every replica zips the columns.
- The one pass over every partition a poll still makes is in C: the `PartitionList` states are
  compared pairwise with the previous poll's (`map(operator.ne, ...)`); when the keys are the
  previous poll's in the same order (the usual poll: no topic created or deleted), only the
  partitions that differ, are being reassigned or whose hosting entry changed are looked at in
  Python; otherwise (or given a plain list) every partition is. The result is the same either
  way (property-tested).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import replace
from itertools import compress
from operator import ne
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence

from runtime.clients.cluster_observation import (
    BrokerObservation,
    ClusterObservation,
    LogDirKey,
    LogDirObservation,
    MergeIndex,
    PartitionKey,
    PartitionList,
    PartitionObservation,
    TopicObservation,
)


def compute_changed_partitions(previous: ClusterObservation, current: ClusterObservation,
                               ) -> frozenset[PartitionKey] | None:
    """The partitions of `current` that are not `previous`'s very objects, when `current` was
    merged from `previous` (else None: not known, compare them all). The others are equal."""
    before, after = previous.merge_index(), current.merge_index()
    if before is None or after is None or after.base is not before.token:
        return None
    return after.changed


def compute_changed_log_dirs(previous: ClusterObservation, current: ClusterObservation) -> list[LogDirKey]:
    """The dirs of `current`, in order, that differ from `previous`'s (new ones included). When
    `current` was merged from `previous`, a dir the merge found listing the same replicas is
    compared by its state alone (online, error, cordoned), not replica by replica again.

    COPIES IN FLIGHT: sizes are volatile and never make a dir differ, but for the replicas being
    copied into it — its future replicas (an intra-broker move) and its replicas of the
    partitions `current` shows adding its broker (a reassignment's step) — whose sizes the
    movement's progress counts as they grow (`planning.movement.eta`, IN FLIGHT): a dir read
    again in which one of them changed size is told again. Only the dirs of brokers receiving a
    copy are looked at, and in them only the replicas being copied (`_copy_changed`: found by
    bisection of the dir's sorted key columns); the others cost nothing more."""
    before, after = previous.merge_index(), current.merge_index()
    same = after.same_dirs if before is not None and after is not None and after.base is before.token else ()
    old_dirs = previous.log_dirs
    receiving: dict[int, set[PartitionKey]] | None = None
    changed = []
    for key, log_dir in current.log_dirs.items():
        old = old_dirs.get(key)
        if old is log_dir:
            continue
        if old is None or _state_of(old) != _state_of(log_dir) or (key not in same and old != log_dir):
            changed.append(key)
            continue
        if receiving is None:
            receiving = _compute_receiving(current)
        if _copy_changed(old, log_dir, receiving.get(key[0], ())):
            changed.append(key)
    return changed


def compute_lagging_reassignments(
    previous: ClusterObservation,
    partitions: Iterable[PartitionObservation],
    reassignments: Mapping[PartitionKey, tuple[Sequence[int], Sequence[int]]],
) -> Mapping[PartitionKey, tuple[Sequence[int], Sequence[int]]]:
    """The reassignment list of a poll, with the moves its metadata still shows under way.

    The metadata (any broker's cache) and the reassignment list (the controller's) are read
    together and can disagree: right after a move ends, the list no longer has it while the
    metadata still lists the replicas it had during the move — target *and* removing. Taken as
    is, that poll shows a settled partition with one replica too many, and a step planned from
    it is wrong (it removes where it should add: tests/scenarios/test_other_tools.py). So a
    partition the previous poll showed reassigning and this list does not keeps the previous
    poll's adding/removing while its replicas are still those of the previous poll and the
    move cannot have ended with them: it was removing a broker (an end drops it, a cancel drops
    the ones added), or a broker it was adding is out of the ISR (Kafka ends a move only with
    its targets in sync). A move that only added brokers, all in sync, ends with the same
    replicas: not kept. The next poll whose metadata caught up lets it go.

    Cost: the partitions of the previous poll's reassignments that this list does not have;
    their states are found by the previous poll's positions when the answer is a `PartitionList`
    in that order, else by one pass over the answer (a move ended while topics came or went)."""
    index = previous.merge_index()
    was = index.reassigning if index is not None else [
        key for key, p in previous.partitions.items() if p.adding or p.removing]
    ended = {key for key in was if key not in reassignments}
    if not ended:
        return reassignments
    now: dict[PartitionKey, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    positions = index.positions if index is not None else None
    states = partitions.states if isinstance(partitions, PartitionList) else None
    if states is not None and positions is not None:
        for key in ended:
            at = positions.get(key)
            if at is not None and at < len(states) and states[at][:2] == key:
                now[key] = (tuple(states[at][2]), tuple(states[at][3]))
    if len(now) < len(ended):
        for p in partitions:
            if (p.topic, p.partition) in ended:
                now[(p.topic, p.partition)] = (tuple(p.replicas), tuple(p.isr))
    kept = {}
    for key in ended:
        old, current = previous.partitions.get(key), now.get(key)
        if old is None or current is None or current[0] != tuple(old.replicas):
            continue
        if old.removing or any(b not in current[1] for b in old.adding):
            kept[key] = (old.adding, old.removing)
    return {**reassignments, **kept} if kept else reassignments


def _state_of(log_dir: LogDirObservation) -> tuple:
    """What of a dir is told beside its replicas: online, its error, cordoned."""
    return log_dir.online, log_dir.error, log_dir.cordoned


def _compute_receiving(observation: ClusterObservation) -> dict[int, set[PartitionKey]]:
    """Broker → the partitions whose reassignment adds it (from the merge's index of the
    partitions being reassigned when it has one: no walk over every partition)."""
    index = observation.merge_index()
    partitions = observation.partitions
    keys = index.reassigning if index is not None else (k for k, p in partitions.items() if p.adding)
    receiving: dict[int, set[PartitionKey]] = {}
    for key in keys:
        partition = partitions.get(key)
        for broker_id in partition.adding if partition is not None else ():
            receiving.setdefault(broker_id, set()).add(key)
    return receiving


def _copy_changed(old: LogDirObservation, new: LogDirObservation, adding_here: set[PartitionKey] | tuple) -> bool:
    """Whether a replica being copied into the dir (future, or of a partition in `adding_here`)
    has another size than in `old`, the same dir listing the same replicas (COPIES IN FLIGHT).
    Only those replicas are read: a partition of `adding_here` is found by bisecting the dir's
    key columns (a dir lists its replicas sorted by key: `LogDirObservation`), the future ones
    by their flags, in C; not every replica of the dir (a Python step each: 73-82 ms a poll at
    300k partitions with 50 copies in flight that did not grow, against 5 ms so;
    benchmarks/bench_watcher.py)."""
    futures = new.holds_future_replica
    if not adding_here and not futures:
        return False
    now, then = new.replica_list, old.replica_list
    sizes, was, topics, partitions = now.sizes, then.sizes, now.topics, now.partitions
    for topic, partition in adding_here:
        start = bisect_left(topics, topic)
        end = bisect_right(topics, topic, start)
        start = bisect_left(partitions, partition, start, end)
        end = bisect_right(partitions, partition, start, end)  # its replica, and a future one
        if sizes[start:end] != was[start:end]:
            return True
    return futures and any(sizes[i] != was[i] for i in compress(range(len(sizes)), now.futures))


def compute_observation(
    brokers: Iterable[BrokerObservation],
    partitions: Iterable[PartitionObservation],
    topic_ids: Mapping[str, str | None],
    reassignments: Mapping[PartitionKey, tuple[Sequence[int], Sequence[int]]],
    log_dirs: Iterable[LogDirObservation],
    min_insync_replicas: Mapping[str, int | None],
    previous: ClusterObservation | None = None,
) -> ClusterObservation:
    """Merge one poll's answers: reassignments give adding/removing (kept within the replicas),
    log dirs give each replica's dir and the partition's size (the leader's replica; the largest
    one when leaderless), the brokers get their dir paths, topics get counts and min ISR. Given
    the `previous` poll's observation, what did not change is reused (COST in the module doc)."""
    dirs_by_key = {(d.broker_id, d.path): d for d in log_dirs}
    index = previous.merge_index() if previous is not None else None
    hosted, fresh, same_dirs, kept = _compute_hosted(dirs_by_key, previous.log_dirs if index is not None else {},
                                                     index.hosted if index is not None else None)
    paths_of_broker: dict[int, list[str]] = {}
    for broker_id, path in dirs_by_key:
        paths_of_broker.setdefault(broker_id, []).append(path)

    before = previous.partitions if index is not None else {}
    listed = partitions if isinstance(partitions, PartitionList) else None
    if listed is None:
        partitions = partitions if isinstance(partitions, (list, tuple)) else list(partitions)
    count = len(partitions)  # type: ignore[arg-type]
    changed: dict[PartitionKey, PartitionObservation] = {}
    new_keys = 0
    reassigning: set[PartitionKey] = set()
    find_before = before.get
    positions: Mapping[PartitionKey, int] | None = None
    if listed is not None:
        states = listed.states
        previous_states = index.states if index is not None else None
        differ: list[int] = []
        if previous_states is not None and len(previous_states) == len(states):
            differ = list(compress(range(len(states)), map(ne, states, previous_states)))
            # The same partitions in the same order when every differing entry keeps its key.
            if all(states[i][:2] == previous_states[i][:2] for i in differ):
                positions = index.positions if index is not None else None
        if positions is not None:
            # The usual poll: only the partitions whose state differs, that are (or were) being
            # reassigned, or whose hosting entry changed can differ from the previous poll's
            # objects (COST in the module doc).
            looked_at = {states[i][:2] for i in differ}
            looked_at |= fresh | index.reassigning  # type: ignore[union-attr]
            looked_at.update(reassignments)
            partitions = [listed[positions[key]] for key in sorted(looked_at) if key in positions]
        else:
            positions = {state[:2]: i for i, state in enumerate(states)}
            partitions = list(listed)
    # The loop over the partitions that may have changed (given a `PartitionList` whose keys are
    # the last poll's, those found above; otherwise every partition): kept to lookups and
    # compares (about 0.8 µs a partition); a partition equal to the previous poll's is that
    # poll's object.
    for p in partitions:
        key = (p.topic, p.partition)
        adding = removing = ()
        if reassignments and key in reassignments:
            adding, removing = reassignments[key]
            # The metadata and the reassignment list come from different brokers and may disagree
            # for a moment; keep the model's invariant (adding, removing ⊆ replicas).
            adding = tuple(b for b in adding if b in p.replicas)
            removing = tuple(b for b in removing if b in p.replicas)
            if adding or removing:
                reassigning.add(key)
        old = find_before(key)
        if old is None:
            new_keys += 1
        elif (old.isr == p.isr and old.leader_epoch == p.leader_epoch and old.replicas == p.replicas
              and old.leader == p.leader and old.offline_replicas == p.offline_replicas
              and old.adding == adding and old.removing == removing and key not in fresh):
            continue
        changed[key] = _merged_partition(p, adding, removing, hosted.get(key), dirs_by_key, kept)

    broker_map = {
        b.broker_id: replace(b, log_dirs=tuple(sorted(paths_of_broker.get(b.broker_id, b.log_dirs))))
        for b in brokers
    }
    if previous is not None and new_keys == 0 and count == len(before):
        # The partitions of the last poll, no more, no fewer: its (sorted) order and its topics'
        # counts hold; only the changed partitions are put in, and their topics looked at.
        ordered: Mapping[PartitionKey, PartitionObservation] = before
        if changed:
            ordered = dict(before)
            ordered.update(changed)
        topics = _compute_topics_patched(previous, ordered, {k[0] for k in changed}, topic_ids,
                                         min_insync_replicas)
    else:
        every = [state[:2] for state in listed.states] if listed is not None else [
            (p.topic, p.partition) for p in partitions]
        ordered = {key: changed[key] if key in changed else before[key] for key in sorted(every)}
        topics = _compute_topics(ordered, topic_ids, min_insync_replicas)
    log_dirs_sorted = dict(sorted(dirs_by_key.items()))
    return ClusterObservation(
        brokers=dict(sorted(broker_map.items())),
        topics=topics,
        partitions=ordered,
        log_dirs=log_dirs_sorted,
        derived=MergeIndex(ordered, log_dirs_sorted, hosted, frozenset(reassigning), frozenset(changed),
                           index.token if index is not None else None,
                           states=listed.states if listed is not None else None, positions=positions,
                           same_dirs=frozenset(same_dirs) if index is not None else frozenset()),
    )


def _merged_partition(p: PartitionObservation, adding: tuple[int, ...], removing: tuple[int, ...],
                      hosted: Mapping[int, tuple[str, int]] | None,
                      dirs_by_key: Mapping[LogDirKey, LogDirObservation],
                      kept: Collection[LogDirKey]) -> PartitionObservation:
    """The partition as merged, sized as its dirs are now (A PARTITION THAT CHANGED in the module
    doc): an index entry of a dir in `kept` (its list unchanged, its entries of an earlier poll)
    is read again from the dir."""
    replica_dirs: tuple[str | None, ...] = ()
    size = None
    if hosted:
        replica_dirs = tuple(hosted[b][0] if b in hosted else None for b in p.replicas)
        if not any(d is not None for d in replica_dirs):
            replica_dirs = ()

        def size_now(broker_id: int, held: tuple[str, int]) -> int:
            where = (broker_id, held[0])
            if where not in kept:
                return held[1]
            now = _current_size(dirs_by_key[where], p.topic, p.partition)
            return held[1] if now is None else now

        size = _partition_size(hosted, p, size_now)
    return PartitionObservation(p.topic, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch, adding,
                                removing, p.offline_replicas, replica_dirs, size)


def _current_size(log_dir: LogDirObservation, topic: str, partition: int) -> int | None:
    """The size of the dir's (current, not future) replica of the partition, found by bisection
    of its sorted key columns (a current replica sorts before a future one); None when the dir
    does not list it."""
    replicas = log_dir.replica_list
    topics, partitions = replicas.topics, replicas.partitions
    start = bisect_left(topics, topic)
    end = bisect_right(topics, topic, start)
    at = bisect_left(partitions, partition, start, end)
    if at < end and partitions[at] == partition and not replicas.futures[at]:
        return replicas.sizes[at]
    return None


def _compute_hosted(dirs_by_key: Mapping[LogDirKey, LogDirObservation], old_dirs: Mapping[LogDirKey, LogDirObservation],
                    old_hosted: Mapping[PartitionKey, Mapping[int, tuple[str, int]]] | None,
                    ) -> tuple[dict[PartitionKey, dict[int, tuple[str, int]]], set[PartitionKey], set[LogDirKey],
                               set[LogDirKey]]:
    """The hosting index, the partitions whose entry is not the previous poll's (its dirs
    `old_dirs`, its index `old_hosted`), the dirs that list the same replicas as there, and the
    dirs whose entries the index kept from an earlier poll (their sizes are of then): patched for
    the dirs whose replica lists changed, or built again when most of them did."""
    # A dir read again that lists the same replicas (sizes aside) hosts the same: its entries
    # stay (their sizes are those of when its list last changed: a partition that changed reads
    # its size from the dir again, `_merged_partition`; snapshots tell fresh ones).
    # Each dir compared once (its key columns in C: about 40 ns a replica at 900k replicas).
    same = {k for k, d in dirs_by_key.items() if _hosts_the_same(old_dirs.get(k), d)}
    gone = [d for k, d in old_dirs.items() if k not in same]
    came = [d for k, d in dirs_by_key.items() if k not in same]
    if old_hosted is None or 2 * len(came) > max(1, len(dirs_by_key)):
        hosted: dict[PartitionKey, dict[int, tuple[str, int]]] = {}
        for (broker_id, path), log_dir in dirs_by_key.items():
            held = log_dir.replica_list
            for topic, partition, is_future, size in zip(held.topics, held.partitions, held.futures, held.sizes):
                if not is_future:
                    hosted.setdefault((topic, partition), {})[broker_id] = (path, size)
        return hosted, set(hosted) | set(old_hosted or ()), same, set()
    if not gone and not came:
        return old_hosted, set(), same, same  # type: ignore[return-value]
    hosted = dict(old_hosted)
    fresh: set[PartitionKey] = set()  # entries copied for this poll: safe to change in place

    def entry(key: PartitionKey) -> dict[int, tuple[str, int]]:
        if key not in fresh:
            fresh.add(key)
            hosted[key] = dict(hosted.get(key, {}))
        return hosted[key]

    for log_dir in gone:
        held = log_dir.replica_list
        for topic, partition, is_future in zip(held.topics, held.partitions, held.futures):
            if not is_future:
                held = entry((topic, partition))
                if held.get(log_dir.broker_id, ("",))[0] == log_dir.path:
                    del held[log_dir.broker_id]
    for log_dir in came:
        replicas = log_dir.replica_list
        for topic, partition, is_future, size in zip(replicas.topics, replicas.partitions, replicas.futures,
                                                     replicas.sizes):
            if not is_future:
                entry((topic, partition))[log_dir.broker_id] = (log_dir.path, size)
    for key in fresh:
        if not hosted[key]:
            del hosted[key]
    return hosted, fresh, same, same


def _hosts_the_same(before: LogDirObservation | None, after: LogDirObservation | None) -> bool:
    return before is after or (before is not None and after is not None and before.replica_list == after.replica_list)


def compute_partition_sizes(observation: ClusterObservation, keys: Iterable[PartitionKey],
                            ) -> dict[PartitionKey, int | None]:
    """The size of each partition named, from the dirs as this poll read them: its leader's
    replica, the largest one when leaderless (as the merge does). One pass over every dir's
    replicas: for a snapshot's slice, not for every poll."""
    wanted = set(keys)
    found: dict[PartitionKey, dict[int, int]] = {}
    for (broker_id, _path), log_dir in observation.log_dirs.items():
        replicas = log_dir.replica_list
        for topic, partition, is_future, size in zip(replicas.topics, replicas.partitions, replicas.futures,
                                                     replicas.sizes):
            key = (topic, partition)
            if key in wanted and not is_future:
                found.setdefault(key, {})[broker_id] = size
    sizes: dict[PartitionKey, int | None] = {}
    for key in wanted:
        held, partition = found.get(key), observation.partitions.get(key)
        sizes[key] = _partition_size(held, partition, lambda _broker, size: size) \
            if held and partition is not None else None
    return sizes


def _partition_size(by_broker: Mapping[int, Any], partition: PartitionObservation,
                    size_of: Callable[[int, Any], int]) -> int | None:
    """A partition's size from what each broker's replica holds (`size_of(broker, held)` reads
    its size): the leader's replica, the largest one when leaderless."""
    if partition.leader in by_broker:
        return size_of(partition.leader, by_broker[partition.leader])
    return max((size_of(b, by_broker[b]) for b in partition.replicas if b in by_broker), default=None)


def _compute_topics(partitions: Mapping[PartitionKey, PartitionObservation], topic_ids: Mapping[str, str | None],
                    min_insync_replicas: Mapping[str, int | None]) -> dict[str, TopicObservation]:
    """Counts and replication factor per topic, counted; a topic whose partitions are not
    described yet has none."""
    by_topic: dict[str, list[PartitionObservation]] = {}
    for p in partitions.values():
        by_topic.setdefault(p.topic, []).append(p)
    topics = {
        name: TopicObservation(name, topic_ids.get(name), len(parts), compute_replication_factor(parts),
                               min_insync_replicas.get(name))
        for name, parts in sorted(by_topic.items())
    }
    for name, topic_id in topic_ids.items():
        if name not in topics:
            topics[name] = TopicObservation(name, topic_id, 0, 0, min_insync_replicas.get(name))
    return topics


def _compute_topics_patched(previous: ClusterObservation, partitions: Mapping[PartitionKey, PartitionObservation],
                            changed_topics: set[str], topic_ids: Mapping[str, str | None],
                            min_insync_replicas: Mapping[str, int | None]) -> dict[str, TopicObservation]:
    """`_compute_topics` when the partitions are those of `previous` (same keys): a topic keeps
    its count; the replication factor of a changed one is read again from its first partition."""
    topics: dict[str, TopicObservation] = {}
    for name, old in previous.topics.items():
        if old.partition_count == 0 and name not in topic_ids:
            continue
        factor = old.replication_factor
        if name in changed_topics:
            first = partitions.get((name, 0))
            factor = compute_replication_factor([first] if first is not None else
                                                [p for k, p in partitions.items() if k[0] == name])
        topics[name] = TopicObservation(name, topic_ids.get(name), old.partition_count, factor,
                                        min_insync_replicas.get(name))
    for name, topic_id in topic_ids.items():
        if name not in topics:
            topics[name] = TopicObservation(name, topic_id, 0, 0, min_insync_replicas.get(name))
    return topics


def compute_log_dirs_hint(previous: ClusterObservation, brokers: Iterable[BrokerObservation],
                          partitions: Iterable[PartitionObservation] = ()) -> str | None:
    """Why a poll must read the log dirs although they are not due, or None when the previous
    poll's dirs still describe the cluster as far as the metadata can tell. A dir can change
    unseen by the metadata only by failing empty, by moving a replica between dirs of one
    broker (a move in flight shows as a future replica), by a broker's restart (fencing) or by
    a replica being created (a new partition, a reassignment in flight)."""
    if not previous.brokers:
        return "no earlier poll"
    live = {b.broker_id for b in brokers if not b.fenced}
    if live != {b.broker_id for b in previous.brokers.values() if not b.fenced}:
        return "the live brokers changed"
    if any(d.holds_future_replica for d in previous.log_dirs.values()):
        return "a replica is moving between dirs"
    index = previous.merge_index()
    if (index.reassigning if index is not None
            else any(p.adding or p.removing for p in previous.partitions.values())):
        return "a reassignment is in flight"  # its new replicas' dirs appear as they are created
    for p in partitions:
        before = previous.partitions.get((p.topic, p.partition))
        if before is None or before.replicas != p.replicas or before.offline_replicas != p.offline_replicas:
            return f"the replicas of {p.topic}-{p.partition} changed"
    return None


def compute_replication_factor(partitions: Sequence[PartitionObservation]) -> int:
    """Replicas of partition 0 outside a reassignment (its target: replicas minus removing)."""
    first = min(partitions, key=lambda p: p.partition, default=None)
    if first is None:
        return 0
    return len(first.replicas) - len(first.removing)
