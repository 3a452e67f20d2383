"""`reassigner local ...`: run and disturb a real local Kafka cluster and Redis for trying things.

Every subcommand works on the stack whose state file is in `--stack-dir` (default
`REASSIGNER_STACK_DIR` or `.reassigner/stack`), so separate invocations share one stack.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.console import Console
from rich.table import Table

from reassigner.cli.options import command_group
from reassigner.dev.local import DEFAULT_RACKS

if TYPE_CHECKING:
    from reassigner.dev.local.stack import LocalStack

local_app = command_group(help="A real local KRaft Kafka cluster and Redis, for demos and tests.")
console = Console(stderr=True)

StackDir = typer.Option(None, "--stack-dir", help="Where the stack keeps data, logs, state.")


def _stack(stack_dir: Optional[Path], kafka_version: Optional[str] = None) -> LocalStack:
    # Here, not at the top: the command line's start must not pay for the stack and the settings.
    from reassigner.dev.local.stack import LocalStack
    from runtime.settings import load_settings

    settings = load_settings(stack_dir=stack_dir, local_kafka_version=kafka_version)
    return LocalStack(settings.stack_dir, settings.cache_dir, settings.local_kafka_version)


def _print_state(stack: LocalStack) -> None:
    status = stack.status()
    table = Table(title=f"local stack at {status['stack_dir']} (Kafka {status['kafka_version']})")
    for column in ("broker", "port", "rack", "pid", "alive", "unfenced", "log dirs"):
        table.add_column(column)
    for broker in status["brokers"]:
        dirs = ", ".join(
            Path(d["path"]).name + (" (FAILED)" if d["failed"] else "") for d in broker["log_dirs"]
        )
        table.add_row(str(broker["id"]), str(broker["port"]), broker["rack"] or "-",
                      str(broker["pid"] or "-"), "yes" if broker["alive"] else "no",
                      "yes" if broker["unfenced"] else "no", dirs)
    console.print(table)
    controller, redis = status["controller"], status["redis"]
    console.print(f"controller port {controller['port']} pid {controller['pid']} "
                  f"({'alive' if controller['alive'] else 'down'}); "
                  f"redis {status['redis_url']} ({'alive' if redis['alive'] else 'down'})")
    facts = {"bootstrap_servers": status["bootstrap_servers"], "kafka_version": status["kafka_version"],
             "redis_url": status["redis_url"],
             "stack_dir": status["stack_dir"], "state_file": str(stack.state_file)}
    if status["security"] != "none":
        # Paths, never the secrets themselves: the URL with its password is in redis_url_file.
        state = stack.load().to_json()
        facts.update(security=status["security"], command_config=status["client_properties"],
                     redis_url_file=state["redis_url_file"])
    print(json.dumps(facts))


@local_app.command("up")
def up(
    brokers: int = typer.Option(3, "--brokers", min=1, max=12, help="Number of brokers."),
    log_dirs: int = typer.Option(2, "--log-dirs", min=1, max=8, help="Data dirs per broker."),
    racks: str = typer.Option(",".join(DEFAULT_RACKS), "--racks",
                              help="Rack paths, assigned to brokers in turn."),
    base_port: Optional[int] = typer.Option(None, "--base-port", min=1024, max=65000,
                                            help="Use ports from here on (default: free ones)."),
    security: str = typer.Option("none", "--security",
                                 help="none, or sasl_ssl: SCRAM over TLS, ACLs (the product's "
                                      "principal is no super user), Redis ACL user over TLS."),
    kafka_version: Optional[str] = typer.Option(
        None, "--kafka-version", help="The Kafka release to run, X.Y.Z from 3.7 on (default "
        "REASSIGNER_LOCAL_KAFKA_VERSION, else the tested default); fetched from Maven Central once."),
    stack_dir: Optional[Path] = StackDir,
) -> None:
    """Start a controller, N brokers (K log dirs each, a rack path each) and Redis (AOF)."""
    stack = _stack(stack_dir, kafka_version)
    started = time.monotonic()
    with console.status(f"starting Kafka {stack.kafka_version} (1 controller, {brokers} brokers) and Redis..."):
        rack_list = tuple(r.strip() for r in racks.split(",") if r.strip())
        stack.up(brokers=brokers, log_dirs=log_dirs, racks=rack_list, base_port=base_port,
                 security=security.lower())
    console.print(f"[green]ready[/] in {time.monotonic() - started:.1f} s")
    _print_state(stack)


@local_app.command("down")
def down(
    keep: bool = typer.Option(False, "--keep", help="Keep the data dirs and state file."),
    stack_dir: Optional[Path] = StackDir,
) -> None:
    """Stop every process of the stack; remove its data unless --keep."""
    _stack(stack_dir).down(keep_data=keep)
    console.print("stopped" + (" (data kept)" if keep else " and removed"))


@local_app.command("status")
def status(stack_dir: Optional[Path] = StackDir,
           as_json: bool = typer.Option(False, "--json", help="Print JSON only.")) -> None:
    """Brokers, racks, dirs, pids and whether each broker is unfenced."""
    stack = _stack(stack_dir)
    if as_json:
        print(json.dumps(stack.status(), indent=2))
    else:
        _print_state(stack)


@local_app.command("add-broker")
def add_broker(rack: Optional[str] = typer.Option(None, "--rack", help="Rack path."),
               stack_dir: Optional[Path] = StackDir) -> None:
    """Start one more broker with the next free id; wait until it is unfenced."""
    with console.status("starting a new broker..."):
        record = _stack(stack_dir).add_broker(rack=rack)
    console.print(f"broker {record.id} up on port {record.port}, rack {record.rack}")
    print(json.dumps({"broker_id": record.id, "port": record.port, "rack": record.rack}))


@local_app.command("stop-broker")
def stop_broker(broker_id: int = typer.Argument(..., help="Broker id."),
                stack_dir: Optional[Path] = StackDir) -> None:
    """Stop a broker cleanly (SIGTERM: controlled shutdown)."""
    _stack(stack_dir).stop_broker(broker_id)
    console.print(f"broker {broker_id} stopped")


@local_app.command("kill-broker")
def kill_broker(broker_id: int = typer.Argument(..., help="Broker id."),
                stack_dir: Optional[Path] = StackDir) -> None:
    """Kill a broker (SIGKILL): the controller fences it after the session timeout."""
    _stack(stack_dir).stop_broker(broker_id, kill=True)
    console.print(f"broker {broker_id} killed")


@local_app.command("start-broker")
def start_broker(broker_id: int = typer.Argument(..., help="Broker id."),
                 stack_dir: Optional[Path] = StackDir) -> None:
    """Start a stopped or killed broker again; wait until it is unfenced."""
    with console.status(f"starting broker {broker_id}..."):
        _stack(stack_dir).start_broker(broker_id)
    console.print(f"broker {broker_id} up")


@local_app.command("fail-logdir")
def fail_logdir(broker_id: int = typer.Argument(..., help="Broker id."),
                log_dir: Optional[str] = typer.Argument(None, help="Dir path or name (data-0)."),
                stack_dir: Optional[Path] = StackDir) -> None:
    """Replace a data dir by a plain file; wait until describe-log-dirs reports it offline."""
    with console.status(f"failing a log dir of broker {broker_id}..."):
        failed = _stack(stack_dir).fail_log_dir(broker_id, log_dir)
    console.print(f"log dir {failed} of broker {broker_id} is offline")
    print(json.dumps({"broker_id": broker_id, "log_dir": failed}))


@local_app.command("add-logdir")
def add_logdir(broker_id: int = typer.Argument(..., help="Broker id."),
               stack_dir: Optional[Path] = StackDir) -> None:
    """Restart a broker with one more, empty log dir (as when a disk is added)."""
    with console.status(f"restarting broker {broker_id} with one more log dir..."):
        added = _stack(stack_dir).add_log_dir(broker_id)
    console.print(f"broker {broker_id} is back with a new log dir {added}")
    print(json.dumps({"broker_id": broker_id, "log_dir": added}))


@local_app.command("fetch-jars")
def fetch_jars(kafka_version: Optional[str] = typer.Option(
        None, "--kafka-version", help="The Kafka release whose jars to fetch (default "
        "REASSIGNER_LOCAL_KAFKA_VERSION, else the tested default).")) -> None:
    """Fetch the Kafka and Spark connector jars from Maven Central into the cache (idempotent)."""
    from runtime.clients.jars import JAR_SETS, ensure_jars
    from runtime.settings import load_settings

    settings = load_settings(local_kafka_version=kafka_version)
    for jar_set in JAR_SETS:
        with console.status(f"fetching the {jar_set} jars with Maven..."):
            jars = ensure_jars(settings.cache_dir, jar_set, settings.local_kafka_version)
        console.print(f"{jar_set}: {len(jars)} jars in {jars[0].parent}")


def register(app: typer.Typer) -> None:
    app.add_typer(local_app, name="local")
