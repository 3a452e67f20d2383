"""The replication meter's stored form (state.controller_store; issue 19 item 7), pure: it
round-trips with the movement's ended reassignments, and a meter written before them (two
fields) or none at all loads with zeros. The Redis round trip is test_controller_store's."""

from __future__ import annotations

import json

from hypothesis import given, strategies as st

from planning.movement.eta import ReplicationMeter
from state.stored_forms import meta_to_storage, meter_from_storage, meter_to_storage
from state.model import ControllerState

METER = st.builds(ReplicationMeter, st.one_of(st.none(), st.integers(0, 2**45)), st.integers(0, 2**50),
                  st.integers(0, 10**6), st.integers(0, 10**7), st.integers(0, 2**55))


@given(METER)
def test_a_meter_round_trips_through_its_json(meter):
    assert meter_from_storage(json.loads(json.dumps(meter_to_storage(meter)))) == meter


def test_the_meta_hash_stores_the_whole_meter():
    meter = ReplicationMeter(1_000, 500, 12, 24, 7_000)
    stored = meta_to_storage(ControllerState(replication_meter=meter))["replication_meter"]
    assert meter_from_storage(json.loads(stored)) == meter


def test_a_meter_written_before_the_ended_reassignments_loads_with_zeros():
    assert meter_from_storage([1_000, 500]) == ReplicationMeter(1_000, 500, 0, 0, 0)
    assert meter_from_storage([]) == ReplicationMeter()
