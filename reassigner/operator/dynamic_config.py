"""The dynamic settings an operator may change at run time with `config set KEY=VALUE` (SPEC 5.2).

Each key is a Kafka-style dotted name mapped to the `Settings` field that holds its default.
A SetConfig request carries the value as text; this module checks it **before** it is published
(an unknown key or a value that does not parse raises `InvalidConfigError` locally, so a typo
never reaches the pipeline) and normalises it, so that the pipeline reads one canonical form:

    integers         decimal text                      "5"
    durations        seconds as decimal text           "10m" → "600", "1500ms" → "1.5"
    rates            bytes per second as decimal text  "10MB" → "10000000"
    choices          lower-case symbol                 "Cancel" → "cancel"

An empty value (`config set KEY=`) resets the key to its default (a SetConfig with value null).
The key set is the pipeline's (`handlers.policy.DYNAMIC_KEYS`; tests/operator/
test_request_builders.py checks that every canonical value here parses there).
Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping

from reassigner.errors import InvalidConfigError


def _integer(minimum: int) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if not re.fullmatch(r"[+]?\d+", text):
            raise ValueError(f"expected an integer of at least {minimum}")
        if int(text) < minimum:
            raise ValueError(f"expected an integer of at least {minimum}")
        return str(int(text))
    return parse


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "": 1.0}


def _duration(text: str) -> str:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|min|m|h|)", text.strip().lower())
    if not match:
        raise ValueError("expected a duration such as 600, 600s, 10m or 1500ms")
    seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    return f"{seconds:g}" if seconds != int(seconds) else str(int(seconds))


_RATE_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3,
               "kib": 1024, "mib": 1024**2, "gib": 1024**3}


def _rate(text: str) -> str:
    match = re.fullmatch(r"(\d+)\s*([kmg]i?b|b|)", text.strip().lower())
    if not match or int(match.group(1)) * _RATE_UNITS[match.group(2)] < 1:
        raise ValueError("expected bytes per second, at least 1, such as 10000000 or 10MB")
    return str(int(match.group(1)) * _RATE_UNITS[match.group(2)])


def _choice(*symbols: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.strip().lower() not in symbols:
            raise ValueError(f"expected one of {', '.join(symbols)}")
        return text.strip().lower()
    return parse


def _fraction(text: str) -> str:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("expected a fraction in (0, 1] such as 0.4") from None
    if not 0 < value <= 1:
        raise ValueError("expected a fraction in (0, 1] such as 0.4")
    return f"{value:g}"


@dataclass(frozen=True)
class DynamicKey:
    """One changeable setting: `name` as operators write it, `field` of `Settings` with its
    default, `parse` (text → canonical text, raises ValueError with what was expected)."""

    name: str
    field: str
    parse: Callable[[str], str]
    doc: str


DYNAMIC_KEYS: Mapping[str, DynamicKey] = {k.name: k for k in (
    DynamicKey("reassignment.max.concurrent.partition.movements", "max_partition_movements",
               _integer(1), "P: partitions with a step in flight"),
    DynamicKey("reassignment.max.concurrent.leader.movements", "max_leader_movements",
               _integer(1), "L: leader-moving steps in flight"),
    DynamicKey("reassignment.max.concurrent.replica.movements", "max_replica_movements",
               _integer(1), "R: replicas a step adds (and drops) per partition"),
    DynamicKey("reassignment.max.concurrent.movements.per.broker", "max_movements_per_broker",
               _integer(1), "B: steps in flight touching one broker"),
    DynamicKey("reassignment.max.concurrent.logdir.movements.per.broker",
               "max_logdir_movements_per_broker", _integer(1), "log-dir moves in flight per broker"),
    DynamicKey("step.stall.timeout", "step_stall_timeout_seconds", _duration,
               "seconds before a step counts as stalled"),
    DynamicKey("stall.action", "stall_action", _choice("alert", "cancel"),
               "what a stalled step triggers"),
    DynamicKey("throttle.bytes.per.sec", "throttle_bytes_per_sec", _rate,
               "replication throttle on steps in flight"),
    DynamicKey("mode", "mode", _choice("auto", "approve", "observe"),
               "auto executes, approve waits for approval, observe only alerts"),
    DynamicKey("broker.add.grace", "broker_add_grace_seconds", _duration,
               "seconds to wait for more new brokers before rebalancing"),
    DynamicKey("broker.failure.grace", "broker_failure_grace_seconds", _duration,
               "seconds a broker may be down before its replicas are moved"),
    DynamicKey("self.healing.max.failed.brokers", "self_healing_max_failed_brokers", _integer(0),
               "more brokers down than this: alert instead of healing"),
    DynamicKey("self.healing.max.failed.fraction", "self_healing_max_failed_fraction", _fraction,
               "more of the brokers down than this: alert instead of healing"),
)}


def compute_config_value(assignment: str, source: str = "config set") -> tuple[str, str | None]:
    """`KEY=VALUE` → (key, canonical value); `KEY=` → (key, None), a reset to the default.

    Raises InvalidConfigError naming the key and what was expected.
    """
    key, sep, value = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
        raise InvalidConfigError(f"{source}: expected KEY=VALUE, got {assignment!r}")
    known = DYNAMIC_KEYS.get(key)
    if known is None:
        raise InvalidConfigError(
            f"{source}: unknown setting {key!r}; known: {', '.join(sorted(DYNAMIC_KEYS))}")
    if not value.strip():
        return key, None
    try:
        return key, known.parse(value.strip())
    except ValueError as error:
        raise InvalidConfigError(f"{source}: {key}={value!r}: {error}") from None


def compute_effective_config(overrides: Mapping[str, str], defaults: object) -> dict[str, dict]:
    """Every dynamic key → {"value", "source": "override" | "default", "doc"}.

    `overrides` is ControllerState.config; `defaults` is a Settings (any object with the fields).
    """
    effective: dict[str, dict] = {}
    for name in sorted(DYNAMIC_KEYS):
        key = DYNAMIC_KEYS[name]
        if name in overrides:
            effective[name] = {"value": str(overrides[name]), "source": "override", "doc": key.doc}
        else:
            default = getattr(defaults, key.field, None)
            effective[name] = {"value": None if default is None else str(default),
                               "source": "default", "doc": key.doc}
    return effective
