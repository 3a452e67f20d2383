"""The canary the adaptive throttle reads (`planning.movement.throttle_control`): where its
partitions live, and what its latencies say (pure).

LAYOUT (`compute_canary_layout`). The canary topic has one partition led by each eligible broker,
so each broker's produce latency is measured on a partition it leads (acks=all: the latency
includes its followers' fetches, which compete with the movement's copies). A partition's
replicas: its leader first, then `replication - 1` followers on other top-level racks where
there are some (the brokers after the leader in id order, a rack not yet used first), so the
canary keeps the rack rule as every topic does. Partitions are kept where they are whenever they
can be: a partition keeps its leader while that broker is eligible (the lowest partition first
when two claim one broker), and its followers while they are eligible and still spread over
racks. A broker with no partition takes one whose leader is gone (the lowest id first), else a
new one is created (Kafka only adds partitions). A partition with no broker to lead it is idle:
kept, never read. The result names the partitions whose replica list changes (a reassignment of
the canary: small, it moves nothing worth a throttle) and how many partitions the topic needs.

LATENCY (`summarize_latencies`): nearest-rank percentiles (p50, p99) of a window's samples per
broker; a window with fewer than `MIN_SAMPLES` samples gives None (a p99 of five samples is their
maximum, noise).

BASELINE (`update_baseline`): the median of the p99s of the last `BASELINE_WINDOWS` windows in
which nothing moved; a window with a movement in flight never enters it (the baseline is what
the clients see without the product), so the SLO (`throttle_control`, HEALTH) compares like with
like.

READING (`add_canary_window`): the pipeline keeps, per broker, the newest CanarySample the
watcher published (a window's percentiles), the p99s of the `RECENT_WINDOWS - 1` windows before it
(`earlier_p99s`, oldest first: the throttle cuts on a run of hurt windows, not on one, HEALTH
there) and the baseline it feeds; a sample no newer than the one kept changes nothing (a replay
after a crash), and one that follows a gap of more than `STALE_WINDOWS` windows starts the
earlier p99s afresh (they are no longer the windows just before). Whether the window is idle is
the caller's to say (nothing moved). `compute_fresh_reading` forgets a reading older than `STALE_WINDOWS`
windows (its p99 and its probes' errors alike).

Pure: values in, fresh values out; ties by ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping, Sequence

from planning.model import Broker

MIN_SAMPLES = 20
BASELINE_WINDOWS = 10
RECENT_WINDOWS = 3  # the newest window and the ones before it that a reading keeps (READING)


@dataclass(frozen=True)
class CanaryLayout:
    assignment: Mapping[int, tuple[int, ...]]  # every partition, the new ones included
    changed: Mapping[int, tuple[int, ...]]  # existing partitions whose replica list changes
    partitions: int  # how many the topic needs (at least as many as it has)
    led_by: Mapping[int, int]  # eligible broker -> the partition it leads


def _top_rack(broker: Broker) -> str:
    rack = broker.rack if broker.rack is not None else f"broker-{broker.id}"
    return rack.strip("/").split("/")[0]


def _followers(leader: int, ids: Sequence[int], racks: Mapping[int, str], count: int,
               keep: Sequence[int] = ()) -> tuple[int, ...]:
    """`count` followers of `leader`: the eligible ones of `keep` first, each while it adds a
    top-level rack or every rack is used already; then the brokers after the leader in id order,
    a rack not yet used first."""
    every_rack = set(racks.values())
    chosen: list[int] = []
    used = {racks[leader]}
    for b in keep:
        if len(chosen) < count and b != leader and b in racks and b not in chosen \
                and (racks[b] not in used or used >= every_rack):
            chosen.append(b)
            used.add(racks[b])
    start = ids.index(leader)
    ring = [ids[(start + k) % len(ids)] for k in range(1, len(ids))]
    for fresh_rack_only in (True, False):
        for b in ring:
            if len(chosen) == count:
                break
            if b in chosen or (fresh_rack_only and racks[b] in used):
                continue
            chosen.append(b)
            used.add(racks[b])
    return tuple(chosen)


def compute_canary_layout(brokers: Iterable[Broker], current: Mapping[int, Sequence[int]],
                          replication: int) -> CanaryLayout:
    """The canary's partitions for `brokers` given the `current` assignment (module LAYOUT)."""
    eligible = sorted((b for b in brokers if b.eligible), key=lambda b: b.id)
    ids = [b.id for b in eligible]
    racks = {b.id: _top_rack(b) for b in eligible}
    count = max(0, min(replication, len(ids)) - 1)
    partitions = len(current)
    led_by: dict[int, int] = {}
    for partition in sorted(current):
        replicas = current[partition]
        if replicas and replicas[0] in racks and replicas[0] not in led_by:
            led_by[replicas[0]] = partition
    orphans = [p for p in sorted(current) if p not in led_by.values()]
    for b in ids:
        if b not in led_by:
            if orphans:
                led_by[b] = orphans.pop(0)
            else:
                led_by[b] = partitions
                partitions += 1
    assignment: dict[int, tuple[int, ...]] = {p: tuple(r) for p, r in current.items()}
    changed: dict[int, tuple[int, ...]] = {}
    for b, partition in sorted(led_by.items()):
        old = tuple(current.get(partition, ()))
        replicas = (b,) + _followers(b, ids, racks, count, old[1:])
        assignment[partition] = replicas
        if partition in current and replicas != old:
            changed[partition] = replicas
    return CanaryLayout(MappingProxyType(assignment), MappingProxyType(changed), partitions,
                        MappingProxyType(led_by))


@dataclass(frozen=True)
class LatencySummary:
    samples: int
    p50_ms: float | None
    p99_ms: float | None


def nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank `q` quantile of sorted, non-empty `ordered` (the canary's percentiles; the
    benchmarks use it too)."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def summarize_latencies(samples: Iterable[tuple[int, float]]) -> Mapping[int, LatencySummary]:
    """Per broker, the window's p50 and p99 (module LATENCY)."""
    by_broker: dict[int, list[float]] = {}
    for broker, latency_ms in samples:
        by_broker.setdefault(broker, []).append(latency_ms)
    summaries = {}
    for broker, values in sorted(by_broker.items()):
        values.sort()
        if len(values) < MIN_SAMPLES:
            summaries[broker] = LatencySummary(len(values), None, None)
        else:
            summaries[broker] = LatencySummary(len(values), nearest_rank(values, 0.50), nearest_rank(values, 0.99))
    return MappingProxyType(summaries)


def update_baseline(idle_p99s: tuple[float, ...], window_p99: float | None,
                    moving: bool) -> tuple[tuple[float, ...], float | None]:
    """(the idle windows' p99s kept, the baseline) after one window (module BASELINE)."""
    if not moving and window_p99 is not None:
        idle_p99s = (idle_p99s + (window_p99,))[-BASELINE_WINDOWS:]
    if not idle_p99s:
        return idle_p99s, None
    ordered = sorted(idle_p99s)
    middle = len(ordered) // 2
    baseline = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return idle_p99s, baseline


STALE_WINDOWS = 3


@dataclass(frozen=True)
class CanaryReading:
    """What the pipeline knows of one broker's canary (module READING): its newest window, as
    the watcher summarized it, and the baseline of the windows in which nothing moved."""

    at_ms: int  # the end of the newest window (event time)
    window_ms: int
    partition: int
    samples: int
    errors: int
    p50_ms: float | None
    p99_ms: float | None
    end_to_end_p99_ms: float | None
    idle_p99s: tuple[float, ...] = ()
    baseline_ms: float | None = None
    earlier_p99s: tuple[float | None, ...] = ()  # the windows just before the newest, oldest first


def _latency(value: object) -> float | None:
    if value is None:
        return None
    number = float(value)  # type: ignore[arg-type]
    if not 0 <= number < 86_400_000:  # also refuses NaN: a day is no latency, it is a broken clock
        raise ValueError(f"a latency of {value!r} ms")
    return number


def add_canary_window(previous: CanaryReading | None, sample: Mapping[str, object], moving: bool) -> CanaryReading:
    """`previous` after one CanarySample (module READING); `previous` itself for a window not
    newer than the one it holds (a replay). Raises ValueError for a sample that cannot be one."""
    at_ms, window_ms = int(sample["event_time"]), int(sample["window_ms"])  # type: ignore[call-overload]
    samples, errors = int(sample["samples"]), int(sample.get("errors") or 0)  # type: ignore[call-overload]
    if window_ms <= 0 or samples < 0 or errors < 0:
        raise ValueError(f"a window of {window_ms} ms with {samples} samples and {errors} errors")
    p50, p99 = _latency(sample.get("produce_p50_ms")), _latency(sample.get("produce_p99_ms"))
    end_to_end = _latency(sample.get("end_to_end_p99_ms"))
    if previous is not None and at_ms <= previous.at_ms:
        return previous
    idle, baseline = update_baseline(previous.idle_p99s if previous is not None else (), p99, moving)
    earlier: tuple[float | None, ...] = ()
    if previous is not None and at_ms - previous.at_ms <= STALE_WINDOWS * window_ms:
        earlier = (previous.earlier_p99s + (previous.p99_ms,))[-(RECENT_WINDOWS - 1):]
    return CanaryReading(at_ms, window_ms, int(sample["partition"]), samples, errors,  # type: ignore[call-overload]
                         p50, p99, end_to_end, idle, baseline, earlier)


def compute_fresh_reading(reading: CanaryReading | None, now_ms: int) -> CanaryReading | None:
    """The reading while it is fresh (its window ended less than `STALE_WINDOWS` windows before
    `now_ms`), else None: a canary that stopped reporting says nothing."""
    if reading is None or now_ms - reading.at_ms > STALE_WINDOWS * reading.window_ms:
        return None
    return reading

