"""The secured local stack (`reassigner local up --security sasl_ssl`): a CA, TLS certificates,
SCRAM users, the brokers' and the controller's security settings, the product's ACLs, and Redis
with an ACL user over TLS.

Layout of a secured stack:
- **Kafka clients** reach the brokers on one `SASL_SSL` listener per broker (SCRAM-SHA-512 and
  SCRAM-SHA-256; PLAIN too, with static users, for trying that mechanism). Brokers talk to each
  other on the same listener as the SCRAM user `broker`.
- **The controller** listens on `SASL_PLAINTEXT` with PLAIN (user `controller`): KRaft cannot
  authenticate the controller listener with SCRAM, whose credentials live in the metadata log
  the controller serves.
- **Authorization** is Kafka's `StandardAuthorizer` on every node; `super.users` are only
  `broker`, `controller` and `admin` (the stack's own tooling: readiness, topics, ACLs). The
  product's principal `reassigner` is *not* a super user: it holds exactly `PRODUCT_ACLS`.
- **Redis** listens on TLS only (`--port 0 --tls-port`), its `default` user is off, and the
  product's user `reassigner` may use keys under `reassigner:` only.

INVARIANTS
- Every secret is random per stack (`secrets.token_hex`), written only to files of mode 0600 in
  `<stack>/security/`, and never printed: the CLI prints paths, not passwords.
- One table, `PRODUCT_ACLS`, is what the product's principal gets here, what the README lists and
  what a start-up permission check would compare against.
- The certificates are made by the system's `openssl` (no Python crypto library needed); the
  server certificate names `localhost` and `127.0.0.1` and signs as server and client.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from schemas.errors import LocalStackError
from reassigner.dev.local.processes import run_tool

SECURITY_MODES = ("none", "sasl_ssl")
PRODUCT_USER = "reassigner"
ADMIN_USER = "admin"
BROKER_USER = "broker"
CONTROLLER_USER = "controller"
SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"

# (resource type, resource name, pattern type, operations): the product's principal needs these
# and no more (the secured stack runs every process under exactly this list; docs/security.md,
# "ACLs").
PRODUCT_ACLS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("CLUSTER", "kafka-cluster", "LITERAL", ("DESCRIBE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS")),
    ("TOPIC", "reassigner.", "PREFIXED", ("READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS")),
    ("TOPIC", "*", "LITERAL", ("DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS")),
    ("GROUP", "reassigner", "PREFIXED", ("READ",)),
)


@dataclass(frozen=True)
class StackSecrets:
    """Paths and passwords of a secured stack (stored in `<stack>/security/secrets.json`)."""

    directory: str
    ca_file: str
    broker_keystore: str
    redis_certificate: str
    redis_key: str
    passwords: dict[str, str]
    redis_password: str

    @property
    def product_properties(self) -> Path:
        """The product's Kafka client settings: works for librdkafka, kafka-python and Spark."""
        return Path(self.directory) / "client.properties"

    @property
    def admin_properties(self) -> Path:
        """The stack's super user, for the stack's tooling and tests (topics, ACLs, traffic)."""
        return Path(self.directory) / "admin.properties"

    def redis_url(self, port: int) -> str:
        return (f"rediss://{PRODUCT_USER}:{self.redis_password}@127.0.0.1:{port}/0"
                f"?ssl_ca_certs={self.ca_file}")

    @classmethod
    def load(cls, directory: Path) -> "StackSecrets":
        return cls(**json.loads((Path(directory) / "secrets.json").read_text()))


# --- pure: what the nodes and clients are told -----------------------------------------------


def jaas(module: str, username: str, password: str, **users: str) -> str:
    extra = "".join(f' user_{name}="{secret}"' for name, secret in users.items())
    return f'{module} required username="{username}" password="{password}"{extra};'


def compute_controller_settings(stack: StackSecrets) -> dict[str, object]:
    """Settings of the KRaft controller beyond the plain stack's (listener CONTROLLER)."""
    password = stack.passwords[CONTROLLER_USER]
    return {
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config":
            jaas(PLAIN_LOGIN, CONTROLLER_USER, password, **{CONTROLLER_USER: password}),
        **_authorizer_settings(),
    }


def compute_broker_settings(stack: StackSecrets, port: int) -> dict[str, object]:
    """Settings of a broker beyond the plain stack's: one SASL_SSL listener for clients and
    brokers, SASL_PLAINTEXT/PLAIN towards the controller."""
    passwords = stack.passwords
    static_plain_users = {PRODUCT_USER: passwords[PRODUCT_USER], ADMIN_USER: passwords[ADMIN_USER]}
    return {
        "listeners": f"SASL_SSL://127.0.0.1:{port}",
        "advertised.listeners": f"SASL_SSL://127.0.0.1:{port}",
        "inter.broker.listener.name": "SASL_SSL",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": ",".join((*SCRAM_MECHANISMS, "PLAIN")),
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            jaas(SCRAM_LOGIN, BROKER_USER, passwords[BROKER_USER]),
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
            jaas(SCRAM_LOGIN, BROKER_USER, passwords[BROKER_USER]),
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            jaas(PLAIN_LOGIN, BROKER_USER, passwords[BROKER_USER],
                 **{BROKER_USER: passwords[BROKER_USER]}, **static_plain_users),
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config":
            jaas(PLAIN_LOGIN, CONTROLLER_USER, passwords[CONTROLLER_USER]),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": stack.broker_keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": stack.ca_file,
        "ssl.client.auth": "requested",
        **_authorizer_settings(),
    }


def _authorizer_settings() -> dict[str, object]:
    return {
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": ";".join(f"User:{user}" for user in (BROKER_USER, CONTROLLER_USER, ADMIN_USER)),
        "allow.everyone.if.no.acl.found": "false",
    }


def compute_scram_format_arguments(stack: StackSecrets) -> list[str]:
    """`kafka-storage format --add-scram ...`: SCRAM credentials in the bootstrap metadata, so that
    brokers and clients can authenticate from the first start (KIP-900)."""
    arguments: list[str] = []
    for user in (BROKER_USER, ADMIN_USER, PRODUCT_USER):
        for mechanism in SCRAM_MECHANISMS:
            arguments += ["--add-scram", f"{mechanism}=[name={user},password={stack.passwords[user]}]"]
    return arguments


def render_client_properties(stack: StackSecrets, user: str, mechanism: str = "SCRAM-SHA-512") -> str:
    """A Kafka client properties file for `user`, in the form every client library the product
    uses reads: a PEM truststore (Java, librdkafka and kafka-python alike)."""
    module = PLAIN_LOGIN if mechanism == "PLAIN" else SCRAM_LOGIN
    return "\n".join((
        "security.protocol=SASL_SSL",
        f"sasl.mechanism={mechanism}",
        f"sasl.jaas.config={jaas(module, user, stack.passwords[user])}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={stack.ca_file}",
    )) + "\n"


def compute_redis_config(stack: StackSecrets, port: int) -> list[str]:
    """redis.conf lines for TLS only and the product's ACL user (keys under `reassigner:`)."""
    return [
        "port 0",
        f"tls-port {port}",
        f"tls-cert-file {stack.redis_certificate}",
        f"tls-key-file {stack.redis_key}",
        f"tls-ca-cert-file {stack.ca_file}",
        "tls-auth-clients no",
        "user default off",
        f"user {PRODUCT_USER} on >{stack.redis_password} ~reassigner:* &* +@all -@dangerous +info",
    ]


# --- I/O: making the material --------------------------------------------------------------------


def create_stack_secrets(directory: Path) -> StackSecrets:
    """A fresh CA, a server certificate for 127.0.0.1/localhost, passwords and client settings
    files in `directory` (created with mode 0700; files 0600)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise LocalStackError("openssl is not installed; run `apt-get install openssl` to make a "
                              "secured local stack")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    ca_key, ca_file = directory / "ca.key", directory / "ca.pem"
    server_key, server_csr, server_certificate = (directory / "server.key", directory / "server.csr",
                                                   directory / "server.pem")
    extensions = directory / "server.ext"
    extensions.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                          "extendedKeyUsage=serverAuth,clientAuth\n")
    _openssl(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out",
             ca_file, "-days", "3650", "-subj", "/CN=reassigner-local-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _openssl(openssl, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", server_key, "-out",
             server_csr, "-subj", "/CN=localhost")
    _openssl(openssl, "x509", "-req", "-in", server_csr, "-CA", ca_file, "-CAkey", ca_key,
             "-CAcreateserial", "-out", server_certificate, "-days", "3650", "-extfile", extensions)
    keystore = directory / "broker-keystore.pem"  # Kafka's PEM keystore: PKCS#8 key + chain
    keystore.write_text(server_key.read_text() + server_certificate.read_text() + ca_file.read_text())
    stack = StackSecrets(
        directory=str(directory), ca_file=str(ca_file), broker_keystore=str(keystore),
        redis_certificate=str(server_certificate), redis_key=str(server_key),
        passwords={user: secrets.token_hex(16)
                   for user in (ADMIN_USER, BROKER_USER, CONTROLLER_USER, PRODUCT_USER)},
        redis_password=secrets.token_hex(16),
    )
    write_private(directory / "secrets.json", json.dumps(asdict(stack), indent=2) + "\n")
    write_private(stack.product_properties, render_client_properties(stack, PRODUCT_USER))
    write_private(stack.admin_properties, render_client_properties(stack, ADMIN_USER))
    for path in (ca_key, server_key, keystore):
        os.chmod(path, 0o600)
    return stack


def _openssl(openssl: str, *arguments: object) -> None:
    result = run_tool([openssl, *map(str, arguments)], f"openssl {arguments[0]}", 60)
    if result.returncode != 0:
        raise LocalStackError(f"openssl {arguments[0]} failed: {result.stderr.strip()[-300:]}")


def write_private(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)


def create_product_acls(admin_config: dict[str, str]) -> None:
    """Give the product's principal `PRODUCT_ACLS` (as the stack's super user)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)

    bindings = [
        # librdkafka names Kafka's CLUSTER resource type BROKER (both are type 4).
        AclBinding(ResourceType["BROKER" if resource == "CLUSTER" else resource], name, ResourcePatternType[pattern], f"User:{PRODUCT_USER}",
                   "*", AclOperation[operation], AclPermissionType.ALLOW)
        for resource, name, pattern, operations in PRODUCT_ACLS for operation in operations
    ]
    admin = AdminClient(admin_config)
    for binding, future in admin.create_acls(bindings, request_timeout=30).items():
        try:
            future.result(timeout=60)
        except KafkaException as error:
            raise LocalStackError(f"cannot create the ACL {binding}: {error}") from None
        except TimeoutError:
            raise LocalStackError(f"creating the ACL {binding}: no answer within 60 s; see the "
                                  "controller's and brokers' logs/server.log under the stack dir") from None
