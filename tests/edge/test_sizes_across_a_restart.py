"""A partition's size through a broker's restart and a log-dir move, as the watcher tells it and
the pipeline reads it: the pure replay of what tests/scenarios/test_disk_pressure_stack.py once
failed on (a relief shedding 1,800,320 bytes against a need of 6,746,112: heavy-0 was sized at
1,800,320 bytes, its first two produce batches, while its replicas held 20,003,603).

Each poll is what `ClusterAdmin.observe` would merge from Kafka's answers (`compute_observation`
given the previous poll; a fenced broker's dirs carried over, as `cluster_poll` does), the
watcher's events for it (`compute_events`, or a snapshot's), Avro-encoded and read back by the
pipeline (`compute_batch_inputs`, `compute_cluster_after_events`), one micro-batch per poll.
What Kafka's DescribeLogDirs shows along the way:
- the topic created and written (`write_bulk`: 200 records of 100,000 bytes, in batches of 9
  records, 900,160 bytes; 20,003,603 in all): the first read of its dirs may come two batches in;
- a log-dir move (AlterReplicaLogDirs): a future replica in the target dir, growing (the
  alter-log-dirs thread copies a batch per fetch), then the swap — only once the future replica
  has caught up with the current one — after which the target dir lists the current replica at
  its full size and the old dir no longer lists it;
- a restart of the broker: leadership moves to the other replica; the broker fenced (its dirs
  are not read: the watcher carries them over); back, with a new dir. A move in flight either
  resumes (the future replica truncated to its checkpointed high watermark and copied again) or,
  on KRaft with JBOD, the future replica whose dir the controller had already been told (the
  broker tells it once the copy has caught up, just before the swap) is promoted at startup
  (`LogManager.recoverAbandonedFutureLogs`, KAFKA-16082), short of what the partition took since,
  and catches up from the leader as any follower does, until a preferred-leader election hands
  it the lead back (the test makes it short by most of the log, to tell the sizes apart).
"""

from __future__ import annotations

from typing import Sequence

import pytest

from handlers.events import compute_cluster_after_events
from planning.model import Cluster, TopicPartition
from planning.placement.disk_relief import plan_disk_relief
from reassigner.edge.observation import compute_events, compute_snapshot_events
from runtime.clients.cluster_merge import compute_observation
from runtime.clients.cluster_observation import (
    EMPTY,
    BrokerObservation,
    ClusterObservation,
    LogDirObservation,
    PartitionObservation,
    ReplicaInDir,
    ReplicaList,
)
from runtime.settings import load_settings
from schemas.codec import TOPICS, encode
from streams.input_rows import compute_batch_inputs

PIPELINE_SETTINGS = load_settings(topic_prefix="restart-sizes")
HEAVY = TopicPartition("heavy", 0)
BATCH = 9 * 100_011 + 61  # one producer batch of write_bulk
FULL = 200 * 100_011 + 23 * 61  # heavy-0 once written: 20,003,603 bytes
TWO_BATCHES = 2 * BATCH  # 1,800,320 bytes: what the failed run sized heavy-0 at
SMALL = "/b3/data-2"  # broker 3's small volume, 64 MiB
SMALL_TOTAL = 64 * 2**20
FILLER = int(0.85 * SMALL_TOTAL) - FULL  # the scenario's filler: 85 % once heavy-0 is in
HIGH, LOW = 80.0, 75.0  # the default water marks


class Replay:
    """The watcher's polls and the pipeline's view of them, one micro-batch per poll."""

    def __init__(self) -> None:
        self.observation: ClusterObservation = EMPTY
        self.cluster = Cluster()
        self.now_ms = 1_700_000_000_000
        self.batches = 0
        self.sizes: list[int | None] = []  # heavy-0's size in the pipeline's view after each poll

    def poll(self, partition: PartitionObservation, dirs: Sequence[LogDirObservation], fenced: bool = False,
             snapshot: bool = False) -> Cluster:
        self.now_ms += 1000
        brokers = [BrokerObservation(b, f"/r{b}", "localhost", 9090 + b, b == 3 and fenced) for b in (1, 2, 3)]
        if fenced:  # a fenced broker's dirs are carried over (`cluster_poll`)
            carried = [d for key, d in self.observation.log_dirs.items() if key[0] == 3]
            dirs = [d for d in dirs if d.broker_id != 3] + carried
        current = compute_observation(brokers, [partition], {"heavy": "id-heavy"}, {}, dirs, {"heavy": 1},
                                      self.observation)
        events = (compute_snapshot_events(current, f"snapshot-{self.now_ms}", self.now_ms) if snapshot
                  else compute_events(self.observation, current, self.now_ms))
        self.observation = current
        rows = [(PIPELINE_SETTINGS.topic(suffix), 0, offset, encode(TOPICS[suffix], record))
                for offset, (suffix, _key, record) in enumerate(events)]
        inputs = compute_batch_inputs(self.batches, rows, PIPELINE_SETTINGS)
        self.batches += 1
        assert not inputs.bad_records
        self.cluster, _, effects = compute_cluster_after_events(self.cluster, inputs.events)
        assert not effects.rejected
        known = self.cluster.partition(HEAVY)
        self.sizes.append(None if known is None else known.size_bytes)
        return self.cluster

    @property
    def size(self) -> int | None:
        return self.cluster.partition(HEAVY).size_bytes


def heavy(leader: int = 3, isr: tuple[int, ...] = (3, 1), epoch: int = 0) -> PartitionObservation:
    return PartitionObservation("heavy", 0, (3, 1), isr, leader, epoch)


def log_dir(broker_id: int, path: str, replicas=(), total: int = 2 * 10**9, used: int = 0) -> LogDirObservation:
    """A dir as DescribeLogDirs reports it: `replicas` are (is_future, size) of heavy-0."""
    listed = ReplicaList.of(sorted(ReplicaInDir("heavy", 0, future, size) for future, size in replicas))
    return LogDirObservation(broker_id, path, True, None, listed, total, total - used)


def cluster_dirs(old=((False, FULL),), small=None, on_1=((False, FULL),), small_used: int = 0) -> list:
    """Every dir: brokers 1 and 2 have two each, broker 3 its two (heavy-0 in data-0, `old`) and,
    once added, the small one (`small`, used by the filler and `small_used` more)."""
    dirs = [log_dir(1, "/b1/data-0", on_1), log_dir(1, "/b1/data-1"), log_dir(2, "/b2/data-0"),
            log_dir(2, "/b2/data-1"), log_dir(3, "/b3/data-0", old), log_dir(3, "/b3/data-1")]
    if small is not None:
        dirs.append(log_dir(3, SMALL, small, SMALL_TOTAL, FILLER + small_used))
    return dirs


def created_and_written(replay: Replay) -> None:
    """heavy-0 created on 3 and 1 (3 leads), its dirs first read two batches in, then written and
    told by a snapshot: the pipeline knows its full size."""
    replay.poll(heavy(), cluster_dirs(old=(), on_1=()), snapshot=True)
    replay.poll(heavy(), cluster_dirs(old=((False, TWO_BATCHES),), on_1=((False, TWO_BATCHES),)))
    replay.poll(heavy(), cluster_dirs())  # written: the sizes alone changed, nothing is told
    replay.poll(heavy(), cluster_dirs(), snapshot=True)
    assert replay.size == FULL


def restarted(replay: Replay, before: dict, after: dict) -> None:
    """Broker 3 restarted: shut down, leadership moves to broker 1 (the dirs still as `before`);
    fenced (its dirs carried over); back, its dirs as `after` (`cluster_dirs` arguments), and
    in the ISR."""
    replay.poll(heavy(1, (1,), 1), cluster_dirs(**before))
    replay.poll(heavy(1, (1,), 1), cluster_dirs(**before), fenced=True)
    replay.poll(heavy(1, (1, 3), 1), cluster_dirs(**after))


def test_a_restart_then_a_log_dir_move_keep_the_size_the_pipeline_knows_and_the_relief_sheds_enough():
    """The failed run: the first read of heavy-0's dirs came two batches into the write. After
    the restart broker 1 leads heavy-0; every partition event then told the size broker 1's dir
    had when its replica list last changed — that first read — over the snapshot's; in the
    poll that shows the move land the dir's event sizes the landed replica right, and the
    partition event of the same poll (its dirs changed) took it back to 1,800,320: the relief,
    judged in that batch, shed that much against a need of 6.7 MB."""
    replay = Replay()
    created_and_written(replay)
    told = len(replay.sizes)
    restarted(replay, {}, {"small": ()})  # the small dir added
    for copied in (TWO_BATCHES, 5 * BATCH, 20 * BATCH):  # AlterReplicaLogDirs into the small dir
        replay.poll(heavy(1, (1, 3), 1), cluster_dirs(small=((True, copied),), small_used=copied))
    replay.poll(heavy(1, (1, 3), 1), cluster_dirs(old=(), small=((False, FULL),), small_used=FULL))  # the swap
    assert replay.cluster.partition(HEAVY).log_dir_of(3) == SMALL
    relief = plan_disk_relief(replay.cluster, 3, SMALL, HIGH, LOW)
    assert relief is not None and relief.need_bytes > 0
    assert relief.shed_bytes >= relief.need_bytes and relief.short_bytes == 0, (relief.shed_bytes, relief.need_bytes)
    assert [(m.tp, m.size_bytes) for m in relief.within] == [(HEAVY, FULL)]
    # The preferred leader back (the request's ElectLeader): the size stays.
    replay.poll(heavy(3, (1, 3), 2), cluster_dirs(old=(), small=((False, FULL),), small_used=FULL))
    assert replay.sizes[told:] == [FULL] * 8


def test_a_restart_in_the_middle_of_a_log_dir_move_that_resumes_keeps_the_size():
    """The move in flight when broker 3 restarts: its future replica comes back truncated to its
    checkpointed high watermark and is copied again; the swap lands the full replica."""
    replay = Replay()
    replay.poll(heavy(), cluster_dirs(small=()), snapshot=True)
    replay.poll(heavy(), cluster_dirs(small=((True, TWO_BATCHES),), small_used=TWO_BATCHES))
    moving = {"small": ((True, TWO_BATCHES),), "small_used": TWO_BATCHES}
    restarted(replay, moving, {"small": ((True, 0),)})
    replay.poll(heavy(1, (1, 3), 1), cluster_dirs(small=((True, 5 * BATCH),), small_used=5 * BATCH))
    replay.poll(heavy(1, (1, 3), 1), cluster_dirs(old=(), small=((False, FULL),), small_used=FULL))
    relief = plan_disk_relief(replay.cluster, 3, SMALL, HIGH, LOW)
    assert relief is not None and relief.shed_bytes == FULL >= relief.need_bytes
    assert replay.sizes == [FULL] * 7


@pytest.mark.parametrize("snapshot_before_the_election", [False, True])
def test_a_partial_future_replica_promoted_at_restart_is_sized_by_its_leader(snapshot_before_the_election):
    """KRaft JBOD: broker 3 restarts with heavy-0's future replica in the small dir, which the
    controller already names as its dir: Kafka promotes it at startup, short (two batches here),
    and drops the old one; broker 1 leads, broker 3 catches up from it as a follower. The dir's
    event sizes the landed replica at two batches: a follower's replica never lowers the
    partition's size. Once caught up, a preferred-leader election hands broker 3 the lead back:
    the partition event must tell the size its replica holds now, not the one of the poll in
    which it appeared in the small dir (a snapshot between the two tells the size right, and the
    volume's use, so that the relief is judged on them)."""
    replay = Replay()
    replay.poll(heavy(), cluster_dirs(small=()), snapshot=True)
    replay.poll(heavy(), cluster_dirs(small=((True, TWO_BATCHES),), small_used=TWO_BATCHES))
    moving = {"small": ((True, TWO_BATCHES),), "small_used": TWO_BATCHES}
    restarted(replay, moving, {"old": (), "small": ((False, TWO_BATCHES),), "small_used": TWO_BATCHES})
    assert replay.cluster.partition(HEAVY).log_dir_of(3) == SMALL
    for copied in (10 * BATCH, FULL):  # catching up from broker 1, then back in the ISR
        replay.poll(heavy(1, (1, 3) if copied == FULL else (1,), 1),
                    cluster_dirs(old=(), small=((False, copied),), small_used=copied))
    if snapshot_before_the_election:
        replay.poll(heavy(1, (1, 3), 1), cluster_dirs(old=(), small=((False, FULL),), small_used=FULL), snapshot=True)
    replay.poll(heavy(3, (1, 3), 2), cluster_dirs(old=(), small=((False, FULL),), small_used=FULL))
    if snapshot_before_the_election:
        relief = plan_disk_relief(replay.cluster, 3, SMALL, HIGH, LOW)
        assert relief is not None
        assert relief.shed_bytes == FULL >= relief.need_bytes, (relief.shed_bytes, relief.need_bytes)
    assert replay.sizes == [FULL] * len(replay.sizes)
