"""`--command-config`: one Java client properties file, translated for every client library."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.clients.client_config import compute_client_config, read_command_config
from runtime.clients.jaas_config import parse_jaas_config
from runtime.clients.java_properties import parse_properties, render_properties
from schemas.errors import InvalidConfigError

SASL_SSL = """
# a typical client.properties
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="alice" \\
    password="s3cr=t;x";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/kafka/ca.pem
ssl.endpoint.identification.algorithm=
ssl.protocol=TLSv1.3
"""


def test_java_properties_syntax():
    props = parse_properties("a=1\n! bang comment\nb : two words\nc three\nd=x\\\n  y\ne=tab\\tand\\u0041\n")
    assert props == {"a": "1", "b": "two words", "c": "three", "d": "xy", "e": "tab\tandA"}


def test_sasl_ssl_with_scram_translates_for_each_library():
    config = compute_client_config(parse_properties(SASL_SSL))
    assert config.librdkafka == {
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": 's3cr=t;x', "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert config.kafka_python == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice", "sasl_plain_password": 's3cr=t;x',
        "ssl_cafile": "/etc/kafka/ca.pem", "ssl_check_hostname": False,
    }
    assert config.spark_options["kafka.sasl.jaas.config"].startswith("org.apache.kafka")
    assert config.spark_options["kafka.ssl.truststore.location"] == "/etc/kafka/ca.pem"
    assert all(key.startswith("kafka.") for key in config.spark_options)
    assert config.ignored == ("ssl.protocol",)


def test_plain_login_module_implies_plain_mechanism():
    config = compute_client_config({
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username=bob password="pw";'})
    assert config.librdkafka["sasl.mechanisms"] == "PLAIN"
    assert (config.kafka_python["sasl_plain_username"], config.kafka_python["sasl_plain_password"]) == ("bob", "pw")


def test_jks_truststore_is_refused_with_what_to_do():
    with pytest.raises(InvalidConfigError, match="ssl.ca.location"):
        compute_client_config({"security.protocol": "SSL",
                               "ssl.truststore.location": "/etc/kafka/truststore.jks",
                               "ssl.truststore.password": "changeit"})


def test_a_jks_truststore_with_a_pem_ca_beside_it_serves_java_and_python_each_their_own():
    # Issue 18: the refusal message recommended exactly this pair, then refused it.
    config = compute_client_config({"security.protocol": "SSL", "ssl.truststore.location": "/x/t.jks",
                                    "ssl.truststore.password": "changeit", "ssl.ca.location": "/x/ca.pem"})
    assert config.librdkafka["ssl.ca.location"] == "/x/ca.pem"
    assert config.kafka_python["ssl_cafile"] == "/x/ca.pem"
    assert config.java["ssl.truststore.location"] == "/x/t.jks"
    assert "ssl.ca.location" not in config.java
    assert config.spark_options["kafka.ssl.truststore.password"] == "changeit"


def test_a_pem_ca_location_reaches_java_as_a_pem_truststore():
    # Issue 18: Spark got ssl.ca.location unchanged, which Java ignores (PKIX path building failed).
    config = compute_client_config({"security.protocol": "SASL_SSL", "ssl.ca.location": "/x/ca.pem"})
    assert config.java["ssl.truststore.type"] == "PEM"
    assert config.java["ssl.truststore.location"] == "/x/ca.pem"
    assert "kafka.ssl.ca.location" not in config.spark_options


def test_librdkafka_spellings_reach_java_in_java_spelling():
    config = compute_client_config({"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-256",
                                    "sasl.username": "u", "sasl.password": 'p"q\\r',
                                    "ssl.endpoint.identification.algorithm": "none"})
    assert config.librdkafka["sasl.mechanisms"] == "SCRAM-SHA-256"
    assert config.java["sasl.mechanism"] == "SCRAM-SHA-256"
    module, options = parse_jaas_config(config.java["sasl.jaas.config"])
    assert module.endswith("ScramLoginModule") and options["username"] == "u"
    assert config.java["ssl.endpoint.identification.algorithm"] == ""
    assert not {"sasl.username", "sasl.password", "sasl.mechanisms"} & set(config.java)


def test_a_client_certificate_as_two_pem_paths_reaches_java_as_an_inline_pem_keystore():
    files = {"/x/c.pem": "-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n",
             "/x/k.pem": "-----BEGIN PRIVATE KEY-----\nBBB\n-----END PRIVATE KEY-----\n"}
    config = compute_client_config({"security.protocol": "SSL", "ssl.certificate.location": "/x/c.pem",
                                    "ssl.key.location": "/x/k.pem"}, "cfg", files)
    assert config.java["ssl.keystore.type"] == "PEM"
    assert config.java["ssl.keystore.certificate.chain"] == files["/x/c.pem"]
    assert config.java["ssl.keystore.key"] == files["/x/k.pem"]
    with pytest.raises(InvalidConfigError, match="PKCS#8"):
        compute_client_config({"ssl.certificate.location": "/x/c.pem", "ssl.key.location": "/x/k.pem"}, "cfg",
                              {**files, "/x/k.pem": "-----BEGIN RSA PRIVATE KEY-----\nB\n-----END RSA PRIVATE KEY-----\n"})


def test_a_pem_keystore_serves_key_and_chain_from_one_file():
    config = compute_client_config({"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                                    "ssl.keystore.location": "/x/client.pem", "ssl.key.password": "kp"})
    assert config.librdkafka["ssl.certificate.location"] == config.librdkafka["ssl.key.location"] == "/x/client.pem"
    assert config.kafka_python["ssl_certfile"] == config.kafka_python["ssl_keyfile"] == "/x/client.pem"
    assert config.java["ssl.keystore.location"] == "/x/client.pem"


def test_jks_keystore_is_refused_but_pem_client_cert_works():
    with pytest.raises(InvalidConfigError, match="ssl.certificate.location"):
        compute_client_config({"ssl.keystore.location": "/x/k.jks"})
    config = compute_client_config({"security.protocol": "SSL", "ssl.ca.location": "/x/ca.pem",
                                    "ssl.certificate.location": "/x/c.pem",
                                    "ssl.key.location": "/x/k.pem", "ssl.key.password": "kp"})
    assert config.kafka_python["ssl_certfile"] == "/x/c.pem"
    assert config.kafka_python["ssl_keyfile"] == "/x/k.pem"
    assert config.kafka_python["ssl_password"] == "kp"
    assert config.librdkafka["ssl.key.location"] == "/x/k.pem"


@pytest.mark.parametrize("properties, fragment", [
    ({"security.protocol": "TLS"}, "security.protocol"),
    ({"sasl.mechanism": "MAGIC"}, "sasl.mechanism"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config":
      'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";'},
     "does not match"),
    ({"sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a";'},
     "lacks password"),
    ({"sasl.jaas.config": "com.example.MyLogin required;"}, "cannot run"),
    ({"sasl.jaas.config": "garbage"}, "sasl.jaas.config"),
])
def test_bad_security_settings_are_refused(properties, fragment):
    with pytest.raises(InvalidConfigError, match=fragment):
        compute_client_config(properties)


def test_jaas_options_quoted_and_bare():
    module, options = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_x="1" username=u password="p w";')
    assert module.endswith("PlainLoginModule")
    assert options == {"user_x": "1", "username": "u", "password": "p w"}


def test_read_command_config_file(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=PLAINTEXT\nclient.id=ops\n")
    config = read_command_config(path)
    assert config.librdkafka == {"security.protocol": "PLAINTEXT", "client.id": "ops"}
    assert config.kafka_python == {"security_protocol": "PLAINTEXT", "client_id": "ops"}
    assert read_command_config(None).librdkafka == {}
    with pytest.raises(InvalidConfigError, match="cannot read"):
        read_command_config(tmp_path / "missing.properties")


def test_a_client_id_in_the_command_config_is_taken_by_the_admin_client(tmp_path):
    """Regression: `client.id` in --command-config made KafkaAdminClient get `client_id` twice
    ("got multiple values for keyword argument") and broke snapshot, watch and execute."""
    from runtime.clients.kafka_admin import compute_admin_options

    path = tmp_path / "client.properties"
    path.write_text("client.id=ops-tool\n")
    options = compute_admin_options("b:9092", 15000, read_command_config(path))
    assert options["client_id"] == "ops-tool" and options["bootstrap_servers"] == "b:9092"


@given(st.dictionaries(st.text(min_size=1).filter(lambda k: k.strip() == k and k[:1] not in "#!"),
                       st.text().filter(lambda v: v.strip() == v), max_size=5))
def test_rendered_properties_read_back_the_same(properties):
    assert parse_properties(render_properties(properties)) == properties
