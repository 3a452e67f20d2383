"""The pipeline's query lifecycle: where the query starts reading, starting it, watching it,
and starting it again after a failure.

START (`run_pipeline`): the runner loads and takes over the state (`streams.runner`), then
`prepare_query_start` decides where the Kafka source begins (`streams.offsets`): the applied
offsets of input partitions re-created or truncated since are forgotten, and a checkpoint that
would resume after records this cluster's state never applied is discarded (a batch left at the
last stop, or Redis restored from an older copy), so no record is skipped; a new checkpoint
starts right after the applied offsets. A ticker thread publishes a Tick request every
`tick_interval_seconds`, so time-based rules fire in a quiet cluster.

RUN (`run_until_stopped`): a query that fails (a process paused past the source's timeouts, a
task lost in local mode, Kafka or Redis away while starting) is started again under
`QUERY_RESTART`; a stop (SIGTERM) ends it without a restart and without a traceback; a newer
instance taking over (the epoch) ends it with `FencedError`.
"""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path
from typing import Any, Callable, Iterable

from runtime.backoff import QUERY_RESTART, Backoff
from runtime.settings import Settings
from schemas.codec import TOPICS
from schemas.errors import TransientError
from streams.batch_plan import build_input_stream
from streams.input_rows import INPUT_TOPICS
from streams.offsets import compute_checkpoint_gap, compute_starting_offsets, compute_truncated, read_checkpoint_positions
from streams.runner import InputLogs, PipelineRunner, with_redis_retry
from streams.store_recovery import PublishedMarks

log = logging.getLogger(__name__)


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
