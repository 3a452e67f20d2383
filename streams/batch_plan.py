"""The pipeline's Spark plan: the Kafka source over the input topics, and the reduce of one
micro-batch to the `InputRow`s the driver decodes (`streams.input_rows`).

SOURCE: one Kafka source subscribed to every input topic (`INPUT_TOPICS`), checkpointed, with
the records' headers (the writer's schema set version travels in one), bounded per micro-batch
(`max_records_per_batch`), short fetch waits and per-attempt timeouts (see the options' comments).
Spark decodes nothing here: each record is decoded once, at the driver.

REDUCE (`reduce_batch`), one Spark job on the common path: a batch of at most
`DRIVER_COLLAPSE_ROWS` rows is collected whole, raw. A bigger one (a burst of ISR changes) is
first collapsed in Spark to the latest state-carrying event per (topic, subject), so that
100,000 ISR events reach the driver as one row per partition: that needs to know which rows are
decodable state events and their subject, so the four state-carrying topics are decoded there
with `from_avro` (PERMISSIVE: an undecodable value gives nulls, never a failed query; such a row
never collapses and reaches the driver, which dead-letters it). The greatest offset per input
partition is returned with the rows (collapsed rows included): what the batch consumed.
"""

from __future__ import annotations

from typing import Any, Mapping

from runtime.settings import Settings
from schemas.codec import TOPICS, schema_json
from streams.input_rows import INPUT_TOPICS, STATE_CARRYING, InputRow, compute_writer_version
from streams.offsets import compute_consumed
from streams.spark_session import kafka_client_options

# Up to this many rows a micro-batch is collected as it is; above it Spark collapses it first
# (a window over a shuffle, ~150 ms more on this machine).
DRIVER_COLLAPSE_ROWS = 5_000
RAW_COLUMNS = ("topic", "partition", "offset", "key", "value", "headers")


def source_timeouts(client_properties: Mapping[str, str]) -> dict[str, str]:
    """The Kafka source's request and API timeouts (ms): 5 s / 10 s unless the client settings
    say otherwise; the API timeout is never below the request timeout (the Admin client refuses
    that combination at start)."""
    request_timeout = int(client_properties.get("request.timeout.ms", "5000"))
    api_timeout = int(client_properties.get("default.api.timeout.ms", max(10_000, request_timeout)))
    return {"kafka.request.timeout.ms": str(request_timeout),
            "kafka.default.api.timeout.ms": str(max(api_timeout, request_timeout))}


def build_input_stream(spark, settings: Settings, client_properties: dict[str, str],
                       starting_offsets: str = "earliest"):
    """The Kafka source over every input topic (raw records); a new checkpoint starts at
    `starting_offsets` (`streams.offsets.compute_starting_offsets`)."""
    topics = [settings.topic(suffix) for suffix in INPUT_TOPICS]
    return (
        spark.readStream.format("kafka")
        .options(**kafka_client_options(settings.bootstrap_servers or "", client_properties))
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", starting_offsets)
        .option("failOnDataLoss", "false")
        # The writer's schema set version travels in a header (`schemas.codec`): a record of an
        # older set is decoded with it at the driver.
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", str(settings.max_records_per_batch))
        # The source's consumers leave a fetch in flight at the end of the log; the broker holds
        # it for fetch.max.wait.ms (500 ms by default) and the next micro-batch's read waits for
        # it. A short wait takes ~500 ms off the event-to-command latency.
        .option("kafka.fetch.max.wait.ms", client_properties.get("fetch.max.wait.ms", "10"))
        # A broker that dies, or whose log dir fails, takes leaders of some input partitions
        # with it; the source's Admin listOffsets then sat for default.api.timeout.ms (60 s)
        # before Spark retried with a fresh Admin client, which found the new leaders at once:
        # every reaction to that failure waited a minute. 10 s per attempt and 18 attempts keep
        # the default's 3 minutes before the query gives up.
        .options(**source_timeouts(client_properties))
        .option("fetchOffset.numRetries", "18")
        .option("fetchOffset.retryIntervalMs", "200")
        .load()
        .select(*RAW_COLUMNS)
    )


def annotate_collapsible(batch, settings: Settings):
    """Every raw row with `subject` and whether it is `collapsible`: a decodable event of a
    state-carrying topic (decoded here, PERMISSIVE), whose subject is its key — for log dirs,
    keyed by broker, the key and the dir's path."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    collapsible = F.lit(False)
    for suffix in STATE_CARRYING:
        decoded = from_avro(F.col("value"), schema_json(TOPICS[suffix]), {"mode": "PERMISSIVE"})
        collapsible = F.when(F.col("topic") == settings.topic(suffix),
                             decoded.getField("event_time").isNotNull()).otherwise(collapsible)
    path = from_avro(F.col("value"), schema_json(TOPICS["disk-failures"]), {"mode": "PERMISSIVE"}).getField("path")
    subject = F.when(F.col("topic") == settings.topic("disk-failures"),
                     F.concat_ws(":", F.col("key").cast("string"), path)).otherwise(F.col("key").cast("string"))
    return (batch.withColumn("collapsible", collapsible & F.col("key").isNotNull())
            .withColumn("subject", subject))


def collapse_in_spark(annotated):
    """The latest row per (topic, subject) among collapsible rows; every other row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    latest_first = Window.partitionBy("topic", "subject").orderBy(F.col("partition").desc(),
                                                                  F.col("offset").desc())
    return (
        annotated.withColumn("rank", F.when(F.col("collapsible"), F.row_number().over(latest_first))
                             .otherwise(1))
        .where(F.col("rank") == 1)
        .select(*RAW_COLUMNS)
    )


def as_input_row(row: Any) -> InputRow:
    """A collected Spark row as the driver's typed row."""
    return InputRow(row.topic, row.partition, row.offset, bytes(row.value) if row.value is not None else None,
                    compute_writer_version(row.headers), bytes(row.key) if row.key is not None else None)


def reduce_batch(batch, settings: Settings) -> tuple[list[InputRow], dict[tuple[str, int], int]]:
    """The module's REDUCE: the rows the driver decodes, and the greatest offset the batch holds
    per input partition."""
    from pyspark.sql import functions as F

    head = batch.limit(DRIVER_COLLAPSE_ROWS + 1).collect()
    if len(head) <= DRIVER_COLLAPSE_ROWS:
        return [as_input_row(r) for r in head], compute_consumed((r.topic, r.partition, r.offset) for r in head)
    ends = batch.groupBy("topic", "partition").agg(F.max("offset").alias("offset")).collect()
    kept = collapse_in_spark(annotate_collapsible(batch, settings)).collect()
    return [as_input_row(r) for r in kept], {(r.topic, r.partition): r.offset for r in ends}
