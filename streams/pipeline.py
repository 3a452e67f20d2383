"""The pipeline: one Spark Structured Streaming query, the brain of the product (SPEC 2, 6).

The query reads the event, request and command-result topics (Kafka source, checkpointed),
decodes each topic's values with `from_avro` and the topic's own schema in PERMISSIVE mode (an
undecodable value becomes nulls, never a failed query), and hands every micro-batch to
`PipelineRunner.process_batch`, which follows this order, always:

1. **skip what was applied**: only records above the input offsets stored with the state are
   applied (`streams.offsets`); a batch with none (Spark re-runs the last batch after a restart)
   re-publishes a pending outbox and stops there. Spark's batch ids play no part: the batches
   the pipeline applies are numbered by `last_batch` + 1, so any checkpoint dir, or none, is safe;
2. **reduce**: split undecodable rows off; collapse state-carrying events (brokers, topics, log
   dirs, partitions) to the latest per key — in Spark when the batch is big, so that a burst of
   100,000 ISR events costs one row per partition at the driver, at the driver when it is small
   (one Spark job less on the latency path); order the rest by (topic, partition, offset);
3. **decode at the driver** with fastavro (`schemas.codec`), giving the handlers the same dicts
   every other component sees;
4. **decide**: `handlers.decide.decide_isolating(state, inputs, policy)`, a pure function (an
   input on which deciding fails becomes a dead letter; the rest of the batch is applied);
5. **persist** the new state, the batch's sequence number, the outbox and the input offsets it
   consumed in one atomic Redis transition, refused if a newer instance took over (the epoch);
6. **publish** the outbox with an idempotent producer and wait for every acknowledgement;
7. **mark published**: drop the outbox from Redis.

METRICS (`runtime.metrics`): a batch is counted once, right after step 5 succeeded, from its
inputs, its outbox and the states before and after (`compute_batch_counts`); a batch that
fails before its commit and is retried, a replay, or a batch another writer committed counts
nothing. Its phase durations are observed after step 7.

A crash anywhere leaves a consistent story: before 5 the records are read again and decided on
the same state, giving the same commands with the same ids (same batch number); between 5 and 7 the outbox is
re-published on start (the executor recognises command ids it has applied). On start the
instance bumps the planner epoch; its commands carry it and the executor refuses older ones.

STORE LOST: each commit is verified (`state.controller_store`, VERIFIED): a Redis emptied or
restored from an older copy under the running pipeline is found at the next batch, before
anything is written over it. This instance's state is then the truth the store lost — every
batch it committed, fold by fold — so it is written back whole (`ControllerStore.reseed`) with
the applied input offsets, under an epoch above any before (commands already published stay
valid; the executor waits while the store holds no planner epoch), one `StateStoreLost` ERROR
alert says what was found, and the batch is decided again on it. A query started again in this
process checks the store against its last commit first (`start`); a first start checks it
against what the product published (`streams.store_recovery`) and rebuilds it from Kafka when
it is behind, before any outbox it holds is re-published.

SIGNED COMMANDS: with `command_signing_key_file` set, every command published (step 6, and an
outbox re-published on start) carries an HMAC-SHA256 signature header over its topic, key,
schema version header and value (`schemas.signing`); the executor refuses commands without a
good one. On start the pipeline records its key's fingerprint (or "unsigned") in the state store
and warns, in one line, when the executor's recorded signing does not match.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from handlers.micro_batch import BadRecord, BatchInputs
from handlers.outbox import ERROR, build_alert, compute_restamped
from handlers.decide import decide_isolating
from handlers.policy import Policy
from state.model import ControllerState, OutboundMessage
from runtime.backoff import Backoff, retry_transient
from runtime.clients.kafka_producer import publish_all_and_wait
from runtime.clients.redis_io import retry_redis
from schemas.errors import FencedError, StateStoreLostError, TransientError
from runtime.metrics import (compute_batch_counts, compute_in_flight, count_batch_phases, count_committed_batch,
                                count_pipeline_state, count_replayed_batch, count_state_store_lost)
from runtime.settings import Settings, read_command_signing_key
from schemas.codec import (
    TOPICS,
    DecodeError,
    decode,
    encode,
    schema_json,
    version_headers,
    writer_version_from_headers,
)
from schemas.loader import CURRENT_SCHEMA_VERSION
from schemas.signing import UNSIGNED, compute_signed_headers, compute_signing_mismatch
from state.controller_store import ControllerStore, read_signing_announcements, store_signing_announcement
from runtime.heap import HeapKeeper
from streams.offsets import (compute_advanced, compute_checkpoint_gap, compute_consumed,
                             compute_starting_offsets, compute_truncated, compute_unapplied,
                             read_checkpoint_positions)
from streams.spark_session import kafka_client_options
from streams.store_recovery import (PublishedMarks, compute_rebuilt_offsets, compute_rebuilt_state,
                                    compute_store_behind)

log = logging.getLogger(__name__)

INPUT_TOPICS = ("broker-membership", "topic-state", "disk-failures", "isr-changes", "snapshots",
                "requests", "command-results")
STATE_CARRYING = ("broker-membership", "topic-state", "disk-failures", "isr-changes")


@dataclass
class PipelineStats:
    batches: int = 0
    replayed: int = 0
    input_rows: int = 0
    commands: int = 0
    alerts: int = 0
    last_batch_seconds: float = 0.0
    last_phase_seconds: dict[str, float] | None = None


def source_timeouts(client_properties: Mapping[str, str]) -> dict[str, str]:
    """The Kafka source's request and API timeouts (ms): 5 s / 10 s unless the client settings
    say otherwise; the API timeout is never below the request timeout (the Admin client refuses
    that combination at start)."""
    request_timeout = int(client_properties.get("request.timeout.ms", "5000"))
    api_timeout = int(client_properties.get("default.api.timeout.ms", max(10_000, request_timeout)))
    return {"kafka.request.timeout.ms": str(request_timeout),
            "kafka.default.api.timeout.ms": str(max(api_timeout, request_timeout))}


def build_input_stream(spark, settings: Settings, client_properties: dict[str, str],
                       starting_offsets: str = "earliest"):
    """The Kafka source over every input topic, one decoded struct column per topic; a new
    checkpoint starts at `starting_offsets` (`streams.offsets.compute_starting_offsets`)."""
    topics = [settings.topic(suffix) for suffix in INPUT_TOPICS]
    source = (
        spark.readStream.format("kafka")
        .options(**kafka_client_options(settings.bootstrap_servers or "", client_properties))
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", starting_offsets)
        .option("failOnDataLoss", "false")
        # The writer's schema set version travels in a header (`schemas.codec`): a record of an
        # older set is decoded with it at the driver (`compute_batch_inputs`).
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", str(settings.max_records_per_batch))
        # The source's consumers leave a fetch in flight at the end of the log; the broker holds
        # it for fetch.max.wait.ms (500 ms by default) and the next micro-batch's read waits for
        # it. A short wait takes ~500 ms off the event-to-command latency.
        .option("kafka.fetch.max.wait.ms", client_properties.get("fetch.max.wait.ms", "10"))
        # A broker that dies, or whose log dir fails, takes leaders of some input partitions
        # with it; the source's Admin listOffsets then sat for default.api.timeout.ms (60 s)
        # before Spark retried with a fresh Admin client, which found the new leaders at once:
        # every reaction to that failure waited a minute. 10 s per attempt and 18 attempts keep
        # the default's 3 minutes before the query gives up.
        .options(**source_timeouts(client_properties))
        .option("fetchOffset.numRetries", "18")
        .option("fetchOffset.retryIntervalMs", "200")
        .load()
    )
    return decode_records(source, settings)


def decode_records(records, settings: Settings):
    """Kafka records (topic, partition, offset, key, value) with one decoded column per topic."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    columns = [F.col("topic"), F.col("partition"), F.col("offset"), F.col("key"), F.col("value"),
               F.col("headers")]
    for suffix in INPUT_TOPICS:
        decoded = from_avro(F.col("value"), schema_json(TOPICS[suffix]), {"mode": "PERMISSIVE"})
        # CASE WHEN evaluates the decoder only for rows of its own topic.
        columns.append(F.when(F.col("topic") == settings.topic(suffix), decoded)
                       .alias(suffix.replace("-", "_")))
    return records.select(*columns)


# Up to this many rows a micro-batch is collected as it is and collapsed at the driver; above
# it Spark collapses it (a window over a shuffle, ~150 ms more on this machine), so that a burst
# of 100,000 ISR events still reaches the driver as one row per partition.
DRIVER_COLLAPSE_ROWS = 5_000


def annotate_batch(batch, settings: Settings):
    """Every row of the batch with `decoded_ok`, its `subject` and whether it is `collapsible`.

    The subject of a state-carrying event is what it is the whole state of: its Kafka key,
    except for log dirs, which are keyed by broker (SPEC 7) but carry the state of one dir each.
    Only decoded state-carrying events collapse; undecodable rows (each becomes a dead letter),
    requests and results all survive.
    """
    from pyspark.sql import functions as F

    decoded_ok = F.lit(False)
    for suffix in INPUT_TOPICS:
        column = suffix.replace("-", "_")
        decoded_ok = F.when(F.col("topic") == settings.topic(suffix),
                            F.col(f"{column}.id").isNotNull()).otherwise(decoded_ok)
    state_topics = [settings.topic(s) for s in STATE_CARRYING]
    subject = F.when(F.col("topic") == settings.topic("disk-failures"),
                     F.concat_ws(":", F.col("key").cast("string"), F.col("disk_failures.path"))
                     ).otherwise(F.col("key").cast("string"))
    return (
        batch.withColumn("decoded_ok", decoded_ok)
        .withColumn("subject", subject)
        .withColumn("collapsible", F.col("decoded_ok") & F.col("topic").isin(state_topics))
        .select("topic", "partition", "offset", "value", "headers", "decoded_ok", "subject", "collapsible")
    )


def collapse_in_spark(annotated):
    """The latest row per (topic, subject) among collapsible rows; every other row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    latest_first = Window.partitionBy("topic", "subject").orderBy(F.col("partition").desc(),
                                                                  F.col("offset").desc())
    return (
        annotated.withColumn("rank", F.when(F.col("collapsible"), F.row_number().over(latest_first))
                             .otherwise(1))
        .where(F.col("rank") == 1)
        .drop("rank")
    )


def latest_per_subject(rows: Iterable[Any]) -> list[Any]:
    """`collapse_in_spark` at the driver, for a batch small enough to collect whole."""
    latest: dict[tuple[str, str], Any] = {}
    kept: list[Any] = []
    for row in rows:
        if not row.collapsible:
            kept.append(row)
            continue
        subject = (row.topic, row.subject)
        known = latest.get(subject)
        if known is None or (row.partition, row.offset) > (known.partition, known.offset):
            latest[subject] = row
    return kept + list(latest.values())


def reduce_batch(batch, settings: Settings) -> tuple[list[Any], dict[tuple[str, int], int]]:
    """Step 2: the rows that survive the collapse, collected (no sort: the driver orders them),
    and the greatest offset the batch holds per input partition (collapsed rows included).

    A small batch costs one Spark job: a scan limited to `DRIVER_COLLAPSE_ROWS` + 1 rows, which
    holds the whole batch, collapsed at the driver. A bigger one also runs the collapse and the
    offset maxima in Spark.
    """
    from pyspark.sql import functions as F

    annotated = annotate_batch(batch, settings)
    head = annotated.limit(DRIVER_COLLAPSE_ROWS + 1).collect()
    if len(head) <= DRIVER_COLLAPSE_ROWS:
        return latest_per_subject(head), compute_consumed((r.topic, r.partition, r.offset) for r in head)
    ends = annotated.groupBy("topic", "partition").agg(F.max("offset").alias("offset")).collect()
    return collapse_in_spark(annotated).collect(), {(r.topic, r.partition): r.offset for r in ends}


def compute_writer_version(headers: Iterable[Any] | None) -> int | None:
    """The schema set version a record's `schema_version` header names (Spark gives headers as
    (key, value) rows); None when absent or unreadable: the record is then read as current."""
    try:
        return writer_version_from_headers([(h[0], bytes(h[1]) if h[1] is not None else None)
                                            for h in headers or ()])
    except (DecodeError, TypeError, ValueError):
        return None


def compute_batch_inputs(batch_id: int, rows: list[tuple], bad_rows: list[tuple], settings: Settings,
                         ) -> BatchInputs:
    """Step 3 at the driver: decode with fastavro; what fastavro rejects joins the bad records.
    Rows are (topic, partition, offset, value[, writer version]): a record with a version is
    decoded with that schema set (older ones resolve to the current schema, new fields taking
    their defaults); Spark's current-schema decoding failing on an older record is no verdict."""
    suffix_of = {settings.topic(s): s for s in INPUT_TOPICS}
    events: list[tuple[str, dict]] = []
    requests: list[dict] = []
    results: list[dict] = []
    bad: list[BadRecord] = []
    rows = list(rows)
    for row in bad_rows:
        # Spark decoded with the current schema; a record of an older schema set (its header
        # names it) may not read that way (a field added at the end) and is decoded here.
        topic, partition, offset, value = row[:4]
        version = row[4] if len(row) > 4 else None
        if value is not None and version is not None and version != CURRENT_SCHEMA_VERSION:
            rows.append(row)
            continue
        bad.append(BadRecord(topic, partition, offset, bytes(value or b""),
                             f"not a valid {TOPICS[suffix_of[topic]]} record (Avro decoding failed)"))
    origins: dict[tuple[str, int], BadRecord] = {}
    now_ms = 0
    # Apply entity events before partitions: a partition event may name a broker or topic that
    # the same batch introduces.
    order = {suffix: index for index, suffix in enumerate(INPUT_TOPICS)}
    for row in sorted(rows, key=lambda r: (order[suffix_of[r[0]]], r[1], r[2])):
        topic, partition, offset, value = row[:4]
        suffix = suffix_of[topic]
        schema = TOPICS[suffix]
        try:
            record = decode(schema, bytes(value), row[4] if len(row) > 4 else None)
        except DecodeError as error:
            bad.append(BadRecord(topic, partition, offset, bytes(value), str(error)))
            continue
        now_ms = max(now_ms, int(record.get("event_time") or 0))
        origin = BadRecord(topic, partition, offset, bytes(value), "")
        if suffix == "requests":
            origins[("requests", len(requests))] = origin
            requests.append(record)
        elif suffix == "command-results":
            origins[("command_results", len(results))] = origin
            results.append(record)
        else:
            origins[("events", len(events))] = origin
            events.append((schema, record))
    return BatchInputs(batch_id=batch_id, now_ms=now_ms, events=tuple(events),
                       requests=tuple(requests), command_results=tuple(results),
                       bad_records=tuple(bad), origins=origins)


InputLogs = Mapping[tuple[str, int], tuple[int, int]]  # (topic, partition) → (log start, log end)

# A Redis restart is ridden out for up to 5 minutes; then the batch fails and Spark re-runs it
# when the query is restarted.
REDIS_OUTAGE = Backoff(first_seconds=0.2, most_seconds=5.0, give_up_after_seconds=300.0)
# A committed outbox is published however long Kafka is away (the next batch waits for it).
PUBLISH_OUTAGE = Backoff(first_seconds=0.5, most_seconds=30.0)


def with_redis_retry(action: Callable[[], Any], doing: str) -> Any:
    """A Redis operation of the pipeline, under the one retry policy (see REDIS_OUTAGE)."""
    return retry_redis(action, doing, REDIS_OUTAGE)


class PipelineRunner:
    """The imperative shell around `decide`: Redis, Kafka and Spark live here."""

    def __init__(self, settings: Settings, redis_client, producer, policy: Policy,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.store = ControllerStore(redis_client, settings.cluster_name)
        self.producer = producer
        self.policy = policy
        self.clock = clock
        self.stats = PipelineStats()
        self.state = ControllerState()
        self.applied: dict[tuple[str, int], int] = {}  # input offsets applied (streams.offsets)
        self.fenced: FencedError | None = None  # set when a newer instance took over
        self.stopping = False  # set by `stop_taking_batches`
        self._lock = threading.Lock()
        self.heap = HeapKeeper()
        self.signing_key = read_command_signing_key(settings)
        self._in_flight = (self.state, compute_in_flight(self.state))  # for the metrics: see `in_flight`

    def in_flight(self) -> frozenset:
        """The partitions of `self.state` with a step in flight (one scan per state, kept)."""
        state, in_flight = self._in_flight
        if state is not self.state:
            self._in_flight = (self.state, compute_in_flight(self.state))
        return self._in_flight[1]

    # --- start ----------------------------------------------------------------------------------
    def start(self, published: PublishedMarks | None = None, input_logs: InputLogs | None = None) -> ControllerState:
        """Load the state, take over with a new epoch, re-publish outboxes left by a crash. When
        the query starts again in this process, the store is first checked against what this
        instance last committed, and rewritten from it if it was lost meanwhile; on a first
        start, against what the product `published` (`streams.store_recovery`), and rebuilt from
        Kafka if it is behind (`input_logs`: the input partitions' log starts and ends)."""
        fresh = self.store.incarnation is None
        if not fresh:
            lost = with_redis_retry(lambda: self.store.find_loss(self.state.last_batch), "checking the state store")
            if lost is not None:
                self.rebuild_store(StateStoreLostError(lost))
        epoch = with_redis_retry(lambda: self.store.take_over(self.state.epoch + 1), "taking the planner epoch")
        self.state = with_redis_retry(self.store.load, "loading the state").with_changes(epoch=epoch)
        self.applied = with_redis_retry(self.store.applied_offsets, "loading the applied offsets")
        if fresh and published is not None:
            behind = compute_store_behind(epoch, self.state.last_batch, published)
            if behind is not None:
                self.rebuild_from_kafka(behind, published, input_logs or {})
        count_pipeline_state(len(self.state.reassignments), len(self.in_flight()))
        self.check_command_signing()
        self.republish_pending()
        log.info("pipeline started: epoch %d, last batch %d, %d partitions, %d reassignments",
                 epoch, self.state.last_batch, len(self.state.cluster.partitions_by_tp),
                 len(self.state.reassignments))
        return self.state

    def check_command_signing(self) -> None:
        """Record this pipeline's command signing and warn when the executor's does not match
        (`schemas.signing`, ONE SIDE ONLY; the executor is the side that refuses to start)."""
        own = self.signing_key.fingerprint if self.signing_key is not None else UNSIGNED
        client, cluster = self.store.client, self.store.cluster_name
        with_redis_retry(lambda: store_signing_announcement(client, cluster, "pipeline", own),
                         "recording the command signing")
        stored = with_redis_retry(lambda: read_signing_announcements(client, cluster), "reading the command signing")
        mismatch = compute_signing_mismatch("pipeline", own, stored.get("executor"))
        if mismatch is not None:
            log.warning("%s", mismatch[1])
        elif self.signing_key is not None:
            log.info("signing commands (key fingerprint %s)", own)

    def stop_taking_batches(self) -> None:
        """Before the query is stopped: wait for a batch in progress to finish, then leave every
        later batch for the next start (its records are read again: the applied offsets did not
        move), so that stopping the query never interrupts a Spark job of ours midway."""
        with self._lock:
            self.stopping = True

    def close(self) -> None:
        """After the query has stopped: give the process its garbage collection back
        (`runtime.heap`), so that a process going on after the pipeline (a test run, an
        embedding tool) does not keep a frozen heap."""
        with self._lock:
            self.stopping = True
            self.heap.close()

    # --- one micro-batch --------------------------------------------------------------------------
    def process_batch(self, batch, spark_batch_id: int) -> None:
        with self._lock:
            if self.stopping:
                log.info("stopping: Spark batch %d is left for the next start", spark_batch_id)
                return
            started = time.perf_counter()
            phases: dict[str, float] = {}
            reduced, consumed = reduce_batch(batch, self.settings)  # 2. reduce in Spark (one job)
            rows: list = []
            bad_rows: list = []
            for r in reduced:
                (rows if r.decoded_ok else bad_rows).append(
                    (r.topic, r.partition, r.offset, r.value, compute_writer_version(r.headers)))
            phases["spark"] = time.perf_counter() - started
            try:
                self.process_rows(rows, bad_rows, consumed, phases, started)
            except FencedError:  # recorded in self.fenced: `run_until_stopped` stops the query
                self.stopping = True

    def process_rows(self, rows: list, bad_rows: list,
                     consumed: Mapping[tuple[str, int], int] | None = None,
                     phases: dict[str, float] | None = None, started: float | None = None,
                     rebuilt: bool = False) -> None:
        """Steps 1 and 3 to 7 for rows already reduced (also the entry point of tests and
        benchmarks); `consumed` defaults to the greatest offsets among the rows. A commit that
        finds the store lost rewrites it (`rebuild_store`) and decides the batch again, once."""
        phases = {} if phases is None else phases
        started = time.perf_counter() if started is None else started
        if consumed is None:
            consumed = compute_consumed(r[:3] for r in (*rows, *bad_rows))
        advanced = compute_advanced(self.applied, consumed)
        if not advanced:  # 1. every record was applied before: a replay
            self.stats.replayed += 1
            count_replayed_batch()
            self.republish_pending()
            return
        rows = compute_unapplied(rows, self.applied)
        bad_rows = compute_unapplied(bad_rows, self.applied)
        batch_id = self.state.last_batch + 1
        mark = time.perf_counter()
        inputs = replace(compute_batch_inputs(batch_id, rows, bad_rows, self.settings),  # 3. decode
                         clock_ms=int(self.clock() * 1000))
        phases["decode"] = time.perf_counter() - mark
        mark = time.perf_counter()
        decision = decide_isolating(self.state, inputs, self.policy)  # 4. decide
        phases["decide"] = time.perf_counter() - mark
        new_state = decision.state.with_changes(last_batch=batch_id, epoch=self.state.epoch)
        mark = time.perf_counter()
        try:
            committed = with_redis_retry(  # 5. persist
                lambda: self.store.commit(batch_id, self.state, new_state, decision.outbox, advanced),
                f"committing batch {batch_id}")
        except FencedError as error:
            self.fenced = error
            log.error("stopping: %s", error)
            raise
        except StateStoreLostError as error:
            if rebuilt:  # lost again while rewriting it: the query fails and starts again
                raise
            self.rebuild_store(error)  # then this batch is decided again on it
            return self.process_rows(rows, bad_rows, consumed, phases, started, rebuilt=True)
        phases["persist"] = time.perf_counter() - mark
        if not committed and with_redis_retry(self.store.last_batch, "reading the batch id") == batch_id:
            committed = True  # our own commit, whose reply was lost when Redis went away
        if not committed:
            log.warning("batch %d was committed by another writer; reloading state", batch_id)
            self.state = with_redis_retry(self.store.load, "reloading the state").with_changes(
                epoch=self.state.epoch)
            self.applied = with_redis_retry(self.store.applied_offsets, "reloading the applied offsets")
            return
        # Committed: counted now, once (a batch that failed before its commit is retried, and
        # only the attempt that committed gets here).
        committed_at = self.clock()
        in_flight = compute_in_flight(new_state)
        count_committed_batch(compute_batch_counts(self.state, new_state, inputs, decision.outbox,
                                                   int(committed_at * 1000), self.in_flight(), in_flight),
                              committed_at)
        self.state, self._in_flight = new_state, (new_state, in_flight)
        self.applied = {**self.applied, **advanced}
        mark = time.perf_counter()
        self.publish(decision.outbox)  # 6. publish
        with_redis_retry(lambda: self.store.mark_published(batch_id),  # 7. mark published
                         f"marking batch {batch_id} published")
        phases["publish"] = time.perf_counter() - mark
        self.stats.batches += 1
        self.stats.input_rows += len(rows) + len(bad_rows)
        self.stats.commands += sum(1 for m in decision.outbox if m.topic_suffix == "commands")
        self.stats.alerts += sum(1 for m in decision.outbox if m.topic_suffix == "alerts")
        self.heap.after_batch()
        self.stats.last_batch_seconds = time.perf_counter() - started
        self.stats.last_phase_seconds = phases
        count_batch_phases({**phases, "total": self.stats.last_batch_seconds})
        if decision.outbox:
            log.info("batch %d: %d rows, %d messages out (%s)", batch_id, len(rows),
                     len(decision.outbox), ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in phases.items()))

    def rebuild_store(self, error: StateStoreLostError) -> None:
        """The store is not the one this instance advanced (STORE LOST in the module doc): write
        this instance's state whole in its place, under an epoch above any before, and say so
        in one ERROR alert and one log line."""
        state = self.state
        log.error("%s: rewriting it whole from this pipeline's state (batch %d, epoch %d: %d brokers, %d "
                  "partitions, %d reassignments)", error, state.last_batch, state.epoch, len(state.cluster.brokers),
                  len(state.cluster.partitions_by_tp), len(state.reassignments))
        epoch = self._write_back(state, self.applied, "rewriting the state store")
        self.check_command_signing()  # its record went with the rest
        self._announce_store_lost(
            f"alert-{state.last_batch}-store-lost",
            f"{error}; the pipeline rewrote it from its own state (batch {state.last_batch}: "
            f"{len(state.reassignments)} reassignments, {len(state.cluster.partitions_by_tp)} partitions) "
            f"under epoch {epoch}. Check what happened to Redis (persistence, failover, a restore); the "
            "executor re-records its throttles itself",
            {"found": str(error), "last_batch": state.last_batch, "epoch": epoch,
             "reassignments": len(state.reassignments)})

    def rebuild_from_kafka(self, behind: str, published: PublishedMarks, input_logs: InputLogs) -> None:
        """The store is behind what the product published (`streams.store_recovery`): nothing of
        it is loaded; the state starts again from Kafka, and one ERROR alert says so."""
        state = compute_rebuilt_state(self.state, self.state.epoch, published)
        skipped = [self.settings.topic(suffix) for suffix in ("requests", "command-results")]
        log.error("%s: rebuilding it from Kafka (the cluster from the watcher's events, read again from the start "
                  "of their topics; requests and results already in their topics are not applied again; the "
                  "batches go on from %d)", behind, state.last_batch + 1)
        epoch = self._write_back(state, compute_rebuilt_offsets(input_logs, skipped), "rebuilding the state store")
        self._announce_store_lost(
            f"alert-{state.last_batch}-store-rebuilt",
            f"{behind}; the pipeline rebuilt it from Kafka under epoch {epoch}: the cluster from the watcher's "
            "events, the dynamic settings it still held; old requests are not applied again. Reassignments "
            "Kafka runs now are awaited as other tools' moves, and the throttles of the steps published are "
            "cleared once Kafka moves none of their partitions; a plan that was running is not resumed: "
            "request it again. Settings made with `reassigner config set` and decommissions are as the store "
            "held them (none if it was emptied): check `reassigner config get` and `reassigner status`, set "
            "them again. Check what happened to Redis (persistence, failover, a restore)",
            {"found": behind, "epoch": epoch, "last_batch": state.last_batch})

    def _write_back(self, state: ControllerState, applied: Mapping[tuple[str, int], int], doing: str) -> int:
        """`state` and `applied` written whole in the store's place (`ControllerStore.reseed`) and
        made this runner's, under the epoch it took; returns that epoch."""
        epoch = with_redis_retry(lambda: self.store.reseed(state, applied), doing)
        self.state, self.applied = state.with_changes(epoch=epoch), dict(applied)
        count_state_store_lost()
        return epoch

    def _announce_store_lost(self, alert_id: str, message: str, details: Mapping[str, object]) -> None:
        self.publish([build_alert(alert_id, int(self.clock() * 1000), "StateStoreLost", ERROR, "state-store",
                                  message, details)])

    def republish_pending(self) -> None:
        """Outboxes committed but not confirmed published (a crash between 5 and 7): again."""
        pending = with_redis_retry(self.store.pending_outbox, "reading the outbox")
        for batch_id, messages in pending:
            log.info("re-publishing the outbox of batch %d (%d messages)", batch_id, len(messages))
            self.publish(compute_restamped(messages, self.state.epoch))
            with_redis_retry(lambda: self.store.mark_published(batch_id), "marking published")

    # --- publishing -------------------------------------------------------------------------------
    def publish(self, messages: list[OutboundMessage] | tuple[OutboundMessage, ...]) -> None:
        """Produce every message and wait until Kafka acknowledged all of them, riding out an
        outage under the one retry policy (the batch is committed: its outbox must go out)."""
        if not messages:
            return
        encoded = [self._encoded(m) for m in messages]
        retry_transient(lambda: publish_all_and_wait(self.producer, encoded), f"publishing {len(encoded)} messages",
                        PUBLISH_OUTAGE, logger=log)

    def _encoded(self, message: OutboundMessage) -> tuple[str, bytes, bytes, list[tuple[str, bytes]]]:
        """(topic, key, value, headers) of one outbox message; a command signed when a key is set."""
        topic, key = self.settings.topic(message.topic_suffix), message.key.encode()
        value, headers = encode(message.schema, message.record), version_headers()
        if self.signing_key is not None and message.topic_suffix == "commands":
            headers = compute_signed_headers(self.signing_key, topic, key, value, headers)
        return topic, key, value, headers

    # --- time ---------------------------------------------------------------------------------
    def publish_tick(self) -> None:
        """A Tick request: lets time-based rules (grace periods, stalls) fire in a quiet cluster."""
        now_ms = int(self.clock() * 1000)
        request = {
            "schema_version": 1, "event_time": now_ms, "id": f"tick-{uuid.uuid4()}",
            "key": "tick", "requested_by": "pipeline", "payload": ("Tick", {}),
        }
        self.producer.produce(self.settings.topic("requests"), key=b"tick",
                              value=encode("Request", request), headers=version_headers())
        self.producer.poll(0)


def compute_topic_names(settings: Settings) -> list[str]:
    """Every topic the pipeline reads or writes (`runtime.clients.kafka_admin.ensure_topics`
    creates the missing ones)."""
    return [settings.topic(suffix) for suffix in TOPICS]


def read_input_logs(reader, topics: Iterable[str]) -> dict[tuple[str, int], tuple[int, int]]:
    """The log start and end of every partition of the input topics, asked of their leaders
    (`reader` is a `runtime.clients.kafka_consumer.TopicReader`)."""
    return {(topic, partition): marks for topic in topics
            for partition, marks in reader.watermarks(topic, reader.partitions(topic)).items()}


def prepare_query_start(runner: PipelineRunner, checkpoint_dir: Path,
                        input_logs: InputLogs | None) -> str:
    """Where the query starts reading (`streams.offsets`): forgets the applied offsets of input
    partitions re-created or truncated since, discards a checkpoint that would skip records never
    applied, and returns the `startingOffsets` a new checkpoint uses ("earliest" without
    `input_logs`: every record is then read and those applied skipped)."""
    log_starts: dict[tuple[str, int], int] = {}
    starting = "earliest"
    if input_logs is not None:
        log_starts = {key: low for key, (low, _high) in input_logs.items()}
        truncated = compute_truncated(runner.applied, {key: high for key, (_low, high) in input_logs.items()})
        if truncated:
            log.warning("input partitions %s now end at or below the offsets applied before (re-created "
                        "or truncated): reading them again from the start of their log",
                        ", ".join(f"{t}-{p}" for t, p in truncated))
            with_redis_retry(lambda: runner.store.forget_offsets(truncated), "forgetting offsets")
            runner.applied = {k: v for k, v in runner.applied.items() if k not in truncated}
        partitions: dict[str, list[int]] = {}
        for topic, partition in input_logs:
            partitions.setdefault(topic, []).append(partition)
        starting = compute_starting_offsets(partitions, runner.applied)
    positions = read_checkpoint_positions(checkpoint_dir)
    if positions is not None:
        gap = compute_checkpoint_gap(positions, runner.applied, log_starts)
        if gap:
            log.warning("the checkpoint %s resumes after records this cluster's state has not applied "
                        "(%s; a batch left at the last stop, or Redis restored from an older backup): "
                        "discarding it; the query starts after the offsets stored in Redis",
                        checkpoint_dir, ", ".join(f"{t}-{p}" for t, p in gap[:5]))
            shutil.rmtree(checkpoint_dir)
    return starting


def run_pipeline(spark, settings: Settings, runner: PipelineRunner,
                 client_properties: dict[str, str], checkpoint_dir: Path,
                 tick_interval_seconds: float = 1.0, stop_event: threading.Event | None = None,
                 read_logs: Callable[[list[str]], InputLogs] | None = None,
                 read_published: Callable[[], PublishedMarks] | None = None):
    """Start the query (and the ticker); returns the StreamingQuery. Blocks nothing.

    `read_logs` (the input topics → their partitions' log starts and ends) lets a new checkpoint
    start right after the applied offsets instead of reading every topic from its start;
    `read_published` (`streams.store_recovery.read_published_marks`) lets a first start find a
    store behind what the product published."""
    input_logs = read_logs([settings.topic(s) for s in INPUT_TOPICS]) if read_logs else None
    runner.start(read_published() if read_published and runner.store.incarnation is None else None, input_logs)
    starting = prepare_query_start(runner, checkpoint_dir, input_logs)
    stream = build_input_stream(spark, settings, client_properties, starting)
    query = (
        stream.writeStream.foreachBatch(runner.process_batch)
        .option("checkpointLocation", str(checkpoint_dir))
        .trigger(processingTime=settings.trigger_interval)
        .queryName("reassigner-pipeline")
        .start()
    )
    if tick_interval_seconds > 0:
        stop = stop_event or threading.Event()

        def tick_forever() -> None:
            while not stop.wait(tick_interval_seconds) and query.isActive:
                try:
                    runner.publish_tick()
                except Exception as error:  # the producer retries by itself; never die here
                    log.warning("tick failed: %s", error)

        threading.Thread(target=tick_forever, name="pipeline-ticker", daemon=True).start()
    return query


def await_query(query, runner: PipelineRunner, poll_seconds: float = 1.0) -> str:
    """Wait until the query ends (stopped, failed, or this instance fenced: then it is stopped
    here, from this thread); what ended it, in a few words."""
    try:
        while not query.awaitTermination(poll_seconds):
            if runner.fenced is not None:
                query.stop()
                return "a newer instance took over"
        return "it stopped"
    except Exception as error:  # Spark's StreamingQueryException and the like
        return (str(error).strip() or type(error).__name__).splitlines()[0][:300]


# A failed query is started again, waiting 1 s doubling to a minute between attempts.
QUERY_RESTART = Backoff(first_seconds=1.0, most_seconds=60.0)


def run_until_stopped(start_query: Callable[[], Any], stop: threading.Event, runner: PipelineRunner,
                      backoff: Backoff = QUERY_RESTART) -> int:
    """Run the streaming query until `stop` is set, starting it again after any failure (a
    process paused past the source's timeouts, a task lost in local mode) under `backoff`;
    returns how many times it was restarted. Ends without restarting when `stop` is set (a
    SIGTERM: no traceback) or when a newer instance fenced this one (`runner.fenced`, raised)."""
    delays = backoff.delays()
    restarts = 0
    while not stop.is_set():
        try:
            query = start_query()
        except TransientError as error:  # Kafka or Redis away while starting: try again
            query, failure = None, f"it could not start: {error}"
        if query is not None:
            failure = await_query(query, runner)
        if runner.fenced is not None:
            raise runner.fenced
        if stop.is_set():
            break
        wait = next(delays)
        log.warning("the pipeline's query failed (%s); will restart it in %.0f s", failure, wait)
        restarts += 1
        if stop.wait(wait):
            break
    return restarts


__all__ = ["PipelineRunner", "annotate_batch", "build_input_stream", "collapse_in_spark",
           "compute_batch_inputs", "compute_topic_names", "decode_records", "latest_per_subject",
           "prepare_query_start", "read_input_logs", "reduce_batch", "run_pipeline", "run_until_stopped"]
