"""Session fixtures that start the real services: a KRaft Kafka cluster, Redis and Spark.

Each runs on free loopback ports under pytest's temporary dir and is stopped at the end of the
session. Tests that use them carry the `stack` / `spark` markers, so `-m "not stack and not
spark"` runs the pure, fast set alone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from runtime.settings import load_settings

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    return load_settings().cache_dir


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory, cache_dir):
    """A shared 3-broker stack (2 log dirs each, racks /dc1/r1, /dc1/r2, /dc2/r1) and Redis.

    Tests must not disturb it (no kills, no failed dirs): those get their own stack."""
    from reassigner.dev.local.stack import LocalStack

    stack = LocalStack(tmp_path_factory.mktemp("stack"), cache_dir)
    state = stack.up(brokers=3, log_dirs=2)
    yield state
    stack.down()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> str:
    """A standalone real Redis (AOF, fsync always) on a free loopback port, for state tests."""
    from reassigner.dev.local.processes import free_port, stop
    from reassigner.dev.local.redis_server import start_redis

    port = free_port()
    pid = start_redis(port, tmp_path_factory.mktemp("redis"))
    yield f"redis://127.0.0.1:{port}/0"
    stop(pid)


@pytest.fixture(scope="session")
def redis_client(redis_url):
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def spark(cache_dir, tmp_path_factory):
    from streams.spark_session import build_spark_session

    session = build_spark_session(cache_dir, app_name="reassigner-tests", master="local[2]",
                                  checkpoint_dir=tmp_path_factory.mktemp("checkpoints"))
    yield session
    session.stop()
