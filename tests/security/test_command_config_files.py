"""A `--command-config` that names a file this host cannot read is refused at start, in one line
naming the property and the path, by every command that takes it (regression: `request`,
`alerts` and `watch` ended in a client library's traceback); the faust webhook runner refuses
`--command-config` before connecting anywhere (regression: after creating its topics)."""

from __future__ import annotations

import sys

import pytest

from runtime.clients.client_config import read_command_config, require_client_files
from schemas.errors import InvalidConfigError


@pytest.mark.parametrize("name", ["ssl.ca.location", "ssl.truststore.location", "ssl.keystore.location",
                                  "ssl.certificate.location", "ssl.key.location", "ssl.crl.location",
                                  "sasl.kerberos.keytab"])
def test_a_missing_file_is_named_with_its_property(tmp_path, name):
    missing = tmp_path / "nope" / "file.pem"
    with pytest.raises(InvalidConfigError) as raised:
        require_client_files({name: str(missing)}, "client.properties")
    assert f"client.properties: {name}={missing}: no such file" in str(raised.value)


def test_a_directory_is_not_a_file_and_probe_is_librdkafkas(tmp_path):
    with pytest.raises(InvalidConfigError, match="not a file"):
        require_client_files({"ssl.ca.location": str(tmp_path)}, "c")
    require_client_files({"ssl.ca.location": "probe"}, "c")
    ca = tmp_path / "ca.pem"
    ca.write_text("pem")
    require_client_files({"ssl.ca.location": str(ca), "ssl.truststore.location": str(ca)}, "c")


def test_read_command_config_checks_the_files(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SSL\nssl.ca.location=/does/not/exist/ca.pem\n")
    with pytest.raises(InvalidConfigError, match=r"ssl.ca.location=/does/not/exist/ca.pem: no such file"):
        read_command_config(path)


COMMANDS = [
    ["request", "rebalance"],
    ["request", "decommission", "--broker", "1"],
    ["config", "set", "reassignment.max.concurrent.partition.movements=3"],
    ["alerts"],
    ["alerts", "--follow"],
    ["alerts", "webhook", "--url", "http://127.0.0.1:1/hook", "--runner", "confluent"],
    ["watch"],
    ["execute"],
    ["snapshot", "--output", "snapshot.json"],
    ["status-server", "--port", "0"],
    ["run"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_every_command_refuses_a_missing_ca_file_in_one_line(monkeypatch, capsys, tmp_path, command):
    from reassigner.cli.main import main

    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SSL\nssl.ca.location=/does/not/exist/ca.pem\n")
    monkeypatch.chdir(tmp_path)
    redis = [] if command[0] in ("watch", "snapshot") else ["--redis-url", "redis://127.0.0.1:1/0"]
    monkeypatch.setattr(sys, "argv", ["reassigner", *command, "--command-config", str(config),
                                      "--bootstrap-server", "127.0.0.1:1", *redis])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert err.startswith("error: [INVALID_CONFIG]") and err.count("\n") == 1, err
    assert "ssl.ca.location=/does/not/exist/ca.pem: no such file" in err


def test_the_faust_runner_refuses_command_config_before_connecting(monkeypatch, capsys, tmp_path):
    import runtime.clients.kafka_admin as kafka_admin
    from reassigner.cli.main import main

    def no_kafka(*_args, **_kwargs):
        raise AssertionError("connected before refusing --command-config")

    monkeypatch.setattr(kafka_admin, "ensure_topics", no_kafka)
    config = tmp_path / "client.properties"
    config.write_text("ssl.protocol=TLSv1.3\n")  # nothing the Python clients use: still refused
    monkeypatch.setattr(sys, "argv", ["reassigner", "alerts", "webhook", "--url", "http://127.0.0.1:1/hook",
                                      "--command-config", str(config), "--bootstrap-server", "127.0.0.1:1"])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "not supported by the faust runner" in err and err.count("\n") == 1
