"""The one door to faust-streaming: a committing consumer group as a faust agent, and its worker.

- `build_committing_agent`: a faust App (web server off, in-memory store, raw bytes topics,
  offsets committed every event) whose one agent calls `handle(record)` for each message of
  `topic` and sends the `OutgoingMessage` it returns, if any, on the side topic.
- `run_worker`: run such an app until SIGINT/SIGTERM (faust installs its own signal handlers;
  it does not touch the process's logging).

RULES (the same order as `kafka_consumer.run_committing_consumer`)
- per message, in each partition's offset order: `handle(record)`, then the side send, then the
  ack: faust commits the event's offset only after the agent's body is done with it (at least
  once: a crash mid-handle delivers the message again);
- `handle` is blocking and runs in the event loop's executor, so the worker's heartbeats and
  commits go on while it takes its time (a slow webhook);
- `--command-config` settings are not taken: faust (aiokafka) cannot read librdkafka's.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Callable

from runtime.clients.kafka_consumer import ConsumedRecord, OutgoingMessage


def build_committing_agent(bootstrap_servers: str, topic: str, group: str,
                           handle: Callable[[ConsumedRecord], OutgoingMessage | None], side_topic: str):
    """The faust App of the group `group` over `topic` (see the module docstring)."""
    import faust

    brokers = [f"kafka://{server}" for server in bootstrap_servers.split(",")]
    # faust makes a data dir even for a memory store, by default in the working directory.
    datadir = os.path.join(tempfile.gettempdir(), "reassigner-faust", group)
    os.makedirs(os.path.dirname(datadir), exist_ok=True)  # faust makes the last level only
    app = faust.App(group, broker=brokers, value_serializer="raw", key_serializer="raw", datadir=datadir,
                    web_enabled=False, store="memory://", topic_disable_leader=True,
                    consumer_auto_offset_reset="earliest", broker_commit_every=1,
                    broker_commit_interval=1.0)
    source = app.topic(topic, value_type=bytes, key_type=bytes, value_serializer="raw")
    sink = app.topic(side_topic, value_type=bytes, key_type=bytes, value_serializer="raw")

    @app.agent(source)
    async def forward(stream):
        loop = asyncio.get_running_loop()
        async for event in stream.events():
            message = event.message
            record = ConsumedRecord(topic=message.topic, partition=message.partition, offset=message.offset,
                                    key=message.key, value=message.value,
                                    headers=tuple((k, v) for k, v in (message.headers or [])))
            outgoing = await loop.run_in_executor(None, handle, record)
            if outgoing is not None:
                await sink.send(key=outgoing.key, value=outgoing.value, headers=list(outgoing.headers))

    return app


def run_worker(app, loglevel: str = "warning") -> None:
    """Run a faust app built by `build_committing_agent` until SIGINT/SIGTERM."""
    import faust

    worker = faust.Worker(app, loglevel=loglevel, quiet=True, override_logging=False)
    worker.execute_from_commandline()
