"""The status server's access: a token (Bearer, or basic auth's password) on every route but
/healthz, compared in constant time; no token, no bind beyond loopback unless
--allow-unauthenticated (regression: `--host 0.0.0.0` served the cluster's state to anyone,
silently); `state_error` never shows the Redis password (regression: it did)."""

from __future__ import annotations

import base64
import json
import sys
import urllib.error
import urllib.request

import pytest

from schemas.errors import InvalidConfigError
from reassigner.operator.status_server import (AlertBook, StateCache, StatusServer, is_authorized,
                                               is_loopback, require_token_off_loopback)
from schemas.redaction import register_secret

TOKEN = "s3cr3t-token-value"


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize("header, allowed", [
    (f"Bearer {TOKEN}", True), (f"bearer  {TOKEN} ", True), (basic("anyone", TOKEN), True),
    (None, False), ("", False), ("Bearer", False), ("Bearer wrong", False), (f"Token {TOKEN}", False),
    (basic(TOKEN, "wrong"), False), ("Basic !!!notbase64", False), (f"Bearer {TOKEN}x", False),
])
def test_is_authorized(header, allowed):
    assert is_authorized(header, TOKEN) is allowed
    assert is_authorized(header, None) is True  # no token configured: open (loopback only)


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("", False), ("::", False), ("10.1.2.3", False), ("status.example", False)])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_a_bind_beyond_loopback_needs_a_token_or_an_explicit_opt_out():
    with pytest.raises(InvalidConfigError, match="REASSIGNER_STATUS_TOKEN"):
        require_token_off_loopback("0.0.0.0", token_given=False, allow_unauthenticated=False)
    assert require_token_off_loopback("0.0.0.0", token_given=True, allow_unauthenticated=False) is None
    assert require_token_off_loopback("127.0.0.1", token_given=False, allow_unauthenticated=False) is None
    warning = require_token_off_loopback("0.0.0.0", token_given=False, allow_unauthenticated=True)
    assert warning and "without a token" in warning


@pytest.fixture()
def server():
    register_secret("hunter2-secret")

    def load():
        raise ConnectionError("Error connecting to redis://u:hunter2-secret@h:6379/0")

    status = StatusServer(host="127.0.0.1", port=0, cluster_name="c", cache=StateCache(load),
                          book=AlertBook(), default_replica_movements=1, token=TOKEN).start()
    yield f"http://127.0.0.1:{status.port}"
    status.stop()


def get(url: str, authorization: str | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers={"Authorization": authorization} if authorization else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers), refused.read()


@pytest.mark.parametrize("path", ["/", "/api/status", "/api/reassignments", "/api/alerts", "/metrics"])
def test_every_route_but_healthz_needs_the_token(server, path):
    status, headers, _ = get(server + path)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert get(server + path, "Bearer wrong")[0] == 401
    assert get(server + path, f"Bearer {TOKEN}")[0] == 200
    assert get(server + path, basic("me", TOKEN))[0] == 200


def test_healthz_stays_open(server):
    assert get(server + "/healthz")[0] == 200


def test_state_error_shows_no_redis_password(server):
    status, _, body = get(server + "/api/status", f"Bearer {TOKEN}")
    document = json.loads(body)
    assert status == 200 and "ConnectionError" in document["state_error"]
    assert "hunter2-secret" not in body.decode() and "redis://u:***@h:6379/0" in document["state_error"]


def test_the_cli_refuses_a_public_bind_without_a_token_before_connecting(monkeypatch, capsys):
    import runtime.clients.kafka_admin as kafka_admin
    from reassigner.cli.main import main

    def no_kafka(*_args, **_kwargs):
        raise AssertionError("connected before refusing the bind")

    monkeypatch.setattr(kafka_admin, "ensure_topics", no_kafka)
    monkeypatch.delenv("REASSIGNER_STATUS_TOKEN", raising=False)
    monkeypatch.setattr(sys, "argv", ["reassigner", "status-server", "--host", "0.0.0.0", "--bootstrap-server",
                                      "127.0.0.1:1", "--redis-url", "redis://127.0.0.1:1/0"])
    with pytest.raises(SystemExit) as exited:
        main()
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.startswith("error: [INVALID_CONFIG] --host '0.0.0.0'"), err
    assert err.count("\n") == 1


def test_an_empty_token_file_is_refused(monkeypatch, capsys, tmp_path):
    from reassigner.cli.main import main

    empty = tmp_path / "token"
    empty.write_text("\n")
    monkeypatch.setattr(sys, "argv", ["reassigner", "status-server", "--token-file", str(empty),
                                      "--bootstrap-server", "127.0.0.1:1", "--redis-url", "redis://127.0.0.1:1/0"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2 and "is empty" in capsys.readouterr().err
