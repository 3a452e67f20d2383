"""Records written with an older schema set still decode in the pipeline (schema version 4 added
`Request.action` at the end of the record: read with the current schema alone, an older request
runs out of bytes, so the writer's version from the header is what decodes it)."""

from __future__ import annotations

import pytest

from runtime.settings import load_settings
from schemas.codec import encode
from schemas.loader import CURRENT_SCHEMA_VERSION, known_versions
from streams.input_rows import compute_batch_inputs, compute_writer_version

SETTINGS = load_settings(topic_prefix="old-records")
REQUESTS = SETTINGS.topic("requests")


def old_request(version: int, kind: str = "Decommission", fields=None) -> dict:
    return {"schema_version": version, "event_time": 1_767_225_600_000, "id": f"v{version}", "key": f"v{version}",
            "requested_by": "ops@old-cli", "payload": (kind, fields if fields is not None else {"broker_ids": [3]})}


@pytest.mark.parametrize("version", [v for v in known_versions() if v < CURRENT_SCHEMA_VERSION])
def test_an_older_request_is_decoded_with_its_header_version(version):
    value = encode("Request", old_request(version), version=version)
    inputs = compute_batch_inputs(0, [(REQUESTS, 0, 7, value, version)], SETTINGS)
    assert not inputs.bad_records
    [request] = inputs.requests
    assert request["payload"] == ("Decommission", {"broker_ids": [3]}) and request["action"] is None


def test_an_older_request_read_as_current_would_fail_so_the_version_matters():
    value = encode("Request", old_request(3), version=3)
    inputs = compute_batch_inputs(0, [(REQUESTS, 0, 7, value, None)], SETTINGS)
    assert len(inputs.bad_records) == 1 and not inputs.requests


def test_a_current_request_with_an_action_decodes():
    record = {**old_request(CURRENT_SCHEMA_VERSION, "Tick", {}),
              "action": {"kind": "Reject", "proposal_id": "p-1", "broker_ids": []}}
    inputs = compute_batch_inputs(0, [(REQUESTS, 0, 1, encode("Request", record), CURRENT_SCHEMA_VERSION)],
                                  SETTINGS)
    assert inputs.requests[0]["action"]["proposal_id"] == "p-1"


def test_a_version_this_reader_does_not_know_is_a_bad_record_naming_it():
    value = encode("Request", old_request(3), version=3)
    inputs = compute_batch_inputs(0, [(REQUESTS, 0, 7, value, 99)], SETTINGS)
    assert "version 99" in inputs.bad_records[0].reason


@pytest.mark.parametrize("headers, version", [
    (None, None), ([], None), ([("schema_version", bytearray(b"3"))], 3),
    ([("other", b"x"), ("schema_version", b"4")], 4), ([("schema_version", b"x")], None),
])
def test_the_writer_version_is_read_from_spark_header_rows(headers, version):
    assert compute_writer_version(headers) == version
