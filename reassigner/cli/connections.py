"""Where the product's clients connect: explicit settings first, else the local stack's.

A command given no `--bootstrap-server` (or `--redis-url`) uses the local stack whose state file
is in `stack_dir` — the one `reassigner local up` or `make demo` started — so that trying the
product locally needs no flags at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from schemas.errors import InvalidConfigError, StackNotUpError
from reassigner.dev.local.stack import LocalStack
from runtime.settings import Settings


@dataclass(frozen=True)
class Connections:
    bootstrap_servers: str
    redis_url: str
    command_config: Path | None = None
    """The Kafka client settings file: `--command-config`, else a secured local stack's."""


def resolve_connections(settings: Settings, need_redis: bool = True) -> Connections:
    bootstrap, redis_url = settings.bootstrap_servers, settings.redis_url
    command_config = settings.command_config
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
        if bootstrap is None and command_config is None:
            # The stack's brokers take the stack's client settings (a secured stack's principal).
            command_config = stack.client_properties
        bootstrap = bootstrap or stack.bootstrap_servers
        redis_url = redis_url or stack.redis_url
    return Connections(bootstrap, redis_url or "", command_config)
