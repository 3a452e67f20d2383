"""Spark's own output never shows the Kafka client secrets it is given (issue 18 item 6): the
plan string, the explain output and a failure dump of a streaming query name the options, and
`kafka.sasl.jaas.config` or an inline `kafka.ssl.keystore.key` match none of Spark's default
redaction patterns."""

from __future__ import annotations

import pytest

from runtime.clients.client_config import compute_client_config
from streams.spark_session import kafka_client_options

pytestmark = [pytest.mark.spark]

PASSWORD = "sp4rk-s3cret-pw"
KEY_TEXT = "-----BEGIN PRIVATE KEY-----\nS3CRETKEYBYTES\n-----END PRIVATE KEY-----\n"


def test_the_kafka_sources_plan_and_failure_hide_the_jaas_password_and_an_inline_key(spark):
    client = compute_client_config(
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
         "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                             f'username="reassigner" password="{PASSWORD}";',
         "ssl.ca.location": "/x/ca.pem", "ssl.certificate.location": "/x/c.pem",
         "ssl.key.location": "/x/k.pem"}, "test",
        {"/x/c.pem": "-----BEGIN CERTIFICATE-----\nC\n-----END CERTIFICATE-----\n", "/x/k.pem": KEY_TEXT})
    frame = (spark.readStream.format("kafka")
             .options(**kafka_client_options("127.0.0.1:1", dict(client.java)))
             .option("subscribe", "nothing").load())
    plan = frame._jdf.queryExecution().toString()
    # The source relation shows its options by name, secrets replaced. (The analyzed plan's
    # inner `DataSource(...)` still prints the raw map: Spark's own gap; the product never
    # prints a plan, and its log format redacts the registered secrets.)
    relation = plan[plan.index("~StreamingRelationV2"):plan.index("~StreamingRelation DataSource")]
    assert "kafka.sasl.jaas.config=*********(redacted)" in relation, relation
    assert PASSWORD not in relation and "S3CRETKEYBYTES" not in relation, relation
    # A query that cannot start (its truststore does not exist) fails with Spark's failure dump.
    query = frame.writeStream.format("noop").start()
    with pytest.raises(Exception) as failure:
        query.awaitTermination(300)
        raise AssertionError("the query did not fail")
    dump = str(failure.value) + str(query.exception() or "")
    assert "=== Streaming Query ===" in dump, dump[:3000]
    assert PASSWORD not in dump and "S3CRETKEYBYTES" not in dump, dump[:3000]
