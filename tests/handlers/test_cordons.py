"""Cordons in the pipeline (`handlers.cordons`): a decommission on Kafka 4.3+ cordons its brokers
before its plan's first step, a recommission (or a cancel that stops the drain) uncordons them, an
upgrade that brings cordons cordons the brokers already draining, and on an older Kafka nothing is
asked. The executor's side is `tests/edge/test_cordon_rules.py` and the real-stack test."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from handler_builders import T0, alerts, assert_encodes, cluster_events, commands, request, snapshot_end, simple_cluster

from handlers.cordons import UNSURE, WHOLE, compute_cordon_commands
from handlers.decide import decide
from handlers.micro_batch import BatchInputs
from planning.model import CORDONS, ELIGIBLE_LEADERS, FENCED_BROKERS, LOG_DIR_MOVES
from state.model import ControllerState
from state.stored_forms import meta_to_storage
from streams.store_recovery import compute_published_marks, compute_rebuilt_state
from tests.settings_defaults import default_policy

CLUSTER = simple_cluster(5, {"t": (4, 3)})
NEW = ["4.4", 33, [LOG_DIR_MOVES, FENCED_BROKERS, ELIGIBLE_LEADERS, CORDONS]]
OLD = ["4.1", 27, [LOG_DIR_MOVES, FENCED_BROKERS]]


def marker(at_ms: int, kafka: list, snapshot_id: str = "snap-1") -> tuple[str, dict]:
    schema, record = snapshot_end(CLUSTER, at_ms, snapshot_id)
    release, level, capabilities = kafka
    return schema, {**record, "kafka_release": release, "kafka_metadata_level": level,
                    "kafka_capabilities": capabilities}


def started(kafka: list = NEW) -> ControllerState:
    events = cluster_events(CLUSTER, T0) + (marker(T0, kafka),)
    return decide(ControllerState(), BatchInputs(0, T0, events), default_policy()).state


def recommission(at_ms: int, brokers: list[int], request_id: str = "rc-1") -> dict:
    return {**request("Tick", {}, at_ms, request_id),
            "action": {"kind": "Recommission", "proposal_id": None, "broker_ids": brokers}}


def decommission(state: ControllerState, at_ms: int, brokers: list[int]):
    return decide(state, BatchInputs(1, at_ms, requests=(request("Decommission", {"broker_ids": brokers}, at_ms,
                                                                 "dc-1"),)), default_policy())


def test_a_decommission_on_kafka_4_3_cordons_its_brokers_before_its_first_step():
    drained = decommission(started(), T0 + 1000, [4, 2])
    sent = commands(drained)
    two, four = commands(drained, "Cordon")  # one per broker: its result names it
    assert [two["action"], four["action"]] == [{"kind": "Cordon", "broker_ids": [b], "log_dirs": []} for b in (2, 4)]
    assert four["id"] == f"cordon-{drained.state.command_sequence}-4:0:Cordon" and four["key"] == "cordon"
    assert four["payload"] == ("ClearThrottle", {"broker_ids": [], "partitions": [], "log_dir_only": False,
                                                 "throttle_sequence": None})  # clears nothing
    assert sent.index(four) < sent.index(commands(drained, "ReassignmentStep")[0])
    assert drained.state.cordoned == {2: (), 4: ()}
    assert json.loads(meta_to_storage(drained.state)["cordoned"]) == {"2": [], "4": []}
    assert drained.report.commands["Cordon"] == 2
    assert_encodes(drained.outbox)


def test_a_recommission_uncordons_and_a_second_decommission_cordons_only_the_new_broker():
    drained = decommission(started(), T0 + 1000, [4])
    more = decide(drained.state, BatchInputs(2, T0 + 2000, requests=(
        request("Decommission", {"broker_ids": [3]}, T0 + 2000, "dc-2"),)), default_policy())
    assert [c["action"]["broker_ids"] for c in commands(more, "Cordon")] == [[3]]
    back = decide(more.state, BatchInputs(3, T0 + 3000, requests=(recommission(T0 + 3000, [4]),)), default_policy())
    (uncordon,) = commands(back, "Uncordon")
    assert uncordon["id"].endswith("-4:0:Uncordon")
    assert uncordon["action"]["broker_ids"] == [4] and back.state.cordoned == {3: ()}
    assert not commands(back, "Cordon")
    assert_encodes(back.outbox)


def test_on_a_kafka_without_cordons_nothing_is_asked_and_an_upgrade_cordons_the_draining_brokers():
    drained = decommission(started(OLD), T0 + 1000, [4])
    assert drained.state.cluster.broker(4).draining
    assert not commands(drained, "Cordon") and drained.state.cordoned == {}
    upgraded = decide(drained.state, BatchInputs(2, T0 + 2000, (marker(T0 + 2000, NEW, "snap-2"),)),
                      default_policy())
    (cordon,) = commands(upgraded, "Cordon")
    assert cordon["action"]["broker_ids"] == [4] and cordon["reason"] == "the cluster runs Kafka 4.4"
    again = decide(upgraded.state, BatchInputs(3, T0 + 3000, (marker(T0 + 3000, NEW, "snap-3"),)), default_policy())
    assert not commands(again, "Cordon")  # the same Kafka told again: nothing new


def test_a_cancel_that_stops_the_drain_uncordons():
    drained = decommission(started(), T0 + 1000, [4])
    cancelled = decide(drained.state, BatchInputs(2, T0 + 2000, requests=(
        request("Cancel", {"topic": None, "partition": None}, T0 + 2000, "cancel-1"),)), default_policy())
    assert not cancelled.state.cluster.broker(4).draining
    assert [c["action"]["broker_ids"] for c in commands(cancelled, "Uncordon")] == [[4]]


def failed(command: dict, at_ms: int, code: str = "INVALID_CONFIG", message: str = "refused") -> dict:
    return {"schema_version": 10, "event_time": at_ms, "id": f"r-{at_ms}", "key": "cordon",
            "command_id": command["id"], "command_kind": command["action"]["kind"], "epoch": command["epoch"],
            "reassignment_id": None, "step": 0, "ok": False, "error_code": code, "message": message}


def test_a_failed_cordon_raises_command_failed_and_is_asked_again_at_the_next_snapshot():
    drained = decommission(started(), T0 + 1000, [4, 2])
    two, four = commands(drained, "Cordon")
    later = decide(drained.state, BatchInputs(2, T0 + 2000, command_results=(
        failed(four, T0 + 1500, "BROKER_NOT_AVAILABLE", "broker 4 is not registered and unfenced"),)),
        default_policy())
    (alert,) = alerts(later, "CommandFailed")
    assert alert["subject"] == "cordon" and alert["severity"] == "WARNING"
    assert "asked again at the next snapshot" in alert["message"] and "cordoned.log.dirs=*" in alert["message"]
    assert later.state.cordoned == {2: (), 4: UNSURE}  # what holds on broker 4 is not known
    assert not commands(later, "Cordon")  # not at once: a broker that refuses would loop
    retried = decide(later.state, BatchInputs(3, T0 + 3000, (marker(T0 + 3000, NEW, "snap-2"),)), default_policy())
    # Whatever of ours holds is taken back first, then what is wanted is asked for again.
    assert [(c["action"]["kind"], c["action"]["broker_ids"]) for c in commands(retried)] == [
        ("Uncordon", [4]), ("Cordon", [4])]
    assert retried.state.cordoned == {2: (), 4: ()}


def test_a_dead_draining_broker_is_cordoned_when_it_comes_back():
    from dataclasses import replace

    from handler_builders import broker_event

    state = started()
    down = decide(state, BatchInputs(1, T0 + 1000, (broker_event(replace(CLUSTER.broker(4), alive=False),
                                                                 T0 + 1000, "FENCED"),)), default_policy())
    drained = decommission(down.state, T0 + 2000, [4])
    assert drained.state.cluster.broker(4).draining and not commands(drained, "Cordon")
    back = decide(drained.state, BatchInputs(3, T0 + 3000, (broker_event(CLUSTER.broker(4), T0 + 3000),)),
                  default_policy())
    assert [c["reason"] for c in commands(back, "Cordon")] == ["broker 4 back"]


def test_a_rebuilt_store_knows_the_cordons_published_and_numbers_above_their_ids():
    drained = decommission(started(), T0 + 1000, [4, 2])
    back = decide(drained.state, BatchInputs(2, T0 + 2000, requests=(recommission(T0 + 2000, [2]),)), default_policy())
    published = commands(drained) + commands(back)
    marks = compute_published_marks(published, [])
    assert marks.cordoned == {4: ()}
    assert marks.command_sequence >= back.state.command_sequence  # no cordon id is issued twice
    rebuilt = compute_rebuilt_state(ControllerState(), 5, marks)
    assert rebuilt.cordoned == {4: ()} and rebuilt.command_sequence > back.state.command_sequence


def _executor_after(actual, commands):
    """What of ours holds on each broker after the executor applies `commands` in order
    (`reassigner.edge.cordons`: a Cordon adds the dirs it names to ours, or makes it the whole
    broker; an Uncordon takes ours back). None: nothing of ours; WHOLE; or a set of dirs."""
    actual = dict(actual)
    for broker_id, kind, dirs in commands:
        mine = actual.get(broker_id)
        if kind == "Uncordon":
            actual[broker_id] = None
        elif dirs == WHOLE or mine == WHOLE:
            actual[broker_id] = WHOLE
        else:
            actual[broker_id] = frozenset(mine or ()) | frozenset(dirs)
    return actual


CORDON_VALUES = st.one_of(st.just(WHOLE), st.sets(st.sampled_from(["/a", "/b", "/c"]), min_size=1).map(
    lambda dirs: tuple(sorted(dirs))))


@given(wanted=st.dictionaries(st.integers(1, 4), CORDON_VALUES),
       have=st.dictionaries(st.integers(1, 4), st.one_of(CORDON_VALUES, st.just(UNSURE))),
       unsure_holds=st.dictionaries(st.integers(1, 4), st.one_of(st.none(), CORDON_VALUES)))
@settings(max_examples=300, deadline=None)
def test_the_commands_leave_exactly_what_is_wanted_whatever_an_unsure_broker_holds(wanted, have, unsure_holds):
    # What holds is what was asked, except where a command failed (UNSURE): anything of ours.
    actual = {b: (unsure_holds.get(b) if asked == UNSURE else (WHOLE if asked == WHOLE else frozenset(asked)))
              for b, asked in have.items()}
    commands = compute_cordon_commands(wanted, have)
    after = _executor_after(actual, commands)
    assert {b: v for b, v in after.items() if v is not None} == {
        b: (WHOLE if v == WHOLE else frozenset(v)) for b, v in wanted.items()}
    uncordoned = [b for b, kind, _ in commands if kind == "Uncordon"]
    assert len(uncordoned) == len(set(uncordoned))  # at most one each, and before its Cordon
    assert all(commands.index((b, "Uncordon", ())) < i for i, (b, kind, _) in enumerate(commands)
               if kind == "Cordon" and b in uncordoned)
    assert not compute_cordon_commands(wanted, wanted)  # nothing to do once they agree


def test_a_state_stored_before_dir_cordons_loads_its_brokers_whole():
    from state.stored_forms import cordoned_from_storage

    assert cordoned_from_storage([2, 4]) == {2: (), 4: ()}
    assert cordoned_from_storage({"3": ["/d1", "/d2"], "5": []}) == {3: ("/d1", "/d2"), 5: ()}


def test_a_rebuilt_store_knows_the_dirs_of_the_cordons_published():
    published = [{"id": "cordon-7-1:0:Cordon", "epoch": 1, "action": {"kind": "Cordon", "broker_ids": [1],
                                                                      "log_dirs": ["/x", "/y"]}},
                 {"id": "cordon-8-2:0:Cordon", "epoch": 1, "action": {"kind": "Cordon", "broker_ids": [2],
                                                                      "log_dirs": []}},
                 {"id": "cordon-9-2:0:Uncordon", "epoch": 1, "action": {"kind": "Uncordon", "broker_ids": [2],
                                                                        "log_dirs": []}}]
    marks = compute_published_marks(published, [])
    assert marks.cordoned == {1: ("/x", "/y")} and marks.command_sequence == 9
