"""The metrics endpoint of `run`, `watch` and `execute` (`--metrics-port`): loopback unless told,
as the status server's rule; off unless a port is given; serves the product's metrics."""

from __future__ import annotations

import urllib.request

import pytest

from reassigner.cli.options import start_metrics_endpoint
from schemas.errors import InvalidConfigError
from runtime.settings import Settings


def test_no_port_no_endpoint():
    assert start_metrics_endpoint(Settings()) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "example.org"])
def test_an_address_others_can_reach_needs_the_explicit_flag(host):
    with pytest.raises(InvalidConfigError, match="--allow-remote-metrics"):
        start_metrics_endpoint(Settings(metrics_port=0, metrics_host=host))


def test_the_endpoint_serves_the_products_metrics_on_loopback(capsys):
    port = start_metrics_endpoint(Settings(metrics_port=0))
    assert port and f"metrics on http://127.0.0.1:{port}/metrics" in capsys.readouterr().err
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    assert "# TYPE reassigner_pipeline_batches_total counter" in text.splitlines()
    assert 'reassigner_executor_refused_commands_total{reason="BAD_SIGNATURE"}' in text


def test_a_port_in_use_is_one_clear_error():
    port = start_metrics_endpoint(Settings(metrics_port=0))
    with pytest.raises(InvalidConfigError, match=f"--metrics-port {port}.*cannot listen"):
        start_metrics_endpoint(Settings(metrics_port=port))


def test_the_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("REASSIGNER_METRICS_PORT", "9464")
    monkeypatch.setenv("REASSIGNER_METRICS_ALLOW_REMOTE", "true")
    settings = Settings()
    assert (settings.metrics_port, settings.metrics_host, settings.metrics_allow_remote) == (9464, "127.0.0.1", True)
