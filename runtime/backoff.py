"""The one retry policy of every long-running process: exponential backoff on transient errors.

RULES
- Only a `TransientError` (broker, controller or Redis briefly away; client errors are
  translated into one at their door) is retried; any other error propagates at once.
- Waits grow from `first_seconds`, doubling, to at most `most_seconds`; a transient error that
  names its own `retry_after_seconds` (a client already backing off) waits at least that long.
- Every retry is logged once as "DOING: [CODE] message; will retry in N s"; giving up is logged
  as "DOING: giving up after N s" and re-raises the last error.
- `give_up_after_seconds=None` retries until `stop` is set (a process that must ride out any
  outage: the executor's Redis, the watcher's cluster); a number bounds it (one command's apply).
- Waiting is `stop.wait`, so a stopping process never sleeps out a backoff.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

from schemas.errors import TransientError

T = TypeVar("T")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Backoff:
    """How long to wait between attempts, and for how long to keep trying."""

    first_seconds: float = 0.5
    most_seconds: float = 10.0
    give_up_after_seconds: float | None = None

    def delays(self) -> Iterator[float]:
        """0.5, 1, 2, 4, 8, 10, 10, ... (with the defaults)."""
        delay = self.first_seconds
        while True:
            yield delay
            delay = min(delay * 2, self.most_seconds)


UNTIL_STOPPED = Backoff()
"""Ride out any outage: 0.5 s doubling to 10 s, until the process is stopped."""


def compute_wait(delays: Iterator[float], error: Exception, backoff: Backoff) -> float:
    """The next wait of a loop that retries on its own (a watcher that polls forever): the next
    delay, or longer when a transient error says its client is backing off already."""
    wait = next(delays)
    if isinstance(error, TransientError):
        wait = max(wait, min(error.retry_after_seconds, backoff.most_seconds))
    return wait


def retry_transient(action: Callable[[], T], doing: str, backoff: Backoff = Backoff(),
                    stop: threading.Event | None = None, logger: logging.Logger = log,
                    retry_if: Callable[[TransientError], bool] = lambda error: True,
                    clock: Callable[[], float] = time.monotonic) -> T:
    """`action()`, retried on `TransientError` under `backoff` until it succeeds, `stop` is set
    (the last error is raised) or the backoff gives up (likewise). `retry_if` narrows which
    transient errors are worth waiting out (others are raised at once)."""
    stop = stop or threading.Event()
    started = clock()
    delays = backoff.delays()
    while True:
        try:
            return action()
        except TransientError as error:
            if not retry_if(error):
                raise
            waited = clock() - started
            limit = backoff.give_up_after_seconds
            if stop.is_set() or (limit is not None and waited >= limit):
                logger.warning("%s: [%s] %s; giving up after %.0f s", doing, error.code, error, waited)
                raise
            wait = compute_wait(delays, error, backoff)
            if limit is not None:
                wait = min(wait, max(0.0, limit - waited))
            logger.warning("%s: [%s] %s; will retry in %.1f s", doing, error.code, error, wait)
            stop.wait(wait)
