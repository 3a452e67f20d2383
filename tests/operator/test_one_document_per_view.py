"""One JSON per view, whichever door shows it: `reassigner list --json` prints the document GET
/api/reassignments serves (`views.list_to_json`), and `reassigner status --json` the `status` of
GET /api/status (`views.status_to_json`). The CLI reads a state with its Redis loader replaced;
no Kafka, no Redis."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from planning.model import TopicPartition
from planning.movement.external import ExternalMove
from planning.movement.log_dirs import LogDirTask
from reassigner.operator.status_server import StatusServer
from reassigner.operator.status_sources import AlertBook, StateCache
from runtime.settings import compute_policy, load_settings
from state.model import Proposal
from test_status_progress import movement_state

NOW = 1_700_000_000.0
OPENAPI = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"


def state():
    """Two partitions moving (one mid-step), a log-dir move, another tool's move, a proposal."""
    moving = movement_state(3, in_flight=1)
    return moving.with_changes(
        log_dir_moves={(1, TopicPartition("orders", 2)): LogDirTask(TopicPartition("orders", 2), 1, "/data/b",
                                                                     "/data/a", 5 << 20, "balance", "t-1", 1,
                                                                     NOW - 130.0)},
        external_moves={TopicPartition("orders", 2): ExternalMove((1, 2, 3, 4), (4,), (1,), int(NOW * 1000) - 9_000)},
        proposals={"p-1": Proposal("p-1", {TopicPartition("orders", 2): (2, 3, 4)}, "broker 4 added", 0)})


@pytest.fixture()
def served():
    """What the status server serves on a route, over `state()` at NOW."""
    settings = load_settings()
    server = StatusServer(host="127.0.0.1", port=0, cluster_name="local", cache=StateCache(state), book=AlertBook(),
                          default_replica_movements=settings.max_replica_movements, clock=lambda: NOW,
                          policy=compute_policy(settings))

    def get(path: str) -> dict:
        status, _content_type, body = server.route(path, {})
        assert status == 200
        return json.loads(body)

    yield get
    server.httpd.server_close()


def printed(monkeypatch, capsys, *arguments: str) -> dict:
    """What `reassigner ARGUMENTS --redis-url ...` prints, over `state()` at NOW."""
    import runtime.clients.redis_io as redis_io
    from reassigner.cli import views
    from reassigner.cli.main import main

    monkeypatch.setattr(redis_io, "controller_state_loader", lambda *_args, **_kwargs: state)
    monkeypatch.setattr(views.time, "time", lambda: NOW)
    monkeypatch.setattr(sys, "argv", ["reassigner", *arguments, "--redis-url", "redis://127.0.0.1:1/0"])
    main()  # returns: exit 0
    return json.loads(capsys.readouterr().out)


def test_list_json_is_the_reassignments_document_of_the_api(monkeypatch, capsys, served):
    document = printed(monkeypatch, capsys, "list", "--json")
    assert document == served("/api/reassignments")
    schema = (json.loads(OPENAPI.read_text())["paths"]["/api/reassignments"]["get"]["responses"]["200"]
              ["content"]["application/json"]["schema"])
    assert set(document) == set(schema["required"]) == set(schema["properties"])  # the documented shape
    assert [r["partition"] for r in document["reassignments"]] == [0, 1, 2]
    assert [m["partition"] for m in document["log_dir_moves"]] == [2] and document["state_error"] is None
    assert document["external"][0]["kind"] == "external" and document["in_flight"][0]["partition"] == 0
    # each broker the reassignments change, now and when they are done: the replicas they add
    # and remove, summed over the brokers
    changes = document["brokers"]
    assert changes and all(set(c) == {"broker", "now", "after"} and c["now"] != c["after"] for c in changes)
    net = sum(len(r["final_target"]) - len(r["current_replicas"]) for r in document["reassignments"])
    assert sum(c["after"]["replicas"] - c["now"]["replicas"] for c in changes) == net


def test_list_prints_each_broker_the_reassignments_change(monkeypatch, capsys):
    import runtime.clients.redis_io as redis_io
    from reassigner.cli import views
    from reassigner.cli.main import main

    monkeypatch.setattr(redis_io, "controller_state_loader", lambda *_args, **_kwargs: state)
    monkeypatch.setattr(views.time, "time", lambda: NOW)
    monkeypatch.setattr(sys, "argv", ["reassigner", "list", "--redis-url", "redis://127.0.0.1:1/0"])
    main()
    out = capsys.readouterr().out
    assert "brokers the ongoing reassignments change" in out and "→" in out


def test_status_json_is_the_status_of_the_api(monkeypatch, capsys, served):
    assert printed(monkeypatch, capsys, "status", "--json") == served("/api/status")["status"]
