"""One client-settings file, three client libraries, a real secured broker (issue 18 item 2).

Each form of a Kafka client properties file docs/security.md documents is translated by
`compute_client_config` and used, against a one-broker secured local stack (SASL_SSL, ACLs, the
product's non-super principal), by each library the product runs: librdkafka (confluent-kafka:
producer, consumer, admin), kafka-python (the Admin API adapter) and the Java client (what Spark's
Kafka source and sink run; here Kafka's own `kafka-topics` tool, given the translated properties
as a file). Each must see the product's readiness topic, which only the ACLs let it describe.

The forms: a PEM truststore (the stack's own file); librdkafka's `ssl.ca.location`; a JKS and a
PKCS#12 truststore with a PEM CA beside them; SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN; a client
certificate (mTLS) as one PEM keystore and as two PEM paths; librdkafka's `sasl.username`
spelling. And a wrong password, which every library must refuse.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from confluent_kafka.admin import AdminClient

from runtime.clients.client_config import read_command_config
from runtime.clients.java_properties import render_properties
from runtime.clients.jars import kafka_classpath
from runtime.settings import load_settings
from reassigner.dev.local.security import PLAIN_LOGIN, PRODUCT_USER, SCRAM_LOGIN, jaas
from reassigner.dev.local.stack import READY_TOPIC, LocalStack

pytestmark = [pytest.mark.stack, pytest.mark.slow, pytest.mark.long]

STORE_PASSWORD = "store-pass"


@pytest.fixture(scope="module")
def secured(tmp_path_factory, cache_dir):
    directory = tmp_path_factory.mktemp("secured-clients")
    stack = LocalStack(directory / "stack", cache_dir)
    state = stack.up(brokers=1, log_dirs=1, security="sasl_ssl")
    try:
        secrets = state.secrets
        material = directory / "material"
        material.mkdir()
        make_client_material(secrets, material)
        yield state, secrets, material
    finally:
        stack.down()


def make_client_material(secrets, material) -> None:
    """A client certificate signed by the stack's CA (one PEM keystore, and two PEM files), and
    the CA as a JKS and a PKCS#12 truststore."""
    openssl, keytool = shutil.which("openssl"), shutil.which("keytool")
    ca_key = f"{secrets.directory}/ca.key"

    def run(*command):
        subprocess.run([str(c) for c in command], check=True, capture_output=True, timeout=60)

    run(openssl, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", material / "client.key",
        "-out", material / "client.csr", "-subj", f"/CN={PRODUCT_USER}")
    run(openssl, "x509", "-req", "-in", material / "client.csr", "-CA", secrets.ca_file, "-CAkey",
        ca_key, "-CAcreateserial", "-out", material / "client.crt", "-days", "30")
    (material / "client-keystore.pem").write_text(
        (material / "client.key").read_text() + (material / "client.crt").read_text())
    for store_type in ("JKS", "PKCS12"):
        run(keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", secrets.ca_file,
            "-keystore", material / f"truststore.{store_type.lower()}", "-storetype", store_type,
            "-storepass", STORE_PASSWORD)


def client_forms(secrets, material) -> dict[str, dict[str, str]]:
    password = secrets.passwords[PRODUCT_USER]
    scram512 = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": jaas(SCRAM_LOGIN, PRODUCT_USER, password)}
    pem_truststore = {"ssl.truststore.type": "PEM", "ssl.truststore.location": secrets.ca_file}
    return {
        "pem truststore, SCRAM-SHA-512": {**scram512, **pem_truststore},
        "ssl.ca.location, SCRAM-SHA-256": {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": jaas(SCRAM_LOGIN, PRODUCT_USER, password),
            "ssl.ca.location": secrets.ca_file},
        "JKS truststore + PEM CA, SCRAM-SHA-512": {
            **scram512, "ssl.truststore.location": str(material / "truststore.jks"),
            "ssl.truststore.password": STORE_PASSWORD, "ssl.ca.location": secrets.ca_file},
        "PKCS12 truststore + PEM CA, PLAIN": {
            "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": jaas(PLAIN_LOGIN, PRODUCT_USER, password),
            "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(material / "truststore.pkcs12"),
            "ssl.truststore.password": STORE_PASSWORD, "ssl.ca.location": secrets.ca_file},
        "mTLS: one PEM keystore": {
            **scram512, **pem_truststore, "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(material / "client-keystore.pem")},
        "mTLS: certificate and key as two PEM paths": {
            **scram512, "ssl.ca.location": secrets.ca_file,
            "ssl.certificate.location": str(material / "client.crt"),
            "ssl.key.location": str(material / "client.key")},
        "librdkafka spelling (sasl.username)": {
            "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": PRODUCT_USER, "sasl.password": password, "ssl.ca.location": secrets.ca_file},
    }


def topics_seen_by_librdkafka(bootstrap: str, config) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, **config.librdkafka})
    return set(admin.list_topics(timeout=20).topics)


def topics_seen_by_kafka_python(bootstrap: str, config) -> set[str]:
    from runtime.clients.kafka_fast_reads import open_admin_client

    admin = open_admin_client(bootstrap_servers=bootstrap, request_timeout_ms=20000, **config.kafka_python)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def topics_seen_by_java(bootstrap: str, config, cache_dir, directory) -> set[str]:
    java_file = directory / "java.properties"
    java_file.write_text(render_properties(config.java))
    listed = subprocess.run(
        [shutil.which("java") or "java", "-Xmx256m", "-cp", kafka_classpath(cache_dir, load_settings().local_kafka_version),
         "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap,
         "--command-config", str(java_file), "--list"],
        capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr[-2000:]
    return set(listed.stdout.split())


@pytest.mark.parametrize("form", [
    "pem truststore, SCRAM-SHA-512", "ssl.ca.location, SCRAM-SHA-256",
    "JKS truststore + PEM CA, SCRAM-SHA-512", "PKCS12 truststore + PEM CA, PLAIN",
    "mTLS: one PEM keystore", "mTLS: certificate and key as two PEM paths",
    "librdkafka spelling (sasl.username)",
])
def test_each_documented_form_works_for_all_three_client_libraries(secured, form, cache_dir, tmp_path):
    state, secrets, material = secured
    properties = client_forms(secrets, material)[form]
    config_file = tmp_path / "client.properties"
    config_file.write_text(render_properties(properties))
    config = read_command_config(config_file)
    assert READY_TOPIC in topics_seen_by_librdkafka(state.bootstrap_servers, config)
    assert READY_TOPIC in topics_seen_by_kafka_python(state.bootstrap_servers, config)
    assert READY_TOPIC in topics_seen_by_java(state.bootstrap_servers, config, cache_dir, tmp_path)


def test_the_stacks_own_client_file_is_the_pem_truststore_form(secured):
    state, secrets, _ = secured
    config = read_command_config(state.client_properties)
    assert config.java["ssl.truststore.type"] == "PEM"
    assert config.librdkafka["ssl.ca.location"] == secrets.ca_file


def test_a_wrong_password_is_refused_by_every_library(secured, cache_dir, tmp_path):
    state, secrets, material = secured
    properties = dict(client_forms(secrets, material)["pem truststore, SCRAM-SHA-512"])
    properties["sasl.jaas.config"] = jaas(SCRAM_LOGIN, PRODUCT_USER, "not-the-password")
    config_file = tmp_path / "wrong.properties"
    config_file.write_text(render_properties(properties))
    config = read_command_config(config_file)
    assert READY_TOPIC not in _or_empty(lambda: topics_seen_by_librdkafka(state.bootstrap_servers, config))
    assert READY_TOPIC not in _or_empty(lambda: topics_seen_by_kafka_python(state.bootstrap_servers, config))
    java_file = tmp_path / "java.properties"
    java_file.write_text(render_properties(config.java))
    listed = subprocess.run(
        [shutil.which("java") or "java", "-Xmx256m", "-cp", kafka_classpath(cache_dir, load_settings().local_kafka_version),
         "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", state.bootstrap_servers,
         "--command-config", str(java_file), "--list"],
        capture_output=True, text=True, timeout=120)
    assert listed.returncode != 0 and "Authentication failed" in listed.stdout + listed.stderr


def _or_empty(read) -> set[str]:
    try:
        return read()
    except Exception:  # the library's own refusal: what this test wants
        return set()


# --- at start, each process checks who it is and what it may do (issue 18 items 4 and 5) ---------


def run_cli(*arguments: str, timeout: float = 90) -> subprocess.CompletedProcess:
    import sys

    return subprocess.run([sys.executable, "-m", "reassigner.cli", *arguments], capture_output=True,
                          text=True, timeout=timeout)


def properties_for(secrets, user: str, password: str, tmp_path) -> str:
    path = tmp_path / f"{user}.properties"
    path.write_text(render_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": jaas(SCRAM_LOGIN, user, password),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": secrets.ca_file}))
    return str(path)


@pytest.fixture(scope="module")
def limited_user(secured):
    """A SCRAM user with a few ACLs: Describe on the cluster, Describe and DescribeConfigs on
    topics, Write on `limited.*`, no Create and nothing more on the product's `reassigner.*`
    topics — which exist (created by the stack's super user, as an operator may do beforehand)."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)

    state, _, _ = secured
    admin = AdminClient({"bootstrap.servers": state.bootstrap_servers, "log_level": 0,
                         **state.admin_client_config().librdkafka})
    upsert = UserScramCredentialUpsertion("limited", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          b"limited-password")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    grants = [(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "DESCRIBE"),
              (ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, "DESCRIBE"),
              (ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, "DESCRIBE_CONFIGS"),
              (ResourceType.TOPIC, "limited.", ResourcePatternType.PREFIXED, "WRITE")]
    bindings = [AclBinding(kind, name, pattern, "User:limited", "*", AclOperation[operation],
                           AclPermissionType.ALLOW) for kind, name, pattern, operation in grants]
    for future in admin.create_acls(bindings).values():
        future.result(30)
    from runtime.clients.kafka_admin import ensure_topics
    from reassigner.edge.executor import EXECUTOR_TOPICS
    from reassigner.edge.watcher import WATCHER_TOPICS

    ensure_topics(state.bootstrap_servers, state.admin_client_config(),
                  [f"reassigner.{suffix}" for suffix in (*WATCHER_TOPICS, *EXECUTOR_TOPICS)], 1)
    return "limited", "limited-password"


@pytest.mark.parametrize("command", ["watch", "execute", "snapshot"])
def test_a_wrong_password_stops_a_process_at_once_saying_authentication_failed(secured, tmp_path, command):
    state, secrets, _ = secured
    config = properties_for(secrets, PRODUCT_USER, "not-the-password", tmp_path)
    arguments = [command, "--bootstrap-server", state.bootstrap_servers, "--command-config", config]
    if command == "execute":
        arguments += ["--redis-url", state.redis_url]
    if command == "snapshot":
        arguments += ["--output", str(tmp_path / "snapshot.json")]
    result = run_cli(*arguments)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(errors) == 1 and "SASL_AUTHENTICATION_FAILED" in errors[0], result.stderr[-2000:]
    assert f"authentication failed for user {PRODUCT_USER} with SCRAM-SHA-512" in errors[0]
    assert "not-the-password" not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command, lacking", [
    ("watch", "lacks Write on topics reassigner.*"),
    ("execute", "lacks Alter, AlterConfigs, DescribeConfigs on the cluster; Read, Write on topics reassigner.*"),
])
def test_a_missing_acl_is_named_at_start_with_the_grant_that_closes_it(secured, limited_user, tmp_path,
                                                                       command, lacking):
    state, secrets, _ = secured
    config = properties_for(secrets, *limited_user, tmp_path)
    arguments = [command, "--bootstrap-server", state.bootstrap_servers, "--command-config", config]
    if command == "execute":
        arguments += ["--redis-url", state.redis_url]
    result = run_cli(*arguments)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1, result.stderr[-2000:]
    assert "AUTHORIZATION_FAILED" in errors[0] and lacking in errors[0], errors[0]
    assert "kafka-acls.sh --add --allow-principal User:limited" in errors[0]


def test_a_missing_create_is_named_instead_of_retried_forever(secured, limited_user, tmp_path):
    state, secrets, _ = secured
    config = properties_for(secrets, *limited_user, tmp_path)
    result = run_cli("watch", "--topic-prefix", "limited", "--bootstrap-server", state.bootstrap_servers,
                     "--command-config", config)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1, result.stderr[-2000:]
    assert "TOPIC_AUTHORIZATION_FAILED" in errors[0] and "lacks Create" in errors[0], errors[0]


def test_the_documented_acl_commands_give_a_new_principal_everything_each_process_needs(
        secured, limited_user, tmp_path, cache_dir):
    """docs/security.md "ACLs", followed word for word: its `kafka-acls.sh`
    lines (run as Kafka's own AclCommand, as the super user) grant a fresh principal what every
    process checks at start. (`limited_user` created the product's topics.)"""
    import re
    import shlex
    from pathlib import Path

    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from runtime.clients.kafka_access import PROCESS_NEEDS, check_kafka_access
    from reassigner.edge.executor import EXECUTOR_TOPICS
    from reassigner.edge.watcher import WATCHER_TOPICS

    state, secrets, _ = secured
    admin = AdminClient({"bootstrap.servers": state.bootstrap_servers, "log_level": 0,
                         **state.admin_client_config().librdkafka})
    upsert = UserScramCredentialUpsertion("readme", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          b"readme-password")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    page = (Path(__file__).parents[2] / "docs" / "security.md").read_text()
    section = page[page.index("## ACLs"):]
    block = re.search(r"```bash\n(P=User:reassigner.*?)```", section, re.S).group(1)
    grants = [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("$A ")]
    assert len(grants) == 4, block
    for grant in grants:
        completed = subprocess.run(
            [shutil.which("java") or "java", "-Xmx256m", "-cp", kafka_classpath(cache_dir, load_settings().local_kafka_version),
             "org.apache.kafka.tools.AclCommand", "--bootstrap-server", state.bootstrap_servers,
             "--command-config", str(secrets.admin_properties), "--add", "--allow-principal",
             "User:readme", *grant], capture_output=True, text=True, timeout=120)
        assert completed.returncode == 0, completed.stdout[-1000:] + completed.stderr[-1000:]
    config = read_command_config(properties_for(secrets, "readme", "readme-password", tmp_path))
    topics = {"watch": WATCHER_TOPICS, "execute": EXECUTOR_TOPICS, "run": (*WATCHER_TOPICS, *EXECUTOR_TOPICS),
              "snapshot": (), "request": ()}
    for process in PROCESS_NEEDS:
        check_kafka_access(state.bootstrap_servers, config, process,
                           [f"reassigner.{suffix}" for suffix in topics[process]], "reassigner")
