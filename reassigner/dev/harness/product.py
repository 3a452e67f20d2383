"""The product's processes for the demo and the scenario tests, and probes that watch them.

`ProductProcesses` starts the pipeline (`reassigner run`), the watcher, the executor and the
status server as separate processes of the real CLI, each logging to `<stack>/product/*.log`,
all pointed at the local stack through the environment. `AlertCollector` follows the alerts
topic in a thread; `ClusterProbe` asks Kafka itself (Admin API) what the cluster looks like.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from confluent_kafka import Consumer

from runtime.clients.client_config import ClientConfig
from runtime.clients.kafka_consumer import topic_partitions
from reassigner.dev.local.kafka_admin import PLAINTEXT, client_settings
from reassigner.dev.local.processes import is_alive, port_open, stop, tail
from schemas import command_kind
from schemas.codec import decode
from schemas.errors import ReassignerError

COMPONENTS = {
    "pipeline": ["run"],
    "watcher": ["watch"],
    "executor": ["execute"],
}


@dataclass
class ProductProcesses:
    stack_dir: Path
    environment: dict[str, str]
    status_port: int | None = None
    metrics_ports: dict[str, int] = field(default_factory=dict)  # component → its --metrics-port (first start)
    pids: dict[str, int] = field(default_factory=dict)
    handles: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def log_dir(self) -> Path:
        return self.stack_dir / "product"

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        commands = {name: [*arguments, *(("--metrics-port", str(self.metrics_ports[name]))
                                         if name in self.metrics_ports else ())]
                    for name, arguments in COMPONENTS.items()}
        if self.status_port is not None:
            commands["status-server"] = ["status-server", "--port", str(self.status_port)]
        for name, arguments in commands.items():
            self.start_one(name, arguments)

    def start_one(self, name: str, arguments: list[str] | None = None,
                  environment: dict[str, str] | None = None, log_name: str | None = None) -> subprocess.Popen:
        """Start (or start again) one component, logging to `<log_name or name>.log`."""
        arguments = arguments or COMPONENTS[name]
        log = open(self.log_dir / f"{log_name or name}.log", "ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "reassigner.cli", *arguments, "--stack-dir", str(self.stack_dir)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **self.environment, **(environment or {})}, start_new_session=True,
        )
        self.handles[name] = process
        self.pids[name] = process.pid
        return process

    def check_alive(self) -> None:
        for name, process in self.handles.items():
            if process.poll() is not None:
                raise RuntimeError(f"the {name} exited ({process.returncode}); last lines of its "
                                   f"log:\n{tail(self.log_dir / f'{name}.log', 25)}")

    def wait_for_status_page(self, timeout: float = 60) -> None:
        if self.status_port is None:
            return
        deadline = time.monotonic() + timeout
        while not port_open(self.status_port) and time.monotonic() < deadline:
            self.check_alive()
            time.sleep(0.5)

    def stop(self) -> None:
        for name, process in self.handles.items():
            stop(process.pid, timeout_seconds=20)
            process.poll()


TOPIC_WAIT_SECONDS = 120  # for the product to make the topic a collector follows


class TopicCollector:
    """Follows one of the product's topics from the beginning, decoding with `schema`;
    `wait_for` blocks until a matching record (alerts: by kind) arrives.

    The pipeline publishes at least once: a batch whose publish timed out (Kafka stalls acks=all
    writes for ~30 s after a log dir fails) is published again with the same message ids. A
    record whose `id` was already collected is therefore skipped, as any alert consumer should."""

    def __init__(self, bootstrap_servers: str, topic: str, schema: str = "Alert",
                 client: ClientConfig = PLAINTEXT, patience: float = 1.0) -> None:
        self.schema = schema
        self.patience = patience  # multiplies every `wait_for`'s timeout (the demo's --patience)
        self.alerts: list[dict] = []
        self._ids: set[str] = set()
        self._condition = threading.Condition()
        self._stop = threading.Event()
        # Made right after the product starts, which makes its topics as it starts: subscribed to a
        # topic not made yet, librdkafka looks for it again only at its metadata refresh (five
        # minutes by default). The scenarios' commands collector once saw none of a run's
        # commands while the alerts one saw every alert (CI-equivalent, 2026-11-29); so the topic
        # is awaited first, and the refresh is short.
        self._consumer = Consumer(client_settings(
            bootstrap_servers, client, **{"group.id": f"demo-alerts-{uuid.uuid4().hex[:8]}",
                                          "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                          "topic.metadata.refresh.interval.ms": 2000}))
        self._await_topic(topic, TOPIC_WAIT_SECONDS)
        self._consumer.subscribe([topic])
        self._thread = threading.Thread(target=self._run, name="alert-collector", daemon=True)
        self._thread.start()

    def _await_topic(self, topic: str, seconds: float) -> None:
        """Until `topic` shows partitions in the metadata, or `seconds` passed (then subscribed
        all the same: the short refresh finds it later)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if topic_partitions(self._consumer, topic, timeout=5):
                    return
            except ReassignerError:
                pass  # the cluster briefly away: asked again
            time.sleep(0.5)

    def _run(self) -> None:
        while not self._stop.is_set():
            for message in self._consumer.consume(100, 0.3):
                if message.error() is not None:
                    continue
                try:
                    alert = decode(self.schema, message.value())
                except Exception:
                    continue
                with self._condition:
                    record_id = alert.get("id")
                    if record_id is not None:
                        if record_id in self._ids:
                            continue  # a re-publication (see class doc)
                        self._ids.add(record_id)
                    self.alerts.append(alert)
                    self._condition.notify_all()
        self._consumer.close()

    def of_kind(self, kind: str, since: int = 0) -> list[dict]:
        """Alerts of a kind, or commands whose payload is of that kind."""
        with self._condition:
            return [a for a in self.alerts[since:]
                    if a.get("kind", (a.get("payload") or ("",))[0]) == kind]

    def records(self, since: int = 0) -> list[dict]:
        """Every record decoded since the mark `since`, in arrival order."""
        with self._condition:
            return list(self.alerts[since:])

    def mark(self) -> int:
        with self._condition:
            return len(self.alerts)

    def describe(self, since: int = 0, limit: int = 60) -> str:
        """The records since `since`, one line each (alerts: kind and message; commands: kind,
        id and target), for a failure message."""
        lines = []
        for record in self.records(since)[-limit:]:
            if "kind" in record:
                lines.append(f"  {record['kind']}: {record['message']}")
            elif "payload" in record:
                kind, fields = command_kind(record), record["payload"][1]
                target = fields.get("target_replicas")
                lines.append(f"  {kind} {record['id']}" + (f" -> {target}" if target else ""))
            else:
                lines.append(f"  {record.get('command_kind')} {record.get('command_id')}: "
                             f"{'ok' if record.get('ok') else record.get('error_code')}")
        return "\n".join(lines) or "  (none)"

    def wait_for(self, kind: str, since: int = 0, timeout: float = 120,
                 where: Callable[[dict], bool] = lambda alert: True,
                 on_wait: Callable[[], None] = lambda: None) -> dict:
        timeout *= self.patience
        deadline = time.monotonic() + timeout
        while True:
            matching = [a for a in self.of_kind(kind, since) if where(a)]
            if matching:
                return matching[0]
            if time.monotonic() > deadline:
                seen = sorted({a.get("kind", (a.get("payload") or ("?",))[0]) for a in self.alerts[since:]})
                raise TimeoutError(f"no {kind} alert within {timeout:.0f} s (saw {seen})")
            on_wait()
            with self._condition:
                self._condition.wait(0.5)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


class ClusterProbe:
    """What Kafka itself says, through the Admin API (kafka-python), fresh on each call."""

    def __init__(self, bootstrap_servers: str, client: ClientConfig = PLAINTEXT) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.client = client

    def _client(self):
        from runtime.clients.kafka_fast_reads import open_admin_client

        return open_admin_client(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=15000,
                                 **self.client.kafka_python)

    def partitions(self, topics: list[str] | None = None) -> dict[tuple[str, int], dict]:
        """Every partition of `topics` (all topics when None): replicas, ISR, leader, offline
        replicas and whether a reassignment is in progress."""
        client = self._client()
        try:
            described = client.describe_topics(topics)
            moving = client.list_partition_reassignments()
        finally:
            client.close()
        result = {}
        for topic in described:
            for p in topic["partitions"]:
                key = (topic["name"], p["partition_index"])
                result[key] = {"replicas": list(p["replica_nodes"]), "isr": list(p["isr_nodes"]),
                               "leader": p["leader_id"],
                               "offline": list(p.get("offline_replicas", [])),
                               "reassigning": key in _keys(moving)}
        return result

    def log_dirs(self, broker_id: int) -> dict[str, dict]:
        """describe-log-dirs of one broker: per dir, its error code, its replicas (topic,
        partition) → size in bytes, and the partitions with a future replica copying into it."""
        client = self._client()
        try:
            [answer] = client.describe_log_dirs(brokers=[broker_id])
        finally:
            client.close()
        dirs = {}
        for d in answer["log_dirs"]:
            replicas, futures = {}, set()
            for topic in d["topics"]:
                for p in topic["partitions"]:
                    key = (topic["name"], p["partition_index"])
                    if p.get("is_future_key"):
                        futures.add(key)
                    else:
                        replicas[key] = p["partition_size"]
            dirs[d["log_dir"]] = {"error_code": d["error_code"], "replicas": replicas, "futures": futures}
        return dirs

    def brokers(self) -> dict[int, dict]:
        client = self._client()
        try:
            return {b["broker_id"]: b for b in client.describe_cluster()["brokers"]}
        finally:
            client.close()


def _keys(moving: object) -> set[tuple[str, int]]:
    """Partition keys of a list_partition_reassignments answer (a dict keyed by partition)."""
    keys = set()
    for key in (moving or {}):
        topic = getattr(key, "topic", None)
        partition = getattr(key, "partition", None)
        if topic is None and isinstance(key, tuple):
            topic, partition = key
        keys.add((topic, partition))
    return keys


__all__ = ["ClusterProbe", "ProductProcesses", "TopicCollector", "is_alive"]
