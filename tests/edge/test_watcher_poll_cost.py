"""What one watcher poll reads: the log dirs (half a poll's cost at 10,000 partitions) only when
due or when the metadata hints a change; the rest sent together. No Kafka here: the Admin API's
answers are stubbed at `ClusterAdmin`'s own seams."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from runtime.clients.kafka_admin import ClusterAdmin
from runtime.clients.cluster_merge import compute_log_dirs_hint
from runtime.clients.cluster_observation import EMPTY, BrokerObservation, LogDirObservation, ReplicaInDir
from reassigner.edge.watcher import Watcher
from runtime.kafka_versions import (DESCRIBE_CLUSTER, DESCRIBE_LOG_DIRS, ELR_FEATURE, METADATA_VERSION,
                                    ClusterFeatures)
from schemas.errors import KafkaPermanentError, KafkaTransientError
from runtime.settings import load_settings

BROKERS = [BrokerObservation(1, "/r1", "h", 1, False), BrokerObservation(2, "/r2", "h", 2, False)]


def metadata(replicas=(1, 2), offline=()) -> list[SimpleNamespace]:
    """A Metadata answer as kafka-python's structs (attributes named as in Kafka's schema)."""
    partition = SimpleNamespace(partition_index=0, replica_nodes=list(replicas), isr_nodes=list(replicas),
                                leader_id=replicas[0], leader_epoch=0, offline_replicas=list(offline))
    return [SimpleNamespace(name="t", error_code=0, topic_id=None, partitions=[partition])]


def dirs_answer(online: bool = True) -> list[SimpleNamespace]:
    """One broker's DescribeLogDirs answer as kafka-python's structs."""
    replica = SimpleNamespace(partition_index=0, partition_size=7, offset_lag=0, is_future_key=False)
    return [SimpleNamespace(log_dir="/data", error_code=0 if online else 56, total_bytes=100, usable_bytes=50,
                            topics=[SimpleNamespace(name="t", partitions=[replica])] if online else [])]


KAFKA_4_1 = ClusterFeatures({METADATA_VERSION: 27, ELR_FEATURE: 1}, {DESCRIBE_CLUSTER: 2, DESCRIBE_LOG_DIRS: 4})
"""What a new Kafka 4.1 cluster finalizes and answers (runtime/kafka_versions.py)."""


class StubbedAdmin(ClusterAdmin):
    """ClusterAdmin with its Kafka reads answered from fields; records what each poll asked."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1:1")
        self.metadata = metadata()
        self.online = {1: True, 2: True}
        self.failing: set[str] = set()
        self.reads: list[list[str]] = []
        self.alone: list[str] = []

    def describe_brokers(self):
        return list(BROKERS)

    def describe_kafka(self):
        return KAFKA_4_1

    def read_together(self, reads):
        self.reads.append(sorted(reads))
        answers = {}
        for name in reads:
            if name in self.failing:
                answers[name] = KafkaTransientError("stubbed", "NETWORK_EXCEPTION")
            elif name == "metadata":
                answers[name] = self.metadata
            elif name == "reassignments":
                answers[name] = {}
            elif name == "min isr":
                (topics,) = reads[name][1]
                answers[name] = {"topic": {t: {"min.insync.replicas": {"value": "1"}} for t in topics}}
            else:
                broker_id = int(name.rsplit(" ", 1)[1])
                answers[name] = dirs_answer(self.online[broker_id])
        return answers

    def describe_partitions(self):
        self.alone.append("metadata")
        from runtime.clients.admin_answers import compute_partitions
        return compute_partitions(self.metadata)

    def describe_log_dirs(self, broker_ids):
        self.alone += [f"log dirs {b}" for b in broker_ids]
        return [], set(broker_ids)

    def describe_min_insync_replicas(self, topics):
        self.alone += [f"min isr {t}" for t in topics]
        return {t: 1 for t in topics}

    def read_log_offsets(self, keys):
        return {key: (0, 0) for key in keys}

    def read_committed_offsets(self):
        return {}


DIR_READS = ["log dirs 1", "log dirs 2"]


def test_the_first_poll_reads_everything_at_once_and_then_dirs_only_when_due():
    admin = StubbedAdmin()
    first = admin.observe(None, log_dirs_due=False)  # no earlier poll: the dirs are read anyway
    assert admin.reads == [sorted(["metadata", "reassignments", *DIR_READS])]
    assert first.topics["t"].min_insync_replicas == 1  # a new topic's: asked alone
    assert first.partitions[("t", 0)].log_dirs == ("/data", "/data")
    admin.reads.clear()
    second = admin.observe(first, log_dirs_due=False)
    assert admin.reads == [["metadata", "min isr", "reassignments"]]
    assert second == first  # the dirs carried over
    admin.observe(first, log_dirs_due=True)
    assert admin.reads[-1] == sorted(["metadata", "min isr", "reassignments", *DIR_READS])


def test_a_hint_in_the_metadata_reads_the_dirs_before_they_are_due():
    admin = StubbedAdmin()
    first = admin.observe(None)
    # A dir holding a replica fails: the metadata lists the replica offline at once.
    admin.online[2] = False
    admin.metadata = metadata(offline=(2,))
    admin.reads.clear()
    after = admin.observe(first, log_dirs_due=False)
    assert admin.reads == [["metadata", "min isr", "reassignments"], DIR_READS]
    assert after.log_dirs[(2, "/data")].online is False


def test_a_read_that_fails_together_is_done_again_alone():
    admin = StubbedAdmin()
    admin.failing = {"metadata", "log dirs 2"}
    first = admin.observe(None)
    assert admin.alone == ["metadata", "min isr t", "log dirs 2"]
    assert ("t", 0) in first.partitions and (1, "/data") in first.log_dirs


def test_the_hint_names_what_the_dirs_may_have_changed_with():
    admin = StubbedAdmin()
    view = admin.observe(None)
    partitions = [p for p in view.partitions.values()]
    assert compute_log_dirs_hint(EMPTY, BROKERS) == "no earlier poll"
    assert compute_log_dirs_hint(view, BROKERS, partitions) is None
    fenced = [BROKERS[0], replace(BROKERS[1], fenced=True)]
    assert compute_log_dirs_hint(view, fenced) == "the live brokers changed"
    moved = [replace(partitions[0], replicas=(1,))]
    assert compute_log_dirs_hint(view, BROKERS, moved) == "the replicas of t-0 changed"
    moving = replace(view, log_dirs={**view.log_dirs, (1, "/data"): LogDirObservation(
        1, "/data", True, replicas=(ReplicaInDir("t", 0, is_future=True),))})
    assert compute_log_dirs_hint(moving, BROKERS, partitions) == "a replica is moving between dirs"
    reassigning = replace(view, partitions={("t", 0): replace(partitions[0], adding=(2,))})
    assert compute_log_dirs_hint(reassigning, BROKERS, partitions) == "a reassignment is in flight"


class FakePublisher:
    def publish_events(self, events, timeout_seconds: float = 30.0) -> int:
        return len(list(events))


def test_the_watcher_asks_for_dirs_every_interval_and_for_every_snapshot():
    now = [1000.0]
    asked: list[bool] = []

    class RecordingAdmin(StubbedAdmin):
        def observe(self, previous=None, log_dirs_due=True, eligible_leaders=False):
            asked.append(log_dirs_due)
            return super().observe(previous, log_dirs_due)

    settings = load_settings(log_dirs_interval_seconds=2, snapshot_interval_seconds=10)
    watcher = Watcher(RecordingAdmin(), FakePublisher(), settings, clock=lambda: now[0])
    watcher._topics_ready = True
    for _ in range(12):
        watcher.poll_once()
        now[0] += 1.0
    # t = 0 (snapshot), 2, 4, 6, 8, 10 (snapshot), ...: never more than 2 s without a read.
    assert asked == [True, False] * 6


class ObservingAdmin(ClusterAdmin):
    """`observe` answers from a list of observations, one a poll (the last one repeats)."""

    def __init__(self, observations) -> None:
        super().__init__("127.0.0.1:1")
        self.observations = list(observations)

    def observe(self, previous=None, log_dirs_due=True, eligible_leaders=False):
        return self.observations.pop(0) if len(self.observations) > 1 else self.observations[0]

    def ensure_topics(self, names, partitions=3):
        return []

    def describe_kafka(self):
        return KAFKA_4_1

    def read_log_offsets(self, keys):
        return {key: (0, 0) for key in keys}

    def read_committed_offsets(self):
        return {}


class CollectingPublisher:
    def __init__(self) -> None:
        self.polls: list[list] = []
        self.fail_next = False

    def publish_events(self, events, timeout_seconds: float = 30.0) -> int:
        if self.fail_next:
            self.fail_next = False
            raise KafkaTransientError("stubbed", "REQUEST_TIMED_OUT")
        self.polls.append(list(events))
        return len(events)


def test_a_big_clusters_snapshot_is_spread_over_polls_and_a_failed_poll_repeats_its_slice():
    from runtime.clients.cluster_merge import compute_observation
    from runtime.clients.cluster_observation import PartitionObservation

    parts = [PartitionObservation("t", n, (1, 2), (1, 2), 1, 3) for n in range(10)]
    first = compute_observation(BROKERS, parts, {"t": "id"}, {}, [], {"t": 1})
    shrunk = replace(first, partitions={**first.partitions, ("t", 9): replace(first.partitions[("t", 9)], isr=(1,))})
    admin = ObservingAdmin([first, first, first, shrunk])
    publisher = CollectingPublisher()
    watcher = Watcher(admin, publisher, load_settings(snapshot_slice_partitions=4, snapshot_interval_seconds=600),
                      clock=lambda: 1000.0)
    snapshot_ids = {watcher.poll_once().snapshot_id}
    publisher.fail_next = True
    try:
        watcher.poll_once()
    except KafkaTransientError:
        pass
    snapshot_ids |= {watcher.poll_once().snapshot_id, watcher.poll_once().snapshot_id}
    assert len(snapshot_ids) == 1 and None not in snapshot_ids
    told = [[(r.get("phase"), r.get("partition")) for _s, _k, r in events if r.get("snapshot_id")]
            for events in publisher.polls]
    assert told[0][0] == ("START", None) and [p for _, p in told[0][-4:]] == [0, 1, 2, 3]
    assert [p for _, p in told[1]] == [4, 5, 6, 7]  # the failed poll's slice, published again
    assert [p for _, p in told[2][:2]] == [8, 9] and told[2][-1][0] == "END"
    change = [r for _s, _k, r in publisher.polls[2] if r.get("snapshot_id") is None]
    assert [(r["partition"], r["isr"]) for r in change] == [(9, [1])]  # the poll's own change, told too
    assert watcher.poll_once().snapshot_id is None  # the next snapshot waits for its interval


def test_a_polls_events_carry_the_time_it_began_reading():
    """A poll that began before the executor applied a step and ended after it must not pass for
    a view read after the apply (`planning.movement.completion` INTERRUPTED): its events carry
    the time the poll began reading, not the time the answers were in."""
    from runtime.clients.cluster_merge import compute_observation
    from runtime.clients.cluster_observation import PartitionObservation

    before = compute_observation(BROKERS, [PartitionObservation("t", 0, (1, 2), (1, 2), 1, 3)], {"t": "id"}, {},
                                 [], {"t": 1})
    after = replace(before, partitions={("t", 0): replace(before.partitions[("t", 0)], leader_epoch=4)})
    now = [1000.0]

    class SlowAdmin(ObservingAdmin):
        def observe(self, previous=None, log_dirs_due=True, eligible_leaders=False):
            now[0] += 2.5  # the answers take 2.5 s to come in
            return super().observe(previous, log_dirs_due)

    publisher = CollectingPublisher()
    watcher = Watcher(SlowAdmin([before, after]), publisher, load_settings(snapshot_interval_seconds=600),
                      clock=lambda: now[0])
    watcher.poll_once()  # the snapshot, read from 1000.0 s on
    now[0] = 1010.0
    watcher.poll_once()  # the change, read from 1010.0 s on
    assert {r["event_time"] for _s, _k, r in publisher.polls[0]} == {1_000_000}
    assert [(r["event_time"], r["leader_epoch"]) for _s, _k, r in publisher.polls[1]] == [(1_010_000, 4)]


def test_a_traffic_read_that_fails_skips_the_sample_and_never_the_poll():
    """Offsets that cannot be read leave the snapshot without rates (the pipeline keeps the ones
    it knew); groups that cannot be read leave bytes out unknown; the poll publishes either way."""
    from runtime.clients.cluster_merge import compute_observation
    from runtime.clients.cluster_observation import PartitionObservation

    observation = compute_observation(BROKERS, [PartitionObservation("t", 0, (1, 2), (1, 2), 1, 3)], {"t": "id"},
                                      {}, [], {"t": 1})
    failing = {"offsets"}

    class FlakyAdmin(ObservingAdmin):
        def read_log_offsets(self, keys):
            if "offsets" in failing:
                raise KafkaTransientError("list offsets: stubbed", "REQUEST_TIMED_OUT")
            return {key: (0, 10) for key in keys}

        def read_committed_offsets(self):
            if "groups" in failing:
                raise KafkaTransientError("list groups: stubbed", "GROUP_AUTHORIZATION_FAILED")
            return {}

    now = [1000.0]
    publisher = CollectingPublisher()
    watcher = Watcher(FlakyAdmin([observation]), publisher, load_settings(snapshot_interval_seconds=10),
                      clock=lambda: now[0])

    def snapshot_rates():
        now[0] += 10
        assert watcher.poll_once().snapshot_id is not None
        (record,) = [r for _s, _k, r in publisher.polls[-1] if r.get("partition") == 0]
        return record["bytes_in_per_sec"], record["bytes_out_per_sec"]

    assert snapshot_rates() == (None, None)  # offsets refused: no sample
    failing.clear()
    assert snapshot_rates() == (None, None)  # the first sample: nothing to compare with yet
    failing.add("groups")
    assert snapshot_rates() == (0.0, None)  # nothing produced; the groups unknown
    failing.clear()
    assert snapshot_rates() == (0.0, None)  # the sample before had no groups
    assert snapshot_rates() == (0.0, 0.0)


def test_the_first_poll_names_the_clusters_kafka_and_a_zookeeper_cluster_stops_the_watcher(caplog):
    import logging
    import threading

    import pytest

    observation = ObservingAdmin([EMPTY]).observations[0]
    watcher = Watcher(ObservingAdmin([observation]), CollectingPublisher(), load_settings())
    with caplog.at_level(logging.INFO, logger="reassigner.edge.watcher"):
        watcher.poll_once()
        watcher.poll_once()
    said = [r.getMessage() for r in caplog.records]
    assert said.count("the cluster runs Kafka 4.1 (metadata.version level 27): 3 of 4 capabilities; "
                      "without cordoned log dirs") == 1  # read once, at the first poll
    assert [r.levelname for r in caplog.records if "has no cordoned log dirs" in r.getMessage()] == ["WARNING"]

    class ZooKeeperAdmin(ObservingAdmin):
        def describe_kafka(self):
            return ClusterFeatures({}, {DESCRIBE_CLUSTER: 1})

    stopped = Watcher(ZooKeeperAdmin([observation]), CollectingPublisher(), load_settings())
    with pytest.raises(KafkaPermanentError, match="ZooKeeper mode") as error:
        stopped.run(threading.Event())  # not retried: the loop ends at once
    assert error.value.code == "UNSUPPORTED_VERSION" and "\n" not in str(error.value)


def test_each_snapshot_tells_the_pipeline_which_kafka_runs_and_an_upgrade_shows_at_the_next_one(caplog):
    """KAFKA VERSION: the START marker carries the release, level and capabilities; the
    features are read again at each snapshot, so a metadata.version upgrade (4.1 → 4.3) is
    logged once and told by the next snapshot; polls between snapshots do not read them."""
    import logging

    kafka_4_3 = ClusterFeatures({METADATA_VERSION: 30, ELR_FEATURE: 1}, {DESCRIBE_CLUSTER: 2, DESCRIBE_LOG_DIRS: 5})
    features = [KAFKA_4_1]
    reads = []
    now = [1000.0]

    class UpgradingAdmin(ObservingAdmin):
        def describe_kafka(self):
            reads.append(now[0])
            return features[0]

    publisher = CollectingPublisher()
    watcher = Watcher(UpgradingAdmin([EMPTY]), publisher, load_settings(snapshot_interval_seconds=10),
                      clock=lambda: now[0])

    def starts():
        return [record for poll in publisher.polls for suffix, _, record in poll
                if suffix == "snapshots" and record["phase"] == "START"]

    with caplog.at_level(logging.INFO, logger="reassigner.edge.watcher"):
        for _ in range(3):  # t = 1000 (snapshot), 1001, 1002
            watcher.poll_once()
            now[0] += 1.0
        features[0] = kafka_4_3
        now[0] = 1011.0
        watcher.poll_once()  # the next snapshot
    assert reads == [1000.0, 1011.0]
    first, second = starts()
    assert (first["kafka_release"], first["kafka_metadata_level"]) == ("4.1", 27)
    assert "eligible leader replicas" in first["kafka_capabilities"]
    assert "cordoned log dirs" not in first["kafka_capabilities"]
    assert (second["kafka_release"], second["kafka_metadata_level"]) == ("4.3", 30)
    assert "cordoned log dirs" in second["kafka_capabilities"]
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("the cluster runs")]
    assert said == ["the cluster runs Kafka 4.1 (metadata.version level 27): 3 of 4 capabilities; "
                    "without cordoned log dirs",
                    "the cluster runs Kafka 4.3 (metadata.version level 30): 4 of 4 capabilities"]
