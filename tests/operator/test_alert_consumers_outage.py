"""Alert consumers keep working while a broker is stopped and restarted under them.

Both consumers of the alerts topic run as the CLI runs them, on a stack of their own (this test
stops a broker): `alerts --follow` (confluent-kafka, assigned partitions, no group) and the
webhook forwarder on its default runner, faust-streaming (consumer group, commits). The broker
stopped is the webhook group's coordinator — the hardest case for a group consumer: it must find
a new coordinator, and the leaders of the alerts partitions it hosted move too.

Finding (recorded in docs/dependencies.md, faust-streaming): faust-streaming 0.15 (aiokafka
underneath) survives this — it logs connection errors and "Marking the coordinator dead",
rediscovers the coordinator and goes on; no alert is lost, none is POSTed twice in our runs. It
was also checked by hand with a SIGKILLed broker (the controller fences it after the session
timeout): same outcome.
"""

from __future__ import annotations

import json

import pytest

from operator_helpers import LineReader, Webhook, alert, produce, start_cli, unique_prefix
from tests.waiting import eventually
from reassigner.dev.local.stack import LocalStack
from runtime.settings import load_settings

pytestmark = [pytest.mark.stack, pytest.mark.slow]


@pytest.fixture(scope="module")
def own_stack(tmp_path_factory):
    stack = LocalStack(tmp_path_factory.mktemp("outage") / "stack", load_settings().cache_dir)
    state = stack.up(brokers=3, log_dirs=1)
    try:
        yield stack, state
    finally:
        stack.down()


def group_coordinator(bootstrap: str, group: str) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(30)
    return description.coordinator.id


def test_follower_and_webhook_survive_a_broker_stop_and_restart(own_stack):
    stack, state = own_stack
    bootstrap = state.bootstrap_servers
    prefix = unique_prefix("outage")
    hook = Webhook()
    follower = LineReader(start_cli("alerts", "--follow", "--json", "--bootstrap-server", bootstrap,
                                    "--topic-prefix", prefix))
    forwarder = LineReader(start_cli("alerts", "webhook", "--url", hook.url, "--retry-delay", "0.2",
                                     "--bootstrap-server", bootstrap, "--topic-prefix", prefix))
    printed = lambda: {json.loads(line)["id"] for line in list(follower.out)}  # noqa: E731
    try:
        eventually(lambda: any("following" in line for line in follower.err), 60, what="follower ready")
        produce(bootstrap, f"{prefix}.alerts", "Alert", [alert(f"before-{i}", subject=f"orders-{i}") for i in range(5)])
        eventually(lambda: hook.ids() >= {f"before-{i}" for i in range(5)}, 90, what="webhook before the outage")
        eventually(lambda: printed() >= {f"before-{i}" for i in range(5)}, 30, what="follower before the outage")

        victim = group_coordinator(bootstrap, f"reassigner-webhook.{prefix}")
        stack.stop_broker(victim)
        alive = ",".join(f"127.0.0.1:{b.port}" for b in state.brokers.values() if b.id != victim)
        produce(alive, f"{prefix}.alerts", "Alert", [alert(f"during-{i}", subject=f"orders-{i}") for i in range(5)])
        eventually(lambda: hook.ids() >= {f"during-{i}" for i in range(5)}, 90, what="webhook during the outage")
        eventually(lambda: printed() >= {f"during-{i}" for i in range(5)}, 60, what="follower during the outage")

        stack.start_broker(victim)
        produce(bootstrap, f"{prefix}.alerts", "Alert", [alert(f"after-{i}", subject=f"orders-{i}") for i in range(5)])
        eventually(lambda: hook.ids() >= {f"after-{i}" for i in range(5)}, 90, what="webhook after the restart")
        eventually(lambda: printed() >= {f"after-{i}" for i in range(5)}, 60, what="follower after the restart")

        assert forwarder.process.poll() is None and follower.process.poll() is None
        ids = [body["id"] for body in hook.received]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        print(f"coordinator stopped: broker {victim}; POSTs {len(ids)}, duplicates {duplicates}")
        assert len(printed()) == 15
    finally:
        follower.stop()
        forwarder.stop()
        hook.close()
