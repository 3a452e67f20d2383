"""The canary: per broker, the acks=all produce latency the cluster's clients see, measured with no
agent on the brokers (as LinkedIn's Xinfra Monitor does); the adaptive throttle reads it
(`planning.movement.throttle_control`).

THE RULE. The topic `<topic_prefix>.canary` has one partition led by each live broker
(`planning.movement.canary.compute_canary_layout`). Every `canary_interval_seconds` one small
record goes to each of those partitions (acks=all, nothing batched: one record, one produce
request), and a consumer reads them back. Per window of `canary_window_seconds` and per broker,
the p50/p99 of the produce latency (send → acknowledgement) and of the end-to-end latency (send →
read back) are one `CanarySample` on `<prefix>.canary-samples`, key the broker id.

KEEPER (`CanaryKeeper`, at start and then once per window): reads the live brokers
(DescribeCluster) and the canary topic alone (its Metadata and its reassignments), never another
partition of the cluster; then, by `compute_canary_actions`: creates the topic with the layout's
assignment when it is missing; adds partitions for brokers that lead none; reassigns the
partitions whose replicas the layout changes; elects the preferred leader of a partition whose
broker is in its ISR and does not lead it. A partition being reassigned is left alone until its
move ends (the keeper never fights a move, its own or another tool's).

PROBER (`Canary`), four threads: the loop (`run`: the keeper, the rounds of sends, the windows'
close and publication), the delivery reports (`producer.poll`), the read-back (`TopicReader`)
and the stall watch (`StallWatch`). A record is `PROBE`: this prober's id, the broker it is
charged to and its send time.

STALLS. The latencies are timed in Python, so a stretch in which the process itself held its
threads back (a garbage collection of the watcher's whole view holds the GIL for about a second
at 300,000 partitions, benchmarks/bench_canary_stalls.py) would land in every probe completing
during it, on every broker at once, and push the p99 the adaptive throttle reads over its SLO.
The stall watch wakes every `STALL_TICK_SECONDS` and notes each wake-up later than `STALL_MS`
as a stall (from when it was due to when it came); a probe whose send-to-completion overlaps a
stall is left out of its window's percentiles (counted in the log line, not as an error): the
process's own pause is not the cluster's latency. A probe that fails or times out is an error
whatever the stalls (a timeout is a whole window, no pause of the process's).

INVARIANTS
- Leader at send time: each round first asks the cluster who leads the canary's partitions (one
  Metadata request of that topic, `read_partition_leaders`); a record, its acknowledgement (or
  failure) and its read-back are charged to the broker that led its partition then, whenever
  they arrive; a partition without a leader is charged to the broker the layout gives it.
- A measurement belongs to the window in which it completes; a record not acknowledged within a
  window (`probe_producer_config`'s timeout) is an error of the window it fails in, counted in
  `errors` and kept out of the percentiles. Fewer than `MIN_SAMPLES` gives null percentiles.
- One CanarySample per broker charged with a record in the window (sent or completed), on the
  partition it was charged most records of; a broker that leads no canary partition (its
  partition not created yet, or led by another broker until the keeper's election) gets none
  that window: the pipeline forgets a stale reading (`compute_fresh_reading`), it never invents one.
- Produce latencies are librdkafka's (`Message.latency`), end-to-end ones `monotonic`
  differences in this process: records of another prober (another
  watcher, an earlier run: another id) are not read as ours. Reports and reads are taken by
  threads of their own, so nothing the loop waits on (Admin calls, a window's publication) is
  ever measured as latency. `clock` (time.time) dates the windows' ends (event_time) only.
- Never in the watcher's way: its own clients, its own thread. Any failure is one WARNING line
  and the step is tried again (the keeper and the reader under `Backoff`, from 1 s doubling to a
  window; a window that could not be published is lost, the next one is not); a missing ACL
  (`is_access_denied`) is said once and stops the canary alone.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Callable, Iterable, Mapping, Sequence

from planning.model import Broker
from planning.movement.canary import compute_canary_layout, summarize_latencies
from reassigner.edge.observation import Event
from runtime.backoff import Backoff, compute_wait
from runtime.clients.client_config import ClientConfig
from runtime.clients.cluster_observation import PartitionObservation
from runtime.clients.kafka_admin import ClusterAdmin
from runtime.clients.kafka_consumer import ConsumedRecord, TopicReader
from runtime.clients.kafka_errors import translate_kafka_error
from runtime.clients.kafka_producer import (EventPublisher, build_producer, probe_producer_config, producer_config,
                                            read_partition_leaders)
from runtime.settings import Settings
from schemas.errors import ReassignerError, is_access_denied
from schemas.loader import CURRENT_SCHEMA_VERSION

log = logging.getLogger(__name__)

SUFFIX = "canary-samples"
PROBE = struct.Struct(">B16sid")
"""A canary record: format (1), the prober's id (uuid4, 16 bytes), the broker it is charged to,
its send time (`monotonic` seconds). 29 bytes, no key: the partition is chosen, not hashed."""
PROBE_FORMAT = 1
STALL_TICK_SECONDS = 0.01
STALL_MS = 50.0  # a wake-up this late is the process's stall (a busy watcher's: under 30 ms, ~6 typical)
LEADERS_TIMEOUT_SECONDS = 1.0  # a round waits no longer for the leaders (then the last known ones serve)
PUBLISH_TIMEOUT_SECONDS = 10.0
POLL_SECONDS = 0.2  # how long the helper threads block at most: how soon they see the end


# --- the window's accounting (pure but for the lock) -------------------------------------------


@dataclass(frozen=True)
class WindowCounts:
    """What one window measured, per broker charged."""

    produce: tuple[tuple[int, float], ...] = ()  # (broker, ms) of each acknowledged record
    end_to_end: tuple[tuple[int, float], ...] = ()  # (broker, ms) of each record read back
    errors: Mapping[int, int] = field(default_factory=dict)  # records that failed or timed out
    partitions: Mapping[int, Mapping[int, int]] = field(default_factory=dict)  # broker → partition → records
    stalled: int = 0  # measurements left out: they overlapped a stall of this process (module STALLS)


class StallWatch:
    """The stalls of this process (module STALLS): `note` is given each wake-up (when it was due,
    when it came), `overlaps` says whether an interval met a stall. Stalls older than `keep`
    seconds before the newest wake-up are forgotten. Thread-safe."""

    def __init__(self, keep: float) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._stalls: list[tuple[float, float]] = []

    def note(self, due: float, came: float) -> None:
        with self._lock:
            if (came - due) * 1000.0 > STALL_MS:
                self._stalls.append((due, came))
            while self._stalls and self._stalls[0][1] < came - self.keep:
                self._stalls.pop(0)

    def overlaps(self, start: float, end: float) -> bool:
        with self._lock:
            return any(due < end and start < came for due, came in self._stalls)

    def run(self, done: threading.Event, monotonic: Callable[[], float] = time.monotonic) -> None:
        """The watch's thread: wake every `STALL_TICK_SECONDS` until `done`."""
        due = monotonic() + STALL_TICK_SECONDS
        while not done.wait(max(0.0, due - monotonic())):
            came = monotonic()
            self.note(due, came)
            due = came + STALL_TICK_SECONDS


class CanaryTally:
    """The current window's measurements. The loop, the delivery reports and the read-back add to
    it from their threads; `take` hands the window over and starts the next one, leaving out the
    measurements `stalled` says overlapped a stall of the process (module STALLS)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        self._produce: list[tuple[int, float, float, float]] = []  # broker, ms, sent, completed
        self._end_to_end: list[tuple[int, float, float, float]] = []
        self._errors: Counter[int] = Counter()
        self._partitions: dict[int, Counter[int]] = {}

    def _charge(self, broker: int, partition: int) -> None:
        self._partitions.setdefault(broker, Counter())[partition] += 1

    def sent(self, broker: int, partition: int) -> None:
        with self._lock:
            self._charge(broker, partition)

    def acknowledged(self, broker: int, partition: int, sent: float, completed: float) -> None:
        with self._lock:
            self._charge(broker, partition)
            self._produce.append((broker, (completed - sent) * 1000.0, sent, completed))

    def failed(self, broker: int, partition: int) -> None:
        with self._lock:
            self._charge(broker, partition)
            self._errors[broker] += 1

    def read_back(self, broker: int, sent: float, completed: float) -> None:
        with self._lock:
            self._end_to_end.append((broker, (completed - sent) * 1000.0, sent, completed))

    def take(self, stalled: Callable[[float, float], bool] = lambda _start, _end: False) -> WindowCounts:
        with self._lock:
            produce, end_to_end, errors = self._produce, self._end_to_end, dict(self._errors)
            partitions = {b: dict(c) for b, c in self._partitions.items()}
            self._start()
        kept_produce = tuple((b, ms) for b, ms, sent, done in produce if not stalled(sent, done))
        kept_end_to_end = tuple((b, ms) for b, ms, sent, done in end_to_end if not stalled(sent, done))
        left_out = len(produce) - len(kept_produce) + len(end_to_end) - len(kept_end_to_end)
        return WindowCounts(kept_produce, kept_end_to_end, errors, partitions, left_out)


def compute_canary_events(counts: WindowCounts, end_ms: int, window_ms: int,
                          new_id: Callable[[], str] = lambda: str(uuid.uuid4())) -> list[Event]:
    """One CanarySample per broker charged with a record in the window (module INVARIANTS), as
    `(suffix, key, record)` for `EventPublisher.publish_events`."""
    produce = summarize_latencies(counts.produce)
    end_to_end = summarize_latencies(counts.end_to_end)
    events: list[Event] = []
    for broker, charged in sorted(counts.partitions.items()):
        partition = min(charged, key=lambda p: (-charged[p], p))
        made, read = produce.get(broker), end_to_end.get(broker)
        key = str(broker)
        events.append((SUFFIX, key, {
            "schema_version": CURRENT_SCHEMA_VERSION, "event_time": end_ms, "id": new_id(), "key": key,
            "broker_id": broker, "partition": partition, "window_ms": max(1, window_ms),
            "samples": made.samples if made is not None else 0, "errors": counts.errors.get(broker, 0),
            "produce_p50_ms": made.p50_ms if made is not None else None,
            "produce_p99_ms": made.p99_ms if made is not None else None,
            "end_to_end_p50_ms": read.p50_ms if read is not None else None,
            "end_to_end_p99_ms": read.p99_ms if read is not None else None,
        }))
    return events


# --- the keeper's decisions (pure) -------------------------------------------------------------


def compute_topic_configs(replication: int) -> dict[str, str]:
    """The canary topic's configs: acks=all must still succeed with one replica out (min ISR 2 at
    most), and the records are worth nothing after a window: small segments, an hour kept."""
    return {"min.insync.replicas": str(max(1, min(2, replication))), "retention.ms": "3600000",
            "segment.ms": "600000", "segment.bytes": "1048576", "cleanup.policy": "delete"}


@dataclass(frozen=True)
class CanaryActions:
    """What the keeper does after one read (KEEPER); all empty when everything is in place."""

    led_by: Mapping[int, int]  # broker → the partition it is to lead (the layout's)
    create: Mapping[int, tuple[int, ...]] = field(default_factory=dict)  # a missing topic's whole assignment
    add: tuple[tuple[int, ...], ...] = ()  # the replicas of each new partition, in partition order
    total: int = 0  # the partitions the topic has after `add`
    reassign: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    elect: tuple[int, ...] = ()  # partitions whose preferred leader is elected

    @property
    def nothing(self) -> bool:
        return not (self.create or self.add or self.reassign or self.elect)


def compute_canary_actions(brokers: Iterable[Broker], partitions: Sequence[PartitionObservation] | None,
                           replication: int) -> CanaryActions:
    """The keeper's actions for the live `brokers` and the canary topic's `partitions` as read
    (None: the topic is missing). A partition being reassigned counts as being where its move
    goes and gets nothing until the move ends."""
    if partitions is None:
        layout = compute_canary_layout(brokers, {}, replication)
        if not layout.led_by:
            return CanaryActions(MappingProxyType({}))  # no live broker: nothing to create on
        return CanaryActions(layout.led_by, create=layout.assignment, total=layout.partitions)
    moving = {p.partition for p in partitions if p.adding or p.removing}
    current = {p.partition: tuple(r for r in p.replicas if r not in p.removing) for p in partitions}
    layout = compute_canary_layout(brokers, current, replication)
    by_id = {p.partition: p for p in partitions}
    elect = tuple(sorted(
        p for b, p in layout.led_by.items()
        if p in by_id and p not in moving and p not in layout.changed
        and by_id[p].replicas[:1] == (b,) and by_id[p].leader != b and b in by_id[p].isr))
    return CanaryActions(
        layout.led_by,
        add=tuple(layout.assignment[p] for p in range(len(current), layout.partitions)),
        total=layout.partitions,
        reassign=MappingProxyType({p: r for p, r in sorted(layout.changed.items()) if p not in moving}),
        elect=elect)


class CanaryKeeper:
    """Reads the live brokers and the canary topic, and applies `compute_canary_actions`."""

    def __init__(self, admin: ClusterAdmin, topic: str, replication: int) -> None:
        self.admin = admin
        self.topic = topic
        self.replication = replication

    def read(self) -> CanaryActions:
        """What is to be done now: three small requests (DescribeCluster, the Metadata of the one
        topic, its reassignments), whatever the cluster's size."""
        live = [Broker(b.broker_id, rack=b.rack) for b in self.admin.describe_brokers() if not b.fenced]
        return compute_canary_actions(live, self.admin.describe_topic(self.topic), self.replication)

    def apply(self, actions: CanaryActions) -> None:
        """Create, grow, reassign, elect, in that order; raises the first failure (the rest waits
        for the next check, which reads again)."""
        topic = self.topic
        if actions.create:
            replication = len(next(iter(actions.create.values())))
            if self.admin.create_topic_with_assignment(topic, actions.create, compute_topic_configs(replication)):
                log.info("canary: created %s, partition → replicas %s (the first one leads)", topic,
                         dict(sorted(actions.create.items())))
        if actions.add:
            self.admin.create_partitions(topic, actions.total, actions.add)
            log.info("canary: added %d partition(s) to %s for broker(s) %s", len(actions.add), topic,
                     [replicas[0] for replicas in actions.add])
        for partition, replicas in actions.reassign.items():
            self.admin.alter_partition_reassignment(topic, partition, replicas)
            log.info("canary: moving %s-%d to %s (its layout)", topic, partition, list(replicas))
        for partition in actions.elect:
            self.admin.elect_preferred_leader(topic, partition)
            log.info("canary: electing the preferred leader of %s-%d", topic, partition)


# --- the prober ---------------------------------------------------------------------------------


def encode_probe(prober: bytes, broker: int, sent: float) -> bytes:
    return PROBE.pack(PROBE_FORMAT, prober, broker, sent)


def decode_probe(value: bytes | None) -> tuple[bytes, int, float] | None:
    """(prober id, broker charged, send time) of a canary record; None for anything else."""
    if value is None or len(value) != PROBE.size or value[0] != PROBE_FORMAT:
        return None
    _format, prober, broker, sent = PROBE.unpack(value)
    return prober, broker, sent


class Canary:
    """The canary of one watcher process (module doc). `run(stop)` in a thread of its own; the
    clients are the caller's to close (`close`)."""

    def __init__(self, keeper: CanaryKeeper, publisher: EventPublisher, producer, reader: TopicReader,
                 settings: Settings, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 read_leaders: Callable[[], Mapping[int, int | None] | None] | None = None) -> None:
        self.keeper = keeper
        self.publisher = publisher
        self.producer = producer
        self.reader = reader
        self.settings = settings
        self.topic = keeper.topic
        self.clock = clock
        self.monotonic = monotonic
        self.read_leaders = read_leaders or partial(read_partition_leaders, producer, self.topic,
                                                    LEADERS_TIMEOUT_SECONDS)
        self.tally = CanaryTally()
        self.stalls = StallWatch(keep=2 * settings.canary_window_seconds)
        self.prober_id = uuid.uuid4().bytes
        self.led_by: Mapping[int, int] = {}  # broker → partition it is to lead (the keeper's last word)
        self.leaders: dict[int, int | None] = {}  # partition → leader, as last read
        self.following: frozenset[int] = frozenset()  # the partitions the reader is to read
        self.stopped_by: ReassignerError | None = None  # a missing ACL: the canary has stopped
        self._halt_lock = threading.Lock()
        window = settings.canary_window_seconds
        self.backoff = Backoff(min(1.0, window), window)
        self._check_delays = self.backoff.delays()
        self._check_failing = False
        self._window_started = monotonic()

    # --- the steps (the loop runs them; tests call them one by one) ------------------------------
    def keep_layout(self) -> float:
        """Read and apply the KEEPER's actions; the seconds until the next check (a window, or the
        backoff's next wait after a failure)."""
        try:
            actions = self.keeper.read()
            self.led_by = actions.led_by
            self.following = frozenset(actions.led_by.values())
            if not actions.nothing:
                self.keeper.apply(actions)
        except Exception as error:
            return self._check_failed(error)
        if self._check_failing:
            log.info("canary: %s is kept again", self.topic)
            self._check_failing = False
        self._check_delays = self.backoff.delays()
        return self.settings.canary_window_seconds

    def _check_failed(self, error: Exception) -> float:
        translated = error if isinstance(error, ReassignerError) else None
        if translated is not None and is_access_denied(translated):
            self._halt(translated)
            return self.settings.canary_window_seconds
        wait = compute_wait(self._check_delays, error, self.backoff)
        self._check_failing = True
        if translated is None:  # a defect: said in one line, its traceback at DEBUG
            log.debug("canary: keeping %s failed", self.topic, exc_info=True)
            log.warning("canary: keeping %s failed: %s: %s; will retry in %.1f s", self.topic,
                        type(error).__name__, error, wait)
        else:
            log.warning("canary: keeping %s failed: [%s] %s; will retry in %.1f s", self.topic,
                        translated.code, translated, wait)
        return wait

    def send_round(self) -> None:
        """One record to each partition of the layout the cluster knows, charged to its leader now."""
        try:
            leaders = self.read_leaders()
            self.leaders = dict(leaders) if leaders is not None else {}
        except ReassignerError as error:
            if is_access_denied(error):
                self._halt(error)
                return
            log.debug("canary: %s; the leaders last read are used", error)
        for broker, partition in sorted(self.led_by.items()):
            if partition not in self.leaders:
                continue  # not in the metadata yet (created moments ago): nothing to charge
            leader = self.leaders[partition]
            charged = leader if leader is not None else broker
            sent = self.monotonic()
            try:
                self.producer.produce(self.topic, value=encode_probe(self.prober_id, charged, sent),
                                      partition=partition, on_delivery=partial(self._delivered, charged, partition, sent))
            except Exception as error:  # BufferError (the queue is full), an unknown partition: not sent
                log.debug("canary: sending to %s-%d: %s", self.topic, partition, error)
                self.tally.failed(charged, partition)
                continue
            self.tally.sent(charged, partition)

    def _delivered(self, broker: int, partition: int, sent: float, error, message) -> None:
        """A delivery report (the reports' thread): the produce latency is librdkafka's own
        (`Message.latency`, produce call to acknowledgement), so the time this thread waits for
        the GIL before it runs is not read as the broker's; where none is given, this thread's."""
        if error is None:
            latency = message.latency() if message is not None and hasattr(message, "latency") else None
            done = sent + latency if latency is not None and latency >= 0 else self.monotonic()
            self.tally.acknowledged(broker, partition, sent, done)
            return
        self.tally.failed(broker, partition)
        translated = translate_kafka_error(error, f"writing to {self.topic}-{partition}")
        if is_access_denied(translated):
            self._halt(translated)
        else:
            log.debug("canary: %s", translated)

    def read_back(self, record: ConsumedRecord) -> None:
        """One record read back (the reader's thread): its end-to-end latency, if it is ours."""
        probe = decode_probe(record.value)
        if probe is None or probe[0] != self.prober_id:
            return
        _prober, broker, sent = probe
        self.tally.read_back(broker, sent, self.monotonic())

    def close_window(self) -> int:
        """Publish the window that ends now (one CanarySample per broker charged); how many."""
        now = self.monotonic()
        counts = self.tally.take(self.stalls.overlaps)
        window_ms = round((now - self._window_started) * 1000)
        self._window_started = now
        events = compute_canary_events(counts, int(self.clock() * 1000), window_ms)
        if not events:
            return 0
        try:
            self.publisher.publish_events(events, min(PUBLISH_TIMEOUT_SECONDS, self.settings.canary_window_seconds))
        except ReassignerError as error:
            if is_access_denied(error):
                self._halt(error)
            else:
                log.warning("canary: the window's %d samples were not published: [%s] %s; the next window's "
                            "will be, at its end", len(events), error.code, error)
            return 0
        log.debug("canary window of %d ms: %s%s", window_ms, "; ".join(
            f"broker {r['broker_id']}: p99 {r['produce_p99_ms']} ms, {r['samples']} samples, {r['errors']} errors"
            for _suffix, _key, r in events),
            f" ({counts.stalled} measurements left out: they overlapped a stall of this process)"
            if counts.stalled else "")
        return len(events)

    def _halt(self, error: ReassignerError) -> None:
        with self._halt_lock:
            if self.stopped_by is not None:
                return
            self.stopped_by = error
        log.warning(
            "the canary stops: [%s] %s. It needs Describe, Create, Write and Read on the topic %s and Alter "
            "on the cluster (e.g. kafka-acls.sh --add --allow-principal <principal> --operation Describe "
            "--operation Create --operation Write --operation Read --topic %s, and --cluster --operation Alter), "
            "or turn it off (canary_enabled=false); the watcher goes on, and without CanarySamples the "
            "adaptive throttle holds its rates", error.code, error, self.topic, self.topic)

    # --- the threads -----------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Keep the layout and probe until `stop` is set or a missing ACL stops the canary."""
        settings = self.settings
        log.info("canary: one record every %.1f s to each partition of %s, one partition led by each live "
                 "broker; latencies per %.0f s window on %s", settings.canary_interval_seconds, self.topic,
                 settings.canary_window_seconds, settings.topic(SUFFIX))
        done = threading.Event()
        helpers = [threading.Thread(target=self._serve_deliveries, args=(done,), name="canary-reports", daemon=True),
                   threading.Thread(target=self._read_until, args=(done,), name="canary-reader", daemon=True),
                   threading.Thread(target=self.stalls.run, args=(done,), name="canary-stalls", daemon=True)]
        for helper in helpers:
            helper.start()
        try:
            self._loop(stop)
        finally:
            done.set()
            for helper in helpers:
                helper.join(5.0)

    def _loop(self, stop: threading.Event) -> None:
        interval, window = self.settings.canary_interval_seconds, self.settings.canary_window_seconds
        now = self.monotonic()
        self._window_started = now
        next_check = next_round = now
        while not stop.is_set() and self.stopped_by is None:
            if self.monotonic() >= next_check:
                next_check = self.monotonic() + self.keep_layout()
            if self.monotonic() >= self._window_started + window:
                self.close_window()
            if self.led_by and self.monotonic() >= next_round:
                self.send_round()
                # Rounds missed while the loop waited (a slow check) are skipped, not sent in a burst.
                next_round = max(next_round + interval, self.monotonic())
            due = min(next_check, self._window_started + window, next_round if self.led_by else next_check)
            stop.wait(min(POLL_SECONDS, max(0.0, due - self.monotonic())))

    def _serve_deliveries(self, done: threading.Event) -> None:
        """The reports' thread: each acknowledgement is taken the moment it arrives."""
        while not done.is_set() and self.stopped_by is None:
            try:
                self.producer.poll(POLL_SECONDS)
            except Exception as error:  # a defect in a report's handling; never a hot loop
                log.warning("canary: handling a delivery report failed: %s: %s", type(error).__name__, error)
                done.wait(1.0)

    def _read_until(self, done: threading.Event) -> None:
        """The reader's thread: follow the layout's partitions and read every record back."""
        followed: frozenset[int] | None = None
        delays = self.backoff.delays()
        while not done.is_set() and self.stopped_by is None:
            try:
                wanted = self.following
                if wanted != followed:
                    self.reader.follow(self.topic, wanted)
                    followed = wanted
                record = self.reader.poll_or_raise(POLL_SECONDS)
                if record is not None:
                    self.read_back(record)
                delays = self.backoff.delays()
            except ReassignerError as error:
                if is_access_denied(error):
                    self._halt(error)
                    return
                wait = compute_wait(delays, error, self.backoff)
                log.warning("canary: reading %s back failed: [%s] %s; will retry in %.1f s", self.topic,
                            error.code, error, wait)
                done.wait(wait)
            except Exception as error:  # a defect: one line, never a hot loop
                wait = compute_wait(delays, error, self.backoff)
                log.warning("canary: reading %s back failed: %s: %s; will retry in %.1f s", self.topic,
                            type(error).__name__, error, wait)
                done.wait(wait)

    def close(self) -> None:
        """Close the canary's clients (after `run` returned)."""
        for closing in (self.reader.close, lambda: self.publisher.close(), self.keeper.admin.close):
            try:
                closing()
            except Exception as error:  # a half-broken client must not keep the others open
                log.debug("canary: closing a client: %s", error)


def build_canary(settings: Settings, client_config: ClientConfig | None, clock: Callable[[], float] = time.time,
                 ) -> Canary:
    """A canary with clients of its own (the watcher's are never shared: a window's publication
    never waits on a snapshot's, nor a poll on the canary), made with the same security settings
    as the watcher's (`client_config`)."""
    bootstrap = settings.bootstrap_servers
    # A record slower than a window is an error of the window, not a latency: the timeout is a window.
    timeout_ms = max(1000, int(settings.canary_window_seconds * 1000))
    admin = ClusterAdmin(bootstrap, client_config, request_timeout_ms=10000)
    keeper = CanaryKeeper(admin, settings.topic("canary"), settings.canary_replication_factor)
    publisher = EventPublisher(producer_config(bootstrap, client_config, "reassigner-canary-samples"),
                               settings.topic_prefix)
    producer = build_producer(probe_producer_config(bootstrap, client_config, "reassigner-canary", timeout_ms))
    reader = TopicReader(bootstrap, client_config, "canary")
    return Canary(keeper, publisher, producer, reader, settings, clock)


def start_canary(settings: Settings, client_config: ClientConfig | None, stop: threading.Event) -> threading.Thread:
    """`build_canary` run in a daemon thread until `stop` (its clients closed at the end); join
    the thread after setting `stop`."""
    canary = build_canary(settings, client_config)

    def run() -> None:
        try:
            canary.run(stop)
        except Exception as error:  # never reached by design; if it is, the watcher still goes on
            log.warning("the canary stopped: %s: %s", type(error).__name__, error)
        finally:
            canary.close()

    thread = threading.Thread(target=run, name="canary", daemon=True)
    thread.start()
    return thread
