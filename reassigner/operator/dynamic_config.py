"""The dynamic settings an operator may change at run time with `config set KEY=VALUE`, as the CLI
sees them (the keys: docs/configuration.md, "Dynamic settings").

The keys, their `Settings` fields and how their values read are one table, the pipeline's
(`handlers.policy.DYNAMIC_KEYS`): this module only adds the CLI's forms around it. A SetConfig
request's value is checked and normalised **before** it is published (an unknown key or a value
that does not parse raises `InvalidConfigError` locally, so a typo never reaches the pipeline),
and the pipeline reads the same canonical text (e.g. "10m" → "600", "10MB" → "10000000").

An empty value (`config set KEY=`) resets the key to its default (a SetConfig with value null).
Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Mapping

from handlers.policy import DYNAMIC_KEYS, compute_config_text, require_dynamic_key
from schemas.errors import InvalidConfigError


def require_known_key(key: str, source: str = "config get") -> None:
    """Raises InvalidConfigError, prefixed with `source`, for a key that is not dynamic."""
    try:
        require_dynamic_key(key)
    except InvalidConfigError as error:
        raise InvalidConfigError(f"{source}: {error}") from None


def compute_config_value(assignment: str, source: str = "config set") -> tuple[str, str | None]:
    """`KEY=VALUE` → (key, canonical value); `KEY=` → (key, None), a reset to the default.

    Raises InvalidConfigError naming the key and what was expected.
    """
    key, sep, value = assignment.partition("=")
    key = key.strip()
    if not sep or not key:
        raise InvalidConfigError(f"{source}: expected KEY=VALUE, got {assignment!r}")
    require_known_key(key, source)
    if not value.strip():
        return key, None
    try:
        canonical, _typed = compute_config_text(key, value)
    except InvalidConfigError as error:
        raise InvalidConfigError(f"{source}: {error}") from None
    return key, canonical


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
