"""The one door to Redis: connecting, the one translation of Redis errors, riding out outages.

- `connect_redis(url, ...)`: every component's client (`redis://`, `rediss://` for TLS; with
  `redis+cluster://` or `rediss+cluster://`, redis-py's Redis Cluster client, given any node:
  it follows the slots, MOVED and ASK itself), with connect and socket timeouts (settings
  `redis_connect_timeout_seconds`, `redis_socket_timeout_seconds`) so that a Redis that is away
  fails a call instead of hanging it.
- `translate_redis_error`: a lost connection, a timeout, a Redis still loading its AOF, or a
  Redis Cluster moving slots (TRYAGAIN, CLUSTERDOWN, ASK/MOVED the client could not follow) →
  `TransientError` (code REDIS_UNAVAILABLE, retry); a MOVED answer to a plain client → the URL
  names a cluster node: `PermanentError` saying to use `redis+cluster://`; any other Redis error
  (a script error, a wrong type) → `PermanentError` (code REDIS_ERROR). Nothing else in the
  product inspects one.
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

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def connect_redis(url: str, socket_timeout: float = 10.0, connect_timeout: float = 5.0):
    """A client for `url`: `redis.Redis`, or `redis.RedisCluster` for a `+cluster` scheme
    (connections are made lazily, on the first call). The timeouts are the settings'."""
    import redis

    scheme, separator, rest = url.partition("://")
    if scheme in CLUSTER_SCHEMES:
        # The cluster client reads the slot map when it is made: a cluster that is away fails
        # here, in one line (the process is restarted by its supervisor), not later.
        return call_redis(lambda: redis.RedisCluster.from_url(
            f"{CLUSTER_SCHEMES[scheme]}{separator}{rest}", socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout), f"connecting to the Redis Cluster at {redact_url(url)}")
    return redis.Redis.from_url(url, socket_timeout=socket_timeout, socket_connect_timeout=connect_timeout,
                                health_check_interval=30)


def translate_redis_error(error: Exception, doing: str) -> ReassignerError:
    """The `reassigner.errors` form of an exception raised by redis-py while `doing`."""
    import redis

    if isinstance(error, ReassignerError):
        return error
    from redis.exceptions import (AskError, ClusterDownError, ClusterError, MovedError, RedisClusterException,
                                  TryAgainError)

    detail = f"{type(error).__name__}: {error}"
    if isinstance(error, MovedError) or (isinstance(error, redis.ResponseError) and str(error).startswith("MOVED")):
        permanent = PermanentError(f"{doing}: the Redis at the URL is a Redis Cluster node that does not "
                                   f"hold the product's keys ({error}): use redis+cluster://host:port "
                                   "(or rediss+cluster://) with any node of the cluster")
        permanent.code = "REDIS_ERROR"
        return permanent
    if isinstance(error, (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError,
                          ConnectionError, TimeoutError, ClusterDownError, TryAgainError, AskError,
                          ClusterError, RedisClusterException)):
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
    from redis.exceptions import RedisClusterException

    try:
        return action()
    except (redis.RedisError, RedisClusterException, ConnectionError, TimeoutError) as error:
        raise translate_redis_error(error, doing) from None


def redact_url(url: str) -> str:
    """`url` without a password (`redis://user:secret@host` → `redis://user:***@host`)."""
    scheme, separator, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{separator}{credentials.split(':', 1)[0]}:***@{host}"


def retry_redis(action: Callable[[], T], doing: str, backoff: Backoff = Backoff(),
                stop: threading.Event | None = None) -> T:
    """`action()`, riding out a Redis outage under `backoff` (see `retry_transient`)."""
    return retry_transient(lambda: call_redis(action, doing), doing, backoff, stop, log)


def controller_state_loader(redis_url: str, cluster_name: str, socket_timeout: float = 10.0,
                            connect_timeout: float = 5.0) -> Callable[[], ControllerState]:
    """A function that loads the current state each time it is called (one client, reused);
    a Redis that is away raises `TransientError` (the caller shows it and tries again later)."""
    from state.controller_store import ControllerStore

    store = ControllerStore(connect_redis(redis_url, socket_timeout, connect_timeout), cluster_name)
    return lambda: call_redis(store.load, f"reading the controller state from {redact_url(redis_url)}")
