"""What every command shares, declared once: the shared flags (`takes_flags` gives a command the
ones it takes, their values reach it as one `SharedFlags`), the logging setup, the stop-on-signal
event and the metrics endpoint (`start_metrics_endpoint`).

Every shared flag defaults to None, meaning "not given": `runtime.settings.load_settings` then
takes the environment (`REASSIGNER_<FIELD>`), the config file, and the settings' defaults, in
that order; with no bootstrap server or Redis URL anywhere, `connections.connect` falls back on
the local stack.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import typer

from schemas.redaction import redact

BootstrapServer = typer.Option(None, "--bootstrap-server",
                               help="Kafka host:port[,host:port...] (default: the local stack's).")
RedisUrl = typer.Option(None, "--redis-url", help="Redis URL of the state (default: the local stack's).")
CommandConfig = typer.Option(None, "--command-config",
                             help="Kafka client properties file (security.protocol, sasl.*, ssl.*), "
                             "as for Kafka's own tools.")
StackDir = typer.Option(None, "--stack-dir",
                        help="The local stack to use when no --bootstrap-server / --redis-url is given.")
ClusterName = typer.Option(None, "--cluster-name", help="Redis hash tag of this cluster's keys (default local).")
TopicPrefix = typer.Option(None, "--topic-prefix", help="Prefix of the product's topics (default reassigner).")
CommandSigningKeyFile = typer.Option(
    None, "--command-signing-key-file",
    help="File holding the command signing key (`openssl rand -hex 32 > FILE`), the same for `run` "
    "and `execute`: the pipeline signs its commands, the executor refuses any other (default: none).")
MetricsPort = typer.Option(None, "--metrics-port", min=0, max=65535,
                           help="Serve Prometheus metrics on this port, /metrics (0 = any free one; "
                           "default: not served).")
MetricsHost = typer.Option(None, "--metrics-host", help="Address of the metrics endpoint (default "
                           "127.0.0.1); another than loopback needs --allow-remote-metrics.")
AllowRemoteMetrics = typer.Option(False, "--allow-remote-metrics",
                                  help="Serve the metrics on a non-loopback --metrics-host (a trusted network).")
AsJson = typer.Option(False, "--json", help="Print one JSON document instead of tables.")


@dataclass(frozen=True)
class SharedFlags:
    """The shared flags a command was given (None: not given)."""

    bootstrap_server: Optional[str] = None
    command_config: Optional[Path] = None
    redis_url: Optional[str] = None
    stack_dir: Optional[Path] = None
    cluster_name: Optional[str] = None
    topic_prefix: Optional[str] = None
    command_signing_key_file: Optional[Path] = None
    metrics_port: Optional[int] = None
    metrics_host: Optional[str] = None
    allow_remote_metrics: bool = False

    def settings_overrides(self) -> dict[str, object]:
        """The flags as `load_settings` overrides (None: not given, so not overriding)."""
        return {"bootstrap_servers": self.bootstrap_server, "command_config": self.command_config,
                "redis_url": self.redis_url, "stack_dir": self.stack_dir, "cluster_name": self.cluster_name,
                "topic_prefix": self.topic_prefix, "command_signing_key_file": self.command_signing_key_file,
                "metrics_port": self.metrics_port, "metrics_host": self.metrics_host,
                "metrics_allow_remote": self.allow_remote_metrics or None}


FLAG_OPTIONS: dict[str, tuple[Any, Any]] = {
    "bootstrap_server": (Optional[str], BootstrapServer),
    "command_config": (Optional[Path], CommandConfig),
    "redis_url": (Optional[str], RedisUrl),
    "stack_dir": (Optional[Path], StackDir),
    "cluster_name": (Optional[str], ClusterName),
    "topic_prefix": (Optional[str], TopicPrefix),
    "command_signing_key_file": (Optional[Path], CommandSigningKeyFile),
    "metrics_port": (Optional[int], MetricsPort),
    "metrics_host": (Optional[str], MetricsHost),
    "allow_remote_metrics": (bool, AllowRemoteMetrics),
}
"""Each field of `SharedFlags`: its type and its typer option."""

def command_group(**settings: Any) -> typer.Typer:
    """A typer app (the root or a command group) as every one of ours is made: help printed by
    click's plain formatter (as Kafka's own tools print theirs: no boxes, no `<bool>` on every
    flag, long option names whole), no arguments = the help unless `settings` say otherwise."""
    return typer.Typer(**{"rich_markup_mode": None, "no_args_is_help": True, **settings})


CONNECTION_FLAGS = ("bootstrap_server", "command_config", "stack_dir", "cluster_name", "topic_prefix", "redis_url")
"""What the operator commands take: where Kafka and Redis are, and which deployment's keys and topics."""
METRICS_FLAGS = ("metrics_port", "metrics_host", "allow_remote_metrics")
"""What the long-running processes take to serve their own metrics."""


def takes_flags(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the shared flags `names` (fields of `SharedFlags`): they are added to its
    options, after its own, as `FLAG_OPTIONS` declares them, and their values reach the command
    as one `SharedFlags`, its keyword argument `flags`."""
    unknown = set(names) - set(FLAG_OPTIONS)
    if unknown:
        raise ValueError(f"no shared flag {sorted(unknown)}")

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(command, eval_str=True)
        parameters = [p for p in own.parameters.values() if p.name != "flags"]
        parameters += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=FLAG_OPTIONS[name][1],
                                         annotation=FLAG_OPTIONS[name][0]) for name in names]

        @functools.wraps(command)
        def with_flags(*args: Any, **kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in names if name in kwargs}
            return command(*args, flags=SharedFlags(**given), **kwargs)

        with_flags.__signature__ = own.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_flags.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_flags

    return decorate


def start_metrics_endpoint(settings, process: str) -> int | None:
    """Serve the metrics `process` counts (`runtime.metrics`: pipeline, watcher or executor),
    labelled with the cluster's name, when `metrics_port` is set; the port
    it listens on (None: not served). Loopback only unless `metrics_allow_remote`, as the status
    server's rule: an address other machines can reach is refused, or served with a warning."""
    from schemas.errors import InvalidConfigError
    from runtime.metrics import serve_metrics
    from reassigner.operator.status_server import is_loopback

    if settings.metrics_port is None:
        return None
    host = settings.metrics_host
    if not is_loopback(host):
        if not settings.metrics_allow_remote:
            raise InvalidConfigError(
                f"--metrics-host {host!r} is reachable from the network: pass --allow-remote-metrics "
                "(REASSIGNER_METRICS_ALLOW_REMOTE=true) if the network in front is trusted to read the "
                "metrics, or keep the default 127.0.0.1 and scrape through a proxy")
        logging.getLogger(__name__).warning("metrics served on %r, reachable from the network", host)
    try:
        _server, port = serve_metrics(host, settings.metrics_port, process, settings.cluster_name)
    except OSError as error:
        raise InvalidConfigError(f"--metrics-port {settings.metrics_port} on {host}: cannot listen "
                                 f"({error.strerror or error})") from None
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL is bracketed
    typer.echo(f"metrics on http://{shown}:{port}/metrics", err=True)
    return port


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RedactingFormatter(logging.Formatter):
    """The one log format, each line (its traceback included) through
    `schemas.redaction.redact`: no log line of any library shows a password."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def configure_logging(verbose: bool, level: int = logging.INFO, verbose_level: int = logging.DEBUG) -> None:
    """One log format for every process, at `level` (`verbose_level` with `--verbose`), redacted
    (`RedactingFormatter`). kafka-python's own lines are kept to warnings (its connection
    chatter would drown the product's); librdkafka's (confluent-kafka's clients route them to the
    `librdkafka` logger) to warnings, its informational lines with `--verbose`."""
    logging.basicConfig(level=verbose_level if verbose else level, format=LOG_FORMAT)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(RedactingFormatter(LOG_FORMAT))
        handler.addFilter(quiet_py4j_chatter)
    logging.getLogger("kafka").setLevel(logging.WARNING if verbose else logging.CRITICAL)
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its connection chatter, even with --verbose
    logging.getLogger("librdkafka").setLevel(logging.INFO if verbose else logging.WARNING)


def quiet_py4j_chatter(record: logging.LogRecord) -> bool:
    """Drop py4j's informational lines: when Spark's JVM goes (a stop, SIGTERM to the process
    group) py4j logs every closed connection, with tracebacks, at INFO, some through the root
    logger (`logging.info(..., exc_info=True)`), so the logger's level alone cannot hold them;
    after a stop signal, its errors too."""
    if f"{os.sep}py4j{os.sep}" not in record.pathname:
        return True
    # Once a stop signal came, Spark's JVM may be gone (the signal reached the whole process
    # group): py4j's errors about lost connections are the stop itself, not news.
    return record.levelno >= logging.WARNING and not stop_requested.is_set()


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

stop_requested = threading.Event()
"""Set by every stop handler of the command line: a SIGTERM or Ctrl-C has been received, so an
error met after it is part of stopping (`main` then exits 0 in one line, no traceback)."""


class StoppedBySignal(BaseException):
    """Raised by a stop handler while a command is still starting (nothing of its own in flight):
    it leaves at once, exit 0. A BaseException, so that no `except Exception` of a retry loop
    takes it for an error."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def note_stop_signal(signum: int) -> None:
    """What every stop handler does first: log it once and set `stop_requested`."""
    if not stop_requested.is_set():
        logging.getLogger(__name__).info("stopping on %s", signal.Signals(signum).name)
    stop_requested.set()


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT (Ctrl-C), so that loops end between two steps."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def handler(signum, _frame) -> None:
        note_stop_signal(signum)
        stop.set()

    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
