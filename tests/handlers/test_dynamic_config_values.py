"""Runtime config values are bounded: any text either parses to its canonical form or is refused
with INVALID_CONFIG, never another exception (regression: a 489-byte SetConfig with a 400-digit
`step.stall.timeout` raised OverflowError inside `decide`, and the pipeline died on every restart)."""

from __future__ import annotations

import pytest
from handler_builders import T0, alerts, cluster_events, request, simple_cluster
from hypothesis import given
from hypothesis import strategies as st

from handlers.decide import decide
from handlers.micro_batch import BatchInputs
from handlers.policy import DYNAMIC_KEYS, MAX_DURATION_SECONDS, compute_config_text
from schemas.errors import InvalidConfigError
from state.model import ControllerState
from tests.settings_defaults import default_policy

NUMBERISH = st.one_of(st.text(), st.from_regex(r"[+-]?[0-9]{1,500}(\.[0-9]{1,50})?\s*(ms|s|m|min|h|kb|mb|gib|)",
                                               fullmatch=True))


@given(st.sampled_from(sorted(DYNAMIC_KEYS)), NUMBERISH)
def test_any_text_parses_or_is_refused_as_invalid_config(key, text):
    try:
        canonical, value = compute_config_text(key, text)
    except InvalidConfigError:
        return
    assert compute_config_text(key, canonical) == (canonical, value)  # canonical is a fixed point


@pytest.mark.parametrize("key, text", [
    ("step.stall.timeout", "9" * 400),
    ("step.stall.timeout", f"{MAX_DURATION_SECONDS + 1:.0f}"),
    ("broker.failure.grace", "1" * 20 + "h"),
    ("reassignment.max.concurrent.partition.movements", "9" * 400),
    ("throttle.bytes.per.sec", "9" * 30 + "GiB"),
    ("balance.disk.budget.bytes", "10001TB"),  # past 10 PB
    ("balance.disk.budget.bytes", "-1"),
    ("balance.disk.budget.bytes", "5 PB"),
])
def test_values_past_their_bound_are_refused(key, text):
    with pytest.raises(InvalidConfigError):
        compute_config_text(key, text)


def test_a_huge_stall_timeout_is_rejected_and_the_batch_goes_on():
    state = decide(ControllerState(), BatchInputs(0, T0, cluster_events(simple_cluster(3), T0)),
                   default_policy()).state
    forged = request("SetConfig", {"key": "step.stall.timeout", "value": "9" * 400}, T0 + 1000, "forged")
    decision = decide(state, BatchInputs(1, T0 + 1000, requests=(forged,)), default_policy())
    [rejected] = alerts(decision, "RequestRejected")
    assert "INVALID_CONFIG" in str(rejected) and "step.stall.timeout" not in decision.state.config


@pytest.mark.parametrize("key, text, canonical", [
    ("disk.max.usage.percent", "10.00001", "10.00001"),  # hypothesis found it: `:g` stored "10"
    ("disk.max.usage.percent", "85%", "85"),
    ("logdir.imbalance.threshold", "0.4", "0.4"),
    ("balance.disk.budget.bytes", "500GB", "500000000000"),
    ("balance.disk.budget.bytes", "2 TiB", str(2 * 1024 ** 4)),
    ("balance.disk.budget.bytes", "0", "0"),
])
def test_a_fractional_value_is_stored_as_it_reads_back(key, text, canonical):
    assert compute_config_text(key, text)[0] == canonical
    assert compute_config_text(key, canonical) == compute_config_text(key, text)
