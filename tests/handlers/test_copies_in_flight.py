"""What the pipeline keeps of a copy in flight (`handlers.events`, LogDirState): the sizes Kafka's
describe-log-dirs tells for a replica being added to a broker, and for a future replica, land in
the dir's `copying_bytes`, are stored in Redis with the broker and load back; a dir stored before
they were kept loads without. The movement's progress counts them (`planning.movement.eta`, IN
FLIGHT; tests/operator/test_progress_meter.py)."""

from __future__ import annotations

import json

from handlers.events import compute_cluster_after_events
from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from state.stored_forms import broker_from_storage, broker_to_storage

T0 = 1_700_000_000_000
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def dir_event(broker_id: int, replicas, at_ms: int = T0):
    """LogDirState of broker `broker_id`'s dir /d: (tp, size, is_future) replicas."""
    return ("LogDirState", {"schema_version": 8, "event_time": at_ms, "id": f"{broker_id}-{at_ms}",
                            "key": str(broker_id), "snapshot_id": None, "broker_id": broker_id, "path": "/d",
                            "online": True, "error": None, "total_bytes": None, "usable_bytes": None,
                            "replicas": [{"topic": tp.topic, "partition": tp.partition, "size_bytes": size,
                                          "offset_lag": 0, "is_future": future} for tp, size, future in replicas]})


def cluster_moving_t0_to_broker_3() -> Cluster:
    moving = PartitionState("t", 0, (3, 1, 2), (1, 2), 1, size_bytes=1_000, adding=(3,), removing=())
    still = PartitionState("t", 1, (3, 2), (3, 2), 3, size_bytes=500)
    brokers = tuple(Broker(b, log_dirs=(LogDir("/d"),)) for b in (1, 2, 3))
    return Cluster(brokers, (Topic("t", (moving, still)),))


def test_the_copy_of_a_replica_being_added_and_a_future_replica_are_kept_with_their_sizes():
    cluster, _times, _effects = compute_cluster_after_events(
        cluster_moving_t0_to_broker_3(), [dir_event(3, [(TP0, 400, False), (TP1, 500, False), (TP1, 120, True)])])
    (d,) = cluster.broker(3).log_dirs
    assert d.copied_bytes(TP0) == 400  # being added to broker 3
    assert d.copied_bytes(TP1) == 120  # the future replica of an intra-broker move
    assert d.replica_bytes == 900  # the current replicas' sum, as before
    cluster, _times, _effects = compute_cluster_after_events(cluster, [dir_event(3, [(TP0, 700, False), (TP1, 500, False)], T0 + 1)])
    assert cluster.broker(3).log_dirs[0].copying_bytes == ((TP0, 700),)  # grown; the move into the dir ended


def test_a_replica_not_being_added_is_no_copy():
    cluster, _times, _effects = compute_cluster_after_events(
        cluster_moving_t0_to_broker_3(), [dir_event(1, [(TP0, 1_000, False)])])
    assert cluster.broker(1).log_dirs[0].copying_bytes == ()


def test_the_copies_are_stored_with_the_broker_and_a_dir_stored_before_them_loads_without():
    cluster, _times, _effects = compute_cluster_after_events(
        cluster_moving_t0_to_broker_3(), [dir_event(3, [(TP0, 400, False)])])
    broker = cluster.broker(3)
    loaded, _at = broker_from_storage(3, broker_to_storage(broker, T0))
    assert loaded.log_dirs[0].copying_bytes == ((TP0, 400),)
    idle = Broker(1, log_dirs=(LogDir("/d", replica_bytes=5, replica_count=1),))
    stored = broker_to_storage(idle, T0)
    assert len(json.loads(stored)[3][0]) == 7  # a broker receiving nothing is stored as before
    assert broker_from_storage(1, stored)[0] == idle


def test_a_reader_of_the_previous_version_reads_a_broker_with_copies_in_flight():
    """Rolling upgrade: the copies are a trailing entry of the broker, which the previous
    version's reader (it unpacked `rack, alive, draining, dirs, *rest` and each dir's row into
    exactly seven entries) ignores."""
    cluster, _times, _effects = compute_cluster_after_events(
        cluster_moving_t0_to_broker_3(), [dir_event(3, [(TP0, 400, False)])])
    stored = json.loads(broker_to_storage(cluster.broker(3), T0))
    rack, alive, draining, dirs, *rest = stored  # the previous reader's unpacking
    for row in dirs:
        path, online, total, usable, replica_bytes, replica_count, futures = row
    from state.stored_forms import tp_field

    assert rest == [T0, [], {dirs[0][0]: [[tp_field(TP0), 400]]}]  # observed at, cannot host, the copies
