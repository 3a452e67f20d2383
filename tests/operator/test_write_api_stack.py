"""The write API on the real stack (issue 19 item 8): `reassigner status-server --write-token-file`
publishes on the real requests topic, checks against the real cluster's metadata, and answers
with the verdict the alerts topic carries (the test raises it in the pipeline's place: the
pipeline's own verdicts are the scenario tests')."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from operator_helpers import LineReader, consume_all, produce, start_cli, unique_prefix
from tests.waiting import eventually

WRITE_TOKEN = "stack-write-token-0123"


def post(url: str, body: object = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else b"", method="POST",
                                     headers={"Authorization": f"Bearer {WRITE_TOKEN}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.stack
@pytest.mark.slow
def test_write_api_publishes_checks_and_waits_for_the_verdict(local_stack, redis_url, tmp_path):
    from test_operator_commands import committed_cluster, create_topic  # noqa: F401 - same helpers
    import redis

    bootstrap = local_stack.bootstrap_servers
    create_topic(bootstrap, "orders", partitions=2)
    prefix = unique_prefix("api")
    token_file = tmp_path / "write-token"
    token_file.write_text(WRITE_TOKEN + "\n")
    client = redis.Redis.from_url(redis_url)
    cluster = committed_cluster(client)
    server = LineReader(start_cli("status-server", "--port", "0", "--bootstrap-server", bootstrap,
                                  "--redis-url", redis_url, "--cluster-name", cluster, "--topic-prefix", prefix,
                                  "--write-token-file", str(token_file)))
    try:
        started = eventually(lambda: [line for line in server.out if line.startswith("{")], 60, what="server up")
        url = json.loads(started[0])["url"].rstrip("/")

        status, paused = post(url + "/api/pause")
        assert status == 202 and paused["verdict"] == "pending", paused
        (request,) = consume_all(bootstrap, f"{prefix}.requests", "Request", 1)
        assert request["id"] == paused["request_id"]
        assert request["payload"] == ("SetConfig", {"key": "reassignment.paused", "value": "true"})
        assert request["requested_by"].startswith("api@127.0.0.1")

        status, refused = post(url + "/api/requests", {"kind": "cancel", "topic": "no-such-topic"})
        assert status == 422 and refused["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION" and not refused["published"]

        answers: list = []
        waiting = threading.Thread(target=lambda: answers.append(post(url + "/api/cancel?wait=60", {"topic": "orders"})))
        waiting.start()
        requests = consume_all(bootstrap, f"{prefix}.requests", "Request", 2, timeout=60)
        cancel = next(r for r in requests if r["payload"][0] == "Cancel")
        produce(bootstrap, f"{prefix}.alerts", "Alert", [{
            "schema_version": 1, "event_time": int(time.time() * 1000), "id": "v-1", "key": cancel["id"],
            "severity": "WARNING", "kind": "RequestRejected", "subject": cancel["id"],
            "message": "no reassignment in progress for topic orders",
            "details": {"error_code": "NO_REASSIGNMENT_IN_PROGRESS", "request_id": cancel["id"]}}])
        waiting.join(90)
        ((status, verdict),) = answers
        assert status == 409 and verdict["verdict"] == "rejected" and verdict["request_id"] == cancel["id"]
        assert verdict["error_code"] == "NO_REASSIGNMENT_IN_PROGRESS"
        assert WRITE_TOKEN not in "\n".join(server.out + server.err)
    finally:
        server.stop()
        client.close()
