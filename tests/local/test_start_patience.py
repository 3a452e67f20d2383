"""A local server that is still writing its log is starting, not stuck (`processes.wait_until`,
module PATIENCE): regression for the local stack's brokers failing "not ready after 120 s" on a
loaded machine while they were still logging their start. No server: a file the condition
itself writes to, so the log grows at every poll; a fake clock, so the waits end where they must
however slow the machine is."""

from __future__ import annotations

import pytest

import reassigner.dev.local.processes as processes
from reassigner.dev.local.processes import PATIENCE_CEILING, wait_until
from schemas.errors import ProcessStartError
from tests.waiting import FakeClock


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(processes, "time", fake)
    return fake


def logging_condition(log, clock: FakeClock, ready_after: float | None):
    """A condition that logs a line each time it is asked, and is met `ready_after` seconds on
    (never for None)."""
    started = clock.monotonic()

    def condition() -> bool:
        with open(log, "a") as handle:
            handle.write("still starting\n")
        return ready_after is not None and clock.monotonic() - started > ready_after
    return condition


def test_a_wait_whose_log_keeps_growing_outlives_its_budget(tmp_path, clock):
    log = tmp_path / "server.log"
    started = clock.now
    wait_until(logging_condition(log, clock, ready_after=1.5), 1.0, "a slow server", log_file=log,
               interval_seconds=0.05)
    assert clock.now - started > 1.5  # past its budget of 1 s: the growing log renewed it


def test_a_wait_whose_log_is_quiet_ends_within_its_budget_and_says_so(tmp_path, clock):
    log = tmp_path / "server.log"
    log.write_text("ERROR something is wrong\n")
    started = clock.now
    with pytest.raises(ProcessStartError) as error:
        wait_until(lambda: False, 0.5, "broker 1", log_file=log, interval_seconds=0.05)
    assert 0.5 <= clock.now - started <= 0.55 + 1e-9  # the first poll past one budget: no second one
    message = str(error.value)
    assert message.startswith("broker 1: not ready after ")
    assert ", its log quiet for " in message and "check the machine's load (`uptime`)" in message
    assert message.endswith("last log lines:\nERROR something is wrong")


def test_a_log_that_never_stops_growing_still_ends_at_the_ceiling(tmp_path, clock):
    log = tmp_path / "server.log"  # a server logging the same failure over and over
    started = clock.now
    with pytest.raises(ProcessStartError, match="^the controller: not ready after "):
        wait_until(logging_condition(log, clock, ready_after=None), 0.4, "the controller", log_file=log,
                   interval_seconds=0.05)
    assert PATIENCE_CEILING * 0.4 <= clock.now - started <= PATIENCE_CEILING * 0.4 + 0.05 + 1e-9
