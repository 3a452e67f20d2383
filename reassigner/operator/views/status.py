"""What `reassigner status` and the status page show: the brokers, their dirs and disks, the
partitions under-replicated, under min ISR or offline, the topic selection in force, and the
progress of the current movement, with the list view's rows (`listing`). Pure.

MOVEMENT: the movement's progress is the meter's (`progress.compute_progress`, the one place it
is computed): partitions, steps and bytes, finished reassignments included (a finished one leaves
the state; the pipeline counts it in the state's replication meter), one percentage (by bytes),
the rate and the time left of the header and of every row by one method. So `status`, its
`--json`, the page and /metrics show the same figures from the state alone, whenever they are
started. `StatusView.movement` holds them, `StatusView.progress` the whole reading.

BROKERS: each with its load (`planning.load`): replicas, leaders, replica bytes, bytes in and
network out per second (smoothed; `traffic_measured` says whether any partition's traffic was
measured yet, else the rates are zeros that mean "unknown"). CORDONS (Kafka 4.3+): what the
product cordoned (`ControllerState.cordoned`: the broker whole, or its dirs) and, apart, the dirs
Kafka shows cordoned that the product did not ask for (`cordoned_by_others`: someone else's; a
broker the product cordoned whole has none apart, as Kafka then shows every dir cordoned).

Invariants: nothing here reads a clock or does I/O; unknown values are None, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from handlers.cordons import UNSURE, WHOLE
from handlers.policy import Policy, compute_excluded_pattern, compute_excluded_topics, effective_policy
from state.model import ControllerState
from planning.load import BrokerLoad, compute_broker_loads
from planning.movement.isr_shrinks import BUCKET_MS, count_isr_shrinks
from planning.model import CORDONS, Broker, KafkaFacts
from runtime.kafka_versions import CAPABILITIES
from reassigner.operator.views.listing import compute_list_view
from reassigner.operator.views.progress import Figures, Progress, compute_meter
from reassigner.operator.views.proposals import ProposalView
from reassigner.operator.views.rows import ExternalRow, InFlightRow, LogDirMoveRow, ReassignmentRow


@dataclass(frozen=True)
class BrokerRow:
    id: int
    rack: str | None
    alive: bool
    draining: bool
    dirs_online: int
    dirs_total: int
    offline_dirs: tuple[str, ...]
    replicas: int
    leaders: int
    cannot_host: int = 0  # partitions its failed dirs held, kept off it until it restarts
    # Per online dir, as describe-log-dirs last told: (path, replicas, bytes); None = not reported.
    dirs: tuple[tuple[str, int | None, int | None], ...] = ()
    # Its load (`planning.load`): replica bytes, and bytes in and network out per second.
    disk_bytes: int = 0
    bytes_in_per_sec: float = 0.0
    network_out_per_sec: float = 0.0
    cordoned: bool = False  # cordoned whole by the product (`handlers.cordons`): no new replica lands on it
    cordoned_dirs: tuple[str, ...] = ()  # its dirs the product cordoned (full ones it empties)
    cordoned_by_others: tuple[str, ...] = ()  # its dirs Kafka shows cordoned that the product did not ask for
    # Times it fell out of the ISR of a partition nothing was moving, over the last ten minutes
    # (`planning.movement.isr_shrinks`): the clients or replication hurting, whatever the cause.
    isr_shrinks: int = 0
    # The adaptive throttle (`handlers.throttle`): its rate on the broker and why, while the
    # movement touches it; the canary's newest produce p99 and its baseline (ms).
    throttle_rate: int | None = None
    throttle_reason: str = ""
    canary_p99_ms: float | None = None
    canary_baseline_ms: float | None = None


def _throttle_fields(state: ControllerState, broker_id: int) -> tuple:
    """A broker's adaptive throttle (rate, reason) and canary (p99, baseline) for its `BrokerRow`."""
    throttle, reading = state.throttles.get(broker_id), state.canary.get(broker_id)
    return (throttle.rate if throttle is not None else None, throttle.reason if throttle is not None else "",
            reading.p99_ms if reading is not None else None, reading.baseline_ms if reading is not None else None)


@dataclass(frozen=True)
class DiskRow:
    """One log dir of one broker: what describe-log-dirs last told (None = not reported)."""

    broker_id: int
    path: str
    online: bool
    replicas: int | None
    replica_bytes: int | None
    total_bytes: int | None  # the volume's size (Kafka 3.3+ reports it)
    usable_bytes: int | None

    @property
    def used_fraction(self) -> float | None:
        """Share of the volume in use (anything on it, not only Kafka's replicas)."""
        if not self.total_bytes or self.usable_bytes is None:
            return None
        return min(1.0, max(0.0, (self.total_bytes - self.usable_bytes) / self.total_bytes))


@dataclass(frozen=True)
class PartitionProblem:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int | None
    min_insync_replicas: int
    eligible_leaders: tuple[int, ...] = ()  # KIP-966: out of the ISR, every committed record held


@dataclass(frozen=True)
class StatusView:
    brokers: tuple[BrokerRow, ...]
    under_replicated: tuple[PartitionProblem, ...]
    under_min_isr: tuple[PartitionProblem, ...]
    offline: tuple[PartitionProblem, ...]
    reassignments: tuple[ReassignmentRow, ...]
    in_flight: tuple[InFlightRow, ...]
    topics: int
    partitions: int
    epoch: int
    last_batch: int
    proposals: tuple[str, ...]
    config: Mapping[str, str]
    # Topic selection (`topics.include` / `topics.exclude`, overrides applied): the topics only
    # healed and drained, never rebalanced. Empty patterns when the view was built without a policy.
    topics_include: str = ""
    topics_exclude: str = ""
    excluded_topics: tuple[str, ...] = ()
    log_dir_moves: tuple[LogDirMoveRow, ...] = ()
    paused: bool = False  # `reassignment.paused` in force (`request pause`); False without a policy
    mode: str = "auto"  # the mode in force (`mode`, overrides applied); "auto" without a policy
    disks: tuple[DiskRow, ...] = ()  # every log dir of every broker, by (broker, path)
    proposal_views: tuple[ProposalView, ...] = ()  # the proposals with their moves
    external: tuple[ExternalRow, ...] = ()  # moves of other tools Kafka shows
    progress: Progress = Progress()  # the meter's reading (MOVEMENT): every figure of progress shown
    traffic_measured: bool = False  # some partition's traffic was measured: the brokers' rates mean something
    kafka: str | None = None  # which Kafka the cluster runs and what the product lacks there; None: not told yet
    drain_warning: str | None = None  # draining brokers that new topics may still land on (no cordons)

    @property
    def movement(self) -> Figures:
        """The movement's figures, finished reassignments included (MOVEMENT)."""
        return self.progress.movement


def compute_status(state: ControllerState, default_replica_movements: int,
                   now_seconds: float | None = None, policy: Policy | None = None) -> StatusView:
    """Everything `status` and the status page show; `policy` (the static settings') adds the
    topic selection in force."""
    cluster = state.cluster
    loads = compute_broker_loads(cluster)
    traffic_measured = False
    under_replicated, under_min_isr, offline = [], [], []
    for p in cluster.partitions():
        traffic_measured = traffic_measured or p.bytes_in_per_sec is not None
        min_isr = cluster.min_isr(p.topic)
        problem = PartitionProblem(p.topic, p.partition, tuple(p.replicas), tuple(p.isr),
                                   p.leader if p.leader is not None and p.leader >= 0 else None, min_isr,
                                   tuple(p.eligible_leaders))
        if problem.leader is None:
            offline.append(problem)
        if len(set(p.isr)) < len(set(p.replicas) - set(p.adding)):
            under_replicated.append(problem)
        if len(set(p.isr)) < min_isr:
            under_min_isr.append(problem)
    idle = BrokerLoad()
    # The shrink window as of now; with no clock given, as of its newest bucket (the batches
    # prune it, so it holds the last ten minutes the pipeline saw).
    now_ms = (int(now_seconds * 1000) if now_seconds is not None else
              max((buckets[-1][0] + BUCKET_MS for buckets in state.isr_shrinks.values()), default=0))
    brokers = tuple(
        BrokerRow(b.id, b.rack, b.alive, b.draining, sum(1 for d in b.log_dirs if d.online),
                  len(b.log_dirs), tuple(d.path for d in b.log_dirs if not d.online),
                  (load := loads.get(b.id, idle)).replicas, load.leaders, len(b.cannot_host),
                  tuple((d.path, d.replica_count, d.replica_bytes) for d in b.online_log_dirs),
                  load.disk_bytes, load.bytes_in_per_sec, load.network_out_per_sec,
                  (asked := state.cordoned.get(b.id)) == WHOLE, () if asked in (None, WHOLE, UNSURE) else asked,
                  compute_cordoned_by_others(b, asked), count_isr_shrinks(state.isr_shrinks, b.id, now_ms),
                  *_throttle_fields(state, b.id))
        for b in sorted(cluster.brokers, key=lambda b: b.id)
    )
    progress = compute_meter(state, default_replica_movements, now_seconds, policy)
    listing = compute_list_view(state, default_replica_movements, now_seconds, policy, progress, loads)
    rows = listing.reassignments
    return StatusView(
        brokers=brokers,
        under_replicated=tuple(under_replicated),
        under_min_isr=tuple(under_min_isr),
        offline=tuple(offline),
        reassignments=rows,
        in_flight=listing.in_flight,
        topics=len(cluster.topics),
        partitions=sum(len(t.partitions) for t in cluster.topics),
        epoch=state.epoch,
        last_batch=state.last_batch,
        proposals=tuple(sorted(state.proposals)),
        config=dict(state.config),
        **_topic_selection(state, policy),
        log_dir_moves=listing.log_dir_moves,
        paused=policy is not None and effective_policy(policy, state.config).paused,
        mode=effective_policy(policy, state.config).mode if policy is not None else "auto",
        disks=compute_disk_rows(cluster),
        proposal_views=listing.proposals,
        external=listing.external,
        progress=progress,
        traffic_measured=traffic_measured,
        kafka=None if state.kafka is None else compute_kafka_line(state.kafka),
        drain_warning=compute_drain_warning(brokers, state.kafka),
    )


def compute_cordoned_by_others(broker: Broker, asked: tuple[str, ...] | None) -> tuple[str, ...]:
    """The broker's dirs Kafka shows cordoned (`LogDir.cordoned`) that the product did not ask
    for (`asked`: its own cordon there, `ControllerState.cordoned`; WHOLE covers every dir)."""
    if asked == WHOLE:
        return ()
    return tuple(d.path for d in broker.log_dirs if d.cordoned and d.path not in (asked or ()))


def compute_drain_warning(brokers: tuple[BrokerRow, ...], kafka: KafkaFacts | None) -> str | None:
    """The draining brokers the product did not cordon, and why new topics may land there."""
    open_ = [b.id for b in brokers if b.draining and not b.cordoned]
    if not open_:
        return None
    names = ", ".join(map(str, open_))
    why = ("the cluster's Kafka is not known yet" if kafka is None
           else f"Kafka {kafka.release} has no cordons (4.3+ with metadata.version 4.3-IV0)" if not kafka.has(CORDONS)
           else "their cordon is not applied yet")
    return f"draining broker{'s' if len(open_) > 1 else ''} {names} not cordoned: new topics may still land there ({why})"


def compute_kafka_line(kafka: KafkaFacts) -> str:
    """"Kafka 4.1 (metadata.version level 27); without cordoned log dirs: ..." — what the
    product lacks there said as in its docs (`runtime.kafka_versions.CAPABILITIES`)."""
    level = "" if kafka.metadata_level is None else f" (metadata.version level {kafka.metadata_level})"
    missing = [c for c in CAPABILITIES if not kafka.has(c.name)]
    return f"Kafka {kafka.release}{level}" + "".join(f"; without {c.name}: {c.without}" for c in missing)


def compute_disk_rows(cluster) -> tuple[DiskRow, ...]:
    """Disk usage per broker and log dir (offline dirs too: they show as such)."""
    return tuple(DiskRow(b.id, d.path, d.online, d.replica_count, d.replica_bytes, d.total_bytes, d.usable_bytes)
                 for b in sorted(cluster.brokers, key=lambda b: b.id) for d in b.log_dirs)


def _topic_selection(state: ControllerState, policy: Policy | None) -> dict[str, Any]:
    if policy is None:
        return {}
    effective = effective_policy(policy, state.config)
    return {
        "topics_include": effective.topics_include,
        "topics_exclude": compute_excluded_pattern(effective),
        "excluded_topics": tuple(sorted(compute_excluded_topics((t.name for t in state.cluster.topics), effective))),
    }
