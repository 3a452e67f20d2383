"""The product's settings for tests: `Settings` defaults (the one table), overrides on top.

`Policy` and `Limits` have no defaults of their own, so a test builds them from here rather than
writing numbers that could drift from the product's. REASSIGNER_* variables (and a config file
named by REASSIGNER_CONFIG_FILE) of the shell that runs the tests are ignored: a test sees the
documented defaults, whatever the developer's environment.
"""

from __future__ import annotations

import os
from unittest import mock

from handlers.policy import Policy
from planning.movement.batches import Limits
from runtime.settings import Settings, compute_limits, compute_policy


def default_settings(**overrides: object) -> Settings:
    """`Settings` with its documented defaults and `overrides` (validated as flags would be)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REASSIGNER_")}
    with mock.patch.dict(os.environ, clean, clear=True):
        return Settings(**overrides)


def default_policy(**overrides: object) -> Policy:
    """The `Policy` the product runs with by default, with `overrides` (Settings field names)."""
    return compute_policy(default_settings(**overrides))


def default_limits(**overrides: int) -> Limits:
    """The limits P/L/R/B the product runs with by default, with `overrides`."""
    return compute_limits(default_settings(**overrides))


STALL_TIMEOUT = default_settings().step_stall_timeout_seconds
"""`step.stall.timeout` by default, in seconds, for `run_plan` / `compute_stepping`."""
