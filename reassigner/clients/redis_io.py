"""The operator package's one door to Redis: read the ControllerState the pipeline keeps there.

Read-only: nothing in the operator package writes the pipeline's state (requests go through the
requests topic). Redis errors are translated into `TransientError` here, in one function.
"""

from __future__ import annotations

from typing import Callable

from state.model import ControllerState
from reassigner.errors import TransientError


def controller_state_loader(redis_url: str, cluster_name: str) -> Callable[[], ControllerState]:
    """A function that loads the current state each time it is called (one client, reused)."""
    import redis

    from state.controller_store import ControllerStore

    client = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=5)
    store = ControllerStore(client, cluster_name)

    def load() -> ControllerState:
        try:
            return store.load()
        except redis.RedisError as error:
            raise translate_redis_error(error, redis_url) from None

    return load


def translate_redis_error(error: Exception, redis_url: str) -> TransientError:
    return TransientError(f"reading the controller state from {redis_url}: {type(error).__name__}: "
                          f"{error}; is Redis running (--redis-url)?", retry_after_seconds=1.0)
