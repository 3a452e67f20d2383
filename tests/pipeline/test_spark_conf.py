"""The pipeline's Spark settings (issue 17 item 5): local defaults, a cluster master's own, the
operator's `spark_conf` and `run --conf` on top. Pure: no Spark started."""

from __future__ import annotations

import pytest

from schemas.errors import InvalidConfigError
from runtime.settings import load_settings
from streams.spark_session import compute_spark_conf, parse_spark_conf


def test_local_mode_pins_one_shuffle_partition_and_a_cluster_keeps_sparks_default():
    local = compute_spark_conf("local[2]")
    assert local["spark.sql.shuffle.partitions"] == "1" and local["spark.driver.host"] == "127.0.0.1"
    cluster = compute_spark_conf("spark://spark-master:7077")
    assert "spark.sql.shuffle.partitions" not in cluster and "spark.driver.host" not in cluster
    assert "spark.default.parallelism" not in cluster


def test_the_operators_settings_come_last_and_win():
    conf = compute_spark_conf("local[2]", {"spark.sql.shuffle.partitions": "8"},
                              parse_spark_conf(["spark.executor.memory=4g", "spark.sql.shuffle.partitions = 16"]))
    assert conf["spark.sql.shuffle.partitions"] == "16" and conf["spark.executor.memory"] == "4g"


@pytest.mark.parametrize("text", ["spark.executor.memory", "executor.memory=4g", "spark.x=", "=4g"])
def test_a_bad_conf_is_refused_in_one_line(text):
    with pytest.raises(InvalidConfigError, match="expected spark.KEY=VALUE"):
        parse_spark_conf([text])


def test_spark_conf_from_the_environment_is_json(monkeypatch):
    monkeypatch.setenv("REASSIGNER_SPARK_CONF", '{"spark.sql.shuffle.partitions": "4"}')
    assert load_settings().spark_conf == {"spark.sql.shuffle.partitions": "4"}
