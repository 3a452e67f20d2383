"""The local real stack: a KRaft Kafka cluster (one controller, N brokers) and a Redis server.

Everything lives under one stack dir; `stack.json` in it records ports, dirs and pids so that
separate CLI invocations (`up`, `add-broker`, `kill-broker`, `down`) and tests share one stack.

Readiness of `up` means: every broker registered and unfenced (it appears in the cluster
metadata, which lists only unfenced brokers) and a test topic with RF = min(3, N) accepts a
write with `acks=all`. Brokers start in parallel; a broker that fails to start is reported with
its last log lines.
"""

from __future__ import annotations

import errno
import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from schemas.errors import LocalStackError, StackNotUpError, UnknownBrokerError
from reassigner.dev.local import DEFAULT_RACKS, kafka_admin
from runtime.clients.client_config import ClientConfig, read_command_config
from runtime.clients.jars import kafka_classpath
from runtime.kafka_versions import DEFAULT_LOCAL_RELEASE
from schemas.redaction import redact
from reassigner.dev.local.kafka_server import (
    CONTROLLER_ID,
    NodeSpec,
    format_storage,
    new_cluster_id,
    start_node,
    write_node_files,
)
from reassigner.dev.local.processes import (
    free_port,
    is_alive,
    port_open,
    require_port_free,
    stop,
    wait_until,
)
from reassigner.dev.local.redis_server import start_redis
from reassigner.dev.local.security import (SECURITY_MODES, StackSecrets, create_product_acls,
                                           create_stack_secrets, write_private)

STATE_FILE = "stack.json"
READY_TOPIC = "reassigner.local.ready"
BROKER_START_TIMEOUT = 120.0


@dataclass
class BrokerRecord:
    id: int
    port: int
    rack: str | None
    log_dirs: list[str]
    node_dir: str
    pid: int | None = None

    def spec(self, controller_port: int, replication_factor: int,
             secrets: StackSecrets | None = None) -> NodeSpec:
        return NodeSpec(
            node_id=self.id,
            role="broker",
            port=self.port,
            node_dir=Path(self.node_dir),
            controller_port=controller_port,
            rack=self.rack,
            log_dirs=tuple(Path(d) for d in self.log_dirs),
            replication_factor=replication_factor,
            secrets=secrets,
        )


@dataclass
class StackState:
    stack_dir: str
    cluster_id: str
    controller_port: int
    controller_pid: int | None
    redis_port: int
    redis_pid: int | None
    replication_factor: int
    brokers: dict[int, BrokerRecord] = field(default_factory=dict)
    security: str = "none"
    """"none" or "sasl_ssl" (`reassigner.dev.local.security`)."""
    kafka_version: str = DEFAULT_LOCAL_RELEASE
    """The Kafka release it runs (a state file from before releases were chosen ran the default)."""

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers.values())

    @property
    def secrets(self) -> StackSecrets | None:
        if self.security == "none":
            return None
        return StackSecrets.load(Path(self.stack_dir) / "security")

    @property
    def redis_url(self) -> str:
        secrets = self.secrets
        if secrets is not None:
            return secrets.redis_url(self.redis_port)
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def client_properties(self) -> Path | None:
        """The product's Kafka client settings file (a secured stack only)."""
        secrets = self.secrets
        return secrets.product_properties if secrets is not None else None

    def admin_client_config(self) -> ClientConfig:
        """The stack's own tooling's client settings: the super user on a secured stack."""
        secrets = self.secrets
        return read_command_config(secrets.admin_properties if secrets is not None else None)

    @property
    def controller_spec(self) -> NodeSpec:
        return NodeSpec(
            node_id=CONTROLLER_ID,
            role="controller",
            port=self.controller_port,
            node_dir=Path(self.stack_dir) / "controller",
            controller_port=self.controller_port,
            secrets=self.secrets,
        )

    def to_json(self) -> dict:
        data = asdict(self)
        data["brokers"] = {str(k): asdict(v) for k, v in self.brokers.items()}
        data["bootstrap_servers"] = self.bootstrap_servers
        data["client_properties"] = str(self.client_properties) if self.client_properties else None
        if self.security == "none":  # a secured stack's URL holds a password: see redis_url_file
            data["redis_url"] = self.redis_url
        else:
            data["redis_url_file"] = str(Path(self.stack_dir) / "security" / "redis.url")
        return data

    @classmethod
    def from_json(cls, data: dict) -> "StackState":
        brokers = {int(k): BrokerRecord(**v) for k, v in data["brokers"].items()}
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "brokers"}
        return cls(**fields, brokers=brokers)


class LocalStack:
    """Start, change and stop the local stack whose state file is in `stack_dir`."""

    def __init__(self, stack_dir: Path, cache_dir: Path, kafka_version: str | None = None) -> None:
        self.stack_dir = Path(stack_dir).absolute()
        self.cache_dir = Path(cache_dir)
        if kafka_version is None:  # the setting: REASSIGNER_LOCAL_KAFKA_VERSION runs every stack on it
            from runtime.settings import load_settings

            kafka_version = load_settings().local_kafka_version
        self.kafka_version = kafka_version
        """The release `up` starts; a running stack keeps its own (its state file's)."""
        self._classpaths: dict[str, str] = {}

    # --- state file ----------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.stack_dir / STATE_FILE

    def load(self) -> StackState:
        if not self.state_file.exists():
            raise StackNotUpError(
                f"no local stack at {self.stack_dir}; start one with `reassigner local up`"
            )
        return StackState.from_json(json.loads(self.state_file.read_text()))

    def save(self, state: StackState) -> None:
        self.stack_dir.mkdir(parents=True, exist_ok=True)
        temporary = self.state_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(state.to_json(), indent=2) + "\n")
        temporary.replace(self.state_file)

    def classpath(self, state: StackState | None = None) -> str:
        """The classpath of the Kafka release `state` runs (default: the running stack's, else the
        one `up` would start): the same jars for Kafka's command-line tools against it."""
        if state is None:
            state = self.load() if self.state_file.exists() else None
        version = state.kafka_version if state is not None else self.kafka_version
        if version not in self._classpaths:
            self._classpaths[version] = kafka_classpath(self.cache_dir, version)
        return self._classpaths[version]

    # --- up / down ----------------------------------------------------------------------------
    def up(
        self,
        brokers: int = 3,
        log_dirs: int = 2,
        racks: tuple[str, ...] = DEFAULT_RACKS,
        base_port: int | None = None,
        security: str = "none",
    ) -> StackState:
        if brokers < 1 or log_dirs < 1:
            raise LocalStackError("need at least 1 broker and 1 log dir per broker")
        if security not in SECURITY_MODES:
            raise LocalStackError(f"unknown security {security!r}; expected one of {', '.join(SECURITY_MODES)}")
        if self.state_file.exists():
            existing = self.load()
            if is_alive(existing.controller_pid):
                raise LocalStackError(
                    f"a local stack already runs at {self.stack_dir}; "
                    "use it, or stop it with `reassigner local down`"
                )
            shutil.rmtree(self.stack_dir)
        ports = self._choose_ports(brokers + 2, base_port)
        state = StackState(
            stack_dir=str(self.stack_dir),
            cluster_id=new_cluster_id(),
            controller_port=ports[0],
            controller_pid=None,
            redis_port=ports[1],
            redis_pid=None,
            replication_factor=min(3, brokers),
            security=security,
            kafka_version=self.kafka_version,
        )
        if security != "none":
            secrets = create_stack_secrets(self.stack_dir / "security")
            write_private(Path(secrets.directory) / "redis.url", secrets.redis_url(state.redis_port) + "\n")
        for index in range(brokers):
            record = self._new_broker_record(state, index + 1, ports[2 + index], log_dirs,
                                             racks[index % len(racks)] if racks else None)
            state.brokers[record.id] = record
        self.save(state)
        try:
            state.redis_pid = start_redis(state.redis_port, self.stack_dir / "redis", secrets=state.secrets)
            self.save(state)
            self._start_controller(state)
            self._start_brokers(state, list(state.brokers))
            admin = state.admin_client_config()
            kafka_admin.wait_for_brokers(state.bootstrap_servers, set(state.brokers), 90, admin)
            if state.secrets is not None:
                create_product_acls(kafka_admin.client_settings(state.bootstrap_servers, admin))
            kafka_admin.check_writes(state.bootstrap_servers, READY_TOPIC, state.replication_factor, admin)
        except BaseException:
            self.down(keep_data=True)
            raise
        return state

    def down(self, keep_data: bool = False) -> None:
        """Stop every process of the stack (brokers first), then remove its data unless kept."""
        if not self.state_file.exists():
            raise StackNotUpError(f"no local stack at {self.stack_dir}; nothing to stop")
        state = self.load()
        with ThreadPoolExecutor(max_workers=max(1, len(state.brokers))) as pool:
            list(pool.map(lambda b: stop(b.pid, kill=True), state.brokers.values()))
        stop(state.controller_pid, kill=True)
        stop(state.redis_pid)
        for record in state.brokers.values():
            record.pid = None
        state.controller_pid = state.redis_pid = None
        if keep_data:
            self.save(state)
        else:
            shutil.rmtree(self.stack_dir, ignore_errors=True)

    # --- brokers --------------------------------------------------------------------------------
    def add_broker(self, rack: str | None = None) -> BrokerRecord:
        state = self._require_running()
        broker_id = max(state.brokers, default=0) + 1
        if rack is None:
            rack = DEFAULT_RACKS[(broker_id - 1) % len(DEFAULT_RACKS)]
        log_dir_count = max((len(b.log_dirs) for b in state.brokers.values()), default=2)
        record = self._new_broker_record(state, broker_id, free_port(), log_dir_count, rack)
        state.brokers[broker_id] = record
        self.save(state)
        self._start_brokers(state, [broker_id])
        kafka_admin.wait_for_brokers(state.bootstrap_servers, {broker_id}, 90,
                                     state.admin_client_config())
        return record

    def stop_broker(self, broker_id: int, kill: bool = False) -> None:
        state = self._require_running()
        record = self._require_broker(state, broker_id)
        if not is_alive(record.pid):
            raise LocalStackError(f"broker {broker_id} is not running; start it with `start-broker`")
        stop(record.pid, kill=kill, timeout_seconds=60)
        record.pid = None
        self.save(state)

    def start_broker(self, broker_id: int) -> None:
        state = self._require_running()
        record = self._require_broker(state, broker_id)
        if is_alive(record.pid):
            raise LocalStackError(f"broker {broker_id} is already running (pid {record.pid})")
        self._start_brokers(state, [broker_id])
        kafka_admin.wait_for_brokers(state.bootstrap_servers, {broker_id}, 90,
                                     state.admin_client_config())

    def add_log_dir(self, broker_id: int) -> str:
        """Restart the broker with one more (empty) entry in `log.dirs`, as an operator adds a
        disk; returns the new dir once the broker is back. Kafka formats the empty dir itself."""
        state = self._require_running()
        record = self._require_broker(state, broker_id)
        taken = {Path(d).name for d in record.log_dirs}
        index = next(i for i in range(len(taken) + 1) if f"data-{i}" not in taken)
        new_dir = str(Path(record.node_dir) / f"data-{index}")
        if is_alive(record.pid):
            stop(record.pid, timeout_seconds=60)
            record.pid = None
        record.log_dirs.append(new_dir)
        self.save(state)
        self._start_brokers(state, [broker_id])
        kafka_admin.wait_for_brokers(state.bootstrap_servers, {broker_id}, 90,
                                     state.admin_client_config())
        return new_dir

    def stop_redis(self, kill: bool = False) -> None:
        """Stop the stack's Redis (SIGKILL with `kill`: no shutdown save; the AOF keeps what was
        acknowledged)."""
        state = self._require_running()
        if is_alive(state.redis_pid):
            stop(state.redis_pid, kill=kill, timeout_seconds=30)
        state.redis_pid = None
        self.save(state)

    def start_redis(self) -> None:
        """Start the stack's Redis again on its port, from its data dir."""
        state = self._require_running()
        if is_alive(state.redis_pid):
            raise LocalStackError(f"Redis is already running (pid {state.redis_pid})")
        state.redis_pid = start_redis(state.redis_port, self.stack_dir / "redis", secrets=state.secrets)
        self.save(state)

    def fail_log_dir(self, broker_id: int, log_dir: str | None = None, timeout: float = 60) -> str:
        """Replace a data dir of the broker by a plain file; wait until Kafka reports it offline."""
        state = self._require_running()
        record = self._require_broker(state, broker_id)
        if not is_alive(record.pid):
            raise LocalStackError(f"broker {broker_id} is not running; start it first")
        if log_dir is None:
            healthy = [d for d in record.log_dirs if Path(d).is_dir()]
            if len(healthy) < 2:
                raise LocalStackError(
                    f"broker {broker_id} has {len(healthy)} healthy log dir(s); failing the last one "
                    "would leave it no storage — name the dir explicitly to do it anyway"
                )
            log_dir = healthy[0]
        else:
            candidates = [d for d in record.log_dirs if d == log_dir or Path(d).name == log_dir]
            if not candidates:
                raise LocalStackError(
                    f"broker {broker_id} has no log dir {log_dir!r}; its dirs are {record.log_dirs}"
                )
            log_dir = candidates[0]
        path = Path(log_dir)
        if not path.is_dir():
            raise LocalStackError(f"log dir {log_dir} of broker {broker_id} has already failed")
        # Renamed away first (atomic), so the plain file takes the path while the broker still
        # writes into its open segments: deleting in place raced with files Kafka creates.
        moved = path.with_name(f".{path.name}.failed-{time.time_ns()}")
        path.rename(moved)
        path.write_text("this log dir was failed on purpose by `reassigner local fail-logdir`\n")
        try:
            _remove_tree(moved)
        except LocalStackError:  # the failure already took; leftovers only cost disk space
            shutil.rmtree(moved, ignore_errors=True)
        kafka_admin.wait_for_log_dir_offline(state.bootstrap_servers, broker_id, log_dir, timeout,
                                             state.admin_client_config())
        return log_dir

    def status(self) -> dict:
        state = self.load()
        unfenced = kafka_admin.unfenced_brokers(state.bootstrap_servers, client=state.admin_client_config()) if any(
            is_alive(b.pid) for b in state.brokers.values()) else set()
        return {
            "stack_dir": state.stack_dir,
            "kafka_version": state.kafka_version,
            "bootstrap_servers": state.bootstrap_servers,
            "security": state.security,
            "client_properties": str(state.client_properties) if state.client_properties else None,
            "redis_url": redact(state.redis_url),
            "controller": {"port": state.controller_port, "pid": state.controller_pid,
                           "alive": is_alive(state.controller_pid)},
            "redis": {"port": state.redis_port, "pid": state.redis_pid,
                      "alive": is_alive(state.redis_pid)},
            "brokers": [
                {
                    "id": b.id, "port": b.port, "rack": b.rack, "pid": b.pid,
                    "alive": is_alive(b.pid), "unfenced": b.id in unfenced,
                    "log_dirs": [{"path": d, "failed": not Path(d).is_dir()} for d in b.log_dirs],
                }
                for b in state.brokers.values()
            ],
        }

    # --- internals ------------------------------------------------------------------------------
    def _choose_ports(self, count: int, base_port: int | None) -> list[int]:
        if base_port is None:
            ports: list[int] = []
            while len(ports) < count:
                port = free_port()
                if port not in ports:
                    ports.append(port)
            return ports
        ports = list(range(base_port, base_port + count))
        for port in ports:
            require_port_free(port, "the local stack")
        return ports

    def _new_broker_record(
        self, state: StackState, broker_id: int, port: int, log_dirs: int, rack: str | None
    ) -> BrokerRecord:
        node_dir = Path(state.stack_dir) / f"broker-{broker_id}"
        return BrokerRecord(
            id=broker_id,
            port=port,
            rack=rack,
            log_dirs=[str(node_dir / f"data-{i}") for i in range(log_dirs)],
            node_dir=str(node_dir),
        )

    def _start_controller(self, state: StackState) -> None:
        spec = state.controller_spec
        write_node_files(spec)
        format_storage(spec, self.classpath(state), state.cluster_id)
        state.controller_pid = start_node(spec, self.classpath(state))
        self.save(state)
        wait_until(lambda: port_open(spec.port), BROKER_START_TIMEOUT, "the KRaft controller",
                   pid=state.controller_pid, log_file=spec.server_log)

    def _start_brokers(self, state: StackState, broker_ids: list[int]) -> None:
        secrets = state.secrets
        specs = [state.brokers[i].spec(state.controller_port, state.replication_factor, secrets)
                 for i in broker_ids]

        def prepare(spec: NodeSpec) -> None:
            write_node_files(spec)
            format_storage(spec, self.classpath(state), state.cluster_id)

        with ThreadPoolExecutor(max_workers=len(specs)) as pool:
            list(pool.map(prepare, specs))
        for spec in specs:
            state.brokers[spec.node_id].pid = start_node(spec, self.classpath(state))
        self.save(state)
        for spec in specs:
            pid = state.brokers[spec.node_id].pid
            wait_until(lambda: port_open(spec.port), BROKER_START_TIMEOUT,
                       f"broker {spec.node_id}", pid=pid, log_file=spec.server_log)

    def _require_running(self) -> StackState:
        state = self.load()
        if not is_alive(state.controller_pid):
            raise StackNotUpError(
                f"the local stack at {self.stack_dir} is not running; start it with `reassigner local up`"
            )
        return state

    @staticmethod
    def _require_broker(state: StackState, broker_id: int) -> BrokerRecord:
        if broker_id not in state.brokers:
            known = ", ".join(str(i) for i in sorted(state.brokers))
            raise UnknownBrokerError(
                f"the local stack has no broker {broker_id}; its brokers are {known}"
            )
        return state.brokers[broker_id]


def _remove_tree(path: Path) -> None:
    """`shutil.rmtree` of a dir a running broker writes to: Kafka deletes `*-delete` dirs in it
    in the background, so an entry can vanish under us (FileNotFoundError); go on, and try again
    until the dir is gone."""
    for _ in range(20):
        shutil.rmtree(path, onerror=_ignore_vanished)
        if not path.exists():
            return
    raise LocalStackError(f"could not remove {path}: the broker keeps writing to it")


def _ignore_vanished(function, name, exc_info) -> None:
    # Vanished (Kafka deleted it) or not empty (Kafka just created a file in it): the loop in
    # `_remove_tree` goes round again.
    if not issubclass(exc_info[0], FileNotFoundError) and getattr(exc_info[1], "errno", None) != errno.ENOTEMPTY:
        raise exc_info[1]
