"""The pipeline's runner: the imperative shell around the pure decision, one micro-batch at a
time. `process_batch` (Spark's foreachBatch) follows this order, always:

1. **skip what was applied**: only records above the input offsets stored with the state are
   applied (`streams.offsets`); a batch with none (Spark re-runs the last batch after a restart)
   re-publishes a pending outbox and stops there. Spark's batch ids play no part: the batches
   the pipeline applies are numbered by `last_batch` + 1, so any checkpoint dir, or none, is safe;
2. **reduce** in Spark to typed rows (`streams.batch_plan`: a big batch collapsed there);
3. **decode** each row once at the driver, collapse state events to the latest per subject,
   order them (`streams.input_rows`), giving the handlers the same dicts every component sees;
4. **decide**: `handlers.decide.decide_isolating(state, inputs, policy)`, a pure function (an
   input on which deciding fails becomes a dead letter; the rest of the batch is applied);
5. **persist** the new state, the batch's sequence number, the outbox and the input offsets it
   consumed in one atomic Redis transition, refused if a newer instance took over (the epoch);
6. **publish** the outbox with an idempotent producer and wait for every acknowledgement;
7. **mark published**: drop the outbox from Redis.

METRICS (`runtime.metrics`): a batch is counted once, right after step 5 succeeded, from its
inputs, its outbox and the states before and after; a batch that fails before its commit and is
retried, a replay, or a batch another writer committed counts nothing. Its phase durations are
observed after step 7.

A crash anywhere leaves a consistent story: before 5 the records are read again and decided on
the same state, giving the same commands with the same ids (same batch number); between 5 and 7
the outbox is re-published on start (the executor recognises command ids it has applied). On
start the instance bumps the planner epoch; its commands carry it and the executor refuses older
ones.

STORE LOST: each commit is verified (`state.controller_store`, VERIFIED). A Redis emptied or
restored from an older copy under the running pipeline is found at the next batch, before
anything is written over it; this instance's state is the truth the store lost, so it is written
back whole with the applied offsets under an epoch above any before (`rebuild_store`), one
`StateStoreLost` ERROR alert says what was found, and the batch is decided again on it. A first
start checks the store against what the product published and rebuilds it from Kafka when it is
behind (`rebuild_from_kafka`, `streams.store_recovery`).

SIGNED COMMANDS: with `command_signing_key_file` set, every command published carries an
HMAC-SHA256 signature header (`schemas.signing`); on start the pipeline records its key's
fingerprint (or "unsigned") and warns, in one line, when the executor's does not match.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping

from handlers.decide import decide_isolating
from handlers.outbox import ERROR, build_alert, compute_restamped
from handlers.policy import Policy
from runtime.backoff import PUBLISH_OUTAGE, REDIS_OUTAGE, retry_transient
from runtime.clients.kafka_producer import publish_all_and_wait
from runtime.clients.redis_io import retry_redis
from runtime.heap import HeapKeeper, automatic_collection_paused
from runtime.metrics import (compute_batch_counts, compute_in_flight, count_batch_phases, count_committed_batch,
                             count_pipeline_state, count_replayed_batch, count_state_store_lost)
from runtime.settings import Settings, read_command_signing_key
from schemas.codec import encode, version_headers
from schemas.errors import FencedError, StateStoreLostError
from schemas.signing import UNSIGNED, compute_signed_headers, compute_signing_mismatch
from state.controller_store import ControllerStore, read_signing_announcements, store_signing_announcement
from state.model import ControllerState, OutboundMessage
from streams.batch_plan import reduce_batch
from streams.input_rows import InputRow, compute_batch_inputs
from streams.offsets import compute_advanced, compute_consumed, compute_unapplied
from streams.store_recovery import (PlansToResume, PublishedMarks, compute_caught_up, compute_rebuilt_offsets,
                                    compute_rebuilt_state, compute_resume_step, compute_store_behind)

log = logging.getLogger(__name__)

SLOW_BATCH_SECONDS = 10.0  # a batch this long is logged (WARNING) with its phases


def compute_slow_batch_note(batch_id: int, rows: int, seconds: float, phases: Mapping[str, float],
                            limit: float = SLOW_BATCH_SECONDS) -> str | None:
    """The log line for a batch that took more than `limit` seconds, naming its phases, longest
    first, so that a pipeline that stops answering for minutes says where its time went; None
    for a batch within the limit."""
    if seconds <= limit:
        return None
    spent = ", ".join(f"{name} {value:.1f} s" for name, value in sorted(phases.items(), key=lambda kv: -kv[1]))
    return f"batch {batch_id} took {seconds:.1f} s ({rows} rows; {spent}): requests and events wait behind it"


@dataclass
class PipelineStats:
    batches: int = 0
    replayed: int = 0
    input_rows: int = 0
    commands: int = 0
    alerts: int = 0
    last_batch_seconds: float = 0.0
    last_phase_seconds: dict[str, float] | None = None


InputLogs = Mapping[tuple[str, int], tuple[int, int]]  # (topic, partition) → (log start, log end)



class _Phases:
    """The durations of a batch's phases (seconds by name), from `started` on."""

    def __init__(self, phases: dict[str, float] | None, started: float | None) -> None:
        self.phases = {} if phases is None else phases
        self.started = time.perf_counter() if started is None else started

    @contextmanager
    def __call__(self, name: str):
        mark = time.perf_counter()
        yield
        self.phases[name] = time.perf_counter() - mark


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
        self.resume: PlansToResume | None = None  # plans to request again after a rebuild's replay
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
            rows, consumed = reduce_batch(batch, self.settings)  # 2. reduce in Spark (one job)
            phases["spark"] = time.perf_counter() - started
            try:
                self.process_rows(rows, consumed, phases, started)
            except FencedError:  # recorded in self.fenced: `run_until_stopped` stops the query
                self.stopping = True

    def process_rows(self, rows: Iterable[InputRow | tuple],
                     consumed: Mapping[tuple[str, int], int] | None = None,
                     phases: dict[str, float] | None = None, started: float | None = None,
                     rebuilt: bool = False) -> None:
        """Steps 1 and 3 to 7 for rows already reduced (also the entry point of tests and
        benchmarks; tuples are read as `InputRow`s); `consumed` defaults to the greatest offsets
        among the rows. A commit that finds the store lost rewrites it (`rebuild_store`) and
        decides the batch again, once."""
        timer = _Phases(phases, started)
        rows = [row if isinstance(row, InputRow) else InputRow(*row) for row in rows]
        consumed = compute_consumed(r.position for r in rows) if consumed is None else consumed
        advanced = compute_advanced(self.applied, consumed)
        if not advanced:  # 1. every record was applied before: a replay
            self._replayed()
            return
        rows = compute_unapplied(rows, self.applied)
        batch_id = self.state.last_batch + 1
        with timer("decode"):  # 3
            inputs = replace(compute_batch_inputs(batch_id, rows, self.settings), clock_ms=int(self.clock() * 1000))
        with timer("decide"), automatic_collection_paused():  # 4 (a plan's objects are acyclic: runtime.heap)
            decision = decide_isolating(self.state, inputs, self.policy)
        new_state = decision.state.with_changes(last_batch=batch_id, epoch=self.state.epoch)
        try:
            with timer("persist"):  # 5
                committed = self._persist(batch_id, new_state, decision.outbox, advanced)
        except StateStoreLostError as error:
            if rebuilt:  # lost again while rewriting it: the query fails and starts again
                raise
            self.rebuild_store(error)  # then this batch is decided again on it
            return self.process_rows(rows, consumed, timer.phases, timer.started, rebuilt=True)
        if not committed:
            self._reload(batch_id)
            return
        self._count_committed(new_state, inputs, decision.report)
        self.applied = {**self.applied, **advanced}
        self.resume_plans(r.get("id") for r in inputs.requests)
        with timer("publish"):
            self.publish(decision.outbox)  # 6
            with_redis_retry(lambda: self.store.mark_published(batch_id),  # 7
                             f"marking batch {batch_id} published")
        self._account(batch_id, len(rows), decision.outbox, timer)

    def _replayed(self) -> None:
        """Step 1 for a batch of records all applied before: its outbox may still be pending."""
        self.stats.replayed += 1
        count_replayed_batch()
        self.republish_pending()

    def _persist(self, batch_id: int, new_state: ControllerState, outbox, advanced) -> bool:
        """Step 5: True when this instance committed the batch (also when the reply of its own
        commit was lost as Redis went away); False when another writer did. Raises FencedError
        (recorded in `fenced`) and StateStoreLostError."""
        try:
            committed = with_redis_retry(
                lambda: self.store.commit(batch_id, self.state, new_state, outbox, advanced),
                f"committing batch {batch_id}")
        except FencedError as error:
            self.fenced = error
            log.error("stopping: %s", error)
            raise
        return committed or with_redis_retry(self.store.last_batch, "reading the batch id") == batch_id

    def _reload(self, batch_id: int) -> None:
        log.warning("batch %d was committed by another writer; reloading state", batch_id)
        self.state = with_redis_retry(self.store.load, "reloading the state").with_changes(epoch=self.state.epoch)
        self.applied = with_redis_retry(self.store.applied_offsets, "reloading the applied offsets")

    def _count_committed(self, new_state: ControllerState, inputs, report) -> None:
        """The committed batch counted, once (a batch that failed before its commit is retried,
        and only the attempt that committed gets here); `new_state` becomes this runner's."""
        committed_at = self.clock()
        in_flight = compute_in_flight(new_state)
        count_committed_batch(compute_batch_counts(new_state, inputs, report, int(committed_at * 1000), in_flight),
                              committed_at)
        self.state, self._in_flight = new_state, (new_state, in_flight)

    def _account(self, batch_id: int, rows: int, outbox, timer: "_Phases") -> None:
        """After step 7: the runner's figures, the phase durations, the heap."""
        self.stats.batches += 1
        self.stats.input_rows += rows
        self.stats.commands += sum(1 for m in outbox if m.topic_suffix == "commands")
        self.stats.alerts += sum(1 for m in outbox if m.topic_suffix == "alerts")
        self.heap.after_batch()
        self.stats.last_batch_seconds = time.perf_counter() - timer.started
        self.stats.last_phase_seconds = timer.phases
        count_batch_phases({**timer.phases, "total": self.stats.last_batch_seconds})
        slow = compute_slow_batch_note(batch_id, rows, self.stats.last_batch_seconds, timer.phases)
        if slow is not None:
            log.warning("%s", slow)
        elif outbox:
            log.info("batch %d: %d rows, %d messages out (%s)", batch_id, rows, len(outbox),
                     ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in timer.phases.items()))

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
        it is loaded; the state starts again from Kafka, the plans that were running are resumed
        once the replay has caught up (`resume_plans`), and one ERROR alert says so."""
        state = compute_rebuilt_state(self.state, self.state.epoch, published)
        skipped = [self.settings.topic(suffix) for suffix in ("requests", "command-results")]
        log.error("%s: rebuilding it from Kafka (the cluster from the watcher's events, read again from the start "
                  "of their topics; requests and results already in their topics are not applied again; the "
                  "batches go on from %d)", behind, state.last_batch + 1)
        epoch = self._write_back(state, compute_rebuilt_offsets(input_logs, skipped), "rebuilding the state store")
        ends = {key: high - 1 for key, (low, high) in input_logs.items() if high > low and key[0] not in skipped}
        self.resume = (PlansToResume(published.plans, ends, published.rebalance_topics)
                       if published.plans else None)
        rebalance = ("; the rebalance they belonged to is requested again once they are over (if it does not "
                     "complete, for instance because the pipeline stopped before, request it again)"
                     if published.rebalance_topics is not None else "")
        plans = (f"the plans that were running ({len(published.plans)} partitions stepped, from the commands "
                 f"published) are requested again once the replay has caught up{rebalance}" if published.plans
                 else "no running plan was found among the commands published")
        self._announce_store_lost(
            f"alert-{state.last_batch}-store-rebuilt",
            f"{behind}; the pipeline rebuilt it from Kafka under epoch {epoch}: the cluster from the watcher's "
            "events, the dynamic settings it still held; old requests are not applied again. Reassignments "
            "Kafka runs now are awaited as other tools' moves, and the throttles of the steps published are "
            f"cleared once Kafka moves none of their partitions; {plans}. Settings made with `reassigner config "
            "set` and decommissions are as the store held them (none if it was emptied): check `reassigner "
            "config get` and `reassigner status`, set them again. Check what happened to Redis (persistence, "
            "failover, a restore)",
            {"found": behind, "epoch": epoch, "last_batch": state.last_batch, "plans": len(published.plans)})

    def resume_plans(self, applied_request_ids: Iterable[str] = ()) -> None:
        """After a committed batch (`applied_request_ids`: the ids of the requests it applied):
        once a rebuild's replay has caught up, request the plans that were running again
        (`streams.store_recovery`, RESUME: a Reassign, then a Rebalance once it is over)."""
        if self.resume is None or not compute_caught_up(self.applied, self.resume.ends):
            return
        request, self.resume = compute_resume_step(self.resume, self.state, applied_request_ids,
                                                   int(self.clock() * 1000), f"resume-{uuid.uuid4()}")
        if request is None:
            if self.resume is None:
                log.info("the plans found running when the state store was rebuilt are resumed or over")
            return
        kind, fields = request["payload"]
        count = (f"{len(fields['partitions'])} partitions" if kind == "Reassign"
                 else f"topics {', '.join(fields['topics']) or 'all'}")
        log.warning("resuming the plans that were running when the state store was lost: %s request %s (%s)",
                    kind, request["id"], count)
        retry_transient(lambda: publish_all_and_wait(self.producer, [(
            self.settings.topic("requests"), request["key"].encode(), encode("Request", request), version_headers())]),
            "publishing the resume request", PUBLISH_OUTAGE, logger=log)

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


