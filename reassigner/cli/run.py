"""`reassigner run`: the pipeline — the Spark Structured Streaming job, the brain of the product.

SIGTERM and Ctrl-C (SIGINT), exit 0 and no traceback either way:
- while it starts (Redis, topics), nothing of its own is in flight: the handler leaves at once
  (`options.StoppedBySignal`; `main` prints "stopped on SIGTERM");
- while Spark's JVM is being launched the handler only flags the stop, and the session is
  stopped as soon as it is up: leaving in the middle of pyspark's launch left the half-started
  JVM running for good (it watches the driver's stdin only once it has handed its port over, and
  the driver gone, it never does: an orphan holding a 1 GiB heap after every such stop);
- once its query runs, the handler only flags the stop; another thread stops the query after
  the batch in progress (later batches are left for the next start), then the session is
  stopped. A step of that shutdown that fails (the JVM got the signal too and is gone) is
  logged, not raised: the stop was asked for;
- a SIGTERM that reaches Spark's JVM (with the whole group, as systemd or a terminal sends it,
  first, or alone) runs the same stop from the JVM's shutdown hooks, before Spark's own stops its
  context under the batch in progress (`streams.spark_session.stop_before_spark`): the run exits
  0 with no traceback either way.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Optional

import typer

from reassigner.cli.connections import load, resolve
from reassigner.cli.options import (METRICS_FLAGS, STOP_SIGNALS, SharedFlags, StoppedBySignal, configure_logging,
                                    note_stop_signal, start_metrics_endpoint, takes_flags)

log = logging.getLogger(__name__)


def stop_requested() -> bool:
    from reassigner.cli.options import stop_requested as requested

    return requested.is_set()


@takes_flags("bootstrap_server", "redis_url", "command_config", "cluster_name", "topic_prefix", "stack_dir",
             "command_signing_key_file", *METRICS_FLAGS)
def run(
    master: Optional[str] = typer.Option(None, "--master", help="Spark master URL (default local[2])."),
    spark_jars: Optional[str] = typer.Option(None, "--spark-jars",
                                             help="Spark's Kafka/Avro connector jars, comma-separated "
                                             "(default: fetched with Maven)."),
    checkpoint_dir: Optional[Path] = typer.Option(None, "--checkpoint-dir", help="Streaming checkpoints."),
    conf: list[str] = typer.Option([], "--conf", help="A Spark setting spark.KEY=VALUE for the pipeline's "
                                   "session (repeat for several); wins over the product's own."),
    mode: Optional[str] = typer.Option(None, "--mode", help="auto | approve | observe."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every batch."),
    *, flags: SharedFlags,
) -> None:
    """Run the pipeline until Ctrl-C / SIGTERM: events in, commands and alerts out."""
    from runtime.clients.kafka_access import check_kafka_access
    from runtime.clients.kafka_admin import ensure_topics
    from runtime.clients.kafka_consumer import TopicReader
    from runtime.clients.kafka_producer import build_producer, producer_config
    from runtime.clients.redis_io import check_redis, connect_redis
    from streams.query import compute_topic_names, read_input_logs, run_pipeline, run_until_stopped
    from streams.runner import REDIS_OUTAGE, PipelineRunner
    from streams.spark_session import build_spark_session, parse_spark_conf, stop_before_spark
    from streams.store_recovery import read_published_marks

    configure_logging(verbose, logging.WARNING, logging.INFO)
    stop = threading.Event()
    started: list[bool] = []  # [True] once the query is being started: from then on, stops are graceful
    launching: list[bool] = []  # [True] while Spark's JVM is launched: a stop waits for it (module doc)
    queries: list = []
    stoppers: list[threading.Thread] = []
    stop_signals: list[int] = []
    stopping_lock = threading.RLock()  # the signal handler may run on a thread holding it

    def stop_query(query) -> None:
        runner.stop_taking_batches()  # no batch of ours is then interrupted midway
        try:
            query.stop()
        except Exception as error:  # the JVM already going away: nothing left to stop
            log.debug("stopping the query: %s", error)

    def shut_down(signum, _frame) -> None:
        stop_signals.append(signum)
        note_stop_signal(signum)
        stop.set()
        if launching:  # `build_spark_session` returns, then the session is stopped
            return
        if not started:  # still starting: nothing of ours is in flight, leave now
            raise StoppedBySignal(signum)
        # Only flag here: the main thread may be inside a py4j call (awaitTermination), and a
        # py4j call from this handler, on that thread, re-enters its socket (a traceback, and
        # Spark stopped under a running batch). Another thread stops the query (`start_query`
        # does it for a query that was starting).
        stop_in_background()

    def stop_in_background() -> None:
        with stopping_lock:
            if queries and not stoppers:
                stoppers.append(threading.Thread(target=stop_query, args=(queries[-1],), name="stop-query"))
                stoppers[-1].start()

    def stop_before_the_jvm() -> None:
        """Spark's JVM is shutting down (it got a SIGTERM: with the whole group, or alone):
        stop as on SIGTERM, and wait for the query to be stopped before Spark stops."""
        if not stop_requested():
            log.info("Spark's JVM is shutting down (a SIGTERM reached it): stopping the query first")
        note_stop_signal(signal.SIGTERM)
        stop.set()
        stop_in_background()
        for stopper in list(stoppers):
            stopper.join(100)

    for signum in STOP_SIGNALS:
        signal.signal(signum, shut_down)
    from runtime.settings import compute_policy, read_command_signing_key

    spark_conf = parse_spark_conf(conf)  # a bad one fails here, before anything starts
    settings = load(flags, spark_master=master, checkpoint_dir=checkpoint_dir, mode=mode, spark_jars=spark_jars)
    read_command_signing_key(settings)  # a missing or short key file fails here, before anything starts
    start_metrics_endpoint(settings, "pipeline")  # a port taken fails here too
    connected = resolve(settings)
    settings, bootstrap = connected.settings, connected.bootstrap
    client = connected.client_config
    redis_client = connect_redis(connected.redis_url, settings.redis_socket_timeout_seconds,
                                 settings.redis_connect_timeout_seconds)
    # Before Kafka and Spark: a wrong Redis password fails here, in one line, within seconds,
    # not as an outage that ends the query minutes later.
    check_redis(redis_client, connected.redis_url, REDIS_OUTAGE)
    check_kafka_access(bootstrap, client, "run", compute_topic_names(settings), settings.topic_prefix)
    ensure_topics(bootstrap, client, compute_topic_names(settings), settings.event_topic_partitions)
    producer = build_producer(producer_config(bootstrap, client, "reassigner-pipeline"))
    policy = compute_policy(settings)
    runner = PipelineRunner(settings, redis_client, producer, policy)
    launching.append(True)
    try:
        spark = build_spark_session(settings.cache_dir, master=settings.spark_master,
                                    spark_jars=settings.spark_jars,
                                    extra_conf={**settings.spark_conf, **spark_conf})
    finally:
        launching.clear()
    if stop.is_set():  # a stop came while Spark was launched
        spark.stop()
        raise StoppedBySignal(stop_signals[-1])
    stop_before_spark(spark, stop_before_the_jvm)
    offsets_reader = TopicReader(bootstrap, client, "reassigner-pipeline-offsets")

    def start_query():
        query = run_pipeline(spark, settings, runner, dict(client.java),
                             Path(settings.checkpoint_dir) / settings.cluster_name / "pipeline",
                             settings.tick_interval_seconds, stop,
                             lambda topics: read_input_logs(offsets_reader, topics),
                             lambda: read_published_marks(offsets_reader, settings.topic("commands"),
                                                          settings.topic("alerts"), runner.signing_key))
        queries.append(query)
        typer.echo(f"pipeline running (epoch {runner.state.epoch}) against "
                   f"{bootstrap}; Ctrl-C stops it", err=True)
        if stop.is_set():  # a signal while it was starting
            stop_in_background()
        return query

    started.append(True)
    try:
        run_until_stopped(start_query, stop, runner)  # raises FencedError: one line, exit 2
    finally:
        stop.set()
        for stopper in stoppers:
            stopper.join(120)
        stopping = [(offsets_reader.close, "closing the offsets reader"),
                    (lambda: producer.flush(10), "flushing the producer"),
                    (lambda: spark.sparkContext.setLogLevel("OFF"), "quieting Spark"),  # tasks cut short are no news
                    (spark.stop, "stopping Spark"),
                    (runner.close, "closing the pipeline runner")]
        for step, doing in stopping:
            try:
                step()
            except Exception as error:  # never hide why it stops; the JVM may be gone already
                log.log(logging.DEBUG if stop_requested() else logging.WARNING, "%s: %s", doing, error)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
