"""The one door to Redis: connecting, the one translation of Redis errors, riding out outages.

- `connect_redis(url)`: every component's client (`redis://`, `rediss://` for TLS), with
  connect and socket timeouts so that a Redis that is away fails a call instead of hanging it.
- `translate_redis_error`: a lost connection, a timeout or a Redis still loading its AOF →
  `TransientError` (code REDIS_UNAVAILABLE, retry); any other Redis error (a script error, a
  wrong type) → `PermanentError` (code REDIS_ERROR). Nothing else in the product inspects one.
- `retry_redis(action, doing, backoff, stop)`: `action()` with its Redis errors translated and
  the transient ones retried under the one retry policy (`reassigner.clients.backoff`).
- `controller_state_loader`: read-only access to the pipeline's `ControllerState` for the
  operator tools (requests go through the requests topic, never into Redis).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, TypeVar

from reassigner.clients.backoff import Backoff, retry_transient
from reassigner.errors import PermanentError, ReassignerError, TransientError
from state.model import ControllerState

T = TypeVar("T")

log = logging.getLogger(__name__)

# The first commit of a very large view is one Lua script that keeps Redis busy for seconds:
# the socket timeout must outlast it, or a healthy Redis would look like an outage.
SOCKET_TIMEOUT_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 5.0


def connect_redis(url: str):
    """A `redis.Redis` client for `url` (connections are made lazily, on the first call)."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT_SECONDS,
                                socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
                                health_check_interval=30)


def translate_redis_error(error: Exception, doing: str) -> ReassignerError:
    """The `reassigner.errors` form of an exception raised by redis-py while `doing`."""
    import redis

    if isinstance(error, ReassignerError):
        return error
    detail = f"{type(error).__name__}: {error}"
    if isinstance(error, (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError,
                          ConnectionError, TimeoutError)):
        transient = TransientError(f"{doing}: Redis unavailable ({detail}); is Redis running "
                                   "(--redis-url)?", retry_after_seconds=0.5)
        transient.code = "REDIS_UNAVAILABLE"
        return transient
    permanent = PermanentError(f"{doing}: {detail}")
    permanent.code = "REDIS_ERROR"
    return permanent


def call_redis(action: Callable[[], T], doing: str) -> T:
    """`action()` with its Redis errors translated (see `translate_redis_error`)."""
    import redis

    try:
        return action()
    except (redis.RedisError, ConnectionError, TimeoutError) as error:
        raise translate_redis_error(error, doing) from None


def retry_redis(action: Callable[[], T], doing: str, backoff: Backoff = Backoff(),
                stop: threading.Event | None = None) -> T:
    """`action()`, riding out a Redis outage under `backoff` (see `retry_transient`)."""
    return retry_transient(lambda: call_redis(action, doing), doing, backoff, stop, log)


def controller_state_loader(redis_url: str, cluster_name: str) -> Callable[[], ControllerState]:
    """A function that loads the current state each time it is called (one client, reused);
    a Redis that is away raises `TransientError` (the caller shows it and tries again later)."""
    from state.controller_store import ControllerStore

    store = ControllerStore(connect_redis(redis_url), cluster_name)
    return lambda: call_redis(store.load, f"reading the controller state from {redis_url}")
