"""The smoke flow of the foundation: PartitionState events from Kafka into Redis, through Spark.

One Structured Streaming query: Kafka source (`subscribe` the ISR-change topic, earliest
offsets) → `from_avro` with the topic's schema in PERMISSIVE mode (an undecodable record becomes
a null, it never stops the query) → `foreachBatch` that orders the rows by (Kafka partition,
offset), collapses them to the latest event per topic-partition in Spark (so a burst costs one
row per partition at the driver) and applies them to Redis as one atomic, idempotent transition
(`state.partition_store`). The full pipeline of the product builds on this shape.
"""

from __future__ import annotations

from pathlib import Path

from schemas.codec import schema_json
from state.partition_store import PartitionStore
from streams.spark_session import kafka_client_options


def start_partition_state_query(
    spark,
    bootstrap_servers: str,
    topic: str,
    redis_url: str,
    cluster_name: str,
    checkpoint_dir: Path,
    client_properties: dict[str, str] | None = None,
    trigger_interval: str = "500 milliseconds",
):
    """Start the query; returns the `StreamingQuery` (call `.stop()` to end it)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    source = (
        spark.readStream.format("kafka")
        .options(**kafka_client_options(bootstrap_servers, client_properties or {}))
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "false")
        .load()
    )
    decoded = source.select(
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        from_avro(F.col("value"), schema_json("PartitionState"), {"mode": "PERMISSIVE"}).alias("event"),
    )

    def apply_batch(batch, batch_id: int) -> None:
        import redis

        latest_first = Window.partitionBy("event.topic", "event.partition").orderBy(
            F.col("kafka_partition").desc(), F.col("kafka_offset").desc())
        rows = (
            # PERMISSIVE decoding turns an undecodable value into nulls; keep only real events.
            batch.where(F.col("event.topic").isNotNull() & F.col("event.partition").isNotNull())
            .withColumn("rank", F.row_number().over(latest_first))
            .where(F.col("rank") == 1)
            .orderBy("kafka_partition", "kafka_offset")
            .select("event")
            .collect()
        )
        states = [row.event.asDict(recursive=True) for row in rows]
        client = redis.Redis.from_url(redis_url)
        try:
            PartitionStore(client, cluster_name).store_batch(batch_id, states)
        finally:
            client.close()

    return (
        decoded.writeStream.foreachBatch(apply_batch)
        .option("checkpointLocation", str(checkpoint_dir))
        .trigger(processingTime=trigger_interval)
        .start()
    )
