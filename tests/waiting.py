"""Waiting on the real stack in tests: poll a condition until it holds or time runs out."""

from __future__ import annotations

import time


def eventually(condition, timeout: float = 60.0, interval: float = 0.3, what: str = "condition"):
    """The first truthy value of `condition()`; AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout} s")
        time.sleep(interval)
