"""Every Prometheus metric of the product, defined once, and the one door to prometheus-client.

WHO COUNTS WHAT: each long-running process counts what it does, where it does it (the shell,
never the pure handlers), and serves its own `/metrics`:
- the pipeline (`streams.runner`) once per COMMITTED batch, from what its decision reported
  (`handlers.micro_batch.BatchReport`: inputs applied and rejected, commands and alerts by kind,
  steps completed and their bytes) and the state after it (`compute_batch_counts`, pure),
  right after the commit succeeded: a batch that fails before its commit and is retried, a replay, or a batch
  another writer committed counts nothing;
- the watcher (`reassigner.edge.watcher`) once per poll, after the events were acknowledged (a
  failed poll counts as one poll, with its error code as outcome);
- the executor (`reassigner.edge.executor`) once per command result, after it was published;
- the status server (`reassigner.operator.status_server`) exports gauges of the controller
  state as it is when scraped (`StatusCollector`, its own registry) and counters of what its
  consumer read from the alerts and command-results topics. It derives no counter from the
  pages it serves: the counters of completed steps and moved bytes are the pipeline's.

NAMES: `reassigner_<process>_<what>` for what one process does; names the status server had
before are kept (`reassigner_steps_in_flight`, ...). A counter is declared without `_total`
(prometheus-client adds it: `PIPELINE_BATCHES` is exported as `reassigner_pipeline_batches_total`).
`METRIC_NAMES` lists every name a scrape can show (tests hold the dashboard to it).

SERVING: each process's metrics live in a registry of its own (`process_registry`): importing
this module exports nothing anywhere, and a process serves only what it counts, so `absent()`
of a process's series means that process is down. Every sample served carries a `cluster`
label (`ClusterLabel`, the settings' `cluster_name`): one Prometheus may scrape several
clusters' products. `serve_metrics` starts the process's endpoint (prometheus-client's
threaded HTTP server, `/metrics` and any path) on loopback unless told otherwise by the CLI
(`reassigner.cli.options.start_metrics_endpoint`, settings `metrics_port`, `metrics_host`,
`metrics_allow_remote`). Off unless a port is given.
"""

from __future__ import annotations

from collections import Counter as Tally
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from prometheus_client import (CollectorRegistry, Counter, Gauge, Histogram,
                               disable_created_metrics, generate_latest, start_http_server)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

from handlers.micro_batch import BatchInputs, BatchReport
from planning.model import TopicPartition
from schemas import ALERT_KINDS, COMMAND_ACTION_KINDS, COMMAND_KINDS, EVENT_TYPES
from schemas.codec import TOPICS
from state.model import ControllerState

disable_created_metrics()  # no `_created` series: nothing here reads them, they double the output

PROCESSES = ("pipeline", "watcher", "executor")
# One registry per process that counts (see SERVING): a process serves its own, never the
# others' (a watcher exporting the pipeline's last-batch time as 0 hid a pipeline that was down).
_REGISTRIES = {process: CollectorRegistry() for process in PROCESSES}
_PIPELINE, _WATCHER, _EXECUTOR = (_REGISTRIES[p] for p in PROCESSES)

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
INPUT_SCHEMAS = EVENT_TYPES + ("Request", "CommandResult")
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
BATCH_PHASES = ("spark", "decode", "decide", "persist", "publish", "total")
POLL_PHASES = ("observe", "diff", "publish", "total")
REFUSAL_REASONS = ("STALE_EPOCH", "UNKNOWN_EPOCH", "BAD_SIGNATURE", "COMMAND_EXPIRED")

# --- pipeline ------------------------------------------------------------------------------------
PIPELINE_BATCHES = Counter("reassigner_pipeline_batches", "Micro-batches the pipeline applied and committed.",
                           registry=_PIPELINE)
PIPELINE_REPLAYS = Counter("reassigner_pipeline_replayed_batches",
                           "Micro-batches whose records were all applied before (re-run after a restart).",
                           registry=_PIPELINE)
PIPELINE_STORE_LOST = Counter("reassigner_pipeline_state_store_lost",
                              "Times a commit found the Redis state not the one the pipeline wrote (emptied or "
                              "rolled back) and the pipeline rewrote it whole.", registry=_PIPELINE)
PIPELINE_BATCH_SECONDS = Histogram("reassigner_pipeline_batch_duration_seconds",
                                   "Duration of a committed batch, by phase (total: the whole batch).",
                                   ["phase"], buckets=SECONDS, registry=_PIPELINE)
PIPELINE_INPUTS = Counter("reassigner_pipeline_inputs",
                          "Input records of committed batches by schema and outcome: applied, or rejected "
                          "(undecodable, deciding on it failed, or an invalid event: a dead letter or BadEvent).",
                          ["schema", "outcome"], registry=_PIPELINE)
PIPELINE_COMMANDS = Counter("reassigner_pipeline_commands", "Commands the pipeline issued, by kind.", ["kind"],
                            registry=_PIPELINE)
PIPELINE_ALERTS = Counter("reassigner_pipeline_alerts", "Alerts the pipeline raised, by kind.", ["kind"],
                          registry=_PIPELINE)
STEPS_STARTED = Counter("reassigner_steps_started", "Reassignment steps started (ReassignmentStep commands issued).",
                        registry=_PIPELINE)
STEPS_COMPLETED = Counter("reassigner_steps_completed",
                          "Reassignment steps Kafka completed, as the pipeline saw them complete.", registry=_PIPELINE)
BYTES_MOVED = Counter("reassigner_bytes_moved",
                      "Bytes copied by completed steps (replicas each step added x partition size).",
                      registry=_PIPELINE)
REASSIGNMENTS_ACTIVE_HELP = "Partitions with an ongoing reassignment."
STEPS_IN_FLIGHT_HELP = "Reassignment steps Kafka is executing now."
REASSIGNMENTS_ACTIVE = Gauge("reassigner_reassignments_active", REASSIGNMENTS_ACTIVE_HELP, registry=_PIPELINE)
STEPS_IN_FLIGHT = Gauge("reassigner_steps_in_flight", STEPS_IN_FLIGHT_HELP, registry=_PIPELINE)
PIPELINE_LAG = Gauge("reassigner_pipeline_lag_seconds",
                     "Event time of the oldest input of the last committed batch to its commit.", registry=_PIPELINE)
PIPELINE_INPUT_LAG = Histogram("reassigner_pipeline_input_lag_seconds",
                               "Per committed batch: event time of its oldest input to the commit.",
                               buckets=SECONDS, registry=_PIPELINE)
PIPELINE_LAST_BATCH_TIME = Gauge("reassigner_pipeline_last_batch_timestamp_seconds",
                                 "Unix time the pipeline last committed a batch.", registry=_PIPELINE)

# --- watcher ------------------------------------------------------------------------------------
WATCHER_POLLS = Counter("reassigner_watcher_polls", "Watcher polls by outcome: ok, or the error code.",
                        ["outcome"], registry=_WATCHER)
WATCHER_POLL_SECONDS = Histogram("reassigner_watcher_poll_duration_seconds",
                                 "Duration of a successful poll, by phase (total: the whole poll).",
                                 ["phase"], buckets=SECONDS, registry=_WATCHER)
WATCHER_EVENTS = Counter("reassigner_watcher_events", "Events the watcher published, by type.", ["type"],
                         registry=_WATCHER)
WATCHER_SNAPSHOT_SECONDS = Histogram("reassigner_watcher_snapshot_duration_seconds",
                                     "A snapshot, from its START (the poll that began it) to its END acknowledged.",
                                     buckets=SECONDS, registry=_WATCHER)

# --- executor -----------------------------------------------------------------------------------
EXECUTOR_COMMANDS = Counter("reassigner_executor_commands",
                            "Commands the executor applied, by kind and outcome: ok, or the error code.",
                            ["kind", "outcome"], registry=_EXECUTOR)
EXECUTOR_APPLY_SECONDS = Histogram("reassigner_executor_apply_duration_seconds",
                                   "Time to apply one command (retries included), by kind.", ["kind"],
                                   buckets=SECONDS, registry=_EXECUTOR)
EXECUTOR_REFUSED = Counter("reassigner_executor_refused_commands",
                           "Commands refused before being applied, by reason.", ["reason"], registry=_EXECUTOR)
EXECUTOR_DUPLICATES = Counter("reassigner_executor_duplicate_commands",
                              "Commands whose id was applied before (their stored result published again).",
                              registry=_EXECUTOR)
EXECUTOR_DEAD_LETTERS = Counter("reassigner_executor_dead_letters",
                                "Command messages the executor could not handle (dead-lettered).", registry=_EXECUTOR)

for _phase in BATCH_PHASES:
    PIPELINE_BATCH_SECONDS.labels(_phase)
for _kind in COMMAND_KINDS + COMMAND_ACTION_KINDS:
    PIPELINE_COMMANDS.labels(_kind)
    EXECUTOR_COMMANDS.labels(_kind, "ok")
for _kind in ALERT_KINDS:
    PIPELINE_ALERTS.labels(_kind)
for _schema in INPUT_SCHEMAS:
    PIPELINE_INPUTS.labels(_schema, "applied")
    PIPELINE_INPUTS.labels(_schema, "rejected")
for _phase in POLL_PHASES:
    WATCHER_POLL_SECONDS.labels(_phase)
WATCHER_POLLS.labels("ok")
for _reason in REFUSAL_REASONS:
    EXECUTOR_REFUSED.labels(_reason)

# --- the status server's (computed from the state when scraped: `StatusCollector`) --------------
# name: (type, help, label names). Same names as before prometheus-client; see the module doc.
STATUS_METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "reassigner_steps_in_flight": ("gauge", STEPS_IN_FLIGHT_HELP, ()),
    "reassigner_reassignments_active": ("gauge", REASSIGNMENTS_ACTIVE_HELP, ()),
    "reassigner_progress_ratio": ("gauge", "The movement's progress as the page and `status` show it: bytes moved / "
                                  "bytes to move (by steps when nothing has bytes), finished reassignments "
                                  "included.", ()),
    "reassigner_bytes_to_move": ("gauge", "Bytes the current movement copies in all (replicas the final targets "
                                 "add), finished reassignments included.", ()),
    "reassigner_bytes_left": ("gauge", "Bytes the ongoing reassignments have still to copy (copies in flight "
                              "counted as they grow).", ()),
    "reassigner_replication_rate_bytes_per_second": (
        "gauge", "Bytes per second copied since the current movement began, copies in flight included; the "
        "throttle rate before any byte was seen copied (absent when neither is known).", ()),
    "reassigner_time_left_seconds": ("gauge", "Estimated seconds until the movement is done: the latest of its "
                                     "reassignments' times left, as `status` shows them.", ()),
    "reassigner_pipeline_last_batch": ("gauge", "Id of the last micro-batch the pipeline applied.", ()),
    "reassigner_alerts": ("counter", "Alerts on the alerts topic, by kind (read by the status server).", ("kind",)),
    "reassigner_executor_errors": ("counter", "Command results with ok=false on the command-results topic.", ()),
    "reassigner_executor_errors_by_code": ("counter", "Executor errors by Kafka error code.", ("error_code",)),
    "reassigner_brokers": ("gauge", "Brokers by state.", ("state",)),
    "reassigner_under_replicated_partitions": ("gauge", "Partitions with ISR < replicas.", ()),
    "reassigner_under_min_isr_partitions": ("gauge", "Partitions with ISR < min.insync.replicas.", ()),
    "reassigner_offline_partitions": ("gauge", "Partitions without a leader.", ()),
    "reassigner_log_dir_moves": ("gauge", "Intra-broker log-dir moves the controller owns, by state.", ("state",)),
    "reassigner_log_dir_move_bytes": ("gauge", "Bytes of the log-dir moves not finished yet.", ()),
    "reassigner_log_dir_bytes": ("gauge", "Bytes of the replicas in each online log dir, as describe-log-dirs "
                                 "last told.", ("broker", "dir")),
    "reassigner_broker_isr_shrinks": (
        "gauge", "Times each broker fell out of the ISR of a partition nothing was moving (no reassignment of "
        "the product's, another tool's or Kafka's), over the last ten minutes.", ("broker",)),
    "reassigner_broker_throttle_rate_bytes_per_second": (
        "gauge", "The adaptive throttle's replication rate on each broker the movement touches "
        "(throttle.mode=adaptive).", ("broker",)),
    "reassigner_broker_canary_p99_ms": (
        "gauge", "The canary's acks=all produce p99 on the partition each broker leads, newest window (ms).",
        ("broker",)),
    "reassigner_broker_canary_baseline_ms": (
        "gauge", "The median of the canary's p99 over the last windows in which nothing moved (ms): what "
        "the adaptive throttle's SLO is measured against.", ("broker",)),
    "reassigner_broker_bytes_in_per_second": (
        "gauge", "Bytes written per second on each broker: what is produced to every partition it holds a "
        "replica of (smoothed; once traffic has been measured).", ("broker",)),
    "reassigner_broker_network_out_bytes_per_second": (
        "gauge", "Bytes sent per second by each broker: followers' fetches and consumers' reads of the "
        "partitions it leads (smoothed; once traffic has been measured).", ("broker",)),
}

Samples = Mapping[str, Iterable[tuple[tuple[str, ...], float]]]
"""Metric name (of `STATUS_METRICS`) → (label values, value) samples."""


class StatusCollector(Collector):
    """The status server's metrics: `samples()` is asked at every scrape (the state as it is);
    a name it leaves out is not exported (e.g. the rate before it is known)."""

    def __init__(self, samples: Callable[[], Samples]) -> None:
        self._samples = samples

    def collect(self):
        samples = self._samples()
        for name, (kind, help_text, labels) in STATUS_METRICS.items():
            if name not in samples:
                continue
            family_type = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            family = family_type(name, help_text, labels=list(labels))
            for values, value in samples[name]:
                family.add_metric(list(values), value)
            yield family


class ClusterLabel(Collector):
    """Every sample of `source` with a `cluster` label (the product's `cluster_name`), so that
    two clusters' products scraped by one Prometheus never merge into one series."""

    def __init__(self, source: Collector | CollectorRegistry, cluster_name: str) -> None:
        self._source, self._cluster = source, cluster_name

    def collect(self):
        for family in self._source.collect():
            labelled = Metric(family.name, family.documentation, family.type, family.unit)
            for sample in family.samples:
                labelled.add_sample(sample.name, {"cluster": self._cluster, **sample.labels}, sample.value,
                                    sample.timestamp, sample.exemplar)
            yield labelled


def _labelled(source: Collector | CollectorRegistry, cluster_name: str | None) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(source if cluster_name is None else ClusterLabel(source, cluster_name))
    return registry


def process_registry(process: str) -> CollectorRegistry:
    """The metrics `process` (one of PROCESSES) counts, unlabelled (for tests and `serve_metrics`)."""
    if process not in _REGISTRIES:
        raise ValueError(f"no metrics for process {process!r}; one of {', '.join(PROCESSES)}")
    return _REGISTRIES[process]


def build_status_registry(samples: Callable[[], Samples], cluster_name: str | None = None) -> CollectorRegistry:
    """A registry of its own for the status server, its samples labelled with `cluster_name`
    when given."""
    return _labelled(StatusCollector(samples), cluster_name)


def render_registry(registry: CollectorRegistry) -> bytes:
    """The text exposition format (0.0.4) of `registry`."""
    return generate_latest(registry)


def serve_metrics(host: str, port: int, process: str, cluster_name: str) -> tuple[Any, int]:
    """Serve `process`'s metrics, labelled with `cluster_name`, on `host`:`port` from a daemon
    thread; (server, bound port) (port 0: any free one). `server.shutdown()` stops it."""
    httpd, _thread = start_http_server(port, addr=host, registry=_labelled(process_registry(process), cluster_name))
    return httpd, httpd.server_address[1]


# --- the pipeline's counts of one committed batch (pure) -----------------------------------------



@dataclass(frozen=True)
class BatchCounts:
    """What one committed batch did, for the pipeline's metrics."""

    inputs: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (schema, outcome) → count
    commands: Mapping[str, int] = field(default_factory=dict)  # kind → count
    alerts: Mapping[str, int] = field(default_factory=dict)  # kind → count
    steps_started: int = 0
    steps_completed: int = 0
    bytes_moved: int = 0
    reassignments_active: int = 0
    steps_in_flight: int = 0
    lag_seconds: float | None = None  # oldest input's event time to the commit; None: no timed input


def compute_in_flight(state: ControllerState) -> frozenset[TopicPartition]:
    """The partitions whose reassignment has a step in flight (`ControllerState.compute_records_in_flight`:
    O(in flight + changed) when the state's change log vouches for them, a walk otherwise)."""
    return frozenset(state.compute_records_in_flight())


def compute_oldest_input_ms(inputs: BatchInputs) -> int | None:
    """The earliest event time among the batch's decoded inputs (None: none carries one)."""
    times = [r.get("event_time") for r in (*(record for _, record in inputs.events), *inputs.requests,
                                            *inputs.command_results)]
    return min((t for t in times if isinstance(t, int) and t > 0), default=None)


def compute_batch_counts(after: ControllerState, inputs: BatchInputs, report: BatchReport, committed_at_ms: int,
                         in_flight_after: frozenset[TopicPartition] | None = None) -> BatchCounts:
    """The counts of one committed batch (see `BatchCounts`) from what its decision reported
    (`handlers.micro_batch.BatchReport`) and the state after it; pure. `in_flight_after` (from
    `compute_in_flight`) spares a scan of every reassignment when the caller keeps it."""
    oldest = compute_oldest_input_ms(inputs)
    flying = compute_in_flight(after) if in_flight_after is None else in_flight_after
    return BatchCounts(
        inputs=dict(report.inputs), commands=dict(report.commands), alerts=dict(report.alerts),
        steps_started=report.commands.get("ReassignmentStep", 0), steps_completed=len(report.steps_completed),
        bytes_moved=report.bytes_moved, reassignments_active=len(after.reassignments), steps_in_flight=len(flying),
        lag_seconds=None if oldest is None else max(0.0, (committed_at_ms - oldest) / 1000))


# --- counting (the shells call these) -------------------------------------------------------------

def count_committed_batch(counts: BatchCounts, committed_at: float) -> None:
    """The pipeline, once per committed batch, right after its commit (never for a replay or a
    batch not committed)."""
    PIPELINE_BATCHES.inc()
    for (schema, outcome), n in counts.inputs.items():
        PIPELINE_INPUTS.labels(schema, outcome).inc(n)
    for kind, n in counts.commands.items():
        PIPELINE_COMMANDS.labels(kind).inc(n)
    for kind, n in counts.alerts.items():
        PIPELINE_ALERTS.labels(kind).inc(n)
    STEPS_STARTED.inc(counts.steps_started)
    STEPS_COMPLETED.inc(counts.steps_completed)
    BYTES_MOVED.inc(counts.bytes_moved)
    REASSIGNMENTS_ACTIVE.set(counts.reassignments_active)
    STEPS_IN_FLIGHT.set(counts.steps_in_flight)
    if counts.lag_seconds is not None:
        PIPELINE_LAG.set(counts.lag_seconds)
        PIPELINE_INPUT_LAG.observe(counts.lag_seconds)
    PIPELINE_LAST_BATCH_TIME.set(committed_at)


def count_batch_phases(phases: Mapping[str, float]) -> None:
    """The durations of a committed batch, once its outbox is published (`BATCH_PHASES`)."""
    for phase, seconds in phases.items():
        PIPELINE_BATCH_SECONDS.labels(phase).observe(seconds)


def count_replayed_batch() -> None:
    PIPELINE_REPLAYS.inc()


def count_state_store_lost() -> None:
    PIPELINE_STORE_LOST.inc()


def count_pipeline_state(reassignments_active: int, steps_in_flight: int) -> None:
    """The gauges of the state the pipeline starts from (before its first batch)."""
    REASSIGNMENTS_ACTIVE.set(reassignments_active)
    STEPS_IN_FLIGHT.set(steps_in_flight)


def count_poll(events: Iterable[tuple[str, str, Mapping[str, Any]]], phases: Mapping[str, float],
               snapshot_seconds: float | None) -> None:
    """The watcher, once per poll whose events were acknowledged."""
    WATCHER_POLLS.labels("ok").inc()
    for suffix, n in Tally(suffix for suffix, _key, _record in events).items():
        WATCHER_EVENTS.labels(TOPICS.get(suffix, suffix)).inc(n)
    for phase, seconds in phases.items():
        WATCHER_POLL_SECONDS.labels(phase).observe(seconds)
    if snapshot_seconds is not None:
        WATCHER_SNAPSHOT_SECONDS.observe(max(0.0, snapshot_seconds))


def count_failed_poll(code: str) -> None:
    WATCHER_POLLS.labels(code).inc()


def count_command_outcome(kind: str, ok: bool, error_code: str | None, seconds: float) -> None:
    """The executor, once per command it applied (or settled after a crash), result published."""
    EXECUTOR_COMMANDS.labels(kind, "ok" if ok else (error_code or "UNKNOWN")).inc()
    EXECUTOR_APPLY_SECONDS.labels(kind).observe(seconds)


def count_refused_command(reason: str) -> None:
    EXECUTOR_REFUSED.labels(reason).inc()


def count_duplicate_command() -> None:
    EXECUTOR_DUPLICATES.inc()


def count_dead_letter() -> None:
    EXECUTOR_DEAD_LETTERS.inc()


def compute_metric_names() -> frozenset[str]:
    """Every sample name a scrape of the product's processes can show: the pipeline's,
    watcher's and executor's (histograms with `_bucket`, `_sum`, `_count`) and the status
    server's."""
    names: set[str] = set()
    for family in (f for registry in _REGISTRIES.values() for f in registry.collect()):
        if family.name.startswith("reassigner_"):
            names.update(sample.name for sample in family.samples)
            if family.type == "counter":
                names.add(family.name + "_total")
            elif family.type == "histogram":
                names.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
    names.update(name + "_total" if kind == "counter" else name for name, (kind, _h, _l) in STATUS_METRICS.items())
    return frozenset(names)


METRIC_NAMES = compute_metric_names()


# --- a process's health, from its own endpoint (pure) ---------------------------------------------


def compute_unhealthy(exposition: str, now: float, max_batch_age_seconds: float) -> str | None:
    """Why a process whose endpoint answered `exposition` (the text format) is unhealthy, or
    None when it is healthy. An endpoint that answers is a live process; a pipeline is also
    healthy only while its last committed batch is at most `max_batch_age_seconds` old (it commits
    one a second at least, for its tick): a Spark job that hangs keeps its endpoint up. A pipeline
    that has committed no batch yet (its gauge at 0: Spark starting) is healthy; a container's
    start period bounds that."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        families = list(text_string_to_metric_families(exposition))
    except ValueError as error:
        return f"its metrics endpoint answered no Prometheus text ({error})"
    last_batch = [sample.value for family in families for sample in family.samples
                  if sample.name == "reassigner_pipeline_last_batch_timestamp_seconds"]
    if last_batch and max(last_batch) > 0 and now - max(last_batch) > max_batch_age_seconds:
        return (f"the pipeline's last batch was committed {now - max(last_batch):.0f} s ago "
                f"(more than {max_batch_age_seconds:g} s): its Spark job is stuck; its log says why")
    return None
