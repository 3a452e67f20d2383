"""Where the product's clients connect, for every command: the shared flags (`options.SharedFlags`)
over the environment and the config file (`runtime.settings.load_settings`), else the local
stack's.

- `connect(flags, ...)`: what a command calls: the settings, where to connect (`Connected`), and
  the Kafka client settings file read, each failing in one line before anything connects;
- `load(flags, ...)` then `resolve(settings, ...)`: the same in steps, for a command that checks
  more in between (`run`: the signing key and the metrics port before connecting; `execute`:
  the metrics port before the client settings). `Connected.client_config` reads the file at its
  first use.

A command given no `--bootstrap-server` (or no `--redis-url`, when it needs Redis) uses the local
stack whose state file is in `stack_dir` (the one `reassigner local up` or `make demo` started),
so that trying the product locally needs no flags at all; the stack's brokers then take the
stack's client settings file (a secured stack's principal). A command that needs no Kafka (the
read commands: the state is in Redis) never looks for it, and names `--redis-url` when it finds
neither.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from reassigner.cli.options import SharedFlags
from schemas.errors import InvalidConfigError, StackNotUpError

if TYPE_CHECKING:
    from runtime.clients.client_config import ClientConfig
    from runtime.settings import Settings

# The settings (pydantic), the local stack and the clients are imported where they are used,
# not here: every command imports this module, and `--version` and `--help` must answer at once.

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Connections:
    bootstrap_servers: str
    redis_url: str
    command_config: Path | None = None
    """The Kafka client settings file: `--command-config`, else a secured local stack's."""


def resolve_connections(settings: Settings, need_redis: bool = True, need_kafka: bool = True) -> Connections:
    """Where Kafka and Redis are: the settings', else the local stack's (see the module doc)."""
    bootstrap, redis_url = settings.bootstrap_servers, settings.redis_url
    command_config = settings.command_config
    missing_kafka, missing_redis = need_kafka and bootstrap is None, need_redis and redis_url is None
    if missing_kafka or missing_redis:
        from reassigner.dev.local.stack import LocalStack

        try:
            stack = LocalStack(settings.stack_dir, settings.cache_dir).load()
        except StackNotUpError:
            missing = "--bootstrap-server" if missing_kafka else "--redis-url"
            raise InvalidConfigError(
                f"no {missing} given and no local stack at {settings.stack_dir}; pass "
                f"{missing} (or REASSIGNER_{missing[2:].replace('-', '_').upper()}), "
                "or start a local stack with `reassigner local up`"
            ) from None
        if missing_kafka and command_config is None:
            command_config = stack.client_properties
        bootstrap = bootstrap or stack.bootstrap_servers
        redis_url = redis_url or stack.redis_url
    return Connections(bootstrap or "", redis_url or "", command_config)


@dataclass(frozen=True)
class Connected:
    """A command's settings and where its clients connect."""

    given: Settings
    """The settings as the flags, the environment and the config file say."""
    settings: Settings
    """The same, with where the clients connect filled in (`bootstrap_servers`, `redis_url`,
    `command_config`): what the processes are handed."""

    @property
    def bootstrap(self) -> str:
        return self.settings.bootstrap_servers or ""

    @property
    def redis_url(self) -> str:
        return self.settings.redis_url or ""

    def topic(self, suffix: str) -> str:
        return self.settings.topic(suffix)

    @cached_property
    def client_config(self) -> ClientConfig:
        """The Kafka client settings (`--command-config`), read at the first use."""
        from runtime.clients.client_config import read_command_config

        config = read_command_config(self.settings.command_config)
        if config.ignored:
            log.info("--command-config: the Python clients ignore %s", ", ".join(config.ignored))
        return config

    def ensure_topics(self, *suffixes: str) -> None:
        """Create the product's topics `suffixes` if missing; before a request is sent (suffix
        "requests"), check that this principal may write it."""
        from runtime.clients.kafka_access import check_kafka_access
        from runtime.clients.kafka_admin import ensure_topics

        wanted = [self.topic(s) for s in suffixes]
        if "requests" in suffixes:
            seen = check_kafka_access(self.bootstrap, self.client_config, "request", [self.topic("requests")],
                                      self.settings.topic_prefix)
            if seen is not None and set(wanted) <= seen:
                return  # all there: no second client to learn it (a request answers sooner)
        ensure_topics(self.bootstrap, self.client_config, wanted, self.settings.event_topic_partitions)

    def state_loader(self, require_state: bool = False):
        """A function that loads the controller state from Redis (`ControllerStore.load`)."""
        from runtime.clients.redis_io import controller_state_loader

        return controller_state_loader(self.redis_url, self.settings.cluster_name,
                                       self.settings.redis_socket_timeout_seconds,
                                       self.settings.redis_connect_timeout_seconds, require_state)

    def load_state(self):
        """The state of the named cluster, for a read command: a name the Redis holds no state of
        is an error naming those it holds, never an empty cluster."""
        return self.state_loader(require_state=True)()


def load(flags: SharedFlags, **more: object) -> Settings:
    """The settings: `flags` and `more` (a command's own, None: not given) over the environment
    and the config file."""
    from runtime.settings import load_settings

    return load_settings(**flags.settings_overrides(), **more)


def resolve(settings: Settings, *, need_kafka: bool = True, need_redis: bool = True) -> Connected:
    """`settings` with where the clients connect filled in (see the module doc)."""
    connections = resolve_connections(settings, need_redis=need_redis, need_kafka=need_kafka)
    return Connected(settings, settings.model_copy(update={
        "bootstrap_servers": connections.bootstrap_servers or settings.bootstrap_servers,
        "redis_url": connections.redis_url or settings.redis_url,
        "command_config": connections.command_config}))


def connect(flags: SharedFlags, *, need_kafka: bool = True, need_redis: bool = True, **more: object) -> Connected:
    """A command's settings and connections from its flags: `load`, `resolve`, then the Kafka
    client settings read, so that a bad file fails here, before anything connects."""
    connected = resolve(load(flags, **more), need_kafka=need_kafka, need_redis=need_redis)
    connected.client_config  # read now (a cached property)
    return connected
