"""`sasl.jaas.config` read as Kafka's Java client reads it, so that librdkafka and kafka-python
get the password Java gets (regression: a `\\` in a SASL password worked for Java, not for the
Python clients, which kept the backslash of an escape).

Java reads the value twice: `Properties.load` takes the file's escapes, then Kafka's `JaasConfig`
(a `java.io.StreamTokenizer`) takes the quoted string's. The fixed examples below are what
kafka-clients 4.1.1 (and 3.9, Spark 4.0's) gave for the same file lines, run through
`JaasContext.loadClientContext`; the properties check that any password, written the way Java
needs it, reaches the Python clients unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from runtime.clients.client_config import compute_client_config
from runtime.clients.jaas_config import parse_jaas_config
from runtime.clients.java_properties import parse_properties
from schemas.errors import InvalidConfigError

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PASSWORDS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30) | st.text(
    alphabet='\\"= ;/*\'abn0t', max_size=30)


def jaas_quoted(value: str) -> str:
    """`value` as a JAAS quoted string Java reads back as `value`."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def properties_escaped(value: str) -> str:
    """`value` as a properties file line's value Java's Properties.load reads back as `value`."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


@given(PASSWORDS)
def test_any_quoted_password_is_read_back(password):
    module, options = parse_jaas_config(f"{SCRAM} required username=\"alice\" password={jaas_quoted(password)};")
    assert module == SCRAM and options == {"username": "alice", "password": password}


@given(PASSWORDS, PASSWORDS)
def test_any_password_reaches_both_python_clients_through_the_file(password, username):
    jaas = f"{SCRAM} required username={jaas_quoted(username)} password={jaas_quoted(password)};"
    properties = parse_properties("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                                  f"sasl.jaas.config={properties_escaped(jaas)}\n")
    config = compute_client_config(properties)
    assert (config.librdkafka["sasl.username"], config.librdkafka["sasl.password"]) == (username, password)
    assert config.kafka_python["sasl_plain_password"] == password
    assert config.spark_options["kafka.sasl.jaas.config"] == jaas.strip()  # Java reads it itself


# (the value of sasl.jaas.config after `password=` in the file, what Java's client read)
JAVA_READ = [
    ('"a\\\\\\\\b";', "a\\b"),          # file a\\\\b → JAAS a\\b → a\b
    ('"a\\\\b";', "a\b"),               # file a\\b → JAAS a\b → a, backspace
    ('"a\\b";', "ab"),                  # file a\b → JAAS ab
    ('"q\\\\"x=y; z";', 'q"x=y; z'),    # an escaped quote, = ; and a blank inside quotes
    ('"\\\\101\\\\7";', "A\a"),         # octal escapes
    ("p-4.2_$x;", "p-4.2_$x"),          # a bare word
    ('"pw"; // end', "pw"),             # a comment after the entry
]


@pytest.mark.parametrize("value, password", JAVA_READ)
def test_the_password_java_reads_from_the_same_file_line(value, password):
    properties = parse_properties(f"sasl.jaas.config={SCRAM} required username=alice password={value}\n")
    config = compute_client_config(properties)
    assert config.librdkafka["sasl.password"] == password
    assert config.kafka_python["sasl_plain_password"] == password


@pytest.mark.parametrize("value, reason", [
    ("42;", "value not specified for key 'password'"),        # Java: a number token has no text
    ("'it''s';", "value not specified"),
    ('"pw"', "not terminated by a semicolon"),
    ('"pw"; other required;', "2 login modules"),
])
def test_what_java_refuses_is_refused_without_showing_the_value(value, reason):
    with pytest.raises(InvalidConfigError, match=reason) as raised:
        parse_jaas_config(f"{SCRAM} required username=alice password={value}")
    assert "it''s" not in str(raised.value) and '"pw"' not in str(raised.value)


def test_comments_and_line_ends_inside_the_value():
    module, options = parse_jaas_config(f"{SCRAM} required /* who */ username=alice\n  password=\"p\"; // end")
    assert options == {"username": "alice", "password": "p"}


def test_the_properties_file_ends_lines_as_java_does():
    # \x85, \x0b and \u2028 are line ends for str.splitlines, not for Properties.load
    text = 'sasl.jaas.config=m required username=u password="a\x85b\x0bc\u2028d";\n'
    assert parse_jaas_config(parse_properties(text)["sasl.jaas.config"])[1]["password"] == "a\x85b\x0bc\u2028d"


def test_a_malformed_unicode_escape_is_one_line():
    with pytest.raises(InvalidConfigError, match="uxxxx"):
        parse_properties("sasl.jaas.config=m required password=\"\\uzz\";\n")
