"""The one typed settings object of the product.

Sources, highest priority first: explicit keyword arguments (CLI flags), environment variables
`REASSIGNER_<FIELD>` (e.g. `REASSIGNER_BOOTSTRAP_SERVERS`, `REASSIGNER_MAX_PARTITION_MOVEMENTS`),
files in the directory named by `REASSIGNER_SECRETS_DIR`, one per setting, named like its
variable and holding its value (`reassigner_redis_url`: Docker and Kubernetes secrets, so that a
password in a Redis URL or a token is in no environment `docker inspect` shows), a TOML file
named by `REASSIGNER_CONFIG_FILE` (keys are the field names), then the defaults documented on
each field below.

This is the one table of defaults: `handlers.policy.Policy` and `planning.movement.batches.Limits`
have none of their own (two tables drift apart, and then `reassigner steps` previews other limits
than the product runs), and are built from a `Settings` by `compute_policy` / `compute_limits`,
by every command that needs them. The dotted Kafka-style names operators change at run time
(`reassignment.max.concurrent.partition.movements` → `max_partition_movements`, ...) are the
table `handlers.policy.DYNAMIC_KEYS`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import fields
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings import SecretsSettingsSource, TomlConfigSettingsSource

from handlers.policy import Policy, check_topic_pattern, parse_schedule
from planning.movement.batches import CONFIG_KEYS, Limits
from runtime.kafka_versions import DEFAULT_LOCAL_RELEASE, LOCAL_RELEASES, check_local_release
from schemas.signing import SigningKey, parse_signing_key

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """Where Maven-fetched jars live: `$XDG_CACHE_HOME/kafka-reassigner` or `~/.cache/...`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-reassigner"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="REASSIGNER_", extra="ignore")

    # --- connections -------------------------------------------------------------------------
    bootstrap_servers: str | None = Field(
        None, description="Kafka bootstrap servers; None = the local stack's (from its state file)."
    )
    redis_url: str | None = Field(
        None, repr=False,  # it may carry a password: a repr of the settings never shows it
        description="Redis URL (`redis://`, `rediss://` with TLS; `redis+cluster://host:port` or "
        "`rediss+cluster://` for a Redis Cluster, any node); None = the local stack's Redis.")
    redis_socket_timeout_seconds: float = Field(
        10.0, gt=0, description="Longest wait for one Redis reply: every write of the product is "
        "bounded (a big one is staged in chunks), so a reply slower than this means Redis is away.")
    redis_connect_timeout_seconds: float = Field(5.0, gt=0, description="Longest wait to connect to Redis.")
    command_config: Path | None = Field(
        None,
        description="Kafka client properties file (security.protocol, sasl.*, ssl.*), "
        "as for Kafka's own tools; passed to every client and to Spark's Kafka source.",
    )
    command_signing_key_file: Path | None = Field(
        None, description="File holding the command signing key (at least 32 bytes; `openssl rand -hex "
        "32 > key`), given to the pipeline and the executor alike: the pipeline signs every command "
        "(HMAC-SHA256, `schemas.signing`), the executor refuses an unsigned or badly signed one "
        "(BAD_SIGNATURE). None = commands are not signed. A path, never the key: the key appears in "
        "no flag, log, error or status.")
    status_token: SecretStr | None = Field(
        None, description="The token every request to the status server must carry (`Authorization: "
        "Bearer <token>`, or as basic auth's password); `status-server --token-file` wins over it. "
        "None: the server listens on loopback only, unless `--allow-unauthenticated`.")
    metrics_port: int | None = Field(
        None, ge=0, le=65535, description="TCP port of this process's Prometheus endpoint (`/metrics`; "
        "`run`, `watch`, `execute`: `--metrics-port`; 0 = any free one); None = not served. The "
        "status server serves its metrics on its own port.")
    metrics_host: str = Field(
        "127.0.0.1", description="Address of the metrics endpoint (`--metrics-host`); an address other "
        "machines can reach needs `metrics_allow_remote`.")
    metrics_allow_remote: bool = Field(
        False, description="Serve the metrics endpoint on a non-loopback `metrics_host` "
        "(`--allow-remote-metrics`): the network in front is trusted to read it.")
    status_write_token: SecretStr | None = Field(
        None, description="The token the status server's write API (POST /api/...: requests, approve, "
        "reject, cancel, pause, resume) requires, as `Authorization: Bearer <token>` only, on loopback "
        "too; another secret than `status_token`; `status-server --write-token-file` wins over it. "
        "None: the write API is off.")
    cluster_name: str = Field("local", description="Names the Redis hash tag of this cluster's keys.")
    topic_prefix: str = Field("reassigner", description="Prefix of the product's topics.")

    # --- local stack and caches --------------------------------------------------------------
    cache_dir: Path = Field(default_factory=default_cache_dir, description="Maven jar cache.")
    stack_dir: Path = Field(
        Path(".reassigner/stack"), description="Data, logs and state file of `reassigner local`."
    )
    local_kafka_version: str = Field(
        DEFAULT_LOCAL_RELEASE, description="The Kafka release a new local stack runs (`reassigner "
        "local up --kafka-version`): X.Y.Z from 3.7 on, its jars fetched from Maven Central on first "
        "use; a running stack keeps the release it started with. Tested: "
        + ", ".join(LOCAL_RELEASES) + ".")

    # --- Spark -------------------------------------------------------------------------------
    spark_master: str = Field("local[2]", description="Spark master URL (`--master`).")
    spark_jars: str | None = Field(
        None, description="Spark's Kafka and Avro connector jars, comma-separated paths or URLs "
        "(`--spark-jars`); None = fetched with Maven into `cache_dir`.")
    spark_conf: dict[str, str] = Field(
        default_factory=dict, description="Spark settings for the pipeline's session (`run --conf "
        "KEY=VALUE` adds to them and wins); applied after the product's own, so they override "
        "them (e.g. `spark.sql.shuffle.partitions`, `spark.executor.memory`). Environment: JSON.")
    checkpoint_dir: Path = Field(
        Path(".reassigner/checkpoints"), description="Structured Streaming checkpoint location."
    )
    trigger_interval: str = Field(
        "100 milliseconds",
        description="Micro-batch trigger interval: how often Spark looks for new input (a batch "
        "runs only when there is some). Part of the event-to-command latency.")
    max_records_per_batch: int = Field(
        200_000, ge=1, description="Spark `maxOffsetsPerTrigger`: bounds one micro-batch."
    )
    tick_interval_seconds: float = Field(
        1.0, ge=0, description="How often the pipeline writes a Tick request (0 = never)."
    )

    # --- watcher -----------------------------------------------------------------------------
    poll_interval_seconds: float = Field(1.0, gt=0, description="Watcher poll period (`poll.interval`).")
    snapshot_interval_seconds: float = Field(60.0, gt=0, description="Full snapshot period.")
    snapshot_slice_partitions: int = Field(
        10_000, ge=1, description="A snapshot of a bigger cluster is spread over several polls, this "
        "many partitions a poll, so that no poll waits on a whole snapshot.")
    log_dirs_interval_seconds: float = Field(
        2.0, gt=0, description="Longest time between two reads of every broker's log dirs; a poll "
        "reads them sooner when the metadata hints a dir changed (see runtime.clients.cluster_poll).")
    traffic_sampling: bool = Field(
        True, description="Read every partition's log start and end offsets and the consumer "
        "groups' committed offsets at each snapshot, for each partition's bytes in and out per "
        "second (`reassigner.edge.traffic`); off, traffic counts as unknown (zero).")
    watcher_max_backoff_seconds: float = Field(
        30.0, gt=0, description="Longest wait between polls while the cluster is unreachable.")
    event_topic_partitions: int = Field(
        3, ge=1, description="Partitions of the product topics the watcher and executor create.")

    # --- executor ----------------------------------------------------------------------------
    executor_retry_seconds: float = Field(
        60.0, gt=0, description="How long the executor retries one command on transient errors "
        "(exponential backoff from 0.5 s, at most 10 s apart) before it reports the error.")
    executor_log_dir_wait_seconds: float = Field(
        60.0, gt=0, description="How long the executor waits for a new replica to exist on its "
        "broker before AlterReplicaLogDirs can place it in the requested dir.")

    # --- reactions -------------------------------------------------------------------------
    mode: Literal["auto", "approve", "observe"] = Field("auto", description="auto: act; approve: propose, act once approved; observe: only alert (`mode`).")
    broker_add_grace_seconds: float = Field(30.0, ge=0, description="`broker.add.grace`.")
    broker_failure_grace_seconds: float = Field(300.0, ge=0, description="`broker.failure.grace`.")
    self_healing_max_failed_brokers: int = Field(2, ge=0)
    self_healing_max_failed_fraction: float = Field(0.4, gt=0, le=1)
    paused: bool = Field(
        False, description="`reassignment.paused`: no new step or log-dir move starts (those in "
        "flight finish); plans are still made and wait. `request pause` / `request resume` set it "
        "at run time; independent of `mode`.")
    proposal_expiry_seconds: float = Field(
        86400.0, gt=0, description="`proposal.expiry`: a proposal (mode approve) not approved or "
        "rejected within this long is dropped, with a ProposalExpired alert.")

    # --- batch limits --------------------------------------------------------------------
    max_partition_movements: int = Field(5, ge=1, description="P: partitions with a step in flight.")
    max_leader_movements: int = Field(2, ge=1, description="L: leader-moving steps in flight.")
    max_replica_movements: int = Field(1, ge=1, description="R: replicas added per step.")
    max_movements_per_broker: int = Field(2, ge=1, description="B: steps touching one broker.")
    step_stall_timeout_seconds: float = Field(600.0, gt=0, description="`step.stall.timeout`.")
    stall_action: Literal["alert", "cancel"] = Field("alert")
    step_retry_max: int = Field(
        3, ge=0, description="`step.retry.max`: a step the executor could not apply for a transient "
        "reason (timeout, no controller, leader not available, another reassignment in progress) "
        "is tried again this many times, waiting 10 s doubling to 300 s; then the partition is "
        "given up with `ReassignmentStalled`.")
    throttle_bytes_per_sec: int | None = Field(None, ge=1, description="Replication throttle.")
    logdir_throttle_bytes_per_sec: int | None = Field(
        None, ge=1, description="`replica.alter.log.dirs.io.max.bytes.per.second`: throttles the "
        "copies between the log dirs of a broker (log-dir moves, and the copy into the requested "
        "dir of a replica a step adds); set on a broker while its moves run, removed after.")

    # --- the adaptive throttle (planning.movement.throttle_control) and its canary ------------
    throttle_mode: Literal["static", "adaptive"] = Field(
        "static", description="`throttle.mode`: static throttles every step at `throttle.bytes.per.sec` "
        "(none when unset); adaptive sets each broker's rate between `throttle.min` and `throttle.max`, "
        "raising it while the canary's produce p99 on the broker stays within its SLO and no ISR outside "
        "the moves shrinks there, halving it when not.")
    throttle_min_bytes_per_sec: int = Field(
        1_000_000, ge=1, le=10**13, description="`throttle.min`: (adaptive) the floor: a hurt broker "
        "still copies at this rate, so a movement never starves.")
    throttle_max_bytes_per_sec: int = Field(
        100_000_000, ge=1, le=10**13, description="`throttle.max`: (adaptive) the ceiling of every "
        "broker's rate.")
    throttle_schedule: str = Field(
        "", description="`throttle.schedule`: (adaptive) lower ceilings for hours of the day (UTC), as "
        "`HOURS=RATE` pairs separated by commas, e.g. `8-18=20MB,19=50MB`; hours not named keep "
        "`throttle.max`. Empty: none.")
    throttle_slo_factor: float = Field(
        2.0, ge=1, le=100, description="(adaptive) a broker is hurt when its canary produce p99 is above "
        "this many times its baseline (measured while nothing moved) ...")
    throttle_slo_ceiling_ms: float = Field(
        500.0, gt=0, le=600_000, description="... or above this many milliseconds.")
    throttle_hold_seconds: float = Field(
        30.0, gt=0, le=3600, description="(adaptive) a broker's rate changes at most once in this long: "
        "the effect of a change needs a canary window to show.")
    canary_enabled: bool = Field(
        False, description="The watcher keeps the canary topic `<topic_prefix>.canary` (one partition "
        "led by each live broker) and measures acks=all produce latency on it, per broker "
        "(`reassigner.canary-samples`); the adaptive throttle reads it (without it, it never raises a "
        "rate, and a CanaryMissing alert says so), `status` shows it. Off by default: it makes a topic "
        "and writes to it every `canary_interval_seconds`, which an operator asks for.")
    canary_interval_seconds: float = Field(
        0.5, gt=0, le=60, description="How often the canary writes one record to each partition.")
    canary_window_seconds: float = Field(
        30.0, gt=0, le=3600, description="How long one canary window lasts: its p50 and p99 per broker "
        "are one CanarySample.")
    canary_replication_factor: int = Field(
        3, ge=1, le=16, description="Replicas of each canary partition (at most the live brokers), "
        "spread over top-level racks.")

    disk_max_usage_percent: float = Field(
        85.0, gt=0, le=100, description="`disk.max.usage.percent`: no plan puts a replica in a log dir "
        "whose volume would then be fuller than this, nor than `disk.low.water.percent` (used bytes as "
        "the broker reports them, plus what the plan moves in); when nothing fits, PlanInfeasible names the dirs.")

    disk_high_water_percent: float = Field(
        80.0, gt=0, le=100, description="`disk.high.water.percent`: (mode auto) a log dir whose volume is "
        "fuller than this gets the fewest bytes moved off it (another volume of its broker first, else "
        "another broker) down to `disk.low.water.percent`; in approve and observe an alert says what would move.")
    disk_low_water_percent: float = Field(
        75.0, gt=0, le=100, description="`disk.low.water.percent`: where a relieved dir's volume ends (at "
        "most the high-water mark).")

    # --- how plans balance --------------------------------------------------------------
    balance_mode: Literal["strict", "bytes"] = Field(
        "bytes", description="`balance.mode`: bytes puts every broker within the tolerances below of "
        "its share of disk bytes, replicas, leaders and (once measured) traffic, moving the fewest "
        "bytes; strict makes every broker's replica count exact (per topic and over the cluster) with "
        "the fewest replica moves, whatever bytes that takes.")
    balance_disk_tolerance: float = Field(
        0.10, gt=0, le=1, description="`balance.disk.tolerance`: (mode bytes) a broker is balanced on "
        "disk within this fraction of its share of the replica bytes.")
    balance_replica_tolerance: float = Field(
        0.10, gt=0, le=1, description="`balance.replica.tolerance`: (mode bytes) the same for its "
        "replica count.")
    balance_leader_tolerance: float = Field(
        0.10, gt=0, le=1, description="`balance.leader.tolerance`: (mode bytes) the same for its "
        "leader count.")
    balance_bytes_in_tolerance: float = Field(
        0.10, gt=0, le=1, description="`balance.bytes.in.tolerance`: (mode bytes) the same for the bytes "
        "produced to its replicas per second, once traffic is measured.")
    balance_network_out_tolerance: float = Field(
        0.10, gt=0, le=1, description="`balance.network.out.tolerance`: (mode bytes) the same for what it "
        "sends per second as a leader (followers' fetches, consumers' reads), once traffic is measured.")
    balance_topic_spread: float = Field(
        0.25, gt=0, le=1, description="`balance.topic.spread`: (mode bytes) no move puts more of one "
        "topic on a broker than its share plus max(2, this fraction of the share).")
    balance_disk_budget_bytes: int = Field(
        0, ge=0, le=10**16, description="`balance.disk.budget.bytes`: (mode bytes) 0: off. Otherwise a plan "
        "that rebalances moves at most this many bytes, and its disk band is the tightest that allows "
        "(instead of `balance.disk.tolerance`); what must move (drains, heals) is never cut.")

    # --- log-dir balance ---------------------------------------------------------------
    logdir_imbalance_threshold: float = Field(
        0.1, gt=0, le=1, description="`logdir.imbalance.threshold`: a broker's log dirs are balanced "
        "when every online dir holds its share of the broker's bytes (by capacity) within this "
        "fraction; beyond it (a new empty dir is 1.0 off) the product moves replicas between them.")
    max_logdir_movements_per_broker: int = Field(
        2, ge=1, description="`reassignment.max.concurrent.logdir.movements.per.broker`: "
        "intra-broker moves in flight on one broker.")

    # --- topic selection ----------------------------------------------------------------------
    topics_include: str = Field(
        ".*", description="`topics.include`: a regular expression a whole topic name must match for "
        "the product to balance the topic.")
    topics_exclude: str | None = Field(
        None, description="`topics.exclude`: topics (whole-name regular expression) the product only "
        "heals and drains, never rebalances. Unset: Kafka's internal topics (`__...`) and the "
        "product's own (`<topic_prefix>....`).")

    @field_validator("topics_include", "topics_exclude")
    @classmethod
    def _a_regular_expression(cls, value: str | None) -> str | None:
        if value is not None:
            check_topic_pattern(value)
        return value

    @field_validator("throttle_schedule")
    @classmethod
    def _a_schedule(cls, value: str) -> str:
        return parse_schedule(value)[0]

    @model_validator(mode="after")
    def _throttle_bounds_in_order(self) -> "Settings":
        if self.throttle_min_bytes_per_sec > self.throttle_max_bytes_per_sec:
            raise ValueError(f"throttle_min_bytes_per_sec ({self.throttle_min_bytes_per_sec}) is above "
                             f"throttle_max_bytes_per_sec ({self.throttle_max_bytes_per_sec}); set it at most that")
        return self

    @field_validator("local_kafka_version")
    @classmethod
    def _a_kafka_release(cls, value: str) -> str:
        return check_local_release(value.strip())

    @field_validator("bootstrap_servers")
    @classmethod
    def _no_blank_servers(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("bootstrap servers must be host:port[,host:port...], not blank")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        secrets_dir = os.environ.get("REASSIGNER_SECRETS_DIR")
        if secrets_dir:
            if not Path(secrets_dir).is_dir():
                from schemas.errors import InvalidConfigError

                raise InvalidConfigError(
                    f"REASSIGNER_SECRETS_DIR={secrets_dir} is no directory: name the directory holding "
                    "the secret files (e.g. /run/secrets), or unset it")
            sources.append(SecretsSettingsSource(settings_cls, secrets_dir=secrets_dir))
        config_file = os.environ.get("REASSIGNER_CONFIG_FILE")
        if config_file:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(config_file)))
        return tuple(sources)

    def topic(self, suffix: str) -> str:
        """The full name of one of the product's topics, e.g. `topic("commands")`."""
        return f"{self.topic_prefix}.{suffix}"


def compute_policy(settings: Settings) -> Policy:
    """The handlers' `Policy`: the `Settings` fields of the same names."""
    return Policy(**{f.name: getattr(settings, f.name) for f in fields(Policy)})


def compute_limits(settings: Settings) -> Limits:
    """The movement limits P/L/R/B the product runs with, before any SetConfig."""
    return Limits(**{name: getattr(settings, name) for name in CONFIG_KEYS.values()})


def read_command_signing_key(settings: Settings) -> SigningKey | None:
    """The command signing key named by `command_signing_key_file`, or None when none is set.
    A file others may read is used, with a warning; errors name the file, never its content."""
    from schemas.errors import InvalidConfigError

    path = settings.command_signing_key_file
    if path is None:
        return None
    try:
        content = Path(path).read_bytes()
        mode = Path(path).stat().st_mode
    except OSError as error:
        raise InvalidConfigError(
            f"the command signing key file {path} cannot be read ({error.strerror or type(error).__name__}); "
            "fix command_signing_key_file (REASSIGNER_COMMAND_SIGNING_KEY_FILE) or make the file: "
            f"`openssl rand -hex 32 > {path}`") from None
    key = parse_signing_key(content, str(path))
    if mode & 0o077:
        log.warning("the command signing key file %s can be read by other users (mode %o): chmod 600 it",
                    path, mode & 0o777)
    return key


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment and config file, with CLI flags (non-None) on top."""
    from pydantic import ValidationError

    from schemas.errors import InvalidConfigError

    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise InvalidConfigError(
            f"setting {field!r}: {first['msg']}; fix the flag, REASSIGNER_{field.upper()} "
            "or the config file"
        ) from None
