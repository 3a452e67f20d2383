"""docs/openapi.yaml describes every route the status server has, and nothing else (issue 19
item 8); the server serves it at /api/openapi.yaml. The file is YAML in its JSON-compatible flow
style, so the standard library's json reads it (the project has no YAML dependency)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from reassigner.operator.status_server import READ_ROUTES, StatusServer
from reassigner.operator.status_sources import AlertBook, StateCache
from reassigner.operator.write_api import API_REQUEST_KINDS, WRITE_ROUTES
from state.model import ControllerState

DOC = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"


def spec() -> dict:
    return json.loads(DOC.read_text())


def test_every_route_is_described_and_every_described_route_exists():
    paths = spec()["paths"]
    described = {(method.upper(), path) for path, item in paths.items() for method in item}
    served = {("GET", path) for path in READ_ROUTES} | {("POST", path) for path in WRITE_ROUTES}
    assert described == served


def test_writes_need_the_write_token_and_describe_every_answer():
    document = spec()
    assert document["openapi"].startswith("3.")
    for path in WRITE_ROUTES:
        operation = document["paths"][path]["post"]
        assert operation["security"] == [{"writeToken": []}]
        assert {"200", "202", "400", "401", "403", "409", "422"} <= set(operation["responses"])
        assert any(p["name"] == "wait" for p in operation["parameters"])
    kinds = [s["properties"]["kind"]["enum"][0]
             for s in document["paths"]["/api/requests"]["post"]["requestBody"]["content"]["application/json"]
             ["schema"]["oneOf"] if "properties" in s and "kind" in s["properties"]]
    assert sorted(kinds) == list(API_REQUEST_KINDS)


def test_every_reference_resolves():
    document = spec()
    text = json.dumps(document)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "')[1:]}:
        node = document
        for key in ref.removeprefix("#/").split("/"):
            node = node[key]


def test_the_server_serves_it():
    server = StatusServer(host="127.0.0.1", port=0, cluster_name="c", cache=StateCache(lambda: ControllerState()),
                          book=AlertBook(), default_replica_movements=1).start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/api/openapi.yaml", timeout=10) as answer:
            assert answer.headers["Content-Type"].startswith("application/yaml")
            assert json.loads(answer.read()) == spec()
    finally:
        server.stop()
