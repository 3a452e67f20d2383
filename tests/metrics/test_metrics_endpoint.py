"""The metrics endpoint of `run`, `watch` and `execute` (`--metrics-port`): loopback unless told,
as the status server's rule; off unless a port is given; serves the metrics of its own process
only, each sample labelled with the cluster's name."""

from __future__ import annotations

import urllib.request

import pytest

from reassigner.cli.options import start_metrics_endpoint
from schemas.errors import InvalidConfigError
from runtime.settings import Settings


def test_no_port_no_endpoint():
    assert start_metrics_endpoint(Settings(), "pipeline") is None


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "example.org"])
def test_an_address_others_can_reach_needs_the_explicit_flag(host):
    with pytest.raises(InvalidConfigError, match="--allow-remote-metrics"):
        start_metrics_endpoint(Settings(metrics_port=0, metrics_host=host), "pipeline")


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return answer.read().decode()


def test_the_endpoint_serves_its_process_s_metrics_on_loopback_with_the_cluster_label(capsys):
    port = start_metrics_endpoint(Settings(metrics_port=0, cluster_name="prod-eu"), "pipeline")
    assert port and f"metrics on http://127.0.0.1:{port}/metrics" in capsys.readouterr().err
    text = scrape(port)
    assert "# TYPE reassigner_pipeline_batches_total counter" in text.splitlines()
    assert 'reassigner_pipeline_batches_total{cluster="prod-eu"} ' in text
    assert "reassigner_executor_" not in text and "reassigner_watcher_" not in text  # the others' own
    executor = scrape(start_metrics_endpoint(Settings(metrics_port=0, cluster_name="prod-eu"), "executor"))
    assert 'reassigner_executor_refused_commands_total{cluster="prod-eu",reason="BAD_SIGNATURE"}' in executor
    assert "reassigner_pipeline_last_batch_timestamp_seconds" not in executor


def test_importing_the_metrics_exports_nothing_in_the_default_registry():
    from prometheus_client import REGISTRY, generate_latest

    import runtime.metrics  # noqa: F401

    assert b"reassigner_" not in generate_latest(REGISTRY)


def test_a_port_in_use_is_one_clear_error():
    port = start_metrics_endpoint(Settings(metrics_port=0), "watcher")
    with pytest.raises(InvalidConfigError, match=f"--metrics-port {port}.*cannot listen"):
        start_metrics_endpoint(Settings(metrics_port=port), "watcher")


def test_the_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("REASSIGNER_METRICS_PORT", "9464")
    monkeypatch.setenv("REASSIGNER_METRICS_ALLOW_REMOTE", "true")
    settings = Settings()
    assert (settings.metrics_port, settings.metrics_host, settings.metrics_allow_remote) == (9464, "127.0.0.1", True)
