"""The one door to Redis: connecting, the one translation of Redis errors, riding out outages.

- `connect_redis(url, ...)`: every component's client (`redis://`, `rediss://` for TLS; with
  `redis+cluster://` or `rediss+cluster://`, redis-py's Redis Cluster client, given any node:
  it follows the slots, MOVED and ASK itself), with connect and socket timeouts (settings
  `redis_connect_timeout_seconds`, `redis_socket_timeout_seconds`) so that a Redis that is away
  fails a call instead of hanging it.
- `translate_redis_error`: a lost connection, a timeout, a Redis still loading its AOF, or a
  Redis Cluster moving slots (TRYAGAIN, CLUSTERDOWN, ASK/MOVED the client could not follow) →
  `TransientError` (code REDIS_UNAVAILABLE, retry); a MOVED answer to a plain client → the URL
  names a cluster node: `PermanentError` saying to use `redis+cluster://`; credentials Redis
  refuses (WRONGPASS, NOAUTH, AUTH without a password configured; also when a Redis Cluster
  client could reach no node for that reason) → `PermanentError` (code
  REDIS_AUTHENTICATION_FAILED: retrying a wrong password never helps, so the process stops with
  one line); any other Redis error (a script error, a wrong type) → `PermanentError` (code
  REDIS_ERROR). Nothing else in the product inspects one.
- `check_redis(client, url)`: one PING at a process's start, so that a wrong password or URL
  fails the process before it does anything (a Redis that is away is waited for).
- The URL's password is registered with `schemas.redaction` when a client is made, so it is
  masked in every output, whatever text of redis-py carries it.
- `retry_redis(action, doing, backoff, stop)`: `action()` with its Redis errors translated and
  the transient ones retried under the one retry policy (`runtime.backoff`).
- `controller_state_loader`: read-only access to the pipeline's `ControllerState` for the
  operator tools (requests go through the requests topic, never into Redis).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, TypeVar

from runtime.backoff import UNTIL_STOPPED, Backoff, retry_transient
from schemas.errors import InvalidConfigError, PermanentError, ReassignerError, TransientError
from schemas.redaction import redact, register_secret
from state.model import ControllerState

T = TypeVar("T")

log = logging.getLogger(__name__)

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


def connect_redis(url: str, socket_timeout: float = 10.0, connect_timeout: float = 5.0):
    """A client for `url`: `redis.Redis`, or `redis.RedisCluster` for a `+cluster` scheme
    (connections are made lazily, on the first call). The timeouts are the settings'."""
    import redis

    register_url_password(url)
    scheme, separator, rest = url.partition("://")
    if scheme in CLUSTER_SCHEMES:
        # The cluster client reads the slot map when it is made: a cluster that is away fails
        # here, in one line (the process is restarted by its supervisor), not later.
        return call_redis(lambda: redis.RedisCluster.from_url(
            f"{CLUSTER_SCHEMES[scheme]}{separator}{rest}", socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout), f"connecting to the Redis Cluster at {redact(url)}")
    try:
        return redis.Redis.from_url(url, socket_timeout=socket_timeout, socket_connect_timeout=connect_timeout,
                                    health_check_interval=30)
    except ValueError as error:  # redis-py's refusal of the URL's form (scheme, port, db)
        raise InvalidConfigError(f"--redis-url {url}: {error}; expected redis://[user:password@]host:port/db "
                                 "(rediss:// with TLS, redis+cluster:// for a Redis Cluster)") from None


def register_url_password(url: str) -> None:
    """Register the password of `url`'s user info (as written, and percent-decoded as redis-py
    sends it) with `schemas.redaction`."""
    from urllib.parse import unquote, urlsplit

    try:
        password = urlsplit(url).password
    except ValueError:  # a URL too broken to split: redact()'s URL shape still masks it
        return
    if password:
        register_secret(password)
        register_secret(unquote(password))


def check_redis(client, url: str, backoff: Backoff = UNTIL_STOPPED, stop: threading.Event | None = None) -> None:
    """One PING through `client`, at a process's start: refused credentials (or another
    permanent error) raise at once; a Redis that is away is waited for under `backoff` until
    `stop` is set."""
    retry_redis(client.ping, f"connecting to Redis at {redact(url)}", backoff, stop)


def translate_redis_error(error: Exception, doing: str) -> ReassignerError:
    """The `schemas.errors` form of an exception raised by redis-py while `doing`."""
    import redis

    if isinstance(error, ReassignerError):
        return error
    from redis.exceptions import (AskError, ClusterDownError, ClusterError, MovedError, RedisClusterException,
                                  TryAgainError)

    detail = f"{type(error).__name__}: {error}"
    refused = _authentication_failure(error)
    if refused is not None:
        permanent = PermanentError(f"{doing}: Redis refused the credentials ({type(refused).__name__}: "
                                   f"{refused}); check the user name and password of --redis-url "
                                   "(REASSIGNER_REDIS_URL) and the Redis ACL user")
        permanent.code = "REDIS_AUTHENTICATION_FAILED"
        return permanent
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


def _authentication_failure(error: BaseException) -> BaseException | None:
    """The redis-py authentication error in `error` or in its causes (a Redis Cluster client
    that reached no node wraps the reason), or None."""
    from redis.exceptions import AuthenticationError, AuthenticationWrongNumberOfArgsError

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (AuthenticationError, AuthenticationWrongNumberOfArgsError)):
            return current
        if str(current).startswith(("WRONGPASS", "NOAUTH")):
            return current
        current = current.__cause__ or current.__context__
    return None


def call_redis(action: Callable[[], T], doing: str) -> T:
    """`action()` with its Redis errors translated (see `translate_redis_error`)."""
    import redis
    from redis.exceptions import RedisClusterException

    try:
        return action()
    except (redis.RedisError, RedisClusterException, ConnectionError, TimeoutError) as error:
        raise translate_redis_error(error, doing) from None


def retry_redis(action: Callable[[], T], doing: str, backoff: Backoff = UNTIL_STOPPED,
                stop: threading.Event | None = None) -> T:
    """`action()`, riding out a Redis outage under `backoff` (see `retry_transient`)."""
    return retry_transient(lambda: call_redis(action, doing), doing, backoff, stop, log)


def controller_state_loader(redis_url: str, cluster_name: str, socket_timeout: float = 10.0,
                            connect_timeout: float = 5.0, require_state: bool = False) -> Callable[[], ControllerState]:
    """A function that loads the current state each time it is called (one client, reused);
    a Redis that is away raises `TransientError` (the caller shows it and tries again later).
    With `require_state`, a cluster this Redis holds no state of raises `InvalidConfigError`
    naming the clusters it does hold (a read command given a wrong name must not show an empty
    cluster)."""
    from state.controller_store import ControllerStore, list_cluster_names

    store = ControllerStore(connect_redis(redis_url, socket_timeout, connect_timeout), cluster_name)

    def load() -> ControllerState:
        if require_state and not store.has_state():
            held = list_cluster_names(store.client)
            where = (f"it holds the state of {', '.join(repr(n) for n in held)}: pass --cluster-name (or "
                     "REASSIGNER_CLUSTER_NAME)" if held else
                     "it holds no cluster's state: is a pipeline (`reassigner run`) started against this Redis?")
            raise InvalidConfigError(f"Redis at {redact(redis_url)} holds no state of cluster {cluster_name!r}; "
                                     f"{where}")
        return store.load()

    return lambda: call_redis(load, f"reading the controller state from {redact(redis_url)}")
