"""Waiting on the real stack in tests: poll a condition until it holds or time runs out.

PATIENCE. A timeout written in a test is what the condition needs on this machine at full speed.
The 2-core machine is not always at full speed: throttled, the same Python loop takes 3-5 times
as long and a broker takes minutes to start, and a test that waited 60 s for what takes 15 s at
full speed fails although nothing is wrong. So every wait here allows its timeout times the
session's PATIENCE: how many times slower than full speed a fixed Python loop runs when the
session starts (its mean time over a second of runs, between 1 and `MAX_PATIENCE`), or the value
of `REASSIGNER_TEST_PATIENCE`. A mean over a second, not the fastest run: the throttled machine
runs at full speed in bursts and then stalls (single runs of the probe measured 0.028, 0.263,
0.040, 0.520 and 0.030 s in a row), and what a wait meets is the sustained speed. A wait still fails, and says how long it allowed; PATIENCE is a
bound on waiting, never a timed assertion (those are benchmarks).
"""

from __future__ import annotations

import os
import time

REFERENCE_LOOP_SECONDS = 0.03
"""The probe loop (10⁶ additions in a function) on this 2-core machine at full speed (0.028-0.035 s)."""

MAX_PATIENCE = 4.0
"""Beyond this a suite does not fit CI's time anyway; a wait that needs more is a failure."""


def compute_patience(loop_seconds: float, reference: float = REFERENCE_LOOP_SECONDS,
                     ceiling: float = MAX_PATIENCE) -> float:
    """How many times the waits are lengthened when the probe loop took `loop_seconds`."""
    return round(min(max(loop_seconds / reference, 1.0), ceiling), 1)


def measure_loop_seconds(window: float = 1.0, runs: int = 3) -> float:
    """The mean wall-clock time of the probe loop over at least `window` s and `runs` runs."""
    began = time.perf_counter()
    count = 0
    while count < runs or time.perf_counter() - began < window:
        total = 0
        for i in range(1_000_000):
            total += i
        count += 1
    return (time.perf_counter() - began) / count


def session_patience(environ=os.environ) -> float:
    """`REASSIGNER_TEST_PATIENCE` if set (a number above 0), else measured now."""
    given = environ.get("REASSIGNER_TEST_PATIENCE")
    if given is None:
        return compute_patience(measure_loop_seconds())
    try:
        patience = float(given)
    except ValueError:
        patience = 0.0
    if not patience > 0:
        raise ValueError(f"REASSIGNER_TEST_PATIENCE={given!r}: a number above 0 (2 waits twice as long)")
    return patience


PATIENCE = session_patience()


def eventually(condition, timeout: float = 60.0, interval: float = 0.3, what: str = "condition"):
    """The first truthy value of `condition()`; AssertionError naming `what` after `timeout` s
    times PATIENCE (module doc)."""
    allowed = timeout * PATIENCE
    deadline = time.monotonic() + allowed
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            scaled = f" ({timeout:g} s × patience {PATIENCE:g})" if PATIENCE != 1 else ""
            raise AssertionError(f"{what} not met within {allowed:.0f} s{scaled}")
        time.sleep(interval)


class FakeClock:
    """A module's `time` in a test of a wait loop: `sleep` advances `monotonic` exactly, so where
    the wait ends is exact on any machine (real sleeps overshoot by seconds on a throttled one).
    Install it with `monkeypatch.setattr(module, "time", FakeClock())`."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
