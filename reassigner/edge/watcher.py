"""The watcher: polls the cluster, diffs against its last view, publishes what changed.

ONE POLL, in this order:
1. observe the cluster (`ClusterAdmin.observe`), reading the log dirs when due (every
   `log_dirs_interval_seconds`, and for every snapshot) or when the metadata hints a change;
2. compute the events: a full snapshot when one is due (on start, then every
   `snapshot_interval_seconds`), else the change events against the last *published* view. A
   cluster of more than `snapshot_slice_partitions` partitions gets its snapshot over several
   polls (SLICED SNAPSHOTS, `reassigner.edge.observation`): each poll's change events, plus the
   START, the partitions `snapshot_slice_partitions` at a time and the END with that poll's
   inventory — no poll waits on a whole snapshot (12 s to build and encode at 300,000 partitions);
3. publish them (idempotent producer, acks=all) and wait for every acknowledgement;
4. only then adopt the observation as the new view, and count the poll (`runtime.metrics`).
A poll that fails anywhere leaves the view as it was, so the next successful poll publishes the
changes again (state-carrying events make a repeat harmless): nothing is lost in an outage.

TIMES. Every event of a poll carries the time the poll began reading the cluster. What it read
is Kafka's state at that time or later, so a view stamped after a moment (the executor's report
that it applied a step) was read after it, however long the poll took, which
`planning.movement.completion` relies on (INTERRUPTED); polls do not overlap.

INVARIANTS
- The clock is read here (`clock()`, default `time.time`), never in `observation.py`.
- A poll never runs more often than every `poll_interval_seconds`; after a failure the wait
  doubles up to `watcher_max_backoff_seconds` and the log says "will retry in N s": the loop
  never hot-loops against a dead cluster and never stops because of one.
- The cycle collector runs only between polls, and the surviving heap is frozen (`runtime.heap`):
  at 300,000 partitions CPython's own full collections cost more CPU than the polls' work.
- TRAFFIC: at each snapshot's start (`traffic_sampling`) the watcher reads every led
  partition's log start and end offsets and the consumer groups' committed offsets; the
  snapshot's partition events carry the rates between this sample and the one before
  (`reassigner.edge.traffic`). A failed read skips one sample and never fails the poll.
- KAFKA VERSION: the first poll, and each snapshot's after it (an upgrade shows within a
  snapshot period), reads the cluster's finalized features and logs, when it changed, which
  Kafka it runs and what the product does there, one line per capability it lacks
  (`runtime.kafka_versions`); each snapshot's START marker tells the pipeline (`status` shows
  it, the handlers decide by it). A cluster the product cannot run on (ZooKeeper mode, KRaft
  older than 3.7) stops the watcher with that one line, as a missing ACL does.
- INFO is logged only for real changes (a broker, topic or dir changing, a reassignment starting
  or ending); the partition-level churn of a busy cluster is DEBUG.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import Callable

from planning.model import KafkaFacts
from runtime.clients.kafka_admin import ClusterAdmin
from runtime.clients.cluster_observation import EMPTY, ClusterObservation
from reassigner.edge.observation import (Event, compute_events, compute_snapshot_end, compute_snapshot_events,
                                         compute_snapshot_slice, compute_snapshot_start)
from reassigner.edge.traffic import TrafficSample, TrafficWindow
from runtime.clients.kafka_producer import EventPublisher
from runtime.backoff import Backoff, compute_wait
from schemas.errors import KafkaPermanentError, ReassignerError, is_access_denied
from runtime.heap import HeapKeeper
from runtime.kafka_versions import ELIGIBLE_LEADERS, ClusterSupport, assess_cluster
from runtime.metrics import count_failed_poll, count_poll
from runtime.settings import Settings
from schemas.codec import topic_name

log = logging.getLogger(__name__)

# canary-samples: written by the canary (`reassigner.edge.canary`), which runs beside the watcher.
WATCHER_TOPICS = ("broker-membership", "isr-changes", "disk-failures", "topic-state", "snapshots", "canary-samples")


@dataclass(frozen=True)
class SnapshotInProgress:
    """A sliced snapshot between its START and its END."""

    snapshot_id: str
    started_ms: int
    keys: tuple  # the partitions at its START, in order
    position: int = 0  # how many of them were told
    told: int = 0  # partition events published (keys gone since are skipped)


@dataclass(frozen=True)
class PollOutcome:
    """What one poll did (for logs, tests and the benchmark)."""

    events: int
    snapshot_id: str | None
    observe_seconds: float
    diff_seconds: float
    publish_seconds: float


class Watcher:
    def __init__(self, admin: ClusterAdmin, publisher: EventPublisher, settings: Settings,
                 clock: Callable[[], float] = time.time) -> None:
        self.admin = admin
        self.publisher = publisher
        self.settings = settings
        self.clock = clock
        self.view: ClusterObservation = EMPTY
        self._next_snapshot_at = 0.0  # a snapshot on start
        self._next_log_dirs_at = 0.0
        self._topics_ready = False
        self._snapshot: SnapshotInProgress | None = None
        self._traffic_sample: TrafficSample | None = None  # the last one read (TRAFFIC)
        self._traffic: TrafficWindow | None = None  # the last two: the rates the snapshots carry
        self.kafka: ClusterSupport | None = None  # KAFKA VERSION, read at the first poll

    def prepare_topics(self) -> None:
        """Create the topics this watcher writes if they are missing."""
        names = [topic_name(suffix, self.settings.topic_prefix) for suffix in WATCHER_TOPICS]
        created = self.admin.ensure_topics(names, partitions=self.settings.event_topic_partitions)
        if created:
            log.info("created topics %s", ", ".join(created))
        self._topics_ready = True

    def poll_once(self) -> PollOutcome:
        """One poll (see module doc); raises `ReassignerError` and leaves the view unchanged.
        Counted (`runtime.metrics`): a poll whose events were acknowledged, or a failed one."""
        try:
            return self._poll()
        except ReassignerError as error:
            count_failed_poll(error.code)
            raise

    def check_kafka(self) -> ClusterSupport:
        """Read which Kafka the cluster runs and log it when it changed (KAFKA VERSION);
        `KafkaPermanentError` UNSUPPORTED_VERSION, in one line, for a cluster the product cannot
        run on."""
        support = assess_cluster(self.admin.describe_kafka())
        if support.refusal is not None:
            raise KafkaPermanentError(support.refusal, "UNSUPPORTED_VERSION")
        if support != self.kafka:
            log.info("the cluster runs %s", support.summary())
            for warning in support.warnings:
                log.warning("%s", warning)
        self.kafka = support
        return support

    def _kafka_facts(self) -> KafkaFacts | None:
        """What the snapshots tell the pipeline of the cluster's Kafka (KAFKA VERSION)."""
        support = self.kafka
        return None if support is None else KafkaFacts(support.release, support.level, support.has)

    def _poll(self) -> PollOutcome:
        snapshot_due = self._snapshot is None and self.clock() >= self._next_snapshot_at
        kafka = self.kafka if self.kafka is not None and not snapshot_due else self.check_kafka()
        if not self._topics_ready:
            self.prepare_topics()
        started = time.monotonic()
        polled_at = self.clock()
        log_dirs_due = snapshot_due or polled_at >= self._next_log_dirs_at
        current = self.admin.observe(self.view, log_dirs_due=log_dirs_due,
                                     eligible_leaders=ELIGIBLE_LEADERS in kafka.has)
        observed = time.monotonic()
        now = self.clock()
        now_ms = int(polled_at * 1000)  # the poll's time: when it began reading (TIMES)
        snapshot = self._snapshot
        slice_size = self.settings.snapshot_slice_partitions
        if snapshot_due and self.settings.traffic_sampling:
            self._sample_traffic(current)
        if snapshot_due and len(current.partitions) <= slice_size:
            snapshot = SnapshotInProgress(str(uuid.uuid4()), now_ms, ())
            events = compute_snapshot_events(current, snapshot.snapshot_id, now_ms, self._traffic,
                                             self._kafka_facts())
            finished = True
        else:
            events = compute_events(self.view, current, now_ms)
            if snapshot_due:  # a sliced snapshot begins (see SLICED SNAPSHOTS)
                snapshot = SnapshotInProgress(str(uuid.uuid4()), now_ms, tuple(current.partitions))
                events += compute_snapshot_start(current, snapshot.snapshot_id, now_ms, self._kafka_facts())
            finished = False
            if snapshot is not None:
                keys = snapshot.keys[snapshot.position:snapshot.position + slice_size]
                told = compute_snapshot_slice(current, snapshot.snapshot_id, keys, now_ms, self._traffic)
                events += told
                snapshot = replace(snapshot, position=snapshot.position + len(keys), told=snapshot.told + len(told))
                if snapshot.position >= len(snapshot.keys):
                    events += compute_snapshot_end(current, snapshot.snapshot_id, snapshot.started_ms, now_ms,
                                                   snapshot.told)
                    finished = True
        diffed = time.monotonic()
        if events:
            self.publisher.publish_events(events)
        published = time.monotonic()
        self._log_changes([e for e in events if e[2].get("snapshot_id") is None])
        if snapshot is not None and finished:
            log.debug("published snapshot %s: %d brokers, %d topics, %d partitions, %d dirs",
                      snapshot.snapshot_id, len(current.brokers), len(current.topics),
                      len(current.partitions), len(current.log_dirs))
            self._next_snapshot_at = now + self.settings.snapshot_interval_seconds
        # Only once published: a poll that failed leaves the snapshot where it was, too.
        self._snapshot = None if finished else snapshot
        if log_dirs_due:
            self._next_log_dirs_at = polled_at + self.settings.log_dirs_interval_seconds
        self.view = current
        count_poll(events, {"observe": observed - started, "diff": diffed - observed, "publish": published - diffed,
                            "total": published - started},
                   self.clock() - snapshot.started_ms / 1000 if snapshot is not None and finished else None)
        return PollOutcome(len(events), snapshot.snapshot_id if snapshot is not None else None,
                           observed - started, diffed - observed, published - diffed)

    def _sample_traffic(self, current: ClusterObservation) -> None:
        """Read the offsets of this snapshot's TRAFFIC sample; a read that fails skips the
        sample (the pipeline keeps the rates it knew), and groups that cannot be read leave
        bytes out unknown."""
        at_ms = int(self.clock() * 1000)
        keys = [key for key, p in current.partitions.items() if p.leader is not None]
        try:
            offsets = self.admin.read_log_offsets(keys)
        except ReassignerError as error:
            log.warning("traffic not sampled at this snapshot (rates stay as they were): %s", error)
            return
        try:
            committed = self.admin.read_committed_offsets()
        except ReassignerError as error:
            log.warning("consumer groups not read at this snapshot (bytes out unknown): %s", error)
            committed = None
        sample = TrafficSample(at_ms, offsets, committed)
        self._traffic = None if self._traffic_sample is None else TrafficWindow(self._traffic_sample, sample)
        self._traffic_sample = sample

    def run(self, stop: threading.Event) -> None:
        """Poll until `stop` is set; survive any outage of the cluster (the one retry policy,
        from the poll interval doubling to `watcher_max_backoff_seconds`)."""
        interval = self.settings.poll_interval_seconds
        backoff = Backoff(interval, max(interval, self.settings.watcher_max_backoff_seconds))
        heap = HeapKeeper(automatic_collection=False)  # a poll's answers are millions of objects (`runtime.heap`)
        try:
            self._poll_until_stopped(stop, interval, backoff, heap)
        finally:
            heap.close()

    def _poll_until_stopped(self, stop: threading.Event, interval: float, backoff: Backoff, heap: HeapKeeper) -> None:
        delays = backoff.delays()
        failing = False
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.poll_once()
            except ReassignerError as error:
                heap.after_batch()
                if is_access_denied(error) or error.code == "UNSUPPORTED_VERSION":
                    raise  # a missing ACL, or a Kafka the product cannot run on, never comes back by itself
                wait = compute_wait(delays, error, backoff)
                log.warning("poll failed: [%s] %s; will retry in %.1f s", error.code, error, wait)
                failing = True
                stop.wait(wait)
                continue
            if failing:
                log.info("the cluster answers again; polling every %.1f s", interval)
                failing = False
            delays = backoff.delays()
            heap.after_batch()  # no full collection walking the whole view every few polls
            stop.wait(max(0.0, interval - (time.monotonic() - started)))

    @staticmethod
    def _log_changes(events: list[Event]) -> None:
        for suffix, key, record in events:
            if suffix == "broker-membership":
                log.info("broker %s is %s (rack %s)", key, record["state"], record["rack"])
            elif suffix == "topic-state":
                log.info("topic %s %s (%d partitions, RF %d, min ISR %s)", key,
                         "deleted" if record["deleted"] else "changed", record["partition_count"],
                         record["replication_factor"], record["min_insync_replicas"])
            elif suffix == "disk-failures" and not record["online"]:
                log.warning("log dir %s of broker %s is OFFLINE%s", record["path"], key,
                            f" ({record['error']})" if record["error"] else "")
            elif suffix == "disk-failures":  # published whenever its bytes or replicas change
                log.debug("log dir %s of broker %s is online", record["path"], key)
            else:
                log.debug("partition %s: replicas %s isr %s leader %s adding %s removing %s", key,
                          record["replicas"], record["isr"], record["leader"], record["adding"],
                          record["removing"])
