"""A canary reading's earlier windows (`CanaryReading.earlier_p99s`) are kept under a meta key of
their own, `canary_recent`: a reader of the previous version unpacked each stored reading into
exactly ten entries and ignores keys it does not know, and a state stored before they were kept
loads with none. Pure: the stored forms, no Redis."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from planning.movement.canary import CanaryReading
from state.model import ControllerState
from state.stored_forms import canary_from_storage, meta_to_storage

p99s = st.none() | st.floats(0.0, 10_000.0)
readings = st.builds(CanaryReading, st.integers(0, 2 ** 45), st.integers(1, 3_600_000), st.integers(0, 50),
                     st.integers(0, 10_000), st.integers(0, 100), p99s, p99s, p99s,
                     st.lists(st.floats(0.0, 10_000.0), max_size=10).map(tuple), p99s,
                     st.lists(p99s, max_size=2).map(tuple))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 20), readings, max_size=4))
def test_readings_load_as_they_were_stored_their_earlier_windows_included(canary):
    meta = meta_to_storage(ControllerState(canary=canary))
    assert canary_from_storage(json.loads(meta["canary"]), json.loads(meta["canary_recent"])) == canary


def test_a_reader_of_the_previous_version_reads_the_readings_and_an_older_state_loads_with_no_earlier_windows():
    reading = CanaryReading(40_000, 10_000, 2, 100, 0, 4.0, 30.0, None, (9.0,), 9.0, (None, 25.0))
    meta = meta_to_storage(ControllerState(canary={2: reading}))
    for broker, row in json.loads(meta["canary"]).items():
        at_ms, window_ms, partition, samples, errors, p50, p99, end_to_end, idle, baseline = row  # the previous reader
    assert json.loads(meta["canary_recent"]) == {"2": [None, 25.0]}
    older = canary_from_storage(json.loads(meta["canary"]), {})
    assert older[2].earlier_p99s == () and older[2].p99_ms == 30.0
