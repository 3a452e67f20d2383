"""Session fixtures that start the real services: a KRaft Kafka cluster, Redis and Spark.

Each runs on free loopback ports under pytest's temporary dir and is stopped right after the
last test that uses it (tests/ordering.py: the session runs pure modules first, then groups the
modules by the services they use). Tests that use them carry the `stack` / `spark` markers, so
`-m "not stack and not spark"` runs the pure, fast set alone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import settings as hypothesis_settings

from reassigner.dev.local import adopt_machine_disk_settings
from runtime.settings import load_settings
from tests.ordering import SHARED_SERVICES, CollectedTest, compute_last_users, compute_order
from tests.waiting import PATIENCE

# Hypothesis' default 200 ms deadline per example is a timed assertion: on a loaded or throttled
# 2-core machine a correct example takes ten times as long, and the test fails as "flaky" for it
# (test_rendered_properties_read_back_the_same: 276 ms). No deadline; a test that needs a bound
# on time is a benchmark.
hypothesis_settings.register_profile("kafka-reassigner", deadline=None)
hypothesis_settings.load_profile("kafka-reassigner")

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# The stack's dirs share this machine's disk: its fill is not the tests' to judge (the constant's
# doc). The tests of the marks give theirs on volumes of their own.
adopt_machine_disk_settings()


def pytest_report_header(config) -> str:
    return (f"waits allow their timeout x {PATIENCE:g} (tests/waiting.py PATIENCE: this machine's "
            "measured slowness, or REASSIGNER_TEST_PATIENCE)")


# The session's order and its services' lifetime (tests/ordering.py): modules run grouped by the
# services they use, pure ones first, and each shared service stops after its last user's
# teardown rather than at the session's end: an idle stack beside pure tests halves their speed.
_stoppers: dict[str, Callable[[], None]] = {}
"""How to stop each shared service that is up, by fixture name; each runs once."""
_last_users: dict[str, str] = {}


def _stop_service(name: str) -> None:
    stopper = _stoppers.pop(name, None)
    if stopper is not None:
        stopper()


def _traits(item: pytest.Item) -> CollectedTest:
    fixtures = frozenset(getattr(item, "fixturenames", ()))
    return CollectedTest(module=str(item.path), fixtures=fixtures,
                         own_stack=item.get_closest_marker("stack") is not None and "local_stack" not in fixtures)


@pytest.hookimpl(trylast=True)  # after the markers' and keywords' deselection
def pytest_collection_modifyitems(session, config, items) -> None:
    items[:] = [items[i] for i in compute_order([_traits(item) for item in items])]


def pytest_collection_finish(session) -> None:
    _last_users.clear()
    _last_users.update(compute_last_users([_traits(item) for item in session.items],
                                          [item.nodeid for item in session.items]))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)  # the test's own and its module's fixtures are torn down first
    finally:
        for name in SHARED_SERVICES:
            if _last_users.get(name) == item.nodeid:
                _stop_service(name)


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
    _stoppers["local_stack"] = stack.down
    yield state
    _stop_service("local_stack")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> str:
    """A standalone real Redis (AOF, fsync always) on a free loopback port, for state tests."""
    from reassigner.dev.local.processes import free_port, stop
    from reassigner.dev.local.redis_server import start_redis

    port = free_port()
    pid = start_redis(port, tmp_path_factory.mktemp("redis"))
    _stoppers["redis_url"] = lambda: stop(pid)
    yield f"redis://127.0.0.1:{port}/0"
    _stop_service("redis_url")


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
    _stoppers["spark"] = session.stop
    yield session
    _stop_service("spark")
