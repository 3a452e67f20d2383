"""The Kafka source's timeouts: short enough that a failed leader does not hold the pipeline a
minute, and a combination the Admin client accepts (it refuses an API timeout below the request
timeout — the pipeline died at start when only the API timeout was set)."""

from __future__ import annotations

import pytest

from streams.batch_plan import source_timeouts


@pytest.mark.parametrize("given, request_ms, api_ms", [
    ({}, 5000, 10000),
    ({"request.timeout.ms": "30000"}, 30000, 30000),
    ({"default.api.timeout.ms": "60000"}, 5000, 60000),
    ({"request.timeout.ms": "20000", "default.api.timeout.ms": "1000"}, 20000, 20000),
])
def test_the_api_timeout_is_never_below_the_request_timeout(given, request_ms, api_ms):
    options = source_timeouts(given)
    assert options == {"kafka.request.timeout.ms": str(request_ms), "kafka.default.api.timeout.ms": str(api_ms)}
