"""The safety invariants: one pure checker that every observer of a reassignment feeds.

Rules that must hold at all times, under any fault (docs/design.md, "Safety invariants"). Three
observers judge them and keep no copy: the simulator's driver (`planning.simulation.driver`, every
decision: `check_completed`, `check_started`, `check_limits`, `check_kafka_moves_are_ours`), the
handler tests' loop (every micro-batch: `check_limits`, `check_started`) and the demo's monitor
(`reassigner.dev.harness.monitor`, a real cluster every 250 ms: `check_limits` on Kafka's
reassignments, `check_min_isr_while_reassigning`, `check_targets_unchanged`). Each check returns
the `Violation`s found, messages with the numbers; empty: the rules hold. No I/O, no clock; a
limit an observer does not know is None in `InvariantLimits` and not judged.

RULES (numbered as `Rule` and the checks cite them):
1. LIMITS (`check_limits` over `count_in_flight`): a. partitions with a step in flight <= P;
   b. steps moving leadership <= L; c. steps adding to or dropping from one broker <= B; d. a
   step started adds and drops at most R replicas (an offline out-of-sync drop is free), only a
   step restoring min ISR may add more, up to the deficit. "In flight" is what the observer
   knows: our steps (`moving_of_steps`) or Kafka's reassignments (`moving_shown_by_kafka`: one
   moves leadership when its target's first replica is not the leader).
2. MIN ISR: a. a step started has |TR| >= M; b. a step that completed has |ISR ∩ TR| >= M (one
   Kafka reverted on a cancel did not complete); c. seen from outside, no partition is under M
   while reassigning with no replica offline (under M because of a step, not a failure).
3. TARGETS: a step adds replicas only to eligible brokers (alive, not draining, an online dir
   when dirs are known) and keeps no replica Kafka lists offline.
4. ONE STEP: a. one decision starts at most one step per partition, and none on a partition
   Kafka shows reassigning; b. Kafka reassigns no partition without a step of ours in flight
   (where every reassignment is ours); c. between two samples too close for a step to complete
   and the next to start, the target (as a set) of a partition moving in both is unchanged
   (Kafka keeps one reassignment per partition, so a second step shows as a changed target).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import Collection, Iterable, Mapping, Sequence

from planning.model import Cluster, TopicPartition
from planning.movement.batches import Limits, PlannedStep, count_replica_drops
from planning.movement.partition_steps import Step
from planning.movement.reassignment import Reassignment, ReassignmentState


class Rule(str, Enum):
    """The rule a violation breaks (numbered as in the module docstring)."""

    LIMITS = "limits"
    MIN_ISR = "min ISR"
    TARGETS = "targets"
    ONE_STEP = "one step"


@dataclass(frozen=True)
class Violation:
    """One broken rule; `message` names the partition or the limit, with the numbers."""

    rule: Rule
    message: str
    tp: TopicPartition | None = None  # the partition, for the per-partition rules

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class InvariantLimits:
    """The movement limits an observer judges against; None: it does not know that limit (the
    demo monitor knows P and L only), and that limit is not judged."""

    max_partition_movements: int | None = None  # P
    max_leader_movements: int | None = None  # L
    max_movements_per_broker: int | None = None  # B
    max_replica_movements: int | None = None  # R

    @classmethod
    def of(cls, limits: Limits) -> "InvariantLimits":
        return cls(limits.max_partition_movements, limits.max_leader_movements,
                   limits.max_movements_per_broker, limits.max_replica_movements)


@dataclass(frozen=True)
class MovingPartition:
    """A partition with a step in flight, as far as the limits are concerned.

    leader_movement: the step moves leadership (counts against L).
    moved_brokers: the brokers it adds a replica to or drops one from (each counts against B).
    """

    tp: TopicPartition
    leader_movement: bool = False
    moved_brokers: frozenset[int] = frozenset()


@dataclass(frozen=True)
class InFlightCounts:
    """What is in flight at one moment, per limit (the figures peaks are taken from)."""

    partitions: int = 0
    leader_movements: int = 0
    busiest_broker: int = 0  # the most steps in flight moving a replica to or from one broker


@dataclass(frozen=True)
class PartitionSample:
    """One partition at one moment as Kafka shows it from outside (the Admin API's partition
    metadata and its list of reassignments in progress).

    replicas: Kafka's replica list; while reassigning, the removing replicas and the target.
    isr, leader: from the partition's metadata; leader None when it has none.
    adding, removing: the reassignment's adding / removing replicas.
    offline: replicas that cannot be in sync now (a fenced or dead broker, an offline dir).
    min_isr: the topic's `min.insync.replicas`.
    reassigning: Kafka lists a reassignment in progress for the partition.
    described: the metadata was known at that moment (it may lag the list of reassignments);
        a partition not described counts as moving, and is judged on nothing else.
    """

    tp: TopicPartition
    replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()
    leader: int | None = None
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    offline: tuple[int, ...] = ()
    min_isr: int = 1
    reassigning: bool = False
    described: bool = True

    @property
    def target(self) -> tuple[int, ...]:
        """Where Kafka is moving the partition: its replicas without the removing ones."""
        return tuple(b for b in self.replicas if b not in self.removing)


# -- who is in flight ------------------------------------------------------------------------


def moving_of_steps(steps: Mapping[TopicPartition, Step]) -> tuple[MovingPartition, ...]:
    """The controller's steps in flight (rule 1: leadership as `Step.leader_movement` says)."""
    return tuple(MovingPartition(tp, s.leader_movement, s.moved_brokers) for tp, s in steps.items())


def steps_in_flight(records: Mapping[TopicPartition, Reassignment]) -> dict[TopicPartition, Step]:
    """The step in flight of every reassignment record that has one."""
    return {tp: r.in_flight.step for tp, r in records.items() if r.in_flight is not None}


def moving_shown_by_kafka(samples: Iterable[PartitionSample]) -> tuple[MovingPartition, ...]:
    """Kafka's reassignments in progress (rule 1): one moves leadership when the partition is
    described and its target's first replica is not the leader."""
    return tuple(
        MovingPartition(
            s.tp,
            s.described and bool(s.target) and s.target[0] != s.leader,
            frozenset(s.adding) | frozenset(s.removing),
        )
        for s in samples
        if s.reassigning
    )


def count_in_flight(moving: Iterable[MovingPartition]) -> InFlightCounts:
    """What is in flight, per limit. Example: Kafka shows orders-0 moving to (2, 3, 4) led by 1,
    orders-1 to (3, 1, 4) led by 2 and orders-2 to (3, 1, 4) led by 3 → 3 partitions, 2 leader
    movements: with P = 2, L = 1, "3 partitions moving > P = 2" and "2 leader movements > L = 1"."""
    partitions = leaders = 0
    per_broker: Counter = Counter()
    for m in moving:
        partitions += 1
        leaders += m.leader_movement
        per_broker.update(m.moved_brokers)
    return InFlightCounts(partitions, leaders, max(per_broker.values(), default=0))


# -- the checks ------------------------------------------------------------------------------


def check_limits(counts: InFlightCounts, limits: InvariantLimits) -> tuple[Violation, ...]:
    """Rules 1a-c: what is in flight at one moment against P, L and B."""
    found = []
    p, l, b = limits.max_partition_movements, limits.max_leader_movements, limits.max_movements_per_broker
    if p is not None and counts.partitions > p:
        found.append(Violation(Rule.LIMITS, f"{counts.partitions} partitions moving > P = {p}"))
    if l is not None and counts.leader_movements > l:
        found.append(Violation(Rule.LIMITS, f"{counts.leader_movements} leader movements > L = {l}"))
    if b is not None and counts.busiest_broker > b:
        found.append(Violation(Rule.LIMITS, f"{counts.busiest_broker} movements on one broker > B = {b}"))
    return tuple(found)


def check_started(started: Sequence[PlannedStep], cluster: Cluster, limits: InvariantLimits) -> tuple[Violation, ...]:
    """Rules 1d, 2a, 3 and 4a for the steps one decision starts. `cluster` is the view they start
    from: the partitions as Kafka shows them before the steps are submitted, the brokers as the
    controller knows them (draining is its knowledge, not Kafka's)."""
    found: list[Violation] = []
    seen: set[TopicPartition] = set()
    r = limits.max_replica_movements
    for planned in started:
        tp, step = planned.tp, planned.step
        if tp in seen:
            found.append(Violation(Rule.ONE_STEP, f"{tp}: two steps started by one decision", tp))
        seen.add(tp)
        p = cluster.partition(tp)
        if p is not None and p.reassigning:
            found.append(Violation(
                Rule.ONE_STEP, f"{tp}: a step to {list(step.target)} while Kafka reassigns it "
                               f"(adding {list(p.adding)}, removing {list(p.removing)})", tp))
        min_isr = cluster.min_isr(tp.topic)
        if len(step.target) < min_isr:
            found.append(Violation(
                Rule.MIN_ISR, f"{tp}: step to {list(step.target)} leaves {len(step.target)} replicas, "
                              f"fewer than min ISR {min_isr}", tp))
        for b in step.adding:
            why = _ineligible(cluster, b)
            if why is not None:
                found.append(Violation(Rule.TARGETS, f"{tp}: replica targeted to broker {b}, which is {why}", tp))
        if p is None:
            continue
        for b in step.target:
            if b not in step.adding and b in p.offline_replicas:
                found.append(Violation(Rule.TARGETS, f"{tp}: step keeps the offline replica on broker {b}", tp))
        if r is not None:
            deficit = max(0, min_isr - len(set(p.isr) & set(p.replicas)))
            drops = count_replica_drops(step, p, cluster)
            if drops > r or len(step.adding) > max(r, deficit):
                found.append(Violation(
                    Rule.LIMITS, f"{tp}: step to {list(step.target)} adds {len(step.adding)} and drops "
                                 f"{drops} replicas > R = {r} (min ISR deficit {deficit})", tp))
    return tuple(found)


def check_completed(
    before: Mapping[TopicPartition, Reassignment],
    after: Mapping[TopicPartition, Reassignment],
    cluster: Cluster,
) -> tuple[Violation, ...]:
    """Rule 2b: every step that ended between the records `before` and `after` a decision, judged
    on the view the decision saw."""
    found = []
    for tp, old in before.items():
        new = after.get(tp)
        if old.in_flight is None or new is None or new.steps_done <= old.steps_done:
            continue
        p = cluster.partition(tp)
        if p is None:
            continue
        target = old.in_flight.step.target
        if old.state is ReassignmentState.CANCELLING and set(p.replicas) != set(target):
            continue  # the cancel ended this step in Kafka: it never reached its target
        min_isr = cluster.min_isr(tp.topic)
        in_sync = len(set(p.isr) & set(target))
        if in_sync < min_isr:
            found.append(Violation(
                Rule.MIN_ISR, f"{tp}: step to {list(target)} completed with {in_sync} in sync, "
                              f"fewer than min ISR {min_isr}", tp))
    return tuple(found)


def check_min_isr_while_reassigning(samples: Iterable[PartitionSample]) -> tuple[Violation, ...]:
    """Rule 2c, as Kafka shows it from outside."""
    return tuple(
        Violation(Rule.MIN_ISR, f"{s.tp} under min ISR ({len(s.isr)} < {s.min_isr}) while reassigning, "
                                "every replica live", s.tp)
        for s in samples
        if s.reassigning and s.described and len(s.isr) < s.min_isr and not s.offline
    )


def check_kafka_moves_are_ours(
    kafka_moving: Collection[TopicPartition], ours: Collection[TopicPartition]
) -> tuple[Violation, ...]:
    """Rule 4b: Kafka reassigns nothing we have no step in flight for."""
    stray = sorted(set(kafka_moving) - set(ours))
    if not stray:
        return ()
    return (Violation(Rule.ONE_STEP, f"Kafka moves {[str(tp) for tp in stray]} with no step in flight"),)


def check_targets_unchanged(
    before: Mapping[TopicPartition, Collection[int]], after: Mapping[TopicPartition, Collection[int]]
) -> tuple[Violation, ...]:
    """Rule 4c: the targets of the partitions moving in two close samples, `before` then `after`.
    The caller judges only pairs close enough that no step can have completed in between."""
    found = []
    for tp, target in sorted(after.items()):
        previous = before.get(tp)
        if previous is not None and set(previous) != set(target):
            found.append(Violation(
                Rule.ONE_STEP, f"{tp}: a second step (to {sorted(target)}) while the step to "
                               f"{sorted(previous)} was in flight", tp))
    return tuple(found)


def _ineligible(cluster: Cluster, broker_id: int) -> str | None:
    """Why a new replica may not go to `broker_id`, or None."""
    broker = cluster.broker(broker_id)
    if broker is None:
        return "unknown"
    if broker.eligible:
        return None
    return "dead" if not broker.alive else "draining" if broker.draining else "without an online log dir"


__all__ = [
    "InFlightCounts", "InvariantLimits", "MovingPartition", "PartitionSample", "Rule", "Violation",
    "check_completed", "check_kafka_moves_are_ours", "check_limits", "check_min_isr_while_reassigning",
    "check_started", "check_targets_unchanged", "count_in_flight", "moving_of_steps",
    "moving_shown_by_kafka", "steps_in_flight",
]
