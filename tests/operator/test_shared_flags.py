"""The shared flags are declared once (`options.takes_flags`) and turned into settings and
connections in one place (`connections.connect`); every request is built once before anything
connects (`requests.build_dry_run`). No Kafka, no Redis."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from reassigner.cli.connections import connect
from reassigner.cli.options import CONNECTION_FLAGS, FLAG_OPTIONS, SharedFlags, takes_flags
from reassigner.operator.requests import DRY_RUN_ENVELOPE, build_cancel_request, build_dry_run
from schemas.errors import InvalidConfigError, InvalidInputError


def test_a_command_gets_the_flags_it_takes_as_one_value():
    seen: list[tuple[int, SharedFlags]] = []
    app = typer.Typer()

    @app.command()
    @takes_flags("bootstrap_server", "stack_dir", "allow_remote_metrics")
    def probe(count: int = typer.Option(1, "--count"), *, flags: SharedFlags) -> None:
        """A probe."""
        seen.append((count, flags))

    runner = CliRunner()
    result = runner.invoke(app, ["--count", "3", "--bootstrap-server", "h:9092", "--allow-remote-metrics"])
    assert result.exit_code == 0, result.output
    assert seen == [(3, SharedFlags(bootstrap_server="h:9092", allow_remote_metrics=True))]
    assert seen[0][1].settings_overrides()["metrics_allow_remote"] is True
    assert runner.invoke(app, ["--redis-url", "redis://h"]).exit_code == 2  # only the flags it takes


def test_every_shared_flag_is_a_field_and_an_unknown_one_is_refused():
    assert set(FLAG_OPTIONS) == set(SharedFlags.__dataclass_fields__)
    assert set(CONNECTION_FLAGS) <= set(FLAG_OPTIONS)
    with pytest.raises(ValueError):
        takes_flags("bootstrap_servers")


def test_a_read_command_given_redis_needs_no_kafka_and_no_local_stack(tmp_path, monkeypatch):
    monkeypatch.delenv("REASSIGNER_BOOTSTRAP_SERVERS", raising=False)
    connected = connect(SharedFlags(redis_url="redis://127.0.0.1:1/0", stack_dir=tmp_path / "none"),
                        need_kafka=False)
    assert connected.redis_url == "redis://127.0.0.1:1/0" and connected.bootstrap == ""


def test_no_flag_and_no_local_stack_names_the_flag_the_command_needs(tmp_path, monkeypatch):
    for name in ("REASSIGNER_BOOTSTRAP_SERVERS", "REASSIGNER_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    flags = SharedFlags(stack_dir=tmp_path / "none")
    with pytest.raises(InvalidConfigError, match="no --redis-url given"):
        connect(flags, need_kafka=False)
    with pytest.raises(InvalidConfigError, match="no --bootstrap-server given"):
        connect(flags, need_redis=False)


def test_the_processes_get_the_resolved_connections_in_their_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("REASSIGNER_COMMAND_CONFIG", raising=False)
    connected = connect(SharedFlags(bootstrap_server="h:9092", redis_url="redis://h/0", topic_prefix="p",
                                    command_config=None, stack_dir=tmp_path))
    assert (connected.settings.bootstrap_servers, connected.settings.redis_url) == ("h:9092", "redis://h/0")
    assert connected.topic("requests") == "p.requests" and connected.given.command_config is None


def test_a_dry_run_has_the_placeholder_envelope_and_raises_what_the_builder_refuses():
    request = build_dry_run(build_cancel_request, "orders", 1, False)
    assert request["id"] == DRY_RUN_ENVELOPE["request_id"] and request["payload"][0] == "Cancel"
    with pytest.raises(InvalidInputError, match="--partition needs --topic"):
        build_dry_run(build_cancel_request, None, 1, False)


@pytest.mark.parametrize("arguments, says", [
    (("request", "cancel", "--partition", "1"), "--partition needs --topic"),
    (("request", "decommission", "--broker", "-2"), "broker ids are 0 or more"),
    (("request", "approve", " "), "give the proposal id"),
    (("config", "set", "nosuch.key=1"), "unknown setting"),
])
def test_a_bad_request_fails_in_one_line_before_anything_connects(monkeypatch, capsys, arguments, says):
    from reassigner.cli import requests
    from reassigner.cli.main import main

    def no_connection(*_args, **_kwargs):
        raise AssertionError("connected before refusing the request")

    monkeypatch.setattr(requests, "connect", no_connection)
    monkeypatch.setattr(sys, "argv", ["reassigner", *arguments])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2 and says in err and err.count("\n") == 1, err


def test_the_reassignment_file_is_read_before_anything_connects(monkeypatch, capsys, tmp_path: Path):
    from reassigner.cli import requests
    from reassigner.cli.main import main

    monkeypatch.setattr(requests, "connect", lambda *_args, **_kwargs: pytest.fail("connected"))
    monkeypatch.setattr(sys, "argv", ["reassigner", "request", "reassign", "--file", str(tmp_path / "none.json")])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2 and "cannot read the reassignment file" in capsys.readouterr().err
