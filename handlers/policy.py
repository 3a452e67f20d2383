"""The policy the handlers decide by: static settings, plus the runtime overrides of SetConfig.

`Policy` holds the reaction and limit settings of `reassigner.settings.Settings` (same field
names, same defaults), so the pipeline shell builds it as
`Policy(**{name: getattr(settings, name) for name in Policy.__dataclass_fields__})`.

Operators change some of them at runtime with a `SetConfig` request, using Kafka-style dotted
names (`DYNAMIC_KEYS`). The overrides live in `ControllerState.config` as text; every decision
reads the effective values through `effective_policy` / `effective_limits`:

RULES:
- an override applies from the decision that reads it onwards, never to a step already in
  flight (limits are only consulted when slots are refilled);
- `parse_config_value` refuses an unknown key or a value of the wrong shape with
  `InvalidConfigError` (INVALID_CONFIG), so a stored override always parses;
- a `None` value resets the key to the static setting.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping

from planning.batches import CONFIG_KEYS, Limits
from reassigner.errors import InvalidConfigError

MODES = ("auto", "approve", "observe")
STALL_ACTIONS = ("alert", "cancel")


@dataclass(frozen=True)
class Policy:
    """Reaction settings (SPEC 3, 5); field names and defaults are those of `Settings`."""

    mode: str = "auto"
    broker_add_grace_seconds: float = 30.0
    broker_failure_grace_seconds: float = 300.0
    self_healing_max_failed_brokers: int = 2
    self_healing_max_failed_fraction: float = 0.4
    logdir_imbalance_threshold: float = 0.2
    max_partition_movements: int = 5
    max_leader_movements: int = 2
    max_replica_movements: int = 1
    max_movements_per_broker: int = 2
    max_logdir_movements_per_broker: int = 1
    step_stall_timeout_seconds: float = 600.0
    stall_action: str = "alert"
    throttle_bytes_per_sec: int | None = None
    logdir_throttle_bytes_per_sec: int | None = None


def _positive_int(key: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InvalidConfigError(f"{key} must be an integer of at least 1, got {text!r}") from None
    if value < 1:
        raise InvalidConfigError(f"{key} must be an integer of at least 1, got {value}")
    return value


def _non_negative_seconds(key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidConfigError(f"{key} must be a number of seconds, got {text!r}") from None
    if not value >= 0:  # also refuses NaN
        raise InvalidConfigError(f"{key} must be at least 0 seconds, got {text!r}")
    return value


def _one_of(choices: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(key: str, text: str) -> str:
        if text not in choices:
            raise InvalidConfigError(f"{key} must be one of {list(choices)}, got {text!r}")
        return text
    return parse


def _fraction(key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidConfigError(f"{key} must be a fraction in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise InvalidConfigError(f"{key} must be a fraction in (0, 1], got {value}")
    return value


def _non_negative_int(key: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InvalidConfigError(f"{key} must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise InvalidConfigError(f"{key} must be a non-negative integer, got {value}")
    return value


# Kafka-style name -> (Policy field, parser). The limit keys are those of `planning.batches`.
DYNAMIC_KEYS: Mapping[str, tuple[str, Callable[[str, str], object]]] = {
    **{key: (field, _positive_int) for key, field in CONFIG_KEYS.items()},
    "mode": ("mode", _one_of(MODES)),
    "broker.add.grace": ("broker_add_grace_seconds", _non_negative_seconds),
    "broker.failure.grace": ("broker_failure_grace_seconds", _non_negative_seconds),
    "self.healing.max.failed.brokers": ("self_healing_max_failed_brokers", _non_negative_int),
    "self.healing.max.failed.fraction": ("self_healing_max_failed_fraction", _fraction),
    "step.stall.timeout": ("step_stall_timeout_seconds", _non_negative_seconds),
    "stall.action": ("stall_action", _one_of(STALL_ACTIONS)),
    "throttle.bytes.per.sec": ("throttle_bytes_per_sec", _positive_int),
}


def parse_config_value(key: str, value: str) -> object:
    """The typed value of one override; raises InvalidConfigError for an unknown key or bad value."""
    if key not in DYNAMIC_KEYS:
        raise InvalidConfigError(f"unknown setting {key!r}; dynamic settings are {sorted(DYNAMIC_KEYS)}")
    _, parse = DYNAMIC_KEYS[key]
    return parse(key, value)


def effective_policy(policy: Policy, config: Mapping[str, str]) -> Policy:
    """`policy` with the stored overrides applied (unknown stored keys are ignored)."""
    changes = {}
    for key, text in sorted(config.items()):
        if key in DYNAMIC_KEYS:
            changes[DYNAMIC_KEYS[key][0]] = parse_config_value(key, text)
    return replace(policy, **changes) if changes else policy


def effective_limits(policy: Policy, config: Mapping[str, str]) -> Limits:
    """The movement limits (SPEC 5.2) of the next decision: settings, then SetConfig overrides."""
    effective = effective_policy(policy, config)
    return Limits(**{field: getattr(effective, field) for field in CONFIG_KEYS.values()})
