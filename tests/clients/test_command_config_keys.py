"""Every legal key of a Kafka client properties file is accepted by every client the product
makes from `--command-config` (regression: `client.id` made KafkaAdminClient get `client_id`
twice, "got multiple values for keyword argument 'client_id'", and broke snapshot, watch and
execute, while Kafka's own tools accept it). The clients are built for real, against a port
nothing listens on: confluent-kafka checks its configuration when a client is made, kafka-python
its keyword arguments; no Kafka is started."""

from __future__ import annotations

import pytest

from runtime.clients.client_config import read_command_config
from runtime.clients.kafka_admin import ClusterAdmin, compute_admin_options
from runtime.clients.kafka_consumer import build_consumer, consumer_config, group_consumer_config
from runtime.clients.kafka_producer import build_producer, producer_config
from schemas.errors import KafkaTransientError, ReassignerError

# Java client settings (AdminClientConfig, ProducerConfig, ConsumerConfig, CommonClientConfigs,
# SslConfigs, SaslConfigs) as an operator's client.properties holds them.
LEGAL_PROPERTIES = """\
client.id=ops-tool
security.protocol=PLAINTEXT
request.timeout.ms=20000
default.api.timeout.ms=60000
retries=3
retry.backoff.ms=100
retry.backoff.max.ms=1000
reconnect.backoff.ms=50
reconnect.backoff.max.ms=1000
metadata.max.age.ms=30000
connections.max.idle.ms=540000
socket.connection.setup.timeout.ms=10000
socket.connection.setup.timeout.max.ms=30000
receive.buffer.bytes=65536
send.buffer.bytes=131072
client.dns.lookup=use_all_dns_ips
client.rack=/dc1/r1
metrics.recording.level=INFO
metrics.num.samples=2
metrics.sample.window.ms=30000
metric.reporters=
enable.metrics.push=false
auto.include.jmx.reporter=false
security.providers=
max.in.flight.requests.per.connection=5
sasl.kerberos.service.name=kafka
sasl.login.refresh.window.factor=0.8
sasl.login.connect.timeout.ms=10000
ssl.protocol=TLSv1.3
ssl.enabled.protocols=TLSv1.3,TLSv1.2
ssl.keymanager.algorithm=SunX509
ssl.trustmanager.algorithm=PKIX
ssl.secure.random.implementation=SHA1PRNG
ssl.endpoint.identification.algorithm=https
"""


@pytest.fixture
def client_config(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(LEGAL_PROPERTIES)
    return read_command_config(path)


def test_every_confluent_kafka_client_takes_them(client_config, closed_port):
    """The watcher's and executor's producers, the readers (alerts, status server, pipeline
    offsets), the webhook's group consumer and the executor's own consumer configuration."""
    configs = [producer_config(closed_port, client_config, "reassigner-watcher"),
               consumer_config(closed_port, client_config, "alerts-follow"),
               group_consumer_config(closed_port, client_config, "reassigner.webhook"),
               {"group.id": "reassigner.executor", "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "log_level": 0} | {"bootstrap.servers": closed_port, **client_config.librdkafka}]
    assert all(config["client.id"] == "ops-tool" for config in configs)
    producer = build_producer(configs[0])
    producer.flush(0)
    for config in configs[1:]:
        build_consumer(config).close()


def test_the_admin_client_takes_them(client_config, closed_port):
    """kafka-python's KafkaAdminClient, as snapshot, watch and execute make it (ClusterAdmin):
    it fails only for the cluster that is not there, never for a keyword argument."""
    options = compute_admin_options(closed_port, 1000, client_config)
    assert options["client_id"] == "ops-tool"
    with ClusterAdmin(closed_port, client_config, request_timeout_ms=1000) as admin:
        with pytest.raises(ReassignerError) as refused:
            admin.describe_brokers()
    assert isinstance(refused.value, KafkaTransientError), refused.value
    assert "keyword argument" not in str(refused.value)
