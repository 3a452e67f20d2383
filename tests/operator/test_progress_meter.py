"""The movement's meter (`reassigner.operator.views.progress`): one source for the partitions,
steps and bytes of every row and of the whole movement, copies in flight counted as they grow,
one time-left method for the rows and the header, and every view (`status` JSON, /api/status,
/metrics, the rows) showing its figures. Regression (issue 33, "figures disagree"): the page's
bar read 60 % by steps beside 48 % by bytes; `status` titled its table with the active rows'
steps (0/13) and ended it with the movement's (2 of 15); the header said 3 min 26 s while the
rows said 34 s; a step in flight showed 0 B until it completed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from planning.model import Broker, Cluster, LogDir, PartitionState, Topic, TopicPartition
from planning.movement.eta import ReplicationMeter, compute_finish_times
from planning.movement.partition_steps import compute_next_step
from planning.movement.reassignment import Reassignment, StepInFlight
from reassigner.operator.views import compute_progress, compute_status, compute_status_document, status_to_json
from reassigner.operator.views.metrics import compute_metric_samples
from state.model import ControllerState

MB = 1_000_000
BROKERS = (1, 2, 3, 4, 5)
ORIGINAL = (1, 2, 3)


def build_state(specs, meter=ReplicationMeter(), copies=None) -> ControllerState:
    """One partition per spec (size, final target, in flight): moving from (1, 2, 3); one in
    flight runs its first step towards its target, and `copies` (tp → bytes) is what each of its
    adding replicas' dirs told of the copy (none: not told)."""
    copies = copies or {}
    partitions, reassignments, copying = [], {}, {b: [] for b in BROKERS}
    for n, (size, target, flying) in enumerate(specs):
        tp = TopicPartition("t", n)
        replicas, adding, removing, flight = ORIGINAL, (), (), None
        if flying and set(target) != set(ORIGINAL):
            step = compute_next_step(ORIGINAL, target, ORIGINAL, 1, 1)
            replicas = tuple(dict.fromkeys(step.target + ORIGINAL))
            adding, removing, flight = step.adding, step.removing, StepInFlight(step, 1, 0.0)
            for b in adding:
                if tp in copies:
                    copying[b].append((tp, copies[tp]))
        partitions.append(PartitionState("t", n, replicas, ORIGINAL, 1, size_bytes=size, adding=adding,
                                         removing=removing))
        reassignments[tp] = Reassignment(f"r{n}", tp, ORIGINAL, target, in_flight=flight)
    brokers = tuple(Broker(b, f"/r{b}", log_dirs=(LogDir("/d", copying_bytes=tuple(sorted(copying[b]))),))
                    for b in BROKERS)
    return ControllerState(cluster=Cluster(brokers, (Topic("t", tuple(partitions)),)), reassignments=reassignments,
                           replication_meter=meter)


TARGET = st.permutations(BROKERS).map(lambda p: tuple(p[:3]))
SPEC = st.tuples(st.integers(0, 50 * MB), TARGET, st.booleans())
METER = st.builds(ReplicationMeter, st.just(0), st.integers(0, 10**9), st.integers(0, 20), st.integers(0, 60),
                  st.integers(0, 10**9))


@st.composite
def states(draw):
    specs = draw(st.lists(SPEC, min_size=1, max_size=8))
    copies = {TopicPartition("t", n): draw(st.integers(0, 60 * MB)) for n in range(len(specs)) if draw(st.booleans())}
    return build_state(specs, draw(METER), copies)


@settings(max_examples=150, deadline=None)
@given(states(), st.floats(1.0, 10_000.0), st.one_of(st.none(), st.integers(1, 10**8)))
def test_every_count_is_done_at_most_total_and_the_movement_is_its_rows_plus_the_ended(state, now, throttle):
    progress = compute_progress(state, now, 1, throttle)
    meter = state.replication_meter
    whole = progress.movement
    for f in (whole, *progress.rows.values()):
        assert 0 <= f.partitions_done <= f.partitions_total
        assert 0 <= f.steps_done <= f.steps_estimated
        assert 0 <= f.bytes_moved <= f.bytes_to_move
        assert f.fraction is None or 0.0 <= f.fraction <= 1.0
    rows = progress.rows.values()
    assert (whole.partitions_done, whole.partitions_total) == (meter.finished, meter.finished + len(progress.rows))
    assert whole.steps_done == meter.finished_steps + sum(f.steps_done for f in rows)
    assert whole.steps_estimated == meter.finished_steps + sum(f.steps_estimated for f in rows)
    assert whole.bytes_to_move == meter.finished_bytes + sum(f.bytes_to_move for f in rows)
    assert whole.bytes_left == sum(f.bytes_left for f in rows)


@settings(max_examples=150, deadline=None)
@given(states(), st.floats(1.0, 10_000.0), st.one_of(st.none(), st.integers(1, 10**8)))
def test_the_header_time_left_is_the_latest_row_and_all_bytes_left_at_the_rate(state, now, throttle):
    progress = compute_progress(state, now, 1, throttle)
    times = [f.time_left_seconds for f in progress.rows.values()]
    rate = progress.rate_bytes_per_second
    if rate is None:
        assert progress.movement.time_left_seconds is None or progress.movement.bytes_left == 0
        return
    assert all(t is not None for t in times)
    assert progress.movement.time_left_seconds == pytest.approx(max(times))
    rows_left = sum(f.bytes_left for f in progress.rows.values())
    assert progress.movement.time_left_seconds == pytest.approx(rows_left / rate)
    for figures in progress.rows.values():  # no row ends before its own bytes are copied
        assert figures.time_left_seconds >= figures.bytes_left / rate * (1 - 1e-9)


@settings(max_examples=100, deadline=None)
@given(states(), st.floats(1.0, 10_000.0))
def test_every_view_shows_the_meter_s_figures(state, now):
    view = compute_status(state, 1, now)
    progress = compute_progress(state, now, 1)
    assert view.progress == progress
    document = status_to_json(view)
    page = compute_status_document(view, [], "c", None, now)["movement"]
    for shown in (document["movement"], document["progress"], page):
        assert shown["fraction"] == progress.movement.fraction
        assert (shown["bytes_moved"], shown["bytes_to_move"]) == (progress.movement.bytes_moved,
                                                                  progress.movement.bytes_to_move)
        assert (shown["steps_done"], shown["steps_estimated"]) == (progress.movement.steps_done,
                                                                   progress.movement.steps_estimated)
        assert shown["time_left_seconds"] == progress.movement.time_left_seconds
    samples = compute_metric_samples(view, {}, {})
    assert samples["reassigner_progress_ratio"] == [((), progress.movement.fraction or 0.0)]
    assert samples["reassigner_bytes_left"] == [((), progress.movement.bytes_left)]
    if progress.movement.time_left_seconds is not None:
        assert samples["reassigner_time_left_seconds"] == [((), progress.movement.time_left_seconds)]
    for row, shown in zip(view.reassignments, document["reassignments"]):
        figures = progress.rows[TopicPartition(row.topic, row.partition)]
        assert (row.progress, row.bytes_moved, row.bytes_to_move, row.time_left_seconds) == (
            figures.fraction, figures.bytes_moved, figures.bytes_to_move, figures.time_left_seconds)
        assert shown["progress"] == figures.fraction


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 50 * MB), TARGET, st.integers(0, 80 * MB))
def test_a_copy_in_flight_counts_what_it_holds(size, target, copied):
    if set(target) == set(ORIGINAL):
        target = (4, 2, 3)
    tp = TopicPartition("t", 0)
    before = compute_progress(build_state([(size, target, True)]), 10.0)
    during = compute_progress(build_state([(size, target, True)], copies={tp: copied}), 10.0)
    step_adds = len(build_state([(size, target, True)]).reassignments[tp].in_flight.step.adding)
    assert during.rows[tp].bytes_moved - before.rows[tp].bytes_moved == step_adds * min(copied, size)
    assert during.copying_bytes == step_adds * min(copied, size)


def test_the_issue_s_header_reads_one_percentage_with_counts_beside_it():
    """Figures as the operator saw them: 18 partitions, the bar by bytes; partitions and steps
    are counts, no second percentage."""
    specs = [(10 * MB, (4, 2, 3), n < 3) for n in range(6)]
    tp = TopicPartition("t", 0)
    state = build_state(specs, ReplicationMeter(0, 30 * MB, 12, 24, 120 * MB), copies={tp: 5 * MB})
    view = compute_status(state, 1, 10.0)
    movement = view.movement
    assert (movement.partitions_done, movement.partitions_total) == (12, 18)
    assert movement.bytes_to_move == 180 * MB and movement.bytes_moved == 125 * MB  # 5 MB of a copy in flight
    assert movement.fraction == pytest.approx(125 / 180)
    rows = {(r.topic, r.partition): r for r in view.reassignments}
    assert rows[("t", 0)].bytes_moved == 5 * MB and rows[("t", 0)].progress == pytest.approx(0.5)
    # 35 MB copied in 10 s: 3.5 MB/s, 3 steps in flight share it; the waiting ones follow.
    assert view.progress.rate_bytes_per_second == pytest.approx(3.5 * MB)
    assert movement.time_left_seconds == max(r.time_left_seconds for r in view.reassignments)
    assert rows[("t", 5)].time_left_seconds > rows[("t", 1)].time_left_seconds


def test_before_any_byte_is_seen_copied_the_throttle_rate_times_the_receiving_brokers_is_assumed():
    state = build_state([(10 * MB, (4, 2, 3), True), (10 * MB, (5, 2, 3), True)], ReplicationMeter(since_ms=0))
    assert compute_progress(state, 10.0).rate_bytes_per_second is None
    assert compute_progress(state, 10.0).movement.time_left_seconds is None
    assumed = compute_progress(state, 10.0, 1, throttle_bytes_per_sec=MB)
    assert assumed.rate_source == "throttle" and assumed.rate_bytes_per_second == 2 * MB  # brokers 4 and 5
    assert assumed.movement.time_left_seconds == pytest.approx(10.0)  # each copies 10 MB at 1 MB/s


def test_finish_times_are_one_pipe_in_flight_first_least_left_first():
    # At 2 MB/s: the 1 MB in flight ends after 0.5 s, the 3 MB in flight after 4 MB (2 s), the
    # waiting 2 MB after all 6 MB (3 s).
    assert compute_finish_times([(3 * MB, True), (1 * MB, True), (2 * MB, False)], 2 * MB) == (2.0, 0.5, 3.0)
    assert compute_finish_times([(MB, False), (MB, False)], MB) == (1.0, 2.0)  # nothing in flight: one share
    assert compute_finish_times([(MB, True), (0, True)], None) == (None, 0.0)
    assert compute_finish_times([], MB) == ()


def test_rows_and_header_in_the_status_table_agree(capsys):
    from rich.console import Console

    from reassigner.operator.tables import print_status

    tp = TopicPartition("t", 0)
    state = build_state([(10 * MB, (4, 2, 3), True), (10 * MB, (4, 2, 3), False)],
                        ReplicationMeter(0, 0, 1, 2, 10 * MB), copies={tp: 4 * MB})
    view = compute_status(state, 1, 10.0)
    console = Console(width=250, record=True)
    print_status(view, console)
    text = console.export_text()
    movement = view.movement
    assert f"{movement.partitions_done} of {movement.partitions_total} partitions, " \
           f"{movement.steps_done} of {movement.steps_estimated} steps done" in text
    assert f"{round(movement.fraction * 100)} %" in text
    assert movement.bytes_moved == 14 * MB  # the finished 10 MB and 4 MB of the copy in flight


def test_before_a_step_completed_the_early_observed_rate_is_not_trusted_over_the_throttle():
    """Regression (local stack, bench_eta_error): at 1 % done the rate from the first copies'
    sizes (the watcher's lag behind) over the seconds since they began said an hour for a
    movement that took 34 s. Until a step completed, the throttle estimate wins; without a
    throttle the early figure is all there is."""
    state = build_state([(10 * MB, (4, 2, 3), True)], ReplicationMeter(since_ms=0),
                        copies={TopicPartition("t", 0): MB // 10})
    early = compute_progress(state, 10.0)
    assert early.copying_bytes == MB // 10
    assert early.rate_source == "observed" and early.rate_bytes_per_second == pytest.approx(MB / 100)
    throttled = compute_progress(state, 10.0, 1, throttle_bytes_per_sec=MB)
    assert throttled.rate_source == "throttle" and throttled.rate_bytes_per_second == MB
    done_one = build_state([(10 * MB, (4, 2, 3), True)], ReplicationMeter(since_ms=0, bytes_copied=5 * MB),
                           copies={TopicPartition("t", 0): MB // 10})
    trusted = compute_progress(done_one, 10.0, 1, throttle_bytes_per_sec=MB)
    assert trusted.rate_source == "observed" and trusted.rate_bytes_per_second == pytest.approx(5.1 * MB / 10)
