"""Where the product's clients connect: explicit settings first, else the local stack's.

A command given no `--bootstrap-server` (or `--redis-url`) uses the local stack whose state file
is in `stack_dir` — the one `reassigner local up` or `make demo` started — so that trying the
product locally needs no flags at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from reassigner.errors import InvalidConfigError, StackNotUpError
from reassigner.dev.local.stack import LocalStack
from reassigner.settings import Settings


@dataclass(frozen=True)
class Connections:
    bootstrap_servers: str
    redis_url: str


def resolve_connections(settings: Settings, need_redis: bool = True) -> Connections:
    bootstrap, redis_url = settings.bootstrap_servers, settings.redis_url
    if bootstrap is None or (need_redis and redis_url is None):
        try:
            stack = LocalStack(settings.stack_dir, settings.cache_dir).load()
        except StackNotUpError:
            missing = "--bootstrap-server" if bootstrap is None else "--redis-url"
            raise InvalidConfigError(
                f"no {missing} given and no local stack at {settings.stack_dir}; pass "
                f"{missing} (or REASSIGNER_{missing[2:].replace('-', '_').upper()}), "
                "or start a local stack with `reassigner local up`"
            ) from None
        bootstrap = bootstrap or stack.bootstrap_servers
        redis_url = redis_url or stack.redis_url
    return Connections(bootstrap, redis_url or "")
