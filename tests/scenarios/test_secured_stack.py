"""The whole loop on the secured local stack (issue 18): Kafka with SASL_SSL (SCRAM-SHA-512), the
StandardAuthorizer and ACLs, and Redis with an ACL user over TLS. The product's processes run as
the principal `reassigner`, which is no super user and holds only `PRODUCT_ACLS`; they find the
stack's client settings file and Redis URL themselves (`reassigner local up --security sasl_ssl`
writes them). The world's own instruments (traffic, probes, the invariant monitor) use the
stack's super user.

Scenes, each asserted on what Kafka shows: brokers added → rebalanced onto them in batches (the
Admin API's reassignments and configs under the product's ACLs); a log dir failed → re-replicated
(log-dir reads and moves); a manual reassignment cancelled mid-flight under a throttle (throttle
configs on brokers and topics); bad input → RequestRejected and BadEvent; and last no record
lost and no invariant broken.
"""

from __future__ import annotations

import json
import stat

import pytest
from rich.console import Console

from tests.waiting import PATIENCE
from reassigner.dev.harness import world as harness
from reassigner.dev.local.security import PRODUCT_USER

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.slow, pytest.mark.long]


@pytest.fixture(scope="module")
def world(tmp_path_factory, cache_dir):
    directory = tmp_path_factory.mktemp("secured")
    with open(directory / "story.txt", "w") as story_file:
        demo = harness.World(directory / "stack", cache_dir, patience=PATIENCE, security="sasl_ssl",
                             console=Console(file=story_file, width=120))
        try:
            demo.setup()
            yield demo
        finally:
            demo.keep_logs(directory / "logs")
            demo.teardown()


def run_scene(world, name, action):
    result = world.scene(name, action, catch=False)
    assert result.outcome == "ok", f"{name}: {result.outcome}\n{world.diagnostics()}"


def test_the_stack_is_secured_and_the_product_is_no_super_user(world):
    state = world.stack.load()
    properties = state.client_properties.read_text()
    assert "security.protocol=SASL_SSL" in properties and "ssl.truststore.type=PEM" in properties
    assert f'username="{PRODUCT_USER}"' in properties
    secrets_dir = state.client_properties.parent
    for name in ("client.properties", "admin.properties", "secrets.json", "redis.url", "ca.key"):
        assert stat.S_IMODE((secrets_dir / name).stat().st_mode) == 0o600, name
    stack_json = (world.stack_dir / "stack.json").read_text()
    assert json.loads(stack_json)["security"] == "sasl_ssl"
    assert state.secrets.redis_password not in stack_json
    assert all(password not in stack_json for password in state.secrets.passwords.values())
    broker_config = (world.stack_dir / "broker-1" / "server.properties").read_text()
    assert "super.users=User:broker;User:controller;User:admin" in broker_config
    assert "listeners=SASL_SSL://" in broker_config
    # Without credentials the brokers let nobody in; Redis refuses plaintext and the default user.
    import redis
    from confluent_kafka.admin import AdminClient

    anonymous = AdminClient({"bootstrap.servers": world.bootstrap, "log_level": 0,
                             "socket.timeout.ms": 3000})
    with pytest.raises(Exception):
        anonymous.list_topics(timeout=5)
    with pytest.raises(redis.RedisError):
        redis.Redis(port=state.redis_port, socket_timeout=3).ping()


def test_added_brokers_are_rebalanced_by_the_product_principal(world):
    run_scene(world, "1. add two brokers", world.add_broker)
    held = {b: world.replicas_on(b) for b in (4, 5)}
    assert all(held.values()), f"new brokers hold nothing: {held}"


def test_a_failed_log_dir_is_re_replicated(world):
    run_scene(world, "3. fail a log dir", world.fail_log_dir)


def test_a_throttled_manual_reassignment_is_cancelled_mid_flight(world):
    run_scene(world, "4. cancel a manual reassignment", world.cancel_manual)


def test_bad_input_is_rejected(world):
    run_scene(world, "6. bad input", world.bad_input)


def test_no_record_was_lost_and_no_invariant_broken(world):
    report, monitor = world.finish()
    assert report.clean and report.produced > 0 and report.read == report.produced, report
    assert monitor.samples > 50, monitor
    assert not monitor.violations, monitor.violations


def test_no_secret_appears_in_any_output_of_the_run(world):
    """Every product log (pipeline with Spark, watcher, executor, status server), the status
    page's JSON and the CLI's own output: none holds a password of the stack."""
    import urllib.request

    secrets = world.stack.load().secrets
    secret_values = [*secrets.passwords.values(), secrets.redis_password]
    outputs = {path.name: path.read_text(errors="replace") for path in world.product.log_dir.glob("*.log")}
    with urllib.request.urlopen(f"http://127.0.0.1:{world.status_port}/api/status", timeout=30) as answer:
        outputs["/api/status"] = answer.read().decode()
    for command in (("status",), ("list",), ("local", "status")):
        completed = world.cli(*command, check=False)
        outputs[" ".join(command)] = completed.stdout + completed.stderr
    assert len(outputs) >= 7
    leaks = [name for name, text in outputs.items() if any(secret in text for secret in secret_values)]
    assert not leaks, f"a password appears in {leaks}"
