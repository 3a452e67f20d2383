"""`reassigner demo`: the whole product on a real local cluster, told as a story.

Order (each scene waits on what Kafka itself shows, never on sleeps):
0. a KRaft cluster of 3 brokers (2 log dirs each, racks /dc1/r1, /dc1/r2, /dc2/r1) and Redis;
   topics with data (RF 3, min.insync.replicas 2) and sequenced traffic that runs throughout;
   the product: pipeline (Spark), watcher, executor, status page;
1. add two brokers → one coalesced plan, the batched rebalance onto them;
2. decommission a broker → drained, `BrokerDrained`;
3. fail a log dir → `DiskFailed`, replication factor restored;
4. a manual reassignment cancelled mid-flight → reverted to the original replicas;
5. kill a broker past the failure grace → healed;
6. bad input on purpose → `RequestRejected` and `BadEvent`, and the product carries on;
then the no-data-loss check and a summary table (per scene: replicas moved vs the planner's lower
bound, steps, peak partitions in flight, time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from reassigner.demo.monitor import InvariantMonitor
from reassigner.demo.product import ClusterProbe, ProductProcesses, TopicCollector
from reassigner.demo.traffic import SequencedTraffic
from reassigner.local.processes import free_port
from reassigner.local.stack import LocalStack

RACKS = ("/dc1/r1", "/dc1/r2", "/dc2/r1")
TOPICS = {"orders": 12, "payments": 8, "audit": 4}  # carry the sequenced traffic
BULK_TOPIC = "archive"  # a few MB of filler per partition, for the cancelled manual move
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


@dataclass
class SceneResult:
    name: str
    seconds: float
    replica_moves: str = "-"
    lower_bound: str = "-"
    steps: int = 0
    peak_in_flight: int = 0
    outcome: str = "ok"


@dataclass
class Demo:
    stack_dir: Path
    cache_dir: Path
    console: Console = field(default_factory=lambda: Console(stderr=False))
    results: list[SceneResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.stack = LocalStack(self.stack_dir, self.cache_dir)
        self.environment = {**DEMO_SETTINGS, "REASSIGNER_CACHE_DIR": str(self.cache_dir),
                            "REASSIGNER_STACK_DIR": str(self.stack_dir),
                            "REASSIGNER_CHECKPOINT_DIR": str(self.stack_dir / "checkpoints"),
                            "PYSPARK_PYTHON": sys.executable}
        self.status_port = free_port()

    # --- narration helpers -----------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.console.print(text)

    def cli(self, *arguments: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run the real `reassigner` CLI as a user would, against the demo stack."""
        result = subprocess.run(
            [sys.executable, "-m", "reassigner.cli", *arguments, "--stack-dir", str(self.stack_dir)],
            capture_output=True, text=True, env={**os.environ, **self.environment}, timeout=300,
        )
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
    def partitions(self) -> dict[tuple[str, int], dict]:
        return self.probe.partitions(list(TOPICS))

    def fully_replicated(self) -> tuple[int, int]:
        parts = self.partitions()
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

    # --- the story ------------------------------------------------------------------------------
    def run(self, keep_running: bool = False) -> bool:
        started = time.monotonic()
        try:
            self.setup()
            self.scene("1. add two brokers", self.add_broker)
            self.scene("2. decommission a broker", self.decommission)
            self.scene("3. fail a log dir", self.fail_log_dir)
            self.scene("4. cancel a manual reassignment", self.cancel_manual)
            self.scene("5. kill a broker", self.kill_broker)
            self.scene("6. bad input", self.bad_input)
            report = self.traffic.stop_and_verify()
            self.monitor_report = self.monitor.stop()
            self.summary(report, time.monotonic() - started)
            if keep_running:
                self.say(f"\n[bold]Still running.[/] Status page: http://127.0.0.1:{self.status_port}/ "
                         f"— Ctrl-C stops everything.")
                while True:
                    time.sleep(1)
            return (report.clean and not self.monitor_report.violations
                    and all(r.outcome == "ok" for r in self.results))
        except KeyboardInterrupt:
            self.say("\ninterrupted; shutting down")
            return False
        finally:
            self.teardown()

    def setup(self) -> None:
        self.say("[bold]kafka-reassigner demo[/] — a real Kafka cluster, Redis and Spark on this machine\n")
        with self.console.status("starting Kafka (KRaft: 1 controller, 3 brokers, 2 log dirs each) and Redis"):
            state = self.stack.up(brokers=3, log_dirs=2, racks=RACKS)
        self.bootstrap = state.bootstrap_servers
        self.probe = ClusterProbe(self.bootstrap)
        self.say(f"  cluster up: {self.bootstrap}; racks {', '.join(RACKS)}")
        create_topics(self.bootstrap, {**TOPICS, BULK_TOPIC: 2}, MIN_INSYNC_REPLICAS)
        self.traffic = SequencedTraffic(self.bootstrap, TOPICS).start()
        self.say(f"  topics {', '.join(f'{t} ({n} partitions)' for t, n in TOPICS.items())}: RF 3, "
                 f"min.insync.replicas {MIN_INSYNC_REPLICAS}; sequenced traffic running")
        self.product = ProductProcesses(self.stack_dir, self.environment, self.status_port)
        self.product.start()
        self.alerts = TopicCollector(self.bootstrap, "reassigner.alerts", "Alert")
        self.commands = TopicCollector(self.bootstrap, "reassigner.commands", "Command")
        import redis

        from state.controller_store import ControllerStore

        self.store = ControllerStore(redis.Redis.from_url(state.redis_url), CLUSTER_NAME)
        self.peak_in_flight = 0
        self.say("  product starting: pipeline (Spark Structured Streaming), watcher, executor, "
                 f"status page http://127.0.0.1:{self.status_port}/")
        self.wait("waiting for the pipeline to see the whole cluster",
                  lambda: self.pipeline_sees(sum(TOPICS.values())), timeout=240)
        self.monitor = InvariantMonitor(
            self.bootstrap, int(DEMO_SETTINGS["REASSIGNER_MAX_PARTITION_MOVEMENTS"]),
            int(DEMO_SETTINGS["REASSIGNER_MAX_LEADER_MOVEMENTS"]),
            {t: MIN_INSYNC_REPLICAS for t in TOPICS}).start()
        self.say("  invariant monitor sampling the cluster every 250 ms")

    def pipeline_sees(self, partitions: int) -> tuple[int, int]:
        seen = self.controller_state().cluster.partitions_by_tp
        return sum(1 for tp in seen if tp.topic in TOPICS), partitions

    def scene(self, name: str, action: Callable[[SceneResult], None]) -> None:
        self.say(f"\n[bold cyan]{name}[/]")
        result = SceneResult(name, 0.0)
        mark = time.monotonic()
        commands_before = self.commands.mark()
        self.peak_in_flight = 0
        try:
            action(result)
        except (TimeoutError, RuntimeError) as error:
            result.outcome = f"FAILED: {error}"
            self.say(f"  [red]{error}[/]")
        result.seconds = time.monotonic() - mark
        result.steps = len(self.commands.of_kind("ReassignmentStep", commands_before))
        result.peak_in_flight = self.peak_in_flight
        self.results.append(result)

    def add_broker(self, result: SceneResult) -> None:
        since = self.alerts.mark()
        added = [self.stack.add_broker(rack="/dc2/r2"), self.stack.add_broker(rack="/dc1/r3")]
        names = " and ".join(f"{b.id} (rack {b.rack})" for b in added)
        self.say(f"  brokers {names} joined; the product waits out the add grace, so that the "
                 "two additions coalesce into one plan")
        self.alerts.wait_for("BrokerAdded", since, 60)
        self.alerts.wait_for("PlanCreated", since, 90)
        result.replica_moves, result.lower_bound = self.plan_figures(since)
        self.say(f"  plan: {result.replica_moves} replica moves (lower bound {result.lower_bound})")
        self.wait("rebalancing onto the new brokers (steps in rolling batches)",
                  lambda: self.settled(since), timeout=300)
        held = ", ".join(f"broker {b.id}: {self.replicas_on(b.id)}" for b in added)
        self.say(f"  replicas of the demo topics now on the new brokers — {held}")

    def settled(self, since: int) -> tuple[int, int]:
        """(partitions fully replicated, total), and nothing left moving."""
        good, total = self.fully_replicated()
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
        # that its failed dir held, so the later scenes must not move those back onto it.
        since = self.alerts.mark()
        self.cli("local", "fail-logdir", "1", "data-0")
        self.say("  log dir data-0 of broker 1 replaced by a plain file; Kafka took it offline")
        disk = self.alerts.wait_for("DiskFailed", since, 60)
        self.say(f"  → DiskFailed: {disk['message']}")
        self.wait("restoring the replication factor", lambda: self.settled(since), 300)
        result.replica_moves, result.lower_bound = self.plan_figures(since)
        self.say("  every partition has its 3 replicas in sync again")

    def cancel_manual(self, result: SceneResult) -> None:
        since = self.alerts.mark()
        commands_before = self.commands.mark()
        parts = self.probe.partitions([BULK_TOPIC])
        # Not broker 2 (decommissioned), nor broker 1 (its failed dir: see `fail_log_dir`).
        usable = sorted(b for b, info in self.probe.brokers().items()
                        if not info["is_fenced"] and b not in (1, 2))
        chosen = sorted(parts)
        before = {tp: parts[tp]["replicas"] for tp in chosen}
        # Some bulk data, moved under a throttle, so that the cancel lands mid-flight.
        write_bulk(self.bootstrap, chosen, megabytes=4)
        self.cli("config", "set", "throttle.bytes.per.sec=300000")
        plan = {"version": 1, "partitions": [
            {"topic": t, "partition": p,
             "replicas": [b for b in usable if b not in before[(t, p)]][:1] + before[(t, p)][1:]}
            for t, p in chosen]}
        plan_file = self.stack_dir / "manual-plan.json"
        plan_file.write_text(json.dumps(plan))
        self.cli("request", "reassign", "--file", str(plan_file))
        self.say(f"  `reassigner request reassign --file {plan_file.name}`: {len(chosen)} partitions "
                 "with 4 MB each, throttled to 300 kB/s")
        self.commands.wait_for("ReassignmentStep", commands_before, 90)
        self.cli("request", "cancel")
        self.say("  `reassigner request cancel` while the first step copies data")
        self.alerts.wait_for("ReassignmentCancelled", since, 90,
                             where=lambda a: "back at its original replicas" in a["message"])
        self.wait("reverting to the original replicas",
                  lambda: (sum(sorted(self.probe.partitions([BULK_TOPIC])[tp]["replicas"])
                               == sorted(before[tp]) for tp in chosen), len(chosen)), 180)
        self.cli("config", "set", "throttle.bytes.per.sec=")
        self.say("  every partition is back on its original replicas")

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
        self.cli("request", "reassign", "--file", str(bad_plan))
        self.say("  a reassignment naming broker 99 (unknown)")
        rejected = self.alerts.wait_for("RequestRejected", since, 60)
        self.say(f"  → RequestRejected: {rejected['message']}")
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "log_level": 0})
        producer.produce("reassigner.isr-changes", key=b"garbage", value=b"\x07not avro\xff")
        producer.flush(10)
        self.say("  a garbage message on reassigner.isr-changes")
        bad = self.alerts.wait_for("BadEvent", since, 60)
        self.say(f"  → BadEvent: {bad['message']} (the record went to reassigner.dead-letter)")

    def summary(self, report, total_seconds: float) -> None:
        table = Table(title="summary")
        for column in ("scene", "replicas moved", "lower bound", "steps", "peak in flight",
                       "time", "outcome"):
            table.add_column(column)
        for r in self.results:
            table.add_row(r.name, r.replica_moves, r.lower_bound, str(r.steps),
                          str(r.peak_in_flight), f"{r.seconds:.0f} s", r.outcome)
        self.console.print(table)
        verdict = "[green]no record lost or reordered[/]" if report.clean else "[red]DATA CHECK FAILED[/]"
        self.say(f"traffic: {report.produced} records written, {report.read} read back: "
                 f"{report.lost} lost, {report.out_of_order} out of order, "
                 f"{report.duplicated} duplicated — {verdict}")
        monitor = self.monitor_report
        self.say(f"invariant monitor: {monitor.samples} samples; peak partitions moving "
                 f"{monitor.peak_partitions_moving} (P = {DEMO_SETTINGS['REASSIGNER_MAX_PARTITION_MOVEMENTS']}), "
                 f"peak leader movements {monitor.peak_leader_movements} "
                 f"(L = {DEMO_SETTINGS['REASSIGNER_MAX_LEADER_MOVEMENTS']}); "
                 + ("[green]no violation[/]" if not monitor.violations else
                    f"[red]{len(monitor.violations)} violations[/]: {monitor.violations[:3]}"))
        self.say(f"total {total_seconds:.0f} s; status page http://127.0.0.1:{self.status_port}/")

    def teardown(self) -> None:
        if getattr(self, "monitor", None) is not None and not hasattr(self, "monitor_report"):
            self.monitor.stop()
        for closing in (getattr(self, "alerts", None), getattr(self, "commands", None)):
            if closing is not None:
                closing.close()
        if getattr(self, "product", None) is not None:
            self.product.stop()
        if self.stack.state_file.exists():
            self.stack.down()


def write_bulk(bootstrap_servers: str, partitions: list[tuple[str, int]], megabytes: int) -> None:
    """Write `megabytes` of filler to each partition (acks=all)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": "all", "linger.ms": 20,
                         "log_level": 0})
    chunk = b"x" * 100_000
    for topic, partition in partitions:
        for _ in range(megabytes * 10):
            while True:
                try:
                    producer.produce(topic, value=chunk, partition=partition)
                    break
                except BufferError:
                    producer.poll(0.2)
    producer.flush(120)


def create_topics(bootstrap_servers: str, topics: dict[str, int], min_insync_replicas: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    futures = admin.create_topics([
        NewTopic(name, num_partitions=count, replication_factor=3,
                 config={"min.insync.replicas": str(min_insync_replicas)})
        for name, count in topics.items()])
    for future in futures.values():
        future.result(60)
