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

THE TABLE (below `Backoff`): every named policy of the product, one row each — its first wait,
its longest, when it gives up, and why. A module imports its row; a policy whose numbers are
settings takes its fixed part from its row and its setting where the setting is read
(`Backoff.giving_up_after`). Two policies are built entirely from their reader's numbers, and
listed in the table's comment: the watcher's failed polls and the webhook's failed POSTs.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
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

    def giving_up_after(self, seconds: float | None) -> Backoff:
        """This policy, giving up after `seconds` (a setting, read where it is read)."""
        return replace(self, give_up_after_seconds=seconds)


# --- THE TABLE: every named policy ------------------------------------------------------------------
# Also, built where their numbers are read:
# - the watcher's failed polls (`reassigner.edge.watcher`): from `poll_interval_seconds` doubling
#   to `watcher_max_backoff_seconds` (never below the interval), until stopped: a dead cluster is
#   asked again no more often than it is polled, and the watcher never stops because of one;
# - the webhook's failed POSTs (`reassigner.operator.webhook`): from --retry-delay doubling to
#   --max-retry-delay, for --max-attempts attempts; then the alert is dead-lettered.

# The processes.
UNTIL_STOPPED = Backoff(first_seconds=0.5, most_seconds=10.0)
"""Ride out any outage until the process is stopped: the executor's Redis, cluster and own
topics, the throttle keeper's Redis, a committing consumer's publish to its side topic."""

ADMIN_RECONNECT = Backoff(first_seconds=0.5, most_seconds=10.0)
"""The Admin API client is not made again sooner than this after a failed attempt, so that a
caller retrying in a loop never hot-loops against a dead cluster (`runtime.clients.kafka_admin`)."""

END_LOOKUP = Backoff(first_seconds=0.5, most_seconds=0.5)
"""A partition's end offset is asked again every 0.5 s while its leader is briefly away, until
the reader is stopped (`runtime.clients.kafka_consumer.TopicReader`)."""

COMMAND_APPLY = Backoff(first_seconds=0.5, most_seconds=10.0)
"""One command's apply; gives up after the setting `executor_retry_seconds`, so that the
command's result reports the error and the pipeline decides what next."""

REPLICA_PLACEMENT = Backoff(first_seconds=0.5, most_seconds=0.5)
"""AlterReplicaLogDirs asked again every 0.5 s while the broker does not host the replica yet
(it is being created); gives up after the setting `executor_log_dir_wait_seconds`."""

# The pipeline (streams/).
REDIS_OUTAGE = Backoff(first_seconds=0.2, most_seconds=5.0, give_up_after_seconds=300.0)
"""A Redis restart is ridden out for up to 5 minutes; then the batch fails and Spark runs it again
when the query is restarted."""

PUBLISH_OUTAGE = Backoff(first_seconds=0.5, most_seconds=30.0)
"""A committed outbox is published however long Kafka is away (the next batch waits for it)."""

QUERY_RESTART = Backoff(first_seconds=1.0, most_seconds=60.0)
"""A failed streaming query is started again, 1 s doubling to a minute between attempts."""


def compute_wait(delays: Iterator[float], error: Exception, backoff: Backoff) -> float:
    """The next wait of a loop that retries on its own (a watcher that polls forever): the next
    delay, or longer when a transient error says its client is backing off already."""
    wait = next(delays)
    if isinstance(error, TransientError):
        wait = max(wait, min(error.retry_after_seconds, backoff.most_seconds))
    return wait


def retry_transient(action: Callable[[], T], doing: str, backoff: Backoff = UNTIL_STOPPED,
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
