"""The demo's waits scale with what they see progressing, and with `--patience` (the stage's
module doc, PATIENCE): regression for `reassigner demo` ending at a fixed 240 s on a loaded
machine while its pipeline was still getting on. No cluster: `Stage.wait` is driven with fake
probes and short budgets."""

from __future__ import annotations


import pytest
from hypothesis import given, strategies as st

from reassigner.dev.local.processes import PATIENCE_CEILING, compute_deadline
from reassigner.dev.harness.world import World
from tests.waiting import FakeClock


class AliveProduct:
    def check_alive(self) -> None:
        pass


def stage(tmp_path, patience: float = 1.0) -> World:
    world = World(tmp_path / "stack", tmp_path / "cache", patience=patience)
    world.product = AliveProduct()
    return world


@given(started=st.floats(0, 1e6), since=st.floats(0, 1e4), timeout=st.floats(0.1, 1e4),
       patience=st.floats(0.1, 100))
def test_a_deadline_is_one_budget_after_the_last_progress_and_never_past_the_ceiling(started, since, timeout,
                                                                                      patience):
    budget = timeout * patience
    deadline = compute_deadline(started, started + since, timeout, patience)
    assert deadline <= started + PATIENCE_CEILING * budget + 1e-6
    assert deadline == pytest.approx(min(started + since + budget, started + PATIENCE_CEILING * budget))
    assert deadline >= started + budget - 1e-6  # never less than one budget


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    import reassigner.dev.harness.stage as stage_module

    fake = FakeClock()
    monkeypatch.setattr(stage_module, "time", fake)
    return fake


def test_a_wait_that_keeps_seeing_progress_outlives_its_budget(tmp_path, clock):
    world, started = stage(tmp_path), clock.now
    counts = iter(range(1000))
    # One more of 4 every 0.5 s sample: done after 2 s, where the budget without progress is 1.5 s.
    world.wait("growing", lambda: (min(next(counts), 4), 4), timeout=1.5)
    assert clock.now - started == 2.0


def test_a_wait_without_progress_ends_at_its_budget_in_one_line_naming_it(tmp_path, clock):
    world, started = stage(tmp_path), clock.now
    with pytest.raises(TimeoutError, match=r"^stuck: not done after 2 s \(1 s without progress allowed\)$"):
        world.wait("stuck", lambda: (3, 8), timeout=1)
    assert clock.now - started == 1.5  # the first sample past the budget


def test_progress_that_never_arrives_ends_at_the_ceiling(tmp_path, clock):
    world, started = stage(tmp_path), clock.now
    ticks = iter(range(10_000))
    with pytest.raises(TimeoutError, match="not done after"):
        world.wait("busy but nowhere", lambda: False, timeout=1, progress=lambda: next(ticks))
    assert clock.now - started == PATIENCE_CEILING + 0.5  # the first sample past the ceiling


def test_patience_multiplies_the_budget(tmp_path, clock):
    world, started = stage(tmp_path, patience=3), clock.now
    with pytest.raises(TimeoutError, match=r"\(3 s without progress allowed\)"):
        world.wait("stuck", lambda: False, timeout=1)
    assert clock.now - started == 3.5


@pytest.mark.parametrize("patience", [0, -1])
def test_a_patience_not_above_zero_is_refused(tmp_path, patience):
    with pytest.raises(ValueError, match="a factor above 0"):
        World(tmp_path / "stack", tmp_path / "cache", patience=patience)


@pytest.mark.parametrize("flag", ["0", "x", "101"])
def test_the_demos_patience_flag_refuses_bad_values_in_one_usage_line(flag):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "reassigner.cli", "demo", "--patience", flag],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--patience" in result.stderr and "Traceback" not in result.stderr, result
