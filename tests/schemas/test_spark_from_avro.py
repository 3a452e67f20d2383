"""Spark's `from_avro` reads what the codec writes, with the schema JSON the codec hands out.

Needs the spark-avro jar matching the installed pyspark, looked up under `$REASSIGNER_JARS_DIR`,
the repository's `.cache/jars`, the product's jar cache (`runtime.clients.jars`) and Maven's
local repository, in that order; the tests are skipped, saying so, when the jar is absent.
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path

import pytest
from message_examples import REALISTIC_RECORDS

import schemas

pytestmark = pytest.mark.spark

REPOSITORY = Path(__file__).resolve().parents[2]


def jar_directories(spark_version: str) -> list[Path]:
    from runtime.settings import default_cache_dir

    directories = [REPOSITORY / ".cache" / "jars", default_cache_dir() / "jars"]
    if os.environ.get("REASSIGNER_JARS_DIR"):
        directories.insert(0, Path(os.environ["REASSIGNER_JARS_DIR"]))
    directories.append(Path.home() / ".m2/repository/org/apache/spark/spark-avro_2.13" / spark_version)
    return directories


def find_spark_avro_jar(spark_version: str) -> Path | None:
    jar_name = f"spark-avro_2.13-{spark_version}.jar"
    for directory in jar_directories(spark_version):
        found = sorted(directory.rglob(jar_name)) if directory.is_dir() else []
        if found:
            return found[0]
    return None


@pytest.fixture(scope="module")
def spark():
    pyspark = pytest.importorskip("pyspark")
    jar = find_spark_avro_jar(pyspark.__version__)
    if jar is None:
        searched = ", ".join(str(path) for path in jar_directories(pyspark.__version__))
        pytest.skip(
            f"spark-avro_2.13-{pyspark.__version__}.jar (matching pyspark) not found in {searched}; "
            "fetch the Spark jars first (runtime.clients.jars.ensure_jars(cache, 'spark'))"
        )
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:  # another fixture's session: use it, leave it running
        yield active
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[1]")
        .appName("reassigner-schemas-test")
        .config("spark.jars", str(jar))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    yield session
    session.stop()


def read_with_spark(spark, name: str, values: list[bytes], **options: str):
    from pyspark.sql.avro.functions import from_avro
    from pyspark.sql.functions import col

    frame = spark.createDataFrame([(bytearray(value),) for value in values], "value binary")
    writer_version = options.pop("writer_version", None)
    if writer_version is not None:
        options["avroSchema"] = schemas.schema_json(name)
        schema = schemas.schema_json(name, int(writer_version))
    else:
        schema = schemas.schema_json(name)
    return frame.select(from_avro(col("value"), schema, options).alias("record")).collect()


def test_spark_reads_partition_state_as_the_codec_wrote_it(spark) -> None:
    records = REALISTIC_RECORDS["PartitionState"]
    rows = read_with_spark(spark, "PartitionState", [schemas.encode("PartitionState", r) for r in records])
    for row, record in zip(rows, records, strict=True):
        read = row.record.asDict(recursive=True)
        assert read["event_time"] == datetime.datetime(2026, 1, 1, 0, 0, 0, 123000)
        assert {key: value for key, value in read.items() if key != "event_time"} == {
            key: value for key, value in record.items() if key != "event_time"
        }


def test_spark_reads_the_command_union_with_one_member_per_kind(spark) -> None:
    records = REALISTIC_RECORDS["Command"]
    rows = read_with_spark(
        spark, "Command", [schemas.encode("Command", r) for r in records],
        enableStableIdentifiersForUnionType="true",
    )
    for row, record in zip(rows, records, strict=True):
        payload = row.record.payload.asDict(recursive=True)
        kind, fields = record["payload"]
        present = {member: value for member, value in payload.items() if value is not None}
        assert present == {f"member_{kind}": fields}
        assert row.record.id == record["id"] and row.record.epoch == record["epoch"]


def test_spark_resolves_an_old_writer_version_against_the_current_schema(spark) -> None:
    record = REALISTIC_RECORDS["Alert"][0]
    rows = read_with_spark(spark, "Alert", [schemas.encode("Alert", record, version=1)], writer_version="1")
    assert rows[0].record.details == record["details"]
    assert rows[0].record.severity == "CRITICAL"


def test_spark_permissive_mode_marks_garbage_with_a_null_id_for_the_dead_letter_path(spark) -> None:
    """Spark 4 gives an undecodable value as a record whose fields are all null (not a null
    record); `id` is never null in a real message, so `record.id IS NULL` picks the dead letters."""
    good = schemas.encode("TopicState", REALISTIC_RECORDS["TopicState"][0])
    rows = read_with_spark(spark, "TopicState", [good, b"\xff\xfe garbage"], mode="PERMISSIVE")
    assert rows[0].record.topic == "orders" and rows[0].record.id is not None
    assert rows[1].record is None or rows[1].record.id is None
