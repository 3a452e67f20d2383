"""The product's decision path without Spark, for tests and benchmarks on a real stack.

`HandlersLoop` polls the real cluster with the watcher's adapter (`ClusterAdmin.observe`), turns
the polls into the watcher's events (`reassigner.edge.observation`: a snapshot first, then the
differences), decides with `handlers.decide.decide` — the function every pipeline batch runs —
publishes the commands of each decision on the real commands topic (encoded and headed as the
pipeline does) and feeds the executor's CommandResults into the next batch. The executor is the
real one (`reassigner.edge.executor.Executor`, its Redis ledger), in a thread. What it leaves out
is Spark's micro-batching and the controller store, which decide nothing.

`MoveTimer` samples one partition every 100 ms, independently of the product, and tells when
Kafka first showed it moving and when it reached its target with nothing moving: the duration of
a reassignment as Kafka ran it, whoever submitted it. `run_kafka_reassign_tool` runs Kafka's own
`kafka-reassign-partitions.sh` (its class, from the jars) with `--execute --throttle`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Iterable, Mapping

from handlers.decide import decide
from handlers.micro_batch import BatchInputs, Decision
from handlers.policy import Policy
from planning.model import ELIGIBLE_LEADERS, KafkaFacts
from runtime.clients.kafka_admin import ClusterAdmin
from runtime.kafka_versions import assess_cluster
from runtime.clients.kafka_producer import producer_config
from reassigner.edge.executor import Executor
from reassigner.edge.throttle_keeper import recent_commands_reader
from reassigner.edge.ledger import CommandLedger
from reassigner.edge.observation import compute_events, compute_snapshot_events
from runtime.settings import load_settings
from schemas import command_kind
from schemas.loader import CURRENT_SCHEMA_VERSION
from schemas.codec import TOPICS, decode, encode, topic_name, version_headers, writer_version_from_headers
from state.controller_store import ControllerStore
from state.model import ControllerState

REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


class HandlersLoop:
    """Real cluster and executor, decisions by the handlers (see module doc)."""

    def __init__(self, bootstrap_servers: str, redis_url: str, policy: Policy, prefix: str | None = None) -> None:
        import redis
        from confluent_kafka import Consumer, Producer

        self.prefix = prefix or f"loop{uuid.uuid4().hex[:6]}"
        self.policy = policy
        self.settings = load_settings(topic_prefix=self.prefix, cluster_name=self.prefix, executor_retry_seconds=30)
        self.admin = ClusterAdmin(bootstrap_servers)
        self.state = ControllerState(epoch=1)
        self.bootstrap_servers, self.redis = bootstrap_servers, redis.Redis.from_url(redis_url)
        self.redis.hset(ControllerStore.meta_key(self.prefix), "epoch", 1)
        self.executor = self._build_executor()
        self.producer = Producer({"bootstrap.servers": bootstrap_servers})
        self.results_consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"{self.prefix}-results",
                                          "auto.offset.reset": "earliest"})
        self.results: list[dict] = []
        self._unread: list[dict] = []
        self.commands: list[dict] = []
        self.observation = None  # None: the next decision polls a snapshot
        self.kafka: KafkaFacts | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.executor.run, args=(self._stop,), daemon=True)

    def _build_executor(self) -> Executor:
        """A real executor as `reassigner execute` builds it, with a ledger of its own."""
        return Executor(ClusterAdmin(self.bootstrap_servers), CommandLedger(self.redis, self.prefix),
                        {"bootstrap.servers": self.bootstrap_servers}, producer_config(self.bootstrap_servers),
                        self.settings,
                        recent_commands=recent_commands_reader(self.bootstrap_servers, None, self.settings))

    def __enter__(self) -> "HandlersLoop":
        self.executor.prepare_topics()  # before anything is produced or subscribed
        self.results_consumer.subscribe([topic_name("command-results", self.prefix)])
        self._thread.start()
        return self

    def stop_executor(self) -> None:
        """Stop the executor as a SIGTERM does (the message in hand finished, its offset committed)."""
        self._stop.set()
        self._thread.join(30)
        self.executor.admin.close()

    def start_executor(self) -> None:
        """A new executor process: a new ledger object, nothing of the old one's memory."""
        self.executor = self._build_executor()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.executor.run, args=(self._stop,), daemon=True)
        self._thread.start()

    def __exit__(self, *exc_info) -> None:
        self.stop_executor()
        self.results_consumer.close()
        self.admin.close()

    def decide(self, requests: Iterable[Mapping] = (), events: Iterable[tuple[str, Mapping]] = ()) -> Decision:
        """One batch: poll, decide on the new events, the given requests and the results read.
        `events` are more input events, `(topic suffix, record)` (a canary's samples)."""
        now_ms = int(time.time() * 1000)
        more = tuple(events)
        if self.observation is None:  # a snapshot, telling which Kafka runs, as the watcher's
            support = assess_cluster(self.admin.describe_kafka())
            self.kafka = KafkaFacts(support.release, support.level, support.has)
        observation = self.admin.observe(self.observation, eligible_leaders=ELIGIBLE_LEADERS in self.kafka.capabilities)
        if self.observation is None:
            observed = compute_snapshot_events(observation, f"snapshot-{now_ms}", now_ms, kafka=self.kafka)
        else:
            observed = compute_events(self.observation, observation, now_ms)
        self.observation = observation
        self._read_results()
        inputs = BatchInputs(self.state.last_batch + 1, now_ms,
                             tuple((TOPICS[suffix], record) for suffix, _key, record in observed)
                             + tuple((TOPICS[suffix], record) for suffix, record in more),
                             tuple(requests), tuple(self._unread))
        self._unread = []
        decision = decide(self.state, inputs, self.policy)
        self.state = decision.state
        for message in decision.outbox:
            if message.topic_suffix == "commands":
                self.commands.append(message.record)
                self.producer.produce(topic_name("commands", self.prefix), key=message.key.encode(),
                                      value=encode(message.schema, message.record), headers=version_headers())
        self.producer.flush(30)
        return decision

    def _read_results(self) -> None:
        while (message := self.results_consumer.poll(0.05)) is not None:
            if message.error() is None:
                record = decode("CommandResult", message.value(), writer_version_from_headers(message.headers()))
                self.results.append(record)
                self._unread.append(record)

    def reassign(self, targets: Mapping[tuple[str, int], list[int]]) -> dict:
        """A Reassign request, as the CLI writes it."""
        return self._request("Reassign", {"version": 1, "additional": False, "partitions": [
            {"topic": t, "partition": p, "replicas": list(r), "log_dirs": None} for (t, p), r in targets.items()]})

    def decommission(self, broker_ids: Iterable[int]) -> dict:
        """A Decommission request, as the CLI writes it."""
        return self._request("Decommission", {"broker_ids": sorted(broker_ids)})

    def recommission(self, broker_ids: Iterable[int]) -> dict:
        """A Recommission request (an action, its payload a Tick), as the CLI writes it."""
        return self._request("Tick", {}, {"kind": "Recommission", "proposal_id": None, "broker_ids": sorted(broker_ids)})

    def _request(self, kind: str, fields: Mapping, action: Mapping | None = None) -> dict:
        now_ms = int(time.time() * 1000)
        return {"schema_version": CURRENT_SCHEMA_VERSION, "event_time": now_ms, "id": f"{kind.lower()}-{uuid.uuid4()}",
                "key": kind.lower(), "requested_by": "harness", "payload": (kind, dict(fields)),
                "action": None if action is None else dict(action)}

    def run_until_settled(self, requests: Iterable[Mapping], timeout: float = 600.0, period: float = 0.5) -> None:
        """Decide every `period` until a reassignment was made, none is left and every command
        issued has a result."""
        self.decide(requests)
        deadline = time.monotonic() + timeout
        while True:
            answered = {r["command_id"] for r in self.results}
            if not self.state.reassignments and self.commands and all(c["id"] in answered for c in self.commands):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"not settled in {timeout} s: {len(self.state.reassignments)} reassignments, "
                                   f"{sum(c['id'] not in answered for c in self.commands)} commands unanswered")
            time.sleep(period)
            self.decide()

    def commands_of(self, kind: str) -> list[dict]:
        return [c for c in self.commands if command_kind(c) == kind]


class MoveTimer:
    """When Kafka first shows a partition moving, and when it reached `target` (see module doc)."""

    def __init__(self, admin: ClusterAdmin, topic: str, partition: int, target: list[int]) -> None:
        self.admin, self.topic, self.partition, self.target = admin, topic, partition, tuple(target)
        self.started: float | None = None
        self.finished: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "MoveTimer":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            replicas, adding, removing = self.admin.read_assignment(self.topic, self.partition)
            now = time.monotonic()
            if self.started is None and (adding or removing):
                self.started = now
            if self.started is not None and not adding and not removing and tuple(replicas) == self.target:
                self.finished = now
                return
            time.sleep(0.1)

    def wait(self, timeout: float) -> float:
        """Seconds from the first sample that showed the move to the first that showed it done."""
        self._thread.join(timeout)
        if self.finished is None or self.started is None:
            raise TimeoutError(f"{self.topic}-{self.partition} did not reach {list(self.target)} in {timeout} s")
        return self.finished - self.started


def run_kafka_reassign_tool(bootstrap_servers: str, classpath: str, work: Path,
                            targets: Mapping[tuple[str, int], list[int]], arguments: list[str]) -> str:
    """Kafka's kafka-reassign-partitions.sh with a reassignment JSON of `targets` and `arguments`
    (e.g. ["--execute", "--throttle", "100000"]); its output."""
    plan = work / f"reassign-{uuid.uuid4().hex[:6]}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in targets.items()]}))
    finished = subprocess.run(
        [shutil.which("java") or "java", "-Xmx256m", "-cp", classpath, REASSIGN_TOOL,
         "--bootstrap-server", bootstrap_servers, "--reassignment-json-file", str(plan), *arguments],
        capture_output=True, text=True, timeout=120)
    if finished.returncode != 0:
        raise RuntimeError(f"kafka-reassign-partitions {arguments} failed: {finished.stdout}{finished.stderr}")
    return finished.stdout
