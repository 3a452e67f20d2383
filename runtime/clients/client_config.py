"""`--command-config`: a Kafka client properties file, as Kafka's own tools take it, turned into
the configuration of each client library the product uses.

One Java-style file (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.*``)
is translated three ways, by pure functions:
- librdkafka (confluent-kafka producer, consumer, admin): ``sasl.mechanism`` → ``sasl.mechanisms``;
  the user name and password of a ``PlainLoginModule`` or ``ScramLoginModule`` JAAS line →
  ``sasl.username`` / ``sasl.password``; PEM files (``ssl.ca.location``, a PEM truststore) as paths;
- kafka-python (the Admin API adapter): ``security_protocol``, ``sasl_mechanism``,
  ``sasl_plain_username``, ``sasl_plain_password``, ``ssl_cafile``, ``ssl_certfile``, ...;
- the Java client (Spark's Kafka source and sink, ``kafka.``-prefixed): the file verbatim, plus
  the Java spelling of librdkafka's keys: ``ssl.ca.location`` → a PEM truststore, a client
  certificate and key given as two PEM paths → an inline PEM keystore (their contents),
  ``sasl.username``/``sasl.password`` → a JAAS line, ``ssl.endpoint.identification.algorithm=none``
  → empty. Keys only librdkafka knows are left out.
One file works for all three unchanged (docs/security.md): ``ssl.truststore.type=PEM`` with
``ssl.truststore.location=ca.pem`` and, for mTLS, ``ssl.keystore.type=PEM`` with one file holding
the PKCS#8 key and the chain. A JKS or PKCS#12 truststore is fine for Java; the Python clients
then need ``ssl.ca.location`` beside it.

INVARIANTS
- Only `read_command_config` reads files (the properties file, and checks that the files it names
  can be read) and registers the file's secrets with `schemas.redaction`; nothing reads the
  environment or a clock. The syntax is `runtime.clients.java_properties`'s, a JAAS line is read
  by `runtime.clients.jaas_config`: both as Java reads them.
- A setting the Python clients cannot honour (a JKS truststore or keystore, a JAAS login module
  they do not implement) raises `InvalidConfigError` saying what to give instead — never a
  silently weaker connection.
- A property with no meaning for a Python client (``ssl.truststore.type``, ``ssl.protocol``...)
  is listed in `ClientConfig.ignored`, so that the caller can say so once in the log.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from runtime.clients.jaas_config import parse_jaas_config
from runtime.clients.java_properties import parse_properties
from schemas.errors import InvalidConfigError
from schemas.redaction import register_secret

JAAS_LOGIN_MODULES_WITH_PASSWORD = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
}

# Properties whose name and meaning are the same in Java and in librdkafka.
SHARED_LIBRDKAFKA_NAMES = frozenset({
    "security.protocol", "client.id", "sasl.kerberos.service.name",
    "sasl.kerberos.principal", "sasl.kerberos.keytab", "ssl.ca.location",
    "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.cipher.suites", "ssl.crl.location", "ssl.ca.certificate.stores",
})

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")


@dataclass(frozen=True)
class ClientConfig:
    """The one properties file as each client library wants it."""

    properties: Mapping[str, str] = field(default_factory=dict)
    """The file's key/value pairs, as read."""
    librdkafka: Mapping[str, str] = field(default_factory=dict)
    """Extra configuration for confluent-kafka clients (merge into their config dict)."""
    kafka_python: Mapping[str, object] = field(default_factory=dict)
    """Extra keyword arguments for kafka-python clients."""
    java: Mapping[str, str] = field(default_factory=dict)
    """The properties as the Java client (inside Spark) reads them."""
    spark_options: Mapping[str, str] = field(default_factory=dict)
    """Options for Spark's Kafka source/sink (``kafka.``-prefixed `java`)."""
    ignored: tuple[str, ...] = ()
    """Properties the Python clients do not use (Spark still gets them)."""

    def __repr__(self) -> str:
        # The mappings hold passwords (sasl.jaas.config, sasl.password, ssl.key.password...):
        # a log line or a traceback showing a ClientConfig shows the property names only.
        return (f"ClientConfig(properties={sorted(self.properties)}, librdkafka={sorted(self.librdkafka)}, "
                f"kafka_python={sorted(self.kafka_python)}, ignored={self.ignored})")


def read_command_config(path: Path | None) -> ClientConfig:
    """The translated client configuration of the properties file at `path` (None: no file).
    The files it names are checked here, before any client is made (`require_client_files`), and
    its secrets registered with `schemas.redaction`, so that no output shows them."""
    if path is None:
        return ClientConfig()
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise InvalidConfigError(
            f"cannot read --command-config {path}: {error.strerror or error}; "
            "give the path of a Kafka client properties file"
        ) from None
    properties = parse_properties(text, str(path))
    for key, value in properties.items():
        if key in SECRET_PROPERTIES:
            register_secret(value.strip())
    require_client_files({key.strip(): value for key, value in properties.items()}, str(path))
    pem_files: dict[str, str] = {}
    if "ssl.keystore.location" not in properties:
        # A client certificate given as two PEM paths reaches Java as their contents.
        for name in ("ssl.certificate.location", "ssl.key.location"):
            if name in properties:
                location = properties[name].strip()
                try:
                    pem_files[location] = Path(location).read_text()
                except OSError as error:
                    raise InvalidConfigError(
                        f"{path}: {name}={location} cannot be read: {error.strerror or error}"
                    ) from None
    config = compute_client_config(properties, str(path), pem_files)
    register_secret(config.librdkafka.get("sasl.password"))
    return config


# Properties whose value is a secret (sasl.jaas.config's password is registered once parsed).
SECRET_PROPERTIES = frozenset({
    "sasl.jaas.config", "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
    "sasl.password", "sasl.oauthbearer.client.secret",
})

# Properties naming a file a client reads.
FILE_PROPERTIES = ("ssl.ca.location", "ssl.truststore.location", "ssl.keystore.location",
                   "ssl.certificate.location", "ssl.key.location", "ssl.crl.location",
                   "sasl.kerberos.keytab")


def require_client_files(properties: Mapping[str, str], source: str) -> None:
    """Refuse, in one line naming the property and the path, a file property whose file this host
    cannot read: checked at start, not found by a client library minutes later in a traceback
    (librdkafka's `ssl.ca.location` also takes the word `probe`: the system's CA store)."""
    for name in FILE_PROPERTIES:
        value = properties.get(name, "").strip()
        if not value or (name == "ssl.ca.location" and value == "probe"):
            continue
        file = Path(value)
        if not file.exists():
            problem = "no such file"
        elif not file.is_file():
            problem = "not a file"
        elif not os.access(file, os.R_OK):
            problem = "not readable by this user"
        else:
            continue
        raise InvalidConfigError(f"{source}: {name}={value}: {problem}; give the path of a file this host "
                                 "can read")


# --- translation --------------------------------------------------------------------------------


def compute_client_config(properties: Mapping[str, str], source: str = "command config",
                          pem_files: Mapping[str, str] | None = None) -> ClientConfig:
    """Translate Java client properties for librdkafka, kafka-python and Spark (see module doc);
    `pem_files` holds the contents of a client certificate and key given as PEM paths."""
    props = {key.strip(): value.strip() for key, value in properties.items()}
    librdkafka: dict[str, str] = {}
    kafka_python: dict[str, object] = {}
    handled: set[str] = set()

    protocol = props.get("security.protocol")
    if protocol is not None:
        protocol = protocol.upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(
                f"{source}: security.protocol={props['security.protocol']!r}; "
                f"expected one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        librdkafka["security.protocol"] = protocol
        kafka_python["security_protocol"] = protocol
        handled.add("security.protocol")

    if "sasl.mechanisms" in props and "sasl.mechanism" not in props:  # librdkafka's spelling
        props["sasl.mechanism"] = props.pop("sasl.mechanisms")
    _translate_sasl(props, source, librdkafka, kafka_python, handled)
    _translate_ssl(props, source, librdkafka, kafka_python, handled)

    if "client.id" in props:
        librdkafka["client.id"] = props["client.id"]
        kafka_python["client_id"] = props["client.id"]
        handled.add("client.id")
    for name in sorted(SHARED_LIBRDKAFKA_NAMES - handled):
        if name in props:
            librdkafka[name] = props[name]
            handled.add(name)

    java = compute_java_properties(props, source, pem_files or {})
    spark_options = {f"kafka.{key}": value for key, value in java.items()}
    ignored = tuple(sorted(set(props) - handled))
    return ClientConfig(properties=dict(props), librdkafka=librdkafka, kafka_python=kafka_python,
                        java=java, spark_options=spark_options, ignored=ignored)


# Properties that only librdkafka reads; the Java client gets their Java spelling instead.
LIBRDKAFKA_ONLY_NAMES = frozenset({
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.crl.location",
    "ssl.ca.certificate.stores", "sasl.username", "sasl.password", "sasl.mechanisms",
})


def compute_java_properties(props: Mapping[str, str], source: str,
                            pem_files: Mapping[str, str]) -> dict[str, str]:
    """The properties as the Java client must get them (see the module doc)."""
    java = {key: value for key, value in props.items() if key not in LIBRDKAFKA_ONLY_NAMES}
    if "ssl.ca.location" in props and "ssl.truststore.location" not in props:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.location"] = props["ssl.ca.location"]
    certificate, key = props.get("ssl.certificate.location"), props.get("ssl.key.location")
    if certificate is not None and "ssl.keystore.location" not in props:
        if key is None:
            raise InvalidConfigError(f"{source}: ssl.certificate.location is given without "
                                     "ssl.key.location; give the client certificate's key too")
        key_text = pem_files.get(key)
        if key_text is not None and "-----BEGIN PRIVATE KEY-----" not in key_text \
                and "-----BEGIN ENCRYPTED PRIVATE KEY-----" not in key_text:
            raise InvalidConfigError(
                f"{source}: ssl.key.location={key} is not a PKCS#8 key, which the Java client "
                f"(Spark) needs; convert it: openssl pkcs8 -topk8 -nocrypt -in {key} -out key-pkcs8.pem"
            )
        if certificate in pem_files and key_text is not None:
            java["ssl.keystore.type"] = "PEM"
            java["ssl.keystore.certificate.chain"] = pem_files[certificate]
            java["ssl.keystore.key"] = key_text
    if "sasl.username" in props and "sasl.jaas.config" not in props:
        mechanism = props.get("sasl.mechanism", "PLAIN").upper()
        module = next((m for m, family in JAAS_LOGIN_MODULES_WITH_PASSWORD.items()
                       if mechanism.startswith(family)), None)
        if module is not None:
            java["sasl.jaas.config"] = (f'{module} required username="{_jaas_quote(props["sasl.username"])}" '
                                        f'password="{_jaas_quote(props.get("sasl.password", ""))}";')
    if "sasl.mechanism" in props:
        java["sasl.mechanism"] = props["sasl.mechanism"].upper()
    if props.get("ssl.endpoint.identification.algorithm", "").strip().lower() == "none":
        java["ssl.endpoint.identification.algorithm"] = ""  # Java's spelling of "no host check"
    return java


def _jaas_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _translate_sasl(props: Mapping[str, str], source: str, librdkafka: dict[str, str],
                    kafka_python: dict[str, object], handled: set[str]) -> None:
    mechanism = props.get("sasl.mechanism")
    if mechanism is not None:
        mechanism = mechanism.upper()
        if mechanism not in SASL_MECHANISMS:
            raise InvalidConfigError(
                f"{source}: sasl.mechanism={props['sasl.mechanism']!r}; "
                f"expected one of {', '.join(SASL_MECHANISMS)}"
            )
        librdkafka["sasl.mechanisms"] = mechanism
        kafka_python["sasl_mechanism"] = mechanism
        handled.add("sasl.mechanism")
    if "sasl.kerberos.service.name" in props:
        kafka_python["sasl_kerberos_service_name"] = props["sasl.kerberos.service.name"]

    jaas = props.get("sasl.jaas.config")
    if jaas is None:
        if "sasl.username" in props:  # librdkafka's spelling of a user and password
            handled.update({"sasl.username", "sasl.password"})
            librdkafka["sasl.username"] = props["sasl.username"]
            librdkafka["sasl.password"] = props.get("sasl.password", "")
            kafka_python["sasl_plain_username"] = props["sasl.username"]
            kafka_python["sasl_plain_password"] = props.get("sasl.password", "")
        return
    handled.add("sasl.jaas.config")
    module, options = parse_jaas_config(jaas, source)
    family = JAAS_LOGIN_MODULES_WITH_PASSWORD.get(module)
    if family is None:
        if module.endswith("Krb5LoginModule"):
            # librdkafka and kafka-python take Kerberos from the system (kinit / keytab options).
            if "principal" in options:
                librdkafka["sasl.kerberos.principal"] = options["principal"]
            if "keyTab" in options:
                librdkafka["sasl.kerberos.keytab"] = options["keyTab"]
            return
        raise InvalidConfigError(
            f"{source}: sasl.jaas.config uses {module}, which the Python clients cannot run; "
            "use PlainLoginModule or ScramLoginModule with username and password"
        )
    missing = [name for name in ("username", "password") if name not in options]
    if missing:
        raise InvalidConfigError(
            f"{source}: sasl.jaas.config ({module.rsplit('.', 1)[-1]}) lacks {' and '.join(missing)}"
        )
    if mechanism is not None and not mechanism.startswith(family):
        raise InvalidConfigError(
            f"{source}: sasl.mechanism={mechanism} does not match the JAAS login module "
            f"{module.rsplit('.', 1)[-1]} (expected a {family} mechanism)"
        )
    if mechanism is None:  # Java's default mechanism is GSSAPI; a password module means PLAIN/SCRAM
        default = "PLAIN" if family == "PLAIN" else "SCRAM-SHA-512"
        librdkafka["sasl.mechanisms"] = default
        kafka_python["sasl_mechanism"] = default
    librdkafka["sasl.username"] = options["username"]
    librdkafka["sasl.password"] = options["password"]
    kafka_python["sasl_plain_username"] = options["username"]
    kafka_python["sasl_plain_password"] = options["password"]


def _is_pem_store(props: Mapping[str, str], prefix: str) -> bool:
    store_type = props.get(f"{prefix}.type", "").upper()
    location = props.get(f"{prefix}.location", "").lower()
    if store_type:
        return store_type == "PEM"
    return location.endswith((".pem", ".crt", ".cer"))


def _translate_ssl(props: Mapping[str, str], source: str, librdkafka: dict[str, str],
                   kafka_python: dict[str, object], handled: set[str]) -> None:
    ca_location = props.get("ssl.ca.location")
    if "ssl.truststore.location" in props:
        handled.update({"ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password"})
        if not _is_pem_store(props, "ssl.truststore") and ca_location is None:
            raise InvalidConfigError(
                f"{source}: ssl.truststore.location={props['ssl.truststore.location']} is a "
                f"{props.get('ssl.truststore.type', 'JKS')} truststore, which librdkafka and "
                "kafka-python cannot read; export the CA certificate as PEM (keytool -exportcert "
                "-rfc) and give ssl.ca.location=/path/ca.pem beside it (Spark keeps using the "
                "truststore), or use ssl.truststore.type=PEM with the PEM file for all three"
            )
        if _is_pem_store(props, "ssl.truststore"):
            ca_location = ca_location or props["ssl.truststore.location"]
    if ca_location is not None:
        librdkafka["ssl.ca.location"] = ca_location
        kafka_python["ssl_cafile"] = ca_location
        handled.add("ssl.ca.location")

    if "ssl.keystore.location" in props:
        handled.update({"ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password"})
        location = props["ssl.keystore.location"]
        store_type = props.get("ssl.keystore.type", "JKS").upper()
        if store_type == "PEM":
            # One file with the PKCS#8 key and the chain; OpenSSL finds each part in it.
            librdkafka["ssl.certificate.location"] = location
            librdkafka["ssl.key.location"] = location
            kafka_python["ssl_certfile"] = location
            kafka_python["ssl_keyfile"] = location
            if "ssl.key.password" in props:
                librdkafka["ssl.key.password"] = props["ssl.key.password"]
                kafka_python["ssl_password"] = props["ssl.key.password"]
        elif "ssl.certificate.location" not in props:
            # librdkafka could read a PKCS12 keystore, but kafka-python (the Admin API client)
            # reads PEM only, and one file must serve both.
            raise InvalidConfigError(
                f"{source}: ssl.keystore.location={location} is a {store_type} keystore, which "
                "the Python clients cannot read; give the client certificate and key as PEM: "
                "ssl.certificate.location and ssl.key.location (Spark keeps using the keystore)"
            )
    if "ssl.certificate.location" in props:
        kafka_python["ssl_certfile"] = props["ssl.certificate.location"]
    if "ssl.key.location" in props:
        kafka_python["ssl_keyfile"] = props["ssl.key.location"]
    if "ssl.key.password" in props:
        kafka_python["ssl_password"] = props["ssl.key.password"]
    if "ssl.crl.location" in props:
        kafka_python["ssl_crlfile"] = props["ssl.crl.location"]

    if "ssl.endpoint.identification.algorithm" in props:
        handled.add("ssl.endpoint.identification.algorithm")
        algorithm = props["ssl.endpoint.identification.algorithm"].strip().lower()
        # Java: empty disables host name checks; librdkafka spells that "none".
        librdkafka["ssl.endpoint.identification.algorithm"] = "https" if algorithm == "https" else "none"
        kafka_python["ssl_check_hostname"] = algorithm == "https"
