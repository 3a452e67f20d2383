"""The world the demo and the scenario tests share: a real local cluster with the whole product
running, the instruments that watch it, and the scenes that act on it.

`World.setup()` starts a KRaft cluster of 3 brokers (2 log dirs each, racks /dc1/r1, /dc1/r2,
/dc2/r1) and Redis, creates topics with data (RF 3, min.insync.replicas 2) and sequenced traffic
that runs throughout, starts the product as separate processes of the real CLI (pipeline,
watcher, executor, status page) and the invariant monitor (`monitor`, sampling Kafka every
250 ms). Each scene (`add_broker`, `decommission`, `fail_log_dir`, `cancel_manual`,
`kill_broker`, `bad_input`) acts as an operator or a failing machine would and waits on what
Kafka itself shows, never on sleeps; `scene(...)` records its figures (moves against the
planner's bound, steps, peaks) and, when it fails, `diagnostics()` (alerts, commands, what Kafka
and the pipeline show, the logs' ends). `finish()` stops the traffic and reads every record back
(`traffic`) and stops the monitor; `teardown()` stops everything.

The demo (`reassigner.dev.demo.story`) tells the scenes in order with a summary; the scenario
tests (tests/scenarios) run them one by one and assert on the cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from planning.model import TopicPartition
from reassigner.dev.harness.cluster_tools import SlowReplication, create_topics, throttled_brokers, write_bulk
from reassigner.dev.harness.monitor import InvariantMonitor, MonitorReport
from reassigner.dev.harness.product import ClusterProbe, ProductProcesses, TopicCollector
from reassigner.dev.harness.traffic import SequencedTraffic, TrafficReport
from reassigner.dev.local.kafka_admin import client_settings
from reassigner.dev.local.processes import free_port, tail
from reassigner.dev.local.stack import LocalStack

RACKS = ("/dc1/r1", "/dc1/r2", "/dc2/r1")
ADDED_RACKS = ("/dc2/r2", "/dc1/r3")  # the two brokers of scene 1 (ids 4 and 5)
ADD_GRACE_SECONDS = 30  # scene 1: longer than one broker takes to start, so both share a plan
TOPICS = {"orders": 12, "payments": 8, "audit": 4}  # carry the sequenced traffic
BULK_TOPIC = "archive"  # a few MB of filler per partition, for the cancelled manual move
# Several, so that some partition can take a new replica whatever scenes 1-3 did with them.
BULK_PARTITIONS = 6
MIN_INSYNC_REPLICAS = 2
CLUSTER_NAME = "demo"

# Short grace periods and modest limits so that every reaction shows within a minute.
DEMO_SETTINGS = {
    "REASSIGNER_CLUSTER_NAME": CLUSTER_NAME,
    "REASSIGNER_BROKER_ADD_GRACE_SECONDS": "5",
    "REASSIGNER_BROKER_FAILURE_GRACE_SECONDS": "15",
    "REASSIGNER_MAX_PARTITION_MOVEMENTS": "6",
    "REASSIGNER_MAX_LEADER_MOVEMENTS": "3",
    "REASSIGNER_MAX_REPLICA_MOVEMENTS": "1",
    "REASSIGNER_MAX_MOVEMENTS_PER_BROKER": "4",
    "REASSIGNER_POLL_INTERVAL_SECONDS": "1",
    "REASSIGNER_SNAPSHOT_INTERVAL_SECONDS": "30",
}


def replica_disagreements(kafka: dict[tuple[str, int], dict], state) -> list[str]:
    """The partitions of `kafka` (a `ClusterProbe.partitions` answer) whose replica set differs
    from the product's view in `state` (its `ControllerState`), described."""
    product = state.cluster.partitions_by_tp
    differ = []
    for (topic, number), seen in sorted(kafka.items()):
        known = product.get(TopicPartition(topic, number))
        if known is None or sorted(known.replicas) != sorted(seen["replicas"]):
            differ.append(f"{topic}-{number}: Kafka {sorted(seen['replicas'])}, product "
                          f"{sorted(known.replicas) if known else 'unknown'}")
    return differ




def plan_manual_moves(replicas: dict[tuple[str, int], list[int]], hosts: dict[tuple[str, int], set[int]],
                      count: int) -> dict[tuple[str, int], list[int]]:
    """The demo operator's manual plan: for up to `count` partitions, one replica replaced by a
    broker of `hosts[partition]` that does not hold it yet, the replication factor kept. Broker
    ids are taken lowest first; a replica on a broker outside `hosts` is the one replaced when
    there is one (moving off a broken broker is what an operator would do), else the last.
    Partitions with no such broker are left out."""
    targets: dict[tuple[str, int], list[int]] = {}
    for tp in sorted(replicas):
        current, allowed = list(replicas[tp]), hosts.get(tp, set())
        incoming = sorted(allowed - set(current))
        if not incoming or len(targets) >= count:
            continue
        leaving = next((b for b in current if b not in allowed), current[-1])
        targets[tp] = [incoming[0] if b == leaving else b for b in current]
    return targets


@dataclass
class SceneResult:
    name: str
    seconds: float
    replica_moves: str = "-"
    lower_bound: str = "-"
    steps: int = 0
    peak_in_flight: int = 0  # steps in flight as the product counts them (Redis), sampled 4×/s
    peak_moving_in_kafka: int = 0  # partitions reassigning as Kafka showed them (the monitor)
    peak_leader_movements: int = 0  # of those, the ones moving leadership (the monitor)
    outcome: str = "ok"


@dataclass
class World:
    stack_dir: Path
    cache_dir: Path
    console: Console = field(default_factory=lambda: Console(stderr=False))
    results: list[SceneResult] = field(default_factory=list)
    brokers: int = 3
    racks: tuple[str, ...] = RACKS
    security: str = "none"
    """"sasl_ssl": the secured stack; the product runs as its non-super principal and the
    world's own instruments as the stack's super user."""

    def __post_init__(self) -> None:
        self.stack = LocalStack(self.stack_dir, self.cache_dir)
        self.environment = {**DEMO_SETTINGS, "REASSIGNER_CACHE_DIR": str(self.cache_dir),
                            "REASSIGNER_STACK_DIR": str(self.stack_dir),
                            "REASSIGNER_CHECKPOINT_DIR": str(self.stack_dir / "checkpoints"),
                            "PYSPARK_PYTHON": sys.executable}
        self.status_port = free_port()
        self.metrics_ports = {name: free_port() for name in ("pipeline", "watcher", "executor")}

    # --- narration and waiting -----------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.console.print(text)

    def cli(self, *arguments: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run the real `reassigner` CLI as a user would, against the demo stack; one that has
        not ended after 300 s is killed and raises TimeoutError, as a wait does."""
        try:
            result = subprocess.run(
                [sys.executable, "-m", "reassigner.cli", *arguments, "--stack-dir", str(self.stack_dir)],
                capture_output=True, text=True, env={**os.environ, **self.environment}, timeout=300,
            )
        except subprocess.TimeoutExpired as error:
            raise TimeoutError(f"reassigner {' '.join(arguments)}: not done after {error.timeout:.0f} s") from None
        if check and result.returncode != 0:
            raise RuntimeError(f"reassigner {' '.join(arguments)} failed: {result.stderr.strip()}")
        return result

    def wait(self, description: str, done: Callable[[], bool | tuple[int, int]],
             timeout: float = 180) -> None:
        """Wait with a progress bar; `done` returns True/False or (completed, total)."""
        with Progress(TextColumn("  {task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                      TimeElapsedColumn(), console=self.console, transient=True) as progress:
            task = progress.add_task(description, total=None, info="")
            deadline = time.monotonic() + timeout
            while True:
                self.product.check_alive()
                state = done()
                if isinstance(state, tuple):
                    completed, total = state
                    progress.update(task, total=max(total, 1), completed=completed,
                                    info=f"{completed}/{total}")
                    finished = total > 0 and completed >= total
                else:
                    finished = bool(state)
                if finished:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{description}: not done after {timeout:.0f} s")
                time.sleep(0.5)

    # --- probes -------------------------------------------------------------------------------------
    def partitions(self, topics: list[str] | None = None) -> dict[tuple[str, int], dict]:
        return self.probe.partitions(topics or list(TOPICS))

    def fully_replicated(self, topics: list[str] | None = None) -> tuple[int, int]:
        parts = self.partitions(topics)
        alive = {b for b, info in self.probe.brokers().items() if not info["is_fenced"]}
        good = sum(1 for p in parts.values()
                   if len(p["replicas"]) == 3 and set(p["replicas"]) <= alive
                   and sorted(p["isr"]) == sorted(p["replicas"]) and not p["reassigning"]
                   and not p["offline"])
        return good, len(parts)

    def replicas_on(self, broker_id: int) -> int:
        return sum(1 for p in self.partitions().values() if broker_id in p["replicas"])

    def controller_state(self):
        """What the pipeline keeps in Redis; sampling it also records the peak steps in flight."""
        state = self.store.load()
        in_flight = sum(1 for r in state.reassignments.values() if r.in_flight is not None)
        self.peak_in_flight = max(self.peak_in_flight, in_flight)
        return state

    def plan_figures(self, since: int) -> tuple[str, str]:
        plans = self.alerts.of_kind("PlanCreated", since)
        if not plans:
            return "-", "-"
        moves = sum(int(p["details"].get("replica_moves", 0)) for p in plans)
        bound = sum(int(p["details"].get("lower_bound", 0)) for p in plans)
        return str(moves), str(bound)

    def setup(self) -> None:
        self.say("[bold]kafka-reassigner demo[/] — a real Kafka cluster, Redis and Spark on this machine\n")
        with self.console.status(f"starting Kafka (KRaft: 1 controller, {self.brokers} brokers, 2 log dirs "
                                 "each) and Redis"):
            state = self.stack.up(brokers=self.brokers, log_dirs=2, racks=self.racks,
                                  security=self.security)
        self.bootstrap = state.bootstrap_servers
        self.client = state.admin_client_config()
        self.probe = ClusterProbe(self.bootstrap, self.client)
        self.say(f"  cluster up: {self.bootstrap}; racks {', '.join(self.racks)}")
        if state.security != "none":
            self.say(f"  secured: SASL_SSL (SCRAM-SHA-512) with ACLs, the product as User:reassigner (not a "
                     f"super user), Redis over TLS with an ACL user; client settings {state.client_properties}")
        create_topics(self.bootstrap, {**TOPICS, BULK_TOPIC: BULK_PARTITIONS}, MIN_INSYNC_REPLICAS,
                      client=self.client)
        # The traffic starts once the brokers answer for every new partition with its leader and
        # every replica in sync: first records produced while they did not yet were retried by the
        # idempotent producer, acknowledged without an offset, and missing from the log (the
        # traffic check's flake: "first delivery reports [5:0@None, 5:1@None, 5:2@0], log starts
        # [2, 3, 4]").
        deadline = time.monotonic() + 60
        while (ready := self.fully_replicated(list(TOPICS)))[0] < ready[1] and time.monotonic() < deadline:
            time.sleep(0.5)
        self.traffic = SequencedTraffic(self.bootstrap, TOPICS, client=self.client).start()
        self.say(f"  topics {', '.join(f'{t} ({n} partitions)' for t, n in TOPICS.items())}: RF 3, "
                 f"min.insync.replicas {MIN_INSYNC_REPLICAS}; sequenced traffic running")
        self.product = ProductProcesses(self.stack_dir, self.environment, self.status_port,
                                        metrics_ports=self.metrics_ports)
        self.product.start()
        self.alerts = TopicCollector(self.bootstrap, "reassigner.alerts", "Alert", self.client)
        self.commands = TopicCollector(self.bootstrap, "reassigner.commands", "Command", self.client)
        from runtime.clients.redis_io import connect_redis
        from state.controller_store import ControllerStore

        self.store = ControllerStore(connect_redis(state.redis_url), CLUSTER_NAME)
        self.peak_in_flight = 0
        # Steps in flight are sampled in the background: a scene that waits on Kafka alone would
        # otherwise see none of the product's steps, however many it ran.
        self._stop_sampling = threading.Event()
        threading.Thread(target=self._sample_steps_in_flight, name="steps-in-flight",
                         daemon=True).start()
        self.say("  product starting: pipeline (Spark Structured Streaming), watcher, executor, "
                 f"status page http://127.0.0.1:{self.status_port}/")
        self.wait("waiting for the pipeline to see the whole cluster",
                  lambda: self.pipeline_sees(sum(TOPICS.values())), timeout=240)
        self.monitor = InvariantMonitor(
            self.bootstrap, int(DEMO_SETTINGS["REASSIGNER_MAX_PARTITION_MOVEMENTS"]),
            int(DEMO_SETTINGS["REASSIGNER_MAX_LEADER_MOVEMENTS"]),
            {t: MIN_INSYNC_REPLICAS for t in TOPICS}, client=self.client).start()
        self.say("  invariant monitor sampling the cluster every 250 ms")

    def _sample_steps_in_flight(self, interval: float = 0.25) -> None:
        while not self._stop_sampling.wait(interval):
            try:
                self.controller_state()
            except Exception:  # Redis busy or going down with the stack: sample again next time
                pass

    def pipeline_sees(self, partitions: int) -> tuple[int, int]:
        seen = self.controller_state().cluster.partitions_by_tp
        return sum(1 for tp in seen if tp.topic in TOPICS), partitions

    def scene(self, name: str, action: Callable[[SceneResult], None], catch: bool = True) -> SceneResult:
        """Run one scene and record its figures. A scene that times out (or whose product process
        died) is marked FAILED and the story goes on; with `catch=False` the error propagates,
        with the scene's alerts, commands and logs appended (`diagnostics`)."""
        self.say(f"\n[bold cyan]{name}[/]")
        result = SceneResult(name, 0.0)
        mark, wall_mark = time.monotonic(), time.time()
        alerts_before, commands_before = self.alerts.mark(), self.commands.mark()
        self.peak_in_flight = 0
        try:
            action(result)
        except (TimeoutError, RuntimeError, AssertionError) as error:
            result.outcome = f"FAILED: {error}"
            self.say(f"  [red]{error}[/]")
            details = self.diagnostics(alerts_before, commands_before)
            if not catch:
                raise AssertionError(f"{name}: {error}\n{details}") from error
            # Kept outside the stack dir, which the teardown deletes.
            report = self.stack_dir.with_name(f"{self.stack_dir.name}-failed-scene-{len(self.results) + 1}.txt")
            report.write_text(f"{name}: {error}\n{details}\n")
            logs = report.with_suffix("")
            shutil.rmtree(logs, ignore_errors=True)
            shutil.copytree(self.product.log_dir, logs, dirs_exist_ok=True)
            for server_log in self.stack_dir.glob("*/logs/server.log"):
                shutil.copy(server_log, logs / f"{server_log.parent.parent.name}-server.log")
            self.say(f"  what the product and Kafka showed: {report} (whole logs in {logs.name}/)")
        finally:
            result.seconds = time.monotonic() - mark
            result.steps = len(self.commands.of_kind("ReassignmentStep", commands_before))
            result.peak_in_flight = self.peak_in_flight
            if getattr(self, "monitor", None) is not None:
                result.peak_moving_in_kafka, result.peak_leader_movements = self.monitor.peaks_since(wall_mark)
            self.results.append(result)
        return result

    def diagnostics(self, alerts_since: int = 0, commands_since: int = 0) -> str:
        """What the product did since the marks, what Kafka shows moving, and its logs' ends."""
        parts = [f"alerts since the scene began:\n{self.alerts.describe(alerts_since)}",
                 f"commands since the scene began:\n{self.commands.describe(commands_since)}"]
        try:
            moving = {k: v for k, v in self.probe.partitions().items() if v["reassigning"] or v["offline"]
                      or sorted(v["isr"]) != sorted(v["replicas"])}
            parts.append("Kafka: partitions moving, offline or under-replicated: "
                         + (", ".join(f"{t}-{p} {v['replicas']} isr {v['isr']}"
                                      for (t, p), v in sorted(moving.items())) or "none"))
            state = self.store.load()
            differ = replica_disagreements(self.probe.partitions([*TOPICS, BULK_TOPIC]), state)
            parts.append("replica sets where the product's view differs from Kafka's: "
                         + (", ".join(differ) or "none"))
            parts.append("pipeline state: " + (", ".join(
                f"{tp} {r.state.value} -> {list(r.final_target)}"
                + (f" (step {r.in_flight.number} in flight)" if r.in_flight else "")
                for tp, r in sorted(state.reassignments.items())) or "nothing moving"))
        except Exception as error:  # diagnostics must never hide the original failure
            parts.append(f"(could not read the cluster or Redis: {error!r})")
        monitor = getattr(self, "monitor", None)
        if monitor is not None:
            latest = monitor.latest()
            parts.append(f"invariant monitor: {monitor.report.samples} samples, "
                         f"{monitor.report.failed_samples} failed (last: {monitor.report.last_error or '-'}); "
                         + (f"latest {time.time() - latest.at:.1f} s ago, moving "
                            f"{ {f'{t}-{n}': sorted(r) for (t, n), r in sorted(latest.moving.items())} }"
                            if latest else "no sample yet"))
        for name in ("pipeline", "watcher", "executor"):
            parts.append(f"--- {name} log (last lines) ---\n{tail(self.product.log_dir / f'{name}.log', 15)}")
        return "\n".join(parts)

    def set_config(self, assignment: str, timeout: float = 90) -> dict:
        """`reassigner config set KEY=VALUE`, then the pipeline's ConfigChanged alert for it."""
        since = self.alerts.mark()
        key = assignment.partition("=")[0]
        self.cli("config", "set", assignment)
        return self.alerts.wait_for("ConfigChanged", since, timeout,
                                    where=lambda a: a["details"].get("key") == key)

    def finish(self) -> tuple[TrafficReport, MonitorReport]:
        """Stop the traffic and read every record back; stop the monitor."""
        report = self.traffic.stop_and_verify()
        self.monitor_report = self.monitor.stop()
        return report, self.monitor_report

    def add_broker(self, result: SceneResult) -> None:
        since = self.alerts.mark()
        # A broker takes several seconds to start here: a grace longer than the demo's 5 s lets
        # the second addition join the first one's plan.
        self.set_config(f"broker.add.grace={ADD_GRACE_SECONDS}")
        try:
            added = [self.stack.add_broker(rack=rack) for rack in ADDED_RACKS]
            names = " and ".join(f"{b.id} (rack {b.rack})" for b in added)
            self.say(f"  `reassigner config set broker.add.grace={ADD_GRACE_SECONDS}`; brokers {names} "
                     "joined; the product waits out the add grace, so that the two additions coalesce "
                     "into one plan")
            self.alerts.wait_for("BrokerAdded", since, 60)
            self.alerts.wait_for("PlanCreated", since, ADD_GRACE_SECONDS + 90)
        finally:
            self.set_config("broker.add.grace=")
        result.replica_moves, result.lower_bound = self.plan_figures(since)
        self.say(f"  plan: {result.replica_moves} replica moves (lower bound {result.lower_bound})")
        self.wait("rebalancing onto the new brokers (steps in rolling batches)",
                  lambda: self.settled(since), timeout=300)
        held = ", ".join(f"broker {b.id}: {self.replicas_on(b.id)}" for b in added)
        self.say(f"  replicas of the demo topics now on the new brokers — {held}")

    def settled(self, since: int = 0, topics: list[str] | None = None) -> tuple[int, int]:
        """(partitions of `topics` fully replicated, total), and nothing left moving."""
        good, total = self.fully_replicated(topics)
        moving = self.controller_state().reassignments
        return (good if not moving else min(good, total - 1)), total

    def decommission(self, result: SceneResult) -> None:
        since = self.alerts.mark()
        self.cli("request", "decommission", "--broker", "2")
        self.say("  `reassigner request decommission --broker 2`")
        self.wait("draining broker 2", lambda: (1 if self.replicas_on(2) == 0 else 0, 1), 300)
        self.alerts.wait_for("BrokerDrained", since, 60)
        result.replica_moves, result.lower_bound = self.plan_figures(since)
        self.say("  broker 2 holds nothing: BrokerDrained")

    def fail_log_dir(self, result: SceneResult) -> None:
        # Broker 1, which scene 5 kills: Kafka cannot host again, until it restarts, a partition
        # that its failed dir held. The product keeps those off it (Broker.cannot_host); the
        # manual request of scene 4 leaves broker 1 out altogether, as an operator would.
        since = self.alerts.mark()
        self.cli("local", "fail-logdir", "1", "data-0")  # returns once Kafka shows the dir offline
        offline_at = time.monotonic()
        self.say("  log dir data-0 of broker 1 replaced by a plain file; Kafka took it offline")
        # Normally a few seconds (watcher poll + one micro-batch); generous for a loaded machine.
        disk = self.alerts.wait_for("DiskFailed", since, 150, on_wait=self.product.check_alive)
        self.say(f"  → DiskFailed {time.monotonic() - offline_at:.0f} s later: {disk['message']}")
        self.wait("restoring the replication factor", lambda: self.settled(since), 300)
        result.replica_moves, result.lower_bound = self.plan_figures(since)
        self.say("  every partition has its 3 replicas in sync again")
        kept_off = self.controller_state().cluster.broker(1).cannot_host
        self.say(f"  {len(kept_off)} partitions the dir held stay off broker 1 until it restarts "
                 "(Kafka would not start them there)")

    def add_log_dir(self, result: SceneResult, broker_id: int = 3) -> None:
        """A disk added: the broker restarts with one more, empty log dir; the product moves
        replicas into it (largest first) until the broker's dirs hold their shares."""
        since = self.alerts.mark()
        # The restart takes the broker away for some seconds: a long failure grace keeps the
        # product from healing it meanwhile (the operator's restart is not a failure).
        self.set_config("broker.failure.grace=600")
        try:
            added = self.stack.add_log_dir(broker_id)
            self.say(f"  `reassigner local add-logdir {broker_id}`: broker {broker_id} restarted with a new, "
                     f"empty log dir {Path(added).name}")
            self.planned_dirs = self.alerts.wait_for(
                "LogDirsUnbalanced", since, 180, on_wait=self.product.check_alive,
                where=lambda a: a["details"].get("broker_id") == str(broker_id) and a["details"].get("executed") == "true")
            self.say(f"  → {self.planned_dirs['message']}")
            balanced = self.alerts.wait_for(
                "LogDirsBalanced", since, 300, on_wait=self.product.check_alive,
                where=lambda a: a["details"].get("broker_id") == str(broker_id))
            self.say(f"  → LogDirsBalanced: {balanced['message']}")
            self.wait(f"broker {broker_id} back in every ISR", lambda: self.settled(since), 300)
        finally:
            self.set_config("broker.failure.grace=")
        result.replica_moves, result.lower_bound = self.planned_dirs["details"]["moves"], "-"
        self.added_dir = added

    def cancel_manual(self, result: SceneResult) -> None:
        since = self.alerts.mark()
        commands_before = self.commands.mark()
        # The operator's starting point: Kafka's replicas, once the product's view agrees with
        # them and nothing of the topic moves (the heal of scene 3 may still be settling it).
        self.wait("the product's view of the bulk topic agrees with Kafka's",
                  lambda: not self.bulk_topic_disagreement(), 60)
        parts = self.probe.partitions([BULK_TOPIC])
        state = self.controller_state()
        live = [b for b, info in self.probe.brokers().items() if not info["is_fenced"]]
        # Not broker 2 (decommissioned), nor a broker Kafka would not start the replica on (a
        # partition broker 1's failed dir held: see `fail_log_dir`).
        hosts = {tp: {b for b in live if b != 2}
                 - state.cluster.brokers_that_cannot_host(TopicPartition(*tp)) for tp in parts}
        targets = plan_manual_moves({tp: p["replicas"] for tp, p in parts.items()}, hosts, 2)
        if not targets:
            raise AssertionError(f"no partition of {BULK_TOPIC} can take a new replica: "
                                 f"{ {tp: p['replicas'] for tp, p in parts.items()} }, hosts {hosts}")
        chosen = sorted(targets)
        before = {tp: parts[tp]["replicas"] for tp in chosen}
        # Some bulk data, moved slowly, so that the cancel lands mid-flight: the product's own
        # throttle reaches the brokers only after its steps have started (a few MB copy in
        # well under a second locally), so the demo first slows replication of the topic
        # itself, as a busy network would (`SlowReplication`, Kafka's quotas).
        write_bulk(self.bootstrap, chosen, megabytes=4, client=self.client)
        with SlowReplication(self.bootstrap, BULK_TOPIC, live, 100_000, client=self.client):
            self.cli("config", "set", "throttle.bytes.per.sec=300000")
            plan = {"version": 1, "partitions": [
                {"topic": t, "partition": p, "replicas": targets[(t, p)]} for t, p in chosen]}
            plan_file = self.stack_dir / "manual-plan.json"
            plan_file.write_text(json.dumps(plan))
            self.cli("request", "reassign", "--file", str(plan_file))
            self.say(f"  `reassigner request reassign --file {plan_file.name}`: {len(chosen)} partitions "
                     "with 4 MB each, throttled to 300 kB/s")
            try:
                self.cancel_mid_flight(since, commands_before, before)
            except Exception:
                # Leave nothing running for the next scenes (a step towards broker 1, which scene
                # 5 kills, would never finish).
                self.cli("request", "cancel", check=False)
                raise
        self.cli("config", "set", "throttle.bytes.per.sec=")
        self.commands.wait_for("ClearThrottle", commands_before, 60)
        self.wait("the product clears its throttle", lambda: not throttled_brokers(self.bootstrap, live, self.client), 60)
        self.say("  every partition is back on its original replicas; throttle cleared")

    def cancel_mid_flight(self, since: int, commands_before: int,
                          before: dict[tuple[str, int], list[int]]) -> None:
        """Once the manual plan is running: cancel it while its first steps copy data, and wait
        until every partition is back on its `before` replicas."""
        chosen = sorted(before)
        plan_created = self.alerts.wait_for("PlanCreated", since, 90)
        moves = int(plan_created["details"].get("replica_moves", 0))
        if moves != len(chosen):
            raise AssertionError(
                f"the product planned {moves} replica moves for {len(chosen)} new replicas: its "
                f"view of {BULK_TOPIC} was not Kafka's at the start of the scene ({before}); now "
                f"{self.bulk_topic_disagreement() or 'they agree'}")
        self.commands.wait_for("ReassignmentStep", commands_before, 90)
        self.wait("the first steps copy data", lambda: any(
            p["reassigning"] for p in self.probe.partitions([BULK_TOPIC]).values()), 60)
        self.cli("request", "cancel")
        self.say("  `reassigner request cancel` while the first step copies data")
        self.alerts.wait_for("ReassignmentCancelled", since, 90,
                             where=lambda a: "back at its original replicas" in a["message"])
        self.wait("reverting to the original replicas",
                  lambda: (sum(sorted(self.probe.partitions([BULK_TOPIC])[tp]["replicas"])
                               == sorted(before[tp]) for tp in chosen), len(chosen)), 180)

    def bulk_topic_disagreement(self) -> str:
        """Where Kafka and the product disagree on the bulk topic's replicas, or where either
        shows it moving ('' when they agree and it is still)."""
        kafka = self.probe.partitions([BULK_TOPIC])
        state = self.controller_state()
        moving = [f"{t}-{n} is moving" for (t, n), seen in sorted(kafka.items())
                  if seen["reassigning"] or TopicPartition(t, n) in state.reassignments]
        return "; ".join(moving + replica_disagreements(kafka, state))

    def kill_broker(self, result: SceneResult) -> None:
        since = self.alerts.mark()
        self.stack.stop_broker(1, kill=True)
        self.say("  broker 1 killed (SIGKILL); healing starts once the failure grace (15 s) has passed")
        self.alerts.wait_for("BrokerFailed", since, 90)
        self.wait("healing: replicas of broker 1 move to live brokers", lambda: self.settled(since), 300)
        result.replica_moves, result.lower_bound = self.plan_figures(since)
        self.say("  healed: every partition has 3 in-sync replicas on live brokers")

    def bad_input(self, result: SceneResult) -> None:
        since = self.alerts.mark()
        bad_plan = self.stack_dir / "bad-plan.json"
        bad_plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [3, 99, 4]}]}))
        refused = self.cli("request", "reassign", "--file", str(bad_plan), check=False)
        if refused.returncode != 2 or "INVALID_REPLICA_ASSIGNMENT" not in refused.stderr:
            raise RuntimeError(f"a reassignment to broker 99 was not refused locally: {refused.stderr.strip()}")
        self.say(f"  a reassignment naming broker 99 (unknown) → refused before publishing: {refused.stderr.strip()}")
        answered = self.cli("request", "approve", "no-such-proposal", check=False)  # only the pipeline knows
        rejected = self.alerts.wait_for("RequestRejected", since, 60)
        self.say(f"  an approval of an unknown proposal → exit {answered.returncode}, RequestRejected: "
                 f"{rejected['message']}")
        from confluent_kafka import Producer

        producer = Producer(client_settings(self.bootstrap, self.client))
        producer.produce("reassigner.isr-changes", key=b"garbage", value=b"\x07not avro\xff")
        producer.flush(10)
        self.say("  a garbage message on reassigner.isr-changes")
        bad = self.alerts.wait_for("BadEvent", since, 60)
        self.say(f"  → BadEvent: {bad['message']} (the record went to reassigner.dead-letter)")

    def keep_logs(self, into: Path) -> None:
        """Copy the product's and Kafka's logs out of the stack, which teardown deletes."""
        for log in [*self.stack_dir.glob("product/*.log"), *self.stack_dir.glob("*/logs/server.log")]:
            target = into / log.relative_to(self.stack_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(log, target)

    def teardown(self) -> None:
        if getattr(self, "_stop_sampling", None) is not None:
            self._stop_sampling.set()
        if getattr(self, "monitor", None) is not None and not hasattr(self, "monitor_report"):
            self.monitor.stop()
        for closing in (getattr(self, "alerts", None), getattr(self, "commands", None)):
            if closing is not None:
                closing.close()
        if getattr(self, "product", None) is not None:
            self.product.stop()
        if self.stack.state_file.exists():
            self.stack.down()

