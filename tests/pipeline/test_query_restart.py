"""`reassigner run` starts its query again after a failure (regression: a pipeline paused 60 s
failed its query on resume, and nothing restarted it), stops without a restart on SIGTERM, and
stops for good when a newer instance fenced it. Fake queries: the loop, not Spark, is under test."""

from __future__ import annotations

import threading

import pytest

from runtime.backoff import Backoff
from schemas.errors import FencedError
from streams.query import run_until_stopped

QUICK = Backoff(first_seconds=0.01, most_seconds=0.01)


class FakeRunner:
    fenced = None


class FailingQuery:
    def awaitTermination(self, _timeout=None):
        raise RuntimeError("StreamingQueryException: Timeout of 10000ms expired before the position "
                           "for partition reassigner.requests-0 could be determined\nstack...")


class StoppedQuery:
    def __init__(self, stop: threading.Event) -> None:
        self.stop_event = stop

    def awaitTermination(self, _timeout=None):
        self.stop_event.set()  # as the SIGTERM handler does before stopping the query
        return True


def test_a_failed_query_is_started_again_until_it_is_stopped(caplog):
    stop, started = threading.Event(), []
    queries = iter([FailingQuery(), FailingQuery(), StoppedQuery(stop)])

    def start():
        started.append(1)
        return next(queries)

    assert run_until_stopped(start, stop, FakeRunner(), QUICK) == 2
    assert len(started) == 3
    assert sum("will restart it in" in r.getMessage() and "Timeout of 10000ms" in r.getMessage()
               for r in caplog.records) == 2


def test_a_fenced_instance_stops_with_the_fencing_error():
    runner = FakeRunner()
    runner.fenced = FencedError("pipeline epoch 3 was replaced by epoch 4")
    with pytest.raises(FencedError):
        run_until_stopped(FailingQuery, threading.Event(), runner, QUICK)


class RunningQuery:
    """A query that runs until stopped; the runner is fenced while it waits."""

    def __init__(self, runner) -> None:
        self.runner, self.stopped, self.waits = runner, False, 0

    def awaitTermination(self, _timeout=None):
        self.waits += 1
        if self.waits == 2:  # a batch found a newer epoch: recorded, not raised into Spark
            self.runner.fenced = FencedError("pipeline epoch 3 was replaced by epoch 4")
        return self.stopped

    def stop(self):
        self.stopped = True


def test_a_fenced_running_query_is_stopped_from_the_waiting_thread():
    runner = FakeRunner()
    query = RunningQuery(runner)
    with pytest.raises(FencedError):
        run_until_stopped(lambda: query, threading.Event(), runner, QUICK)
    assert query.stopped
