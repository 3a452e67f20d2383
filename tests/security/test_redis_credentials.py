"""A wrong Redis password is one line and a non-zero exit, at start, never an outage retried
for minutes (regression: `run` crashed after 393 s, `execute` started healthy and crashed at
its first command, both with a traceback) and never shows the password.

The Redis here is a TCP server answering WRONGPASS to everything (`refusing_redis`), which
redis-py reads exactly as a real Redis's refusal; no real Redis is started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from redis.exceptions import AuthenticationError, RedisClusterException

from runtime.clients.redis_io import check_redis, connect_redis, translate_redis_error
from schemas.errors import InvalidConfigError, PermanentError

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "hunter2-Secret"


def url(port: int) -> str:
    return f"redis://reassigner:{PASSWORD}@127.0.0.1:{port}/0"


@pytest.mark.parametrize("error", [
    AuthenticationError("invalid username-password pair or user is disabled."),
    AuthenticationError("Invalid Username or Password"),
    redis.ResponseError("NOAUTH Authentication required."),
])
def test_refused_credentials_are_permanent_and_say_so(error):
    translated = translate_redis_error(error, "connecting to Redis")
    assert isinstance(translated, PermanentError) and translated.code == "REDIS_AUTHENTICATION_FAILED"
    assert "refused the credentials" in str(translated) and "--redis-url" in str(translated)


def test_a_redis_cluster_that_refuses_the_credentials_is_no_outage():
    try:
        try:
            raise AuthenticationError("invalid username-password pair or user is disabled.")
        except AuthenticationError as cause:
            raise RedisClusterException("Redis Cluster cannot be connected. Please provide at least one "
                                        f"reachable node: {cause}") from cause
    except RedisClusterException as error:
        translated = translate_redis_error(error, "connecting to the Redis Cluster")
    assert translated.code == "REDIS_AUTHENTICATION_FAILED"


def test_check_redis_raises_at_once_on_a_wrong_password(refusing_redis):
    client = connect_redis(url(refusing_redis), socket_timeout=2, connect_timeout=2)
    with pytest.raises(PermanentError) as raised:
        check_redis(client, url(refusing_redis))
    assert raised.value.code == "REDIS_AUTHENTICATION_FAILED" and PASSWORD not in str(raised.value)
    assert f"redis://reassigner:***@127.0.0.1:{refusing_redis}/0" in str(raised.value)


def test_a_malformed_redis_url_is_one_line_without_its_password():
    with pytest.raises(InvalidConfigError) as raised:
        connect_redis(f"redis://u:{PASSWORD}@127.0.0.1:notaport/0")
    assert PASSWORD not in str(raised.value)


def run_main(monkeypatch, capsys, *arguments: str) -> tuple[int, str, str]:
    from reassigner.cli.main import main

    monkeypatch.setattr(sys, "argv", ["reassigner", *arguments])
    code = 0
    try:
        main()
    except SystemExit as exited:
        code = exited.code or 0
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_execute_checks_redis_before_anything_else(monkeypatch, capsys, refusing_redis):
    import runtime.clients.kafka_admin as kafka_admin

    def no_kafka(*_args, **_kwargs):
        raise AssertionError("the executor reached Kafka before checking Redis")

    monkeypatch.setattr(kafka_admin, "ClusterAdmin", no_kafka)
    code, out, err = run_main(monkeypatch, capsys, "execute", "--bootstrap-server", "127.0.0.1:1",
                              "--redis-url", url(refusing_redis))
    assert code == 2, err
    assert err.startswith("error: [REDIS_AUTHENTICATION_FAILED]") and err.count("\n") == 1, err
    assert PASSWORD not in out + err and "Traceback" not in err


def test_run_checks_redis_before_kafka_and_spark(monkeypatch, capsys, refusing_redis, tmp_path):
    import runtime.clients.kafka_admin as kafka_admin

    def no_kafka(*_args, **_kwargs):
        raise AssertionError("the pipeline reached Kafka before checking Redis")

    monkeypatch.setattr(kafka_admin, "ensure_topics", no_kafka)
    code, out, err = run_main(monkeypatch, capsys, "run", "--bootstrap-server", "127.0.0.1:1",
                              "--redis-url", url(refusing_redis), "--checkpoint-dir", str(tmp_path))
    assert code == 2, err
    assert "error: [REDIS_AUTHENTICATION_FAILED]" in err and "Traceback" not in err, err
    assert PASSWORD not in out + err


@pytest.mark.parametrize("command", [["status"], ["list"], ["config", "get"]])
def test_read_commands_say_the_credentials_were_refused(monkeypatch, capsys, refusing_redis, command):
    code, out, err = run_main(monkeypatch, capsys, *command, "--redis-url", url(refusing_redis))
    assert code == 2 and err.startswith("error: [REDIS_AUTHENTICATION_FAILED]"), err
    assert PASSWORD not in out + err


def test_execute_through_the_real_entry_point(refusing_redis):
    """`python -m reassigner.cli execute` in a subprocess: one line, exit 2, no password."""
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    environment = {k: v for k, v in environment.items() if not k.startswith("REASSIGNER_")}
    result = subprocess.run([sys.executable, "-m", "reassigner.cli", "execute", "--bootstrap-server",
                             "127.0.0.1:1", "--redis-url", url(refusing_redis)],
                            capture_output=True, text=True, timeout=120, cwd=REPO, env=environment)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [lines[0]] and lines[0].startswith("error: [REDIS_AUTHENTICATION_FAILED]"), result.stderr
    assert PASSWORD not in result.stdout + result.stderr
