"""`ControllerState.reassignments` as a persistent map (`immutables.Map`, issue 17): whatever it
is built from, a state holds a Map equal to the records it was given; a state patched record by
record equals one built at once from the same records; the commit's diff, the requests' records
and the storage round trip see the same records as with a plain dict."""

from __future__ import annotations

from dataclasses import replace

import immutables
from hypothesis import given, settings
from hypothesis import strategies as st

from planning.model import Broker, Cluster, PartitionState, Topic, TopicPartition
from planning.movement.cancel import CancelScope, compute_cancel, compute_reassign_request
from planning.movement.partition_steps import Step
from planning.movement.reassignment import start_reassignment, start_step
from state.controller_store import ControllerStore
from state.stored_forms import compute_changed_reassignments, compute_changes
from state.model import ChangeLog, ControllerState
from schemas.errors import NoReassignmentInProgressError

TPS = tuple(TopicPartition(topic, n) for topic in ("t", "u") for n in range(4))


def record(tp: TopicPartition, variant: int):
    """One of a few distinct records of `tp`: targets differ, odd variants have a step in flight."""
    target = ((1, 2), (2, 1), (2, 0), (1, 0))[variant % 4]
    moving = start_reassignment(f"r{variant}/{tp}", tp, (0, 1), target, reason=f"v{variant}")
    if variant % 2:
        moving = start_step(moving, Step((0, 1) + target[:1], target[:1], (), False, False), started_at=float(variant))
    return moving


records_of = st.dictionaries(st.sampled_from(TPS), st.integers(0, 7)).map(
    lambda chosen: {tp: record(tp, v) for tp, v in chosen.items()})
patches = st.lists(st.dictionaries(st.sampled_from(TPS), st.one_of(st.none(), st.integers(0, 7))).map(
    lambda chosen: {tp: None if v is None else record(tp, v) for tp, v in chosen.items()}), max_size=6)


def applied(records: dict, patch: dict) -> dict:
    """The reference: `patch` applied to a plain dict."""
    out = dict(records)
    for tp, r in patch.items():
        if r is None:
            out.pop(tp, None)
        else:
            out[tp] = r
    return out


@given(records_of, patches)
def test_a_state_patched_record_by_record_equals_one_built_from_a_dict(start, steps):
    state, reference = ControllerState(reassignments=start), dict(start)
    assert isinstance(state.reassignments, immutables.Map)
    for patch in steps:
        state, reference = state.with_records(patch), applied(reference, patch)
        assert isinstance(state.reassignments, immutables.Map)
        assert dict(state.reassignments) == reference
    built = ControllerState(reassignments=reference)
    assert state == built  # the dataclass's equality compares the Maps
    assert state == ControllerState(reassignments=immutables.Map(reference))
    assert ControllerState(reassignments=built.reassignments).reassignments is built.reassignments  # no copy


@given(records_of, patches)
def test_the_commit_diff_from_the_log_equals_the_full_one_and_the_plain_dicts(start, steps):
    before = ControllerState(reassignments=start)
    after = before.with_batch_opened()
    for patch in steps:
        after = after.with_records(patch)
    from_log = compute_changed_reassignments(before, after)
    assert from_log == compute_changed_reassignments(before, replace(after, change_log=ChangeLog()))
    # the same diff as between states whose records were plain dicts before the Map (a full walk)
    plain_before = replace(before, change_log=ChangeLog())
    plain_after = ControllerState(reassignments=dict(after.reassignments))
    assert from_log[0] == compute_changed_reassignments(plain_before, plain_after)[0]
    assert sorted(from_log[1]) == sorted(compute_changed_reassignments(plain_before, plain_after)[1])


@given(records_of, st.sampled_from(("t", "u", None)), st.one_of(st.none(), st.integers(0, 3)), st.booleans())
def test_a_cancel_gives_the_same_records_from_a_map_as_from_a_dict(start, topic, partition, keep):
    scope = CancelScope(topic, partition if topic is not None else None)
    try:
        plain = compute_cancel(start, scope, keep=keep, reason="x")
    except NoReassignmentInProgressError:
        plain = None
    try:
        persistent = compute_cancel(immutables.Map(start), scope, keep=keep, reason="x")
    except NoReassignmentInProgressError:
        persistent = None
    assert (plain is None) == (persistent is None)
    if plain is not None:
        assert isinstance(persistent.reassignments, immutables.Map) and isinstance(plain.reassignments, dict)
        assert dict(persistent.reassignments) == plain.reassignments
        assert (persistent.cancel_in_kafka, persistent.cancelled) == (plain.cancel_in_kafka, plain.cancelled)


@given(records_of, st.dictionaries(st.sampled_from(TPS), st.sampled_from(((0, 1), (1, 2), (2, 0)))))
def test_a_reassign_request_gives_the_same_records_from_a_map_as_from_a_dict(start, targets):
    current = {tp: (0, 1) for tp in TPS}
    plain = compute_reassign_request(start, targets, current, request_id="q")
    persistent = compute_reassign_request(immutables.Map(start), targets, current, request_id="q")
    assert isinstance(persistent, immutables.Map) and isinstance(plain, dict)
    assert dict(persistent) == plain
    assert all(persistent[tp] is r for tp, r in start.items() if tp not in targets)  # shared, not rebuilt


class DictRedis:
    """What `ControllerStore.load` reads of Redis, over dicts (the commit's Lua is not run here:
    the rows are those `compute_changes` gives it; tests/state/test_controller_store.py runs the
    real thing)."""

    def __init__(self) -> None:
        self.hashes: dict[str, dict[str, str]] = {}

    def register_script(self, script):
        return None

    def hscan_iter(self, key, count=None):
        return iter(self.hashes.get(key, {}).items())


def cluster() -> Cluster:
    topics = tuple(Topic(name, tuple(PartitionState(name, n, (0, 1), (0, 1), 0) for n in range(4)))
                   for name in ("t", "u"))
    return Cluster(tuple(Broker(b) for b in range(3)), topics)


@settings(max_examples=50)
@given(records_of, patches)
def test_the_records_survive_the_storage_round_trip_as_a_map(start, steps):
    state = ControllerState(cluster=cluster(), reassignments=start)
    for patch in steps:
        state = state.with_records(patch)
    client = DictRedis()
    store = ControllerStore(client, "c")
    for name, change in compute_changes(ControllerState(), state).items():
        rows = client.hashes.setdefault(store.keys[name], {})
        pairs = change["set"]
        rows.update(zip(pairs[::2], pairs[1::2]))
        for field in change["del"]:
            rows.pop(field, None)
    loaded = store.load()
    assert isinstance(loaded.reassignments, immutables.Map)
    assert loaded.reassignments == state.reassignments
    assert loaded == state
