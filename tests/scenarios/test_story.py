"""The whole loop on a real cluster — watcher → pipeline → executor → Kafka → watcher — for every
reaction the product promises, with sequenced traffic throughout and an independent invariant
monitor sampling the cluster every 250 ms: the demo's story, asserted."""

from __future__ import annotations

import pytest
from rich.console import Console

from reassigner.demo.story import Demo

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.slow, pytest.mark.scenario]


def test_every_scene_of_the_story_succeeds_with_no_data_lost_and_no_invariant_broken(
        tmp_path, cache_dir):
    demo = Demo(tmp_path / "demo", cache_dir, console=Console(file=open(tmp_path / "story.txt", "w"),
                                                              width=120))
    ok = demo.run()
    story = (tmp_path / "story.txt").read_text()
    failed = [r for r in demo.results if r.outcome != "ok"]
    assert not failed, f"{[(r.name, r.outcome) for r in failed]}\n{story}"
    assert [r.name for r in demo.results] == [
        "1. add two brokers", "2. decommission a broker", "3. fail a log dir",
        "4. cancel a manual reassignment", "5. kill a broker", "6. bad input"]
    report = demo.traffic.report
    assert report.clean, f"traffic: {report}"
    assert report.produced > 0 and report.read == report.produced
    assert demo.monitor_report.samples > 100
    assert demo.monitor_report.violations == [], demo.monitor_report.violations
    # Every plan reached its lower bound (moves reported next to it by the planner).
    for result in demo.results:
        if result.replica_moves != "-":
            assert int(result.replica_moves) <= int(result.lower_bound) * 1.05 + 1, result
    assert ok, story
