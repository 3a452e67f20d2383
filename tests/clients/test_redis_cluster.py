"""Redis Cluster for real (issue 17 item 4): a local 3-master Redis Cluster (Debian's redis-server,
`redis-cli --cluster create`), the product's one door (`connect_redis` with `redis+cluster://`,
any node), the controller store and the executor ledger on it, and a resharding of the product's
slot while commits run: every commit lands exactly once."""

from __future__ import annotations

import threading
import uuid

import pytest

from planning.model import Broker, Cluster, PartitionState, Topic
from runtime.backoff import Backoff
from runtime.clients.redis_io import call_redis, connect_redis, retry_redis
from reassigner.dev.local.processes import stop
from reassigner.dev.local.redis_server import free_cluster_ports, move_slot, slot_owner, start_redis_cluster
from reassigner.edge.ledger import CommandLedger
from schemas.errors import PermanentError
from state.controller_store import ControllerStore
from state.model import ControllerState

pytestmark = [pytest.mark.stack]


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory):
    ports = free_cluster_ports()
    pids = start_redis_cluster(ports, tmp_path_factory.mktemp("redis-cluster"))
    yield ports
    for pid in pids:
        stop(pid, timeout_seconds=20)


def state_with(isr_size: int, batch: int) -> ControllerState:
    brokers = tuple(Broker(b) for b in range(3))
    parts = tuple(PartitionState("orders", p, (0, 1, 2), (0, 1, 2)[:isr_size], 0, leader_epoch=batch)
                  for p in range(50))
    return ControllerState(cluster=Cluster(brokers, (Topic("orders", parts, 1),)), epoch=1, last_batch=batch)


def test_the_store_and_the_ledger_work_on_the_cluster_from_any_node(redis_cluster):
    name = f"rc-{uuid.uuid4().hex[:6]}"
    for port in redis_cluster:
        store = ControllerStore(connect_redis(f"redis+cluster://127.0.0.1:{port}"), name)
        before = store.load()
        after = state_with(2, before.last_batch + 1)
        assert store.commit(after.last_batch, before, after, [])
        assert store.load().cluster == after.cluster
    ledger = CommandLedger(connect_redis(f"redis+cluster://127.0.0.1:{redis_cluster[1]}"), name)
    ledger.client.hset(ControllerStore.meta_key(name), "epoch", 3)  # as a pipeline bumps it at start
    assert ledger.claim("c-0", epoch=4, token="t")[0] == "UNKNOWN"  # above the planner epoch
    assert ledger.claim("c-1", epoch=3, token="t")[0] == "APPLY"
    assert ledger.claim("c-1", epoch=3, token="other")[0] == "DUPLICATE"


def test_a_plain_url_naming_a_node_without_the_keys_says_to_use_the_cluster_scheme(redis_cluster):
    name = f"rc-{uuid.uuid4().hex[:6]}"
    probe = connect_redis(f"redis+cluster://127.0.0.1:{redis_cluster[0]}")
    owner = slot_owner(redis_cluster, probe.keyslot(f"reassigner:{{{name}}}:meta"))
    other = next(p for p in redis_cluster if p != owner)
    store = ControllerStore(connect_redis(f"redis://127.0.0.1:{other}"), name)
    with pytest.raises(PermanentError, match="redis\\+cluster://") as refused:
        call_redis(store.load, "loading")
    assert refused.value.code == "REDIS_ERROR"


def test_commits_ride_out_a_resharding_of_the_products_slot(redis_cluster):
    name = f"rc-{uuid.uuid4().hex[:6]}"
    client = connect_redis(f"redis+cluster://127.0.0.1:{redis_cluster[2]}")
    store = ControllerStore(client, name)
    slot = client.keyslot(store.keys["meta"])
    source = slot_owner(redis_cluster, slot)
    target = next(p for p in redis_cluster if p != source)
    committed: list[int] = []
    errors: list[BaseException] = []
    halfway = threading.Event()

    def commit_many() -> None:
        state = ControllerState()
        try:
            for batch in range(200):
                after = state_with(1 + batch % 3, batch)
                retry_redis(lambda: store.commit(batch, state, after, []), f"batch {batch}",
                            Backoff(0.05, 0.5, 60))
                committed.append(batch)
                state = after
                if batch == 20:
                    halfway.set()
        except BaseException as error:  # reported by the main thread
            errors.append(error)
            halfway.set()

    worker = threading.Thread(target=commit_many)
    worker.start()
    assert halfway.wait(60)
    moved = move_slot(slot, source, target)
    worker.join(120)
    assert not errors, errors
    assert moved >= 3  # meta, brokers, topics, partitions ... all moved with the slot
    assert slot_owner(redis_cluster, slot) == target
    assert committed == list(range(200))
    final = store.load()
    assert final.last_batch == 199 and final.cluster == state_with(1 + 199 % 3, 199).cluster
    assert final.epoch == 1
