"""`reassigner healthcheck`: is this process healthy? For container health checks and liveness
probes: it asks the process's own metrics endpoint (`--port`, loopback), prints one line and exits
0 (healthy) or 1 (unhealthy: the endpoint does not answer, or the pipeline's last batch is too
old; `runtime.metrics.compute_unhealthy` says the rule). The status server is asked at
`--path /healthz` on its `--port` (its /metrics wants its token): an answer there is health. It connects to neither Kafka nor Redis:
a probe that failed whenever Kafka is away would restart every process in an outage that
restarting cannot cure.
"""

from __future__ import annotations

import sys

import typer


def healthcheck(
    port: int = typer.Option(9400, "--port", min=1, max=65535,
                             help="The process's metrics port (its --metrics-port)."),
    host: str = typer.Option("127.0.0.1", "--host", help="The process's metrics address."),
    path: str = typer.Option("/metrics", "--path", help="What to ask: /metrics (run, watch, execute: "
                             "its figures are judged), or /healthz (status-server: an answer is health)."),
    max_batch_age: float = typer.Option(300.0, "--max-batch-age", min=1,
                                        help="A pipeline whose last batch is older (seconds) is unhealthy."),
    timeout: float = typer.Option(5.0, "--timeout", min=0.1, help="Seconds to wait for the endpoint."),
) -> None:
    """Exit 0 when the process serving metrics on --port is healthy, 1 (and why) when not."""
    import time
    import urllib.error
    import urllib.request

    from runtime.metrics import compute_unhealthy

    if not path.startswith("/"):
        raise typer.BadParameter(f"{path!r}: a path starts with /, e.g. /metrics", param_hint="--path")
    url = f"http://{host}:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 (an http URL we build)
            exposition = answer.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        print(f"unhealthy: nothing answers at {url} ({reason}): the process is down, or serves on "
              "another --port", file=sys.stderr)
        raise typer.Exit(1) from None
    why = compute_unhealthy(exposition, time.time(), max_batch_age) if path == "/metrics" else None
    if why is not None:
        print(f"unhealthy: {why}", file=sys.stderr)
        raise typer.Exit(1)
    print(f"healthy: {url} answers")


def register(app: typer.Typer) -> None:
    app.command("healthcheck")(healthcheck)
