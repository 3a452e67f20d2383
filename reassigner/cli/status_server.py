"""`reassigner status-server`: serve the status page, the JSON API, the write API and Prometheus
metrics (`reassigner.operator.status_server`) until Ctrl-C or SIGTERM.

Refused before anything connects: a token file that cannot be read or is empty, a write token
equal to the read token, and an address other machines reach without a read token (unless
`--allow-unauthenticated`, which warns). The tokens: `--token-file` / `--write-token-file`, else
the settings `status_token` / `status_write_token` (docs/security.md). Once it listens, one JSON
line on stdout gives its URL and port.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Optional

import typer

from reassigner.cli.connections import connect
from reassigner.cli.options import CONNECTION_FLAGS, SharedFlags, configure_logging, stop_on_signals, takes_flags
from reassigner.cli.printing import err_console
from reassigner.cli.requests import request_channel
from schemas.errors import InvalidInputError
from schemas.redaction import register_secret


@takes_flags(*CONNECTION_FLAGS)
def status_server(
    port: int = typer.Option(8080, "--port", min=0, max=65535, help="TCP port (0 = any free one)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; another than loopback "
                             "needs a token (or --allow-unauthenticated)."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", help="A file holding the token every "
                                              "request must carry (default: REASSIGNER_STATUS_TOKEN)."),
    write_token_file: Optional[Path] = typer.Option(None, "--write-token-file", help="A file holding the "
                                                    "token of the write API (POST /api/...; default: "
                                                    "REASSIGNER_STATUS_WRITE_TOKEN; none: writes are off)."),
    allow_unauthenticated: bool = typer.Option(False, "--allow-unauthenticated",
                                               help="Serve without a token on a non-loopback --host "
                                               "(a trusted network or an authenticating proxy in front)."),
    alert_capacity: int = typer.Option(200, "--alert-capacity", min=1, help="Alerts kept for the page and API."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every request."),
    *, flags: SharedFlags,
) -> None:
    """Serve the status page (/), the JSON API (/api/...) and Prometheus metrics (/metrics)."""
    from reassigner.operator.status_server import (StatusServer, require_distinct_tokens,
                                                   require_token_off_loopback)
    from reassigner.operator.status_sources import AlertBook, StateCache, watch_alert_topics
    from runtime.settings import compute_policy

    configure_logging(verbose, logging.WARNING, logging.INFO)
    connected = connect(flags)
    settings = connected.settings
    token = read_token(token_file) if token_file is not None else None
    if token is None and settings.status_token is not None:
        token = settings.status_token.get_secret_value().strip() or None
    register_secret(token)
    write_token = read_token(write_token_file, "--write-token-file") if write_token_file is not None else None
    if write_token is None and settings.status_write_token is not None:
        write_token = settings.status_write_token.get_secret_value().strip() or None
    register_secret(write_token)
    require_distinct_tokens(token, write_token)  # before connecting
    warning = require_token_off_loopback(host, token is not None, allow_unauthenticated)  # before connecting
    connected.ensure_topics("alerts", "command-results", *(("requests",) if write_token else ()))
    book = AlertBook(alert_capacity)
    alerts_topic, results_topic = connected.topic("alerts"), connected.topic("command-results")
    server = StatusServer(
        host=host, port=port, cluster_name=settings.cluster_name, cache=StateCache(connected.state_loader()),
        book=book, default_replica_movements=settings.max_replica_movements,
        policy=compute_policy(settings), token=token, write_token=write_token,
        requests=request_channel(connected, "reassigner-status-server") if write_token else None,
        watch=lambda stop: watch_alert_topics(connected.bootstrap, connected.client_config, alerts_topic,
                                              results_topic, book, stop),
    ).start()
    if warning:
        logging.getLogger(__name__).warning(warning)
        err_console.print(f"[yellow]warning: {warning}[/]")
    access = ("token required" if token else "no token") + (
        "; write API on (POST /api/..., write token)" if write_token else "; write API off")
    err_console.print(f"status page on http://{host}:{server.port}/ (API /api/status, metrics /metrics; "
                      f"{access}); Ctrl-C stops")
    print(json.dumps({"url": f"http://{host}:{server.port}/", "port": server.port}), flush=True)
    with stop_on_signals() as stop:
        stop.wait()
    server.stop()


def read_token(path: Path, flag: str = "--token-file") -> str:
    """The token in the file `path` (given with `flag`), stripped; an empty file is refused."""
    try:
        token = path.read_text().strip()
    except OSError as error:
        raise InvalidInputError(f"{flag} {path}: cannot read it: {error.strerror or error}") from None
    if not token:
        raise InvalidInputError(f"{flag} {path}: the file is empty; put the token in it")
    return token


def register(app: typer.Typer) -> None:
    app.command("status-server")(status_server)
