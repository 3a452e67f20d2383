"""One Kafka 4.x KRaft node of the local stack: its configuration, storage format and start.

Layout (static quorum, one controller):
- the controller (`process.roles=controller`, node id `CONTROLLER_ID`) keeps the metadata log;
- each broker (`process.roles=broker`, ids 1, 2, ...) has K data dirs in `log.dirs`, a separate
  `metadata.log.dir` (so failing a data dir never halts the broker: Kafka shuts a broker down
  only when its metadata dir fails) and a `broker.rack` path such as `/dc1/r2`.

Timings are shortened from Kafka's defaults so that local reactions show within seconds: a
killed broker is fenced after `broker.session.timeout.ms` = 6 s, a lagging follower leaves the ISR
after `replica.lag.time.max.ms` = 10 s, and the checkpoint files are rewritten every second so
that a data dir replaced by a plain file is detected (and taken offline) within about a second.
Heaps are small (controller 256 MiB, broker 400 MiB) so that a controller, 4 brokers and Spark
fit on 2 cores / 24 GiB.
"""

from __future__ import annotations

import base64
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from schemas.errors import ProcessStartError
from reassigner.dev.local.processes import run_tool, spawn
from reassigner.dev.local.security import (StackSecrets, compute_broker_settings,
                                           compute_controller_settings, compute_scram_format_arguments)

CONTROLLER_ID = 100
CONTROLLER_HEAP = "256m"
BROKER_HEAP = "400m"

LOG4J2_PROPERTIES = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (as Kafka's Uuid).

    Never one starting with '-', which Kafka's `Uuid.randomUuid` also draws again: the storage
    tool's argument parser takes `-t -Xyz...` for a missing value (1 stack start in 64 failed)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass(frozen=True)
class NodeSpec:
    """What it takes to run one node; stored in the stack's state file."""

    node_id: int
    role: str  # "controller" or "broker"
    port: int
    node_dir: Path
    controller_port: int
    rack: str | None = None
    log_dirs: tuple[Path, ...] = ()
    replication_factor: int = 1
    secrets: StackSecrets | None = None
    """A secured stack's material (`reassigner.dev.local.security`); None: plaintext, no ACLs."""

    @property
    def metadata_dir(self) -> Path:
        return self.node_dir / "metadata"

    @property
    def config_file(self) -> Path:
        return self.node_dir / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.node_dir / "logs" / "stdout.log"

    @property
    def server_log(self) -> Path:
        return self.node_dir / "logs" / "server.log"


def render_config(node: NodeSpec) -> str:
    voters = f"{CONTROLLER_ID}@127.0.0.1:{node.controller_port}"
    common = {
        "node.id": node.node_id,
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "metadata.log.dir": node.metadata_dir,
        "broker.session.timeout.ms": 6000,
        "broker.heartbeat.interval.ms": 1000,
    }
    if node.role == "controller":
        specific: dict[str, object] = {
            "process.roles": "controller",
            "listeners": f"CONTROLLER://127.0.0.1:{node.port}",
            "log.dirs": node.metadata_dir,
        }
    else:
        rf = node.replication_factor
        specific = {
            "process.roles": "broker",
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": ",".join(str(d) for d in node.log_dirs),
            "num.partitions": 1,
            "default.replication.factor": rf,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": 5,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "replica.lag.time.max.ms": 10000,
            "log.flush.offset.checkpoint.interval.ms": 1000,
            "log.flush.start.offset.checkpoint.interval.ms": 1000,
            "replica.high.watermark.checkpoint.interval.ms": 1000,
            "log.segment.bytes": 16 * 1024 * 1024,
            "num.network.threads": 2,
            "num.io.threads": 2,
            "num.replica.fetchers": 1,
            "background.threads": 2,
            "log.cleaner.threads": 1,
        }
        if node.rack:
            specific["broker.rack"] = node.rack
    secured: dict[str, object] = {}
    if node.secrets is not None:
        secured = (compute_controller_settings(node.secrets) if node.role == "controller"
                   else compute_broker_settings(node.secrets, node.port))
    lines = [f"{key}={value}" for key, value in {**common, **specific, **secured}.items()]
    return "\n".join(lines) + "\n"


def write_node_files(node: NodeSpec) -> None:
    node.node_dir.mkdir(parents=True, exist_ok=True)
    (node.node_dir / "logs").mkdir(exist_ok=True)
    for directory in node.log_dirs:
        directory.mkdir(parents=True, exist_ok=True)
    node.config_file.write_text(render_config(node))
    (node.node_dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)


def java_command(node: NodeSpec, classpath: str, main_class: str, *args: str) -> list[str]:
    java = shutil.which("java") or "java"
    heap = CONTROLLER_HEAP if node.role == "controller" else BROKER_HEAP
    return [
        java,
        f"-Xmx{heap}",
        f"-Xms{heap if node.role == 'controller' else '128m'}",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:TieredStopAtLevel=1",  # C1 only: much faster start, plenty for a local cluster
        "-XX:CICompilerCount=2",
        "-Djava.awt.headless=true",
        f"-Dkafka.logs.dir={node.node_dir / 'logs'}",
        f"-Dlog4j2.configurationFile={node.node_dir / 'log4j2.properties'}",
        "-cp",
        classpath,
        main_class,
        *args,
    ]


def format_storage(node: NodeSpec, classpath: str, cluster_id: str) -> None:
    """Run Kafka's StorageTool so that the node's dirs carry the cluster id (meta.properties)."""
    command = java_command(
        node, classpath, "kafka.tools.StorageTool",
        "format", "-t", cluster_id, "-c", str(node.config_file), "--ignore-formatted",
        # SCRAM users go into the bootstrap metadata, which only the controller keeps.
        *(compute_scram_format_arguments(node.secrets)
          if node.secrets is not None and node.role == "controller" else ()),
    )
    result = run_tool(command, f"formatting the storage of node {node.node_id} (Kafka's StorageTool)", 120)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-10:])
        raise ProcessStartError(
            f"formatting the storage of node {node.node_id} failed (exit {result.returncode}):\n{tail}"
        )


def start_node(node: NodeSpec, classpath: str) -> int:
    """Start the node detached; returns its pid (readiness is checked by the caller)."""
    return spawn(java_command(node, classpath, "kafka.Kafka", str(node.config_file)), node.log_file)
