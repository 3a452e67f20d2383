"""No secret in any output: the one redaction function, and every printer that goes through it
(errors of the product, the CLI's error line and usage errors, the log format, reprs)."""

from __future__ import annotations

import logging
import sys
from urllib.parse import quote

from hypothesis import assume, given, settings, strategies as st

from runtime.clients.client_config import compute_client_config, read_command_config
from schemas.errors import InvalidConfigError, PermanentError
from schemas.redaction import MASK, forget_secrets, redact, register_secret

SECRET_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="*"),
                      min_size=4, max_size=24)


@given(SECRET_TEXT, st.sampled_from([
    "{s}", "error: {s}", "AuthenticationError('{s}')", "{{'sasl.password': '{s}'}}", "x{s}y",
    "Traceback ...\n  File x, line 1\nValueError: bad {s}\n"]))
def test_a_registered_secret_is_masked_wherever_it_is(secret, template):
    forget_secrets()
    register_secret(secret)
    text = template.format(s=secret)
    assert secret not in redact(text)
    assert secret not in redact(repr(text))  # also as a repr shows it (escaped)


@settings(max_examples=200)
@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters="'\"<>*"),
               min_size=1, max_size=20))
def test_the_password_of_a_url_is_masked_unregistered(password):
    forget_secrets()
    for url in (f"redis://reassigner:{quote(password, safe='')}@redis.example:6380/0",
                f"rediss+cluster://:{quote(password, safe='')}@10.0.0.1:7000",
                f"https://hook:{password}@hooks.example/x"):
        shown = redact(f"connecting to {url}: refused")
        assert f":{MASK}@" in shown and shown.endswith(": refused")
        assert f":{quote(password, safe='')}@" not in shown and f":{password}@" not in shown


def test_a_url_without_a_password_is_left_alone():
    for text in ("redis://127.0.0.1:6379/0", "http://host:8080/api/status", "kafka1:9093", "user@example.com"):
        assert redact(text) == text


@settings(max_examples=200)
@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126, blacklist_characters='"\\*'),
               min_size=1, max_size=20))
def test_the_value_of_a_secret_key_is_masked_unregistered(value):
    forget_secrets()
    assume(value.strip())
    # A value that is part of the texts' own scaffolding (another key, the user name, ': ')
    # would be found there, masked or not.
    scaffolding = "ScramLoginModule required username=\"alice\" password=\"\"; {'ssl.key.password': '', 'x': 1} {\"sasl_plain_password\": \"\"}"
    assume(f'"{value}"' not in scaffolding and repr(value) not in scaffolding)
    for text in (f'ScramLoginModule required username="alice" password="{value}";',
                 f"{{'ssl.key.password': {value!r}, '*': 1}}",
                 f'{{"sasl_plain_password": "{value}"}}'):
        shown = redact(text)
        assert MASK in shown and f'"{value}"' not in shown and repr(value) not in shown, shown
    assert "username=\"alice\"" in redact('username="alice" password="x"')


def test_an_error_of_the_product_is_redacted_when_it_is_made():
    register_secret("hunter2-secret")
    error = PermanentError("reading from redis://u:hunter2-secret@h/0 failed: hunter2-secret")
    assert "hunter2-secret" not in str(error) and "hunter2-secret" not in error.message
    assert "redis://u:***@h/0" in str(error)


def test_a_client_config_repr_shows_no_password(tmp_path):
    config = compute_client_config({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="s3cret-pw";',
        "ssl.key.password": "key-pw-123"})
    assert "s3cret-pw" not in repr(config) and "key-pw-123" not in repr(config)
    assert "sasl.jaas.config" in repr(config)


def test_read_command_config_registers_the_files_secrets(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                    "username=alice password=\"pa\\\\\\\\ss-word\";\n"
                    f"ssl.ca.location={ca}\nssl.truststore.password=changeit-please\n")
    config = read_command_config(path)
    assert config.librdkafka["sasl.password"] == "pa\\ss-word"
    for secret in ("pa\\ss-word", "changeit-please"):
        assert secret not in redact(f"librdkafka said: {secret}; {dict(config.librdkafka)}")


def test_settings_repr_shows_no_redis_url_nor_status_token():
    from runtime.settings import Settings

    settings = Settings(redis_url="redis://u:hunter2-secret@h/0", status_token="tok-tok-tok")
    assert "hunter2-secret" not in repr(settings) and "tok-tok-tok" not in repr(settings)


def test_the_log_format_of_every_process_redacts(capsys):
    from reassigner.cli.options import LOG_FORMAT, RedactingFormatter

    register_secret("hunter2-secret")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter(LOG_FORMAT))
    logger = logging.getLogger("test.redaction")
    logger.addHandler(handler)
    try:
        try:
            raise ConnectionError("AUTH hunter2-secret refused at redis://u:other-pw@h/0")
        except ConnectionError:
            logger.exception("loading failed for %s", {"sasl.password": "pw-in-a-dict"})
    finally:
        logger.removeHandler(handler)
    err = capsys.readouterr().err
    assert "loading failed" in err and "Traceback" in err
    for secret in ("hunter2-secret", "other-pw", "pw-in-a-dict"):
        assert secret not in err


def test_the_cli_error_line_and_a_defects_traceback_are_redacted(monkeypatch, capsys):
    from reassigner.cli import main as cli_main

    def fail(*_args, **_kwargs):
        raise RuntimeError("a defect holding redis://u:hunter2-secret@h/0")

    monkeypatch.setattr(cli_main, "app", fail)
    monkeypatch.setattr(sys, "argv", ["reassigner", "status"])
    try:
        cli_main.main()
    except SystemExit as exited:
        assert exited.code == 1
    err = capsys.readouterr().err
    assert "RuntimeError" in err and "hunter2-secret" not in err

    def refuse(*_args, **_kwargs):
        raise InvalidConfigError("--redis-url redis://u:hunter2-secret@h:x/0: bad port")

    monkeypatch.setattr(cli_main, "app", refuse)
    try:
        cli_main.main()
    except SystemExit as exited:
        assert exited.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: [INVALID_CONFIG]") and "hunter2-secret" not in err and err.count("\n") == 1
