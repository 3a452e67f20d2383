"""The invariant monitor's judgement of one sample and its per-scene peaks, from Admin answers
shaped as kafka-python returns them (the real cluster is sampled in the scenario suite)."""

from __future__ import annotations

import time

from reassigner.dev.harness.monitor import InvariantMonitor


class AdminAnswers:
    """What kafka-python's KafkaAdminClient answers, for one moment of a 3-broker cluster."""

    def __init__(self, moving: dict, leaders: dict[tuple[str, int], int], isr=(1, 2, 3), fenced=()) -> None:
        self.moving = moving
        self.leaders = leaders
        self.isr = list(isr)
        self.fenced = set(fenced)

    def describe_cluster(self):
        return {"brokers": [{"broker_id": b, "is_fenced": b in self.fenced} for b in (1, 2, 3)]}

    def list_partition_reassignments(self):
        return self.moving

    def describe_topics(self):
        return [{"name": "orders", "partitions": [
            {"partition_index": p, "leader_id": leader, "replica_nodes": [1, 2, 3], "isr_nodes": self.isr}
            for (_, p), leader in sorted(self.leaders.items())]}]


def moving(*targets: tuple[int, list[int]]) -> dict:
    return {("orders", p): {"replicas": replicas, "removing_replicas": [], "adding_replicas": []}
            for p, replicas in targets}


def monitor() -> InvariantMonitor:
    return InvariantMonitor("unused:9092", max_partition_movements=2, max_leader_movements=1,
                            min_isr={"orders": 2})


LEADERS = {("orders", 0): 1, ("orders", 1): 2, ("orders", 2): 3}


def test_peaks_since_count_only_the_samples_after_the_mark():
    watcher = monitor()
    watcher.sample(AdminAnswers(moving((0, [2, 3, 4]), (1, [2, 1, 4])), LEADERS))  # 2 moving, 1 leader move
    mark = time.time()
    time.sleep(0.01)  # the next sample is taken strictly after the mark
    watcher.sample(AdminAnswers(moving((2, [3, 1, 4])), LEADERS))  # 1 moving, leader stays
    assert watcher.peaks_since(0) == (2, 1)
    assert watcher.peaks_since(mark) == (1, 0)
    assert watcher.peaks_since(time.time() + 1) == (0, 0)
    assert watcher.report.violations == []


def test_more_than_the_limits_at_once_is_a_violation():
    watcher = monitor()
    watcher.sample(AdminAnswers(moving((0, [2, 3, 4]), (1, [3, 1, 4]), (2, [3, 1, 4])), LEADERS))
    assert watcher.peaks_since(0) == (3, 2)
    assert any("3 partitions moving > P = 2" in v for v in watcher.report.violations)
    assert any("2 leader movements > L = 1" in v for v in watcher.report.violations)


def test_under_min_isr_while_reassigning_counts_only_with_every_broker_live():
    watcher = monitor()
    watcher.sample(AdminAnswers(moving((0, [1, 2, 3])), {("orders", 0): 1}, isr=[1]))
    assert [v.split(" ", 1)[1] for v in watcher.report.violations] == [
        "orders-0 under min ISR (1 < 2) while reassigning, every replica live"]
    fenced = monitor()  # broker 3 fenced: under min ISR because of a failure, not of the step
    fenced.sample(AdminAnswers(moving((0, [1, 2, 3])), {("orders", 0): 1}, isr=[1], fenced=[3]))
    assert fenced.report.violations == []


def test_a_leaderless_partition_moves_leadership_and_one_not_yet_described_only_counts():
    watcher = monitor()
    watcher.sample(AdminAnswers(moving((0, [1, 2, 4]), (5, [2, 3, 4])), {("orders", 0): -1}, isr=[]))
    assert watcher.peaks_since(0) == (2, 1)
    assert not any("orders-5" in v for v in watcher.report.violations)


def test_a_target_changing_between_two_close_samples_is_a_second_step():
    watcher = monitor()
    watcher.sample(AdminAnswers(moving((0, [2, 3, 4])), LEADERS))
    watcher.sample(AdminAnswers(moving((0, [4, 3, 2])), LEADERS))  # the same set: the same step
    assert watcher.report.violations == [] and watcher.report.overlap_checks == 1
    watcher.sample(AdminAnswers(moving((0, [2, 3, 5])), LEADERS))
    assert [v.split(" ", 1)[1] for v in watcher.report.violations] == [
        "orders-0: a second step (to [2, 3, 5]) while the step to [2, 3, 4] was in flight"]
