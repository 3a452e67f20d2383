"""`reassigner demo`: the main job on the embedded local default (see `reassigner.dev.demo.story`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer



def demo(
    keep_running: bool = typer.Option(False, "--keep-running",
                                      help="Leave everything up for exploring; Ctrl-C stops it."),
    stack_dir: Optional[Path] = typer.Option(None, "--stack-dir",
                                             help="Where the demo's stack lives (default .reassigner/demo)."),
    patience: float = typer.Option(1.0, "--patience", min=0.1, max=100,
                                   help="Multiply every wait's budget: 2 on a slow or shared machine. A "
                                        "wait that sees progress waits longer anyway (up to 3 budgets)."),
    secure: bool = typer.Option(False, "--secure",
                                help="On the secured stack: SASL_SSL/SCRAM with ACLs (the product's "
                                     "principal is no super user), Redis with an ACL user over TLS."),
) -> None:
    """Start a real local Kafka cluster, Redis and Spark, run the product, and tell its story."""
    from reassigner.dev.demo.story import Demo
    from runtime.settings import load_settings

    settings = load_settings()
    directory = (stack_dir or Path(".reassigner/demo")).absolute()
    ok = Demo(directory, settings.cache_dir, security="sasl_ssl" if secure else "none",
              patience=patience).run(keep_running=keep_running)
    raise typer.Exit(0 if ok else 1)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
