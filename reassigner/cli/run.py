"""`reassigner run`: the pipeline — the Spark Structured Streaming job, the brain of the product."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Optional

import typer

from reassigner.settings import load_settings


def run(
    bootstrap_server: Optional[str] = typer.Option(None, "--bootstrap-server",
                                                   help="Kafka bootstrap servers (default: the local stack's)."),
    redis_url: Optional[str] = typer.Option(None, "--redis-url", help="Redis URL (default: the local stack's)."),
    command_config: Optional[Path] = typer.Option(None, "--command-config",
                                                  help="Kafka client properties (security settings)."),
    master: Optional[str] = typer.Option(None, "--master", help="Spark master URL (default local[2])."),
    checkpoint_dir: Optional[Path] = typer.Option(None, "--checkpoint-dir", help="Streaming checkpoints."),
    cluster_name: Optional[str] = typer.Option(None, "--cluster-name", help="Redis hash tag of this cluster."),
    mode: Optional[str] = typer.Option(None, "--mode", help="auto | approve | observe."),
    stack_dir: Optional[Path] = typer.Option(None, "--stack-dir", help="The local stack to use by default."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every batch."),
) -> None:
    """Run the pipeline until Ctrl-C / SIGTERM: events in, commands and alerts out."""
    import redis
    from confluent_kafka import Producer

    from handlers.policy import Policy
    from reassigner.cli.connections import resolve_connections
    from reassigner.clients.client_config import read_command_config
    from streams.pipeline import PipelineRunner, ensure_topics, run_pipeline
    from streams.spark_session import build_spark_session

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = load_settings(bootstrap_servers=bootstrap_server, redis_url=redis_url,
                             command_config=command_config, spark_master=master,
                             checkpoint_dir=checkpoint_dir, cluster_name=cluster_name, mode=mode,
                             stack_dir=stack_dir)
    connections = resolve_connections(settings)
    settings = settings.model_copy(update={"bootstrap_servers": connections.bootstrap_servers,
                                           "redis_url": connections.redis_url})
    client = read_command_config(settings.command_config)
    ensure_topics(connections.bootstrap_servers, client, settings)
    producer = Producer({"bootstrap.servers": connections.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 2, **client.librdkafka})
    policy = Policy(**{name: getattr(settings, name) for name in Policy.__dataclass_fields__})
    runner = PipelineRunner(settings, redis.Redis.from_url(connections.redis_url), producer, policy)
    spark = build_spark_session(settings.cache_dir, master=settings.spark_master)
    stop = threading.Event()
    query = run_pipeline(spark, settings, runner, dict(client.properties),
                         Path(settings.checkpoint_dir) / settings.cluster_name / "pipeline",
                         settings.tick_interval_seconds, stop)

    def shut_down(signum, _frame) -> None:
        stop.set()
        query.stop()

    signal.signal(signal.SIGTERM, shut_down)
    signal.signal(signal.SIGINT, shut_down)
    typer.echo(f"pipeline running (epoch {runner.state.epoch}) against "
               f"{connections.bootstrap_servers}; Ctrl-C stops it", err=True)
    try:
        query.awaitTermination()
    finally:
        stop.set()
        producer.flush(10)
        spark.stop()


def register(app: typer.Typer) -> None:
    app.command("run")(run)
