"""`reassigner alerts [--follow]` and `reassigner alerts webhook`: the alerts topic, printed or
forwarded.

- `alerts` prints the alerts on the topic and returns; `--follow` keeps printing new ones until
  Ctrl-C or SIGTERM (`reassigner.operator.alerts_follow`: it reads, owns no offsets, joins no
  group; an alert the pipeline published twice is shown once);
- `alerts webhook --url URL` POSTs every alert as JSON, retrying with exponential backoff, then
  dead-letters it (`reassigner.operator.webhook`: the delivery rule, and its two runners, faust
  and confluent). The URL is checked, and the faust runner's refusal of `--command-config` given,
  before anything connects.
"""

from __future__ import annotations

import logging

import typer

from reassigner.cli.connections import connect
from reassigner.cli.options import (CONNECTION_FLAGS, SharedFlags, command_group, configure_logging, stop_on_signals,
                                    takes_flags)
from reassigner.cli.printing import console, err_console
from schemas.errors import InvalidInputError
from schemas.redaction import redact

alerts_app = command_group(help="Alerts: print them, follow them, forward them to a webhook.",
                           invoke_without_command=True, no_args_is_help=False)

MinSeverity = typer.Option("INFO", "--min-severity", help="INFO, WARNING, ERROR or CRITICAL.")


@alerts_app.callback()
@takes_flags(*CONNECTION_FLAGS)
def alerts(
    ctx_typer: typer.Context,
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new alerts."),
    min_severity: str = MinSeverity,
    from_beginning: bool = typer.Option(False, "--from-beginning", help="With --follow: start at the oldest alert."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
    *, flags: SharedFlags,
) -> None:
    """Print the alerts on the alerts topic; with --follow, keep printing new ones (Ctrl-C stops)."""
    if ctx_typer.invoked_subcommand is not None:
        return
    from reassigner.operator.alerts_follow import follow_alerts, parse_min_severity, print_alert_line

    configure_logging(False, logging.WARNING, logging.INFO)
    severity = parse_min_severity(min_severity)
    connected = connect(flags, need_redis=False)
    connected.ensure_topics("alerts")
    topic = connected.topic("alerts")

    def ready(partitions: list[int]) -> None:
        if follow:
            where = "the beginning" if from_beginning else "now"
            err_console.print(f"following {topic} ({len(partitions)} partitions) from {where}; Ctrl-C stops")

    with stop_on_signals() as stop:
        follow_alerts(connected.bootstrap, connected.client_config, topic, min_severity=severity,
                      from_beginning=from_beginning or not follow, emit=print_alert_line(console, as_json),
                      stop=stop, on_ready=ready, on_bad_message=lambda text: err_console.print(f"[yellow]{text}[/]"),
                      until_end=not follow)


@alerts_app.command("webhook")
@takes_flags(*CONNECTION_FLAGS)
def alerts_webhook(
    url: str = typer.Option(..., "--url", help="Where to POST each alert (JSON)."),
    min_severity: str = MinSeverity,
    max_attempts: int = typer.Option(5, "--max-attempts", min=1, help="POST attempts before dead-lettering."),
    retry_delay: float = typer.Option(0.5, "--retry-delay", min=0.0, help="First retry delay (s), doubled each time."),
    max_retry_delay: float = typer.Option(30.0, "--max-retry-delay", min=0.0, help="Cap of the retry delay (s)."),
    timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="Timeout of one POST (s)."),
    runner: str = typer.Option("faust", "--runner", help="faust (default) or confluent: same delivery rule."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every retry and the consumer's life."),
    *, flags: SharedFlags,
) -> None:
    """Forward every alert to a webhook: retries with exponential backoff, then the dead-letter topic."""
    from runtime.clients.redis_io import register_url_password
    from reassigner.operator.alerts_follow import parse_min_severity
    from reassigner.operator.webhook import (RUNNERS, WebhookPolicy, group_id, run_confluent_forwarder,
                                             run_faust_forwarder)

    if runner not in RUNNERS:
        raise InvalidInputError(f"--runner {runner!r}: expected one of {', '.join(RUNNERS)}")
    if not url.startswith(("http://", "https://")):
        raise InvalidInputError(f"--url {url!r}: expected an http:// or https:// URL")
    register_url_password(url)  # a webhook URL may carry a token as its password
    configure_logging(verbose, logging.WARNING, logging.INFO)
    policy = WebhookPolicy(url, parse_min_severity(min_severity), max_attempts, retry_delay,
                           max_retry_delay, timeout)
    connected = connect(flags, need_redis=False)
    if runner == "faust" and connected.given.command_config is not None:  # refused before connecting
        raise InvalidInputError("--command-config is not supported by the faust runner; "
                                "use --runner confluent for a secured cluster")
    connected.ensure_topics("alerts", "dead-letter")
    alerts_topic, dead_letter_topic = connected.topic("alerts"), connected.topic("dead-letter")
    group = group_id(connected.settings.topic_prefix)
    err_console.print(redact(f"forwarding {alerts_topic} to {url} ({runner}, group {group}); Ctrl-C stops"))
    if runner == "faust":
        run_faust_forwarder(connected.bootstrap, alerts_topic, dead_letter_topic, policy, group,
                            loglevel="info" if verbose else "warning")
        return
    with stop_on_signals() as stop:
        run_confluent_forwarder(connected.bootstrap, connected.client_config, alerts_topic, dead_letter_topic,
                                policy, group, stop=stop, on_ready=lambda: err_console.print("assigned; forwarding"))


def register(app: typer.Typer) -> None:
    app.add_typer(alerts_app, name="alerts")
