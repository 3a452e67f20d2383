"""A wait that times out ends the command in one line saying what was waited for and what to
check, exit 2, never a traceback: the demo outside a scene (regression: on a loaded machine
`reassigner demo` ended in `TimeoutError: waiting for the pipeline to see the whole cluster: not
done after 240 s` and a Python traceback, and the teardown deleted the logs that would have said
why), a CLI call of a scene, a local-stack tool that hangs. No cluster: the demo's product is a
fake whose pipeline never sees the cluster, driven through the real entry point
(`reassigner.cli.main.main`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reassigner.cli.main import main
from reassigner.dev.demo import story
from reassigner.dev.harness.world import World
from schemas.errors import ProcessStartError


class FakeProduct:
    """The product's processes as the world sees them: a log dir with a pipeline log, and a
    pipeline that is alive, or exited with its log's last lines in the error (as
    `ProductProcesses.check_alive` words it)."""

    def __init__(self, stack_dir: Path, exited: bool) -> None:
        self.log_dir = stack_dir / "product"
        self.log_dir.mkdir(parents=True)
        (self.log_dir / "pipeline.log").write_text("Spark is still starting\n")
        self.exited = exited

    def check_alive(self) -> None:
        if self.exited:
            raise RuntimeError("the pipeline exited (1); last lines of its log:\nTraceback (most recent call last):\n"
                               "  boom")

    def stop(self) -> None:
        pass


def demo_whose_pipeline(exited: bool) -> type[story.Demo]:
    class StuckDemo(story.Demo):
        """The demo with its setup up to its wait for the pipeline, which never sees the cluster."""

        def setup(self) -> None:
            self.product = FakeProduct(self.stack_dir, exited)
            self.wait("waiting for the pipeline to see the whole cluster", lambda: (3, 24), timeout=-1)

    return StuckDemo


def run_demo(monkeypatch, capsys, stack_dir: Path, exited: bool = False) -> tuple[int, str]:
    monkeypatch.setattr(story, "Demo", demo_whose_pipeline(exited))
    monkeypatch.setattr(sys, "argv", ["reassigner", "demo", "--stack-dir", str(stack_dir)])
    with pytest.raises(SystemExit) as ended:
        main()
    return ended.value.code, capsys.readouterr().err


def test_a_demo_whose_wait_times_out_ends_in_one_line_naming_the_wait_and_the_kept_logs(monkeypatch, capsys,
                                                                                        tmp_path):
    code, err = run_demo(monkeypatch, capsys, tmp_path / "demo")
    kept = tmp_path / "demo-failed-logs"
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("error: [LOCAL_STACK_ERROR] the demo stopped: waiting for the pipeline to see the "
                          "whole cluster: not done after "), err
    assert f"check the logs kept in {kept} (product/pipeline.log" in err, err
    assert (kept / "product" / "pipeline.log").read_text() == "Spark is still starting\n"


def test_a_product_process_that_exits_during_the_setup_ends_the_demo_in_one_line(monkeypatch, capsys, tmp_path):
    code, err = run_demo(monkeypatch, capsys, tmp_path / "demo", exited=True)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err and "boom" not in err, err
    assert err.startswith("error: [LOCAL_STACK_ERROR] the demo stopped: the pipeline exited (1); check the logs "
                          f"kept in {tmp_path / 'demo-failed-logs'}"), err


def test_a_cli_call_of_a_scene_that_hangs_is_a_timeout_as_a_wait_is(monkeypatch, tmp_path):
    """A scene's `reassigner ...` call still running after 300 s: a TimeoutError, which the scene
    records as FAILED (it was subprocess's TimeoutExpired, which no scene caught)."""
    def hangs(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])

    monkeypatch.setattr(subprocess, "run", hangs)
    world = World(tmp_path / "stack", tmp_path / "cache")
    with pytest.raises(TimeoutError, match=r"^reassigner request cancel: not done after 300 s$"):
        world.cli("request", "cancel")


def test_a_local_stack_tool_that_hangs_ends_in_one_error_line(monkeypatch):
    """`reassigner local up` and the demo format Kafka's storage, create a Redis Cluster and make
    certificates with tools run to their end: one that hangs is a ProcessStartError, one line."""
    from reassigner.dev.local.processes import run_tool

    def hangs(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])

    monkeypatch.setattr(subprocess, "run", hangs)
    with pytest.raises(ProcessStartError) as raised:
        run_tool(["kafka-storage", "format"], "formatting the storage of node 1 (Kafka's StorageTool)", 120)
    assert str(raised.value) == ("formatting the storage of node 1 (Kafka's StorageTool): not done after 120 s "
                                 "(killed); check the machine's load (`uptime`), then try again")
