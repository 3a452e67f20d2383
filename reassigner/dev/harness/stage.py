"""The stage the demo's and the scenario tests' scenes play on: a real local cluster with the
whole product running, the instruments that watch it, and the running of one scene.

`Stage.setup()` starts a KRaft cluster of 3 brokers (2 log dirs each, racks /dc1/r1, /dc1/r2,
/dc2/r1) and Redis, creates topics with data (RF 3, min.insync.replicas 2) and sequenced traffic
that runs throughout, starts the product as separate processes of the real CLI (pipeline,
watcher, executor, status page) and the invariant monitor (`monitor`, sampling Kafka every
250 ms). `scene(...)` runs one scene and records its figures (moves against the planner's bound,
steps, peaks) and, when it fails, `diagnostics()` (alerts, commands, what Kafka and the pipeline
show, the logs' ends). `finish()` stops the traffic and reads every record back (`traffic`) and
stops the monitor; `teardown()` stops everything.

INVARIANTS
- `wait` waits on what Kafka or the product shows, never on a sleep alone, and ends in a
  TimeoutError naming what it waited for, or at once when a product process died; the real CLI
  run by `cli` that hangs is killed and ends in a TimeoutError too.
- PATIENCE. Every wait's timeout is the time it allows WITHOUT PROGRESS, times `patience` (the
  demo's `--patience`): a wait that sees what it awaits advance (more partitions settled, more
  seen by the pipeline, another batch committed) gets that long again from then on, up to
  `PATIENCE_CEILING` times its budget in all (`reassigner.dev.local.processes.compute_deadline`,
  the same for the local stack's servers starting). A slow machine that is
  getting there is waited for; one where nothing moves ends within the budget.
- The scenes are `reassigner.dev.harness.world.World`'s; the demo's settings and topics are
  named here, once.
"""

from __future__ import annotations

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
from reassigner.dev.harness.cluster_tools import create_topics
from reassigner.dev.harness.monitor import InvariantMonitor, MonitorReport
from reassigner.dev.harness.product import ClusterProbe, ProductProcesses, TopicCollector
from reassigner.dev.harness.traffic import SequencedTraffic, TrafficReport
from reassigner.dev.local import MACHINE_DISK_SETTINGS
from reassigner.dev.local.processes import compute_deadline, free_port, tail
from reassigner.dev.local.stack import LocalStack
from runtime.clients.kafka_consumer import TopicReader
from streams.input_rows import INPUT_TOPICS
from reassigner.operator.views.units import format_size

RACKS = ("/dc1/r1", "/dc1/r2", "/dc2/r1")
TOPICS = {"orders": 12, "payments": 8, "audit": 4}  # carry the sequenced traffic
BULK_TOPIC = "archive"  # a few MB of filler per partition, for the cancelled manual move
# Several, so that some partition can take a new replica whatever scenes 1-3 did with them.
BULK_PARTITIONS = 6
MIN_INSYNC_REPLICAS = 2
CLUSTER_NAME = "demo"

# Short grace periods and modest limits so that every reaction shows within a minute; the disk
# marks off, as the stack's dirs share this machine's disk (MACHINE_DISK_SETTINGS).
DEMO_SETTINGS = {
    **MACHINE_DISK_SETTINGS,
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
class Stage:
    stack_dir: Path
    cache_dir: Path
    console: Console = field(default_factory=lambda: Console(stderr=False))
    results: list[SceneResult] = field(default_factory=list)
    brokers: int = 3
    racks: tuple[str, ...] = RACKS
    security: str = "none"
    """"sasl_ssl": the secured stack; the product runs as its non-super principal and the
    world's own instruments as the stack's super user."""
    patience: float = 1.0
    """Multiplies every wait's budget (module doc, PATIENCE): the demo's `--patience`."""
    settings: dict[str, str] = field(default_factory=dict)
    """The product's settings over `DEMO_SETTINGS`, as environment variables
    (`REASSIGNER_BALANCE_MODE`: "strict")."""

    def __post_init__(self) -> None:
        self.stack = LocalStack(self.stack_dir, self.cache_dir)  # the release: `local_kafka_version`
        self.environment = {**DEMO_SETTINGS, **self.settings, "REASSIGNER_CACHE_DIR": str(self.cache_dir),
                            "REASSIGNER_STACK_DIR": str(self.stack_dir),
                            "REASSIGNER_CHECKPOINT_DIR": str(self.stack_dir / "checkpoints"),
                            "PYSPARK_PYTHON": sys.executable}
        self.status_port = free_port()
        self.metrics_ports = {name: free_port() for name in ("pipeline", "watcher", "executor")}
        if not self.patience > 0:
            raise ValueError(f"patience {self.patience}: a factor above 0 (2 waits twice as long)")

    # --- narration and waiting -----------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.console.print(text)

    def cli(self, *arguments: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run the real `reassigner` CLI as a user would, against the demo stack; one that has
        not ended after 300 s (× patience) is killed and raises TimeoutError, as a wait does."""
        try:
            result = subprocess.run(
                [sys.executable, "-m", "reassigner.cli", *arguments, "--stack-dir", str(self.stack_dir)],
                capture_output=True, text=True, env={**os.environ, **self.environment},
                timeout=300 * self.patience,
            )
        except subprocess.TimeoutExpired as error:
            raise TimeoutError(f"reassigner {' '.join(arguments)}: not done after {error.timeout:.0f} s") from None
        if check and result.returncode != 0:
            raise RuntimeError(f"reassigner {' '.join(arguments)} failed: {result.stderr.strip()}")
        return result

    def wait(self, description: str, done: Callable[[], bool | tuple[int, int]],
             timeout: float = 180, progress: Callable[[], object] | None = None) -> None:
        """Wait with a progress bar; `done` returns True/False or (completed, total). `timeout` is
        the budget without progress (module doc, PATIENCE): progress is `completed` growing, or
        `progress()` (anything comparable, sampled with `done`) changing."""
        with Progress(TextColumn("  {task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                      TimeElapsedColumn(), console=self.console, transient=True) as progress_bar:
            task = progress_bar.add_task(description, total=None, info="")
            started = last_progress = time.monotonic()
            best: object = None
            while True:
                self.product.check_alive()
                state = done()
                if isinstance(state, tuple):
                    completed, total = state
                    progress_bar.update(task, total=max(total, 1), completed=completed,
                                        info=f"{completed}/{total}")
                    finished = total > 0 and completed >= total
                    seen: object = (completed, progress() if progress is not None else None)
                else:
                    finished = bool(state)
                    seen = progress() if progress is not None else None
                if finished:
                    return
                now = time.monotonic()
                if best is not None and seen != best:
                    last_progress = now
                best = seen
                if now > compute_deadline(started, last_progress, timeout, self.patience):
                    raise TimeoutError(f"{description}: not done after {now - started:.0f} s "
                                       f"({timeout * self.patience:.0f} s without progress allowed)")
                time.sleep(0.5)

    # --- probes -------------------------------------------------------------------------------------
    def partitions(self, topics: list[str] | None = None) -> dict[tuple[str, int], dict]:
        return self.probe.partitions(topics or list(TOPICS))

    def fully_replicated(self, topics: list[str] | None = None) -> tuple[int, int]:
        parts = self.partitions(topics)
        alive = {b for b, info in self.probe.brokers().items() if not info.get("is_fenced", False)}
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
        """(what the plans since `since` move, their planners' lower bound), as the summary
        shows them: replica moves against the count planner's bound in moves, or, where a plan
        was made in bytes (`balance.mode=bytes`), also the bytes against its bound in bytes."""
        plans = self.alerts.of_kind("PlanCreated", since)
        if not plans:
            return "-", "-"
        moves = sum(int(p["details"].get("replica_moves", 0)) for p in plans)
        if not any("bytes_lower_bound" in p["details"] for p in plans):
            return str(moves), str(sum(int(p["details"].get("lower_bound", 0)) for p in plans))
        moved = sum(int(p["details"].get("bytes_moved", 0)) for p in plans)
        bound = sum(int(p["details"].get("bytes_lower_bound", p["details"].get("bytes_moved", 0))) for p in plans)
        return f"{moves} ({format_size(moved)})", format_size(bound)

    def settled(self, since: int = 0, topics: list[str] | None = None) -> tuple[int, int]:
        """(partitions of `topics` fully replicated, total), and nothing left moving."""
        good, total = self.fully_replicated(topics)
        moving = self.controller_state().reassignments
        return (good if not moving else min(good, total - 1)), total

    def setup(self, prepare: Callable[[], None] | None = None) -> None:
        """Start the stack, the demo topics and their traffic, then the product. `prepare` runs
        once the cluster is up and before the product starts: data written then is what the
        product finds, not traffic it measures."""
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
        # every replica in sync: first records produced before then can be retried by the
        # idempotent producer, acknowledged without an offset, and missing from the log (the
        # traffic check then fails at a partition's first records).
        deadline = time.monotonic() + 60 * self.patience
        while (ready := self.fully_replicated(list(TOPICS)))[0] < ready[1] and time.monotonic() < deadline:
            time.sleep(0.5)
        self.traffic = SequencedTraffic(self.bootstrap, TOPICS, client=self.client).start()
        self.say(f"  topics {', '.join(f'{t} ({n} partitions)' for t, n in TOPICS.items())}: RF 3, "
                 f"min.insync.replicas {MIN_INSYNC_REPLICAS}; sequenced traffic running")
        if prepare is not None:
            prepare()
        # Chosen now that the stack's processes hold their ports: chosen before the stack, a
        # port was released and handed to a broker too (a status server on broker 3's port).
        self.status_port = free_port()
        self.metrics_ports = {name: free_port() for name in ("pipeline", "watcher", "executor")}
        self.product = ProductProcesses(self.stack_dir, self.environment, self.status_port,
                                        metrics_ports=self.metrics_ports)
        self.product.start()
        self.alerts = TopicCollector(self.bootstrap, "reassigner.alerts", "Alert", self.client, self.patience)
        self.commands = TopicCollector(self.bootstrap, "reassigner.commands", "Command", self.client,
                                       self.patience)
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
        # Progress here is also the pipeline committing batches and its log growing: Spark takes
        # 30-90 s to start on a loaded machine before it sees a single partition.
        self.wait("waiting for the pipeline to see the whole cluster",
                  lambda: self.pipeline_sees(sum(TOPICS.values())), timeout=240,
                  progress=self.pipeline_progress)
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

    def pipeline_progress(self) -> tuple[int, int]:
        """(its last committed batch, its log's size): what shows a pipeline getting on."""
        log = self.product.log_dir / "pipeline.log"
        return self.store.load().last_batch, log.stat().st_size if log.exists() else 0

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
            parts.append("brokers in the pipeline's state: " + (", ".join(
                f"{b}" + ("" if broker.alive else " (down)") + (" (draining)" if broker.draining else "")
                for b, broker in sorted(state.cluster.brokers_by_id.items())) or "none"))
            parts.append("input partitions not applied up to their log end: " + self._input_lag())
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

    def _input_lag(self) -> str:
        """Each input partition whose last record the pipeline's state has not applied: applied
        offset against the log's last offset (a pipeline that stopped reading one shows here)."""
        applied = self.store.applied_offsets()
        behind = []
        with TopicReader(self.bootstrap, self.client, "diagnostics") as reader:
            for topic in (f"reassigner.{suffix}" for suffix in INPUT_TOPICS):
                for partition, (_low, high) in sorted(reader.watermarks(topic, reader.partitions(topic)).items()):
                    done = applied.get((topic, partition), -1)
                    if done < high - 1:
                        behind.append(f"{topic}-{partition} {done} of {high - 1}")
        return ", ".join(behind) or "none"

    def set_config(self, assignment: str, timeout: float = 90) -> dict:
        """`reassigner config set KEY=VALUE`, then the pipeline's ConfigChanged alert for it; the
        CLI waits for the verdict as long (its own default, 60 s, was shorter than a pipeline
        starting on a fresh checkpoint on a loaded machine: fault test 3, 2026-11-26)."""
        since = self.alerts.mark()
        key = assignment.partition("=")[0]
        self.cli("config", "set", assignment, "--timeout", f"{timeout:g}")
        return self.alerts.wait_for("ConfigChanged", since, timeout,
                                    where=lambda a: a["details"].get("key") == key)

    def finish(self) -> tuple[TrafficReport, MonitorReport]:
        """Stop the traffic and read every record back; stop the monitor."""
        report = self.traffic.stop_and_verify()
        self.monitor_report = self.monitor.stop()
        return report, self.monitor_report

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
