"""The watcher reads which dirs Kafka has cordoned (KIP-1066, DescribeLogDirs v5 `IsCordoned`,
Kafka 4.3+), whoever cordoned them, and tells a cordon that changed alone; the pipeline keeps it
on the dir (`LogDir.cordoned`). An answer without the field (before 4.3), or a LogDirState of a
watcher before schema set 11, means not cordoned."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings, strategies as st

from handlers.events import compute_cluster_after_events
from runtime.clients.admin_answers import compute_log_dirs
from runtime.clients.cluster_merge import compute_changed_log_dirs, compute_observation
from runtime.clients.cluster_observation import BrokerObservation, LogDirObservation, PartitionObservation, ReplicaInDir
from reassigner.edge.observation import compute_cluster, compute_events
from schemas.codec import decode, encode

NOW = 1_700_000_000_000


def answer_entry(path: str, **fields) -> SimpleNamespace:
    """One DescribeLogDirs result as `compute_log_dirs` reads it (attributes of kafka-python's struct)."""
    return SimpleNamespace(error_code=0, log_dir=path, total_bytes=100, usable_bytes=40, topics=[
        SimpleNamespace(name="t", partitions=[SimpleNamespace(partition_index=0, is_future_key=False,
                                                              partition_size=7, offset_lag=0)])], **fields)


def test_the_answer_says_which_dirs_are_cordoned_and_an_answer_without_the_field_none():
    new = compute_log_dirs(1, [answer_entry("/a", is_cordoned=True), answer_entry("/b", is_cordoned=False)])
    assert [(d.path, d.cordoned) for d in new] == [("/a", True), ("/b", False)]
    old = compute_log_dirs(1, [answer_entry("/a")])  # before Kafka 4.3: no such field
    assert [(d.path, d.cordoned) for d in old] == [("/a", False)]


def test_kafka_pythons_own_answer_structs_of_v4_and_v5_read_as_kafka_wrote_them():
    """The client sends DescribeLogDirs v5 to a 4.3+ broker; an older broker answers v4, which has
    no IsCordoned (kafka-python gives its default, False)."""
    from kafka.protocol.admin import DescribeLogDirsResponse

    def decoded(version: int):
        result = DescribeLogDirsResponse.DescribeLogDirsResult(
            error_code=0, log_dir="/a", topics=[], total_bytes=100, usable_bytes=40, is_cordoned=True)
        wire = DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[result]).encode(version=version)
        return DescribeLogDirsResponse.decode(wire, version=version).results

    assert [d.cordoned for d in compute_log_dirs(1, decoded(5))] == [True]
    assert [d.cordoned for d in compute_log_dirs(1, decoded(4))] == [False]


BROKERS = [BrokerObservation(1, "/r1", "h", 1, False), BrokerObservation(2, "/r2", "h", 2, False)]
PARTITIONS = [PartitionObservation("t", 0, (1, 2), (1, 2), 1, 0)]


def poll(cordoned: set[str], previous=None):
    """One poll of a two-broker cluster whose dirs /a (broker 1) and /b (broker 2) hold t-0."""
    dirs = [LogDirObservation(b, path, True, None, (ReplicaInDir("t", 0, False, 7),), 100, 40, path in cordoned)
            for b, path in ((1, "/a"), (2, "/b"))]
    return compute_observation(BROKERS, PARTITIONS, {"t": "id"}, {}, dirs, {"t": 1}, previous)


def test_a_cordon_that_changed_alone_is_told_and_the_pipeline_keeps_it():
    before = poll(set())
    after = poll({"/a"}, before)  # merged from the poll before: the dir lists the same replicas
    assert compute_changed_log_dirs(before, after) == [(1, "/a")]
    events = compute_events(before, after, NOW)
    assert [(suffix, record["path"], record["cordoned"]) for suffix, _, record in events] == [
        ("disk-failures", "/a", True)]
    cluster, _, _ = compute_cluster_after_events(compute_cluster(before), [
        ("LogDirState", decode("LogDirState", encode("LogDirState", record))) for _, _, record in events])
    assert [(d.path, d.cordoned) for b in cluster.brokers for d in b.log_dirs] == [("/a", True), ("/b", False)]
    assert cluster == compute_cluster(after)
    uncordoned = poll(set(), after)  # and taken back
    assert [r["cordoned"] for _, _, r in compute_events(after, uncordoned, NOW)] == [False]
    assert compute_events(after, poll({"/a"}, after), NOW) == []  # still cordoned: nothing to tell


@settings(max_examples=100, deadline=None)
@given(st.sets(st.sampled_from(["/a", "/b"])), st.sets(st.sampled_from(["/a", "/b"])))
def test_the_dirs_told_are_exactly_those_whose_cordon_changed(first, second):
    before = poll(first)
    after = poll(second, before)
    assert {path for _, path in compute_changed_log_dirs(before, after)} == first ^ second


def test_a_log_dir_state_of_a_watcher_before_schema_set_11_reads_as_not_cordoned():
    record = {"schema_version": 10, "event_time": NOW, "id": "x", "key": "1", "snapshot_id": None, "broker_id": 1,
              "path": "/a", "online": True, "error": None, "total_bytes": 100, "usable_bytes": 40, "replicas": []}
    read = decode("LogDirState", encode("LogDirState", record, version=10), writer_version=10)
    assert read["cordoned"] is False
    cordoned = poll({"/a"})
    cluster, _, _ = compute_cluster_after_events(compute_cluster(cordoned), [("LogDirState", read)])
    assert compute_cluster(cordoned).broker(1).log_dirs[0].cordoned
    assert not cluster.broker(1).log_dirs[0].cordoned  # an older watcher's word: not cordoned
