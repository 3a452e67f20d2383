"""Where the pipeline's Spark connector jars come from: the operator's list needs no Maven
(regression: a production `run` shelled out to Maven and failed with LOCAL_STACK_ERROR)."""

from __future__ import annotations

import shutil

import pytest

from schemas.errors import MissingDependencyError
from streams.spark_session import compute_spark_jars


@pytest.fixture
def no_maven(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "mvn" else real_which(name, *a, **k))


def test_named_jars_are_used_as_given_and_maven_is_never_asked(tmp_path, no_maven):
    jars = compute_spark_jars(tmp_path, " /opt/jars/spark-sql-kafka.jar, hdfs:///jars/spark-avro.jar ")
    assert jars == "/opt/jars/spark-sql-kafka.jar,hdfs:///jars/spark-avro.jar"


def test_without_named_jars_or_maven_the_error_says_how_to_provide_them(tmp_path, no_maven):
    with pytest.raises(MissingDependencyError) as raised:
        compute_spark_jars(tmp_path, None)
    assert raised.value.code == "MISSING_DEPENDENCY" and "--spark-jars" in str(raised.value)
