"""The policy the handlers decide by: static settings, plus the runtime overrides of SetConfig.

`Policy` holds the reaction and limit settings of `runtime.settings.Settings`, under the same
field names and with no defaults of its own: every default is written once, in `Settings` (two
tables of defaults drift apart), and the shell builds this with
`runtime.settings.compute_policy(settings)`.

Operators change some of them at runtime with a `SetConfig` request, using Kafka-style dotted
names. `DYNAMIC_KEYS` is the one table of those names (the CLI's `config set` / `config get` in
`reassigner.operator.dynamic_config` reads it too): each `DynamicKey` maps a name to its `Policy`
field and to a `ValueKind` that turns text into one canonical text and the typed value:

    integer          decimal text                      "+5" → "5"
    boolean          true or false                     "True" → "true"
    duration         seconds as decimal text           "10m" → "600", "1500ms" → "1.5"
    rate             bytes per second as decimal text  "10MB" → "10000000"
    fraction         decimal text in (0, 1]            "0.40" → "0.4"
    percent          decimal text in (0, 100]          "85%" → "85"
    choice           lower-case symbol                 "Cancel" → "cancel"
    schedule         hours (UTC) to rates              "8-18=20MB, 19=50MB" → "8-18=20000000,19=50000000"

The overrides live in `ControllerState.config` as canonical text; every decision reads the
effective values through `effective_policy` / `effective_limits`.

RULES:
- an override applies from the decision that reads it onwards, never to a step already in
  flight (limits are only consulted when slots are refilled);
- `parse_config_value` refuses an unknown key or a value of the wrong shape with
  `InvalidConfigError` (INVALID_CONFIG), so a stored override always parses;
- parsing is idempotent: the canonical text of a canonical text is itself, so the CLI may
  normalise before publishing and the pipeline parse again;
- a `None` value resets the key to the static setting.
- every key names a `Policy` field some decision reads: a knob that would be accepted and change
  nothing is not offered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Callable, Mapping

from planning.movement.batches import CONFIG_KEYS, Limits
from planning.movement.throttle_control import Schedule, ThrottleBounds
from planning.placement.balance_modes import BALANCE_MODES
from schemas.errors import InvalidConfigError

MODES = ("auto", "approve", "observe")
PAUSED_KEY = "reassignment.paused"
"""The dynamic key `request pause` / `request resume` set (a flag beside `mode`, see `Policy`)."""
STALL_ACTIONS = ("alert", "cancel")
THROTTLE_MODES = ("static", "adaptive")


@dataclass(frozen=True)
class Policy:
    """Reaction settings; field names are those of `Settings`, which has the defaults."""

    mode: str
    broker_add_grace_seconds: float
    broker_failure_grace_seconds: float
    self_healing_max_failed_brokers: int
    self_healing_max_failed_fraction: float
    paused: bool
    proposal_expiry_seconds: float
    max_partition_movements: int
    max_leader_movements: int
    max_replica_movements: int
    max_movements_per_broker: int
    step_stall_timeout_seconds: float
    stall_action: str
    step_retry_max: int
    throttle_bytes_per_sec: int | None
    logdir_throttle_bytes_per_sec: int | None
    throttle_mode: str  # static | adaptive
    throttle_min_bytes_per_sec: int
    throttle_max_bytes_per_sec: int
    throttle_schedule: str  # canonical `HOURS=RATE,...` (`parse_schedule`), "" for none
    throttle_slo_factor: float
    throttle_slo_ceiling_ms: float
    throttle_hold_seconds: float
    logdir_imbalance_threshold: float
    disk_max_usage_percent: float
    disk_high_water_percent: float
    disk_low_water_percent: float
    max_logdir_movements_per_broker: int
    balance_mode: str
    balance_disk_tolerance: float
    balance_replica_tolerance: float
    balance_leader_tolerance: float
    balance_bytes_in_tolerance: float
    balance_network_out_tolerance: float
    balance_topic_spread: float
    balance_disk_budget_bytes: int  # 0: off (`planning.placement.bytes_budget`)
    topics_include: str
    topics_exclude: str | None  # None: Kafka's internal topics and the product's own
    topic_prefix: str

    @property
    def disk_plan_limit_percent(self) -> float:
        """How full a plan may make a dir's volume: the disk limit, and never past the
        low-water mark, where a relief leaves a dir (a plan that filled it further would bring
        back what the relief moved away, and a dir growing on its own would go to and fro)."""
        return min(self.disk_max_usage_percent, self.disk_low_water_percent)


@dataclass(frozen=True)
class ValueKind:
    """How the text of one kind of setting reads: `parse(text)` gives (canonical text, typed
    value) or raises ValueError; `expected` says what would have parsed, for the message."""

    expected: str
    parse: Callable[[str], tuple[str, object]]


# Upper bounds: a value past them is a typo or a forged record, never a wish; without them a
# 400-digit duration overflowed inside the decision and stopped the pipeline for good.
MAX_INTEGER = 1_000_000
MAX_DURATION_SECONDS = 366 * 24 * 3600.0
MAX_RATE = 10**13  # bytes per second (10 TB/s)
MAX_SIZE = 10**16  # bytes (10 PB)


def _integer_kind(minimum: int) -> ValueKind:
    expected = f"an integer from {minimum} to {MAX_INTEGER}"

    def parse(text: str) -> tuple[str, int]:
        if not re.fullmatch(r"[+]?[0-9]{1,7}", text) or not minimum <= int(text) <= MAX_INTEGER:
            raise ValueError(expected)
        return str(int(text)), int(text)
    return ValueKind(expected, parse)


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "": 1.0}


def _parse_duration(text: str) -> tuple[str, float]:
    match = re.fullmatch(r"([0-9]{1,12}(?:\.[0-9]{1,9})?)\s*(ms|s|min|m|h|)", text.lower())
    if not match:
        raise ValueError(DURATION.expected)
    seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    if seconds > MAX_DURATION_SECONDS:
        raise ValueError(DURATION.expected)
    # Milliseconds are the finest unit; the value is read back from the canonical text, so the
    # CLI's parse and the pipeline's give the same number ("700ms" is 0.7, not 0.7000000000000001).
    canonical = f"{seconds:.3f}".rstrip("0").rstrip(".")
    return canonical, float(canonical)


_RATE_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3,
               "kib": 1024, "mib": 1024**2, "gib": 1024**3}


def _parse_amount(text: str, units: Mapping[str, int], minimum: int, maximum: int, kind: str) -> tuple[str, int]:
    """Bytes (or bytes per second) with an optional unit of `units`, within [minimum, maximum]."""
    match = re.fullmatch(r"([0-9]{1,17})\s*([kmgt]i?b|b|)", text.lower())
    if not match or match.group(2) not in units:
        raise ValueError(kind)
    amount = int(match.group(1)) * units[match.group(2)]
    if not minimum <= amount <= maximum:
        raise ValueError(kind)
    return str(amount), amount


def _parse_rate(text: str) -> tuple[str, int]:
    return _parse_amount(text, _RATE_UNITS, 1, MAX_RATE, RATE.expected)


_SIZE_UNITS = {**_RATE_UNITS, "tb": 1000**4, "tib": 1024**4}


def _parse_size(text: str) -> tuple[str, int]:
    return _parse_amount(text.strip(), _SIZE_UNITS, 0, MAX_SIZE, SIZE.expected)


def parse_schedule(text: str) -> tuple[str, Schedule]:
    """`HOURS=RATE` pairs separated by commas (hours of the day, UTC: `8` or `8-18`, inclusive;
    a rate as `throttle.bytes.per.sec` takes it) as (canonical text, `Schedule`); "" is none. An
    hour named twice is refused: which rate would hold is not clear."""
    rates: dict[int, int] = {}
    canonical = []
    for item in (part.strip() for part in text.split(",")) if text.strip() else ():
        match = re.fullmatch(r"([0-9]{1,2})(?:\s*-\s*([0-9]{1,2}))?\s*=\s*(.+)", item)
        if not match:
            raise ValueError(SCHEDULE.expected)
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if not 0 <= first <= last <= 23 or any(hour in rates for hour in range(first, last + 1)):
            raise ValueError(SCHEDULE.expected)
        rate_text, rate = _parse_amount(match.group(3).strip(), _RATE_UNITS, 1, MAX_RATE, SCHEDULE.expected)
        rates.update((hour, rate) for hour in range(first, last + 1))
        canonical.append(f"{first}={rate_text}" if first == last else f"{first}-{last}={rate_text}")
    return ",".join(canonical), Schedule(MappingProxyType(rates))


def _parse_schedule_text(text: str) -> tuple[str, str]:
    """The policy keeps the canonical text (`compute_throttle_bounds` reads it)."""
    canonical = parse_schedule(text)[0]
    return canonical, canonical


def _parse_fraction(text: str) -> tuple[str, float]:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(FRACTION.expected) from None
    if not 0 < value <= 1:  # also refuses NaN
        raise ValueError(FRACTION.expected)
    return _shortest_text(value), value


def _parse_percent(text: str) -> tuple[str, float]:
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise ValueError(PERCENT.expected) from None
    if not 0 < value <= 100:  # also refuses NaN
        raise ValueError(PERCENT.expected)
    return _shortest_text(value), value


def _shortest_text(value: float) -> str:
    """The shortest text that reads back as `value` ("10", "0.4", "10.00001"): `:g` kept six
    digits, so 10.00001 was stored as "10" and a reloaded policy differed from the one applied."""
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def _parse_boolean(text: str) -> tuple[str, bool]:
    if text.lower() not in ("true", "false"):
        raise ValueError(BOOLEAN.expected)
    return text.lower(), text.lower() == "true"


def _choice_kind(choices: tuple[str, ...]) -> ValueKind:
    expected = f"one of {', '.join(choices)}"

    def parse(text: str) -> tuple[str, str]:
        if text.lower() not in choices:
            raise ValueError(expected)
        return text.lower(), text.lower()
    return ValueKind(expected, parse)


MAX_PATTERN_CHARS = 1000


def check_topic_pattern(text: str) -> str:
    """`text` if it is a regular expression of at most MAX_PATTERN_CHARS; else ValueError."""
    if len(text) > MAX_PATTERN_CHARS:
        raise ValueError(f"a regular expression of at most {MAX_PATTERN_CHARS} characters")
    try:
        re.compile(text)
    except re.error as error:
        raise ValueError(f"a regular expression ({error})") from None
    return text


def _parse_pattern(text: str) -> tuple[str, str]:
    try:
        check_topic_pattern(text)
    except ValueError:
        raise ValueError(PATTERN.expected) from None
    return text, text


def compute_excluded_pattern(policy: Policy) -> str:
    """The effective `topics.exclude`: the setting, or Kafka's internal topics and the product's."""
    if policy.topics_exclude is not None:
        return policy.topics_exclude
    return rf"__.*|{re.escape(policy.topic_prefix)}\..*"


def compute_canary_topic(policy: Policy) -> str:
    """The canary's topic (`reassigner.edge.canary`): the watcher keeps its layout, one partition
    led by each live broker, so no plan of the product moves it (not even a drain or a heal:
    the two would undo each other), and a draining broker is drained without it."""
    return f"{policy.topic_prefix}.canary"


def compute_excluded_topics(topic_names, policy: Policy) -> frozenset[str]:
    """The topics the product only heals and drains (never rebalances): a name that does not
    match `topics.include` as a whole, or matches `topics.exclude` as a whole (Java's
    `Pattern.matches`, as Kafka's own topic patterns)."""
    include = re.compile(policy.topics_include)
    exclude = re.compile(compute_excluded_pattern(policy))
    return frozenset(name for name in topic_names
                     if not include.fullmatch(name) or exclude.fullmatch(name))


DURATION = ValueKind("a duration such as 600, 600s, 10m or 1500ms, at most 366 days", _parse_duration)
RATE = ValueKind("bytes per second from 1 to 10 TB, such as 10000000 or 10MB", _parse_rate)
SIZE = ValueKind("bytes from 0 to 10 PB, such as 0, 500GB or 2TiB", _parse_size)
FRACTION = ValueKind("a fraction in (0, 1] such as 0.4", _parse_fraction)
PERCENT = ValueKind("a percentage in (0, 100] such as 85", _parse_percent)
BOOLEAN = ValueKind("true or false", _parse_boolean)
SCHEDULE = ValueKind("HOURS=RATE pairs separated by commas, hours of the day (UTC) 0-23 each named once, "
                     "such as 8-18=20MB,19=50MB; empty for none", _parse_schedule_text)
PATTERN = ValueKind(f"a regular expression over whole topic names, at most {MAX_PATTERN_CHARS} characters, "
                    "such as orders-.* or orders-.*|payments", _parse_pattern)


@dataclass(frozen=True)
class DynamicKey:
    """One setting an operator may change at run time."""

    name: str
    """The Kafka-style dotted name operators write (`config set NAME=VALUE`)."""
    field: str
    """The `Policy` (and `Settings`) field that holds its default and its effective value."""
    kind: ValueKind
    """How its text reads."""
    doc: str
    """One line for `config get`."""


_LIMIT_DOCS = {
    "max_partition_movements": "P: partitions with a step in flight",
    "max_leader_movements": "L: leader-moving steps in flight",
    "max_replica_movements": "R: replicas a step adds (and drops) per partition",
    "max_movements_per_broker": "B: steps in flight touching one broker",
}

# The limit keys are those of `planning.movement.batches`.
DYNAMIC_KEYS: Mapping[str, DynamicKey] = {key.name: key for key in (
    *(DynamicKey(name, field, _integer_kind(1), _LIMIT_DOCS[field]) for name, field in CONFIG_KEYS.items()),
    DynamicKey("step.stall.timeout", "step_stall_timeout_seconds", DURATION,
               "seconds before a step counts as stalled"),
    DynamicKey("stall.action", "stall_action", _choice_kind(STALL_ACTIONS),
               "what a stalled step triggers"),
    DynamicKey("step.retry.max", "step_retry_max", _integer_kind(0),
               "failed steps retried (transient errors) before the partition is given up"),
    DynamicKey("throttle.bytes.per.sec", "throttle_bytes_per_sec", RATE,
               "replication throttle on steps in flight"),
    DynamicKey("throttle.mode", "throttle_mode", _choice_kind(THROTTLE_MODES),
               "static: every step at throttle.bytes.per.sec; adaptive: per broker, between throttle.min "
               "and throttle.max, by the canary's latency and the ISR shrinks"),
    DynamicKey("throttle.min", "throttle_min_bytes_per_sec", RATE,
               "(throttle.mode=adaptive) the lowest rate: a movement never starves"),
    DynamicKey("throttle.max", "throttle_max_bytes_per_sec", RATE,
               "(throttle.mode=adaptive) the highest rate"),
    DynamicKey("throttle.schedule", "throttle_schedule", SCHEDULE,
               "(throttle.mode=adaptive) lower ceilings for hours of the day (UTC), such as 8-18=20MB"),
    DynamicKey("replica.alter.log.dirs.io.max.bytes.per.second", "logdir_throttle_bytes_per_sec", RATE,
               "throttle of the copies between the log dirs of a broker"),
    DynamicKey("disk.max.usage.percent", "disk_max_usage_percent", PERCENT,
               "no plan fills a log dir's volume beyond this percentage"),
    DynamicKey("disk.high.water.percent", "disk_high_water_percent", PERCENT,
               "a log dir whose volume is fuller than this is relieved (mode auto)"),
    DynamicKey("disk.low.water.percent", "disk_low_water_percent", PERCENT,
               "where a relieved log dir's volume ends"),
    DynamicKey("logdir.imbalance.threshold", "logdir_imbalance_threshold", FRACTION,
               "a broker's dirs further from their share than this are balanced"),
    DynamicKey("reassignment.max.concurrent.logdir.movements.per.broker", "max_logdir_movements_per_broker",
               _integer_kind(1), "intra-broker log-dir moves in flight per broker"),
    DynamicKey("balance.mode", "balance_mode", _choice_kind(BALANCE_MODES),
               "strict: exact replica counts, fewest moves; bytes: disk bytes within tolerances, fewest bytes"),
    DynamicKey("balance.disk.tolerance", "balance_disk_tolerance", FRACTION,
               "(balance.mode=bytes) how far a broker's bytes may be from its share"),
    DynamicKey("balance.replica.tolerance", "balance_replica_tolerance", FRACTION,
               "(balance.mode=bytes) how far a broker's replica count may be from its share"),
    DynamicKey("balance.leader.tolerance", "balance_leader_tolerance", FRACTION,
               "(balance.mode=bytes) how far a broker's leader count may be from its share"),
    DynamicKey("balance.bytes.in.tolerance", "balance_bytes_in_tolerance", FRACTION,
               "(balance.mode=bytes) how far the bytes produced to a broker's replicas may be from its share"),
    DynamicKey("balance.network.out.tolerance", "balance_network_out_tolerance", FRACTION,
               "(balance.mode=bytes) how far what a broker sends as a leader may be from its share"),
    DynamicKey("balance.topic.spread", "balance_topic_spread", FRACTION,
               "(balance.mode=bytes) a topic's replicas on a broker stay within share + max(2, this x share)"),
    DynamicKey("balance.disk.budget.bytes", "balance_disk_budget_bytes", SIZE,
               "(balance.mode=bytes) 0: off; else a rebalance moves at most this, as evenly as that allows"),
    DynamicKey("mode", "mode", _choice_kind(MODES),
               "auto executes, approve waits for approval, observe only alerts"),
    DynamicKey(PAUSED_KEY, "paused", BOOLEAN,
               "true: no new step or log-dir move starts (request pause / request resume)"),
    DynamicKey("proposal.expiry", "proposal_expiry_seconds", DURATION,
               "a proposal not approved or rejected within this long is dropped"),
    DynamicKey("broker.add.grace", "broker_add_grace_seconds", DURATION,
               "seconds to wait for more new brokers before rebalancing"),
    DynamicKey("broker.failure.grace", "broker_failure_grace_seconds", DURATION,
               "seconds a broker may be down before its replicas are moved"),
    DynamicKey("self.healing.max.failed.brokers", "self_healing_max_failed_brokers", _integer_kind(0),
               "more brokers down than this: alert instead of healing"),
    DynamicKey("self.healing.max.failed.fraction", "self_healing_max_failed_fraction", FRACTION,
               "more of the brokers down than this: alert instead of healing"),
    DynamicKey("topics.include", "topics_include", PATTERN,
               "topics balanced (whole-name regular expression); the others are only healed and drained"),
    DynamicKey("topics.exclude", "topics_exclude", PATTERN,
               "topics only healed and drained, never rebalanced (default: __* and the product's own)"),
)}


def require_dynamic_key(key: str) -> DynamicKey:
    """The table entry of `key`; raises InvalidConfigError naming the known keys."""
    if key not in DYNAMIC_KEYS:
        raise InvalidConfigError(f"unknown setting {key!r}; dynamic settings are {', '.join(sorted(DYNAMIC_KEYS))}")
    return DYNAMIC_KEYS[key]


def compute_config_text(key: str, text: str) -> tuple[str, object]:
    """(canonical text, typed value) of one override; the canonical text is what is stored and
    published. Raises InvalidConfigError for an unknown key or a value of the wrong shape."""
    known = require_dynamic_key(key)
    try:
        return known.kind.parse(text.strip())
    except ValueError as error:
        raise InvalidConfigError(f"{key}={text!r}: expected {error}") from None


def parse_config_value(key: str, text: str) -> object:
    """The typed value of one override; raises InvalidConfigError for an unknown key or bad value."""
    return compute_config_text(key, text)[1]


def effective_policy(policy: Policy, config: Mapping[str, str]) -> Policy:
    """`policy` with the stored overrides applied (unknown stored keys are ignored)."""
    changes = {}
    for key, text in sorted(config.items()):
        if key in DYNAMIC_KEYS:
            changes[DYNAMIC_KEYS[key].field] = parse_config_value(key, text)
    return replace(policy, **changes) if changes else policy


def compute_throttle_bounds(policy: Policy) -> ThrottleBounds:
    """The adaptive throttle's bounds and gains from the effective policy: the rates between
    `throttle.min` and `throttle.max` (a broker starts at `throttle.bytes.per.sec` brought within
    them, or at the floor), steps of a twentieth of that span, the moves in flight per broker B.
    Raises InvalidConfigError when the bounds contradict each other."""
    floor, maximum = policy.throttle_min_bytes_per_sec, policy.throttle_max_bytes_per_sec
    if floor > maximum:
        raise InvalidConfigError(f"throttle.min ({floor} B/s) is above throttle.max ({maximum} B/s); "
                                 "set throttle.min at most throttle.max")
    initial = min(max(policy.throttle_bytes_per_sec or floor, floor), maximum)
    return ThrottleBounds(floor, maximum, initial, increase=max(1, (maximum - floor) // 20),
                          max_moves=policy.max_movements_per_broker, slo_factor=policy.throttle_slo_factor,
                          slo_ceiling_ms=policy.throttle_slo_ceiling_ms,
                          hold_ms=int(policy.throttle_hold_seconds * 1000),
                          schedule=parse_schedule(policy.throttle_schedule)[1])


def effective_limits(policy: Policy, config: Mapping[str, str], throttles: Mapping | None = None) -> Limits:
    """The movement limits P/L/R/B of the next decision: settings, then SetConfig overrides; in
    `throttle.mode=adaptive`, B lowered per broker by the adaptive throttle's moves in flight
    (`throttles`: `ControllerState.throttles`, `handlers.throttle`)."""
    effective = effective_policy(policy, config)
    moves = (tuple((broker, throttle.moves) for broker, throttle in sorted(throttles.items()))
             if throttles and effective.throttle_mode == "adaptive" and effective.mode != "observe" else ())
    return Limits(**{field: getattr(effective, field) for field in CONFIG_KEYS.values()}, broker_moves=moves)
