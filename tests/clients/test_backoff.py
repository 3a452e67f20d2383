"""The one retry policy: which errors it waits out, how long, and when it gives up."""

from __future__ import annotations

import itertools
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import backoff as table
from runtime.backoff import Backoff, compute_wait, retry_transient
from schemas.errors import KafkaPermanentError, KafkaTransientError, TransientError


class FakeStop:
    """A stop event whose `wait` advances a fake clock instead of sleeping."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []
        self.set_after: int | None = None

    def clock(self) -> float:
        return self.now

    def is_set(self) -> bool:
        return self.set_after is not None and len(self.waits) >= self.set_after

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return self.is_set()


def failing(times: int, error: Exception):
    calls = itertools.count(1)

    def action() -> str:
        if next(calls) <= times:
            raise error
        return "done"
    return action


def test_delays_double_from_first_to_most():
    assert list(itertools.islice(Backoff(0.5, 10.0).delays(), 7)) == [0.5, 1, 2, 4, 8, 10, 10]


@given(st.floats(0.01, 5), st.floats(5, 60), st.integers(1, 40))
def test_delays_never_exceed_most_and_never_shrink(first, most, count):
    delays = list(itertools.islice(Backoff(first, most).delays(), count))
    assert all(a <= b for a, b in zip(delays, delays[1:])) and max(delays) <= most


def test_a_transient_error_is_waited_out_and_logged(caplog):
    stop = FakeStop()
    with caplog.at_level(logging.WARNING):
        result = retry_transient(failing(3, TransientError("Redis away")), "claiming", Backoff(0.5, 10),
                                 stop, clock=stop.clock)
    assert result == "done" and stop.waits == [1.0, 1.0, 2.0]  # the error asks for 1 s at least
    assert sum("will retry in" in r.getMessage() for r in caplog.records) == 3


def test_a_permanent_error_is_raised_at_once():
    stop = FakeStop()
    with pytest.raises(KafkaPermanentError):
        retry_transient(failing(1, KafkaPermanentError("no", "TOPIC_AUTHORIZATION_FAILED")), "x",
                        Backoff(), stop, clock=stop.clock)
    assert stop.waits == []


def test_it_gives_up_after_the_bound_and_never_waits_past_it(caplog):
    stop = FakeStop()
    with caplog.at_level(logging.WARNING), pytest.raises(TransientError):
        retry_transient(failing(100, TransientError("away", retry_after_seconds=0)), "applying",
                        Backoff(0.5, 10, give_up_after_seconds=5), stop, clock=stop.clock)
    assert sum(stop.waits) == pytest.approx(5.0)
    assert "giving up after 5 s" in caplog.records[-1].getMessage()


def test_a_stop_ends_the_wait_with_the_last_error():
    stop = FakeStop()
    stop.set_after = 2
    with pytest.raises(TransientError):
        retry_transient(failing(100, TransientError("away", retry_after_seconds=0)), "x", Backoff(), stop,
                        clock=stop.clock)
    assert len(stop.waits) == 2


def test_retry_if_narrows_what_is_waited_out():
    stop = FakeStop()
    not_there_yet = KafkaTransientError("wait", "REPLICA_NOT_AVAILABLE", retry_after_seconds=0)
    assert retry_transient(failing(2, not_there_yet), "x", Backoff(0.5, 0.5), stop,
                           retry_if=lambda e: e.code == "REPLICA_NOT_AVAILABLE", clock=stop.clock) == "done"
    with pytest.raises(KafkaTransientError):
        retry_transient(failing(1, KafkaTransientError("away", "REQUEST_TIMED_OUT")), "x", Backoff(), stop,
                        retry_if=lambda e: e.code == "REPLICA_NOT_AVAILABLE", clock=stop.clock)


def test_compute_wait_honours_a_client_that_backs_off_already_up_to_most():
    backoff = Backoff(1, 8)
    delays = backoff.delays()
    assert compute_wait(delays, TransientError("x", retry_after_seconds=30), backoff) == 8
    assert compute_wait(delays, ValueError("not transient"), backoff) == 2


def test_a_row_given_its_setting_keeps_its_waits_and_gives_up_after_it():
    bounded = table.COMMAND_APPLY.giving_up_after(60.0)
    assert (bounded.first_seconds, bounded.most_seconds, bounded.give_up_after_seconds) == (0.5, 10.0, 60.0)
    assert table.COMMAND_APPLY.give_up_after_seconds is None  # the row itself is unchanged


def test_the_table_holds_every_named_policy_with_its_numbers():
    rows = {name: (row.first_seconds, row.most_seconds, row.give_up_after_seconds)
            for name, row in vars(table).items() if isinstance(row, Backoff)}
    assert rows == {
        "UNTIL_STOPPED": (0.5, 10.0, None), "ADMIN_RECONNECT": (0.5, 10.0, None),
        "END_LOOKUP": (0.5, 0.5, None), "COMMAND_APPLY": (0.5, 10.0, None),
        "REPLICA_PLACEMENT": (0.5, 0.5, None), "REDIS_OUTAGE": (0.2, 5.0, 300.0),
        "PUBLISH_OUTAGE": (0.5, 30.0, None), "QUERY_RESTART": (1.0, 60.0, None),
    }
