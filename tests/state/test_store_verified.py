"""The store is verified, not trusted (`state.controller_store`, VERIFIED): against a real Redis,
a store emptied or rolled back under a running instance is caught at its next commit before
anything is written over it, and `reseed` puts the instance's state back whole."""

from __future__ import annotations

import uuid

import pytest

from schemas.errors import FencedError, StateStoreLostError
from state.controller_store import ControllerStore
from state.model import ControllerState
from tests.state.test_controller_store import sample_state

pytestmark = [pytest.mark.stack]


@pytest.fixture
def store(redis_client):
    return ControllerStore(redis_client, f"verified-{uuid.uuid4().hex[:8]}")


def cluster_keys(store: ControllerStore) -> dict[bytes, bytes]:
    """Every key of the store's cluster, as DUMPed (a backup of just this cluster)."""
    client = store.client
    return {key: client.dump(key) for key in client.scan_iter(match=f"{store.keys['meta'].rsplit(':', 1)[0]}:*")}


def contents(store: ControllerStore) -> dict[bytes, dict]:
    """Every key of the store's cluster and its fields (the state's keys are all hashes)."""
    return {key: store.client.hgetall(key) for key in cluster_keys(store)}


def empty(store: ControllerStore) -> None:
    """What a FLUSHALL does to this cluster's keys (the test Redis is shared by other tests)."""
    keys = list(cluster_keys(store))
    if keys:
        store.client.delete(*keys)


def restore(store: ControllerStore, backup: dict[bytes, bytes]) -> None:
    """A restore from an older backup: the cluster's keys are exactly the backup's again."""
    empty(store)
    for key, value in backup.items():
        store.client.restore(key, 0, value)


def advanced(store: ControllerStore, batches: int) -> ControllerState:
    """A store taken over and advanced by `batches` commits of a growing state."""
    epoch = store.take_over()
    state = ControllerState().with_changes(epoch=epoch)
    for batch in range(batches):
        after = sample_state().with_changes(epoch=epoch, last_batch=batch, command_sequence=10 + batch)
        assert store.commit(batch, state, after, [], {("in", 0): batch})
        state = after
    return state


def test_a_store_emptied_under_a_running_instance_is_caught_and_nothing_is_written(store):
    state = advanced(store, 2)
    empty(store)
    after = state.with_changes(last_batch=2, command_sequence=99)
    with pytest.raises(StateStoreLostError) as lost:
        store.commit(2, state, after, [], {("in", 0): 2})
    assert lost.value.code == "STATE_STORE_LOST" and "holds no state at all" in str(lost.value)
    assert contents(store) == {}  # not a field of the delta landed on the empty store
    assert store.find_loss(1) is not None


def test_a_store_rolled_back_under_a_running_instance_is_caught_and_nothing_is_written(store):
    advanced_once = advanced(store, 1)
    backup = cluster_keys(store)
    state = advanced_once
    for batch in (1, 2):
        after = state.with_changes(last_batch=batch, command_sequence=20 + batch)
        assert store.commit(batch, state, after, [], {("in", 0): batch})
        state = after
    restore(store, backup)
    restored = contents(store)
    with pytest.raises(StateStoreLostError) as lost:
        store.commit(3, state, state.with_changes(last_batch=3), [], {("in", 0): 3})
    assert "went back from batch 2 to batch 0" in str(lost.value)
    assert contents(store) == restored
    assert store.find_loss(2) is not None and store.find_loss(0) is None


def test_a_backup_of_an_earlier_instance_is_caught_too(store, redis_client):
    advanced(store, 1)
    backup = cluster_keys(store)
    state = advanced(store, 0).with_changes(last_batch=0)  # the same store object takes over again
    restore(store, backup)  # the earlier incarnation's copy
    with pytest.raises(StateStoreLostError) as lost:
        store.commit(1, state, state.with_changes(last_batch=1), [])
    assert "not written by this instance" in str(lost.value)


def test_reseed_writes_the_whole_state_under_a_higher_epoch_and_commits_go_on(store):
    state = advanced(store, 3)
    empty(store)
    epoch = store.reseed(state, {("in", 0): 2, ("in", 1): 7})
    assert epoch == state.epoch + 1
    loaded = store.load()
    assert loaded.with_changes(epoch=state.epoch) == state
    assert store.applied_offsets() == {("in", 0): 2, ("in", 1): 7}
    assert store.pending_outbox() == []
    assert store.find_loss(state.last_batch) is None
    current = state.with_changes(epoch=epoch)
    assert store.commit(3, current, current.with_changes(last_batch=3, command_sequence=50), [])
    assert store.load().command_sequence == 50
    assert not list(store.client.scan_iter(match="*reseed*"))


def test_reseed_replaces_a_rolled_back_store_and_drops_its_old_outbox(store):
    state = advanced(store, 1)
    store.client.hset(store.keys["outbox"], "0", "[]")  # an outbox published long ago
    backup = cluster_keys(store)
    for batch in (1, 2):
        after = state.with_records({tp: None for tp in state.reassignments}).with_changes(last_batch=batch)
        store.commit(batch, state, after, [])
        state = after
    restore(store, backup)
    store.reseed(state, {})
    loaded = store.load()
    assert dict(loaded.reassignments) == {} and loaded.last_batch == 2
    assert store.pending_outbox() == [] and store.applied_offsets() == {}


def test_reseed_of_a_replaced_instance_writes_nothing(store):
    state = advanced(store, 1)
    newer = ControllerStore(store.client, store.cluster_name)
    newer.take_over()
    newer.take_over()
    before = contents(store)
    with pytest.raises(FencedError):
        store.reseed(state, {})
    assert contents(store) == before


def test_a_store_object_that_never_took_over_commits_unverified(store):
    """Tools and tests seeding a state: the rules before verification (a replay is skipped)."""
    assert store.commit(5, ControllerState(), sample_state(), [])
    assert not store.commit(5, sample_state(), sample_state(isr=(1,)), [])
