"""The adaptive throttle: per broker, the replication rate and the moves in flight that the
cluster's clients bear, found by additive increase and multiplicative decrease (pure).

SIGNALS, per broker, as the shell observes them with no agent on the brokers (`BrokerSignal`):
the produce latency of the canary partition the broker leads (p99 over the last window, and the
baseline measured before the movement began), whether some partition outside the moving ones
lost a replica from its ISR on the broker in the window, and whether the movement's copies into
or out of the broker ran at the rate it was allowed (`saturated`: the throttle binds; raising a
rate nobody uses proves nothing).

HEALTH (`compute_health`): a broker is **hurt** when its canary p99 is above the SLO, that is
above `slo_factor` x its baseline or above `slo_ceiling_ms`, in the newest window and in at least
`HURT_WINDOWS - 1` of the windows just before it (`earlier_p99s`: of the last three, two), when
more than 1 % of the window's
canary probes failed or timed out (a probe times out after a whole window, so its latency is
above any SLO, and then so is the window's true p99, whatever the probes that came back say;
a broker too slow to answer any probe would otherwise be unknown and held), or when an ISR
outside the moves shrank on it; **healthy** when its p99 is known and no higher than the
raise line, `raise_share` (default 0.75) of the way from its baseline to its SLO, in the newest
window and in most of the windows the reading keeps (of the last three, two), and no such ISR
shrank; **near** when its p99 is between the raise line and the SLO (within it, no room to grow),
above the SLO in the newest window alone (held: not raised, not yet cut), or back under the line
for one window after a run above it (most of the last three above: a load the copies cause
comes in runs; in the benchmark a broker near its SLO in two windows, then one quiet window,
was raised from 25 to 30 MB/s and the next two windows were over the SLO, the clients' p99 at
173 ms; every window of the three under the line held the rate 1.6x as long: with a tight SLO
the canary's own noise seldom gives three); **unknown**
otherwise (no canary sample, or no baseline yet). One window over the SLO is not enough to cut:
a window's p99 of some hundred probes is its second slowest probe, so one stall of the machine
(a writeback burst, a deletion's discards) puts a window over the SLO whatever the rate; on the
benchmark's host broker 1's canary was over its SLO in 15 of 54 windows at 1-6 MB/s, each a
halving that took some 40 s to climb back, while the clients' p99 over the movement was within
it. A load the copies cause lasts: its windows come in runs. The band between the line and the
SLO is where the rate settles: a rate that only grows while the clients have room, and is cut
only once they are hurt, stops short of the SLO instead of crossing it at every hold (with a
step of a tenth of the span and no band, the benchmark's rate was a sawtooth across the SLO,
each crossing a hold window of hurt clients).

RULE (`decide_throttles`), once per decision, for each broker the movement touches. A broker
the movement starts to touch begins at `initial` with **one** move in flight: moves exist to fill
the rate, and each one more is a burst of its own for the clients, since every fetch of a copy
carries up to Kafka's replica.fetch.max.bytes (1 MB) per moving partition whatever the rate's
average. In the benchmark, with four moves, broker 1's canary p99 sat at 1.7x its baseline at
2 MB/s as at 20 (over its SLO in 9 of 25 windows, each cut changing nothing); with one, it stayed
within 1.7x at 10-40 MB/s and the movement ran in 0.73x the time of static 20 MB/s. The moves
grow only when the copies do not fill the rate (below).
- hurt: the rate is multiplied by `decrease` (default 0.5), at most once per `hold_ms` (the
  effect of a change needs a window to show); the moves in flight are halved (at least 1) only
  once the rate is at the floor. The rate bounds the bytes however many moves share it, and a
  change of the moves is a change of its own for the clients: a move dropped and added back at
  the next raise is a partition's copy started again (the benchmark's hurt windows came after
  such changes, when a cut halved both). The rate cut is from what the copies use when that is
  known and lower (`copy_rate`): halving a rate of 200 MB/s the copies run at 10 MB/s of slowed
  nobody for four holds. A hurt broker already at the floor with one move has nothing left to
  lower: the decision is noted all the same (its `changed_ms` and reason), so the ISR shrink it
  answered is not counted again at every later decision (it kept the broker hurt at the floor
  after the load was gone);
- healthy and saturated: the rate is to grow by `increase` bytes/s, at most by half itself
  (`compute_raise`), at most once per `hold_ms`, reached by a ramp (RAMP); the moves stay (the
  copies fill the rate);
- healthy, not saturated, with every move it allows in flight (`moves_in_flight`): the moves
  grow by 1, the rate stays: the copies do not fill the rate with the moves they have (small
  partitions, slow fetches), and neither would ever grow again, the clients long fine (found by
  the closed-loop property tests: 22 MB/s and 3 moves for good, the copies at 15 MB/s);
- otherwise (near the SLO, healthy but not using its rate, or unknown): held. An unknown
  broker is never raised: no signal is not a green light.
Every rate stays within [`floor`, the ceiling], the ceiling being `maximum`, or the schedule's
rate for the hour when one is given (`Schedule`); a rate above a lowered ceiling comes down to
it at once, whatever the hold. The floor is above zero, so a movement is never starved: a hurt
broker copies at the floor, and its moves never drop below 1. A broker the movement no longer
touches is forgotten (its next movement starts from `initial`).

RAMP (`compute_ramp`): Kafka measures a throttle over its last eleven seconds
(replication.quota.window.num x window.size.seconds, `QUOTA_WINDOW_SECONDS`), so a rate raised
at once by d lets the copies take d x 11 s of data at full speed: in the benchmark, raises of 5
MB/s (10 to 15, 15 to 20) put the clients' p99 at 57-107 ms in the next window, against 9 ms
over a whole movement at a static 20 MB/s, and the cuts they drew cost the movement minutes.
So a raise sets a `target` and the rate climbs to it from where it was (`ramp_from`) by an
eleventh of that a second (`RAMP_STEP_MS`), the first step at once: each step lets through about
one second's worth at the rate, what the quota lets through every second anyway as its oldest
second ages out; +50 % takes five or six steps. The steps follow the time since the decision,
not the decisions, so a pipeline deciding every second climbs in steps and one deciding every ten
seconds in one. Each step is a change the executor applies (a command), but only the raise
is announced (its change carries the `target`, the alert says where the ramp goes) and a later
step is a `ramp_step`, which the shell commands and does not announce: five or six alerts per
raise said nothing the first did not. The raise's hold and its measure of the copies
(`changed_ms`) run from the decision, and no other raise is decided while it climbs. The ramp
goes on while the broker stays healthy and ends, where it is, at the first decision that finds
it otherwise (or the ceiling of the hour below its target); a cut ends it too. A ramp ending
short of its target is a change of its own with the rate unchanged (nothing to command) that
says where the rate stays and why, so that every rate Kafka holds was announced.

SATURATION (`compute_copy_rates`): a broker's copies run at the bytes the receiving dirs hold of
each step in flight that adds a replica, summed per broker on the receiving side (the follower
throttle) and on the partition's leader (the leader throttle, which serves the copy), each over
the time since the broker's last change when its step began before it (what the step held
through the broker then, `BrokerThrottle.copied`, kept by the shell at each change, taken off:
`compute_copied_through`), else since the executor applied it; a broker runs at its rate when
that sum reaches `SATURATED` of it. A step copying to one broker is measured from the last change
of either of its ends: the copies run at the lower of the two rates, so while one end held them
down the other's average since its own change stayed low long after (the benchmark: broker 3 cut
to 4.2 MB/s while broker 1, the source, was at 1.5-5 MB/s; broker 1 then rose to 7.5 MB/s and
broker 3's copies ran at its 4.2 for 120 s before their average since its cut reached 80 % of it:
held at 4.2 MB/s for 175 s in all, the movement 2.7x static 20 MB/s's time). An average since
the step began kept the minutes before a change in it: one 500 MB partition copied at 1-2 MB/s is one step for minutes, and after a raise
from 1.5 to 2.2 MB/s its average stayed under 80 % of the new rate, so the benchmark's broker
sat at 2 MB/s for 500 s with its clients fine and was never raised again.

INVARIANTS: floor <= rate <= ceiling and 1 <= moves <= max_moves for every broker after every
decision; the same inputs give the same outputs (no clock: `now_ms` is the decision's event time;
no randomness); every change carries its reason, which the shell turns into a command (when the
rate or moves changed: `ThrottleChange.commanded`) and an INFO alert (but for a `ramp_step`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Iterable, Mapping

from planning.model import Cluster, TopicPartition
from planning.movement.eta import compute_copied_bytes
from planning.movement.reassignment import Reassignment
from schemas.errors import InvalidConfigError

HURT, HEALTHY, NEAR, UNKNOWN = "hurt", "healthy", "near", "unknown"
SATURATED = 0.8  # of the rate: the copies use it (module SATURATION)
HURT_WINDOWS = 2  # windows over the SLO, of the newest and its earlier ones, that make a broker hurt (HEALTH)
RAISE_OF_RATE = 0.5  # a raise adds at most this share of the rate (module RULE)
QUOTA_WINDOW_SECONDS = 11  # Kafka's replication.quota.window.num x window.size.seconds, by default (RAMP)
RAMP_STEP_MS = 1_000  # a ramp steps once per this many ms since its raise was decided (RAMP)


@dataclass(frozen=True)
class Schedule:
    """A ceiling per hour of the day (0-23; hours not given keep the operator's maximum)."""

    rates: Mapping[int, int] = field(default_factory=dict)

    def ceiling(self, hour: int, maximum: int) -> int:
        return min(maximum, self.rates.get(hour, maximum))


@dataclass(frozen=True)
class ThrottleBounds:
    """The operator's bounds and the controller's gains."""

    floor: int  # bytes/s, > 0: never starve a movement
    maximum: int  # bytes/s
    initial: int  # bytes/s: where a broker the movement starts to touch begins
    increase: int  # bytes/s added on a healthy, saturated window
    max_moves: int  # moves in flight per broker: B, the ceiling
    decrease: float = 0.5
    slo_factor: float = 2.0
    slo_ceiling_ms: float = 500.0
    raise_share: float = 0.75  # of the way from the baseline to the SLO: the raise line (HEALTH)
    hold_ms: int = 30_000
    schedule: Schedule = field(default_factory=Schedule)

    def __post_init__(self) -> None:
        if not 0 < self.floor <= self.initial <= self.maximum:
            raise InvalidConfigError(
                f"throttle bounds need 0 < throttle.min <= initial <= throttle.max, got {self.floor}, "
                f"{self.initial}, {self.maximum}; set throttle.min below throttle.max")
        if (self.increase <= 0 or self.max_moves < 1 or not 0 < self.decrease < 1 or self.slo_factor < 1
                or not 0 < self.raise_share <= 1):
            raise InvalidConfigError(
                "throttle gains need an increase > 0, max moves >= 1, a decrease in (0, 1), an SLO factor >= 1 "
                f"and a raise share in (0, 1]; got {self.increase}, {self.max_moves}, {self.decrease}, "
                f"{self.slo_factor}, {self.raise_share}")


@dataclass(frozen=True)
class BrokerSignal:
    broker: int
    p99_ms: float | None  # the canary's produce p99 over the last window; None: no sample
    baseline_ms: float | None  # its p99 before the movement began; None: not measured yet
    isr_shrinks_outside: int = 0  # partitions not moving that lost an in-sync replica here
    saturated: bool = False  # the movement's copies here ran at the allowed rate
    probe_errors: int = 0  # the window's canary probes that failed or timed out
    probe_attempts: int = 0  # the window's probes: answered (its samples) and failed
    copy_rate: float | None = None  # bytes/s the movement's copies run at here; None: not known
    moves_in_flight: int = 0  # the movement's steps in flight that move a replica to or from here
    earlier_p99s: tuple[float | None, ...] = ()  # the canary's p99s of the windows just before, oldest first


@dataclass(frozen=True)
class BrokerThrottle:
    rate: int  # bytes/s
    moves: int  # moves in flight allowed
    changed_ms: int  # when rate or moves last changed (event time)
    reason: str
    # What each step in flight at `changed_ms` had copied through the broker then (SATURATION).
    copied: Mapping[TopicPartition, int] = field(default_factory=dict)
    target: int = 0  # bytes/s a raise is ramping the rate to, above it; 0: no ramp (RAMP)
    ramp_from: int = 0  # bytes/s the rate was at when the raise was decided (at `changed_ms`); 0: no ramp


@dataclass(frozen=True)
class ThrottleChange:
    broker: int
    rate_before: int | None
    rate: int
    moves_before: int | None
    moves: int
    reason: str
    target: int = 0  # a raise: the rate its ramp climbs to, above `rate` (RAMP); 0 otherwise
    ramp_step: bool = False  # a later step of an announced ramp: commanded, not announced (RAMP)

    @property
    def commanded(self) -> bool:
        """Whether the executor has something to set: the rate or the moves changed."""
        return (self.rate, self.moves) != (self.rate_before, self.moves_before)


@dataclass(frozen=True)
class ThrottleDecision:
    throttles: Mapping[int, BrokerThrottle]
    changes: tuple[ThrottleChange, ...]


def compute_health(signal: BrokerSignal, bounds: ThrottleBounds) -> tuple[str, str]:
    """(HURT | HEALTHY | NEAR | UNKNOWN, why) for one broker (module HEALTH)."""
    if signal.isr_shrinks_outside > 0:
        return HURT, f"{signal.isr_shrinks_outside} partitions outside the movement lost an in-sync replica"
    if signal.probe_errors * 100 > signal.probe_attempts > 0:
        return HURT, f"{signal.probe_errors} of {signal.probe_attempts} canary probes failed or timed out"
    if signal.p99_ms is None or signal.baseline_ms is None:
        return UNKNOWN, "no canary latency yet" if signal.p99_ms is None else "no baseline yet"
    slo = min(bounds.slo_factor * signal.baseline_ms, bounds.slo_ceiling_ms)
    if signal.p99_ms > slo:
        over = [p99 for p99 in signal.earlier_p99s if p99 is not None and p99 > slo]
        if 1 + len(over) >= HURT_WINDOWS:
            before = f" (before: {', '.join(f'{p99:.0f}' for p99 in over)} ms)" if over else ""
            return HURT, f"canary p99 {signal.p99_ms:.0f} ms over its SLO {slo:.0f} ms{before}"
        return NEAR, (f"canary p99 {signal.p99_ms:.0f} ms over its SLO {slo:.0f} ms in one window of the last "
                      f"{1 + len(signal.earlier_p99s)}: held until {HURT_WINDOWS} are")
    line = min(slo, signal.baseline_ms + bounds.raise_share * (slo - signal.baseline_ms))
    if signal.p99_ms > line:
        return NEAR, f"canary p99 {signal.p99_ms:.1f} ms near its SLO {slo:.1f} ms (above {line:.1f} ms)"
    kept = [p99 for p99 in signal.earlier_p99s if p99 is not None]
    above = [p99 for p99 in kept if p99 > line]
    if 2 * len(above) >= 1 + len(kept):  # the newest is under: most of the windows must be too
        return NEAR, (f"canary p99 {signal.p99_ms:.0f} ms within its SLO {slo:.0f} ms, but above {line:.1f} ms "
                      f"in {len(above)} of the {len(kept)} windows before it ({', '.join(f'{p:.0f}' for p in above)} ms)")
    return HEALTHY, f"canary p99 {signal.p99_ms:.0f} ms within its SLO {slo:.0f} ms"


def decide_throttles(previous: Mapping[int, BrokerThrottle], touched: Iterable[int],
                     signals: Mapping[int, BrokerSignal], bounds: ThrottleBounds, now_ms: int,
                     hour: int = 0) -> ThrottleDecision:
    """The rates and moves in flight of the brokers the movement touches (module RULE)."""
    ceiling = max(bounds.floor, bounds.schedule.ceiling(hour, bounds.maximum))
    throttles: dict[int, BrokerThrottle] = {}
    changes: list[ThrottleChange] = []
    for broker in sorted(set(touched)):
        before = previous.get(broker)
        if before is None:
            start = BrokerThrottle(min(bounds.initial, ceiling), 1, now_ms, "movement began")
            throttles[broker] = start
            changes.append(ThrottleChange(broker, None, start.rate, None, start.moves, start.reason))
            continue
        health, why = compute_health(signals.get(broker, BrokerSignal(broker, None, None)), bounds)
        rate, moves, reason = before.rate, before.moves, before.reason
        settled = now_ms - before.changed_ms >= bounds.hold_ms
        target = min(before.target, ceiling)
        if target > rate and before.ramp_from > 0 and health == HEALTHY:
            # RAMP: the raise decided at `changed_ms` goes on; its hold and its measure of the
            # copies still run from that decision.
            stepped = compute_ramp(before.ramp_from, target, now_ms - before.changed_ms)
            if stepped > rate and stepped == target < before.target:  # short of its target: said (RAMP)
                reason = _ramp_ended(before.target, _ceiling_reason(hour, ceiling, bounds))
                throttles[broker] = replace(before, rate=stepped, target=0, ramp_from=0, reason=reason)
                changes.append(ThrottleChange(broker, rate, stepped, moves, moves, reason))
            elif stepped > rate:
                throttles[broker] = replace(before, rate=stepped, **_ramp_fields(stepped, target, before.ramp_from))
                changes.append(ThrottleChange(broker, rate, stepped, moves, moves, before.reason, ramp_step=True))
            else:
                throttles[broker] = before
            continue
        if health == HURT and settled:
            used = signals[broker].copy_rate
            base = min(rate, int(used)) if used is not None and used > 0 else rate
            cut = max(bounds.floor, int(base * bounds.decrease))
            if cut >= rate:  # at the floor: only the moves are left to lower (RULE)
                moves = max(1, moves // 2)
            rate, reason = cut, why
        elif health == HEALTHY and settled and signals[broker].saturated:
            goal = min(rate + compute_raise(rate, bounds), ceiling)
            if goal > rate:
                start, rate = rate, compute_ramp(rate, goal, 0)
                reason = why + ", copies at the allowed rate" + (
                    f"; ramping to {goal / 1e6:.3g} MB/s" if goal > rate else "")
                throttles[broker] = BrokerThrottle(rate, moves, now_ms, reason, **_ramp_fields(rate, goal, start))
                changes.append(ThrottleChange(broker, before.rate, rate, before.moves, moves, reason,
                                              target=goal if goal > rate else 0))
                continue
        elif health == HEALTHY and settled and signals[broker].moves_in_flight >= moves:
            moves, reason = moves + 1, why + f", every move it allows in flight ({moves})"
        if rate > ceiling:
            reason = _ceiling_reason(hour, ceiling, bounds) if ceiling < bounds.maximum else reason
        rate = min(max(rate, bounds.floor), ceiling)
        moves = min(max(moves, 1), bounds.max_moves)
        if (rate, moves) == (before.rate, before.moves):
            # Hurt with nothing left to lower: noted (RULE), not a change.
            if health == HURT and settled:
                throttles[broker] = BrokerThrottle(rate, moves, now_ms, f"{why}; at the floor with one move")
            elif before.target:
                # A ramp that did not go on ends where it is, and says so (RAMP).
                reason = _ramp_ended(before.target, why if health != HEALTHY else _ceiling_reason(hour, ceiling, bounds))
                throttles[broker] = replace(before, target=0, ramp_from=0, reason=reason)
                changes.append(ThrottleChange(broker, rate, rate, moves, moves, reason))
            else:
                throttles[broker] = before
            continue
        throttles[broker] = BrokerThrottle(rate, moves, now_ms, reason)
        changes.append(ThrottleChange(broker, before.rate, rate, before.moves, moves, reason))
    return ThrottleDecision(MappingProxyType(throttles), tuple(changes))


def _ramp_ended(target: int, why: str) -> str:
    return f"the ramp to {target / 1e6:.3g} MB/s ended here: {why}"


def _ceiling_reason(hour: int, ceiling: int, bounds: ThrottleBounds) -> str:
    return (f"the ceiling for hour {hour} is {ceiling} B/s" if ceiling < bounds.maximum
            else f"the ceiling is {ceiling} B/s (throttle.max)")


def _ramp_fields(rate: int, target: int, start: int) -> dict[str, int]:
    """`BrokerThrottle`'s ramp at `rate`: its target and start while below the target, none once there."""
    return {"target": target, "ramp_from": start} if rate < target else {"target": 0, "ramp_from": 0}


def compute_ramp(start: int, target: int, elapsed_ms: int) -> int:
    """The rate of a ramp from `start` to `target` `elapsed_ms` after its raise was decided
    (module RAMP): one step at once and one more each `RAMP_STEP_MS`, each an eleventh of `start`
    (at least 1 B/s)."""
    steps = 1 + max(0, elapsed_ms) // RAMP_STEP_MS
    return min(target, start + steps * max(1, -(-start // QUOTA_WINDOW_SECONDS)))


def compute_raise(rate: int, bounds: ThrottleBounds) -> int:
    """What a raise adds to `rate` (module RULE): `increase`, at most half the rate (at least 1)."""
    return min(bounds.increase, max(1, int(rate * RAISE_OF_RATE)))


def compute_copied_through(in_flight: Iterable[Reassignment], cluster: Cluster) -> dict[int, dict[TopicPartition, int]]:
    """Per broker, the bytes each step in flight has copied through it so far: into it (the
    copies it receives) or out of it (the copies it serves as the partition's leader)."""
    return _copies(in_flight, cluster)[0]


def _copies(in_flight: Iterable[Reassignment], cluster: Cluster) -> tuple[dict[int, dict[TopicPartition, int]],
                                                                         dict[TopicPartition, tuple[int, int]]]:
    """`compute_copied_through`, and per step that copies to one broker from a leader elsewhere
    its (receiving broker, leader): the bytes through either end are then the same, so either
    end's change starts the measure of both (`compute_copy_rates`). A step that copies to
    several brokers is measured from each broker's own change (the leader's bytes are their sum)."""
    through: dict[int, dict[TopicPartition, int]] = {}
    ends: dict[TopicPartition, tuple[int, int]] = {}
    for record in in_flight:
        partition = cluster.partition(record.tp)
        leader = partition.leader if partition is not None else None
        copies = compute_copied_bytes(record, cluster)
        for broker, copied in copies.items():
            for b in (broker,) if leader is None or leader == broker else (broker, leader):
                held = through.setdefault(b, {})
                held[record.tp] = held.get(record.tp, 0) + copied
        if len(copies) == 1 and leader is not None and leader not in copies:
            ends[record.tp] = (next(iter(copies)), leader)
    return through, ends


def compute_copy_rates(in_flight: Iterable[Reassignment], cluster: Cluster, now_ms: int,
                       throttles: Mapping[int, BrokerThrottle] | None = None) -> dict[int, float]:
    """Bytes per second the movement's copies run at through each broker (module SATURATION),
    since the last change in `throttles` of either end of each step (its receiving broker or its
    leader) where the step began before it."""
    throttles = throttles or {}
    flying = [r for r in in_flight if r.in_flight is not None]
    applied = {r.tp: r.in_flight.applied_at_ms for r in flying}  # type: ignore[union-attr]
    rates: dict[int, float] = {}
    through, ends = _copies(flying, cluster)
    for broker, steps in through.items():
        for tp, copied in steps.items():
            start, base = applied.get(tp), 0
            if start is None:
                continue
            for end in ends.get(tp, (broker,)):
                throttle = throttles.get(end)
                if throttle is not None and throttle.changed_ms > start:
                    start, base = throttle.changed_ms, throttle.copied.get(tp, 0)
            if now_ms <= start:
                continue
            rates[broker] = rates.get(broker, 0.0) + max(0, copied - base) / ((now_ms - start) / 1000)
    return rates


def is_saturated(copy_rate: float, throttle: BrokerThrottle | None) -> bool:
    """Whether a broker's copies use its rate (module SATURATION)."""
    return throttle is not None and copy_rate >= SATURATED * throttle.rate
