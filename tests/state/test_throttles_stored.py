"""The adaptive throttles' stored form: what the steps in flight had copied through a broker at
its last change (`BrokerThrottle.copied`) and a raise's ramp (`target`, `ramp_from`) are kept
under meta keys of their own, `throttle_copied` and `throttle_ramps`, which a reader of a
previous version ignores (it unpacked each throttle into exactly four entries); a state stored
before loads with nothing copied and no ramp. Pure: the stored forms, no Redis."""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given, settings, strategies as st

from planning.model import TopicPartition
from planning.movement.throttle_control import BrokerThrottle
from state.model import ControllerState
from state.stored_forms import meta_to_storage, throttles_from_storage

tps = st.builds(TopicPartition, st.sampled_from(["a", "b.c", "t_1"]), st.integers(0, 50))
throttles = st.builds(BrokerThrottle, st.integers(1, 10**10), st.integers(1, 64), st.integers(0, 2**45),
                      st.text(max_size=30), st.dictionaries(tps, st.integers(0, 10**13), max_size=4),
                      st.integers(0, 10**10), st.integers(1, 10**10)
                      ).map(lambda t: t if t.target else replace(t, ramp_from=0))  # a ramp has both or neither


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 20), throttles, max_size=4))
def test_throttles_load_as_they_were_stored_what_they_copied_included(state_throttles):
    meta = meta_to_storage(ControllerState(throttles=state_throttles))
    ramps = json.loads(meta["throttle_ramps"])
    assert throttles_from_storage(json.loads(meta["throttles"]), json.loads(meta["throttle_copied"]),
                                  ramps) == state_throttles
    for row in json.loads(meta["throttles"]).values():
        rate, moves, changed_ms, reason = row  # the previous reader
